//! Replicated partitions with three real `rill` processes (one shard each)
//! and librdkafka: RF=3, `min.insync.replicas=2`, an idempotent acks=all
//! producer, while brokers are killed, stopped and restarted. Every
//! acknowledged message must be read back exactly once, in order.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureRecord;
use rill_tests::agreement::assert_replicas_agree;
use rill_tests::cluster::{find_coordinator as coordinator, wait_for, Cluster};
use rill_tests::paced::PacedWrites;
use rill_tests::replicated::{
    all_isrs, idempotent_producer, partition_view, produce_numbers, read_numbers,
};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// An election, a session expiry (2.5 s) and a catch-up on a loaded
/// two-core machine.
const SETTLE: Duration = Duration::from_secs(60);

/// Partition 0's (leader, sorted replicas, sorted ISR) as `bootstrap` reports it.
fn partition_state(bootstrap: &str, topic: &str) -> Option<(i32, Vec<i32>, Vec<i32>)> {
    partition_view(bootstrap, topic).map(|view| (view.leader, view.sorted_replicas(), view.isr))
}

/// The leader's `rill_follower_lag_at_leader_messages` of topic
/// `replicated`, one per follower.
fn follower_lags(metrics: &str) -> Vec<i64> {
    metrics
        .lines()
        .filter(|line| {
            line.starts_with("rill_follower_lag_at_leader_messages{topic=\"replicated\"")
        })
        .map(|line| {
            (line.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("a number in {line}"))
        })
        .collect()
}

#[test]
fn a_killed_leader_loses_nothing_acknowledged_and_a_stopped_follower_rejoins() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "replicated",
        1,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let (leader, replicas, _) = wait_for("all three in the ISR", SETTLE, || {
        let state = partition_state(&bootstrap, "replicated")?;
        (state.2 == vec![1, 2, 3]).then_some(state)
    });
    assert_eq!(replicas, vec![1, 2, 3]);

    let producer = idempotent_producer(&bootstrap);
    let mut acknowledged = runtime.block_on(produce_numbers(&producer, "replicated", 0..100));
    assert_eq!(
        acknowledged.len(),
        100,
        "all acknowledged with a healthy ISR"
    );

    // The leader dies with writes in flight: a new one comes from the ISR
    // and the producer goes on.
    let records: Vec<_> = (100..200u32)
        .map(|v| (None, v.to_string().into_bytes()))
        .collect();
    let writes = {
        let _context = runtime.enter();
        let pace = Duration::from_millis(20);
        PacedWrites::start(
            producer.clone(),
            "replicated",
            Some(0),
            records.clone(),
            pace,
        )
    };
    writes.wait_acked(20, SETTLE);
    assert!(writes.sent() < records.len(), "the kill lands mid-write");
    cluster.node(leader).kill();
    let acked = runtime.block_on(writes.complete());
    acknowledged.extend(acked.iter().map(|&(i, _, _)| 100 + i as u32));
    let (new_leader, _, isr) = wait_for("a new leader without the dead one", SETTLE, || {
        let survivor = (1..=3).find(|&n| n != leader)?;
        let state = partition_state(&cluster.node(survivor).bootstrap(), "replicated")?;
        (state.0 != leader && state.0 > 0 && !state.2.contains(&leader)).then_some(state)
    });
    assert!(isr.len() >= 2, "min.insync.replicas holds: {isr:?}");

    // The old leader comes back as a follower, catches up and rejoins.
    cluster.node(leader).restart();
    wait_for("the restarted broker back in the ISR", SETTLE, || {
        let state = partition_state(&cluster.node(new_leader).bootstrap(), "replicated")?;
        (state.2 == vec![1, 2, 3]).then_some(())
    });

    // A follower stops: it is fenced and leaves the ISR; acks go on with two.
    let follower = (1..=3).find(|&n| n != new_leader).expect("a follower");
    let pid = cluster.node(follower).pid().expect("pid") as i32;
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(pid, libc::SIGSTOP);
    }
    wait_for("the stopped follower out of the ISR", SETTLE, || {
        let state = partition_state(&cluster.node(new_leader).bootstrap(), "replicated")?;
        (!state.2.contains(&follower)).then_some(())
    });
    acknowledged.extend(runtime.block_on(produce_numbers(&producer, "replicated", 200..300)));
    // SAFETY: as above.
    unsafe {
        libc::kill(pid, libc::SIGCONT);
    }
    wait_for("the resumed follower back in the ISR", SETTLE, || {
        let state = partition_state(&cluster.node(new_leader).bootstrap(), "replicated")?;
        (state.2 == vec![1, 2, 3]).then_some(())
    });
    // Every follower caught up: the leader sees no lag (nothing is being
    // written now).
    wait_for("every follower's lag at 0", SETTLE, || {
        let metrics = rill_tests::http_get(cluster.node(new_leader).admin_addr, "/metrics");
        let lags = follower_lags(&metrics);
        (lags.len() == 2 && lags.iter().all(|&lag| lag == 0)).then_some(())
    });
    let metrics = rill_tests::http_get(cluster.node(new_leader).admin_addr, "/metrics");
    for counter in [
        "rill_isr_shrinks_total",
        "rill_isr_expands_total",
        "rill_leader_elections_total",
    ] {
        let value: u64 = metrics
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{counter} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{counter} missing:\n{metrics}"));
        assert!(value >= 1, "{counter} counted the changes: {value}");
    }
    // The leader reports each follower's distance from its log end.
    assert_eq!(
        follower_lags(&metrics),
        vec![0, 0],
        "one line per follower:\n{metrics}"
    );
    // The followers fetch in incremental fetch sessions (KIP-227): the
    // leader holds one per follower fetcher.
    assert!(
        cluster.node(new_leader).metric_sum("rill_fetch_sessions") >= 2,
        "the followers' fetch sessions:\n{metrics}"
    );

    assert!(
        acknowledged.len() >= 250,
        "most writes acknowledged: {}",
        acknowledged.len()
    );
    let read = read_numbers(&bootstrap, "replicated", acknowledged.len());
    let mut deduplicated = read.clone();
    deduplicated.dedup();
    assert_eq!(deduplicated, read, "no record twice (idempotent producer)");
    let mut expected = acknowledged.clone();
    expected.sort_unstable();
    let mut sorted = read.clone();
    sorted.sort_unstable();
    for value in &expected {
        assert!(
            sorted.binary_search(value).is_ok(),
            "acknowledged {value} was lost"
        );
    }
    assert!(read.windows(2).all(|w| w[0] < w[1]), "in order: {read:?}");
}

#[test]
fn with_two_of_three_down_nothing_is_acknowledged_and_writes_resume_when_one_returns() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "quorum-writes",
        1,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let (leader, _, _) = wait_for("all three in the ISR", SETTLE, || {
        let state = partition_state(&bootstrap, "quorum-writes")?;
        (state.2 == vec![1, 2, 3]).then_some(state)
    });
    let producer = idempotent_producer(&bootstrap);
    let first = runtime.block_on(produce_numbers(&producer, "quorum-writes", 0..20));
    assert_eq!(first.len(), 20);
    let down: Vec<i32> = (1..=3).filter(|&n| n != leader).collect();
    for &node in &down {
        cluster.node(node).kill();
    }
    // The metadata quorum lost its majority too (the three are also its
    // voters), so nobody can shrink the ISR: as in Kafka, the leader holds
    // acks=all writes until they time out, and acknowledges none of them.
    let strict = rill_tests::kafka::producer(
        &cluster.node(leader).bootstrap(),
        &[
            ("acks", "all"),
            ("message.timeout.ms", "3000"),
            ("retries", "0"),
        ],
    );
    let payload = String::from("1000");
    let record: FutureRecord<'_, (), String> = FutureRecord::to("quorum-writes")
        .payload(&payload)
        .partition(0);
    let refused = runtime.block_on(strict.send(record, Duration::from_secs(10)));
    assert!(
        refused.is_err(),
        "acks=all with one live replica of three is not acknowledged: {refused:?}"
    );
    // One comes back: it catches up, rejoins, and writes resume.
    cluster.node(down[0]).restart();
    wait_for("two in the ISR again", SETTLE, || {
        let state = partition_state(&cluster.node(leader).bootstrap(), "quorum-writes")?;
        (state.2.len() == 2).then_some(())
    });
    let later = runtime.block_on(produce_numbers(&producer, "quorum-writes", 20..40));
    assert_eq!(later.len(), 20);
    // The unacknowledged write may or may not have been committed since.
    let bootstrap = cluster.node(leader).bootstrap();
    let mut read = read_numbers(&bootstrap, "quorum-writes", 40);
    if read.contains(&1000) {
        read = read_numbers(&bootstrap, "quorum-writes", 41);
    }
    read.retain(|&v| v != 1000);
    assert_eq!(read, (0..40).collect::<Vec<u32>>());
}

#[test]
fn a_rolling_restart_under_load_loses_nothing_and_the_group_keeps_consuming() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "rolling",
        3,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let healthy = |cluster: &mut Cluster| {
        let bootstrap = cluster.bootstrap();
        wait_for("every partition's ISR whole", SETTLE, || {
            let isrs = all_isrs(&bootstrap, "rolling")?;
            (isrs.len() == 3 && isrs.iter().all(|isr| *isr == vec![1, 2, 3])).then_some(())
        });
    };
    healthy(&mut cluster);

    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(Vec::<u32>::new()));
    let producing = {
        let (stop, acknowledged, bootstrap) =
            (stop.clone(), acknowledged.clone(), bootstrap.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().expect("runtime");
            let producer = idempotent_producer(&bootstrap);
            let mut next = 0u32;
            while !stop.load(Ordering::Acquire) {
                let payload = next.to_string();
                let key = (next % 7).to_string();
                let record: FutureRecord<'_, String, String> =
                    FutureRecord::to("rolling").payload(&payload).key(&key);
                if runtime
                    .block_on(producer.send(record, Duration::from_secs(60)))
                    .is_ok()
                {
                    acknowledged.lock().expect("lock").push(next);
                }
                next += 1;
            }
        })
    };
    let consumed = Arc::new(Mutex::new(std::collections::BTreeSet::<u32>::new()));
    let stop_consuming = Arc::new(AtomicBool::new(false));
    let consuming = {
        let (stop, consumed, bootstrap) =
            (stop_consuming.clone(), consumed.clone(), bootstrap.clone());
        std::thread::spawn(move || {
            use rdkafka::Message;
            let consumer: BaseConsumer = rill_tests::kafka::client_config(&bootstrap)
                .set("group.id", "rolling-readers")
                .set("auto.offset.reset", "earliest")
                .set("enable.auto.commit", "true")
                .set("auto.commit.interval.ms", "500")
                .set("session.timeout.ms", "10000")
                .create()
                .expect("consumer");
            consumer.subscribe(&["rolling"]).expect("subscribe");
            while !stop.load(Ordering::Acquire) {
                if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
                    if let Some(Ok(text)) = message.payload_view::<str>() {
                        if let Ok(value) = text.parse() {
                            consumed.lock().expect("lock").insert(value);
                        }
                    }
                }
            }
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    for node in 1..=3 {
        cluster.node(node).stop();
        cluster.node(node).restart();
        healthy(&mut cluster);
    }
    std::thread::sleep(Duration::from_secs(2));
    let written = acknowledged.lock().expect("lock").len();
    assert!(
        written > 20,
        "the producer made progress through the restarts: {written}"
    );
    // Stop producing; the group, whose coordinator restarted with every
    // broker, reads on until it has everything acknowledged.
    stop.store(true, Ordering::Release);
    producing.join().expect("producer thread");
    let acknowledged = acknowledged.lock().expect("lock").clone();
    wait_for(
        "the group to read every acknowledged record",
        SETTLE,
        || {
            let seen = consumed.lock().expect("lock");
            acknowledged.iter().all(|v| seen.contains(v)).then_some(())
        },
    );
    stop_consuming.store(true, Ordering::Release);
    consuming.join().expect("consumer thread");
    // And an assigned consumer reads each of them exactly once.
    let total_read =
        rill_tests::kafka::consume_all(&bootstrap, "rolling", 3, acknowledged.len(), SETTLE, &[]);
    let mut values: Vec<u32> = total_read
        .iter()
        .filter_map(|r| String::from_utf8(r.value.clone()?).ok()?.parse().ok())
        .collect();
    let read_count = values.len();
    values.sort_unstable();
    values.dedup();
    assert_eq!(
        values.len(),
        read_count,
        "no record twice (idempotent producer)"
    );
    for value in &acknowledged {
        assert!(
            values.binary_search(value).is_ok(),
            "acknowledged {value} was lost"
        );
    }
    // Every broker is back: all replicas agree, internal topics included.
    assert_replicas_agree(&cluster.data_dirs(&[]), SETTLE);
}

/// The broker coordinating `transactional_id` (FindCoordinator, key type 1).
fn transaction_coordinator(bootstrap: &str, transactional_id: &str) -> Option<i32> {
    coordinator(bootstrap, transactional_id, 1)
}

#[test]
fn transactions_go_on_when_their_coordinator_dies() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "txn-failover",
        1,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let producer: BaseProducer = rill_tests::kafka::client_config(&bootstrap)
        .set("transactional.id", "failover-tx")
        .set("message.timeout.ms", "60000")
        .set("transaction.timeout.ms", "60000")
        .create()
        .expect("producer");
    let timeout = Duration::from_secs(60);
    producer
        .init_transactions(timeout)
        .expect("init_transactions");
    let send = |producer: &BaseProducer, values: std::ops::Range<u32>| {
        for value in values {
            let payload = value.to_string();
            let record: BaseRecord<'_, (), String> = BaseRecord::to("txn-failover")
                .payload(&payload)
                .partition(0);
            producer.send(record).map_err(|(e, _)| e).expect("send");
        }
    };
    producer.begin_transaction().expect("begin");
    send(&producer, 0..10);
    producer.commit_transaction(timeout).expect("commit");
    let coordinator = wait_for("the transaction coordinator", SETTLE, || {
        transaction_coordinator(&bootstrap, "failover-tx")
    });
    // The coordinator dies with a transaction open: its partition added
    // and half its records acknowledged.
    producer.begin_transaction().expect("begin");
    send(&producer, 10..15);
    producer.flush(timeout).expect("flush");
    cluster.node(coordinator).kill();
    // The coordinator's __transaction_state partition gets a new leader,
    // which loads the open transaction: the producer finishes it.
    send(&producer, 15..20);
    producer
        .commit_transaction(timeout)
        .expect("commit after the failover");
    let survivor = (1..=3).find(|&n| n != coordinator).expect("a survivor");
    let read = rill_tests::kafka::consume_all(
        &cluster.node(survivor).bootstrap(),
        "txn-failover",
        1,
        20,
        SETTLE,
        &[("isolation.level", "read_committed")],
    );
    let values: Vec<u32> = read
        .iter()
        .filter_map(|r| String::from_utf8(r.value.clone()?).ok()?.parse().ok())
        .collect();
    assert_eq!(values, (0..20).collect::<Vec<u32>>());
    // The two survivors agree (the killed coordinator may hold an
    // unreplicated tail until it returns).
    assert_replicas_agree(&cluster.data_dirs(&[coordinator]), SETTLE);
}

#[test]
fn offsets_sent_to_a_transaction_commit_when_its_group_has_another_coordinator() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::{Offset, TopicPartitionList};
    let cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for topic in ["eos-in", "eos-out"] {
        runtime.block_on(rill_tests::kafka::create_topic_replicated(
            &bootstrap,
            topic,
            1,
            3,
            &[],
        ));
    }
    let timeout = Duration::from_secs(60);
    // Both internal topics exist once one transactional producer started
    // and one group was looked up.
    let warm_up: BaseProducer = rill_tests::kafka::client_config(&bootstrap)
        .set("transactional.id", "eos-warm-up")
        .create()
        .expect("producer");
    warm_up
        .init_transactions(timeout)
        .expect("init_transactions");
    wait_for("a group coordinator", SETTLE, || {
        coordinator(&bootstrap, "eos-g0", 0)
    });
    // A group and a transactional id whose coordinators are two brokers.
    let (group, transactional_id) = wait_for("coordinators on two brokers", SETTLE, || {
        (0..40).find_map(|i| {
            let group = format!("eos-g{i}");
            let transactional_id = format!("eos-t{i}");
            let g = coordinator(&bootstrap, &group, 0)?;
            let t = coordinator(&bootstrap, &transactional_id, 1)?;
            (g != t).then_some((group, transactional_id))
        })
    });

    let producer: BaseProducer = rill_tests::kafka::client_config(&bootstrap)
        .set("transactional.id", &transactional_id)
        .set("transaction.timeout.ms", "60000")
        .create()
        .expect("producer");
    producer
        .init_transactions(timeout)
        .expect("init_transactions");
    let consumer: BaseConsumer = rill_tests::kafka::client_config(&bootstrap)
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let consumed_up_to = |offset: i64| {
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset("eos-in", 0, Offset::Offset(offset))
            .expect("offset");
        offsets
    };
    // Two transactions in a row, each writing output and the consumed
    // offset: the second can only begin once the first completed, which
    // needs the group's coordinator to take the first one's marker.
    for (round, offset) in [(0u32, 10i64), (1, 20)] {
        producer.begin_transaction().expect("begin");
        let payload = round.to_string();
        let record: BaseRecord<'_, (), String> =
            BaseRecord::to("eos-out").payload(&payload).partition(0);
        producer.send(record).map_err(|(e, _)| e).expect("send");
        let metadata = consumer.group_metadata().expect("group metadata");
        producer
            .send_offsets_to_transaction(&consumed_up_to(offset), &metadata, timeout)
            .expect("send_offsets_to_transaction");
        producer.commit_transaction(timeout).expect("commit");
        let committed = wait_for(
            "the transaction's offset committed in the group",
            SETTLE,
            || {
                let mut wanted = TopicPartitionList::new();
                wanted.add_partition("eos-in", 0);
                let committed = consumer
                    .committed_offsets(wanted, Duration::from_secs(5))
                    .ok()?;
                let offset_now = committed.elements().first()?.offset();
                (offset_now == Offset::Offset(offset)).then_some(offset_now)
            },
        );
        assert_eq!(committed, Offset::Offset(offset));
    }
    // An aborted transaction's offset is not committed.
    producer.begin_transaction().expect("begin");
    let metadata = consumer.group_metadata().expect("group metadata");
    producer
        .send_offsets_to_transaction(&consumed_up_to(99), &metadata, timeout)
        .expect("send_offsets_to_transaction");
    producer.abort_transaction(timeout).expect("abort");
    producer
        .begin_transaction()
        .expect("a transaction after the abort");
    producer
        .commit_transaction(timeout)
        .expect("commit an empty one");
    let mut wanted = TopicPartitionList::new();
    wanted.add_partition("eos-in", 0);
    let committed = consumer
        .committed_offsets(wanted, Duration::from_secs(10))
        .expect("committed offsets");
    assert_eq!(
        committed.elements().first().map(|e| e.offset()),
        Some(Offset::Offset(20)),
        "the aborted transaction's offset 99 was dropped"
    );
    let read = rill_tests::kafka::consume_all(
        &bootstrap,
        "eos-out",
        1,
        2,
        SETTLE,
        &[("isolation.level", "read_committed")],
    );
    assert_eq!(read.len(), 2, "both committed transactions' output");
    assert_replicas_agree(&cluster.data_dirs(&[]), SETTLE);
}

/// The earliest offset of partition 0 of `topic` as `bootstrap` answers it.
fn log_start(bootstrap: &str, topic: &str) -> Option<i64> {
    let consumer: BaseConsumer = rill_tests::kafka::client_config(bootstrap).create().ok()?;
    let (low, _) = consumer
        .fetch_watermarks(topic, 0, Duration::from_secs(5))
        .ok()?;
    Some(low)
}

#[test]
fn a_follower_behind_the_leaders_log_start_starts_over_there_and_rejoins() {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::{Offset, TopicPartitionList};
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "trimmed",
        1,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let leader = wait_for("all three in the ISR", SETTLE, || {
        let state = partition_state(&bootstrap, "trimmed")?;
        (state.2 == vec![1, 2, 3]).then_some(state.0)
    });
    // A follower goes down with an empty log: it comes back with no epoch
    // to ask about and a fetch offset (0) the leader no longer has.
    let follower = (1..=3).find(|&n| n != leader).expect("a follower");
    cluster.node(follower).kill();
    let leader_bootstrap = cluster.node(leader).bootstrap();
    wait_for("the dead follower out of the ISR", SETTLE, || {
        let state = partition_state(&leader_bootstrap, "trimmed")?;
        (!state.2.contains(&follower)).then_some(())
    });
    let producer = idempotent_producer(&leader_bootstrap);
    let acknowledged = runtime.block_on(produce_numbers(&producer, "trimmed", 0..50));
    assert_eq!(acknowledged.len(), 50);
    let admin: AdminClient<DefaultClientContext> =
        rill_tests::kafka::client_config(&leader_bootstrap)
            .create()
            .expect("admin client");
    let mut cut = TopicPartitionList::new();
    cut.add_partition_offset("trimmed", 0, Offset::Offset(40))
        .expect("offset");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let deleted = runtime
        .block_on(admin.delete_records(&cut, &options))
        .expect("DeleteRecords answered");
    let answer = deleted.elements_for_topic("trimmed");
    assert!(
        answer.first().is_some_and(|p| p.error().is_ok()),
        "{deleted:?}"
    );
    assert_eq!(log_start(&leader_bootstrap, "trimmed"), Some(40));

    cluster.node(follower).restart();
    wait_for("the follower back in the ISR", SETTLE, || {
        let state = partition_state(&leader_bootstrap, "trimmed")?;
        (state.2 == vec![1, 2, 3]).then_some(())
    });
    // It holds what the leader holds: read from it alone once the leader
    // is gone, and the records from the log start on are all there.
    acknowledged_after_trim(&mut cluster, leader, &runtime);
}

/// Kills the old leader, waits for a leader elected from the ISR, and
/// reads 40..50 back: every replica started over at the log start.
fn acknowledged_after_trim(cluster: &mut Cluster, leader: i32, runtime: &tokio::runtime::Runtime) {
    cluster.node(leader).kill();
    let survivor = (1..=3).find(|&n| n != leader).expect("a survivor");
    let survivor_bootstrap = cluster.node(survivor).bootstrap();
    wait_for("a new leader", SETTLE, || {
        let state = partition_state(&survivor_bootstrap, "trimmed")?;
        (state.0 > 0 && state.0 != leader).then_some(())
    });
    let _ = runtime;
    assert_eq!(log_start(&survivor_bootstrap, "trimmed"), Some(40));
    let read = read_numbers(&survivor_bootstrap, "trimmed", 10);
    assert_eq!(read, (40..50).collect::<Vec<u32>>());
}

/// Followers copy each fetched partition's records once, placed where they
/// will lie in their own segment file, so the appender writes them as they
/// lie (`rill_disk_uncopied_bytes_total` on the followers; the leader's
/// come from reading the produce requests apart). The replicas' files agree
/// batch by batch.
#[test]
fn followers_write_what_they_fetch_without_a_second_copy() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "placed",
        1,
        3,
        &[("min.insync.replicas", "3")],
    ));
    let (leader, _, _) = wait_for("all three in the ISR", SETTLE, || {
        let state = partition_state(&bootstrap, "placed")?;
        (state.2 == vec![1, 2, 3]).then_some(state)
    });
    let producer = rill_tests::kafka::producer(
        &bootstrap,
        &[
            ("acks", "all"),
            ("linger.ms", "50"),
            ("batch.size", "1000000"),
            ("compression.type", "none"),
        ],
    );
    let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..8_000u32)
        .map(|i| {
            let mut value = i.to_string().into_bytes();
            value.resize(1000, b'.');
            (None, value)
        })
        .collect();
    // One small record first, acknowledged by all three: the large batches
    // then start off a block boundary in every replica's file, where a
    // plain copy would not line up.
    let small = [(None, b"first".to_vec())];
    runtime.block_on(rill_tests::kafka::produce_all(
        &producer,
        "placed",
        &small,
        Some(0),
    ));
    runtime.block_on(rill_tests::kafka::produce_all(
        &producer,
        "placed",
        &records,
        Some(0),
    ));
    for node in (1..=3).filter(|&n| n != leader) {
        let follower = cluster.node(node);
        let written = follower.metric_sum("rill_disk_written_bytes_total");
        let uncopied = follower.metric_sum("rill_disk_uncopied_bytes_total");
        assert!(written >= 8_000_000, "node {node} wrote {written} bytes");
        assert!(
            uncopied * 2 > written,
            "node {node}: {uncopied} of {written} bytes written without a copy"
        );
    }
    let compared = assert_replicas_agree(&cluster.data_dirs(&[]), SETTLE);
    assert!(compared >= 1, "{compared} partitions compared");
}

//! Exactly-once through librdkafka against a real `rill serve`: the
//! idempotent producer across a restart, committed and aborted transactions
//! seen by read_committed and read_uncommitted consumers,
//! consume-transform-produce with offsets in the transaction, fencing of a
//! zombie producer, the coordinator's timeout abort, a crash right after
//! a commit, and consume-transform-produce offsets across a kill after the
//! commit and across a crash between PrepareCommit and forwarding the
//! offsets. The last test times transactional against plain produce and
//! reads every committed record back exactly once.

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::TopicPartitionList;
use rill_tests::kafka::{client_config, consume_all, create_topic, produce_all, producer, Rec};
use rill_tests::{data_dir, Broker};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TIMEOUT: Duration = Duration::from_secs(30);
const COMMITTED: &[(&str, &str)] = &[("isolation.level", "read_committed")];
const UNCOMMITTED: &[(&str, &str)] = &[("isolation.level", "read_uncommitted")];

fn txn_producer(bootstrap: &str, transactional_id: &str, extra: &[(&str, &str)]) -> BaseProducer {
    let mut c: ClientConfig = client_config(bootstrap);
    c.set("transactional.id", transactional_id)
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000");
    for (k, v) in extra {
        c.set(*k, *v);
    }
    let p: BaseProducer = c.create().expect("transactional producer");
    p.init_transactions(TIMEOUT).expect("init_transactions");
    p
}

/// Sends `values` round-robin over `partitions` partitions of `topic`.
fn send_values(p: &BaseProducer, topic: &str, partitions: i32, values: &[String]) {
    for (i, v) in values.iter().enumerate() {
        let partition = i as i32 % partitions;
        let mut pending = Some(v.clone());
        while let Some(value) = pending.take() {
            let record: BaseRecord<'_, (), String> =
                BaseRecord::to(topic).payload(&value).partition(partition);
            if let Err((e, _)) = p.send(record) {
                // Queue full: let deliveries drain, then retry.
                assert!(
                    matches!(
                        e.rdkafka_error_code(),
                        Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                    ),
                    "send failed: {e}"
                );
                p.poll(Duration::from_millis(10));
                pending = Some(value);
            }
        }
        p.poll(Duration::ZERO);
    }
}

fn values(rs: &[Rec]) -> BTreeSet<String> {
    rs.iter()
        .filter_map(|r| r.value.as_ref())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// Consumes until `expected` records or, once they are there, a quiet
/// second more to catch extras.
fn consume_exactly(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: usize,
    settings: &[(&str, &str)],
) -> Vec<Rec> {
    let mut got = consume_all(bootstrap, topic, partitions, expected, TIMEOUT, settings);
    if got.len() == expected {
        let extra = consume_all(
            bootstrap,
            topic,
            partitions,
            expected + 1,
            Duration::from_secs(2),
            settings,
        );
        if extra.len() > got.len() {
            got = extra;
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_is_exact_across_a_restart() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "idem", 6, &[]).await;
    let p = producer(
        &bootstrap,
        &[
            ("enable.idempotence", "true"),
            ("message.timeout.ms", "60000"),
            ("retry.backoff.ms", "50"),
        ],
    );
    let sent: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..3000)
        .map(|i| {
            (
                Some(format!("k{}", i % 37).into_bytes()),
                format!("idem-{i:05}").into_bytes(),
            )
        })
        .collect();
    produce_all(&p, "idem", &sent[..1000], None).await;
    // Restart while the next part is in flight: the producer retries what
    // was not acknowledged, and the broker drops the resends it already has.
    let in_flight = {
        let p = p.clone();
        let part = sent[1000..].to_vec();
        tokio::spawn(async move { produce_all(&p, "idem", &part, None).await })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    broker.stop();
    broker.restart();
    in_flight.await.expect("second part delivered");
    let got = consume_exactly(&bootstrap, "idem", 6, sent.len(), UNCOMMITTED);
    assert_eq!(got.len(), sent.len(), "no loss, no duplicate");
    let mut by_partition: BTreeMap<i32, Vec<&Rec>> = BTreeMap::new();
    for r in &got {
        by_partition.entry(r.partition).or_default().push(r);
    }
    for (partition, records) in by_partition {
        for pair in records.windows(2) {
            assert!(
                pair[0].value < pair[1].value,
                "produce order kept in partition {partition}"
            );
        }
    }
    let want: BTreeSet<String> = sent
        .iter()
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert_eq!(values(&got), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_sees_only_committed_transactions() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn", 3, &[]).await;
    let p = txn_producer(&bootstrap, "txn-a", &[]);
    let mut committed = BTreeSet::new();
    let mut all = BTreeSet::new();
    for t in 0..6 {
        p.begin_transaction().expect("begin");
        let batch: Vec<String> = (0..20).map(|i| format!("t{t}-m{i:02}")).collect();
        send_values(&p, "txn", 3, &batch);
        all.extend(batch.iter().cloned());
        if t % 2 == 0 {
            p.commit_transaction(TIMEOUT).expect("commit");
            committed.extend(batch);
        } else {
            p.flush(TIMEOUT).expect("flush");
            p.abort_transaction(TIMEOUT).expect("abort");
        }
    }
    let got = consume_exactly(&bootstrap, "txn", 3, committed.len(), COMMITTED);
    assert_eq!(got.len(), committed.len(), "read_committed count");
    assert_eq!(values(&got), committed);
    let got = consume_exactly(&bootstrap, "txn", 3, all.len(), UNCOMMITTED);
    assert_eq!(got.len(), all.len(), "read_uncommitted count");
    assert_eq!(values(&got), all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_producer_fences_the_first() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "fence", 1, &[]).await;
    let first = txn_producer(&bootstrap, "fence-id", &[]);
    first.begin_transaction().expect("begin");
    send_values(&first, "fence", 1, &[String::from("zombie")]);
    first.flush(TIMEOUT).expect("flush");
    let second = txn_producer(&bootstrap, "fence-id", &[]);
    let outcome = first.commit_transaction(TIMEOUT);
    let error = outcome.expect_err("the fenced producer cannot commit");
    assert!(
        error.to_string().to_lowercase().contains("fenc") || error.to_string().contains("epoch"),
        "fenced error, got {error}"
    );
    second.begin_transaction().expect("begin");
    send_values(&second, "fence", 1, &[String::from("winner")]);
    second.commit_transaction(TIMEOUT).expect("commit");
    let got = consume_exactly(&bootstrap, "fence", 1, 1, COMMITTED);
    assert_eq!(values(&got), BTreeSet::from([String::from("winner")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_is_aborted_at_its_timeout() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "slow", 1, &[]).await;
    let stuck = txn_producer(
        &bootstrap,
        "slow-id",
        &[
            ("transaction.timeout.ms", "2000"),
            ("socket.timeout.ms", "2000"),
            ("message.timeout.ms", "2000"),
        ],
    );
    stuck.begin_transaction().expect("begin");
    send_values(&stuck, "slow", 1, &[String::from("left-open")]);
    stuck.flush(TIMEOUT).expect("flush");
    // The coordinator aborts it; a later transaction is then readable.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let other = txn_producer(&bootstrap, "slow-other", &[]);
    other.begin_transaction().expect("begin");
    send_values(&other, "slow", 1, &[String::from("after")]);
    other.commit_transaction(TIMEOUT).expect("commit");
    let got = consume_exactly(&bootstrap, "slow", 1, 1, COMMITTED);
    assert_eq!(values(&got), BTreeSet::from([String::from("after")]));
    // The zombie is fenced (or told its transaction is gone).
    assert!(stuck.commit_transaction(TIMEOUT).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_move_only_when_the_transaction_commits() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "ctp-in", 1, &[]).await;
    create_topic(&bootstrap, "ctp-out", 1, &[]).await;
    let input: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..20)
        .map(|i| (None, format!("in-{i:02}").into_bytes()))
        .collect();
    produce_all(&producer(&bootstrap, &[]), "ctp-in", &input, Some(0)).await;

    let mut c = client_config(&bootstrap);
    c.set("group.id", "ctp-group")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed");
    let consumer: BaseConsumer = c.create().expect("consumer");
    consumer.subscribe(&["ctp-in"]).expect("subscribe");
    let p = txn_producer(&bootstrap, "ctp-id", &[]);
    let committed_offset = |consumer: &BaseConsumer| -> i64 {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition("ctp-in", 0);
        let got = consumer
            .committed_offsets(tpl, TIMEOUT)
            .expect("OffsetFetch (needs the group coordinator)");
        match got.find_partition("ctp-in", 0).map(|e| e.offset()) {
            Some(rdkafka::Offset::Offset(o)) => o,
            _ => -1,
        }
    };
    for (round, commit) in [(0, true), (1, false)] {
        let mut read = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        while read.len() < 10 && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(200)) {
                let m = m.expect("consume");
                read.push((m.offset(), m.payload().map(|v| v.to_vec())));
            }
        }
        assert_eq!(read.len(), 10, "round {round} read");
        p.begin_transaction().expect("begin");
        let out: Vec<String> = read.iter().map(|(o, _)| format!("out-of-{o}")).collect();
        send_values(&p, "ctp-out", 1, &out);
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset("ctp-in", 0, rdkafka::Offset::Offset(read[9].0 + 1))
            .expect("offset");
        let metadata = consumer.group_metadata().expect("group metadata");
        p.send_offsets_to_transaction(&offsets, &metadata, TIMEOUT)
            .expect("send_offsets_to_transaction");
        if commit {
            p.commit_transaction(TIMEOUT).expect("commit");
            assert_eq!(committed_offset(&consumer), 10, "commit moves the offset");
        } else {
            p.flush(TIMEOUT).expect("flush");
            p.abort_transaction(TIMEOUT).expect("abort");
            assert_eq!(committed_offset(&consumer), 10, "abort leaves the offset");
        }
    }
    let got = consume_exactly(&bootstrap, "ctp-out", 1, 10, COMMITTED);
    assert_eq!(got.len(), 10, "only the committed round is visible");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_commit_keeps_the_transaction() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "crash", 2, &[]).await;
    let p = txn_producer(
        &bootstrap,
        "crash-id",
        &[
            ("transaction.timeout.ms", "5000"),
            ("socket.timeout.ms", "5000"),
            ("message.timeout.ms", "5000"),
        ],
    );
    p.begin_transaction().expect("begin");
    let batch: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
    send_values(&p, "crash", 2, &batch);
    p.commit_transaction(TIMEOUT).expect("commit");
    // A second transaction, in the log but not committed when the broker
    // dies (the window between prepare and markers has its own test with a
    // fault point, `ctp_offsets_survive_a_crash_between_prepare_and_forward`):
    // it is aborted, never half visible.
    p.begin_transaction().expect("begin");
    let racing: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    send_values(&p, "crash", 2, &racing);
    p.flush(TIMEOUT).expect("flush");
    broker.kill();
    drop(p);
    broker.restart();
    // A later committed transaction proves the stable offset moved past both.
    let later = txn_producer(&bootstrap, "crash-later", &[]);
    later.begin_transaction().expect("begin");
    send_values(
        &later,
        "crash",
        2,
        &[String::from("later-0"), String::from("later-1")],
    );
    later
        .commit_transaction(TIMEOUT)
        .expect("commit after restart");
    let mut want: BTreeSet<String> = batch.into_iter().collect();
    want.insert(String::from("later-0"));
    want.insert(String::from("later-1"));
    let got = consume_exactly(&bootstrap, "crash", 2, want.len(), COMMITTED);
    let seen = values(&got);
    assert_eq!(
        seen, want,
        "committed records survive; the open one is aborted"
    );
    // read_uncommitted sees the aborted records too: they were acknowledged
    // (the flush) before the kill, so they are in the log.
    let uncommitted = consume_all(
        &bootstrap,
        "crash",
        2,
        want.len() + racing.len(),
        Duration::from_secs(30),
        UNCOMMITTED,
    );
    let mut everything = want.clone();
    everything.extend(racing.iter().cloned());
    assert_eq!(values(&uncommitted), everything);
}

/// Consume-transform-produce set-up for the crash tests: `{tag}-in` holds 20
/// records; a consumer of group `{tag}-group` reads the first 10, and a
/// transactional producer writes one output record per input to
/// `{tag}-out` and sends offset 10 to the transaction, which is left open
/// for the caller to commit.
async fn open_ctp_transaction(
    bootstrap: &str,
    tag: &str,
    producer_settings: &[(&str, &str)],
) -> (BaseConsumer, BaseProducer) {
    let (input, output, group) = (
        format!("{tag}-in"),
        format!("{tag}-out"),
        format!("{tag}-group"),
    );
    create_topic(bootstrap, &input, 1, &[]).await;
    create_topic(bootstrap, &output, 1, &[]).await;
    let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..20)
        .map(|i| (None, format!("in-{i:02}").into_bytes()))
        .collect();
    produce_all(&producer(bootstrap, &[]), &input, &records, Some(0)).await;
    let mut c = client_config(bootstrap);
    c.set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed");
    let consumer: BaseConsumer = c.create().expect("consumer");
    consumer.subscribe(&[input.as_str()]).expect("subscribe");
    let mut read = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while read.len() < 10 && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            read.push(m.expect("consume").offset());
        }
    }
    assert_eq!(read, (0..10).collect::<Vec<i64>>(), "the first 10 inputs");
    let p = txn_producer(bootstrap, &format!("{tag}-id"), producer_settings);
    p.begin_transaction().expect("begin");
    let out: Vec<String> = read.iter().map(|o| format!("out-of-{o}")).collect();
    send_values(&p, &output, 1, &out);
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(&input, 0, rdkafka::Offset::Offset(10))
        .expect("offset");
    let metadata = consumer.group_metadata().expect("group metadata");
    p.send_offsets_to_transaction(&offsets, &metadata, TIMEOUT)
        .expect("send_offsets_to_transaction");
    (consumer, p)
}

/// The offset of `{tag}-in` committed for `{tag}-group`, read by a fresh
/// consumer of the group, once it is `want` or the deadline passes.
fn committed_offset_of(bootstrap: &str, tag: &str, want: i64) -> i64 {
    let mut c = client_config(bootstrap);
    c.set("group.id", format!("{tag}-group"))
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = c.create().expect("consumer");
    let input = format!("{tag}-in");
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&input, 0);
        let got = match consumer.committed_offsets(tpl, Duration::from_secs(5)) {
            Ok(got) => match got.find_partition(&input, 0).map(|e| e.offset()) {
                Some(rdkafka::Offset::Offset(o)) => o,
                _ => -1,
            },
            // The coordinator may still be loading after the restart.
            Err(_) => -1,
        };
        if got == want || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Exactly-once across a crash right after a consume-transform-produce
/// commit returns: the group's offset and the output are both there, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctp_offsets_survive_a_kill_right_after_the_commit() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    let (consumer, p) = open_ctp_transaction(&bootstrap, "eos-kill", &[]).await;
    p.commit_transaction(TIMEOUT).expect("commit");
    broker.kill();
    drop((consumer, p));
    broker.restart();
    assert_eq!(
        committed_offset_of(&bootstrap, "eos-kill", 10),
        10,
        "the committed transaction's offset survives the kill"
    );
    let got = consume_exactly(&bootstrap, "eos-kill-out", 1, 10, COMMITTED);
    assert_eq!(got.len(), 10, "the output exactly once");
    assert_eq!(values(&got).len(), 10, "no duplicate output");
}

/// The crash window itself: the broker aborts (fault-injection point
/// `RILL_FAULT_TXN_CRASH_AFTER_PREPARE`) once PrepareCommit is durable and
/// before the offsets reach the group or any marker is written. After the
/// restart the recovery must forward the persisted offsets and commit the
/// output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctp_offsets_survive_a_crash_between_prepare_and_forward() {
    let dir = data_dir();
    let mut broker = Broker::start_with_env(
        RILL,
        dir.path(),
        &[],
        &[("RILL_FAULT_TXN_CRASH_AFTER_PREPARE", "1")],
    );
    let bootstrap = broker.bootstrap();
    let (consumer, p) = open_ctp_transaction(
        &bootstrap,
        "eos-prepare",
        &[
            ("socket.timeout.ms", "5000"),
            ("message.timeout.ms", "5000"),
        ],
    )
    .await;
    // The broker dies while answering EndTxn, so the commit fails here (or
    // times out); the transaction is decided all the same.
    let outcome = p.commit_transaction(Duration::from_secs(5));
    // The process aborted itself at the fault point.
    assert_eq!(
        broker.wait_exit(Duration::from_secs(30)),
        None,
        "ended by the abort (a signal), not an exit code"
    );
    assert!(
        broker.log().contains("fault injection"),
        "the fault point was reached (commit answered {outcome:?})"
    );
    drop((consumer, p));
    broker.clear_env();
    broker.restart();
    assert_eq!(
        committed_offset_of(&bootstrap, "eos-prepare", 10),
        10,
        "the recovery forwards the offsets of the prepared commit"
    );
    let got = consume_exactly(&bootstrap, "eos-prepare-out", 1, 10, COMMITTED);
    assert_eq!(got.len(), 10, "the output exactly once");
    assert_eq!(values(&got).len(), 10, "no duplicate output");
}

/// Distinct 1 KiB values `{tag}-{transaction}-{index}` padded with `x`, so
/// that reading back can tell a lost or duplicated record.
fn kib_values(tag: &str, transaction: usize, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let mut v = format!("{tag}-{transaction}-{i}-");
            v.push_str(&"x".repeat(1024 - v.len()));
            v
        })
        .collect()
}

/// Transactional produce (100 × 1 KiB per transaction) against plain
/// acks=all produce, and commit latency. The figures are printed; what is
/// asserted is that every committed record reads back exactly once under
/// read_committed, and that no transaction was left open or aborted (a
/// read_uncommitted consumer sees the same records).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_produce_reads_back_exactly_against_plain_produce() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "bench-plain", 3, &[]).await;
    create_topic(&bootstrap, "bench-txn", 3, &[]).await;
    let transactions = 50;
    let per_transaction = 100;

    let plain: BaseProducer = {
        let mut c = client_config(&bootstrap);
        c.set("acks", "all").set("linger.ms", "5");
        c.create().expect("plain producer")
    };
    let start = Instant::now();
    for t in 0..transactions {
        send_values(
            &plain,
            "bench-plain",
            3,
            &kib_values("plain", t, per_transaction),
        );
    }
    plain.flush(TIMEOUT).expect("flush");
    let plain_s = start.elapsed().as_secs_f64();
    // The same, waiting for each batch of 100 like a transaction does.
    let start = Instant::now();
    for t in 0..transactions {
        send_values(
            &plain,
            "bench-plain",
            3,
            &kib_values("flushed", t, per_transaction),
        );
        plain.flush(TIMEOUT).expect("flush");
    }
    let plain_batched_s = start.elapsed().as_secs_f64();

    let p = txn_producer(&bootstrap, "bench-id", &[]);
    let mut commits_ms = Vec::new();
    let mut sends_ms = Vec::new();
    let mut sent = BTreeSet::new();
    let start = Instant::now();
    for t in 0..transactions {
        let messages = kib_values("txn", t, per_transaction);
        p.begin_transaction().expect("begin");
        let sending = Instant::now();
        send_values(&p, "bench-txn", 3, &messages);
        // Commit latency alone: the records are acknowledged first.
        p.flush(TIMEOUT).expect("flush");
        sends_ms.push(sending.elapsed().as_secs_f64() * 1000.0);
        let commit = Instant::now();
        p.commit_transaction(TIMEOUT).expect("commit");
        commits_ms.push(commit.elapsed().as_secs_f64() * 1000.0);
        sent.extend(messages);
    }
    let txn_s = start.elapsed().as_secs_f64();

    let total = transactions * per_transaction;
    let committed = consume_exactly(&bootstrap, "bench-txn", 3, total, COMMITTED);
    assert_eq!(committed.len(), total, "read_committed: every record once");
    assert_eq!(values(&committed), sent, "read_committed: the records sent");
    // A duplicate among the first `total` would leave the set short.
    let uncommitted = consume_all(&bootstrap, "bench-txn", 3, total, TIMEOUT, UNCOMMITTED);
    assert_eq!(
        values(&uncommitted),
        sent,
        "read_uncommitted: nothing aborted or extra"
    );
    let plain_read = consume_all(&bootstrap, "bench-plain", 3, 2 * total, TIMEOUT, &[]);
    assert_eq!(plain_read.len(), 2 * total, "plain: every record once");
    assert_eq!(values(&plain_read).len(), 2 * total);

    commits_ms.sort_by(f64::total_cmp);
    sends_ms.sort_by(f64::total_cmp);
    let p50 = commits_ms[commits_ms.len() / 2];
    let p99 = commits_ms[(commits_ms.len() * 99 / 100).min(commits_ms.len() - 1)];
    assert!(commits_ms.iter().all(|&ms| ms > 0.0));
    println!(
        "send+flush per transaction: p50 {:.2} ms",
        sends_ms[sends_ms.len() / 2]
    );
    println!(
        "plain acks=all flushed per 100: {:.0} msg/s",
        total as f64 / plain_batched_s
    );
    println!(
        "plain acks=all: {:.0} msg/s; transactional: {:.0} msg/s ({:.2}x); commit p50 {p50:.2} ms, p99 {p99:.2} ms",
        total as f64 / plain_s,
        total as f64 / txn_s,
        plain_s / txn_s
    );
}

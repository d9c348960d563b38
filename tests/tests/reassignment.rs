//! Partition reassignment (AlterPartitionReassignments / ListPartitionReassignments,
//! KIP-455) across real `rill` processes: a partition's replicas move onto
//! another broker — one of the voters, or a fourth, broker-only node that
//! joins the running cluster — while an idempotent acks=all producer runs; nothing
//! acknowledged is lost, the reassignment is listed while it runs, and the
//! replica left behind has its files deleted.

use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rill_tests::cluster::{wait_for, Cluster};
use rill_tests::paced::PacedWrites;
use rill_tests::replicated::{
    create_assigned, idempotent_producer, partition_view, read_numbers, reassign, signal,
};
use rill_tests::Broker;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// An election, a session expiry (2.5 s) and a catch-up on a loaded
/// two-core machine.
const SETTLE: Duration = Duration::from_secs(60);

/// ListPartitionReassignments v0 of partition 0: (replicas, adding,
/// removing) if a reassignment is in progress.
fn listed(broker: &Broker, topic: &str) -> Option<(Vec<i32>, Vec<i32>, Vec<i32>)> {
    let mut wanted = ListPartitionReassignmentsTopics::default();
    wanted.name = TopicName(StrBytes::from_string(topic.to_owned()));
    wanted.partition_indexes = vec![0];
    let mut request = ListPartitionReassignmentsRequest::default();
    request.timeout_ms = 10_000;
    request.topics = Some(vec![wanted]);
    let response: ListPartitionReassignmentsResponse =
        rill_tests::raw::request(broker.addr, ApiKey::ListPartitionReassignments, 0, &request)
            .expect("ListPartitionReassignments answered");
    assert_eq!(response.error_code, 0);
    let partition = response.topics.first()?.partitions.first()?;
    let ids = |brokers: &[BrokerId]| brokers.iter().map(|b| b.0).collect::<Vec<_>>();
    Some((
        ids(&partition.replicas),
        ids(&partition.adding_replicas),
        ids(&partition.removing_replicas),
    ))
}

/// Moves partition 0 of a topic on `from` to `to` while a producer runs;
/// `moved_in` is the broker `to` adds and `moved_out` the one it drops.
fn move_under_load(cluster: &mut Cluster, from: &[i32], to: &[i32], moved_in: i32, moved_out: i32) {
    let bootstrap = cluster.bootstrap();
    let load_bootstrap = bootstrap.clone();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(create_assigned(&bootstrap, "moving", from));
    let mut sorted_from = from.to_vec();
    sorted_from.sort_unstable();
    wait_for("the first replicas in sync", SETTLE, || {
        let state = partition_view(&bootstrap, "moving")?;
        (state.isr == sorted_from).then_some(())
    });

    // 1,500 writes paced over about 15 s: the move below starts and ends
    // among them (checked, not assumed).
    let records: Vec<_> = (0..1500u32)
        .map(|v| (None, v.to_string().into_bytes()))
        .collect();
    let load = {
        let _context = runtime.enter();
        let producer = idempotent_producer(&load_bootstrap);
        PacedWrites::start(
            producer,
            "moving",
            Some(0),
            records,
            Duration::from_millis(10),
        )
    };
    load.wait_acked(50, SETTLE);

    // The new replica is stopped, so the reassignment stays in progress
    // until it runs again: ListPartitionReassignments must show it.
    signal(cluster.node(moved_in), libc::SIGSTOP);
    let asked = (1..=cluster.brokers.len() as i32)
        .find(|&n| n != moved_in && n != moved_out)
        .expect("another broker");
    assert_eq!(reassign(cluster.node(asked), "moving", Some(to)), 0);
    let acked_at_move = load.acked_count();
    assert!(load.sent() < 1500, "the move starts while writes go on");
    let (replicas, adding, removing) =
        listed(cluster.node(asked), "moving").expect("the reassignment is listed");
    assert_eq!((adding, removing), (vec![moved_in], vec![moved_out]));
    let mut all: Vec<i32> = replicas.clone();
    all.sort_unstable();
    let mut expected_all: Vec<i32> = from.iter().chain(to).copied().collect();
    expected_all.sort_unstable();
    expected_all.dedup();
    assert_eq!(all, expected_all, "replicas are old ∪ new while it runs");
    signal(cluster.node(moved_in), libc::SIGCONT);

    let mut sorted_to = to.to_vec();
    sorted_to.sort_unstable();
    let state = wait_for("the reassignment to complete", SETTLE, || {
        let state = partition_view(&bootstrap, "moving")?;
        (state.sorted_replicas() == sorted_to && state.isr == sorted_to).then_some(state)
    });
    assert!(
        to.contains(&state.leader),
        "the leader is a target replica: {state:?}"
    );
    assert!(
        load.acked_count() > acked_at_move,
        "writes were acknowledged while the move ran: {acked_at_move} before, {} after",
        load.acked_count()
    );
    wait_for("no reassignment listed", SETTLE, || {
        listed(cluster.node(asked), "moving")
            .is_none()
            .then_some(())
    });
    let new_files = cluster.node(moved_in).data_dir.join("moving-0");
    assert!(
        new_files.is_dir(),
        "the new replica's files are in {new_files:?}"
    );
    let old_files = cluster.node(moved_out).data_dir.join("moving-0");
    wait_for("the moved-out replica's files deleted", SETTLE, || {
        (!old_files.exists()).then_some(())
    });

    let acknowledged: Vec<u32> = (runtime.block_on(load.complete()).into_iter())
        .map(|(i, _, _)| i as u32)
        .collect();
    // Writes went on through the move and after it (why any was refused is
    // in the output).
    assert!(
        acknowledged.len() >= 1000 && acknowledged.last() == Some(&1499),
        "writes went on during the move: {} acknowledged, the last {:?}",
        acknowledged.len(),
        acknowledged.last()
    );
    // Every record in the partition.
    let high_watermark = {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let consumer: BaseConsumer = rill_tests::kafka::client_config(&bootstrap)
            .create()
            .expect("consumer");
        let (_, high) = consumer
            .fetch_watermarks("moving", 0, Duration::from_secs(10))
            .expect("watermarks");
        usize::try_from(high).expect("a count")
    };
    assert!(high_watermark >= acknowledged.len());
    let read = read_numbers(&bootstrap, "moving", high_watermark);
    for value in &acknowledged {
        assert!(read.contains(value), "acknowledged {value} was lost");
    }
    // The idempotent producer's retries are not written twice, and the old
    // replica took no write once moved off (it would have acknowledged a
    // record the new leader never had, seen as OUT_OF_ORDER_SEQUENCE_NUMBER
    // on the next one).
    assert!(read.windows(2).all(|w| w[0] < w[1]), "in order, none twice");
    // Every partition's replicas, internal topics included, agree batch by
    // batch after the faults, and no replica's leader epochs go back.
    rill_tests::agreement::assert_replicas_agree(&cluster.data_dirs(&[]), SETTLE);
}

#[test]
fn a_partition_moves_to_another_broker_under_load_and_its_old_replica_is_deleted() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    // The leader (first replica, 1) moves out: leadership passes to a
    // target replica when the move completes.
    move_under_load(&mut cluster, &[1, 2], &[3, 2], 3, 1);
}

#[test]
fn a_new_broker_joins_and_takes_over_a_replica_under_load() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    cluster.add_broker(RILL, 4, &[]);
    for node in 1..=4 {
        wait_for("every broker to list the new one", SETTLE, || {
            let (_, brokers) = rill_tests::cluster::describe_cluster(cluster.node(node)).ok()?;
            (brokers == vec![1, 2, 3, 4]).then_some(())
        });
    }
    // RF=3 on the three voters; the first (the leader) moves to broker 4.
    move_under_load(&mut cluster, &[1, 2, 3], &[4, 2, 3], 4, 1);
}

#[test]
fn reassignments_are_validated_and_can_be_cancelled() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(create_assigned(&bootstrap, "held", &[1, 2]));
    wait_for("the replicas in sync", SETTLE, || {
        let state = partition_view(&bootstrap, "held")?;
        (state.isr == vec![1, 2]).then_some(())
    });
    // INVALID_REPLICA_ASSIGNMENT: an unknown broker, a repeated one.
    assert_eq!(reassign(cluster.node(1), "held", Some(&[1, 9])), 39);
    assert_eq!(reassign(cluster.node(1), "held", Some(&[2, 2])), 39);
    // UNKNOWN_TOPIC_OR_PARTITION.
    assert_eq!(reassign(cluster.node(1), "absent", Some(&[1, 2])), 3);
    // NO_REASSIGNMENT_IN_PROGRESS.
    assert_eq!(reassign(cluster.node(1), "held", None), 85);

    // Broker 3 cannot catch up while stopped: cancel the move to it.
    signal(cluster.node(3), libc::SIGSTOP);
    assert_eq!(reassign(cluster.node(2), "held", Some(&[3, 2])), 0);
    assert!(listed(cluster.node(1), "held").is_some());
    assert_eq!(reassign(cluster.node(2), "held", None), 0);
    assert!(listed(cluster.node(1), "held").is_none());
    signal(cluster.node(3), libc::SIGCONT);
    let state = wait_for("the original replicas back", SETTLE, || {
        let state = partition_view(&bootstrap, "held")?;
        (state.sorted_replicas() == vec![1, 2]).then_some(state)
    });
    assert_eq!(state.isr, vec![1, 2]);
    let kept_files = cluster.node(1).data_dir.join("held-0");
    assert!(
        kept_files.is_dir(),
        "a kept replica's files are in {kept_files:?}"
    );
    let added_files = cluster.node(3).data_dir.join("held-0");
    wait_for("the cancelled replica's files deleted", SETTLE, || {
        (!added_files.exists()).then_some(())
    });
}

//! Fetch v12+ diverging epochs (KIP-595) with three real `rill` processes:
//!
//! - A leader answers a follower's Fetch (raw, with `replica_id`) whose
//!   `last_fetched_epoch` and `fetch_offset` do not fit its log with no
//!   records and `diverging_epoch` = its largest epoch ≤ the follower's
//!   and where that ends, error NONE; a consistent fetch gets records;
//!   current-epoch mismatches stay FENCED/UNKNOWN_LEADER_EPOCH.
//! - A real divergence: the leader takes acks=1 writes while both
//!   followers are stopped, is stopped in turn, and a follower takes over
//!   with a new epoch and new writes. When the old leader resumes as a
//!   follower, the new leader's fetch answer makes it cut the records it
//!   alone had, and its log becomes the leader's.

use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rill_tests::cluster::{wait_for, Cluster};
use rill_tests::raw::request;
use rill_tests::replicated::{partition_view, signal};
use rill_tests::Broker;
use std::path::{Path, PathBuf};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// An election, a session expiry (2.5 s) and a catch-up on a loaded
/// two-core machine.
const SETTLE: Duration = Duration::from_secs(60);

const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// Partition 0's (leader, sorted ISR) as `bootstrap` reports it.
fn partition_state_of(bootstrap: &str, topic: &str) -> Option<(i32, Vec<i32>)> {
    partition_view(bootstrap, topic).map(|view| (view.leader, view.isr))
}

/// Partition 0's leader epoch as `broker` reports it (Metadata v9).
fn leader_epoch(broker: &Broker, topic: &str) -> Option<i32> {
    rill_tests::raw::leader_epoch(broker.addr, topic, 0)
}

/// A producer of one record at a time to partition 0 with `acks`. Not
/// idempotent: each broker of a rill cluster hands out producer ids from
/// its own block store today, so producers that bootstrap from different
/// brokers can get the same id, and the second one's sequence 0 is then
/// OUT_OF_ORDER_SEQUENCE_NUMBER on a partition that saw the first.
fn producer(bootstrap: &str, acks: &str) -> FutureProducer {
    rill_tests::kafka::producer(
        bootstrap,
        &[
            ("acks", acks),
            ("enable.idempotence", "false"),
            ("message.timeout.ms", "30000"),
            ("request.timeout.ms", "10000"),
            ("retry.backoff.ms", "100"),
            ("topic.metadata.refresh.interval.ms", "500"),
        ],
    )
}

/// Produces `values` one at a time; panics unless each is acknowledged.
async fn produce(producer: &FutureProducer, topic: &str, values: std::ops::Range<u32>) {
    for value in values {
        let payload = value.to_string();
        let record: FutureRecord<'_, (), String> =
            FutureRecord::to(topic).payload(&payload).partition(0);
        producer
            .send(record, Duration::from_secs(30))
            .await
            .unwrap_or_else(|(e, _)| panic!("{value} not acknowledged: {e}"));
    }
}

/// One partition of a raw follower fetch.
struct Ask {
    current_leader_epoch: i32,
    fetch_offset: i64,
    last_fetched_epoch: i32,
}

/// Fetch v12 of partition 0 from `leader` as follower `replica`, without
/// waiting for data.
fn follower_fetch(leader: &Broker, topic: &str, replica: i32, ask: Ask) -> PartitionData {
    let mut partition = FetchPartition::default();
    partition.partition = 0;
    partition.current_leader_epoch = ask.current_leader_epoch;
    partition.fetch_offset = ask.fetch_offset;
    partition.last_fetched_epoch = ask.last_fetched_epoch;
    partition.partition_max_bytes = 1 << 20;
    rill_tests::raw::fetch_v12(leader.addr, topic, replica, partition)
}

/// The leader's OffsetForLeaderEpoch answer (epoch, end offset) for
/// `requested`.
fn epoch_end(leader: &Broker, topic: &str, requested: i32) -> (i32, i64) {
    let mut partition = OffsetForLeaderPartition::default();
    partition.partition = 0;
    partition.current_leader_epoch = -1;
    partition.leader_epoch = requested;
    let mut asked = OffsetForLeaderTopic::default();
    asked.topic = TopicName(StrBytes::from_string(topic.to_string()));
    asked.partitions = vec![partition];
    let body = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![asked]);
    let response: OffsetForLeaderEpochResponse =
        request(leader.addr, ApiKey::OffsetForLeaderEpoch, 3, &body)
            .expect("OffsetForLeaderEpoch answered");
    let answer = &response.topics[0].partitions[0];
    assert_eq!(answer.error_code, NONE);
    (answer.leader_epoch, answer.end_offset)
}

/// Kills the leader of a fresh RF=3 topic after `first` records and
/// writes `second` more under its successor: the successor's log then
/// holds two epochs. Returns (successor, old leader, first epoch, second).
fn two_epochs(cluster: &mut Cluster, topic: &str, first: u32, second: u32) -> (i32, i32, i32, i32) {
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        topic,
        1,
        3,
        &[],
    ));
    let (old_leader, _) = wait_for("all three in the ISR", SETTLE, || {
        partition_state_of(&bootstrap, topic).filter(|s| s.1 == vec![1, 2, 3])
    });
    let first_epoch = wait_for("the leader epoch", SETTLE, || {
        leader_epoch(cluster.node(old_leader), topic)
    });
    runtime.block_on(produce(&producer(&bootstrap, "all"), topic, 0..first));
    cluster.node(old_leader).kill();
    let survivor = (1..=3).find(|&n| n != old_leader).expect("a survivor");
    let survivor_bootstrap = cluster.node(survivor).bootstrap();
    let (new_leader, _) = wait_for("a new leader", SETTLE, || {
        partition_state_of(&survivor_bootstrap, topic)
            .filter(|s| s.0 > 0 && s.0 != old_leader && !s.1.contains(&old_leader))
    });
    let new_bootstrap = cluster.node(new_leader).bootstrap();
    runtime.block_on(produce(
        &producer(&new_bootstrap, "all"),
        topic,
        first..first + second,
    ));
    let second_epoch = wait_for("the new leader epoch", SETTLE, || {
        leader_epoch(cluster.node(new_leader), topic).filter(|&e| e > first_epoch)
    });
    (new_leader, old_leader, first_epoch, second_epoch)
}

#[test]
fn a_leader_answers_a_diverging_follower_fetch_with_its_epoch_end() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let topic = "diverging-raw";
    let (leader, dead, first_epoch, second_epoch) = two_epochs(&mut cluster, topic, 10, 5);
    let leader = cluster.node(leader);
    // The leader's log: the first epoch over 0..10, its own from 10 to 15.
    assert_eq!(
        epoch_end(leader, topic, second_epoch - 1),
        (first_epoch, 10)
    );
    assert_eq!(epoch_end(leader, topic, second_epoch), (second_epoch, 15));

    // The dead broker is a follower of the partition; its fetches here are
    // made up (and, diverging, are not counted as its progress).
    let fetch = |current_leader_epoch, fetch_offset, last_fetched_epoch| {
        follower_fetch(
            leader,
            topic,
            dead,
            Ask {
                current_leader_epoch,
                fetch_offset,
                last_fetched_epoch,
            },
        )
    };
    let diverging = |p: &PartitionData| {
        (
            p.error_code,
            p.diverging_epoch.epoch,
            p.diverging_epoch.end_offset,
            p.records.as_ref().map_or(0, |r| r.len()),
        )
    };
    // The first epoch ran past where the leader's copy of it ends.
    assert_eq!(
        diverging(&fetch(second_epoch, 12, first_epoch)),
        (NONE, first_epoch, 10, 0)
    );
    // The leader's own epoch, past its log end.
    assert_eq!(
        diverging(&fetch(second_epoch, 20, second_epoch)),
        (NONE, second_epoch, 15, 0)
    );
    // An epoch between the two that the leader never had, if there is one:
    // the leader names its largest epoch below it.
    if second_epoch - first_epoch >= 2 {
        assert_eq!(
            diverging(&fetch(second_epoch, 8, second_epoch - 1)),
            (NONE, first_epoch, 10, 0)
        );
    }
    // Consistent fetches get records and no diverging epoch.
    for (offset, epoch) in [(5, first_epoch), (10, first_epoch), (12, second_epoch)] {
        let answer = fetch(second_epoch, offset, epoch);
        assert_eq!(answer.error_code, NONE, "at {offset} in epoch {epoch}");
        assert_eq!(
            answer.diverging_epoch.epoch, -1,
            "at {offset} in epoch {epoch}"
        );
        assert!(
            answer.records.is_some_and(|r| !r.is_empty()),
            "records at {offset}"
        );
    }
    // No last fetched epoch (an empty log): not checked.
    let answer = fetch(second_epoch, 3, -1);
    assert_eq!(
        (answer.error_code, answer.diverging_epoch.epoch),
        (NONE, -1)
    );
    // An epoch above every one the leader knows: it cannot place it.
    assert_eq!(
        fetch(second_epoch, 12, second_epoch + 5).error_code,
        OFFSET_OUT_OF_RANGE
    );
    // The current leader epoch is still checked first.
    assert_eq!(
        fetch(second_epoch - 1, 12, first_epoch).error_code,
        FENCED_LEADER_EPOCH
    );
    assert_eq!(
        fetch(second_epoch + 1, 12, first_epoch).error_code,
        UNKNOWN_LEADER_EPOCH
    );
}

/// The directory of partition `name` (`<topic>-<partition>`) under `root`.
fn partition_dir(root: &Path, name: &str) -> Option<PathBuf> {
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).ok()? {
            let path = entry.ok()?.path();
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|n| n == name) {
                return Some(path);
            }
            pending.push(path);
        }
    }
    None
}

/// Broker `node`'s `leader-epoch-checkpoint` of partition 0 of `topic`.
fn checkpoint(cluster: &mut Cluster, node: i32, topic: &str) -> Option<String> {
    let dir = partition_dir(&cluster.node(node).data_dir, &format!("{topic}-0"))?;
    std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).ok()
}

/// Partition 0's size in bytes on broker `node`.
fn partition_bytes(cluster: &mut Cluster, node: i32, topic: &str) -> Option<i64> {
    rill_tests::raw::partition_bytes(cluster.node(node).addr, topic, 0)
}

/// A counter of broker `node`'s `/metrics`.
fn counter(cluster: &mut Cluster, node: i32, name: &str) -> u64 {
    let metrics = rill_tests::http_get(cluster.node(node).admin_addr, "/metrics");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} missing:\n{metrics}"))
}

#[test]
fn a_resumed_old_leader_cuts_what_it_alone_wrote_when_its_fetch_diverges() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let topic = "diverging";
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        topic,
        1,
        3,
        &[],
    ));
    let (old_leader, _) = wait_for("all three in the ISR", SETTLE, || {
        partition_state_of(&bootstrap, topic).filter(|s| s.1 == vec![1, 2, 3])
    });
    let followers: Vec<i32> = (1..=3).filter(|&n| n != old_leader).collect();
    runtime.block_on(produce(&producer(&bootstrap, "all"), topic, 0..10));

    // Both followers stop; the leader alone takes acks=1 writes 100..105
    // (the controller quorum is stopped too, so nothing moves meanwhile).
    for &f in &followers {
        signal(cluster.node(f), libc::SIGSTOP);
    }
    let alone = cluster.node(old_leader).bootstrap();
    runtime.block_on(produce(&producer(&alone, "1"), topic, 100..105));
    // The leader stops, the followers resume: one of them takes over with
    // a new epoch once the stopped leader's session expires.
    signal(cluster.node(old_leader), libc::SIGSTOP);
    for &f in &followers {
        signal(cluster.node(f), libc::SIGCONT);
    }
    let survivors = followers
        .iter()
        .map(|&f| cluster.node(f).bootstrap())
        .collect::<Vec<_>>()
        .join(",");
    let (new_leader, _) = wait_for("a new leader among the resumed", SETTLE, || {
        partition_state_of(&survivors, topic)
            .filter(|s| followers.contains(&s.0) && !s.1.contains(&old_leader))
    });
    runtime.block_on(produce(&producer(&survivors, "all"), topic, 10..13));
    // Where the old epoch ends on the new leader: after the ten acks=all
    // records and the acks=1 ones it had fetched before it stopped.
    let new_epoch = wait_for("the new leader epoch", SETTLE, || {
        leader_epoch(cluster.node(new_leader), topic)
    });
    let (_, old_epoch_end) = epoch_end(cluster.node(new_leader), topic, new_epoch - 1);
    let kept = u32::try_from(old_epoch_end - 10).expect("at least the acks=all records");
    assert!(
        kept < 5,
        "the old leader has acks=1 records the new one lacks: {kept}"
    );

    // The old leader resumes as a follower: its log (0..15, the last five
    // only its own, all in the old epoch) diverges from the new leader's
    // (0..13, the new epoch from 10), and its first fetch says so.
    signal(cluster.node(old_leader), libc::SIGCONT);
    wait_for("the old leader back in the ISR", SETTLE, || {
        partition_state_of(&cluster.node(new_leader).bootstrap(), topic)
            .filter(|s| s.0 == new_leader && s.1 == vec![1, 2, 3])
    });
    assert!(
        counter(
            &mut cluster,
            old_leader,
            "rill_diverging_epoch_truncations_total"
        ) >= 1,
        "the old leader truncated on a diverging epoch"
    );
    assert!(
        cluster
            .node(old_leader)
            .log()
            .contains("the leader's log diverges from ours: truncating"),
        "the old leader logged its truncation"
    );
    // Its log is now the leader's: the same epochs from the same offsets
    // (without the cut, the new epoch would start at 15 there, not at
    // `old_epoch_end`) and the same bytes.
    let leader_checkpoint = checkpoint(&mut cluster, new_leader, topic).expect("a checkpoint");
    assert_eq!(
        leader_checkpoint.lines().count(),
        4,
        "two epochs on the leader: {leader_checkpoint:?}"
    );
    wait_for("the old leader's log to be the leader's", SETTLE, || {
        let same_epochs = checkpoint(&mut cluster, old_leader, topic)? == leader_checkpoint;
        let leader_bytes = partition_bytes(&mut cluster, new_leader, topic)?;
        let same_bytes = partition_bytes(&mut cluster, old_leader, topic)? == leader_bytes;
        (same_epochs && same_bytes).then_some(())
    });
    // Readers see the new leader's log: the acks=all records, and of the
    // acks=1 ones only those the new leader had fetched (a follower's fetch
    // held by the leader can be answered with the first of them just before
    // the follower stops), the rest lost (Kafka's contract for acks=1 under
    // a leader change).
    let expected: Vec<String> = (0..10)
        .chain(100..100 + kept)
        .chain(10..13)
        .map(|v| v.to_string())
        .collect();
    let read: Vec<String> = rill_tests::kafka::consume_all(
        &cluster.bootstrap(),
        topic,
        1,
        expected.len(),
        Duration::from_secs(60),
        &[],
    )
    .into_iter()
    .map(|r| String::from_utf8(r.value.expect("a value")).expect("utf-8"))
    .collect();
    assert_eq!(read, expected);
    // Every partition's replicas, internal topics included, agree batch by
    // batch after the faults, and no replica's leader epochs go back.
    rill_tests::agreement::assert_replicas_agree(&cluster.data_dirs(&[]), SETTLE);
}

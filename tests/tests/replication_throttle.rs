//! Replication throttles (KIP-73), as `kafka-reassign-partitions
//! --throttle` sets them, across real `rill` processes: a replica that a
//! reassignment adds catches up no faster than the leader's (or the
//! follower's) `*.replication.throttled.rate` lets it, for the partitions
//! the topic's `*.replication.throttled.replicas` names, and catches up at
//! once when the rate is removed.

use rdkafka::admin::ResourceSpecifier;
use rill_tests::cluster::{wait_for, Cluster};
use rill_tests::kafka::alter_configs;
use rill_tests::raw::partition_bytes;
use rill_tests::replicated::{create_filled, partition_view, reassign};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const SETTLE: Duration = Duration::from_secs(60);
/// 16 MB in 10 KiB records: twice what one follower fetch carries (8 MiB).
const RECORDS: usize = 1_600;
const RECORD_BYTES: usize = 10 << 10;

/// Moves `topic` (on broker 1, 16 MB) to brokers 1 and 2 under a 100 kB/s
/// throttle that `throttling` broker (1: leader side, 2: follower side)
/// applies to partition 0; checks the new replica holds at most about one
/// fetch after 5 s, then lifts the throttle and sees it join the ISR.
fn throttled_move(
    cluster: &mut Cluster,
    runtime: &tokio::runtime::Runtime,
    topic: &str,
    throttling: i32,
) {
    let bootstrap = cluster.bootstrap();
    let (rate_key, replicas_key) = match throttling {
        1 => (
            "leader.replication.throttled.rate",
            "leader.replication.throttled.replicas",
        ),
        _ => (
            "follower.replication.throttled.rate",
            "follower.replication.throttled.replicas",
        ),
    };
    let listed = format!("0:{throttling}");
    runtime.block_on(async {
        create_filled(&bootstrap, topic, &[1], RECORDS, RECORD_BYTES).await;
        let broker = ResourceSpecifier::Broker(throttling);
        alter_configs(&bootstrap, broker, &[(rate_key, "100000")]).await;
        let topic_resource = ResourceSpecifier::Topic(topic);
        alter_configs(&bootstrap, topic_resource, &[(replicas_key, &listed)]).await;
    });
    let total = partition_bytes(cluster.node(1).addr, topic, 0).expect("the leader's size");
    assert!(total >= (RECORDS * RECORD_BYTES) as i64, "{total}");
    assert_eq!(reassign(cluster.node(1), topic, Some(&[1, 2])), 0);
    std::thread::sleep(Duration::from_secs(5));
    let held = partition_bytes(cluster.node(2).addr, topic, 0).unwrap_or(0);
    assert!(
        held < total * 5 / 8,
        "throttled at 100 kB/s, the new replica holds {held} of {total} bytes after 5 s"
    );
    let view = partition_view(&bootstrap, topic).expect("the partition");
    assert_eq!(view.isr, vec![1], "not caught up, so not in sync");
    runtime.block_on(alter_configs(
        &bootstrap,
        ResourceSpecifier::Broker(throttling),
        &[],
    ));
    wait_for("the new replica in sync once unthrottled", SETTLE, || {
        let state = partition_view(&bootstrap, topic)?;
        (state.isr == vec![1, 2]).then_some(())
    });
}

#[test]
fn a_throttled_replica_catches_up_at_the_throttle_and_at_once_without_it() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    throttled_move(&mut cluster, &runtime, "leader-throttled", 1);
    throttled_move(&mut cluster, &runtime, "follower-throttled", 2);
}

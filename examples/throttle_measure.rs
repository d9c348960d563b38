//! Measures replication throttles (KIP-73) against a real three-broker
//! cluster: how fast a replica that a reassignment adds catches up (bytes
//! of the partition / time until it is in the ISR), unthrottled and under
//! a leader throttle, in one run.
//!
//! Run: `cargo run --release --example throttle_measure -- target/release/rill`

use rdkafka::admin::ResourceSpecifier;
use rill_tests::cluster::Cluster;
use rill_tests::kafka::alter_configs;
use rill_tests::raw::partition_bytes;
use rill_tests::replicated::{create_filled, partition_view, reassign};
use std::time::{Duration, Instant};

/// 48 MiB in 10 KiB records: six follower fetches' worth.
const RECORDS: usize = 4_800;
const RECORD_BYTES: usize = 10 << 10;
/// The throttle: 4 MiB/s.
const RATE_BYTES_PER_S: u64 = 4 << 20;

/// Puts 48 MiB in `topic` on broker 1, throttles its leader side at
/// `rate` (if any), moves it to brokers 1 and 2 and times the catch-up;
/// returns (bytes, seconds).
fn catch_up(
    cluster: &mut Cluster,
    runtime: &tokio::runtime::Runtime,
    topic: &str,
    rate: Option<u64>,
) -> (i64, f64) {
    let bootstrap = cluster.bootstrap();
    runtime.block_on(async {
        create_filled(&bootstrap, topic, &[1], RECORDS, RECORD_BYTES).await;
        let rate = rate.map(|r| r.to_string());
        let broker: Vec<(&str, &str)> = rate
            .iter()
            .map(|r| ("leader.replication.throttled.rate", r.as_str()))
            .collect();
        alter_configs(&bootstrap, ResourceSpecifier::Broker(1), &broker).await;
        let listed = [("leader.replication.throttled.replicas", "0:1")];
        alter_configs(&bootstrap, ResourceSpecifier::Topic(topic), &listed).await;
    });
    let bytes = partition_bytes(cluster.node(1).addr, topic, 0).expect("the leader's size");
    let started = Instant::now();
    assert_eq!(reassign(cluster.node(1), topic, Some(&[1, 2])), 0);
    while partition_view(&bootstrap, topic).is_none_or(|v| v.isr != vec![1, 2]) {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "never caught up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (bytes, started.elapsed().as_secs_f64())
}

fn main() {
    let rill = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/rill".to_string());
    let mut cluster = Cluster::start_settled(&rill, 3, &[], Duration::from_secs(60));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mib = |bytes: f64| bytes / f64::from(1 << 20);
    let (bytes, free_s) = catch_up(&mut cluster, &runtime, "unthrottled", None);
    println!(
        "unthrottled: {:.0} MiB caught up in {free_s:.2} s ({:.1} MiB/s)",
        mib(bytes as f64),
        mib(bytes as f64) / free_s
    );
    let (bytes, held_s) = catch_up(&mut cluster, &runtime, "throttled", Some(RATE_BYTES_PER_S));
    let achieved = bytes as f64 / held_s;
    println!(
        "throttled at {:.0} MiB/s: {:.0} MiB caught up in {held_s:.2} s ({:.2} MiB/s, {:.2}x the limit; {:.1}x the unthrottled time)",
        mib(RATE_BYTES_PER_S as f64),
        mib(bytes as f64),
        mib(achieved),
        achieved / RATE_BYTES_PER_S as f64,
        held_s / free_s
    );
}

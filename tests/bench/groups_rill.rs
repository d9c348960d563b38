//! Consumer groups against the real rill broker: the harness's consumers
//! join a real group (classic protocol with each of the harness's own
//! assignors, and KIP-848 `group.protocol=consumer`), consume everything
//! that was produced, and leave committed offsets that add up to it; the
//! harness's share consumers (KIP-932) share a partition and consume each
//! record once.

use crate::common;

use bench_harness::group::member::{fetch_committed, find_coordinator};
use bench_harness::group::Assignor;
use bench_harness::kafka::connection::Connection;
use bench_harness::runner::{run_workload, RunOptions};
use bench_harness::workload::{GroupProtocol, MessageSize, Workload};
use common::{bench, read_json, scratch_dir, start_rill};

fn group_workload(group: &str, assignor: Assignor, protocol: GroupProtocol) -> Workload {
    Workload {
        name: format!("group-{group}"),
        topics: 2,
        partitions_per_topic: 3,
        message_size: MessageSize::Fixed(256),
        producers_per_topic: 1,
        // Two topics: two members in the group, each subscribed to both.
        consumers_per_topic: 1,
        producer_rate_msgs_per_s: 2_000,
        warmup_duration_s: 0,
        test_duration_s: 2,
        consumer_group: Some(group.to_string()),
        assignor,
        group_protocol: protocol,
        ..Workload::default()
    }
}

async fn check_group(group: &str, assignor: Assignor, protocol: GroupProtocol) {
    let rill = start_rill();
    let workload = group_workload(group, assignor, protocol);
    let topics: Vec<String> = (0..2).map(|i| format!("{group}-topic-{i}")).collect();
    let options = RunOptions {
        quiet: true,
        topics: Some(topics.clone()),
        ..RunOptions::default()
    };
    let result = run_workload(&rill.addr, &workload, &options).await.unwrap();
    assert_every_message_consumed_once(&result);

    // The members committed their positions on the way out: the committed
    // offsets of all six partitions add up to everything produced.
    let connection = Connection::connect(&rill.addr, "groups-test")
        .await
        .unwrap();
    let coordinator_addr = find_coordinator(&connection, group).await.unwrap();
    let coordinator = Connection::connect(&coordinator_addr, "groups-test")
        .await
        .unwrap();
    let partitions: Vec<(String, i32)> = topics
        .iter()
        .flat_map(|t| (0..3).map(move |p| (t.clone(), p)))
        .collect();
    let committed = fetch_committed(&coordinator, group, &partitions)
        .await
        .unwrap();
    assert_eq!(committed.len(), 6, "{committed:?}");
    let total: i64 = committed.values().sum();
    assert_eq!(
        total as u64, result.total_produced_messages,
        "{committed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_group_range() {
    check_group("bench-range", Assignor::Range, GroupProtocol::Classic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_group_roundrobin() {
    check_group("bench-rr", Assignor::RoundRobin, GroupProtocol::Classic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_group_sticky() {
    check_group("bench-sticky", Assignor::Sticky, GroupProtocol::Classic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_group() {
    check_group("bench-kip848", Assignor::Range, GroupProtocol::Consumer).await;
}

/// A share group (KIP-932): three members share one partition, and every
/// record produced is consumed, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_group_members_share_one_partition() {
    let rill = start_rill();
    let workload = Workload {
        name: "share-group".into(),
        topics: 1,
        partitions_per_topic: 1,
        consumers_per_topic: 3,
        ..group_workload("bench-share", Assignor::Range, GroupProtocol::Share)
    };
    let options = RunOptions {
        quiet: true,
        topics: Some(vec!["bench-share-topic".into()]),
        ..RunOptions::default()
    };
    let result = run_workload(&rill.addr, &workload, &options).await.unwrap();
    assert_every_message_consumed_once(&result);
}

/// A run with no error whose consumers got every message produced, once,
/// with end-to-end latencies.
fn assert_every_message_consumed_once(result: &bench_harness::results::RunResult) {
    assert_eq!(result.errors, 0, "{:?}", result.error_samples);
    assert!(result.total_produced_messages > 0);
    assert_eq!(
        result.total_produced_messages, result.total_consumed_messages,
        "every message consumed once by the group"
    );
    let e2e = &result.end_to_end_latency_us;
    assert!(e2e.count > 0 && e2e.p50_us > 0 && e2e.p50_us <= e2e.p99_us);
}

/// The same through the binary's flags.
#[test]
fn run_with_a_consumer_group_through_the_cli() {
    let rill = start_rill();
    let dir = scratch_dir();
    let out = dir.path().join("group.json");
    bench([
        "run",
        "--bootstrap",
        &rill.addr,
        "--partitions",
        "4",
        "--message-size",
        "128",
        "--consumers",
        "3",
        "--rate",
        "2000",
        "--warmup-s",
        "0",
        "--duration-s",
        "2",
        "--consumer-group",
        "bench-cli",
        "--assignor",
        "sticky",
        "--quiet",
        "--out",
        &out.display().to_string(),
    ]);
    let result = read_json(&out);
    assert_eq!(result["errors"], 0, "{}", result["error_samples"]);
    assert_eq!(result["workload"]["consumer_group"], "bench-cli");
    assert_eq!(result["workload"]["assignor"], "sticky");
    let produced = result["total_produced_messages"].as_u64().unwrap();
    assert!(produced > 0);
    assert_eq!(
        produced,
        result["total_consumed_messages"].as_u64().unwrap()
    );
}

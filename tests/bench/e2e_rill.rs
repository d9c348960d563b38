//! End to end against the real rill broker through the library: start
//! `rill serve` on free ports with a scratch data dir, run a 3-second
//! produce + consume workload, and check that everything produced was
//! consumed with sane latencies.
//!
//! The broker binary is `$RILL_BIN`, else `rill` next to `rill-bench` in the
//! target dir (`cargo build -p rill`); a missing binary fails the test.

use crate::common;

use bench_harness::runner::{run_workload, RunOptions};
use bench_harness::workload::{Compression, KeyDistribution, MessageSize, Workload};
use common::start_rill;

fn workload() -> Workload {
    Workload {
        name: "e2e-rill".into(),
        partitions_per_topic: 4,
        message_size: MessageSize::Fixed(512),
        producers_per_topic: 2,
        consumers_per_topic: 2,
        producer_rate_msgs_per_s: 5_000,
        warmup_duration_s: 0,
        test_duration_s: 3,
        ..Workload::default()
    }
}

async fn check(workload: Workload) {
    let rill = start_rill();
    let options = RunOptions {
        quiet: true,
        ..RunOptions::default()
    };
    let result = run_workload(&rill.addr, &workload, &options).await.unwrap();
    assert_eq!(result.errors, 0, "{:?}", result.error_samples);
    assert!(result.total_produced_messages > 0);
    assert_eq!(
        result.total_produced_messages,
        result.total_consumed_messages
    );
    let publish = &result.publish_latency_us;
    assert!(
        publish.count > 0
            && publish.p50_us > 0
            && publish.p50_us <= publish.p99_us
            && publish.p99_us <= publish.max_us,
        "{publish:?}"
    );
    let end_to_end = &result.end_to_end_latency_us;
    assert!(
        end_to_end.count > 0 && end_to_end.p99_us < 10_000_000,
        "{end_to_end:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rill_produce_consume_3s() {
    check(workload()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rill_keyed_compressed_3s() {
    check(Workload {
        key_distribution: KeyDistribution::RoundRobin,
        compression: Compression::Zstd,
        ..workload()
    })
    .await;
}

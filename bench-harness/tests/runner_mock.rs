//! The runner and `compare` end to end against the in-memory mock broker:
//! everything produced is consumed, rates follow the target, latency
//! figures are sane, and the JSON/HTML outputs carry them.

mod common;

use bench_harness::compare::{compare, Target};
use bench_harness::report::html;
use bench_harness::runner::{run_workload, RunOptions};
use bench_harness::workload::{Compression, KeyDistribution, MessageSize, Workload};

fn short_workload() -> Workload {
    Workload {
        name: "mock".into(),
        partitions_per_topic: 4,
        message_size: MessageSize::Fixed(256),
        producers_per_topic: 2,
        consumers_per_topic: 2,
        producer_rate_msgs_per_s: 2_000,
        warmup_duration_s: 1,
        test_duration_s: 2,
        ..Workload::default()
    }
}

fn quiet() -> RunOptions {
    RunOptions {
        quiet: true,
        ..RunOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_consume_everything_at_the_target_rate() {
    let addr = common::start_mock_broker().await;
    let result = run_workload(&addr, &short_workload(), &quiet())
        .await
        .unwrap();
    assert_eq!(result.errors, 0, "{:?}", result.error_samples);
    assert!(result.total_produced_messages > 0);
    assert_eq!(
        result.total_produced_messages,
        result.total_consumed_messages
    );
    // 2000 msg/s target over a ~2 s measured window.
    assert!(
        (1_400.0..2_600.0).contains(&result.produce.msgs_per_s),
        "{}",
        result.produce.msgs_per_s
    );
    assert!(
        (1_400.0..2_600.0).contains(&result.consume.msgs_per_s),
        "{}",
        result.consume.msgs_per_s
    );
    assert_eq!(result.produce.bytes, result.produce.messages * 256);
    let publish = &result.publish_latency_us;
    assert!(
        publish.count > 0
            && publish.p50_us > 0
            && publish.p50_us <= publish.p99_us
            && publish.p99_us <= publish.max_us
    );
    assert!(publish.p99_us < 1_000_000, "{publish:?}");
    let end_to_end = &result.end_to_end_latency_us;
    assert!(
        end_to_end.count > 0 && end_to_end.p50_us > 0 && end_to_end.p99_us < 2_000_000,
        "{end_to_end:?}"
    );
    assert!(result.series.len() >= 2);
    assert!(result.host.cores >= 1);
    let html = html::render("mock", std::slice::from_ref(&result));
    assert!(html.contains("<svg"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_compression_and_acks_zero_max_rate() {
    let addr = common::start_mock_broker().await;
    let workload = Workload {
        key_distribution: KeyDistribution::Zipf,
        compression: Compression::Lz4,
        acks: 0,
        producer_rate_msgs_per_s: 0,
        producers_per_topic: 1,
        batch_size_bytes: 16 * 1024,
        max_in_flight_per_producer: 4,
        warmup_duration_s: 0,
        test_duration_s: 1,
        ..short_workload()
    };
    let result = run_workload(&addr, &workload, &quiet()).await.unwrap();
    assert_eq!(result.errors, 0, "{:?}", result.error_samples);
    assert!(
        result.produce.messages > 1_000,
        "{}",
        result.produce.messages
    );
    assert_eq!(
        result.total_produced_messages,
        result.total_consumed_messages
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_interleaves_two_brokers() {
    let a = common::start_mock_broker().await;
    let b = common::start_mock_broker().await;
    let targets = vec![
        Target {
            label: "a".into(),
            bootstrap: a,
        },
        Target {
            label: "b".into(),
            bootstrap: b,
        },
    ];
    let workload = Workload {
        warmup_duration_s: 0,
        test_duration_s: 1,
        ..short_workload()
    };
    let results = compare(&targets, &workload, 2, true).await.unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].label, "a");
    assert_eq!(results[1].label, "b");
    for result in &results {
        assert!(
            result.measured_duration_s >= 1.8,
            "two rounds of 1 s: {}",
            result.measured_duration_s
        );
        assert!(result.produce.messages > 0);
        assert_eq!(
            result.total_produced_messages,
            result.total_consumed_messages
        );
        assert_eq!(
            result.publish_latency_us.count,
            result.publish_latency_histogram.to_histogram().len()
        );
    }
}

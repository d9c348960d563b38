//! `rill-bench omb` against a real rill broker: an OMB workload file and
//! the shipped OMB driver file in, a result out that carries every field
//! OMB's `TestResult` has (what OMB's chart script reads among them), with
//! the run's real figures in it.

use crate::common;

use common::{bench, read_json, scratch_dir, start_rill};
use std::path::Path;

const WORKLOAD: &str = "name: omb smoke
topics: 1
partitionsPerTopic: 4
messageSize: 512
keyDistributor: NO_KEY
subscriptionsPerTopic: 1
consumerPerSubscription: 1
producersPerTopic: 2
producerRate: 2000
consumerBacklogSizeGB: 0
testDurationMinutes: 1
";

/// The fields OMB's `bin/create_charts.py` plots.
const CHARTED: &[&str] = &[
    "workload",
    "driver",
    "publishLatency99pct",
    "publishDelayLatency99pct",
    "publishRate",
    "endToEndLatency95pct",
    "consumeRate",
    "endToEndLatencyAvg",
    "aggregatedPublishLatencyQuantiles",
    "aggregatedPublishDelayLatencyQuantiles",
    "aggregatedEndToEndLatencyQuantiles",
];

#[test]
fn an_omb_workload_runs_and_writes_omb_result_json() {
    let rill = start_rill();
    let dir = scratch_dir();
    let workload = dir.path().join("workload.yaml");
    std::fs::write(&workload, WORKLOAD).unwrap();
    let driver =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-harness/workloads/omb/driver-rill.yaml");
    let out = dir.path().join("omb.json");
    let output = bench([
        "omb".as_ref(),
        "--workload".as_ref(),
        workload.as_os_str(),
        "--driver".as_ref(),
        driver.as_os_str(),
        "--bootstrap".as_ref(),
        rill.addr.as_ref(),
        "--test-duration-s".as_ref(),
        "4".as_ref(),
        "--warmup-duration-s".as_ref(),
        "1".as_ref(),
        "--quiet".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not applied by rill-bench: consumerConfig: enable.auto.commit=false"),
        "{stderr}"
    );
    let result = read_json(&out);
    for field in CHARTED {
        assert!(result.get(field).is_some(), "no {field} in {result}");
    }
    assert_eq!(result["workload"], "omb smoke");
    assert_eq!(result["driver"], "rill");
    assert_eq!(result["partitions"], 4);
    let published: f64 = (result["publishRate"].as_array().unwrap().iter())
        .map(|v| v.as_f64().unwrap())
        .sum();
    let consumed: f64 = (result["consumeRate"].as_array().unwrap().iter())
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!(published > 0.0 && consumed > 0.0, "{result}");
    let p99 = result["aggregatedPublishLatency99pct"].as_f64().unwrap();
    let p50 = result["aggregatedPublishLatency50pct"].as_f64().unwrap();
    assert!(p50 > 0.0 && p50 <= p99, "{result}");
    let quantiles = result["aggregatedEndToEndLatencyQuantiles"]
        .as_object()
        .unwrap();
    assert!(!quantiles.is_empty(), "{result}");
}

//! Every `rill-bench` subcommand through the real binary, against real rill
//! brokers: short runs whose JSON output is checked for sane, non-zero and
//! mutually consistent figures.
//!
//! Needs the `rill` binary (`cargo build -p rill`, which `cargo test
//! --workspace` does anyway); `RILL_BIN` overrides its path.

use crate::common;

use common::{bench, read_json, rill_bin, scratch_dir, start_rill, Rill};
use serde_json::Value;
use std::path::Path;

fn u64_at(value: &Value, pointer: &str) -> u64 {
    value
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} missing or not an integer in {value}"))
}

fn f64_at(value: &Value, pointer: &str) -> f64 {
    value
        .pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{pointer} missing or not a number in {value}"))
}

/// The checks every run result must pass: everything produced was consumed,
/// rates are positive, percentiles are ordered.
fn check_run_result(result: &Value, expected_label: &str) {
    assert_eq!(result["label"], expected_label);
    assert_eq!(u64_at(result, "/errors"), 0, "{}", result["error_samples"]);
    let produced = u64_at(result, "/total_produced_messages");
    assert!(produced > 0);
    assert_eq!(produced, u64_at(result, "/total_consumed_messages"));
    assert!(u64_at(result, "/produce/messages") > 0);
    assert!(f64_at(result, "/produce/msgs_per_s") > 0.0);
    assert!(f64_at(result, "/produce/mb_per_s") > 0.0);
    assert!(f64_at(result, "/consume/msgs_per_s") > 0.0);
    assert!(f64_at(result, "/measured_duration_s") >= 1.0);
    for latency in ["/publish_latency_us", "/end_to_end_latency_us"] {
        let p50 = u64_at(result, &format!("{latency}/p50_us"));
        let p99 = u64_at(result, &format!("{latency}/p99_us"));
        let max = u64_at(result, &format!("{latency}/max_us"));
        assert!(u64_at(result, &format!("{latency}/count")) > 0, "{latency}");
        assert!(
            0 < p50 && p50 <= p99 && p99 <= max,
            "{latency}: p50 {p50} p99 {p99} max {max}"
        );
    }
    assert!(!result["series"].as_array().unwrap().is_empty());
}

fn run_args(bootstrap: &str, dir: &Path, name: &str) -> Vec<String> {
    [
        "run",
        "--bootstrap",
        bootstrap,
        "--partitions",
        "4",
        "--message-size",
        "256",
        "--producers",
        "2",
        "--consumers",
        "2",
        "--rate",
        "3000",
        "--warmup-s",
        "0",
        "--duration-s",
        "2",
        "--quiet",
        "--label",
        name,
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        "--out".to_string(),
        dir.join(format!("{name}.json")).display().to_string(),
    ])
    .collect()
}

#[test]
fn run_twice_then_report() {
    let rill = start_rill();
    let dir = scratch_dir();
    let html_a = dir.path().join("a.html");
    let mut args = run_args(&rill.addr, dir.path(), "a");
    args.extend(["--html".into(), html_a.display().to_string()]);
    let output = bench(&args);
    assert!(String::from_utf8_lossy(&output.stdout).contains("prod msg/s"));
    let a = read_json(&dir.path().join("a.json"));
    check_run_result(&a, "a");
    // 3000 msg/s of 256 bytes: produced bytes follow from the count.
    assert_eq!(
        u64_at(&a, "/produce/bytes"),
        u64_at(&a, "/produce/messages") * 256
    );
    let html = std::fs::read_to_string(&html_a).unwrap();
    assert!(html.contains("<svg"), "no <svg in the run's HTML");

    // A second run, keyed and compressed, for the report.
    let mut args = run_args(&rill.addr, dir.path(), "b");
    args.extend(["--keys", "round-robin", "--compression", "zstd"].map(String::from));
    bench(&args);
    let b = read_json(&dir.path().join("b.json"));
    check_run_result(&b, "b");
    assert_eq!(b["workload"]["compression"], "zstd");

    let report_html = dir.path().join("report.html");
    let output = bench([
        "report".to_string(),
        dir.path().join("a.json").display().to_string(),
        dir.path().join("b.json").display().to_string(),
        "--html".to_string(),
        report_html.display().to_string(),
    ]);
    let table = String::from_utf8_lossy(&output.stdout);
    let rows: Vec<&str> = table.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(rows.len(), 3, "header and two rows:\n{table}");
    assert!(
        rows[1].starts_with('a') && rows[2].starts_with('b'),
        "{table}"
    );
    assert!(
        rows[1].contains("1.00x"),
        "first row is the baseline:\n{table}"
    );
    let html = std::fs::read_to_string(&report_html).unwrap();
    assert!(html.contains("<svg"), "no <svg in the report's HTML");
}

#[test]
fn compare_two_brokers() {
    let first = start_rill();
    let second = start_rill();
    let dir = scratch_dir();
    let out = dir.path().join("compare.json");
    let html = dir.path().join("compare.html");
    let output = bench([
        "compare",
        "--target",
        &format!("first={}", first.addr),
        "--target",
        &format!("second={}", second.addr),
        "--rounds",
        "1",
        "--partitions",
        "2",
        "--message-size",
        "128",
        "--rate",
        "2000",
        "--warmup-s",
        "0",
        "--duration-s",
        "2",
        "--quiet",
        "--out",
        &out.display().to_string(),
        "--html",
        &html.display().to_string(),
    ]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("thr/first"));
    let report = read_json(&out);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    check_run_result(&runs[0], "first");
    check_run_result(&runs[1], "second");
    assert_eq!(runs[0]["bootstrap"], first.addr.as_str());
    assert_eq!(runs[1]["bootstrap"], second.addr.as_str());
    let ratios = report["ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 2);
    for ratio in ratios {
        assert_eq!(ratio["baseline"], "first");
        for field in [
            "produce_throughput_ratio",
            "consume_throughput_ratio",
            "publish_p50_ratio",
            "publish_p99_ratio",
            "end_to_end_p99_ratio",
        ] {
            let value = ratio[field]
                .as_f64()
                .unwrap_or_else(|| panic!("{field} missing: {ratio}"));
            assert!(value.is_finite() && value > 0.0, "{field} = {value}");
        }
    }
    assert_eq!(f64_at(&report, "/ratios/0/produce_throughput_ratio"), 1.0);
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
}

#[test]
fn disk_sequential_and_random() {
    let dir = scratch_dir();
    let out = dir.path().join("disk.json");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let output = bench([
        "disk",
        "--path",
        &data.display().to_string(),
        "--block-sizes",
        "4k,64k",
        "--queue-depths",
        "1,4",
        "--sync",
        "none",
        "--duration-s",
        "0.2",
        "--file-size",
        "8m",
        "--out",
        &out.display().to_string(),
    ]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("sequential / random"));
    let report = read_json(&out);
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2 * 2 * 2);
    for pattern in ["sequential", "random"] {
        let of_pattern: Vec<&Value> = cells.iter().filter(|c| c["pattern"] == pattern).collect();
        assert_eq!(of_pattern.len(), 4, "{pattern}");
        for cell in of_pattern {
            let writes = u64_at(cell, "/writes");
            assert!(writes > 0, "{cell}");
            assert_eq!(
                u64_at(cell, "/bytes"),
                writes * u64_at(cell, "/block_size_bytes")
            );
            assert!(f64_at(cell, "/mb_per_s") > 0.0 && f64_at(cell, "/iops") > 0.0);
            let p50 = u64_at(cell, "/latency_us/p50_us");
            assert!(
                0 < p50 && p50 <= u64_at(cell, "/latency_us/max_us"),
                "{cell}"
            );
        }
    }
    let ratios = report["ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 4);
    for ratio in ratios {
        let value = f64_at(ratio, "/sequential_over_random");
        assert!(value.is_finite() && value > 0.0, "{ratio}");
    }
    // The test file is removed afterwards.
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0);
}

#[test]
fn fetch_path_all_three_send_paths() {
    let dir = scratch_dir();
    let out = dir.path().join("fetch-path.json");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let output = bench([
        "fetch-path",
        "--rill-bin",
        &rill_bin().display().to_string(),
        "--fill",
        "8m",
        "--partitions",
        "4",
        "--consumers",
        "2",
        "--data-dir",
        &data.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]);
    let table = String::from_utf8_lossy(&output.stdout);
    let report = read_json(&out);
    let results = report.as_array().unwrap();
    let paths: Vec<&str> = results
        .iter()
        .map(|r| r["send_path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["copy", "sendfile", "splice"], "{table}");
    let bytes = u64_at(&results[0], "/bytes");
    let messages = u64_at(&results[0], "/messages");
    assert!(bytes >= 8 << 20, "filled at least 8 MiB, drained {bytes}");
    assert_eq!(bytes, messages * 1024);
    for result in results {
        assert_eq!(u64_at(result, "/bytes"), bytes, "{result}");
        assert_eq!(u64_at(result, "/messages"), messages, "{result}");
        assert!(f64_at(result, "/mb_per_s") > 0.0, "{result}");
        assert!(f64_at(result, "/duration_s") > 0.0, "{result}");
        if let Some(cpu) = result["broker_cpu_s_per_gb"].as_f64() {
            assert!(cpu.is_finite() && cpu >= 0.0, "{result}");
        }
    }
}

/// The broker's CPU over a run's window: more than nothing, less than the
/// window's wall time on every core, and per-GB figures that follow.
fn check_broker_cpu(result: &Value) {
    let cpu_s = f64_at(result, "/broker_cpu/cpu_s");
    let wall_s = f64_at(result, "/broker_cpu/wall_s");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(
        cpu_s > 0.0 && cpu_s < wall_s * cores,
        "CPU {cpu_s} s in {wall_s} s on {cores} cores"
    );
    let gb = u64_at(result, "/produce/bytes") as f64 / 1e9;
    let per_gb = f64_at(result, "/broker_cpu/cpu_s_per_gb_produced");
    assert!((per_gb - cpu_s / gb).abs() <= 1e-6 * per_gb, "{per_gb}");
}

#[test]
fn broker_cpu_per_gb_and_the_null_sink_floor() {
    let rill = start_rill();
    let dir = scratch_dir();
    // CPU from /proc/PID/stat of the local broker.
    let mut args = run_args(&rill.addr, dir.path(), "pid");
    args.extend(["--broker-pid".to_string(), rill.pid().to_string()]);
    let output = bench(&args);
    assert!(String::from_utf8_lossy(&output.stdout).contains("s/GB produced"));
    let result = read_json(&dir.path().join("pid.json"));
    check_run_result(&result, "pid");
    check_broker_cpu(&result);
    assert!(f64_at(&result, "/broker_cpu/cpu_s_per_gb_consumed") > 0.0);

    // CPU from the broker's /metrics, then the same load against a
    // null-sink child: both sides measured, every ratio finite.
    run_against_sink(&rill, dir.path(), &[], "null-sink");
}

/// `run --against-null-sink` (plus `extra`) against `rill`: both runs
/// measured, the sink's labelled `sink_label` and free of errors, every
/// ratio finite.
fn run_against_sink(rill: &Rill, dir: &Path, extra: &[String], sink_label: &str) {
    let mut args = run_args(&rill.addr, dir, "rill");
    args.extend(["--broker-metrics", &rill.admin, "--against-null-sink"].map(String::from));
    args.extend(extra.iter().cloned());
    let output = bench(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&format!("vs {sink_label}")), "{stdout}");
    let report = read_json(&dir.join("rill.json"));
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    check_run_result(&runs[0], "rill");
    check_broker_cpu(&runs[0]);
    assert_eq!(runs[1]["label"], sink_label);
    assert_eq!(
        u64_at(&runs[1], "/errors"),
        0,
        "{}",
        runs[1]["error_samples"]
    );
    assert!(u64_at(&runs[1], "/produce/messages") > 0);
    check_broker_cpu(&runs[1]);
    for field in [
        "produce_throughput",
        "cpu_s_per_gb_produced",
        "publish_p50",
        "publish_p99",
        "publish_p99_9",
    ] {
        let ratio = f64_at(&report, &format!("/ratios/{field}"));
        assert!(ratio.is_finite() && ratio > 0.0, "{field}: {ratio}");
    }
}

#[test]
fn a_durable_sink_keeps_its_records_in_a_dir_it_removes() {
    let rill = start_rill();
    let dir = scratch_dir();
    let kept = dir.path().join("kept");
    std::fs::create_dir(&kept).unwrap();
    let floor_dir = dir.path().join("disk-floor");
    std::fs::create_dir(&floor_dir).unwrap();
    let extra = [
        "--sink-sync-dir",
        &kept.display().to_string(),
        "--disk-floor-dir",
        &floor_dir.display().to_string(),
        "--disk-floor-block",
        "64k",
        "--disk-floor-total",
        "16m",
        // Each of the 8 files laid out larger than the 2 MiB written to it,
        // as a broker's segments are.
        "--disk-floor-preallocate",
        "64m",
    ]
    .map(String::from);
    run_against_sink(&rill, dir.path(), &extra, "durable-sink");
    // The sink's and the disk floor's files went with their runs.
    assert_eq!(std::fs::read_dir(&kept).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(&floor_dir).unwrap().count(), 0);
    // The third column: the disk's own CPU per GB, and the broker over
    // the sum of both floors, which lies below its ratio to the sink alone.
    let report = read_json(&dir.path().join("rill.json"));
    assert_eq!(u64_at(&report, "/disk_floor/written_bytes"), 16 << 20);
    assert_eq!(u64_at(&report, "/disk_floor/preallocated_bytes"), 64 << 20);
    let disk = f64_at(&report, "/disk_floor/cpu_s_per_gb");
    assert!(disk.is_finite() && disk > 0.0, "disk floor {disk}");
    let vs_sum = f64_at(&report, "/ratios/cpu_s_per_gb_vs_floor_sum");
    let vs_sink = f64_at(&report, "/ratios/cpu_s_per_gb_produced");
    assert!(vs_sum.is_finite() && vs_sum > 0.0, "{vs_sum}");
    assert!(
        vs_sum < vs_sink,
        "vs the floor sum {vs_sum}, vs the sink {vs_sink}"
    );
}

/// Records a read_committed consumer reads from `topic`'s partition 0.
fn committed_records(bootstrap: &str, topic: &str) -> u64 {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "txn-cost-check")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut assignment = rdkafka::TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut records = 0;
    while std::time::Instant::now() < deadline {
        match consumer.poll(std::time::Duration::from_millis(200)) {
            Some(Ok(_)) => records += 1,
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => return records,
            _ => {}
        }
    }
    panic!("no end of {topic} within 60 s after {records} records");
}

#[test]
fn txn_cost_commits_and_aborts_with_transactions_v1_and_v2() {
    let rill = start_rill();
    let dir = scratch_dir();
    let out = dir.path().join("txn.json");
    let pid = rill.pid().to_string();
    let output = bench([
        "txn-cost",
        "--bootstrap",
        &rill.addr,
        "--topic",
        "txn-cost",
        "--records-per-txn",
        "3,50",
        "--transactions",
        "10",
        "--rounds",
        "2",
        "--abort-every",
        "2",
        "--broker-pid",
        &pid,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("broker CPU ms/txn"));
    let report = read_json(&out);
    let rows = report["rows"].as_array().unwrap();
    let versions: Vec<(u64, u64)> = rows
        .iter()
        .map(|row| (u64_at(row, "/version"), u64_at(row, "/records_per_txn")))
        .collect();
    assert_eq!(versions, [(1, 3), (2, 3), (1, 50), (2, 50)]);
    // The broker's CPU, in clock ticks: a row may read 0, not all of them.
    let cpu_ms: f64 = rows
        .iter()
        .map(|row| f64_at(row, "/broker_cpu_ms_per_txn"))
        .sum();
    assert!(cpu_ms > 0.0, "{report}");
    for row in rows {
        assert_eq!(u64_at(row, "/transactions"), 20, "{row}");
        assert!(f64_at(row, "/transactions_per_s") > 0.0);
        let p50 = u64_at(row, "/commit_latency_us/p50_us");
        assert!(0 < p50 && p50 <= u64_at(row, "/commit_latency_us/p99_us"));
    }
    // Every other transaction committed: 10 of 3 and 10 of 50 records per
    // version; the aborted ones are never read.
    assert_eq!(committed_records(&rill.addr, "txn-cost"), 2 * 10 * (3 + 50));
}

//! `rill-bench verify` end to end: the real binary starts 3 local rill
//! brokers, runs the queue workload on librdkafka for 30 s while SIGKILLing
//! a random node or a partition leader every few seconds, and checks the
//! history. The test fails on any anomaly (the binary exits 1), and also
//! unless faults were really injected and writes were acknowledged after
//! the first one, so it cannot pass with an idle nemesis or a dead
//! cluster.

mod common;

use common::{bench, read_json, rill_bin, scratch_dir};

#[test]
fn queue_workload_under_sigkill_has_no_anomaly() {
    let dir = scratch_dir();
    let out = dir.path().join("verify.json");
    let rill = rill_bin();
    let output = bench([
        "verify".as_ref(),
        "--rill".as_ref(),
        rill.as_os_str(),
        "--dir".as_ref(),
        dir.path().join("cluster").as_os_str(),
        "--brokers".as_ref(),
        "3".as_ref(),
        "--duration-s".as_ref(),
        "30".as_ref(),
        "--faults".as_ref(),
        "kill".as_ref(),
        "--fault-interval-ms".as_ref(),
        "3000".as_ref(),
        "--fault-duration-ms".as_ref(),
        "3000".as_ref(),
        "--drain-s".as_ref(),
        "20".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let result = read_json(&out);
    let summary = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        serde_json::to_string_pretty(&result).unwrap()
    );
    // The figures, for `--nocapture` and for a failure's report.
    eprintln!("{}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(result["valid"], true, "{summary}");
    assert_eq!(result["anomaly_count"], 0, "{summary}");
    for class in [
        "lost-write",
        "duplicate",
        "inconsistent-offsets",
        "poll-skip",
        "nonmonotonic-poll",
        "nonmonotonic-send",
        "unseen",
        "lost-commit",
    ] {
        assert_eq!(result["anomalies"][class]["count"], 0, "{class}: {summary}");
    }
    let faults = result["faults"].as_array().unwrap();
    assert!(faults.len() >= 2, "too few faults injected: {summary}");
    assert!(faults.iter().all(|f| f["kind"] == "kill"), "{summary}");
    assert!(
        result["acknowledged_after_first_fault"].as_u64().unwrap() > 0,
        "nothing acknowledged after the first fault: {summary}"
    );
    // Reads happened, by both kinds of consumer's operations.
    assert!(result["ops"]["send-ok"].as_u64().unwrap() > 0, "{summary}");
    assert!(result["ops"]["poll"].as_u64().unwrap() > 0, "{summary}");
    assert!(
        result["ops"]["commit-ok"].as_u64().unwrap() > 0,
        "{summary}"
    );
    assert!(result["availability"].as_f64().unwrap() > 0.0, "{summary}");
}

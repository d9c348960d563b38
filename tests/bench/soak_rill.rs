//! `rill-bench soak` against a real rill broker, briefly: 15 s sampled
//! every 3 s, with rill's cleaner ticking every second so the compacted
//! topic's small segments are cleaned while the stream runs. Checks the
//! time series (samples, RSS, records every interval, lag caught up), the
//! JSON and the SVG, and that every record produced was read, without
//! errors.

use crate::common;

use common::{bench, read_json, scratch_dir, start_rill_with};

#[test]
fn soak_samples_a_real_rill() {
    let dir = scratch_dir();
    let properties = dir.path().join("server.properties");
    // The default cleaner tick is minutes; a 15 s soak needs it sooner.
    std::fs::write(&properties, "log.retention.check.interval.ms=1000\n").unwrap();
    let rill = start_rill_with(&["--config", properties.to_str().unwrap()]);
    let out = dir.path().join("soak.json");
    let output = bench([
        "soak",
        "--bootstrap",
        &rill.addr,
        "--broker-metrics",
        &rill.admin,
        "--data-dir",
        rill.data_dir().to_str().unwrap(),
        "--duration-s",
        "15",
        "--sample-s",
        "3",
        "--partitions",
        "4",
        "--rate",
        "2000",
        "--compact-rate",
        "1000",
        "--key-space",
        "200",
        "--compact-segment-bytes",
        "64kb",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("broker RSS: first"), "{stdout}");

    let report = read_json(&out);
    let samples = report["samples"].as_array().unwrap();
    assert!(samples.len() >= 3, "{} samples", samples.len());
    for sample in samples {
        assert!(sample["rss_bytes"].as_u64().unwrap() > 0, "{sample}");
        assert!(sample["produced"].as_u64().unwrap() > 0, "{sample}");
        assert!(sample["compact_produced"].as_u64().unwrap() > 0, "{sample}");
        assert!(sample["disk_bytes"].as_u64().unwrap() > 0, "{sample}");
        assert!(sample["cpu_s"].as_f64().unwrap() > 0.0, "{sample}");
    }
    assert_eq!(report["errors"], 0, "{}", report["error_samples"]);
    // Caught up at the end: every acknowledged record was read.
    let produced = report["total_produced"].as_u64().unwrap();
    assert!(produced > 0);
    assert_eq!(report["total_consumed"].as_u64().unwrap(), produced);
    assert_eq!(report["final_lag"], 0);
    assert!(report["total_compact_produced"].as_u64().unwrap() > 0);
    // The compacted topic's segments were cleaned while it ran.
    assert!(
        report["summary"]["cleaner_passes"].as_u64().unwrap() > 0,
        "{}",
        report["summary"]
    );

    let svg = std::fs::read_to_string(out.with_extension("svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    assert_eq!(svg.matches("<polyline").count(), 3, "{svg}");
    assert!(!svg.contains("no data"), "{svg}");
}

//! `rill-bench failover --target controller` (issue #33, point 6): every
//! kill hits a partition leader that is also the active metadata
//! controller, so the survivors must elect a controller and a partition
//! leader at once. Three such kills on a 3-node cluster under acks=all
//! load: each moves the leadership to a survivor, and every acknowledged
//! record is read back. How long each took is the benchmark's figure
//! (docs/cluster-benchmarks.md), not asserted here.

use rill_tests::data_dir;
use std::process::Command;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const RILL_BENCH: &str = env!("CARGO_BIN_EXE_rill-bench");

#[test]
fn killing_the_leader_that_is_also_the_active_controller_loses_nothing() {
    let dir = data_dir();
    let out = dir.path().join("failover.json");
    let output = Command::new(RILL_BENCH)
        .args([
            "failover",
            "--brokers",
            "3",
            "--kills",
            "3",
            "--target",
            "controller",
        ])
        .args(["--settle-ms", "300", "--rill", RILL, "--dir"])
        .arg(dir.path().join("cluster"))
        .arg("--out")
        .arg(&out)
        .output()
        .expect("rill-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "rill-bench failover failed:\n{stderr}"
    );
    let text = std::fs::read_to_string(&out).expect("the report");
    let report: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(report["target"], "controller", "{report}");
    let kills = report["kills"].as_array().expect("kills");
    assert_eq!(kills.len(), 3, "{report}");
    for kill in kills {
        assert_eq!(kill["killed_controller"], true, "{kill}");
        assert_ne!(kill["new_leader"], kill["killed_node"], "{kill}");
    }
    assert!(
        report["acknowledged_records"].as_u64() > Some(0),
        "{report}"
    );
    assert_eq!(report["lost_records"], 0, "{report}");
}

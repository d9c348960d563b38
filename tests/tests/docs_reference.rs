//! The references in `docs/` that the code generates stay equal to what it
//! generates: a metric or a config key added, renamed or changed without
//! regenerating its reference fails here.

use std::process::Command;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// `docs/<file>` as committed.
fn committed(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn docs_metrics_md_is_what_the_registry_generates() {
    let output = Command::new(RILL)
        .args(["docs", "metrics"])
        .output()
        .expect("run rill docs metrics");
    assert!(output.status.success(), "{output:?}");
    let generated = String::from_utf8(output.stdout).expect("utf-8");
    assert!(
        generated.contains("| `rill_produce_latency_seconds` | summary | `quantile` |"),
        "{generated}"
    );
    assert!(
        generated == committed("metrics.md"),
        "docs/metrics.md is stale: regenerate it with `cargo run -- docs metrics > docs/metrics.md`"
    );
}

#[test]
fn docs_configuration_md_is_what_the_config_tables_generate() {
    let output = Command::new(RILL)
        .args(["docs", "config"])
        .output()
        .expect("run rill docs config");
    assert!(output.status.success(), "{output:?}");
    let generated = String::from_utf8(output.stdout).expect("utf-8");
    for row in [
        "| `--data-dir` |",
        "| `num.partitions` | int, at least 1 | `1` |",
        "| `log.retention.ms` | `retention.ms` | `604800000` | yes |",
        "| `cleanup.policy` |",
        "- `zookeeper.connect`",
    ] {
        assert!(generated.contains(row), "no {row:?} in:\n{generated}");
    }
    assert!(
        generated == committed("configuration.md"),
        "docs/configuration.md is stale: regenerate it with `cargo run -- docs config > docs/configuration.md`"
    );
}

//! Helpers for tests that drive Python Kafka clients (kafka-python,
//! confluent-kafka) from scripts under `tests/python/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A script under `tests/python/`.
pub fn python_script(name: &str) -> PathBuf {
    // This crate's manifest is `tests/Cargo.toml`.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
}

/// Fails (never skips) when `python3` or kafka-python is missing: CI
/// installs both, so a missing one is a broken setup, not a reason to pass.
pub fn require_kafka_python() {
    require_python("import kafka", "kafka-python: pip install kafka-python");
}

/// Fails (never skips) when `python3` lacks confluent-kafka's
/// `ShareConsumer` (2.15+): CI installs it.
pub fn require_share_consumer() {
    require_python(
        "from confluent_kafka import ShareConsumer",
        "confluent-kafka 2.16.1 or later: pip install confluent-kafka",
    );
}

/// Fails unless `python3 -c statement` succeeds, naming what to install.
fn require_python(statement: &str, what: &str) {
    let found = Command::new("python3")
        .args(["-c", statement])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(found, "these tests need python3 with {what}");
}

/// `share_groups.py BOOTSTRAP args...` (confluent-kafka's ShareConsumer):
/// its last line of output, or what it printed when it failed.
pub fn try_share_groups(bootstrap: &str, args: &[&str]) -> Result<String, String> {
    require_share_consumer();
    let output = Command::new("python3")
        .arg(python_script("share_groups.py"))
        .arg(bootstrap)
        .args(args)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default().trim().to_owned();
    if output.status.success() {
        Ok(last)
    } else {
        Err(format!(
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// [`try_share_groups`], which must succeed; its output as JSON where it
/// is.
pub fn share_groups(bootstrap: &str, args: &[&str]) -> serde_json::Value {
    let out = try_share_groups(bootstrap, args)
        .unwrap_or_else(|failure| panic!("share_groups.py {args:?}: {failure}"));
    serde_json::from_str(&out).unwrap_or(serde_json::Value::String(out))
}

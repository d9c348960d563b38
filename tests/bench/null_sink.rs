//! `rill-bench null-sink` as a real process, with a produce-only `rill-bench
//! run` against it: the harness's ceiling measurement works end to end.

use crate::common;

use common::{bench, read_json, scratch_dir, BENCH_BIN};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The sink child process, killed on drop.
struct Sink {
    child: Child,
    addr: String,
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `rill-bench null-sink` on a free port; the address is read from the
/// line it prints once it listens.
fn start_sink() -> Sink {
    let mut child = Command::new(BENCH_BIN)
        .args(["null-sink", "--listen", "127.0.0.1:0", "--partitions", "16"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start rill-bench null-sink");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listen line");
    let addr = line
        .trim()
        .strip_prefix("null-sink listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    Sink { child, addr }
}

#[test]
fn produce_only_run_against_the_null_sink() {
    let sink = start_sink();
    let dir = scratch_dir();
    let out = dir.path().join("sink.json");
    bench([
        "run",
        "--bootstrap",
        &sink.addr,
        "--workload",
        "max-rate-100b",
        "--warmup-s",
        "0",
        "--duration-s",
        "2",
        "--consumers",
        "0",
        "--quiet",
        "--out",
        out.to_str().expect("utf-8 path"),
    ]);
    let result = read_json(&out);
    assert_eq!(result["errors"], 0, "{}", result["error_samples"]);
    let produced = result["produce"]["messages"].as_u64().unwrap_or(0);
    assert!(produced > 0, "no messages produced: {result}");
    assert!(result["produce"]["msgs_per_s"].as_f64().unwrap_or(0.0) > 0.0);
    assert_eq!(result["total_consumed_messages"], Value::from(0));
    assert!(result["publish_latency_us"]["count"].as_u64().unwrap_or(0) > 0);
}

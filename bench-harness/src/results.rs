//! The JSON result of one run: the workload, tool version, host facts (from
//! /proc), throughput, latency percentiles and histograms, and the
//! per-second series.

use crate::broker_cpu::BrokerCpu;
use crate::error::Result;
use crate::stats::{HistogramData, Percentiles, SecondSample};
use crate::workload::Workload;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Facts about the machine that ran the harness.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
    pub memory_total_kb: u64,
}

impl HostFacts {
    /// Reads /proc; anything missing stays empty rather than failing a run.
    pub fn collect() -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        HostFacts {
            hostname: read("/proc/sys/kernel/hostname"),
            cpu_model: field_of(&cpuinfo, "model name").unwrap_or_default(),
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel: read("/proc/sys/kernel/osrelease"),
            memory_total_kb: field_of(&meminfo, "MemTotal")
                .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
                .unwrap_or(0),
        }
    }
}

/// The value of the first `key : value` line in a /proc text file.
pub fn field_of(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name.trim() == key).then(|| value.trim().to_string())
    })
}

/// Totals and rates of one direction (produce or consume).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub messages: u64,
    pub bytes: u64,
    pub msgs_per_s: f64,
    pub mb_per_s: f64,
}

impl Throughput {
    pub fn new(messages: u64, bytes: u64, duration_s: f64) -> Self {
        let duration_s = duration_s.max(1e-9);
        Throughput {
            messages,
            bytes,
            msgs_per_s: messages as f64 / duration_s,
            mb_per_s: bytes as f64 / duration_s / 1_000_000.0,
        }
    }
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// A short name for tables and plots (defaults to the bootstrap address).
    pub label: String,
    pub tool_version: String,
    pub started_unix_s: u64,
    pub bootstrap: String,
    pub workload: Workload,
    pub host: HostFacts,
    pub measured_duration_s: f64,
    pub produce: Throughput,
    pub consume: Throughput,
    pub publish_latency_us: Percentiles,
    pub end_to_end_latency_us: Percentiles,
    pub publish_latency_histogram: HistogramData,
    pub end_to_end_latency_histogram: HistogramData,
    pub backlog_messages_end: i64,
    pub backlog_messages_max: i64,
    /// For backlog workloads: seconds from consumer start to backlog < 1 s of production.
    pub backlog_drain_s: Option<f64>,
    /// Whole run including warm-up and drain: what a correctness check compares.
    pub total_produced_messages: u64,
    pub total_consumed_messages: u64,
    pub errors: u64,
    pub error_samples: Vec<String>,
    pub series: Vec<SecondSample>,
    /// The broker's CPU over the measurement window, when a source
    /// (`--broker-pid`, `--broker-metrics`) was given.
    pub broker_cpu: Option<BrokerCpu>,
}

impl RunResult {
    pub fn save(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_vec_pretty(self)?)?;
        Ok(())
    }

    pub fn load(path: &Path) -> Result<RunResult> {
        Ok(serde_json::from_slice(&std::fs::read(path)?)?)
    }

    /// Loads a file holding one result (`run`), a list of them, or a
    /// `compare` report (its `runs`).
    pub fn load_many(path: &Path) -> Result<Vec<RunResult>> {
        #[derive(Deserialize)]
        struct Runs {
            runs: Vec<RunResult>,
        }
        let bytes = std::fs::read(path)?;
        if let Ok(runs) = serde_json::from_slice::<Vec<RunResult>>(&bytes) {
            return Ok(runs);
        }
        if let Ok(report) = serde_json::from_slice::<Runs>(&bytes) {
            return Ok(report.runs);
        }
        Ok(vec![serde_json::from_slice(&bytes)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_parsed() {
        let text = "processor\t: 0\nmodel name\t: Test CPU @ 3GHz\n";
        assert_eq!(
            field_of(text, "model name").as_deref(),
            Some("Test CPU @ 3GHz")
        );
        assert_eq!(field_of(text, "missing"), None);
        let facts = HostFacts::collect();
        assert!(facts.cores >= 1);
        assert!(!facts.kernel.is_empty());
    }

    #[test]
    fn json_round_trip() {
        let result = RunResult {
            label: "a".into(),
            produce: Throughput::new(1000, 1_000_000, 2.0),
            series: vec![SecondSample {
                elapsed_s: 1.0,
                produce_msgs_per_s: 500.0,
                ..SecondSample::default()
            }],
            backlog_drain_s: Some(1.5),
            ..RunResult::default()
        };
        assert_eq!(result.produce.msgs_per_s, 500.0);
        assert_eq!(result.produce.mb_per_s, 0.5);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        result.save(&path).unwrap();
        assert_eq!(RunResult::load(&path).unwrap(), result);
        assert_eq!(RunResult::load_many(&path).unwrap(), vec![result.clone()]);
        let list = dir.path().join("list.json");
        std::fs::write(
            &list,
            serde_json::to_vec(&vec![result.clone(), result.clone()]).unwrap(),
        )
        .unwrap();
        assert_eq!(RunResult::load_many(&list).unwrap().len(), 2);
    }
}

//! `rill-bench run --against-null-sink`: the same workload against the
//! broker and then against a `rill-bench null-sink` started for it, in one
//! invocation, and the broker's ratio to that floor: CPU seconds per GB
//! produced, and publish latency p50 / p99 / p99.9.
//!
//! The sink is a child process (this binary's `null-sink` subcommand on a
//! free port), so its CPU is its own `/proc/PID/stat` and shares no
//! threads with the load generator — simpler and more exact than timing
//! a sink thread inside this process. The sink serves no records, so its
//! side runs produce-only (no consumers): the CPU ratio is per GB
//! produced, and the broker's figure includes serving the workload's
//! consumers (`--consumers 0` makes both sides produce-only).
//!
//! `--sink-sync-dir DIR` makes the sink durable (`null-sink --sync-dir`):
//! it writes and `fdatasync`s every produce before answering, in a fresh
//! directory under DIR removed afterwards: what the simplest durable
//! server costs, beside a broker under the fsync policy.

use crate::broker_cpu::CpuSource;
use crate::disk_floor::{measure, prepare_dir, DiskFloor, DiskFloorPlan};
use crate::error::{BenchError, Result};
use crate::results::RunResult;
use crate::runner::{run_workload, RunOptions};
use crate::workload::Workload;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

/// Label of the sink's run in tables and JSON.
pub const SINK_LABEL: &str = "null-sink";
/// Label of the sink's run with `--sink-sync-dir`.
pub const DURABLE_SINK_LABEL: &str = "durable-sink";

/// A `rill-bench null-sink` child; killed when dropped (and by the kernel
/// if this process dies first: `PR_SET_PDEATHSIG`).
pub struct NullSinkProcess {
    child: Child,
    /// Kept open: the sink may write to stdout after its first line.
    _stdout: BufReader<ChildStdout>,
    pub addr: String,
}

impl NullSinkProcess {
    /// Starts the sink on a free loopback port and waits for the line
    /// that names it; with `sync_dir`, a durable sink keeping its records
    /// there.
    pub fn start(partitions: u32, sync_dir: Option<&Path>) -> Result<Self> {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .args(["null-sink", "--listen", "127.0.0.1:0", "--partitions"])
            .arg(partitions.max(1).to_string());
        if let Some(dir) = sync_dir {
            command.arg("--sync-dir").arg(dir);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: prctl is async-signal-safe and touches no memory of ours;
        // it runs in the forked child before exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err(BenchError::Other("null-sink stdout not piped".into()));
        };
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let addr = line
            .trim()
            .strip_prefix("null-sink listening on ")
            .map(str::to_string);
        let sink = NullSinkProcess {
            child,
            _stdout: stdout,
            addr: addr.unwrap_or_default(),
        };
        if sink.addr.is_empty() {
            return Err(BenchError::Other(format!(
                "null-sink did not start: {line:?}"
            )));
        }
        Ok(sink)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for NullSinkProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The broker's figures over the sink's; `None` where the sink's is zero
/// or missing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FloorRatios {
    pub produce_throughput: Option<f64>,
    pub cpu_s_per_gb_produced: Option<f64>,
    pub publish_p50: Option<f64>,
    pub publish_p99: Option<f64>,
    pub publish_p99_9: Option<f64>,
    /// The broker's CPU per GB over the floors' sum: the sink's and the
    /// disk's own (with `--disk-floor-dir`).
    #[serde(default)]
    pub cpu_s_per_gb_vs_floor_sum: Option<f64>,
}

/// What `run --against-null-sink` writes: the broker's run, the sink's
/// run (`runs`, so `rill-bench report` reads it) and the ratios.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorReport {
    pub workload: String,
    pub runs: Vec<RunResult>,
    pub ratios: FloorRatios,
    /// The disk's own CPU per GB, when measured (`--disk-floor-dir`).
    #[serde(default)]
    pub disk_floor: Option<DiskFloor>,
}

/// Runs `workload` against `bootstrap` (CPU from `options.broker_cpu`),
/// then produce-only against a fresh null-sink (durable, keeping its
/// records in a new directory under `sink_sync_dir`, if given), then the
/// disk floor (`disk_floor`, if given).
pub async fn run_against_null_sink(
    bootstrap: &str,
    workload: &Workload,
    options: &RunOptions,
    sink_sync_dir: Option<&Path>,
    disk_floor: Option<&DiskFloorPlan>,
) -> Result<FloorReport> {
    if options.broker_cpu.is_none() {
        return Err(BenchError::Workload(
            "--against-null-sink needs the broker's CPU: --broker-pid or --broker-metrics".into(),
        ));
    }
    // The scratch directories exist (or fail) before the runs, not after
    // minutes of them.
    for dir in sink_sync_dir
        .into_iter()
        .chain(disk_floor.map(|p| p.dir.as_path()))
    {
        prepare_dir(dir)?;
    }
    let broker = run_workload(bootstrap, workload, options).await?;
    // Removed when dropped, after the sink is.
    let kept = sink_sync_dir
        .map(|dir| {
            tempfile::Builder::new()
                .prefix("durable-sink-")
                .tempdir_in(dir)
        })
        .transpose()?;
    let sink = NullSinkProcess::start(
        workload.partitions_per_topic,
        kept.as_ref().map(|dir| dir.path()),
    )?;
    let label = match kept {
        Some(_) => DURABLE_SINK_LABEL,
        None => SINK_LABEL,
    };
    let sink_workload = Workload {
        consumers_per_topic: 0,
        ..workload.clone()
    };
    let sink_options = RunOptions {
        label: Some(label.to_string()),
        topics: None,
        quiet: options.quiet,
        broker_cpu: Some(CpuSource::Pid(sink.pid())),
        ..RunOptions::default()
    };
    let floor = run_workload(&sink.addr, &sink_workload, &sink_options).await?;
    drop(sink);
    drop(kept);
    let disk_floor = match disk_floor {
        Some(plan) => {
            let plan = plan.clone();
            let measured = tokio::task::spawn_blocking(move || measure(&plan))
                .await
                .map_err(|e| BenchError::Other(format!("the disk floor did not finish: {e}")))?;
            Some(measured?)
        }
        None => None,
    };
    let mut ratios = ratios(&broker, &floor);
    ratios.cpu_s_per_gb_vs_floor_sum = vs_floor_sum(&broker, &floor, disk_floor.as_ref());
    Ok(FloorReport {
        workload: workload.name.clone(),
        ratios,
        runs: vec![broker, floor],
        disk_floor,
    })
}

/// The broker's CPU per GB produced over (the sink's + the disk's own).
pub fn vs_floor_sum(broker: &RunResult, sink: &RunResult, disk: Option<&DiskFloor>) -> Option<f64> {
    let cpu = |run: &RunResult| run.broker_cpu.as_ref()?.cpu_s_per_gb_produced;
    let sum = cpu(sink)? + disk?.cpu_s_per_gb;
    let broker = cpu(broker)?;
    (sum > 0.0).then(|| broker / sum)
}

/// `broker / sink` for each figure.
pub fn ratios(broker: &RunResult, sink: &RunResult) -> FloorRatios {
    let divide = |value: f64, base: f64| (base > 0.0).then(|| value / base);
    let cpu = |run: &RunResult| run.broker_cpu.as_ref()?.cpu_s_per_gb_produced;
    let latency = |run: &RunResult| {
        let p = &run.publish_latency_us;
        [p.p50_us as f64, p.p99_us as f64, p.p99_9_us as f64]
    };
    let (ours, floor) = (latency(broker), latency(sink));
    FloorRatios {
        produce_throughput: divide(broker.produce.mb_per_s, sink.produce.mb_per_s),
        cpu_s_per_gb_produced: cpu(broker)
            .zip(cpu(sink))
            .and_then(|(ours, floor)| divide(ours, floor)),
        publish_p50: divide(ours[0], floor[0]),
        publish_p99: divide(ours[1], floor[1]),
        publish_p99_9: divide(ours[2], floor[2]),
        cpu_s_per_gb_vs_floor_sum: None,
    }
}

/// The side-by-side lines printed after the run table.
pub fn summary(report: &FloorReport) -> String {
    let [broker, sink] = &report.runs[..] else {
        return String::new();
    };
    let cpu = |run: &RunResult| {
        run.broker_cpu
            .as_ref()
            .and_then(|c| c.cpu_s_per_gb_produced)
    };
    let number = |value: Option<f64>, digits: usize| {
        value.map_or("-".to_string(), |v| format!("{v:.digits$}"))
    };
    let ratio = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{v:.2}x"));
    let r = &report.ratios;
    let p = |run: &RunResult| run.publish_latency_us.clone();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<22} {:>12} {:>12} {:>10}",
        format!("vs {}", sink.label),
        broker.label,
        sink.label,
        "ratio"
    );
    let rows: [(&str, String, String, Option<f64>); 5] = [
        (
            "produce MB/s",
            number(Some(broker.produce.mb_per_s), 1),
            number(Some(sink.produce.mb_per_s), 1),
            r.produce_throughput,
        ),
        (
            "CPU s/GB produced",
            number(cpu(broker), 2),
            number(cpu(sink), 2),
            r.cpu_s_per_gb_produced,
        ),
        (
            "publish p50 us",
            p(broker).p50_us.to_string(),
            p(sink).p50_us.to_string(),
            r.publish_p50,
        ),
        (
            "publish p99 us",
            p(broker).p99_us.to_string(),
            p(sink).p99_us.to_string(),
            r.publish_p99,
        ),
        (
            "publish p99.9 us",
            p(broker).p99_9_us.to_string(),
            p(sink).p99_9_us.to_string(),
            r.publish_p99_9,
        ),
    ];
    for (name, ours, floor, ratio_value) in rows {
        let _ = writeln!(
            out,
            "{name:<22} {ours:>12} {floor:>12} {:>10}",
            ratio(ratio_value)
        );
    }
    if let Some(disk) = &report.disk_floor {
        out.push_str(&floor_sum_lines(disk, cpu(broker), cpu(sink), r));
    }
    out
}

/// The summary's last two lines: the disk's own CPU per GB, then the
/// broker's over the sum of the two floors.
fn floor_sum_lines(
    disk: &DiskFloor,
    broker_cpu: Option<f64>,
    sink_cpu: Option<f64>,
    ratios: &FloorRatios,
) -> String {
    let number = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{v:.2}"));
    let sum = sink_cpu.map(|sink_cpu| sink_cpu + disk.cpu_s_per_gb);
    let vs_sum = ratios
        .cpu_s_per_gb_vs_floor_sum
        .map_or("-".to_string(), |v| format!("{v:.2}x"));
    format!(
        "{:<22} {:>12} {:>12} {:>10}\n{:<22} {:>12} {:>12} {:>10}\n",
        format!("+ disk {} KiB+sync", disk.block_bytes >> 10),
        "",
        number(Some(disk.cpu_s_per_gb)),
        "",
        "CPU s/GB vs floor sum",
        number(broker_cpu),
        number(sum),
        vs_sum
    ) + &preallocation_line(disk)
}

/// A line naming the disk floor's file size when it was preallocated past
/// what it wrote (`--disk-floor-preallocate`); none otherwise.
fn preallocation_line(disk: &DiskFloor) -> String {
    let per_file = disk.written_bytes / u64::from(disk.files.max(1));
    if disk.preallocated_bytes <= per_file {
        return String::new();
    }
    format!(
        "(disk floor files preallocated to {} MiB each)\n",
        disk.preallocated_bytes >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker_cpu::BrokerCpu;

    fn run(label: &str, cpu_s: f64, p99_us: u64) -> RunResult {
        let mut run = RunResult {
            label: label.into(),
            broker_cpu: Some(BrokerCpu::new(
                "pid 1".into(),
                cpu_s,
                10.0,
                1_000_000_000,
                0,
            )),
            ..RunResult::default()
        };
        run.publish_latency_us.p50_us = p99_us / 2;
        run.publish_latency_us.p99_us = p99_us;
        run
    }

    #[test]
    fn ratios_are_broker_over_sink() {
        let ratios = ratios(&run("rill", 3.0, 4000), &run("sink", 1.5, 1000));
        assert_eq!(ratios.cpu_s_per_gb_produced, Some(2.0));
        assert_eq!(ratios.publish_p99, Some(4.0));
        assert_eq!(ratios.publish_p50, Some(4.0));
        // A zero floor gives no ratio rather than infinity.
        assert_eq!(ratios.publish_p99_9, None);
        assert_eq!(ratios.produce_throughput, None);
        let report = FloorReport {
            workload: "w".into(),
            runs: vec![run("rill", 3.0, 4000), run("sink", 1.5, 1000)],
            ratios,
            disk_floor: None,
        };
        let text = summary(&report);
        assert!(text.contains("CPU s/GB produced"), "{text}");
        assert!(text.contains("2.00x"), "{text}");
        assert!(!text.contains("floor sum"), "no disk floor, no sum: {text}");
    }

    #[test]
    fn the_floor_sum_adds_the_disk_to_the_sink_and_sits_below_the_broker() {
        let (broker, sink) = (run("rill", 3.0, 4000), run("sink", 1.0, 1000));
        let disk = DiskFloor {
            block_bytes: 256 << 10,
            files: 8,
            preallocated_bytes: 1 << 30,
            written_bytes: 1 << 30,
            cpu_s: 0.5,
            wall_s: 2.0,
            cpu_s_per_gb: 0.5,
        };
        // 3.0 / (1.0 + 0.5)
        assert_eq!(vs_floor_sum(&broker, &sink, Some(&disk)), Some(2.0));
        assert_eq!(vs_floor_sum(&broker, &sink, None), None);
        let mut ratios = ratios(&broker, &sink);
        ratios.cpu_s_per_gb_vs_floor_sum = vs_floor_sum(&broker, &sink, Some(&disk));
        let report = FloorReport {
            workload: "w".into(),
            runs: vec![broker, sink],
            ratios,
            disk_floor: Some(disk),
        };
        let text = summary(&report);
        assert!(text.contains("+ disk 256 KiB+sync"), "{text}");
        assert!(text.contains("floor sum"), "{text}");
        assert!(text.contains("1.50"), "the sum: {text}");
        assert!(text.contains("2.00x"), "{text}");
        assert!(
            text.contains("preallocated to 1024 MiB each"),
            "1 GiB files for 128 MiB written each: {text}"
        );
        let mut plain = report;
        if let Some(disk) = plain.disk_floor.as_mut() {
            disk.preallocated_bytes = 128 << 20;
        }
        assert!(
            !summary(&plain).contains("preallocated"),
            "as written: no line"
        );
    }
}

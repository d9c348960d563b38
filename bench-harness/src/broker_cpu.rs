//! The measured broker's CPU time over a run's measurement window, as CPU
//! seconds per GB produced and per GB consumed. Two sources: the broker's
//! own `process_cpu_seconds_total` on its Prometheus `/metrics` (any broker
//! that exports it, local or not), or `/proc/PID/stat` for a local process
//! (utime + stime, clock-tick resolution). GB is 10^9 bytes of record
//! values, as MB is 10^6 in the throughput figures.
//!
//! Beside the CPU, the per-request costs (issue #37) per GB produced, where
//! the source has them: context switches (rill's
//! `rill_process_context_switches_total`, or the sum over
//! `/proc/PID/task/*/status` of a local process) and fdatasyncs (rill's
//! `rill_fsyncs_total`, from `/metrics` only).

use crate::error::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long one `/metrics` scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest `/metrics` response read (a broker with many partitions lists
/// per-partition series).
const SCRAPE_MAX_BYTES: u64 = 64 << 20;

/// Where the broker's CPU seconds come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSource {
    /// utime + stime of a local process.
    Pid(u32),
    /// `process_cpu_seconds_total` at `http://ADDR/metrics` (`ADDR` is
    /// `host:port`; an `http://` prefix and a path are accepted).
    Metrics(String),
}

impl CpuSource {
    /// The process's CPU seconds so far.
    pub async fn cpu_s(&self) -> Result<f64> {
        match self {
            CpuSource::Pid(pid) => process_cpu_s(*pid)
                .ok_or_else(|| BenchError::BrokerCpu(format!("/proc/{pid}/stat unreadable"))),
            CpuSource::Metrics(addr) => {
                let text = scrape_metrics(addr).await?;
                metric_value(&text, "process_cpu_seconds_total").ok_or_else(|| {
                    BenchError::BrokerCpu(format!("no process_cpu_seconds_total at {addr}"))
                })
            }
        }
    }

    /// CPU seconds, resident memory and (from `/metrics` only) rill's
    /// cleaner and free-space series, all from one read, for a soak's
    /// samples. Memory of a local process comes from `/proc/PID/statm`.
    pub async fn sample(&self) -> Result<BrokerSample> {
        match self {
            CpuSource::Pid(pid) => Ok(BrokerSample {
                cpu_s: self.cpu_s().await?,
                rss_bytes: process_rss_bytes(*pid),
                ..BrokerSample::default()
            }),
            CpuSource::Metrics(addr) => {
                let text = scrape_metrics(addr).await?;
                let cpu_s = metric_value(&text, "process_cpu_seconds_total").ok_or_else(|| {
                    BenchError::BrokerCpu(format!("no process_cpu_seconds_total at {addr}"))
                })?;
                Ok(BrokerSample {
                    cpu_s,
                    rss_bytes: metric_value(&text, "process_resident_memory_bytes")
                        .map(|v| v as u64),
                    // Every shard sees the same file system: the smallest
                    // figure is the latest.
                    disk_free_bytes: metric_min(&text, "rill_disk_free_bytes").map(|v| v as u64),
                    cleaner_passes: metric_sum(&text, "rill_cleaner_passes_total")
                        .map(|v| v as u64),
                    cleaner_removed_bytes: metric_sum(&text, "rill_cleaner_removed_bytes_total")
                        .map(|v| v as u64),
                })
            }
        }
    }

    /// CPU seconds and, where the source has them, context switches and
    /// fdatasyncs so far.
    pub async fn counters(&self) -> Result<BrokerCounters> {
        match self {
            CpuSource::Pid(pid) => Ok(BrokerCounters {
                cpu_s: self.cpu_s().await?,
                context_switches: process_context_switches(*pid),
                fsyncs: None,
            }),
            CpuSource::Metrics(addr) => {
                let text = scrape_metrics(addr).await?;
                let cpu_s = metric_value(&text, "process_cpu_seconds_total").ok_or_else(|| {
                    BenchError::BrokerCpu(format!("no process_cpu_seconds_total at {addr}"))
                })?;
                Ok(BrokerCounters {
                    cpu_s,
                    context_switches: metric_sum(&text, "rill_process_context_switches_total")
                        .map(|v| v as u64),
                    fsyncs: metric_sum(&text, "rill_fsyncs_total").map(|v| v as u64),
                })
            }
        }
    }

    /// For results: `pid 123` or `metrics 127.0.0.1:9644`.
    pub fn describe(&self) -> String {
        match self {
            CpuSource::Pid(pid) => format!("pid {pid}"),
            CpuSource::Metrics(addr) => format!("metrics {addr}"),
        }
    }
}

/// The broker's counters at one moment (see [`CpuSource::counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BrokerCounters {
    pub cpu_s: f64,
    /// Voluntary + involuntary, every thread.
    pub context_switches: Option<u64>,
    pub fsyncs: Option<u64>,
}

/// One reading of the broker process (see [`CpuSource::sample`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BrokerSample {
    /// CPU seconds so far.
    pub cpu_s: f64,
    pub rss_bytes: Option<u64>,
    /// `rill_disk_free_bytes` (rill only).
    pub disk_free_bytes: Option<u64>,
    /// `rill_cleaner_passes_total` over the shards (rill only).
    pub cleaner_passes: Option<u64>,
    /// `rill_cleaner_removed_bytes_total` over the shards (rill only).
    pub cleaner_removed_bytes: Option<u64>,
}

/// The broker's CPU over one measurement window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BrokerCpu {
    pub source: String,
    pub cpu_s: f64,
    pub wall_s: f64,
    /// cpu_s / wall_s: how many cores the broker kept busy.
    pub cores_busy: f64,
    /// `None` when nothing was produced (consumed) in the window.
    pub cpu_s_per_gb_produced: Option<f64>,
    pub cpu_s_per_gb_consumed: Option<f64>,
    /// Context switches of the broker per GB produced (issue #37's
    /// per-request cost), where the source counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_switches_per_gb_produced: Option<f64>,
    /// fdatasyncs per GB produced (rill's `/metrics` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsyncs_per_gb_produced: Option<f64>,
}

impl BrokerCpu {
    pub fn new(
        source: String,
        cpu_s: f64,
        wall_s: f64,
        produced_bytes: u64,
        consumed_bytes: u64,
    ) -> Self {
        let per_gb = |bytes: u64| (bytes > 0).then(|| cpu_s / (bytes as f64 / 1e9));
        BrokerCpu {
            source,
            cpu_s,
            wall_s,
            cores_busy: if wall_s > 0.0 { cpu_s / wall_s } else { 0.0 },
            cpu_s_per_gb_produced: per_gb(produced_bytes),
            cpu_s_per_gb_consumed: per_gb(consumed_bytes),
            ..BrokerCpu::default()
        }
    }

    /// With the counts between two readings per GB produced (a count the
    /// source lacks at either end stays `None`).
    pub fn with_counts(
        mut self,
        start: &BrokerCounters,
        end: &BrokerCounters,
        produced_bytes: u64,
    ) -> Self {
        let gb = produced_bytes as f64 / 1e9;
        let per_gb = |a: Option<u64>, b: Option<u64>| {
            let (a, b) = (a?, b?);
            (gb > 0.0).then(|| b.saturating_sub(a) as f64 / gb)
        };
        self.context_switches_per_gb_produced =
            per_gb(start.context_switches, end.context_switches);
        self.fsyncs_per_gb_produced = per_gb(start.fsyncs, end.fsyncs);
        self
    }
}

/// Voluntary + involuntary context switches of every live thread of a
/// local process, from `/proc/PID/task/*/status` (`None` when the process
/// is not there).
pub fn process_context_switches(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0;
    for task in tasks.flatten() {
        // A thread that ended since the listing has no status any more:
        // its switches are gone from the count either way.
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        total += context_switches_of_status(&status).unwrap_or(0);
    }
    Some(total)
}

/// The two `*ctxt_switches` lines of a `status` file, added.
pub fn context_switches_of_status(status: &str) -> Option<u64> {
    let value = |key: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))?
            .trim()
            .parse()
            .ok()
    };
    Some(value("voluntary_ctxt_switches:")? + value("nonvoluntary_ctxt_switches:")?)
}

/// CPU seconds (utime + stime) of a process from /proc/PID/stat.
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_ticks(&stat).map(|ticks| ticks as f64 / clock_ticks_per_s())
}

/// utime + stime in clock ticks. Fields after the `(comm)`, which may hold
/// spaces, so split after the last `)`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Resident bytes of a process from /proc/PID/statm (second field, pages).
pub fn process_rss_bytes(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * if page > 0 { page as u64 } else { 4096 })
}

fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// `host:port` and path of `http://host:port/path`, `host:port/path` or
/// `host:port` (path `/metrics`).
fn split_url(url: &str) -> (&str, &str) {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/metrics"),
    }
}

/// The body of `GET /metrics` (HTTP/1.1, `Connection: close`).
pub async fn scrape_metrics(url: &str) -> Result<String> {
    let (addr, path) = split_url(url);
    let scrape = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream
            .take(SCRAPE_MAX_BYTES)
            .read_to_end(&mut response)
            .await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = tokio::time::timeout(SCRAPE_TIMEOUT, scrape)
        .await
        .map_err(|_| BenchError::Timeout(format!("scraping {url}")))?
        .map_err(|error| BenchError::BrokerCpu(format!("scraping {url}: {error}")))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| BenchError::BrokerCpu(format!("{url}: not an HTTP response")))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        let status = head.lines().next().unwrap_or_default();
        return Err(BenchError::BrokerCpu(format!("{url}: {status}")));
    }
    Ok(body.to_string())
}

/// The value of an unlabelled series in Prometheus text.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.split_once(' ')?;
            (series == name).then(|| value.split_whitespace().next()?.parse().ok())?
        })
}

/// Values of every series of `name` (labelled or not) in Prometheus text.
fn metric_values<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = f64> + 'a {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(move |line| {
            let (series, value) = line.rsplit_once(' ')?;
            let bare = series.split_once('{').map_or(series, |(bare, _)| bare);
            (bare == name).then(|| value.trim().parse().ok())?
        })
}

/// The sum of every series of `name`, e.g. a per-shard counter.
pub fn metric_sum(text: &str, name: &str) -> Option<f64> {
    metric_values(text, name).fold(None, |sum, v| Some(sum.unwrap_or(0.0) + v))
}

/// The smallest of every series of `name`.
pub fn metric_min(text: &str, name: &str) -> Option<f64> {
    metric_values(text, name).fold(None, |min: Option<f64>, v| {
        Some(min.map_or(v, |m| m.min(v)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_switches_are_read_and_counted_per_gb() {
        let status = "Name:\trill\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(context_switches_of_status(status), Some(127));
        assert_eq!(context_switches_of_status("Name:\tx\n"), None);
        assert!(process_context_switches(std::process::id()).is_some_and(|n| n > 0));
        let start = BrokerCounters {
            cpu_s: 1.0,
            context_switches: Some(1_000),
            fsyncs: Some(10),
        };
        let end = BrokerCounters {
            cpu_s: 2.0,
            context_switches: Some(3_000),
            fsyncs: None,
        };
        let cpu = BrokerCpu::new("x".into(), 1.0, 1.0, 500_000_000, 0).with_counts(
            &start,
            &end,
            500_000_000,
        );
        assert_eq!(cpu.context_switches_per_gb_produced, Some(4_000.0));
        assert_eq!(cpu.fsyncs_per_gb_produced, None);
    }

    #[test]
    fn parses_proc_stat_with_spaces_in_comm() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        let stat = "1234 (rill serve) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(300));
        assert!(process_cpu_s(std::process::id()).is_some());
    }

    #[test]
    fn prometheus_values_and_urls() {
        let text = "# HELP process_cpu_seconds_total x\n# TYPE process_cpu_seconds_total counter\n\
                    process_cpu_seconds_total_extra 9\nprocess_cpu_seconds_total 12.5\n\
                    rill_x{shard=\"0\"} 3\n";
        assert_eq!(metric_value(text, "process_cpu_seconds_total"), Some(12.5));
        assert_eq!(metric_value(text, "missing"), None);
        let shards = "rill_x{shard=\"0\"} 3\nrill_x{shard=\"1\"} 4\nrill_xy 9\n";
        assert_eq!(metric_sum(shards, "rill_x"), Some(7.0));
        assert_eq!(metric_min(shards, "rill_x"), Some(3.0));
        assert_eq!(metric_sum(shards, "missing"), None);
        assert!(process_rss_bytes(std::process::id()).is_some_and(|b| b > 0));
        assert_eq!(split_url("127.0.0.1:9644"), ("127.0.0.1:9644", "/metrics"));
        assert_eq!(split_url("http://h:1/m"), ("h:1", "/m"));
    }

    #[test]
    fn per_gb_figures() {
        let cpu = BrokerCpu::new("pid 1".into(), 3.0, 10.0, 2_000_000_000, 0);
        assert_eq!(cpu.cpu_s_per_gb_produced, Some(1.5));
        assert_eq!(cpu.cpu_s_per_gb_consumed, None);
        assert!((cpu.cores_busy - 0.3).abs() < 1e-9);
    }
}

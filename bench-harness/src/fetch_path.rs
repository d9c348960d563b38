//! `fetch-path`: rill's fetch send paths (copy, sendfile, splice) side by
//! side. With `--rill-bin` it starts `rill serve ... --fetch-send-path P`
//! for each path on one data directory, fills a topic once, and drains it
//! with the same consumers each time; with `--bootstrap` it measures a
//! running broker. Broker CPU seconds per GB come from /proc/PID/stat
//! (utime + stime); read/write-class syscalls per GB from /proc/PID/io
//! (`syscr + syscw`, which counts read, write, sendfile and splice calls;
//! omitted when unreadable).

use crate::broker_cpu::process_cpu_s;
use crate::error::{BenchError, Result};
use crate::kafka::client::{
    create_topics, list_offsets, wait_for_leaders, ConnectionPool, LATEST_TIMESTAMP,
};
use crate::kafka::connection::Connection;
use crate::runner::consumer::{assign_direct, run_consumer, Assignment, ConsumerSpec};
use crate::runner::producer::{run_producer, ProducerSpec};
use crate::runner::random_payload;
use crate::stats::Recorder;
use crate::workload::{parse_bytes, MessageSize, StartOffset, Workload};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Args)]
pub struct FetchPathArgs {
    /// The rill binary; rill is started once per send path.
    #[arg(long)]
    pub rill_bin: Option<PathBuf>,
    /// A running broker instead of `--rill-bin` (one measurement, "as-running").
    #[arg(long)]
    pub bootstrap: Option<String>,
    /// PID of the running broker, for CPU and syscall figures with `--bootstrap`.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    #[arg(long, default_value = "copy,sendfile,splice")]
    pub paths: String,
    /// How much to put in the topic, e.g. 256m.
    #[arg(long, default_value = "256m")]
    pub fill: String,
    #[arg(long, default_value = "1kb")]
    pub message_size: String,
    #[arg(long, default_value_t = 16)]
    pub partitions: u32,
    #[arg(long, default_value_t = 4)]
    pub consumers: u32,
    /// Drop the page cache before each measurement (needs root).
    #[arg(long)]
    pub cold: bool,
    /// Data directory for the started brokers (default: a fresh temp dir).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    #[arg(long, default_value = "rill-bench-fetch-path.json")]
    pub out: PathBuf,
}

/// One send path's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathResult {
    pub send_path: String,
    pub messages: u64,
    pub bytes: u64,
    pub duration_s: f64,
    pub mb_per_s: f64,
    pub broker_cpu_s_per_gb: Option<f64>,
    pub broker_syscalls_per_gb: Option<f64>,
    pub cold: bool,
}

/// `syscr + syscw` from /proc/PID/io, if readable.
pub fn process_syscalls(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    parse_io_syscalls(&io)
}

pub fn parse_io_syscalls(io: &str) -> Option<u64> {
    let syscr: u64 = crate::results::field_of(io, "syscr")?.parse().ok()?;
    let syscw: u64 = crate::results::field_of(io, "syscw")?.parse().ok()?;
    Some(syscr + syscw)
}

/// A rill process we started; killed when dropped.
struct Broker {
    child: Child,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_rill(bin: &Path, data_dir: &Path, send_path: &str) -> Result<(Broker, String)> {
    // A free admin port too: the default one may be taken by another broker.
    let ports = crate::ports::free_ports(2)?;
    let addr = format!("127.0.0.1:{}", ports[0]);
    let admin = format!("127.0.0.1:{}", ports[1]);
    let child = Command::new(bin)
        .args([
            "serve",
            "--listen",
            &addr,
            "--admin-listen",
            &admin,
            "--data-dir",
        ])
        .arg(data_dir)
        .args(["--fetch-send-path", send_path])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| BenchError::Other(format!("start {}: {e}", bin.display())))?;
    let broker = Broker { child };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect(&addr).await.is_ok() {
            return Ok((broker, addr));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(BenchError::Timeout(format!("rill listening on {addr}")))
}

fn drop_page_cache() -> Result<()> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| BenchError::Other(format!("--cold needs root to drop the page cache: {e}")))
}

const TOPIC: &str = "rill-bench-fetch-path";

fn workload(args: &FetchPathArgs) -> Result<Workload> {
    let workload = Workload {
        name: "fetch-path".into(),
        partitions_per_topic: args.partitions,
        message_size: MessageSize::parse(&args.message_size)?,
        producer_rate_msgs_per_s: 0,
        producers_per_topic: 4,
        consumers_per_topic: args.consumers,
        batch_size_bytes: 256 * 1024,
        // A small window keeps the fill from overshooting `--fill` by much.
        max_in_flight_per_producer: 4,
        ..Workload::default()
    };
    workload.validate()?;
    Ok(workload)
}

/// Produces until `fill_bytes` are acknowledged.
async fn fill_topic(addr: &str, workload: &Workload, fill_bytes: u64) -> Result<u64> {
    let connection = Connection::connect(addr, "rill-bench-fill").await?;
    let topics = vec![TOPIC.to_string()];
    create_topics(
        &connection,
        "rill-bench-fill",
        &topics,
        workload.partitions_per_topic,
        1,
    )
    .await?;
    let metadata = wait_for_leaders(&connection, &topics, Duration::from_secs(30)).await?;
    let recorder = Arc::new(Recorder::default());
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(workload.clone());
    let payload = random_payload(workload.message_size.max_bytes() as usize + 64 * 1024);
    let mut producers = Vec::new();
    for id in 0..workload.producers_per_topic {
        producers.push(tokio::spawn(run_producer(ProducerSpec {
            id,
            bootstrap: addr.to_string(),
            refresh: Arc::new(AtomicBool::new(false)),
            topic: TOPIC.into(),
            leaders: metadata.topics[0].leaders.clone(),
            pool: ConnectionPool::new(format!("rill-bench-fill-{id}"), metadata.brokers.clone()),
            workload: shared.clone(),
            rate_msgs_per_s: 0.0,
            recorder: recorder.clone(),
            stop: stop.clone(),
            payload: payload.clone(),
        })));
    }
    while recorder.counters().produced_bytes < fill_bytes && recorder.counters().errors == 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for producer in producers {
        producer
            .await
            .map_err(|e| BenchError::Other(format!("fill: {e}")))??;
    }
    if recorder.counters().errors > 0 {
        return Err(BenchError::Other(format!(
            "fill failed: {:?}",
            recorder.error_samples()
        )));
    }
    Ok(recorder.counters().produced_bytes)
}

/// Drains the topic from earliest to the current end, timed.
async fn drain_topic(addr: &str, workload: &Workload) -> Result<(u64, u64, f64)> {
    let connection = Connection::connect(addr, "rill-bench-drain").await?;
    let topics = vec![TOPIC.to_string()];
    let metadata = wait_for_leaders(&connection, &topics, Duration::from_secs(30)).await?;
    let all: Vec<Assignment> = metadata.topics[0]
        .leaders
        .iter()
        .enumerate()
        .map(|(partition, &leader)| Assignment {
            topic: TOPIC.into(),
            partition: partition as i32,
            leader,
        })
        .collect();
    let mut end_offsets = HashMap::new();
    let mut pool = ConnectionPool::new("rill-bench-drain-offsets".into(), metadata.brokers.clone());
    for assignment in &all {
        let leader = pool.get(assignment.leader).await?;
        end_offsets.extend(
            list_offsets(
                &leader,
                &[(TOPIC.to_string(), assignment.partition)],
                LATEST_TIMESTAMP,
            )
            .await?,
        );
    }
    let recorder = Arc::new(Recorder::default());
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(workload.clone());
    let consumers = workload.consumers_per_topic.max(1) as usize;
    let (ready, _ready_rx) = tokio::sync::mpsc::channel(1024);
    let started = Instant::now();
    let mut handles = Vec::new();
    for index in 0..consumers {
        let assignments = assign_direct(&all, consumers, index);
        let ends = assignments
            .iter()
            .filter_map(|a| end_offsets.get_key_value(&(a.topic.clone(), a.partition)))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        handles.push(tokio::spawn(run_consumer(ConsumerSpec {
            assignments,
            pool: ConnectionPool::new(
                format!("rill-bench-drain-{index}"),
                metadata.brokers.clone(),
            ),
            workload: shared.clone(),
            recorder: recorder.clone(),
            stop: stop.clone(),
            start: StartOffset::Earliest,
            ready: ready.clone(),
            end_offsets: Some(ends),
        })));
    }
    drop(ready);
    for handle in handles {
        handle
            .await
            .map_err(|e| BenchError::Other(format!("drain: {e}")))??;
    }
    let counters = recorder.counters();
    Ok((
        counters.consumed_messages,
        counters.consumed_bytes,
        started.elapsed().as_secs_f64(),
    ))
}

async fn measure(
    addr: &str,
    workload: &Workload,
    send_path: &str,
    pid: Option<u32>,
    cold: bool,
) -> Result<PathResult> {
    if cold {
        drop_page_cache()?;
    }
    let cpu_before = pid.and_then(process_cpu_s);
    let syscalls_before = pid.and_then(process_syscalls);
    let (messages, bytes, duration_s) = drain_topic(addr, workload).await?;
    let gb = bytes as f64 / 1e9;
    let per_gb = |delta: f64| (gb > 0.0).then(|| delta / gb);
    let cpu_after = pid.and_then(process_cpu_s);
    let syscalls_after = pid.and_then(process_syscalls);
    Ok(PathResult {
        send_path: send_path.to_string(),
        messages,
        bytes,
        duration_s,
        mb_per_s: bytes as f64 / duration_s.max(1e-9) / 1e6,
        broker_cpu_s_per_gb: cpu_before.zip(cpu_after).and_then(|(b, a)| per_gb(a - b)),
        broker_syscalls_per_gb: syscalls_before
            .zip(syscalls_after)
            .and_then(|(b, a)| per_gb(a.saturating_sub(b) as f64)),
        cold,
    })
}

/// Runs the comparison and returns the printed table; saves JSON.
pub async fn run(args: &FetchPathArgs) -> Result<String> {
    let workload = workload(args)?;
    let fill_bytes = parse_bytes(&args.fill)?;
    let mut results = Vec::new();
    match (&args.rill_bin, &args.bootstrap) {
        (Some(bin), _) => {
            // A fresh temp dir (removed when dropped) unless one is given.
            let mut temp = None;
            let data_dir = match &args.data_dir {
                Some(dir) => dir.clone(),
                None => {
                    let dir = tempfile::Builder::new()
                        .prefix("rill-bench-fetch-path-")
                        .tempdir()?;
                    let path = dir.path().to_path_buf();
                    temp = Some(dir);
                    path
                }
            };
            let paths: Vec<&str> = args
                .paths
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect();
            // The fill runs on a broker of its own: every path then starts
            // with rill's batch cache empty and reads the segment files, as
            // a consumer catching up on a backlog does.
            {
                let (broker, addr) = start_rill(bin, &data_dir, "copy").await?;
                let filled = fill_topic(&addr, &workload, fill_bytes).await?;
                eprintln!("[fetch-path] filled {:.1} MB", filled as f64 / 1e6);
                drop(broker);
            }
            for send_path in &paths {
                let (broker, addr) = start_rill(bin, &data_dir, send_path).await?;
                let pid = broker.child.id();
                let result = measure(&addr, &workload, send_path, Some(pid), args.cold).await?;
                eprintln!("[fetch-path] {send_path}: {:.1} MB/s", result.mb_per_s);
                results.push(result);
                drop(broker);
            }
            drop(temp);
        }
        (None, Some(addr)) => {
            let filled = fill_topic(addr, &workload, fill_bytes).await?;
            eprintln!("[fetch-path] filled {:.1} MB", filled as f64 / 1e6);
            results.push(measure(addr, &workload, "as-running", args.broker_pid, args.cold).await?);
        }
        (None, None) => {
            return Err(BenchError::Workload(
                "fetch-path needs --rill-bin or --bootstrap".into(),
            ))
        }
    }
    std::fs::write(&args.out, serde_json::to_vec_pretty(&results)?)?;
    Ok(table(&results))
}

pub fn table(results: &[PathResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>10} {:>10} {:>14} {:>16}",
        "send path", "MB/s", "seconds", "CPU s / GB", "syscalls / GB"
    );
    let optional = |v: Option<f64>, precision: usize| {
        v.map_or("-".to_string(), |v| format!("{v:.precision$}"))
    };
    for result in results {
        let _ = writeln!(
            out,
            "{:<12} {:>10.1} {:>10.2} {:>14} {:>16}",
            result.send_path,
            result.mb_per_s,
            result.duration_s,
            optional(result.broker_cpu_s_per_gb, 3),
            optional(result.broker_syscalls_per_gb, 0)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_io() {
        let io = "rchar: 1\nwchar: 2\nsyscr: 30\nsyscw: 12\nread_bytes: 0\n";
        assert_eq!(parse_io_syscalls(io), Some(42));
        assert_eq!(parse_io_syscalls("rchar: 1\n"), None);
    }

    #[test]
    fn table_omits_unknown_figures() {
        let result = PathResult {
            send_path: "splice".into(),
            messages: 10,
            bytes: 1_000_000,
            duration_s: 0.5,
            mb_per_s: 2.0,
            broker_cpu_s_per_gb: Some(1.25),
            broker_syscalls_per_gb: None,
            cold: false,
        };
        let text = table(&[result]);
        assert!(text.contains("splice") && text.contains("1.250"));
        assert!(text.lines().nth(1).unwrap().trim_end().ends_with('-'));
    }
}

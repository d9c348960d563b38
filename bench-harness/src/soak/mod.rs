//! `rill-bench soak`: a long mixed workload against any broker, sampled
//! every `--sample-s`, to see whether memory, latency or disk drift over
//! hours rather than seconds.
//!
//! The workload, all at once for the whole duration:
//! - producers at a fixed rate on a normal topic, and consumers reading
//!   it from its start (so every record produced should be read);
//! - keyed updates over a bounded key space on a `cleanup.policy=compact`
//!   topic with small segments, so that the broker's cleaner keeps working
//!   while the rest runs.
//!
//! Producers and consumers are the runner's ([`crate::runner`]); each
//! sample takes the interval's counters and latency histograms from their
//! [`Recorder`]s and one reading of the broker (its `/metrics` or
//! `/proc`, [`crate::broker_cpu`]).
//!
//! - [`report`]: the JSON time series and the summary.
//! - [`svg`]: RSS, produce p99 and disk use over time, one small chart each.

pub mod report;
pub mod svg;

use crate::broker_cpu::{BrokerSample, CpuSource};
use crate::error::{BenchError, Result};
use crate::kafka::client::{
    connect_any, create_topics_with_configs, wait_for_leaders, ConnectionPool, TopicLayout,
};
use crate::runner::consumer::{assign_direct, run_consumer, Assignment, ConsumerSpec};
use crate::runner::producer::{run_producer, ProducerSpec};
use crate::runner::{await_ready, random_payload, CONNECT_TIMEOUT};
use crate::stats::Recorder;
use crate::workload::{parse_bytes, KeyDistribution, MessageSize, StartOffset, Workload};
use rand::RngCore;
use report::{SoakReport, SoakSample};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How long consumers may take to read what was acknowledged after the
/// producers stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// Bootstrap list `host:port[,host:port...]`.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// How long to run, in minutes.
    #[arg(long, default_value_t = 60)]
    pub duration_min: u64,
    /// How long to run, in seconds (instead of --duration-min; tests).
    #[arg(long)]
    pub duration_s: Option<u64>,
    /// Seconds between two samples.
    #[arg(long, default_value_t = 10)]
    pub sample_s: u64,
    /// Broker RSS and CPU from `process_resident_memory_bytes` and
    /// `process_cpu_seconds_total` at http://ADDR/metrics (rill: its
    /// --admin-listen address).
    #[arg(long, value_name = "ADDR", conflicts_with = "broker_pid")]
    pub broker_metrics: Option<String>,
    /// Broker RSS and CPU from /proc/PID of this local process.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// The broker's data dir: disk use is the bytes of the files under it.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Time series JSON; the SVG charts go beside it (`.svg`).
    #[arg(long, default_value = "rill-bench-soak.json")]
    pub out: PathBuf,
    /// Partitions of the normal topic.
    #[arg(long, default_value_t = 8)]
    pub partitions: u32,
    #[arg(long, default_value_t = 2)]
    pub producers: u32,
    #[arg(long, default_value_t = 2)]
    pub consumers: u32,
    /// Messages per second on the normal topic, all producers together.
    #[arg(long, default_value_t = 5_000)]
    pub rate: u64,
    /// Value size: `1024`, `1kb` or `100..2000`.
    #[arg(long, default_value = "1kb")]
    pub message_size: String,
    /// Partitions of the compacted topic.
    #[arg(long, default_value_t = 2)]
    pub compact_partitions: u32,
    /// Keyed updates per second on the compacted topic.
    #[arg(long, default_value_t = 1_000)]
    pub compact_rate: u64,
    /// Distinct keys of the compacted topic.
    #[arg(long, default_value_t = 1_000)]
    pub key_space: u64,
    /// `segment.bytes` of the compacted topic: small, so that segments
    /// seal (only sealed ones are cleaned) and the cleaner runs often.
    #[arg(long, default_value = "1mb")]
    pub compact_segment_bytes: String,
    #[arg(long, default_value = "soak")]
    pub topic_prefix: String,
    /// No progress line per sample.
    #[arg(long)]
    pub quiet: bool,
}

impl SoakArgs {
    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.duration_s.unwrap_or(self.duration_min * 60))
    }

    fn broker_source(&self) -> Option<CpuSource> {
        self.broker_pid
            .map(CpuSource::Pid)
            .or(self.broker_metrics.clone().map(CpuSource::Metrics))
    }

    /// The normal topic's workload: unkeyed, read from the start.
    fn stream_workload(&self) -> Result<Workload> {
        let workload = Workload {
            name: "soak-stream".into(),
            topics: 1,
            partitions_per_topic: self.partitions,
            message_size: MessageSize::parse(&self.message_size)?,
            key_distribution: KeyDistribution::None,
            producers_per_topic: self.producers,
            consumers_per_topic: self.consumers,
            producer_rate_msgs_per_s: self.rate,
            consumer_start: StartOffset::Earliest,
            topic_prefix: self.topic_prefix.clone(),
            ..Workload::default()
        };
        workload.validate()?;
        Ok(workload)
    }

    /// The compacted topic's workload: one producer, random keys.
    fn compact_workload(&self) -> Result<Workload> {
        let workload = Workload {
            name: "soak-compact".into(),
            topics: 1,
            partitions_per_topic: self.compact_partitions,
            message_size: MessageSize::parse(&self.message_size)?,
            key_distribution: KeyDistribution::Random,
            key_space: self.key_space,
            producers_per_topic: 1,
            consumers_per_topic: 0,
            producer_rate_msgs_per_s: self.compact_rate,
            topic_prefix: self.topic_prefix.clone(),
            ..Workload::default()
        };
        workload.validate()?;
        Ok(workload)
    }

    fn validate(&self) -> Result<()> {
        if self.sample_s == 0 {
            return Err(BenchError::Workload("--sample-s must be at least 1".into()));
        }
        if self.duration().as_secs() < self.sample_s {
            return Err(BenchError::Workload(
                "the duration must hold at least one sample".into(),
            ));
        }
        if self.rate == 0 || self.compact_rate == 0 {
            // Unpaced producers would fill the disk over a soak's hours.
            return Err(BenchError::Workload(
                "--rate and --compact-rate must be above 0".into(),
            ));
        }
        Ok(())
    }
}

/// Producer and consumer tasks of one topic.
struct Tasks {
    handles: Vec<JoinHandle<Result<()>>>,
    stop: Arc<AtomicBool>,
}

impl Tasks {
    fn new() -> Self {
        Tasks {
            handles: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Stops the tasks and waits for them; their failures count as errors.
    async fn finish(self, recorder: &Recorder, what: &str) {
        self.stop.store(true, Ordering::Relaxed);
        for handle in self.handles {
            match handle.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => recorder.record_error(format!("{what}: {error}")),
                Err(error) => recorder.record_error(format!("{what} task: {error}")),
            }
        }
    }
}

/// Runs the soak and returns its report (also written to `--out` and
/// the `.svg` beside it by [`main`]).
pub async fn run(args: &SoakArgs) -> Result<SoakReport> {
    args.validate()?;
    let stream = Arc::new(args.stream_workload()?);
    let compact = Arc::new(args.compact_workload()?);
    let broker = args.broker_source();
    if let Some(source) = &broker {
        // A wrong pid or address fails now, not after an hour.
        source.sample().await?;
    }
    let segment_bytes = parse_bytes(&args.compact_segment_bytes)?;
    let client_id = "rill-bench-soak";
    let connection = connect_any(&args.bootstrap, client_id, CONNECT_TIMEOUT).await?;
    let tag = format!("{:08x}", rand::thread_rng().next_u32());
    let stream_topic = format!("{}-{tag}-stream", args.topic_prefix);
    let compact_topic = format!("{}-{tag}-compact", args.topic_prefix);
    create_topics_with_configs(
        &connection,
        client_id,
        std::slice::from_ref(&stream_topic),
        stream.partitions_per_topic,
        stream.replication_factor,
        &stream.topic_configs(),
    )
    .await?;
    create_topics_with_configs(
        &connection,
        client_id,
        std::slice::from_ref(&compact_topic),
        compact.partitions_per_topic,
        compact.replication_factor,
        &[
            ("cleanup.policy".into(), "compact".into()),
            ("segment.bytes".into(), segment_bytes.to_string()),
        ],
    )
    .await?;
    let topics = [stream_topic.clone(), compact_topic.clone()];
    let metadata = wait_for_leaders(&connection, &topics, Duration::from_secs(30)).await?;
    let layout = |name: &str| -> Result<TopicLayout> {
        metadata
            .topics
            .iter()
            .find(|t| t.name == name)
            .cloned()
            .ok_or_else(|| BenchError::Protocol(format!("topic {name} not in metadata")))
    };
    let (stream_layout, compact_layout) = (layout(&stream_topic)?, layout(&compact_topic)?);

    let stream_recorder = Arc::new(Recorder::default());
    let compact_recorder = Arc::new(Recorder::default());
    let mut consumers = Tasks::new();
    let all: Vec<Assignment> = stream_layout
        .leaders
        .iter()
        .enumerate()
        .map(|(partition, &leader)| Assignment {
            topic: stream_topic.clone(),
            partition: partition as i32,
            leader,
        })
        .collect();
    let (ready, ready_rx) = tokio::sync::mpsc::channel(1024);
    let mut loops = 0;
    let consumer_count = args.consumers as usize;
    for index in 0..consumer_count {
        let assignments = assign_direct(&all, consumer_count, index);
        let mut leaders: Vec<i32> = assignments.iter().map(|a| a.leader).collect();
        leaders.sort();
        leaders.dedup();
        loops += leaders.len();
        consumers
            .handles
            .push(tokio::spawn(run_consumer(ConsumerSpec {
                assignments,
                pool: ConnectionPool::new(
                    format!("{client_id}-consumer-{index}"),
                    metadata.brokers.clone(),
                ),
                workload: stream.clone(),
                recorder: stream_recorder.clone(),
                stop: consumers.stop.clone(),
                start: StartOffset::Earliest,
                ready: ready.clone(),
                end_offsets: None,
            })));
    }
    drop(ready);
    await_ready(ready_rx, loops).await?;

    let payload = random_payload(stream.message_size.max_bytes() as usize + 64 * 1024);
    let mut producers = Tasks::new();
    let mut compact_producers = Tasks::new();
    let spawn_producers = |tasks: &mut Tasks,
                           workload: &Arc<Workload>,
                           layout: &TopicLayout,
                           recorder: &Arc<Recorder>,
                           first_id: u32| {
        let count = workload.producers_per_topic;
        for index in 0..count {
            let id = first_id + index;
            tasks.handles.push(tokio::spawn(run_producer(ProducerSpec {
                id,
                bootstrap: args.bootstrap.clone(),
                refresh: Arc::new(AtomicBool::new(false)),
                topic: layout.name.clone(),
                leaders: layout.leaders.clone(),
                pool: ConnectionPool::new(
                    format!("{client_id}-producer-{id}"),
                    metadata.brokers.clone(),
                ),
                workload: workload.clone(),
                rate_msgs_per_s: workload.producer_rate_msgs_per_s as f64 / f64::from(count),
                recorder: recorder.clone(),
                stop: tasks.stop.clone(),
                payload: payload.clone(),
            })));
        }
    };
    spawn_producers(&mut producers, &stream, &stream_layout, &stream_recorder, 0);
    spawn_producers(
        &mut compact_producers,
        &compact,
        &compact_layout,
        &compact_recorder,
        args.producers,
    );

    let samples = sample_loop(args, broker.as_ref(), &stream_recorder, &compact_recorder).await;

    producers.finish(&stream_recorder, "producer").await;
    compact_producers
        .finish(&compact_recorder, "compact producer")
        .await;
    // Let the consumers read everything acknowledged, bounded.
    let drain_started = Instant::now();
    while consumer_count > 0 && drain_started.elapsed() < DRAIN_TIMEOUT {
        let counters = stream_recorder.counters();
        if counters.consumed_messages >= counters.produced_messages {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drain_s = drain_started.elapsed().as_secs_f64();
    consumers.finish(&stream_recorder, "consumer").await;
    let stream_totals = stream_recorder.counters();
    let compact_totals = compact_recorder.counters();
    let mut error_samples = stream_recorder.error_samples();
    error_samples.extend(compact_recorder.error_samples());
    Ok(SoakReport::new(
        args,
        [stream_topic, compact_topic],
        samples,
        stream_totals,
        compact_totals,
        drain_s,
        error_samples,
    ))
}

/// Takes a sample every `--sample-s` until the duration is over.
async fn sample_loop(
    args: &SoakArgs,
    broker: Option<&CpuSource>,
    stream: &Recorder,
    compact: &Recorder,
) -> Vec<SoakSample> {
    let started = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_secs(args.sample_s));
    ticker.tick().await;
    let mut previous = (stream.counters(), compact.counters());
    let mut previous_at = started;
    let mut previous_cpu_s = match broker {
        Some(source) => read_broker(source, stream).await.map(|s| s.cpu_s),
        None => None,
    };
    // The interval histograms start now, not at topic creation.
    stream.take_interval();
    compact.take_interval();
    let mut samples = Vec::new();
    while started.elapsed() < args.duration() {
        ticker.tick().await;
        let now = Instant::now();
        let counters = (stream.counters(), compact.counters());
        let (publish, _) = stream.take_interval();
        let (compact_publish, _) = compact.take_interval();
        let reading = match broker {
            Some(source) => read_broker(source, stream).await,
            None => None,
        };
        let disk_bytes = match &args.data_dir {
            Some(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || dir_bytes(&dir))
                    .await
                    .ok()
            }
            None => None,
        };
        let interval_s = now.duration_since(previous_at).as_secs_f64();
        let cpu_s = reading.map(|r| r.cpu_s);
        let sample = SoakSample::new(
            now.duration_since(started).as_secs_f64(),
            interval_s,
            &counters.0.minus(&previous.0),
            &counters.1.minus(&previous.1),
            // Acknowledged but not yet read; a consumer may see a record
            // before its acknowledgement arrives, hence the clamp.
            (counters.0.produced_messages as i64 - counters.0.consumed_messages as i64).max(0),
            &publish,
            &compact_publish,
            reading,
            cpu_s
                .zip(previous_cpu_s)
                .map(|(now_s, before_s)| (now_s - before_s) / interval_s.max(1e-9)),
            disk_bytes,
        );
        if !args.quiet {
            eprintln!("{}", report::progress_line(&sample));
        }
        samples.push(sample);
        previous = counters;
        previous_at = now;
        previous_cpu_s = cpu_s.or(previous_cpu_s);
    }
    samples
}

/// One broker reading; a failed one is an error of the run and leaves the
/// sample's broker fields empty.
async fn read_broker(source: &CpuSource, recorder: &Recorder) -> Option<BrokerSample> {
    match source.sample().await {
        Ok(sample) => Some(sample),
        Err(error) => {
            recorder.record_error(format!("broker sample: {error}"));
            None
        }
    }
}

/// Bytes of the regular files under `dir`. Files that vanish while it
/// walks (a cleaner swapping segments) are skipped.
pub fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else if metadata.is_file() {
                total += metadata.len();
            }
        }
    }
    total
}

/// `rill-bench soak`: run, write the JSON and the SVG, print the summary.
pub async fn main(args: &SoakArgs) -> Result<SoakReport> {
    let report = run(args).await?;
    std::fs::write(&args.out, serde_json::to_vec_pretty(&report)?)?;
    let svg_path = args.out.with_extension("svg");
    std::fs::write(&svg_path, svg::render(&report))?;
    println!("{}", report.summary_text());
    eprintln!(
        "result: {}, charts: {}",
        args.out.display(),
        svg_path.display()
    );
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        soak: SoakArgs,
    }

    #[test]
    fn arguments_and_workloads() {
        let cli = Cli::parse_from(["x", "--duration-s", "15", "--sample-s", "3"]);
        assert_eq!(cli.soak.duration(), Duration::from_secs(15));
        assert!(cli.soak.validate().is_ok());
        let compact = cli.soak.compact_workload().unwrap();
        assert_eq!(compact.key_distribution, KeyDistribution::Random);
        assert_eq!(compact.key_space, 1_000);
        assert_eq!(
            cli.soak.stream_workload().unwrap().consumer_start,
            StartOffset::Earliest
        );
        let cli = Cli::parse_from(["x", "--duration-min", "2"]);
        assert_eq!(cli.soak.duration(), Duration::from_secs(120));
        let cli = Cli::parse_from(["x", "--duration-s", "2", "--sample-s", "3"]);
        assert!(cli.soak.validate().is_err());
        let cli = Cli::parse_from(["x", "--rate", "0"]);
        assert!(cli.soak.validate().is_err());
    }

    #[test]
    fn dir_bytes_counts_nested_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("x"), [0u8; 10]).unwrap();
        std::fs::write(dir.path().join("a/b/y"), [0u8; 32]).unwrap();
        assert_eq!(dir_bytes(dir.path()), 42);
        assert_eq!(dir_bytes(&dir.path().join("missing")), 0);
    }
}

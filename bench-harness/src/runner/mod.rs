//! One run of a workload against one bootstrap address: create topics, start
//! consumers (so they see every message), start producers, warm up, measure,
//! drain, and summarise into a [`RunResult`].
//!
//! - [`producer`]: rate-paced, pipelined producers.
//! - [`consumer`]: direct-assignment consumers, one fetch loop per leader.
//! - [`group_consumer`]: consumers that are members of a consumer group.
//! - [`progress`]: per-second samples and the stderr progress line.

pub mod consumer;
pub mod group_consumer;
pub mod producer;
pub mod progress;
pub mod share_consumer;

use crate::broker_cpu::{BrokerCounters, BrokerCpu, CpuSource};
use crate::error::{BenchError, Result};
use crate::group::member::GroupSettings;
use crate::kafka::client::{
    connect_any, create_topics_with_configs, wait_for_leaders, ClusterMetadata, ConnectionPool,
};
use crate::results::{HostFacts, RunResult, Throughput};
use crate::stats::{
    Counters, HistogramData, IntervalHistograms, Percentiles, Recorder, SecondSample,
};
use crate::workload::Workload;
use bytes::Bytes;
use consumer::{assign_direct, run_consumer, Assignment, ConsumerSpec};
use group_consumer::{run_group_consumer, GroupConsumerSpec, GroupStatus};
use hdrhistogram::Histogram;
use producer::{run_producer, ProducerSpec};
use rand::RngCore;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long connecting to one bootstrap broker may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long consumers may take to catch up after producers stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a backlog may take to build before the run gives up.
const BACKLOG_BUILD_TIMEOUT: Duration = Duration::from_secs(1800);

/// Consumer group timing: short, so that rebalances are quick in a benchmark.
const GROUP_SESSION_TIMEOUT_MS: i32 = 10_000;
const GROUP_REBALANCE_TIMEOUT_MS: i32 = 10_000;
const GROUP_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(300);
/// How long the group may take to settle before producers start.
const GROUP_STABLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Options of one run beyond the workload.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub label: Option<String>,
    /// Use these topics (created if missing) instead of fresh random names.
    pub topics: Option<Vec<String>>,
    /// Suppress the progress line (tests, compare's summary mode).
    pub quiet: bool,
    /// Read the broker's CPU seconds here at the start and end of the
    /// measurement window (the result's `broker_cpu`).
    pub broker_cpu: Option<CpuSource>,
    /// Keep each second's latency histograms in the samples (in memory
    /// only): what `rill-bench omb` needs for OMB's percentile series.
    pub keep_interval_histograms: bool,
}

/// Topic names for a run: `{prefix}-{tag}-{index}`, a fresh tag per run so
/// that a run never reads an earlier run's messages.
pub fn topic_names(workload: &Workload, tag: &str) -> Vec<String> {
    (0..workload.topics)
        .map(|index| format!("{}-{tag}-{index}", workload.topic_prefix))
        .collect()
}

/// Runs `workload` against `bootstrap` and returns the measured result.
pub async fn run_workload(
    bootstrap: &str,
    workload: &Workload,
    options: &RunOptions,
) -> Result<RunResult> {
    let run = Run::setup(bootstrap, workload, options).await?;
    let backlog_mode = workload.consumer_backlog_size_mb > 0;
    let mut consumers = Vec::new();
    if !backlog_mode {
        consumers = run.start_consumers().await?;
    }
    let producers = run.spawn_producers();
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut warmup = Duration::from_secs(workload.warmup_duration_s);
    if backlog_mode {
        build_backlog(&run.workload, &run.recorder, options.quiet).await?;
        consumers = run.start_consumers().await?;
        warmup = Duration::ZERO; // the drain itself is what we measure
    }
    let window = run.sample(warmup, backlog_mode).await;
    let measured = run.close_window(&window).await;
    run.collect(producers, consumers).await;
    Ok(run.report(started_unix_s, window, measured))
}

/// The client id of the run's metadata connection; producers and consumers
/// append their role and index.
const CLIENT_ID: &str = "rill-bench";

/// A spawned producer or consumer task.
type Task = JoinHandle<Result<()>>;

/// One run's shared state: the workload, the cluster's layout, and the
/// recorder and stop flags that every producer and consumer task holds.
struct Run<'a> {
    bootstrap: &'a str,
    options: &'a RunOptions,
    workload: Arc<Workload>,
    metadata: ClusterMetadata,
    recorder: Arc<Recorder>,
    producers_stop: Arc<AtomicBool>,
    consumers_stop: Arc<AtomicBool>,
    /// Every (topic, partition) of the run with its leader.
    all_assignments: Vec<Assignment>,
    consumer_count: usize,
    group_status: Arc<GroupStatus>,
    /// Set when the workload names a consumer group.
    group_settings: Option<Arc<GroupSettings>>,
}

/// The warm-up and measurement window: its clock, the previous tick, and
/// what has been measured so far.
struct Window {
    phase_start: Instant,
    warmup: Duration,
    previous: Counters,
    previous_at: Instant,
    /// Counters when measurement started.
    baseline: Counters,
    measure_start: Option<Instant>,
    broker_start: Option<BrokerCounters>,
    series: Vec<SecondSample>,
    backlog_max: i64,
    backlog_drain_s: Option<f64>,
}

/// What the measurement window amounts to, read when it closes.
struct Measured {
    counters: Counters,
    duration_s: f64,
    broker_cpu: Option<BrokerCpu>,
    publish_histogram: Histogram<u64>,
    end_to_end_histogram: Histogram<u64>,
}

impl<'a> Run<'a> {
    /// Checks the workload and the CPU source, creates the topics, waits
    /// for their leaders and lays out the run's shared state.
    async fn setup(
        bootstrap: &'a str,
        workload: &Workload,
        options: &'a RunOptions,
    ) -> Result<Run<'a>> {
        workload.validate()?;
        if let Some(source) = &options.broker_cpu {
            // A wrong pid or address fails now, not after the run.
            source.cpu_s().await?;
        }
        let workload = Arc::new(workload.clone());
        let connection = connect_any(bootstrap, CLIENT_ID, CONNECT_TIMEOUT).await?;
        let topics = options.topics.clone().unwrap_or_else(|| {
            let tag = format!("{:08x}", rand::thread_rng().next_u32());
            topic_names(&workload, &tag)
        });
        create_topics_with_configs(
            &connection,
            CLIENT_ID,
            &topics,
            workload.partitions_per_topic,
            workload.replication_factor,
            &workload.topic_configs(),
        )
        .await?;
        let metadata = wait_for_leaders(&connection, &topics, Duration::from_secs(30)).await?;
        let group_settings = group_settings(&workload, &topics, &metadata);
        Ok(Run {
            bootstrap,
            options,
            all_assignments: all_assignments(&metadata),
            consumer_count: (workload.consumers_per_topic * workload.topics) as usize,
            workload,
            metadata,
            recorder: Arc::new(Recorder::default()),
            producers_stop: Arc::new(AtomicBool::new(false)),
            consumers_stop: Arc::new(AtomicBool::new(false)),
            group_status: Arc::new(GroupStatus::default()),
            group_settings,
        })
    }

    /// Starts the consumers and waits until they know their start offsets
    /// (and, in a group, until the group owns every partition).
    async fn start_consumers(&self) -> Result<Vec<Task>> {
        let (handles, ready_rx, loops) = self.spawn_consumers();
        await_ready(ready_rx, loops).await?;
        if self.group_settings.is_some() {
            let shared = self.workload.group_protocol == crate::workload::GroupProtocol::Share;
            let members = (self.consumer_count, self.all_assignments.len(), shared);
            await_group(&self.group_status, &handles, members).await?;
        }
        Ok(handles)
    }

    /// Spawns the consumers; returns their tasks, the channel each direct
    /// fetch loop reports ready on, and how many such loops there are.
    fn spawn_consumers(&self) -> (Vec<Task>, mpsc::Receiver<()>, usize) {
        let (ready, ready_rx) = mpsc::channel(1024);
        if let Some(settings) = &self.group_settings {
            return (self.spawn_group_consumers(settings), ready_rx, 0);
        }
        let (handles, loops) = self.spawn_direct_consumers(&ready);
        (handles, ready_rx, loops)
    }

    /// Spawns the consumers as members of the workload's consumer group.
    fn spawn_group_consumers(&self, settings: &Arc<GroupSettings>) -> Vec<Task> {
        let leaders = self
            .all_assignments
            .iter()
            .map(|a| ((a.topic.clone(), a.partition), a.leader))
            .collect::<std::collections::HashMap<_, _>>();
        (0..self.consumer_count)
            .map(|index| {
                let spec = GroupConsumerSpec {
                    index,
                    bootstrap: self.bootstrap.to_string(),
                    client_id: format!("{CLIENT_ID}-consumer-{index}"),
                    brokers: self.metadata.brokers.clone(),
                    leaders: leaders.clone(),
                    settings: settings.clone(),
                    workload: self.workload.clone(),
                    recorder: self.recorder.clone(),
                    stop: self.consumers_stop.clone(),
                    status: self.group_status.clone(),
                };
                match self.workload.group_protocol {
                    crate::workload::GroupProtocol::Share => {
                        tokio::spawn(share_consumer::run_share_consumer(spec))
                    }
                    _ => tokio::spawn(run_group_consumer(spec)),
                }
            })
            .collect()
    }

    /// Spawns the consumers with direct assignment; returns their tasks and
    /// the number of fetch loops (one per leader per consumer).
    fn spawn_direct_consumers(&self, ready: &mpsc::Sender<()>) -> (Vec<Task>, usize) {
        let mut handles = Vec::new();
        let mut loops = 0;
        for index in 0..self.consumer_count {
            let assignments = assign_direct(&self.all_assignments, self.consumer_count, index);
            let mut leaders: Vec<i32> = assignments.iter().map(|a| a.leader).collect();
            leaders.sort();
            leaders.dedup();
            loops += leaders.len();
            handles.push(tokio::spawn(run_consumer(ConsumerSpec {
                assignments,
                pool: ConnectionPool::new(
                    format!("{CLIENT_ID}-consumer-{index}"),
                    self.metadata.brokers.clone(),
                ),
                workload: self.workload.clone(),
                recorder: self.recorder.clone(),
                stop: self.consumers_stop.clone(),
                start: self.workload.consumer_start,
                ready: ready.clone(),
                end_offsets: None,
            })));
        }
        (handles, loops)
    }

    /// Spawns the producers, each with its share of the rate.
    fn spawn_producers(&self) -> Vec<Task> {
        let workload = &self.workload;
        let payload = random_payload(workload.message_size.max_bytes() as usize + 64 * 1024);
        let producer_count = workload.producers_per_topic * workload.topics;
        let rate_per_producer = if producer_count == 0 {
            0.0
        } else {
            workload.producer_rate_msgs_per_s as f64 / f64::from(producer_count)
        };
        let mut producers = Vec::new();
        for index in 0..producer_count {
            let topic = &self.metadata.topics[(index % workload.topics) as usize];
            producers.push(tokio::spawn(run_producer(ProducerSpec {
                id: index,
                bootstrap: self.bootstrap.to_string(),
                refresh: Arc::new(AtomicBool::new(false)),
                topic: topic.name.clone(),
                leaders: topic.leaders.clone(),
                pool: ConnectionPool::new(
                    format!("{CLIENT_ID}-producer-{index}"),
                    self.metadata.brokers.clone(),
                ),
                workload: workload.clone(),
                rate_msgs_per_s: rate_per_producer,
                recorder: self.recorder.clone(),
                stop: self.producers_stop.clone(),
                payload: payload.clone(),
            })));
        }
        producers
    }

    /// Warm-up and measurement, one tick a second, until the measurement
    /// has lasted the workload's test duration.
    async fn sample(&self, warmup: Duration, backlog_mode: bool) -> Window {
        let phase_start = Instant::now();
        let measure_duration = Duration::from_secs(self.workload.test_duration_s);
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        ticker.tick().await;
        let previous = self.recorder.counters();
        let mut window = Window {
            phase_start,
            warmup,
            previous,
            previous_at: Instant::now(),
            baseline: previous,
            measure_start: warmup.is_zero().then_some(phase_start),
            broker_start: None,
            series: Vec::new(),
            backlog_max: 0,
            backlog_drain_s: None,
        };
        if warmup.is_zero() {
            window.broker_start = read_counters(self.options, &self.recorder).await;
        }
        loop {
            ticker.tick().await;
            let now = Instant::now();
            let counters = self.recorder.counters();
            // Messages count as produced on acknowledgement, and a consumer may
            // see one before its ack arrives: clamp that transient to zero.
            let backlog =
                (counters.produced_messages as i64 - counters.consumed_messages as i64).max(0);
            let sample = self.second_sample(&window, now, &counters, backlog);
            if let Some(start) = window.measure_start {
                self.record_measured(&mut window, start, now, backlog, backlog_mode);
                window.series.push(sample);
                if now.duration_since(start) >= measure_duration {
                    break;
                }
            } else if now.duration_since(phase_start) >= warmup {
                self.recorder.reset_totals();
                window.baseline = counters;
                window.measure_start = Some(now);
                window.broker_start = read_counters(self.options, &self.recorder).await;
            }
            window.previous = counters;
            window.previous_at = now;
        }
        window
    }

    /// The sample of the second that ended at `now`, printed as the
    /// progress line unless the run is quiet.
    fn second_sample(
        &self,
        window: &Window,
        now: Instant,
        counters: &Counters,
        backlog: i64,
    ) -> SecondSample {
        let delta = counters.minus(&window.previous);
        let interval_s = now.duration_since(window.previous_at).as_secs_f64();
        let taken = self.recorder.take_interval_histograms();
        let (publish, end_to_end) = (
            Percentiles::of(&taken.publish),
            Percentiles::of(&taken.end_to_end),
        );
        let elapsed_s = match window.measure_start {
            Some(start) => now.duration_since(start).as_secs_f64(),
            None => {
                now.duration_since(window.phase_start).as_secs_f64() - window.warmup.as_secs_f64()
            }
        };
        let sample = progress::sample(
            elapsed_s,
            &delta,
            interval_s,
            backlog,
            &publish,
            &end_to_end,
        );
        let mut sample = sample;
        if self.options.keep_interval_histograms {
            sample.interval = Some(IntervalHistograms {
                publish: HistogramData::of(&taken.publish),
                end_to_end: HistogramData::of(&taken.end_to_end),
                publish_delay: HistogramData::of(&taken.publish_delay),
            });
        }
        if !self.options.quiet {
            let phase = if window.measure_start.is_some() {
                "measure"
            } else {
                "warmup"
            };
            eprintln!("{}", progress::format_line(phase, &sample));
        }
        sample
    }

    /// Tracks the largest backlog of the measurement and, in backlog mode,
    /// when the consumers drained it.
    fn record_measured(
        &self,
        window: &mut Window,
        start: Instant,
        now: Instant,
        backlog: i64,
        backlog_mode: bool,
    ) {
        window.backlog_max = window.backlog_max.max(backlog);
        if backlog_mode && window.backlog_drain_s.is_none() && self.consumer_count > 0 {
            // Drained: less than a second's worth of production behind.
            let threshold = (self.workload.producer_rate_msgs_per_s as i64).max(1000);
            if backlog <= threshold {
                window.backlog_drain_s = Some(now.duration_since(start).as_secs_f64());
            }
        }
    }

    /// Closes the measurement window: counters since its start, its
    /// length, the broker's CPU over it and the latency histograms.
    async fn close_window(&self, window: &Window) -> Measured {
        let measure_end = Instant::now();
        let counters = self.recorder.counters().minus(&window.baseline);
        let duration_s = window
            .measure_start
            .map_or(0.0, |start| measure_end.duration_since(start).as_secs_f64());
        let broker_end = read_counters(self.options, &self.recorder).await;
        let broker_cpu = self
            .options
            .broker_cpu
            .as_ref()
            .zip(window.broker_start.zip(broker_end))
            .map(|(source, (start, end))| {
                BrokerCpu::new(
                    source.describe(),
                    end.cpu_s - start.cpu_s,
                    duration_s,
                    counters.produced_bytes,
                    counters.consumed_bytes,
                )
                .with_counts(&start, &end, counters.produced_bytes)
            });
        let (publish_histogram, end_to_end_histogram) = self.recorder.totals();
        Measured {
            counters,
            duration_s,
            broker_cpu,
            publish_histogram,
            end_to_end_histogram,
        }
    }

    /// Stops the producers, lets the consumers catch up (bounded), stops
    /// them, and records every task's failure as an error of the run.
    async fn collect(&self, producers: Vec<Task>, consumers: Vec<Task>) {
        self.producers_stop.store(true, Ordering::Relaxed);
        join_tasks(producers, "producer", &self.recorder).await;
        // Let consumers catch up with everything acknowledged, bounded.
        let drain_deadline = Instant::now() + DRAIN_TIMEOUT;
        while self.consumer_count > 0 && Instant::now() < drain_deadline {
            let counters = self.recorder.counters();
            if counters.consumed_messages >= counters.produced_messages {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.consumers_stop.store(true, Ordering::Relaxed);
        join_tasks(consumers, "consumer", &self.recorder).await;
    }

    /// The run's result from its window, its measurement and the totals.
    fn report(&self, started_unix_s: u64, window: Window, measured: Measured) -> RunResult {
        let totals = self.recorder.counters();
        let duration_s = measured.duration_s;
        RunResult {
            label: self
                .options
                .label
                .clone()
                .unwrap_or_else(|| self.bootstrap.to_string()),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            started_unix_s,
            bootstrap: self.bootstrap.to_string(),
            workload: (*self.workload).clone(),
            host: HostFacts::collect(),
            measured_duration_s: duration_s,
            produce: Throughput::new(
                measured.counters.produced_messages,
                measured.counters.produced_bytes,
                duration_s,
            ),
            consume: Throughput::new(
                measured.counters.consumed_messages,
                measured.counters.consumed_bytes,
                duration_s,
            ),
            publish_latency_us: Percentiles::of(&measured.publish_histogram),
            end_to_end_latency_us: Percentiles::of(&measured.end_to_end_histogram),
            publish_latency_histogram: HistogramData::of(&measured.publish_histogram),
            end_to_end_latency_histogram: HistogramData::of(&measured.end_to_end_histogram),
            backlog_messages_end: totals.produced_messages as i64 - totals.consumed_messages as i64,
            backlog_messages_max: window.backlog_max,
            backlog_drain_s: window.backlog_drain_s,
            total_produced_messages: totals.produced_messages,
            total_consumed_messages: totals.consumed_messages,
            errors: totals.errors,
            error_samples: self.recorder.error_samples(),
            series: window.series,
            broker_cpu: measured.broker_cpu,
        }
    }
}

/// Every (topic, partition) in `metadata` with its leader.
fn all_assignments(metadata: &ClusterMetadata) -> Vec<Assignment> {
    metadata
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .leaders
                .iter()
                .enumerate()
                .map(|(partition, &leader)| Assignment {
                    topic: topic.name.clone(),
                    partition: partition as i32,
                    leader,
                })
        })
        .collect()
}

/// The consumer group's settings, if the workload names a group.
fn group_settings(
    workload: &Workload,
    topics: &[String],
    metadata: &ClusterMetadata,
) -> Option<Arc<GroupSettings>> {
    workload.consumer_group.as_ref().map(|group| {
        Arc::new(GroupSettings {
            group_id: group.clone(),
            topics: topics.to_vec(),
            partitions: metadata
                .topics
                .iter()
                .map(|t| (t.name.clone(), t.leaders.len() as i32))
                .collect(),
            topic_ids: metadata
                .topics
                .iter()
                .filter(|t| !t.id.is_nil())
                .map(|t| (t.id, t.name.clone()))
                .collect(),
            assignor: workload.assignor,
            session_timeout_ms: GROUP_SESSION_TIMEOUT_MS,
            rebalance_timeout_ms: GROUP_REBALANCE_TIMEOUT_MS,
            heartbeat_interval: GROUP_HEARTBEAT_INTERVAL,
        })
    })
}

/// Awaits `tasks`, recording each failure as `{role}: {error}` (or
/// `{role} task: {error}` for a task that panicked or was cancelled).
async fn join_tasks(tasks: Vec<Task>, role: &str, recorder: &Recorder) {
    for task in tasks {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => recorder.record_error(format!("{role}: {error}")),
            Err(error) => recorder.record_error(format!("{role} task: {error}")),
        }
    }
}

/// The broker's CPU seconds now, if a source was given; a failed read is
/// counted as an error of the run (and leaves `broker_cpu` out).
async fn read_counters(options: &RunOptions, recorder: &Recorder) -> Option<BrokerCounters> {
    match options.broker_cpu.as_ref()?.counters().await {
        Ok(counters) => Some(counters),
        Err(error) => {
            recorder.record_error(format!("{error}"));
            None
        }
    }
}

/// Waits until the group's members together own every partition once.
async fn await_group(
    status: &GroupStatus,
    handles: &[JoinHandle<Result<()>>],
    (members, partitions, shared): (usize, usize, bool),
) -> Result<()> {
    let deadline = Instant::now() + GROUP_STABLE_TIMEOUT;
    while !status.complete(members, partitions, shared) {
        if handles.iter().any(JoinHandle::is_finished) {
            return Err(BenchError::Other(
                "a group consumer stopped before the group was stable".into(),
            ));
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout(
                "consumer group members owning every partition".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

pub(crate) async fn await_ready(mut ready: mpsc::Receiver<()>, expected: usize) -> Result<()> {
    for _ in 0..expected {
        tokio::time::timeout(Duration::from_secs(30), ready.recv())
            .await
            .map_err(|_| BenchError::Timeout("consumers finding their start offsets".into()))?
            .ok_or_else(|| BenchError::Other("a consumer failed before it was ready".into()))?;
    }
    Ok(())
}

async fn build_backlog(workload: &Workload, recorder: &Recorder, quiet: bool) -> Result<()> {
    let target_bytes = workload.consumer_backlog_size_mb * 1024 * 1024;
    let started = Instant::now();
    while recorder.counters().produced_bytes < target_bytes {
        if started.elapsed() > BACKLOG_BUILD_TIMEOUT {
            return Err(BenchError::Timeout("building the consumer backlog".into()));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !quiet {
            let produced = recorder.counters().produced_bytes;
            eprintln!(
                "[backlog] {:.1} / {} MB produced",
                produced as f64 / (1024.0 * 1024.0),
                workload.consumer_backlog_size_mb
            );
        }
    }
    Ok(())
}

/// Random bytes (incompressible, like OMB's default random payload).
pub fn random_payload(len: usize) -> Bytes {
    let mut bytes = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut bytes);
    Bytes::from(bytes)
}

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

use crate::broker_cpu::{BrokerCpu, CpuSource};
use crate::error::{BenchError, Result};
use crate::group::member::GroupSettings;
use crate::kafka::client::{
    connect_any, create_topics_with_configs, wait_for_leaders, ConnectionPool,
};
use crate::results::{HostFacts, RunResult, Throughput};
use crate::stats::{HistogramData, Percentiles, Recorder};
use crate::workload::Workload;
use bytes::Bytes;
use consumer::{assign_direct, run_consumer, Assignment, ConsumerSpec};
use group_consumer::{run_group_consumer, GroupConsumerSpec, GroupStatus};
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
    workload.validate()?;
    if let Some(source) = &options.broker_cpu {
        // A wrong pid or address fails now, not after the run.
        source.cpu_s().await?;
    }
    let workload = Arc::new(workload.clone());
    let client_id = "rill-bench";
    let connection = connect_any(bootstrap, client_id, CONNECT_TIMEOUT).await?;
    let topics = options.topics.clone().unwrap_or_else(|| {
        let tag = format!("{:08x}", rand::thread_rng().next_u32());
        topic_names(&workload, &tag)
    });
    create_topics_with_configs(
        &connection,
        client_id,
        &topics,
        workload.partitions_per_topic,
        workload.replication_factor,
        &workload.topic_configs(),
    )
    .await?;
    let metadata = wait_for_leaders(&connection, &topics, Duration::from_secs(30)).await?;

    let recorder = Arc::new(Recorder::default());
    let producers_stop = Arc::new(AtomicBool::new(false));
    let consumers_stop = Arc::new(AtomicBool::new(false));
    let all_assignments: Vec<Assignment> = metadata
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
        .collect();
    let consumer_count = (workload.consumers_per_topic * workload.topics) as usize;
    let group_status = Arc::new(GroupStatus::default());
    let group_settings = workload.consumer_group.as_ref().map(|group| {
        Arc::new(GroupSettings {
            group_id: group.clone(),
            topics: topics.clone(),
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
    });
    let start_consumers = || -> (Vec<JoinHandle<Result<()>>>, mpsc::Receiver<()>, usize) {
        let (ready, ready_rx) = mpsc::channel(1024);
        let mut handles = Vec::new();
        let mut loops = 0;
        if let Some(settings) = &group_settings {
            let leaders = all_assignments
                .iter()
                .map(|a| ((a.topic.clone(), a.partition), a.leader))
                .collect::<std::collections::HashMap<_, _>>();
            for index in 0..consumer_count {
                handles.push(tokio::spawn(run_group_consumer(GroupConsumerSpec {
                    index,
                    bootstrap: bootstrap.to_string(),
                    client_id: format!("{client_id}-consumer-{index}"),
                    brokers: metadata.brokers.clone(),
                    leaders: leaders.clone(),
                    settings: settings.clone(),
                    workload: workload.clone(),
                    recorder: recorder.clone(),
                    stop: consumers_stop.clone(),
                    status: group_status.clone(),
                })));
            }
            return (handles, ready_rx, 0);
        }
        for index in 0..consumer_count {
            let assignments = assign_direct(&all_assignments, consumer_count, index);
            let mut leaders: Vec<i32> = assignments.iter().map(|a| a.leader).collect();
            leaders.sort();
            leaders.dedup();
            loops += leaders.len();
            handles.push(tokio::spawn(run_consumer(ConsumerSpec {
                assignments,
                pool: ConnectionPool::new(
                    format!("{client_id}-consumer-{index}"),
                    metadata.brokers.clone(),
                ),
                workload: workload.clone(),
                recorder: recorder.clone(),
                stop: consumers_stop.clone(),
                start: workload.consumer_start,
                ready: ready.clone(),
                end_offsets: None,
            })));
        }
        (handles, ready_rx, loops)
    };

    let backlog_mode = workload.consumer_backlog_size_mb > 0;
    let mut consumers = Vec::new();
    if !backlog_mode {
        let (handles, ready_rx, loops) = start_consumers();
        await_ready(ready_rx, loops).await?;
        if group_settings.is_some() {
            await_group(
                &group_status,
                &handles,
                consumer_count,
                all_assignments.len(),
            )
            .await?;
        }
        consumers = handles;
    }

    let payload = random_payload(workload.message_size.max_bytes() as usize + 64 * 1024);
    let producer_count = workload.producers_per_topic * workload.topics;
    let rate_per_producer = if producer_count == 0 {
        0.0
    } else {
        workload.producer_rate_msgs_per_s as f64 / f64::from(producer_count)
    };
    let mut producers = Vec::new();
    for index in 0..producer_count {
        let topic = &metadata.topics[(index % workload.topics) as usize];
        producers.push(tokio::spawn(run_producer(ProducerSpec {
            id: index,
            bootstrap: bootstrap.to_string(),
            refresh: Arc::new(AtomicBool::new(false)),
            topic: topic.name.clone(),
            leaders: topic.leaders.clone(),
            pool: ConnectionPool::new(
                format!("{client_id}-producer-{index}"),
                metadata.brokers.clone(),
            ),
            workload: workload.clone(),
            rate_msgs_per_s: rate_per_producer,
            recorder: recorder.clone(),
            stop: producers_stop.clone(),
            payload: payload.clone(),
        })));
    }

    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut backlog_drain_s = None;
    let mut warmup = Duration::from_secs(workload.warmup_duration_s);
    if backlog_mode {
        build_backlog(&workload, &recorder, options.quiet).await?;
        let (handles, ready_rx, loops) = start_consumers();
        await_ready(ready_rx, loops).await?;
        if group_settings.is_some() {
            await_group(
                &group_status,
                &handles,
                consumer_count,
                all_assignments.len(),
            )
            .await?;
        }
        consumers = handles;
        warmup = Duration::ZERO; // the drain itself is what we measure
    }

    // Warm-up and measurement, one tick a second.
    let phase_start = Instant::now();
    let measure_duration = Duration::from_secs(workload.test_duration_s);
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    let mut previous = recorder.counters();
    let mut previous_at = Instant::now();
    let mut baseline = previous;
    let mut measure_start = if warmup.is_zero() {
        Some(phase_start)
    } else {
        None
    };
    let mut cpu_start_s = if warmup.is_zero() {
        read_cpu(options, &recorder).await
    } else {
        None
    };
    let mut series = Vec::new();
    let mut backlog_max: i64 = 0;
    loop {
        ticker.tick().await;
        let now = Instant::now();
        let counters = recorder.counters();
        let delta = counters.minus(&previous);
        let interval_s = now.duration_since(previous_at).as_secs_f64();
        // Messages count as produced on acknowledgement, and a consumer may
        // see one before its ack arrives: clamp that transient to zero.
        let backlog =
            (counters.produced_messages as i64 - counters.consumed_messages as i64).max(0);
        let (publish, end_to_end) = recorder.take_interval();
        let elapsed_s = match measure_start {
            Some(start) => now.duration_since(start).as_secs_f64(),
            None => now.duration_since(phase_start).as_secs_f64() - warmup.as_secs_f64(),
        };
        let sample = progress::sample(
            elapsed_s,
            &delta,
            interval_s,
            backlog,
            &publish,
            &end_to_end,
        );
        if !options.quiet {
            let phase = if measure_start.is_some() {
                "measure"
            } else {
                "warmup"
            };
            eprintln!("{}", progress::format_line(phase, &sample));
        }
        if let Some(start) = measure_start {
            backlog_max = backlog_max.max(backlog);
            if backlog_mode && backlog_drain_s.is_none() && consumer_count > 0 {
                // Drained: less than a second's worth of production behind.
                let threshold = (workload.producer_rate_msgs_per_s as i64).max(1000);
                if backlog <= threshold {
                    backlog_drain_s = Some(now.duration_since(start).as_secs_f64());
                }
            }
            series.push(sample);
            if now.duration_since(start) >= measure_duration {
                break;
            }
        } else if now.duration_since(phase_start) >= warmup {
            recorder.reset_totals();
            baseline = counters;
            measure_start = Some(now);
            cpu_start_s = read_cpu(options, &recorder).await;
        }
        previous = counters;
        previous_at = now;
    }
    let measure_end = Instant::now();
    let measured = recorder.counters().minus(&baseline);
    let measured_duration_s =
        measure_start.map_or(0.0, |start| measure_end.duration_since(start).as_secs_f64());
    let cpu_end_s = read_cpu(options, &recorder).await;
    let broker_cpu = options
        .broker_cpu
        .as_ref()
        .zip(cpu_start_s.zip(cpu_end_s))
        .map(|(source, (start_s, end_s))| {
            BrokerCpu::new(
                source.describe(),
                end_s - start_s,
                measured_duration_s,
                measured.produced_bytes,
                measured.consumed_bytes,
            )
        });
    let (publish_histogram, end_to_end_histogram) = recorder.totals();

    producers_stop.store(true, Ordering::Relaxed);
    for producer in producers {
        match producer.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => recorder.record_error(format!("producer: {error}")),
            Err(error) => recorder.record_error(format!("producer task: {error}")),
        }
    }
    // Let consumers catch up with everything acknowledged, bounded.
    let drain_deadline = Instant::now() + DRAIN_TIMEOUT;
    while consumer_count > 0 && Instant::now() < drain_deadline {
        let counters = recorder.counters();
        if counters.consumed_messages >= counters.produced_messages {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    consumers_stop.store(true, Ordering::Relaxed);
    for consumer in consumers {
        match consumer.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => recorder.record_error(format!("consumer: {error}")),
            Err(error) => recorder.record_error(format!("consumer task: {error}")),
        }
    }
    let totals = recorder.counters();
    Ok(RunResult {
        label: options
            .label
            .clone()
            .unwrap_or_else(|| bootstrap.to_string()),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_unix_s,
        bootstrap: bootstrap.to_string(),
        workload: (*workload).clone(),
        host: HostFacts::collect(),
        measured_duration_s,
        produce: Throughput::new(
            measured.produced_messages,
            measured.produced_bytes,
            measured_duration_s,
        ),
        consume: Throughput::new(
            measured.consumed_messages,
            measured.consumed_bytes,
            measured_duration_s,
        ),
        publish_latency_us: Percentiles::of(&publish_histogram),
        end_to_end_latency_us: Percentiles::of(&end_to_end_histogram),
        publish_latency_histogram: HistogramData::of(&publish_histogram),
        end_to_end_latency_histogram: HistogramData::of(&end_to_end_histogram),
        backlog_messages_end: totals.produced_messages as i64 - totals.consumed_messages as i64,
        backlog_messages_max: backlog_max,
        backlog_drain_s,
        total_produced_messages: totals.produced_messages,
        total_consumed_messages: totals.consumed_messages,
        errors: totals.errors,
        error_samples: recorder.error_samples(),
        series,
        broker_cpu,
    })
}

/// The broker's CPU seconds now, if a source was given; a failed read is
/// counted as an error of the run (and leaves `broker_cpu` out).
async fn read_cpu(options: &RunOptions, recorder: &Recorder) -> Option<f64> {
    match options.broker_cpu.as_ref()?.cpu_s().await {
        Ok(cpu_s) => Some(cpu_s),
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
    members: usize,
    partitions: usize,
) -> Result<()> {
    let deadline = Instant::now() + GROUP_STABLE_TIMEOUT;
    while !status.complete(members, partitions) {
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

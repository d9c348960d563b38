//! `rill-bench soak`: a long mixed workload against any broker, sampled
//! every `--sample-s`, to see whether memory, latency or disk drift over
//! hours rather than seconds, and to reproduce the mixed load under which
//! rill once corrupted its heap.
//!
//! The workload, all at once for the whole duration:
//! - producers at a fixed rate on a normal (stream) topic, and consumers
//!   reading it from its start (so every record produced should be read);
//! - keyed updates over a bounded key space on a `cleanup.policy=compact`
//!   topic with small segments, so that the broker's cleaner keeps working
//!   while the rest runs;
//! - topic churn ([`churn`]): every `--churn-every-s` (default 5 s) a
//!   brand-new topic `{prefix}-{tag}-churn-{n}` is created (CreateTopics,
//!   then its leaders awaited) and one acks=all producer sends to it at
//!   `--churn-rate` until the next one is ready, so the broker keeps
//!   creating partitions under load;
//! - optionally, bursts ([`churn`] too): every `--burst-every-s`, for
//!   `--burst-s`, one more producer sends to the stream topic with no rate
//!   limit; its records count (and are read) as the stream's.
//!
//! Producers and consumers are the runner's ([`crate::runner`]); each
//! sample takes the interval's counters and latency histograms from their
//! [`Recorder`]s and one reading of the broker (its `/metrics` or
//! `/proc`, [`crate::broker_cpu`]).
//!
//! With `--broker-pid`, each sample also checks that the broker process
//! still runs (`/proc/PID` there and not a zombie): a broker that crashed
//! ends the soak at once, the report says `broker_alive: false`, and
//! `rill-bench soak` exits non-zero after writing it, so a script running
//! soaks in a loop stops at the one that found a crash.
//!
//! - [`report`]: the JSON time series and the summary.
//! - [`svg`]: RSS, produce p99 and disk use over time, one small chart each.

pub mod churn;
pub mod report;
pub mod svg;

use crate::broker_cpu::{BrokerSample, CpuSource};
use crate::error::{BenchError, Result};
use crate::kafka::client::{
    connect_any, create_topics_with_configs, wait_for_leaders, ClusterMetadata, ConnectionPool,
    TopicLayout,
};
use crate::runner::consumer::{assign_direct, run_consumer, Assignment, ConsumerSpec};
use crate::runner::producer::{run_producer, ProducerSpec};
use crate::runner::{await_ready, random_payload, CONNECT_TIMEOUT};
use crate::stats::{Counters, Recorder};
use crate::workload::{parse_bytes, KeyDistribution, MessageSize, StartOffset, Workload};
use bytes::Bytes;
use churn::{burst_active, BurstSpec, ChurnSpec};
use rand::RngCore;
use report::{SampleParts, SoakOutcome, SoakReport, SoakSample};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How long consumers may take to read what was acknowledged after the
/// producers stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long stopped tasks may take to end: a producer waits for its last
/// acknowledgements, which a hung broker may never send.
const FINISH_TIMEOUT: Duration = Duration::from_secs(30);
const CLIENT_ID: &str = "rill-bench-soak";

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
    /// --admin-listen address), with rill's cleaner and free-space series.
    #[arg(long, value_name = "ADDR")]
    pub broker_metrics: Option<String>,
    /// The local broker process: each sample checks that it still runs
    /// (the soak stops, and exits non-zero, when it does not), and its RSS
    /// and CPU come from /proc/PID unless --broker-metrics is given.
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
    /// Seconds between two churn topics: each is created new and gets the
    /// churn producer until the next one is ready (0: no churn).
    #[arg(long, default_value_t = 5)]
    pub churn_every_s: u64,
    /// Messages per second of the churn producer (acks=all).
    #[arg(long, default_value_t = 5_000)]
    pub churn_rate: u64,
    /// Partitions of each churn topic.
    #[arg(long, default_value_t = 1)]
    pub churn_partitions: u32,
    /// Seconds between the starts of two bursts of unpaced produce to the
    /// normal topic (0: no bursts; needs --burst-s).
    #[arg(long, default_value_t = 0)]
    pub burst_every_s: u64,
    /// Seconds each burst lasts (below --burst-every-s).
    #[arg(long, default_value_t = 0)]
    pub burst_s: u64,
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

    /// Where samples read the broker: its `/metrics` when given (it has
    /// rill's cleaner and disk series, /proc has not), else /proc/PID.
    fn broker_source(&self) -> Option<CpuSource> {
        self.broker_metrics
            .clone()
            .map(CpuSource::Metrics)
            .or(self.broker_pid.map(CpuSource::Pid))
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

    /// Each churn topic's workload: one acks=all producer, no consumer.
    fn churn_workload(&self) -> Result<Workload> {
        let workload = Workload {
            name: "soak-churn".into(),
            topics: 1,
            partitions_per_topic: self.churn_partitions,
            message_size: MessageSize::parse(&self.message_size)?,
            key_distribution: KeyDistribution::None,
            producers_per_topic: 1,
            consumers_per_topic: 0,
            producer_rate_msgs_per_s: self.churn_rate,
            acks: -1,
            topic_prefix: self.topic_prefix.clone(),
            ..Workload::default()
        };
        workload.validate()?;
        Ok(workload)
    }

    /// The burst producer's workload: the stream's, one producer, no rate
    /// limit (0 in the runner's terms).
    fn burst_workload(&self) -> Result<Workload> {
        Ok(Workload {
            name: "soak-burst".into(),
            producers_per_topic: 1,
            consumers_per_topic: 0,
            producer_rate_msgs_per_s: 0,
            ..self.stream_workload()?
        })
    }

    fn validate(&self) -> Result<()> {
        let fail = |message: &str| Err(BenchError::Workload(message.into()));
        if self.sample_s == 0 {
            return fail("--sample-s must be at least 1");
        }
        if self.duration().as_secs() < self.sample_s {
            return fail("the duration must hold at least one sample");
        }
        // Unpaced steady producers would fill the disk over a soak's
        // hours; unpaced load is what bursts are for.
        if self.rate == 0 || self.compact_rate == 0 {
            return fail("--rate and --compact-rate must be above 0");
        }
        if self.churn_every_s > 0 && (self.churn_rate == 0 || self.churn_partitions == 0) {
            return fail("--churn-rate and --churn-partitions must be above 0");
        }
        if (self.burst_every_s > 0) != (self.burst_s > 0) {
            return fail("--burst-every-s and --burst-s go together");
        }
        if self.burst_s > 0 && self.burst_s >= self.burst_every_s {
            return fail("--burst-s must be below --burst-every-s");
        }
        Ok(())
    }
}

/// Tasks sharing one stop flag: the producers or consumers of one topic,
/// or the churn and burst loops.
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

    /// Stops the tasks and waits for them, at most [`FINISH_TIMEOUT`] in
    /// all (a task still running then is aborted: after a broker crash an
    /// acknowledgement may never come); their failures count as errors.
    async fn finish(self, recorder: &Recorder, what: &str) {
        self.stop.store(true, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + FINISH_TIMEOUT;
        for mut handle in self.handles {
            match tokio::time::timeout_at(deadline, &mut handle).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(error))) => recorder.record_error(format!("{what}: {error}")),
                Ok(Err(error)) => recorder.record_error(format!("{what} task: {error}")),
                Err(_) => {
                    handle.abort();
                    recorder.record_error(format!("{what}: still running after stop, aborted"));
                }
            }
        }
    }
}

/// What every producer of the soak shares: where the brokers are and the
/// random bytes values are cut from.
#[derive(Clone)]
struct ProducerKit {
    bootstrap: String,
    client_id: String,
    brokers: HashMap<i32, String>,
    payload: Bytes,
}

impl ProducerKit {
    /// Adds one producer of `layout`'s topic to `tasks` (`rate` 0: unpaced).
    fn spawn(
        &self,
        tasks: &mut Tasks,
        id: u32,
        layout: &TopicLayout,
        workload: &Arc<Workload>,
        rate: f64,
        recorder: &Arc<Recorder>,
    ) {
        tasks.handles.push(tokio::spawn(run_producer(ProducerSpec {
            id,
            bootstrap: self.bootstrap.clone(),
            refresh: Arc::new(AtomicBool::new(false)),
            topic: layout.name.clone(),
            leaders: layout.leaders.clone(),
            pool: ConnectionPool::new(
                format!("{}-producer-{id}", self.client_id),
                self.brokers.clone(),
            ),
            workload: workload.clone(),
            rate_msgs_per_s: rate,
            recorder: recorder.clone(),
            stop: tasks.stop.clone(),
            payload: self.payload.clone(),
        })));
    }

    /// `workload.producers_per_topic` producers sharing its rate, ids from
    /// `first_id`.
    fn spawn_paced(
        &self,
        tasks: &mut Tasks,
        workload: &Arc<Workload>,
        layout: &TopicLayout,
        recorder: &Arc<Recorder>,
        first_id: u32,
    ) {
        let count = workload.producers_per_topic;
        let rate = workload.producer_rate_msgs_per_s as f64 / f64::from(count);
        for index in 0..count {
            self.spawn(tasks, first_id + index, layout, workload, rate, recorder);
        }
    }
}

/// The recorders of the soak's parts, and the churn topics made so far.
#[derive(Default)]
struct Recorders {
    /// The stream topic: paced and burst producers, and its consumers.
    stream: Arc<Recorder>,
    compact: Arc<Recorder>,
    /// The churn producers, and failed churn topic creations.
    churn: Arc<Recorder>,
    churn_topics: Arc<AtomicU64>,
}

/// The topics created up front and the cluster they live on.
struct Setup {
    tag: String,
    stream: TopicLayout,
    compact: TopicLayout,
    metadata: ClusterMetadata,
}

/// `name`'s layout in `metadata`.
fn layout_of(metadata: &ClusterMetadata, name: &str) -> Result<TopicLayout> {
    metadata
        .topics
        .iter()
        .find(|t| t.name == name)
        .cloned()
        .ok_or_else(|| BenchError::Protocol(format!("topic {name} not in metadata")))
}

/// Creates the stream and compacted topics and waits for their leaders.
async fn create_topics(args: &SoakArgs, stream: &Workload, compact: &Workload) -> Result<Setup> {
    let segment_bytes = parse_bytes(&args.compact_segment_bytes)?;
    let connection = connect_any(&args.bootstrap, CLIENT_ID, CONNECT_TIMEOUT).await?;
    let tag = format!("{:08x}", rand::thread_rng().next_u32());
    let stream_topic = format!("{}-{tag}-stream", args.topic_prefix);
    let compact_topic = format!("{}-{tag}-compact", args.topic_prefix);
    create_topics_with_configs(
        &connection,
        CLIENT_ID,
        std::slice::from_ref(&stream_topic),
        stream.partitions_per_topic,
        stream.replication_factor,
        &stream.topic_configs(),
    )
    .await?;
    create_topics_with_configs(
        &connection,
        CLIENT_ID,
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
    Ok(Setup {
        tag,
        stream: layout_of(&metadata, &stream_topic)?,
        compact: layout_of(&metadata, &compact_topic)?,
        metadata,
    })
}

/// Starts `--consumers` consumers splitting the stream topic's partitions
/// and returns once each has its start offsets.
async fn start_consumers(
    args: &SoakArgs,
    workload: &Arc<Workload>,
    setup: &Setup,
    recorder: &Arc<Recorder>,
) -> Result<Tasks> {
    let mut consumers = Tasks::new();
    let all: Vec<Assignment> = (setup.stream.leaders.iter().enumerate())
        .map(|(partition, &leader)| Assignment {
            topic: setup.stream.name.clone(),
            partition: partition as i32,
            leader,
        })
        .collect();
    let (ready, ready_rx) = tokio::sync::mpsc::channel(1024);
    let mut loops = 0;
    let count = args.consumers as usize;
    for index in 0..count {
        let assignments = assign_direct(&all, count, index);
        let mut leaders: Vec<i32> = assignments.iter().map(|a| a.leader).collect();
        leaders.sort();
        leaders.dedup();
        loops += leaders.len();
        let pool = ConnectionPool::new(
            format!("{CLIENT_ID}-consumer-{index}"),
            setup.metadata.brokers.clone(),
        );
        consumers
            .handles
            .push(tokio::spawn(run_consumer(ConsumerSpec {
                assignments,
                pool,
                workload: workload.clone(),
                recorder: recorder.clone(),
                stop: consumers.stop.clone(),
                start: StartOffset::Earliest,
                ready: ready.clone(),
                end_offsets: None,
            })));
    }
    drop(ready);
    await_ready(ready_rx, loops).await?;
    Ok(consumers)
}

/// Starts the churn loop and the burst loop (each when enabled) as one
/// [`Tasks`]; they stop their own producers when it stops them.
fn start_churn_and_burst(
    args: &SoakArgs,
    kit: &ProducerKit,
    setup: &Setup,
    recorders: &Recorders,
    started: Instant,
) -> Result<Tasks> {
    let mut tasks = Tasks::new();
    if args.churn_every_s > 0 {
        tasks.handles.push(tokio::spawn(churn::run_churn(ChurnSpec {
            every_s: args.churn_every_s,
            topic_prefix: args.topic_prefix.clone(),
            tag: setup.tag.clone(),
            workload: Arc::new(args.churn_workload()?),
            kit: kit.clone(),
            recorder: recorders.churn.clone(),
            created: recorders.churn_topics.clone(),
            stop: tasks.stop.clone(),
            started,
        })));
    }
    if args.burst_every_s > 0 {
        tasks.handles.push(tokio::spawn(churn::run_burst(BurstSpec {
            every_s: args.burst_every_s,
            burst_s: args.burst_s,
            layout: setup.stream.clone(),
            workload: Arc::new(args.burst_workload()?),
            kit: kit.clone(),
            recorder: recorders.stream.clone(),
            stop: tasks.stop.clone(),
            started,
        })));
    }
    Ok(tasks)
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
    if let Some(pid) = args.broker_pid.filter(|&pid| !process_alive(pid)) {
        return Err(BenchError::Workload(format!("no running process {pid}")));
    }
    let setup = create_topics(args, &stream, &compact).await?;
    let recorders = Recorders::default();
    let consumers = start_consumers(args, &stream, &setup, &recorders.stream).await?;
    let kit = ProducerKit {
        bootstrap: args.bootstrap.clone(),
        client_id: CLIENT_ID.to_string(),
        brokers: setup.metadata.brokers.clone(),
        payload: random_payload(stream.message_size.max_bytes() as usize + 64 * 1024),
    };
    let (mut producers, mut compact_producers) = (Tasks::new(), Tasks::new());
    kit.spawn_paced(&mut producers, &stream, &setup.stream, &recorders.stream, 0);
    let (layout, recorder) = (&setup.compact, &recorders.compact);
    kit.spawn_paced(
        &mut compact_producers,
        &compact,
        layout,
        recorder,
        args.producers,
    );
    let started = Instant::now();
    let background = start_churn_and_burst(args, &kit, &setup, &recorders, started)?;

    let (samples, broker_alive) = sample_loop(args, broker.as_ref(), &recorders, started).await;

    background.finish(&recorders.churn, "churn or burst").await;
    producers.finish(&recorders.stream, "producer").await;
    compact_producers
        .finish(&recorders.compact, "compact producer")
        .await;
    // A dead broker serves nothing more: no drain then.
    let drain_s = if broker_alive {
        drain(&recorders.stream, args.consumers).await
    } else {
        0.0
    };
    consumers.finish(&recorders.stream, "consumer").await;
    let mut error_samples = recorders.stream.error_samples();
    error_samples.extend(recorders.compact.error_samples());
    error_samples.extend(recorders.churn.error_samples());
    Ok(SoakReport::new(
        args,
        SoakOutcome {
            topics: vec![setup.stream.name, setup.compact.name],
            samples,
            stream: recorders.stream.counters(),
            compact: recorders.compact.counters(),
            churn: recorders.churn.counters(),
            churn_topics: recorders.churn_topics.load(Ordering::Relaxed),
            drain_s,
            broker_alive,
            error_samples,
        },
    ))
}

/// Lets the consumers read everything acknowledged, bounded by
/// [`DRAIN_TIMEOUT`]; returns the seconds it took.
async fn drain(recorder: &Recorder, consumers: u32) -> f64 {
    let started = Instant::now();
    while consumers > 0 && started.elapsed() < DRAIN_TIMEOUT {
        let counters = recorder.counters();
        if counters.consumed_messages >= counters.produced_messages {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed().as_secs_f64()
}

/// Takes a sample every `--sample-s` until the duration is over, or until
/// the broker process (`--broker-pid`) is gone. Returns the samples and
/// whether the broker was still running at the end.
async fn sample_loop(
    args: &SoakArgs,
    broker: Option<&CpuSource>,
    recorders: &Recorders,
    started: Instant,
) -> (Vec<SoakSample>, bool) {
    let mut ticker = tokio::time::interval(Duration::from_secs(args.sample_s));
    ticker.tick().await;
    let mut sampler = Sampler::new(args, broker, recorders, started).await;
    let mut samples = Vec::new();
    while started.elapsed() < args.duration() {
        ticker.tick().await;
        let alive = args.broker_pid.is_none_or(process_alive);
        let sample = sampler.take(alive).await;
        if !args.quiet {
            eprintln!("{}", report::progress_line(&sample));
        }
        samples.push(sample);
        if let Some(pid) = args.broker_pid.filter(|_| !alive) {
            // Nothing after a crash measures the broker; stop while the
            // data dir and the last samples still show its state.
            eprintln!("soak: broker pid {pid} exited, stopping");
            return (samples, false);
        }
    }
    (samples, true)
}

/// The sampling state: the previous sample's counters, time and CPU.
struct Sampler<'a> {
    args: &'a SoakArgs,
    broker: Option<&'a CpuSource>,
    recorders: &'a Recorders,
    started: Instant,
    /// Stream, compacted, churn.
    previous: [Counters; 3],
    previous_at: Instant,
    previous_cpu_s: Option<f64>,
}

impl<'a> Sampler<'a> {
    async fn new(
        args: &'a SoakArgs,
        broker: Option<&'a CpuSource>,
        recorders: &'a Recorders,
        started: Instant,
    ) -> Sampler<'a> {
        let previous_cpu_s = match broker {
            Some(source) => read_broker(source, &recorders.stream)
                .await
                .map(|s| s.cpu_s),
            None => None,
        };
        // The interval histograms start now, not at topic creation.
        for recorder in [&recorders.stream, &recorders.compact, &recorders.churn] {
            recorder.take_interval();
        }
        Sampler {
            args,
            broker,
            recorders,
            started,
            previous: Self::counters(recorders),
            previous_at: Instant::now(),
            previous_cpu_s,
        }
    }

    fn counters(recorders: &Recorders) -> [Counters; 3] {
        [
            recorders.stream.counters(),
            recorders.compact.counters(),
            recorders.churn.counters(),
        ]
    }

    /// One sample of the interval since the previous one. `alive`: the
    /// broker process still runs (a dead one's /proc is not read: that
    /// would only add an error).
    async fn take(&mut self, alive: bool) -> SoakSample {
        let now = Instant::now();
        let recorders = self.recorders;
        let counters = Self::counters(recorders);
        let reading = match self.broker {
            Some(source) if alive => read_broker(source, &recorders.stream).await,
            _ => None,
        };
        let interval_s = now.duration_since(self.previous_at).as_secs_f64();
        let cpu_s = reading.map(|r| r.cpu_s);
        let elapsed = now.duration_since(self.started);
        let [stream, compact, churn] = counters;
        let sample = SoakSample::new(SampleParts {
            elapsed_s: elapsed.as_secs_f64(),
            interval_s,
            stream: stream.minus(&self.previous[0]),
            compact: compact.minus(&self.previous[1]),
            churn: churn.minus(&self.previous[2]),
            // Acknowledged but not yet read; a consumer may see a record
            // before its acknowledgement arrives, hence the clamp.
            consumer_lag: (stream.produced_messages as i64 - stream.consumed_messages as i64)
                .max(0),
            publish: recorders.stream.take_interval().0,
            compact_publish: recorders.compact.take_interval().0,
            churn_publish: recorders.churn.take_interval().0,
            broker: reading,
            cpu_cores: (cpu_s.zip(self.previous_cpu_s))
                .map(|(now_s, before_s)| (now_s - before_s) / interval_s.max(1e-9)),
            disk_bytes: disk_bytes(self.args.data_dir.as_deref()).await,
            churn_topics: recorders.churn_topics.load(Ordering::Relaxed),
            burst: burst_active(elapsed, self.args.burst_every_s, self.args.burst_s),
        });
        self.previous = counters;
        self.previous_at = now;
        self.previous_cpu_s = cpu_s.or(self.previous_cpu_s);
        sample
    }
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

/// [`dir_bytes`] off the async threads (a data dir may hold many files).
async fn disk_bytes(dir: Option<&Path>) -> Option<u64> {
    let dir = dir?.to_path_buf();
    tokio::task::spawn_blocking(move || dir_bytes(&dir))
        .await
        .ok()
}

/// Whether process `pid` still runs: `/proc/PID/stat` is readable and
/// does not say zombie or dead (a broker that crashed but whose parent has
/// not reaped it yet is a zombie, and its /proc entry is still there).
pub fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat_running(&stat))
}

/// Whether a `/proc/PID/stat` line describes a live process: its state,
/// the field after the `)` that closes the command name (which may itself
/// hold spaces and parentheses), is not `Z` (zombie) or `X` (dead).
pub fn stat_running(stat: &str) -> bool {
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    matches!(state, Some(s) if s != "Z" && s != "X")
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
/// A broker that exited during the soak is an error (so the exit status
/// is not 0), returned after the report is written: it is the evidence.
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
    if !report.broker_alive {
        let pid = args
            .broker_pid
            .map_or("?".to_string(), |pid| pid.to_string());
        return Err(BenchError::Workload(format!(
            "broker pid {pid} exited during the soak (report: {})",
            args.out.display()
        )));
    }
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
    fn churn_and_burst_arguments() {
        let cli = Cli::parse_from(["x"]);
        assert_eq!(
            (
                cli.soak.churn_every_s,
                cli.soak.churn_rate,
                cli.soak.churn_partitions
            ),
            (5, 5_000, 1)
        );
        assert_eq!((cli.soak.burst_every_s, cli.soak.burst_s), (0, 0));
        let churn = cli.soak.churn_workload().unwrap();
        assert_eq!((churn.acks, churn.producer_rate_msgs_per_s), (-1, 5_000));
        let burst = cli.soak.burst_workload().unwrap();
        assert_eq!(
            (burst.producer_rate_msgs_per_s, burst.producers_per_topic),
            (0, 1)
        );
        let ok = |flags: &[&str]| {
            let argv = ["x"].iter().chain(flags).copied();
            Cli::parse_from(argv).soak.validate().is_ok()
        };
        assert!(ok(&["--burst-every-s", "60", "--burst-s", "5"]));
        assert!(!ok(&["--burst-every-s", "60"]));
        assert!(!ok(&["--burst-every-s", "5", "--burst-s", "5"]));
        assert!(ok(&["--churn-every-s", "0", "--churn-rate", "0"]));
        assert!(!ok(&["--churn-rate", "0"]));
        // Both broker flags: /metrics for the readings, the pid for liveness.
        let cli = Cli::parse_from(["x", "--broker-pid", "1", "--broker-metrics", "h:1"]);
        assert_eq!(
            cli.soak.broker_source(),
            Some(CpuSource::Metrics("h:1".into()))
        );
    }

    #[test]
    fn stat_state_decides_liveness() {
        assert!(stat_running("123 (rill) S 1 123 123 0 -1"));
        assert!(stat_running("123 (a b) (c)) R 1 2"));
        assert!(!stat_running("123 (rill) Z 1 123"));
        assert!(!stat_running("123 (rill) X 1 123"));
        assert!(!stat_running("garbage"));
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(u32::MAX));
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

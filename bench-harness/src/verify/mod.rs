//! `rill-bench verify`: a Jepsen-style check of the Kafka queue workload
//! (as `jepsen.tests.kafka` runs it), against a bootstrap list or against
//! a local cluster this command starts and injects faults into.
//!
//! A run: create a topic (replication factor 3 where there are 3 brokers,
//! `min.insync.replicas` 2); start idempotent acks=all producers and
//! `assign` and `subscribe` consumers on librdkafka; record every
//! operation with its time; meanwhile the nemesis kills, pauses, cuts off
//! nodes or fills their disks on a schedule (local cluster only). Then producing stops, every fault
//! is healed, the consumers drain until they have read up to everything
//! acknowledged (or `--drain-s` runs out), and the
//! history is checked. The result is a JSON file; the command fails when
//! the checker found an anomaly.
//!
//! Modules:
//! - [`history`]: the recorded operations and fault windows (data only).
//! - [`recorder`]: the shared log the clients append to, and its clock.
//! - [`clients`]: the rdkafka producers and consumers.
//! - [`txn_producer`]: the transactional queue's producer (commit or
//!   abort at random).
//! - [`nemesis`]: SIGKILL / SIGSTOP / network cuts / a full disk, of a
//!   random node or a leader.
//! - [`checker`]: the pure history checker and its anomaly classes.
//! - [`result`]: the JSON result: counts, anomalies, availability.
//! - [`plot`]: an HTML page of acks per second with the faults shaded.

pub mod checker;
pub mod clients;
pub mod history;
pub mod nemesis;
pub mod plot;
pub mod recorder;
pub mod result;
pub mod txn_producer;

use crate::cluster::{ClusterArgs, LocalCluster};
use crate::error::{BenchError, Result};
use crate::kafka::client::{connect_any, create_topics_with_configs, wait_for_leaders};
use clap::Args;
use clients::Target;
use history::{ConsumerMode, FaultWindow};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use recorder::Recorder;
use result::{RunFacts, VerifyResult};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the drain looks whether the consumers have caught up.
const DRAIN_POLL: Duration = Duration::from_millis(100);
/// How long the topic's partitions may take to get leaders.
const TOPIC_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// An existing cluster's bootstrap list (no faults are injected);
    /// without it a local rill cluster is started (see --brokers, --rill).
    #[arg(long)]
    pub bootstrap: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// How long producers run, in seconds.
    #[arg(long, default_value_t = 60)]
    pub duration_s: u64,
    #[arg(long, default_value_t = 3)]
    pub partitions: i32,
    #[arg(long, default_value_t = 4)]
    pub producers: usize,
    /// Consumers on `assign` (every partition, from offset 0).
    #[arg(long, default_value_t = 2)]
    pub assign_consumers: usize,
    /// Consumers on `subscribe`, in one consumer group.
    #[arg(long, default_value_t = 2)]
    pub group_consumers: usize,
    /// How the group consumers join: `classic` or `consumer` (KIP-848).
    #[arg(long, value_enum, default_value = "classic")]
    pub group_protocol: clients::GroupProtocol,
    /// Faults on a local cluster: comma list of `kill`, `pause`,
    /// `partition`, `bridge` (these two need --netns), `disk`, `slowdisk`
    /// (these two need --disk-mb), `clock` (a debug build of rill), or
    /// `none`.
    #[arg(long, default_value = "kill,pause")]
    pub faults: String,
    /// Time from one fault's heal to the next fault.
    #[arg(long, default_value_t = 4000)]
    pub fault_interval_ms: u64,
    /// How long each fault lasts before it is healed.
    #[arg(long, default_value_t = 3000)]
    pub fault_duration_ms: u64,
    /// The longest the consumers may drain after producing stops.
    #[arg(long, default_value_t = 30)]
    pub drain_s: u64,
    /// The transactional queue: producers send 1-3 values a transaction
    /// and commit or abort at random; adds the G1a and precommitted-read
    /// checks.
    #[arg(long)]
    pub transactional: bool,
    /// Seed of the nemesis's and the transactions' choices (random when
    /// absent).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Result JSON path.
    #[arg(long, default_value = "rill-bench-verify.json")]
    pub out: PathBuf,
    /// Also write the whole history here (JSON), to check it again later.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Also write an HTML page: acks per second, fault windows shaded.
    #[arg(long)]
    pub html: Option<PathBuf>,
}

/// `rill-bench verify`: runs, checks, writes the result; an error when the
/// history holds an anomaly (after the result is written).
pub async fn main(args: &VerifyArgs) -> Result<VerifyResult> {
    let faults = nemesis::parse_faults(&args.faults)?;
    if args.bootstrap.is_none() {
        refuse_unsupported_faults(&faults, &args.cluster, crate::loopfs::is_root())?;
    }
    if args.partitions < 1 {
        // Producers pick a partition modulo the count.
        return Err(BenchError::Other("--partitions must be at least 1".into()));
    }
    let mut cluster = match &args.bootstrap {
        Some(_) => None,
        None => {
            let mut cluster_args = args.cluster.clone();
            cluster_args.fault_clock = faults.contains(&nemesis::FaultKind::Clock);
            let mut cluster = LocalCluster::start(&cluster_args)?;
            cluster.wait_ready().await?;
            if cluster_args.fault_clock {
                // Refused now, not at the first jump: a release build of
                // rill has no clock fault point.
                for node_id in cluster.node_ids() {
                    cluster.jump_clock(node_id, 0)?;
                }
            }
            Some(cluster)
        }
    };
    let bootstrap = match (&args.bootstrap, &cluster) {
        (Some(bootstrap), _) => bootstrap.clone(),
        (None, Some(cluster)) => cluster.bootstrap(),
        (None, None) => return Err(BenchError::Other("no cluster to verify".into())),
    };
    let target = create_topic(&bootstrap, args).await?;
    let recorder = Arc::new(Recorder::new());
    let schedule = nemesis::Schedule {
        kinds: if cluster.is_some() {
            faults
        } else {
            Vec::new()
        },
        interval_ms: args.fault_interval_ms,
        duration_ms: args.fault_duration_ms,
        until_ms: args.duration_s * 1000,
    };
    let (windows, workload_ms) =
        run_workload(&target, args, &schedule, cluster.as_mut(), &recorder).await?;
    let history = recorder.snapshot();
    if let Some(path) = &args.history {
        std::fs::write(path, serde_json::to_vec(&history)?)?;
    }
    let anomalies = checker::check(&history);
    let facts = RunFacts {
        topic: target.topic.clone(),
        partitions: target.partitions,
        workload_ms,
    };
    let mut result = result::summarize(facts, &history, &anomalies, windows);
    result.follower_consumer_reads = follower_consumer_reads(cluster.as_ref()).await;
    std::fs::write(&args.out, serde_json::to_vec_pretty(&result)?)?;
    if let Some(path) = &args.html {
        std::fs::write(path, plot::render(&result))?;
    }
    Ok(result)
}

/// `rill_follower_consumer_reads_total` summed over the local cluster's
/// brokers that answer: the consumer reads followers served (KIP-392).
async fn follower_consumer_reads(cluster: Option<&LocalCluster>) -> u64 {
    let mut total = 0.0;
    for spec in cluster.map(LocalCluster::specs).unwrap_or_default() {
        if let Ok(text) = crate::broker_cpu::scrape_metrics(&spec.admin_addr).await {
            let reads = crate::broker_cpu::metric_sum(&text, "rill_follower_consumer_reads_total");
            total += reads.unwrap_or(0.0);
        }
    }
    total as u64
}

/// Refuses, before anything starts, the faults that the local cluster
/// `cluster` could not inject (as `root` or not).
fn refuse_unsupported_faults(
    faults: &[nemesis::FaultKind],
    cluster: &ClusterArgs,
    root: bool,
) -> Result<()> {
    if !cluster.netns && faults.iter().any(|f| f.needs_netns()) {
        return Err(BenchError::Other(
            "--faults partition and bridge cut links between brokers: add --netns (as root)".into(),
        ));
    }
    if faults.iter().any(|f| f.needs_disk()) {
        if cluster.disk_mb.is_none() {
            return Err(BenchError::Other(
                "--faults disk and slowdisk act on a broker's own file system: add --disk-mb N (as root)".into(),
            ));
        }
        if !root {
            return Err(BenchError::Other(
                "--faults disk and slowdisk need root (--disk-mb loop-mounts a file system per broker)".into(),
            ));
        }
    }
    Ok(())
}

/// A fresh topic, replicated as widely as three brokers allow.
async fn create_topic(bootstrap: &str, args: &VerifyArgs) -> Result<Target> {
    let topic = format!("verify-{:016x}", rand::random::<u64>());
    let connection = connect_any(bootstrap, "rill-bench-verify", Duration::from_secs(5)).await?;
    let replication_factor = match &args.bootstrap {
        Some(_) => 3,
        None => args.cluster.brokers.min(3) as i16,
    };
    let min_insync = (replication_factor - 1).max(1);
    create_topics_with_configs(
        &connection,
        "rill-bench-verify",
        std::slice::from_ref(&topic),
        args.partitions as u32,
        replication_factor,
        &[("min.insync.replicas".into(), min_insync.to_string())],
    )
    .await?;
    wait_for_leaders(&connection, std::slice::from_ref(&topic), TOPIC_TIMEOUT).await?;
    Ok(Target {
        bootstrap: bootstrap.to_string(),
        topic,
        partitions: args.partitions,
        group_protocol: args.group_protocol,
        racks: match &args.bootstrap {
            None if args.cluster.racks => args.cluster.brokers,
            _ => 0,
        },
    })
}

/// Clients and nemesis for the run, then the drain; the fault windows and
/// the milliseconds of producing.
async fn run_workload(
    target: &Target,
    args: &VerifyArgs,
    schedule: &nemesis::Schedule,
    cluster: Option<&mut LocalCluster>,
    recorder: &Arc<Recorder>,
) -> Result<(Vec<FaultWindow>, u64)> {
    let stop_producers = Arc::new(AtomicBool::new(false));
    let stop_consumers = Arc::new(AtomicBool::new(false));
    // On an early return (a nemesis or join error) the clients must still
    // stop: tokio's runtime waits for blocking tasks when it is dropped.
    let _stop_on_return = StopOnDrop(vec![stop_producers.clone(), stop_consumers.clone()]);
    let mut consumers = Vec::new();
    let modes = std::iter::repeat_n(ConsumerMode::Assign, args.assign_consumers).chain(
        std::iter::repeat_n(ConsumerMode::Subscribe, args.group_consumers),
    );
    for (index, mode) in modes.enumerate() {
        let (target, recorder, stop) = (target.clone(), recorder.clone(), stop_consumers.clone());
        consumers.push(tokio::task::spawn_blocking(move || {
            clients::consume(target, (index, mode), recorder, stop)
        }));
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let producers: Vec<_> = (0..args.producers)
        .map(|index| {
            let (target, recorder, stop) =
                (target.clone(), recorder.clone(), stop_producers.clone());
            match args.transactional {
                true => tokio::spawn(txn_producer::produce(target, index, seed, recorder, stop)),
                false => tokio::spawn(clients::produce(target, index, recorder, stop)),
            }
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    // The nemesis runs here, on the thread that started the brokers (their
    // parent-death signal follows that thread).
    let windows = match cluster {
        Some(cluster) => {
            let windows = nemesis::run(cluster, &target.topic, schedule, recorder, &mut rng).await;
            cluster.wait_ready().await?;
            windows?
        }
        None => nemesis::run_without_cluster(schedule, recorder).await,
    };
    stop_producers.store(true, Ordering::SeqCst);
    let workload_ms = recorder.now_ms();
    for producer in producers {
        join(producer.await)?;
    }
    drain(recorder, Duration::from_secs(args.drain_s)).await;
    stop_consumers.store(true, Ordering::SeqCst);
    for consumer in consumers {
        join(consumer.await)?;
    }
    Ok((windows, workload_ms))
}

/// Sets every flag when dropped.
struct StopOnDrop(Vec<Arc<AtomicBool>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        for flag in &self.0 {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

fn join(outcome: std::result::Result<Result<()>, tokio::task::JoinError>) -> Result<()> {
    outcome.map_err(|e| BenchError::Other(format!("client task: {e}")))?
}

/// Waits until the consumers have read up to everything acknowledged
/// (see [`Recorder::caught_up`]), or `limit` has passed; whatever is still
/// unread then is reported `unseen`.
async fn drain(recorder: &Recorder, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !recorder.caught_up() {
        tokio::time::sleep(DRAIN_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nemesis::FaultKind;

    fn cluster(netns: bool, disk_mb: Option<u64>) -> ClusterArgs {
        ClusterArgs {
            brokers: 3,
            rill: PathBuf::from("rill"),
            dir: PathBuf::from("/tmp/unused"),
            session_timeout_ms: None,
            heartbeat_interval_ms: None,
            netns,
            disk_mb,
            racks: false,
            fault_clock: false,
        }
    }

    #[test]
    fn a_disk_fault_needs_its_own_file_systems_and_root() {
        let disk = [FaultKind::Kill, FaultKind::Disk];
        let error = refuse_unsupported_faults(&disk, &cluster(false, None), true)
            .unwrap_err()
            .to_string();
        assert!(error.contains("--disk-mb"), "{error}");
        let error = refuse_unsupported_faults(&disk, &cluster(false, Some(256)), false)
            .unwrap_err()
            .to_string();
        assert!(error.contains("need root"), "{error}");
        assert!(refuse_unsupported_faults(&disk, &cluster(false, Some(256)), true).is_ok());
        // Without the disk fault neither is needed.
        assert!(
            refuse_unsupported_faults(&[FaultKind::Kill], &cluster(false, None), false).is_ok()
        );
    }

    #[test]
    fn a_network_cut_needs_namespaces() {
        let cut = [FaultKind::Partition];
        let error = refuse_unsupported_faults(&cut, &cluster(false, None), true)
            .unwrap_err()
            .to_string();
        assert!(error.contains("--netns"), "{error}");
        assert!(refuse_unsupported_faults(&cut, &cluster(true, None), true).is_ok());
    }
}

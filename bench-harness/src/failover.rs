//! `rill-bench failover`: how long a replicated partition is unwritable
//! when its leader is SIGKILLed, and whether anything acknowledged is lost.
//!
//! A local cluster is launched ([`crate::cluster`]); one topic with one
//! partition, replication factor = brokers, `min.insync.replicas` = 2. A
//! simple producer (not idempotent, acks=all) sends one record at a time,
//! each value starting with its sequence number; a failed send is retried
//! with the same sequence number after a metadata refresh. `kills` times:
//! the leader (from Metadata) is SIGKILLed; the failover time is from the
//! kill to the acknowledgement of the first produce *sent* after the kill
//! (an acknowledgement already on the wire at the kill would say nothing);
//! then the killed broker is restarted on its ports and data dir and the
//! run waits until it is back in the ISR before the next kill. At the end
//! the partition is read back from offset 0: every acknowledged sequence
//! number must be there (retries may add duplicates, which are counted).

use crate::cluster::{ClusterArgs, LocalCluster};
use crate::error::{BenchError, Result};
use crate::kafka::batch::{walk_batches, BatchBuilder};
use crate::kafka::client::{
    connect_any, create_topics_with_configs, fetch_metadata, is_retriable_leader_error,
    list_offsets, topic_layout_from_any, topic_name, ClusterMetadata, LATEST_TIMESTAMP,
};
use crate::kafka::connection::Connection;
use crate::runner::consumer::fetch_request;
use crate::workload::{Compression, Workload};
use clap::Args;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;
use rand::RngCore;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long one produce may wait for its acknowledgement before the
/// producer gives up on it and retries (through fresh metadata).
const PRODUCE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before retrying a failed produce: short, because the retry's
/// timing is what is measured, but not a busy loop against a dead port.
const RETRY_PAUSE: Duration = Duration::from_millis(20);
/// How long a failover or a rejoin may take before the run gives up.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// `min.insync.replicas` of the measured topic.
const MIN_INSYNC_REPLICAS: u32 = 2;

#[derive(Debug, Clone, Args)]
pub struct FailoverArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// How many times the partition leader is SIGKILLed.
    #[arg(long, default_value_t = 10)]
    pub kills: u32,
    /// Value size of each record (at least 8: the sequence number).
    #[arg(long, default_value_t = 100)]
    pub message_size: u32,
    /// Steady producing between a rejoin and the next kill.
    #[arg(long, default_value_t = 1000)]
    pub settle_ms: u64,
    /// Result JSON path.
    #[arg(long, default_value = "rill-bench-failover.json")]
    pub out: PathBuf,
    /// Which leader each kill hits: `leader`, the partition's leader
    /// wherever it is, or `controller`, the partition's leader moved first
    /// onto the active metadata controller (a reorder of its replicas and
    /// a preferred election), so that every kill loses both at once.
    #[arg(long, value_enum, default_value_t = KillTarget::Leader)]
    pub target: KillTarget,
}

/// What [`FailoverArgs::target`] kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KillTarget {
    /// The partition's leader, wherever it is.
    Leader,
    /// The partition's leader, moved onto the active controller first.
    Controller,
}

/// One kill and what followed it.
#[derive(Debug, Clone, Serialize)]
pub struct KillResult {
    pub killed_node: i32,
    /// The killed broker was also the active metadata controller (per
    /// Metadata's controller_id): its failover waits for a controller
    /// election as well as for the session timeout.
    pub killed_controller: bool,
    /// Kill to the first acknowledgement of a produce sent after it.
    pub failover_ms: f64,
    pub new_leader: i32,
    /// Restart to the restarted broker's return to the ISR.
    pub rejoin_ms: f64,
}

/// The JSON result of a failover run.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    pub brokers: u32,
    /// Which leader each kill hit.
    pub target: KillTarget,
    pub session_timeout_ms: Option<u32>,
    pub heartbeat_interval_ms: Option<u32>,
    pub kills: Vec<KillResult>,
    pub failover_ms_median: f64,
    pub failover_ms_max: f64,
    /// Median over the kills of a leader that was not the controller.
    pub failover_ms_median_leader_only: f64,
    /// Median over the kills of a leader that was also the controller.
    pub failover_ms_median_leader_and_controller: f64,
    pub rejoin_ms_median: f64,
    pub acknowledged_records: u64,
    pub read_back_records: u64,
    pub duplicate_records: u64,
    pub lost_records: u64,
    pub failed_attempts: u64,
}

/// Median of `values` (mean of the middle two for an even count); 0 when
/// empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    } else {
        sorted[middle]
    }
}

/// Largest of `values`; 0 when empty.
pub fn max(values: &[f64]) -> f64 {
    values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// Sequence numbers acknowledged but missing from `read`, and how many of
/// `read` are repeats.
pub fn check_read_back(acknowledged: &[u64], read: &[u64]) -> (Vec<u64>, u64) {
    let present: BTreeSet<u64> = read.iter().copied().collect();
    let lost = acknowledged
        .iter()
        .copied()
        .filter(|seq| !present.contains(seq))
        .collect();
    (lost, (read.len() - present.len()) as u64)
}

/// An acknowledged record: its sequence number and when its (last) send
/// started and its acknowledgement came.
#[derive(Debug, Clone, Copy)]
struct Ack {
    seq: u64,
    sent_at: Instant,
    acked_at: Instant,
}

#[derive(Default)]
struct Shared {
    acks: Mutex<Vec<Ack>>,
    failed_attempts: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn first_ack_sent_after(&self, after: Instant) -> Option<Ack> {
        let acks = self.acks.lock().ok()?;
        acks.iter()
            .rev()
            .take_while(|a| a.sent_at > after)
            .last()
            .copied()
    }
}

/// The partition's leader and ISR from any live broker.
async fn partition_state(bootstrap: &str, topic: &str) -> Option<(i32, Vec<i32>)> {
    let layout = topic_layout_from_any(bootstrap, "rill-bench-failover-meta", topic).await?;
    let mut isr = layout.isr.first()?.clone();
    isr.sort_unstable();
    Some((*layout.leaders.first()?, isr))
}

/// Polls `check` every 20 ms until it returns `Some`.
async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout(what.to_string()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn record_batch(seq: u64, message_size: u32, padding: &[u8]) -> Result<bytes::Bytes> {
    let mut builder = BatchBuilder::new(message_size as usize + 256);
    let body_len = (message_size as usize).saturating_sub(8).min(padding.len());
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    builder.append(now_ms, None, &seq.to_be_bytes(), &padding[..body_len]);
    builder.finish(Compression::None)
}

/// One record, acks=all, through `connection`: `Ok(Ok(()))` when
/// acknowledged, `Ok(Err(code))` when refused with a partition error.
async fn produce_one(
    connection: &Connection,
    topic: &str,
    batch: bytes::Bytes,
) -> Result<std::result::Result<(), i16>> {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(PRODUCE_TIMEOUT.as_millis() as i32)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let response = tokio::time::timeout(PRODUCE_TIMEOUT, connection.call(&request))
        .await
        .map_err(|_| BenchError::Timeout("produce".into()))??;
    let code = response
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .map(|p| p.error_code)
        .find(|&c| c != 0);
    Ok(match code {
        None => Ok(()),
        Some(code) => Err(code),
    })
}

/// The producer: one record at a time until `stop`; a failed record is
/// retried (same sequence number) until it is acknowledged.
async fn producer_loop(
    bootstrap: String,
    topic: String,
    message_size: u32,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let mut padding = vec![0u8; message_size as usize];
    rand::thread_rng().fill_bytes(&mut padding);
    let mut connection: Option<Arc<Connection>> = None;
    let mut seq: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let sent_at = Instant::now();
        let attempt = async {
            let current = match &connection {
                Some(c) if !c.is_closed() => c.clone(),
                _ => {
                    let metadata = leader_address(&bootstrap, &topic).await?;
                    let leader = metadata
                        .topics
                        .first()
                        .and_then(|t| t.leaders.first().copied())
                        .ok_or_else(|| BenchError::Other("no leader in metadata".into()))?;
                    let addr = metadata.brokers.get(&leader).cloned().ok_or_else(|| {
                        BenchError::Other(format!("leader {leader} has no address"))
                    })?;
                    let c = tokio::time::timeout(
                        Duration::from_secs(1),
                        Connection::connect(&addr, "rill-bench-failover"),
                    )
                    .await
                    .map_err(|_| BenchError::Timeout(format!("connect to {addr}")))??;
                    connection = Some(c.clone());
                    c
                }
            };
            produce_one(&current, &topic, record_batch(seq, message_size, &padding)?).await
        }
        .await;
        match attempt {
            Ok(Ok(())) => {
                let ack = Ack {
                    seq,
                    sent_at,
                    acked_at: Instant::now(),
                };
                if let Ok(mut acks) = shared.acks.lock() {
                    acks.push(ack);
                }
                seq += 1;
            }
            Ok(Err(code)) => {
                shared.failed_attempts.fetch_add(1, Ordering::Relaxed);
                if is_retriable_leader_error(code) {
                    connection = None;
                } else {
                    return Err(BenchError::Broker {
                        error_code: code,
                        context: format!("produce record {seq}"),
                    });
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(_) => {
                shared.failed_attempts.fetch_add(1, Ordering::Relaxed);
                connection = None;
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
    Ok(())
}

/// Metadata of `topic` from any live broker of `bootstrap`.
async fn leader_address(bootstrap: &str, topic: &str) -> Result<ClusterMetadata> {
    let connection = connect_any(
        bootstrap,
        "rill-bench-failover-meta",
        Duration::from_secs(1),
    )
    .await?;
    fetch_metadata(&connection, &[topic.to_string()]).await
}

/// Reads partition 0 of `topic` from its leader, offset 0 to the log end:
/// the sequence numbers in order.
async fn read_back(bootstrap: &str, topic: &str) -> Result<Vec<u64>> {
    let metadata = leader_address(bootstrap, topic).await?;
    let leader = metadata
        .topics
        .first()
        .and_then(|t| t.leaders.first().copied())
        .ok_or_else(|| BenchError::Protocol("no leader to read back from".into()))?;
    let addr = metadata
        .brokers
        .get(&leader)
        .ok_or_else(|| BenchError::Protocol(format!("leader {leader} has no address")))?;
    let connection = Connection::connect(addr, "rill-bench-failover-read").await?;
    let key = (topic.to_string(), 0);
    let end = list_offsets(&connection, std::slice::from_ref(&key), LATEST_TIMESTAMP)
        .await?
        .get(&key)
        .copied()
        .unwrap_or(0);
    let workload = Workload::default();
    let mut offsets = HashMap::from([(key.clone(), 0i64)]);
    let mut seqs = Vec::new();
    let deadline = Instant::now() + STEP_TIMEOUT;
    while offsets.get(&key).copied().unwrap_or(0) < end {
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout("reading the partition back".into()));
        }
        let response = connection
            .call(&fetch_request(
                &workload,
                std::slice::from_ref(&key),
                &offsets,
            ))
            .await?;
        for partition in response.responses.iter().flat_map(|t| t.partitions.iter()) {
            if partition.error_code != 0 {
                return Err(BenchError::Broker {
                    error_code: partition.error_code,
                    context: "read back".into(),
                });
            }
            let Some(records) = &partition.records else {
                continue;
            };
            let at = offsets.get(&key).copied().unwrap_or(0);
            let summary = walk_batches(records, at, |value| {
                if let Some(prefix) = value.get(0..8) {
                    let mut bytes = [0u8; 8];
                    bytes.copy_from_slice(prefix);
                    seqs.push(u64::from_be_bytes(bytes));
                }
            })?;
            if let Some(next) = summary.next_offset {
                offsets.insert(key.clone(), next.max(at));
            }
        }
    }
    Ok(seqs)
}

/// Runs the measurement and returns its report.
pub async fn run(args: &FailoverArgs) -> Result<FailoverReport> {
    check_args(args)?;
    let mut rig = Rig::start(args).await?;
    let shared = Arc::new(Shared::default());
    let stop = Arc::new(AtomicBool::new(false));
    let producer = tokio::spawn(producer_loop(
        rig.bootstrap.clone(),
        rig.topic.clone(),
        args.message_size,
        shared.clone(),
        stop.clone(),
    ));
    let mut kills = Vec::new();
    for round in 0..args.kills {
        tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;
        if producer.is_finished() {
            break;
        }
        let (kill, seq) = rig.kill_leader(&shared).await?;
        eprintln!("{}", kill_line(round, args.kills, &kill, seq));
        kills.push(kill);
    }
    tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;
    stop.store(true, Ordering::Relaxed);
    match producer.await {
        Ok(result) => result?,
        Err(error) => return Err(BenchError::Other(format!("producer task: {error}"))),
    }
    if kills.len() < args.kills as usize {
        return Err(BenchError::Other(format!(
            "only {} of {} kills done",
            kills.len(),
            args.kills
        )));
    }
    let acknowledged: Vec<u64> = shared
        .acks
        .lock()
        .map(|acks| acks.iter().map(|a| a.seq).collect())
        .unwrap_or_default();
    let read = read_back(&rig.bootstrap, &rig.topic).await?;
    let (lost, duplicates) = check_read_back(&acknowledged, &read);
    rig.cluster.stop();
    let records = Records {
        acknowledged: acknowledged.len() as u64,
        read_back: read.len() as u64,
        duplicates,
        lost: lost.len() as u64,
        failed_attempts: shared.failed_attempts.load(Ordering::Relaxed),
    };
    Ok(failover_report(args, kills, &records))
}

/// Refuses arguments the measurement cannot run with.
fn check_args(args: &FailoverArgs) -> Result<()> {
    if args.cluster.brokers < 3 {
        return Err(BenchError::Other(
            "failover needs at least 3 brokers (min.insync.replicas=2 after a kill)".into(),
        ));
    }
    if args.message_size < 8 {
        return Err(BenchError::Other(
            "--message-size must be at least 8".into(),
        ));
    }
    Ok(())
}

/// The measured cluster and its one topic.
struct Rig {
    cluster: LocalCluster,
    bootstrap: String,
    topic: String,
    /// Every node id: the full ISR.
    all: Vec<i32>,
    /// Which leader each kill hits.
    target: KillTarget,
}

impl Rig {
    /// Launches the cluster, creates the topic (RF = brokers,
    /// `min.insync.replicas` = 2) and waits until every broker is in its ISR.
    async fn start(args: &FailoverArgs) -> Result<Rig> {
        let mut cluster = LocalCluster::start(&args.cluster)?;
        cluster.wait_ready().await?;
        let bootstrap = cluster.bootstrap();
        eprintln!("cluster up: {bootstrap}");
        let topic = format!("rill-bench-failover-{:08x}", rand::thread_rng().next_u32());
        let connection =
            connect_any(&bootstrap, "rill-bench-failover", Duration::from_secs(5)).await?;
        create_topics_with_configs(
            &connection,
            "rill-bench-failover",
            std::slice::from_ref(&topic),
            1,
            args.cluster.brokers as i16,
            &[(
                "min.insync.replicas".to_string(),
                MIN_INSYNC_REPLICAS.to_string(),
            )],
        )
        .await?;
        let all: Vec<i32> = cluster.node_ids();
        wait_until("every broker in the ISR", STEP_TIMEOUT, || async {
            let (leader, isr) = partition_state(&bootstrap, &topic).await?;
            (leader > 0 && isr == all).then_some(())
        })
        .await?;
        Ok(Rig {
            cluster,
            bootstrap,
            topic,
            all,
            target: args.target,
        })
    }

    /// One round: SIGKILLs the leader, waits for the first acknowledgement
    /// of a produce sent after the kill and for the new leader, restarts
    /// the killed broker and waits until it is back in the ISR. Returns
    /// the round's result and the sequence number of that acknowledgement.
    async fn kill_leader(&mut self, shared: &Shared) -> Result<(KillResult, u64)> {
        let (bootstrap, topic, all) = (&self.bootstrap, &self.topic, &self.all);
        let (mut leader, _) = wait_until("the partition leader", STEP_TIMEOUT, || async {
            let (leader, isr) = partition_state(bootstrap, topic).await?;
            (leader > 0 && isr == *all).then_some((leader, isr))
        })
        .await?;
        if self.target == KillTarget::Controller {
            leader = self.lead_on_controller().await?;
        }
        let killed_controller = leader_address(bootstrap, topic)
            .await
            .is_ok_and(|m| m.controller_id == leader);
        let killed_at = Instant::now();
        self.cluster.kill(leader)?;
        let ack = wait_until(
            "an acknowledgement after the kill",
            STEP_TIMEOUT,
            || async { shared.first_ack_sent_after(killed_at) },
        )
        .await?;
        let failover_ms = ack.acked_at.duration_since(killed_at).as_secs_f64() * 1000.0;
        let new_leader = self.wait_new_leader(leader).await?;
        let restarted_at = Instant::now();
        self.cluster.restart(leader)?;
        let (bootstrap, topic, all) = (&self.bootstrap, &self.topic, &self.all);
        wait_until(
            "the restarted broker back in the ISR",
            STEP_TIMEOUT,
            || async {
                let (_, isr) = partition_state(bootstrap, topic).await?;
                (isr == *all).then_some(())
            },
        )
        .await?;
        let rejoin_ms = restarted_at.elapsed().as_secs_f64() * 1000.0;
        let kill = KillResult {
            killed_node: leader,
            killed_controller,
            failover_ms,
            new_leader,
            rejoin_ms,
        };
        Ok((kill, ack.seq))
    }

    /// Moves the partition's leadership onto the active controller and
    /// returns that node, once it leads.
    async fn lead_on_controller(&self) -> Result<i32> {
        let (bootstrap, topic, all) = (&self.bootstrap, &self.topic, &self.all);
        wait_until(
            "the partition led by the controller",
            STEP_TIMEOUT,
            || async {
                let controller = leader_address(bootstrap, topic).await.ok()?.controller_id;
                let (leader, _) = partition_state(bootstrap, topic).await?;
                if leader == controller {
                    return Some(leader);
                }
                if let Err(e) = crate::leader_move::lead_on(bootstrap, topic, controller, all).await
                {
                    eprintln!("moving the leader onto controller {controller}: {e}");
                }
                None
            },
        )
        .await
    }

    /// Waits until one of the brokers other than `killed` leads the
    /// partition, asking only them.
    async fn wait_new_leader(&self, killed: i32) -> Result<i32> {
        let survivors: Vec<i32> = self.all.iter().copied().filter(|&n| n != killed).collect();
        let survivors_bootstrap = self
            .cluster
            .specs()
            .iter()
            .filter(|s| s.node_id != killed)
            .map(|s| s.kafka_addr.clone())
            .collect::<Vec<_>>()
            .join(",");
        let topic = &self.topic;
        let (new_leader, _) = wait_until("the new leader", STEP_TIMEOUT, || async {
            let (l, isr) = partition_state(&survivors_bootstrap, topic).await?;
            survivors.contains(&l).then_some((l, isr))
        })
        .await?;
        Ok(new_leader)
    }
}

/// The progress line of kill `round` (of `kills`), whose failover ended
/// with the acknowledgement of record `seq`.
fn kill_line(round: u32, kills: u32, kill: &KillResult, seq: u64) -> String {
    let KillResult {
        killed_node: leader,
        killed_controller,
        failover_ms,
        new_leader,
        rejoin_ms,
    } = kill;
    format!(
        "kill {}/{}: node {leader}{} killed, failover {failover_ms:.0} ms (new leader {new_leader}, record {}), back in the ISR {rejoin_ms:.0} ms after restart",
        round + 1,
        kills,
        if *killed_controller {
            " (leader and controller)"
        } else {
            ""
        },
        seq
    )
}

/// The record counts of a run: acknowledged, read back, and the checks.
struct Records {
    acknowledged: u64,
    read_back: u64,
    duplicates: u64,
    lost: u64,
    failed_attempts: u64,
}

/// The report of a run from its kills and record counts.
fn failover_report(
    args: &FailoverArgs,
    kills: Vec<KillResult>,
    records: &Records,
) -> FailoverReport {
    let failovers: Vec<f64> = kills.iter().map(|k| k.failover_ms).collect();
    let rejoins: Vec<f64> = kills.iter().map(|k| k.rejoin_ms).collect();
    let failovers_where = |controller: bool| -> Vec<f64> {
        kills
            .iter()
            .filter(|k| k.killed_controller == controller)
            .map(|k| k.failover_ms)
            .collect()
    };
    FailoverReport {
        brokers: args.cluster.brokers,
        target: args.target,
        session_timeout_ms: args.cluster.session_timeout_ms,
        heartbeat_interval_ms: args.cluster.heartbeat_interval_ms,
        failover_ms_median: median(&failovers),
        failover_ms_max: max(&failovers),
        failover_ms_median_leader_only: median(&failovers_where(false)),
        failover_ms_median_leader_and_controller: median(&failovers_where(true)),
        rejoin_ms_median: median(&rejoins),
        kills,
        acknowledged_records: records.acknowledged,
        read_back_records: records.read_back,
        duplicate_records: records.duplicates,
        lost_records: records.lost,
        failed_attempts: records.failed_attempts,
    }
}

/// The summary line block printed after a run.
pub fn summary(report: &FailoverReport) -> String {
    format!(
        "failover over {} kills: median {:.0} ms, max {:.0} ms (session timeout {}); rejoin median {:.0} ms\n\
         median {:.0} ms over {} kills of a leader only, {:.0} ms over {} kills of the leader that was also the controller\n\
         records: {} acknowledged, {} read back, {} lost, {} duplicates (retries of unacknowledged sends), {} failed attempts",
        report.kills.len(),
        report.failover_ms_median,
        report.failover_ms_max,
        report
            .session_timeout_ms
            .map_or("rill default".to_string(), |ms| format!("{ms} ms")),
        report.rejoin_ms_median,
        report.failover_ms_median_leader_only,
        report.kills.iter().filter(|k| !k.killed_controller).count(),
        report.failover_ms_median_leader_and_controller,
        report.kills.iter().filter(|k| k.killed_controller).count(),
        report.acknowledged_records,
        report.read_back_records,
        report.lost_records,
        report.duplicate_records,
        report.failed_attempts,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_max() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0]), 3.0);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[f64::NAN, 2.0]), 2.0);
        assert_eq!(max(&[]), 0.0);
        assert_eq!(max(&[1.0, 7.5, 3.0]), 7.5);
    }

    #[test]
    fn read_back_finds_losses_and_duplicates() {
        let (lost, duplicates) = check_read_back(&[0, 1, 2, 3], &[0, 1, 1, 3, 4]);
        assert_eq!(lost, vec![2]);
        assert_eq!(duplicates, 1);
        let (lost, duplicates) = check_read_back(&[0, 1], &[0, 1]);
        assert!(lost.is_empty());
        assert_eq!(duplicates, 0);
    }

    #[test]
    fn first_ack_after_a_kill_is_the_earliest_sent_after_it() {
        let shared = Shared::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        if let Ok(mut acks) = shared.acks.lock() {
            for (seq, sent, acked) in [(0, 0, 5), (1, 6, 12), (2, 20, 30), (3, 31, 35)] {
                acks.push(Ack {
                    seq,
                    sent_at: at(sent),
                    acked_at: at(acked),
                });
            }
        }
        // Killed at 10 ms: record 1 was sent before (its ack proves
        // nothing), record 2 is the first sent after.
        assert_eq!(shared.first_ack_sent_after(at(10)).map(|a| a.seq), Some(2));
        assert!(shared.first_ack_sent_after(at(40)).is_none());
    }

    #[test]
    fn record_values_start_with_the_sequence_number() {
        let batch = record_batch(42, 100, &[7u8; 100]).unwrap();
        let mut seen = Vec::new();
        let summary = walk_batches(&batch, 0, |value| {
            seen.push((value.len(), value.get(0..8).map(|p| p.to_vec())));
        })
        .unwrap();
        assert_eq!(summary.records, 1);
        assert_eq!(seen, vec![(100, Some(42u64.to_be_bytes().to_vec()))]);
    }
}

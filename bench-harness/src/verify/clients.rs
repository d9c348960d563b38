//! The queue workload's clients, on librdkafka (`rdkafka`), so the run
//! sees what a real client sees: idempotent acks=all producers, each
//! sending unique values `pN/seq` one at a time round-robin over the
//! partitions, and consumers on `assign` (every partition from offset 0)
//! and on `subscribe` (one consumer group, committing explicitly and
//! reading its commits back). Each operation goes to the [`Recorder`].
//!
//! Producers are tokio tasks (rdkafka's `FutureProducer`); consumers are
//! blocking `BaseConsumer` loops on tokio's blocking pool.

use super::history::{ConsumerMode, Op, PolledRecord, SendOutcome};
use super::recorder::Recorder;
use crate::error::{BenchError, Result};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long librdkafka keeps retrying one send before it reports it
/// failed (then `info`): longer than a leader failover (a session timeout
/// of 2.5 s plus an election), shorter than a fault window plus one.
pub const MESSAGE_TIMEOUT_MS: u64 = 10_000;
/// Pause after a failed send, so a dead cluster is not a busy loop.
const FAILED_SEND_PAUSE: Duration = Duration::from_millis(100);
/// How long one consumer poll blocks when nothing arrives; also how
/// quickly a consumer sees its stop flag.
const POLL_TIMEOUT: Duration = Duration::from_millis(100);
/// How often a group consumer commits its position and reads it back.
const COMMIT_INTERVAL: Duration = Duration::from_millis(1000);
/// How long a commit or a committed-offsets read may take.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// The consumer group of the `subscribe` consumers.
pub const GROUP_ID: &str = "rill-bench-verify";

/// What every client needs to know.
#[derive(Debug, Clone)]
pub struct Target {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: i32,
    /// The `subscribe` consumers' `group.protocol`.
    pub group_protocol: GroupProtocol,
    /// Racks the brokers are in (`rack-1` ..), which the consumers take
    /// turns to name as their `client.rack`; 0: they name none.
    pub racks: u32,
}

/// How the `subscribe` consumers join their group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupProtocol {
    /// JoinGroup/SyncGroup/Heartbeat, the client assigning.
    Classic,
    /// KIP-848's ConsumerGroupHeartbeat, the broker assigning.
    Consumer,
}

fn producer(target: &Target) -> Result<FutureProducer> {
    ClientConfig::new()
        .set("bootstrap.servers", &target.bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("message.timeout.ms", MESSAGE_TIMEOUT_MS.to_string())
        .set("request.timeout.ms", "3000")
        .set("retry.backoff.ms", "100")
        .create()
        .map_err(|e| BenchError::Other(format!("rdkafka producer: {e}")))
}

/// Producer `index` until `stop`: one send at a time, so its acknowledged
/// offsets in each partition must rise (the `nonmonotonic-send` check).
pub async fn produce(
    target: Target,
    index: usize,
    recorder: Arc<Recorder>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let process = format!("p{index}");
    let mut client = producer(&target)?;
    let mut seq: u64 = 0;
    while !stop.load(Ordering::SeqCst) {
        let partition = (seq % target.partitions as u64) as i32;
        let value = format!("{process}/{seq}");
        seq += 1;
        let start_ms = recorder.now_ms();
        let record = FutureRecord::<(), str>::to(&target.topic)
            .partition(partition)
            .payload(&value);
        let outcome = match client.send(record, Duration::ZERO).await {
            Ok(delivery) if delivery.partition == partition => SendOutcome::Ok {
                offset: delivery.offset,
            },
            Ok(delivery) => SendOutcome::Info {
                error: format!("delivered to partition {}", delivery.partition),
            },
            Err((error, _)) => SendOutcome::Info {
                error: error.to_string(),
            },
        };
        let failed = matches!(outcome, SendOutcome::Info { .. });
        recorder.push(Op::Send {
            process: process.clone(),
            partition,
            value,
            start_ms,
            end_ms: recorder.now_ms(),
            outcome,
            txn: None,
        });
        if failed {
            // An idempotent producer whose sequence state the broker
            // rejected is fatally failed; a fresh one gets a new id.
            if client.client().fatal_error().is_some() {
                client = producer(&target)?;
            }
            tokio::time::sleep(FAILED_SEND_PAUSE).await;
        }
    }
    Ok(())
}

fn consumer(target: &Target, group_id: &str, rack: Option<&str>) -> Result<BaseConsumer> {
    let mut config = ClientConfig::new();
    if let Some(rack) = rack {
        config.set("client.rack", rack);
    }
    config
        .set("bootstrap.servers", &target.bootstrap)
        .set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        // librdkafka's default, said aloud: the transactional checks
        // (G1a, precommitted-read) assume no aborted or open data is read.
        .set("isolation.level", "read_committed");
    match target.group_protocol {
        GroupProtocol::Classic => config
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "1000"),
        // The session and heartbeat times are the broker's under KIP-848
        // (librdkafka refuses them here).
        GroupProtocol::Consumer => config.set("group.protocol", "consumer"),
    };
    config
        .create()
        .map_err(|e| BenchError::Other(format!("rdkafka consumer: {e}")))
}

/// One consumer until `stop`: its own thread (a blocking poll loop); the
/// `index`-th consumer names rack `index % racks + 1`, if there are racks.
pub fn consume(
    target: Target,
    (index, mode): (usize, ConsumerMode),
    recorder: Arc<Recorder>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let name = format!("c{index}");
    let rack = (target.racks > 0).then(|| format!("rack-{}", index as u32 % target.racks + 1));
    let group_id = match mode {
        // Never joins (assign only): its own id keeps it out of the group.
        ConsumerMode::Assign => format!("{GROUP_ID}-{name}"),
        ConsumerMode::Subscribe => GROUP_ID.to_string(),
    };
    let client = consumer(&target, &group_id, rack.as_deref())?;
    let rdkafka = |e: rdkafka::error::KafkaError| BenchError::Other(format!("{name}: {e}"));
    match mode {
        ConsumerMode::Assign => {
            let mut assignment = TopicPartitionList::new();
            for partition in 0..target.partitions {
                assignment
                    .add_partition_offset(&target.topic, partition, Offset::Beginning)
                    .map_err(rdkafka)?;
            }
            client.assign(&assignment).map_err(rdkafka)?;
        }
        ConsumerMode::Subscribe => client.subscribe(&[&target.topic]).map_err(rdkafka)?,
    }
    let mut last_commit = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        poll_once(&client, &name, mode, &recorder);
        if mode == ConsumerMode::Subscribe && last_commit.elapsed() >= COMMIT_INTERVAL {
            commit_and_read_back(&client, &name, &recorder);
            last_commit = Instant::now();
        }
    }
    Ok(())
}

/// One poll; a record becomes a one-record `poll` operation. Errors
/// (a broker going away) are the client's to retry, so they are skipped.
fn poll_once(client: &BaseConsumer, name: &str, mode: ConsumerMode, recorder: &Recorder) {
    let start_ms = recorder.now_ms();
    let Some(Ok(message)) = client.poll(POLL_TIMEOUT) else {
        return;
    };
    let value = message
        .payload()
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
        .unwrap_or_default();
    recorder.push(Op::Poll {
        process: name.to_string(),
        mode,
        start_ms,
        end_ms: recorder.now_ms(),
        records: vec![PolledRecord {
            partition: message.partition(),
            offset: message.offset(),
            value,
        }],
    });
}

/// `(partition, offset)` of every partition with a concrete offset.
fn offsets(list: &TopicPartitionList) -> Vec<(i32, i64)> {
    list.elements()
        .iter()
        .filter_map(|element| match element.offset() {
            Offset::Offset(offset) => Some((element.partition(), offset)),
            _ => None,
        })
        .collect()
}

/// Commits the consumer's position (the next offset of each partition it
/// has read) and reads the group's committed offsets back.
fn commit_and_read_back(client: &BaseConsumer, name: &str, recorder: &Recorder) {
    let Ok(position) = client.position() else {
        return;
    };
    let committed = offsets(&position);
    if committed.is_empty() {
        return;
    }
    let start_ms = recorder.now_ms();
    let ok = client.commit(&position, CommitMode::Sync).is_ok();
    recorder.push(Op::Commit {
        process: name.to_string(),
        start_ms,
        end_ms: recorder.now_ms(),
        offsets: committed,
        ok,
    });
    let start_ms = recorder.now_ms();
    if let Ok(read) = client.committed(COMMIT_TIMEOUT) {
        recorder.push(Op::CommittedRead {
            process: name.to_string(),
            start_ms,
            end_ms: recorder.now_ms(),
            offsets: offsets(&read),
        });
    }
}

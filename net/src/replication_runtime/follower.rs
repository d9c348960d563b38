//! A follower's fetcher, one task per followed partition on the shard that
//! owns it, for as long as its role (leader, epoch) lasts:
//!
//! 1. Truncate to where the leader's log agrees with ours (KIP-101): ask
//!    the leader with OffsetForLeaderEpoch where our latest epoch ends in
//!    its log, and cut everything at or past that. What we cut was never
//!    committed (the leader would have it otherwise).
//! 2. Fetch from our log end with our replica id; append the batches as the
//!    leader wrote them (offsets, epochs); fsync; only then fetch again —
//!    the next fetch's offset is what tells the leader we hold the data, so
//!    the HW only ever counts what is durable on the ISR.
//! 3. Readers of this replica see up to min(leader's HW, our log end).
//!
//! Any error (the leader moved, the connection broke) pauses and retries
//! from step 1; a new role stops the task.

use super::client::KafkaConnection;
use super::roles::ReplicaManager;
use crate::cluster_runtime::partition_leader;
use crate::shard::Shard;
use engine::{ErrorCode, PartitionLog, TopicPartition};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::net::ToSocketAddrs;
use std::rc::Rc;
use std::time::Duration;

/// Fetch v12: replica id in the body, current leader epoch, topic names.
const FETCH_VERSION: i16 = 12;
/// OffsetForLeaderEpoch v3: replica id and current leader epoch.
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 3;
/// How long the leader may hold a fetch with nothing new.
const FETCH_MAX_WAIT_MS: i32 = 500;
/// The most bytes of one fetch.
const FETCH_MAX_BYTES: i32 = 8 << 20;
/// Pause after an error before trying again.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs the fetcher of `tp` while `generation` is its role.
pub async fn run_fetcher(
    shard: Rc<Shard>,
    tp: TopicPartition,
    leader: i32,
    leader_epoch: i32,
    generation: u64,
) {
    let manager = shard.service::<ReplicaManager>();
    while manager.is_current(&tp, generation) {
        match follow(&shard, &tp, leader, leader_epoch, generation).await {
            Ok(()) => return,
            Err(e) => {
                tracing::debug!(%tp, leader, error = %e, "fetching from the leader failed; retrying");
                glommio::timer::sleep(RETRY_BACKOFF).await;
            }
        }
    }
}

/// One session with the leader: truncate, then fetch until an error or a
/// new role (`Ok`).
async fn follow(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    leader: i32,
    leader_epoch: i32,
    generation: u64,
) -> Result<(), String> {
    let manager = shard.service::<ReplicaManager>();
    let log = shard.logs.get(tp).ok_or("the local replica is gone")?;
    let (node, host, port) =
        partition_leader(shard, &tp.topic, tp.partition).map_err(|code| code.to_string())?;
    if node != leader {
        return Err(format!("the image names leader {node}, not {leader} yet"));
    }
    let address = (host.as_str(), u16::try_from(port).unwrap_or(0))
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("the leader's address resolves to nothing")?;
    let client_id = format!("rill-replica-{}", shard.config.broker_id);
    let mut connection = KafkaConnection::connect(address, CONNECT_TIMEOUT, client_id).await?;
    truncate_to_leader(&mut connection, shard, tp, &log, leader_epoch).await?;
    while manager.is_current(tp, generation) {
        let fetched = fetch(&mut connection, shard, tp, &log, leader_epoch).await?;
        if let Some(records) = fetched.records.filter(|r| !r.is_empty()) {
            let appended = log
                .append_replicated(records.to_vec())
                .map_err(|e| format!("append of the leader's batches refused: {e}"))?;
            log.wait_durable(appended.last_offset)
                .await
                .map_err(|e| format!("the replica's disk failed: {e}"))?;
        }
        manager.counters.borrow_mut().follower_lag.insert(
            (tp.topic.clone(), tp.partition),
            (fetched.high_watermark - log.log_end_offset()).max(0),
        );
        let visible = fetched.high_watermark.min(log.log_end_offset());
        if visible > log.high_watermark() {
            log.set_replication_limit(Some(visible));
        }
    }
    Ok(())
}

/// What a fetch brought.
struct Fetched {
    high_watermark: i64,
    records: Option<bytes::Bytes>,
}

async fn fetch(
    connection: &mut KafkaConnection,
    shard: &Shard,
    tp: &TopicPartition,
    log: &PartitionLog,
    leader_epoch: i32,
) -> Result<Fetched, String> {
    let mut partition = FetchPartition::default();
    partition.partition = tp.partition;
    partition.current_leader_epoch = leader_epoch;
    partition.fetch_offset = log.log_end_offset();
    partition.log_start_offset = log.log_start_offset();
    partition.partition_max_bytes = FETCH_MAX_BYTES;
    let mut topic = FetchTopic::default();
    topic.topic = TopicName(StrBytes::from_string(tp.topic.clone()));
    topic.partitions = vec![partition];
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(shard.config.broker_id);
    request.max_wait_ms = FETCH_MAX_WAIT_MS;
    request.min_bytes = 1;
    request.max_bytes = FETCH_MAX_BYTES;
    request.session_epoch = -1;
    request.topics = vec![topic];
    let response: FetchResponse = connection
        .request(ApiKey::Fetch, FETCH_VERSION, &request)
        .await?;
    let data = answer_for(
        response.responses.into_iter().flat_map(|t| t.partitions),
        |p| (p.partition_index == tp.partition).then_some(p.error_code),
    )?;
    Ok(Fetched {
        high_watermark: data.high_watermark,
        records: data.records,
    })
}

/// The leader's answer for our partition: `error_of` names the partition's
/// entry (with its error code); an error code is an `Err` with its name.
fn answer_for<P>(
    partitions: impl IntoIterator<Item = P>,
    error_of: impl Fn(&P) -> Option<i16>,
) -> Result<P, String> {
    for partition in partitions {
        match error_of(&partition) {
            Some(0) => return Ok(partition),
            Some(code) => {
                let code = ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError);
                return Err(format!("the leader answered {code}"));
            }
            None => {}
        }
    }
    Err(String::from("the leader's answer lacks the partition"))
}

/// Step 1 of the module doc.
async fn truncate_to_leader(
    connection: &mut KafkaConnection,
    shard: &Shard,
    tp: &TopicPartition,
    log: &PartitionLog,
    leader_epoch: i32,
) -> Result<(), String> {
    let Some(latest_epoch) = log.leader_epoch_cache().latest_epoch() else {
        return Ok(());
    };
    let mut partition = OffsetForLeaderPartition::default();
    partition.partition = tp.partition;
    partition.current_leader_epoch = leader_epoch;
    partition.leader_epoch = latest_epoch;
    let mut topic = OffsetForLeaderTopic::default();
    topic.topic = TopicName(StrBytes::from_string(tp.topic.clone()));
    topic.partitions = vec![partition];
    let mut request = OffsetForLeaderEpochRequest::default();
    request.replica_id = BrokerId(shard.config.broker_id);
    request.topics = vec![topic];
    let response: OffsetForLeaderEpochResponse = connection
        .request(
            ApiKey::OffsetForLeaderEpoch,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            &request,
        )
        .await?;
    let answer = answer_for(
        response.topics.into_iter().flat_map(|t| t.partitions),
        |p| (p.partition == tp.partition).then_some(p.error_code),
    )?;
    // Kafka's rule: the leader's end of our epoch, or — when the leader's
    // answer is an older epoch — the end of that one in our own log.
    let mut cut = answer.end_offset;
    if answer.leader_epoch >= 0 && answer.leader_epoch < latest_epoch {
        let ours = log.end_offset_for_epoch(answer.leader_epoch);
        cut = cut.min(ours.end_offset);
    }
    if answer.end_offset < 0 {
        return Ok(());
    }
    if cut < log.log_end_offset() {
        tracing::warn!(%tp, from = log.log_end_offset(), to = cut, "truncating to the leader's log");
        log.truncate_to(cut)
            .await
            .map_err(|e| format!("truncation failed: {e}"))?;
    }
    Ok(())
}

//! A follower whose log ends below the leader's log start: it was away
//! while the leader's retention or DeleteRecords moved the start past it.
//! Every fetch then gets OFFSET_OUT_OF_RANGE, and no truncation helps, since
//! what the follower lacks no longer exists anywhere. As Kafka's fetcher
//! does (`handleOutOfRangeError`), it asks the leader for its local log
//! start (ListOffsets, earliest-local) and, when that is past its own log
//! end, empties its log and starts it there. Nothing it drops was
//! acknowledged beyond what the leader itself deleted, or holds in tiered
//! storage (the leader then answers OFFSET_MOVED_TO_TIERED_STORAGE). On a
//! tiered topic it starts after the remote segment below the leader's
//! local start, with that segment's epochs and producer state
//! ([`super::remote_aux`]).

use super::client::KafkaConnection;
use crate::Shard;
use engine::{ErrorCode, PartitionLog, TopicPartition};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// ListOffsets v4: the current leader epoch is checked.
const LIST_OFFSETS_VERSION: i16 = 4;
/// ListOffsets' timestamp for the local log start (KIP-405's
/// earliest-local: the log start on a topic that is not tiered). A tiered
/// leader answers a fetch below it OFFSET_MOVED_TO_TIERED_STORAGE, and the
/// follower starts there, as Kafka's does: what lies below is remote, and
/// a follower never copies it.
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;

/// The leader's log start for `tp`.
async fn leader_log_start(
    connection: &mut KafkaConnection,
    shard: &Shard,
    tp: &TopicPartition,
    leader_epoch: i32,
) -> Result<i64, String> {
    let mut partition = ListOffsetsPartition::default();
    partition.partition_index = tp.partition;
    partition.current_leader_epoch = leader_epoch;
    partition.timestamp = EARLIEST_LOCAL_TIMESTAMP;
    let mut topic = ListOffsetsTopic::default();
    topic.name = TopicName(StrBytes::from_string(tp.topic.clone()));
    topic.partitions = vec![partition];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(shard.config.broker_id);
    request.topics = vec![topic];
    let response: ListOffsetsResponse = connection
        .request(ApiKey::ListOffsets, LIST_OFFSETS_VERSION, &request)
        .await?;
    let answer = (response.topics.into_iter())
        .flat_map(|t| t.partitions)
        .find(|p| p.partition_index == tp.partition)
        .ok_or("the leader's ListOffsets answer lacks the partition")?;
    if answer.error_code != 0 {
        let code = ErrorCode::from_code(answer.error_code).unwrap_or(ErrorCode::UnknownServerError);
        return Err(format!("the leader answered ListOffsets with {code}"));
    }
    Ok(answer.offset)
}

/// Starts the log over at the leader's log start when that is past our log
/// end; says whether it did.
pub async fn start_over_if_behind(
    connection: &mut KafkaConnection,
    shard: &Shard,
    tp: &TopicPartition,
    log: &PartitionLog,
    leader_epoch: i32,
) -> Result<bool, String> {
    let leader_start = leader_log_start(connection, shard, tp, leader_epoch).await?;
    let log_end = log.log_end_offset();
    if leader_start <= log_end {
        return Ok(false);
    }
    // A tiered topic: after the remote segment below the leader's local
    // start, with the epochs and producers of everything below.
    if let Some(start) = super::remote_aux::start_after_remote(shard, log, leader_start).await? {
        tracing::warn!(%tp, log_end, leader_log_start = leader_start, start,
            "the leader's log starts past ours: starting over after its remote log");
        return Ok(true);
    }
    tracing::warn!(
        %tp,
        log_end,
        leader_log_start = leader_start,
        "the leader's log starts past ours: starting over at its log start"
    );
    log.truncate_fully_and_start_at(leader_start)
        .await
        .map_err(|e| format!("starting the log over failed: {e}"))?;
    Ok(true)
}

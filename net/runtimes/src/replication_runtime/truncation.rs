//! A follower's truncation I/O: where to cut is `rill-cluster`'s pure
//! [`truncation_offset`] (Kafka's `getOffsetTruncationState`); this module
//! asks the leader or reads its fetch answer, cuts the log with the
//! engine's crash-safe `truncate_to`, and says so.
//!
//! Two ways in, as in Kafka's replica fetcher:
//! - [`truncate_on_divergence`]: the usual one (KIP-595, Kafka ≥ 2.7): every
//!   fetch carries the follower's last fetched epoch, and the leader answers
//!   `diverging_epoch` when the logs part. Handled inside the fetch session,
//!   so a follower never serves — or reports to the HW — records the leader
//!   does not have.
//! - [`truncate_to_leader`]: OffsetForLeaderEpoch (KIP-101), kept for when
//!   the leader cannot place the follower's last fetched epoch (it answers
//!   OFFSET_OUT_OF_RANGE): its undefined answer sends the follower back to
//!   its high watermark, below which the logs agree.

use super::client::KafkaConnection;
use super::roles::ReplicaManager;
use crate::Shard;
use cluster::replication::{truncation_offset, EpochEndOffset, TruncationPoint};
use engine::{ErrorCode, PartitionLog, TopicPartition};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// OffsetForLeaderEpoch v3: replica id and current leader epoch.
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 3;

/// Where the follower's log is cut for `leader_answer` (the leader's end
/// of an epoch), from its own epoch cache, log end and high watermark.
fn truncation_point(log: &PartitionLog, leader_answer: EpochEndOffset) -> TruncationPoint {
    let log_end_offset = log.log_end_offset();
    // The pure rule asserts HW ≤ log end; a follower's HW is capped by its
    // log end already, and the `min` keeps a stale value from stopping it.
    let high_watermark = log.high_watermark().min(log_end_offset);
    truncation_offset(
        &log.leader_epoch_cache(),
        log_end_offset,
        high_watermark,
        leader_answer,
    )
}

/// The leader answered a fetch with `diverging`: cut the log there
/// (durably) before fetching again from the new end. A cut that removes
/// nothing would bring the same answer back forever, so it is an error and
/// the session starts over (after its backoff).
pub async fn truncate_on_divergence(
    manager: &ReplicaManager,
    tp: &TopicPartition,
    log: &PartitionLog,
    diverging: EpochEndOffset,
) -> Result<(), String> {
    let from = log.log_end_offset();
    let point = truncation_point(log, diverging);
    if point.offset >= from {
        return Err(format!(
            "the leader names diverging epoch {} ending at {}, but nothing here is past it (log end {from})",
            diverging.epoch, diverging.end_offset
        ));
    }
    tracing::info!(
        %tp,
        diverging_epoch = diverging.epoch,
        leader_end_offset = diverging.end_offset,
        from,
        to = point.offset,
        // `false`: the leader lacks our epoch; the next fetch, with our
        // new last epoch, may cut further (KIP-279).
        complete = point.complete,
        "the leader's log diverges from ours: truncating"
    );
    log.truncate_to(point.offset)
        .await
        .map_err(|e| format!("truncation failed: {e}"))?;
    manager.counters.borrow_mut().diverging_epoch_truncations += 1;
    Ok(())
}

/// The module doc's second way: ask the leader where our latest epoch ends
/// in its log and cut there.
pub async fn truncate_to_leader(
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
    let answer = response
        .topics
        .into_iter()
        .flat_map(|t| t.partitions)
        .find(|p| p.partition == tp.partition)
        .ok_or("the leader's answer lacks the partition")?;
    if answer.error_code != 0 {
        let code = ErrorCode::from_code(answer.error_code).unwrap_or(ErrorCode::UnknownServerError);
        return Err(format!("the leader answered {code}"));
    }
    let leader_answer = EpochEndOffset {
        epoch: answer.leader_epoch,
        end_offset: answer.end_offset,
    };
    let from = log.log_end_offset();
    let point = truncation_point(log, leader_answer);
    if point.offset < from {
        tracing::warn!(%tp, from, to = point.offset, "truncating to the leader's log");
        log.truncate_to(point.offset)
            .await
            .map_err(|e| format!("truncation failed: {e}"))?;
    }
    Ok(())
}

//! OffsetForLeaderEpoch (key 23): where a leader epoch ends in this log.
//! Consumers ask it to detect log truncation (KIP-320: after a leader
//! change, is my position still in the log?), followers to find how much of
//! their log the leader never had (KIP-101) before they truncate.
//!
//! Each partition is answered on its owner shard from the partition's
//! leader-epoch cache (`engine::PartitionLog::end_offset_for_epoch_checked`),
//! with Kafka's rules: an unknown partition is UNKNOWN_TOPIC_OR_PARTITION; a
//! `current_leader_epoch` (when not -1) older than the partition's is
//! FENCED_LEADER_EPOCH and newer UNKNOWN_LEADER_EPOCH; otherwise the largest
//! epoch ≤ the requested one and its end offset (the log end offset for the
//! current epoch), or -1/-1 when the epoch is above every known one.
//! `replica_id` (v3+; -1 for consumers) changes nothing on a broker that is
//! the leader of all its partitions.

use super::{legacy, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kernel::error::RequestError;
use runtimes::cluster_runtime;
use runtimes::routing::run_authorized;
use runtimes::routing::{PartitionOp, PartitionReply};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v4 (v0 and v1 predate `current_leader_epoch` and kafka-protocol no
/// longer decodes them: `legacy` does).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::OffsetForLeaderEpoch,
    min_version: 0,
    max_version: 4,
    handle,
};

/// The request body as this version lays it out (also the fuzzed decoder,
/// see [`crate::fuzzing`]).
pub(crate) fn decode_body(
    request: &mut Request,
) -> Result<OffsetForLeaderEpochRequest, RequestError> {
    if request.version < 2 {
        legacy::offset_for_leader_epoch::decode(request.body.clone())
            .map_err(|e| request.decode_error(e))
    } else {
        request.decode()
    }
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body = decode_body(&mut request)?;
        let mut pairs = Vec::new();
        let mut epochs = Vec::new();
        for topic in &body.topics {
            for p in &topic.partitions {
                pairs.push((topic.topic.0.to_string(), p.partition));
                epochs.push((p.current_leader_epoch, p.leader_epoch));
            }
        }
        let authz = cluster_runtime::authz(&shard, &request.session);
        let described = |topic: &str| authz.allows_topic(Operation::Describe, topic);
        let mut replies = run_authorized(&shard, &pairs, described, |tp, i| {
            let (current_leader_epoch, leader_epoch) = epochs[i];
            PartitionOp::EpochEndOffset {
                tp,
                current_leader_epoch,
                leader_epoch,
            }
        })
        .await
        .into_iter();
        let mut response = OffsetForLeaderEpochResponse::default();
        for topic in body.topics {
            let mut out = OffsetForLeaderTopicResult::default();
            out.topic = topic.topic;
            for p in topic.partitions {
                let mut part = EpochEndOffset::default();
                part.partition = p.partition;
                part.leader_epoch = -1;
                part.end_offset = -1;
                match replies.next() {
                    Some(Ok(PartitionReply::EpochEndOffset(Ok((epoch, end_offset))))) => {
                        part.leader_epoch = epoch;
                        part.end_offset = end_offset;
                    }
                    Some(Ok(PartitionReply::EpochEndOffset(Err(code)))) | Some(Err(code)) => {
                        part.error_code = code.code()
                    }
                    _ => part.error_code = ErrorCode::UnknownServerError.code(),
                }
                out.partitions.push(part);
            }
            response.topics.push(out);
        }
        if request.version < 2 {
            let body = legacy::offset_for_leader_epoch::encode(&response, request.version);
            return request.respond_raw(&body);
        }
        request.respond(&response)
    })
}

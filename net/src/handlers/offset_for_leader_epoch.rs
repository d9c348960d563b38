//! OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, which
//! consumers use to detect log truncation (KIP-320). A single node never
//! truncates under a consumer, so every epoch up to the current one ends at the
//! log end offset, and the current epoch is reported.

use super::{Handler, HandlerFuture, Request};
use crate::routing::run_checked;
use crate::routing::{PartitionOp, PartitionReply};
use crate::shard::Shard;
use engine::ErrorCode;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use std::rc::Rc;

/// v2–v4 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::OffsetForLeaderEpoch,
    min_version: 2,
    max_version: 4,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: OffsetForLeaderEpochRequest = request.decode()?;
        let pairs: Vec<(String, i32)> = body
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic.0.to_string(), p.partition))
            })
            .collect();
        let mut replies = run_checked(&shard, &pairs, |tp, _| PartitionOp::Describe { tp })
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
                    Some(Ok(PartitionReply::Describe(Ok(state)))) => {
                        if p.leader_epoch > state.leader_epoch {
                            // An epoch from the future: Kafka answers "undefined".
                        } else {
                            part.leader_epoch = state.leader_epoch;
                            part.end_offset = state.log_end_offset;
                        }
                    }
                    Some(Ok(PartitionReply::Describe(Err(code)))) | Some(Err(code)) => {
                        part.error_code = code.code()
                    }
                    _ => part.error_code = ErrorCode::UnknownServerError.code(),
                }
                out.partitions.push(part);
            }
            response.topics.push(out);
        }
        request.respond(&response)
    })
}

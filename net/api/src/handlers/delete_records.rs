//! DeleteRecords (key 21): move each partition's log start offset forward.

use super::{Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};
use runtimes::cluster_runtime;
use runtimes::routing::run_authorized;
use runtimes::routing::{PartitionOp, PartitionReply};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v2 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DeleteRecords,
    min_version: 0,
    max_version: 2,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DeleteRecordsRequest = request.decode()?;
        let mut pairs = Vec::new();
        let mut offsets = Vec::new();
        for topic in &body.topics {
            for p in &topic.partitions {
                pairs.push((topic.name.0.to_string(), p.partition_index));
                offsets.push(p.offset);
            }
        }
        let authz = cluster_runtime::authz(&shard, &request.session);
        let deletable = |topic: &str| authz.allows_topic(Operation::Delete, topic);
        let mut replies = run_authorized(&shard, &pairs, deletable, |tp, i| {
            PartitionOp::DeleteRecords {
                tp,
                offset: offsets[i],
            }
        })
        .await
        .into_iter();
        let mut response = DeleteRecordsResponse::default();
        for topic in body.topics {
            let mut out = DeleteRecordsTopicResult::default();
            out.name = topic.name;
            for p in topic.partitions {
                let mut part = DeleteRecordsPartitionResult::default();
                part.partition_index = p.partition_index;
                part.low_watermark = -1;
                match replies.next() {
                    Some(Ok(PartitionReply::DeleteRecords(Ok(low)))) => part.low_watermark = low,
                    Some(Ok(PartitionReply::DeleteRecords(Err(code)))) | Some(Err(code)) => {
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

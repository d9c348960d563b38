//! OffsetDelete (key 47): drop committed offsets of partitions the group no
//! longer subscribes to.

use super::{str_bytes, Handler, HandlerFuture, Request};
use coordinators::group::TopicPartition;
use engine::ErrorCode;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::OffsetDelete,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: OffsetDeleteRequest = request.decode()?;
        let group_id = body.group_id.0.to_string();
        let partitions: Vec<TopicPartition> = body
            .topics
            .iter()
            .flat_map(|t| {
                let name = t.name.0.to_string();
                t.partitions
                    .iter()
                    .map(move |p| TopicPartition::new(name.clone(), p.partition_index))
            })
            .collect();
        let call = GroupRequest::DeleteOffsets {
            group_id: group_id.clone(),
            partitions: partitions.clone(),
        };
        let mut response = OffsetDeleteResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.group(Operation::Delete, &group_id) {
            response.error_code = code.code();
            return request.respond(&response);
        }
        let (error_code, rows) = match group_runtime::call(&shard, &group_id, call).await {
            GroupReply::DeletedOffsets(code, rows) => (code, rows),
            GroupReply::Unavailable(code) => (code, Vec::new()),
            _ => (ErrorCode::UnknownServerError, Vec::new()),
        };
        response.error_code = error_code.code();
        if error_code == ErrorCode::None {
            let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
            for (tp, code) in rows {
                let mut p = OffsetDeleteResponsePartition::default();
                p.partition_index = tp.partition;
                p.error_code = code.code();
                match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
                    Some(topic) => topic.partitions.push(p),
                    None => {
                        let mut topic = OffsetDeleteResponseTopic::default();
                        topic.name = str_bytes(tp.topic).into();
                        topic.partitions.push(p);
                        topics.push(topic);
                    }
                }
            }
            response.topics = topics;
        }
        request.respond(&response)
    })
}

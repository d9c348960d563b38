//! AlterShareGroupOffsets (key 91): moves a share group's start offset on
//! the partitions named (`kafka-share-groups --reset-offsets`), only while
//! the group has no member (NON_EMPTY_GROUP otherwise), as Kafka. Each
//! share-partition starts again from the new offset with nothing in
//! flight: its state is reset through its share coordinator
//! (`runtimes::share_runtime::admin`). READ on the group and on each topic.

use super::{str_bytes, uuid, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, ApiKey,
};
use runtimes::cluster_runtime;
use runtimes::share_runtime::admin::{require_empty, reset_partition};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (Kafka 4.1's and 4.2's).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::AlterShareGroupOffsets,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: AlterShareGroupOffsetsRequest = request.decode()?;
        let mut response = AlterShareGroupOffsetsResponse::default();
        let group = body.group_id.0.to_string();
        let authz = cluster_runtime::authz(&shard, &request.session);
        let allowed = authz.group(Operation::Read, &group);
        if let Err(code) = allowed.and(require_empty(&shard, &group).await) {
            response.error_code = code.code();
            response.error_message = Some(str_bytes(code.name()));
            return request.respond(&response);
        }
        for topic in body.topics {
            let name = topic.topic_name.0.to_string();
            let mut out = AlterShareGroupOffsetsResponseTopic::default();
            let entry = (shard.topics.borrow().get(&name)).map(|e| (e.topic_id, e.partitions));
            let refused = match (authz.topic(Operation::Read, &name), entry) {
                (Err(code), _) => Some(code),
                (Ok(()), None) => Some(ErrorCode::UnknownTopicOrPartition),
                (Ok(()), Some(_)) => None,
            };
            let (topic_id, count) = entry.unwrap_or(([0; 16], 0));
            out.topic_name = topic.topic_name;
            out.topic_id = uuid(topic_id);
            for partition in topic.partitions {
                let index = partition.partition_index;
                let outcome = match refused {
                    Some(code) => Err(code),
                    None if !(0..count).contains(&index) => Err(ErrorCode::UnknownTopicOrPartition),
                    None if partition.start_offset < 0 => Err(ErrorCode::InvalidRequest),
                    None => {
                        reset_partition(&shard, &group, topic_id, index, partition.start_offset)
                            .await
                    }
                };
                let mut result = AlterShareGroupOffsetsResponsePartition::default();
                result.partition_index = index;
                if let Err(code) = outcome {
                    result.error_code = code.code();
                    result.error_message = Some(str_bytes(code.name()));
                }
                out.partitions.push(result);
            }
            response.responses.push(out);
        }
        request.respond(&response)
    })
}

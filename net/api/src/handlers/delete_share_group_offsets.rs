//! DeleteShareGroupOffsets (key 92): forgets a share group's state on the
//! topics named (`kafka-share-groups --delete-offsets`), only while the
//! group has no member (NON_EMPTY_GROUP otherwise), as Kafka. A reader of
//! the group then starts each partition again by
//! `share.auto.offset.reset`. DELETE on the group, READ on each topic.

use super::{str_bytes, uuid, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{
    ApiKey, DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
};
use runtimes::cluster_runtime;
use runtimes::share_runtime::admin::{require_empty, reset_partition};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (Kafka 4.1's and 4.2's).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DeleteShareGroupOffsets,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DeleteShareGroupOffsetsRequest = request.decode()?;
        let mut response = DeleteShareGroupOffsetsResponse::default();
        let group = body.group_id.0.to_string();
        let authz = cluster_runtime::authz(&shard, &request.session);
        let allowed = authz.group(Operation::Delete, &group);
        if let Err(code) = allowed.and(require_empty(&shard, &group).await) {
            response.error_code = code.code();
            response.error_message = Some(str_bytes(code.name()));
            return request.respond(&response);
        }
        for topic in body.topics {
            let name = topic.topic_name.0.to_string();
            let mut out = DeleteShareGroupOffsetsResponseTopic::default();
            let entry = (shard.topics.borrow().get(&name)).map(|e| (e.topic_id, e.partitions));
            let outcome = match (authz.topic(Operation::Read, &name), entry) {
                (Err(code), _) => Err(code),
                (Ok(()), None) => Err(ErrorCode::UnknownTopicOrPartition),
                (Ok(()), Some((topic_id, count))) => {
                    out.topic_id = uuid(topic_id);
                    let mut outcome = Ok(());
                    for partition in 0..count {
                        let reset = reset_partition(&shard, &group, topic_id, partition, -1);
                        outcome = outcome.and(reset.await);
                    }
                    outcome
                }
            };
            out.topic_name = topic.topic_name;
            if let Err(code) = outcome {
                out.error_code = code.code();
                out.error_message = Some(str_bytes(code.name()));
            }
            response.responses.push(out);
        }
        request.respond(&response)
    })
}

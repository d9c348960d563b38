//! DeleteShareGroupState (key 86, between brokers): a share-partition's
//! state is dropped (DeleteShareGroupOffsets). rill keeps a reset to
//! nothing at a higher state epoch rather than a tombstone, so that a
//! partition leader's late write of the old state is still fenced
//! (FENCED_STATE_EPOCH); its leader then starts the share-partition again
//! by `share.auto.offset.reset`. CLUSTER_ACTION on the cluster, as in
//! Kafka.

use super::{Handler, HandlerFuture, Request};
use coordinators::share::ShareKey;
use kafka_protocol::messages::delete_share_group_state_response::{
    DeleteStateResult, PartitionResult,
};
use kafka_protocol::messages::{
    ApiKey, DeleteShareGroupStateRequest, DeleteShareGroupStateResponse,
};
use runtimes::cluster_runtime;
use runtimes::share_coordinator::{self, StateRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (Kafka 4.1's).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DeleteShareGroupState,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DeleteShareGroupStateRequest = request.decode()?;
        let mut response = DeleteShareGroupStateResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refused = authz.cluster(Operation::ClusterAction).err();
        for topic in body.topics {
            let mut out = DeleteStateResult::default();
            out.topic_id = topic.topic_id;
            for partition in topic.partitions {
                let topic_id = *topic.topic_id.as_bytes();
                let key = ShareKey::new(body.group_id.to_string(), topic_id, partition.partition);
                let reset = StateRequest::Reset {
                    key,
                    state_epoch: None,
                    start_offset: -1,
                };
                let outcome = match refused {
                    Some(code) => Err(code),
                    None => share_coordinator::call(&shard, reset).await.map(drop),
                };
                let mut result = PartitionResult::default();
                result.partition = partition.partition;
                if let Err(code) = outcome {
                    result.error_code = code.code();
                }
                out.partitions.push(result);
            }
            response.results.push(out);
        }
        request.respond(&response)
    })
}

//! InitializeShareGroupState (key 83, between brokers): a share-partition's
//! state starts again at a state epoch, its window empty from a start
//! offset, or holding nothing (-1: the partition leader starts it by
//! `share.auto.offset.reset`). AlterShareGroupOffsets sends it; the
//! partition leader's writes of the older state are fenced from then on
//! (FENCED_STATE_EPOCH). A state epoch of -1 asks for one above the key's
//! (rill's group coordinator does not track the epochs). CLUSTER_ACTION
//! on the cluster, as in Kafka.

use super::{Handler, HandlerFuture, Request};
use coordinators::share::ShareKey;
use kafka_protocol::messages::initialize_share_group_state_response::{
    InitializeStateResult, PartitionResult,
};
use kafka_protocol::messages::{
    ApiKey, InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
};
use runtimes::cluster_runtime;
use runtimes::share_coordinator::{self, StateRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (Kafka 4.1's).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::InitializeShareGroupState,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: InitializeShareGroupStateRequest = request.decode()?;
        let mut response = InitializeShareGroupStateResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refused = authz.cluster(Operation::ClusterAction).err();
        for topic in body.topics {
            let mut out = InitializeStateResult::default();
            out.topic_id = topic.topic_id;
            for partition in topic.partitions {
                let topic_id = *topic.topic_id.as_bytes();
                let key = ShareKey::new(body.group_id.to_string(), topic_id, partition.partition);
                let reset = StateRequest::Reset {
                    key,
                    state_epoch: (partition.state_epoch >= 0).then_some(partition.state_epoch),
                    start_offset: partition.start_offset,
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

//! ReadShareGroupState (key 84, between brokers): a partition leader reads
//! a share-partition's durable state from its share coordinator (KIP-932)
//! when it starts serving it. CLUSTER_ACTION on the cluster, as in Kafka.

use super::{Handler, HandlerFuture, Request};
use coordinators::share::ShareKey;
use kafka_protocol::messages::read_share_group_state_response::ReadStateResult;
use kafka_protocol::messages::{ApiKey, ReadShareGroupStateRequest, ReadShareGroupStateResponse};
use runtimes::cluster_runtime;
use runtimes::share_coordinator::{self, StateRequest};
use runtimes::share_runtime::state_wire::read_result;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (Kafka 4.1's).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ReadShareGroupState,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ReadShareGroupStateRequest = request.decode()?;
        let mut response = ReadShareGroupStateResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refused = authz.cluster(Operation::ClusterAction).err();
        for topic in body.topics {
            let mut out = ReadStateResult::default();
            out.topic_id = topic.topic_id;
            for partition in topic.partitions {
                let topic_id = *topic.topic_id.as_bytes();
                let key = ShareKey::new(body.group_id.to_string(), topic_id, partition.partition);
                let read = match refused {
                    Some(code) => Err(code),
                    None => {
                        let leader_epoch = partition.leader_epoch;
                        share_coordinator::call(&shard, StateRequest::Read { key, leader_epoch })
                            .await
                    }
                };
                let result = match read {
                    Ok(snapshot) => read_result(partition.partition, snapshot.as_ref()),
                    Err(code) => {
                        let mut result = read_result(partition.partition, None);
                        result.error_code = code.code();
                        result
                    }
                };
                out.partitions.push(result);
            }
            response.results.push(out);
        }
        request.respond(&response)
    })
}

//! WriteShareGroupState (key 85, between brokers): a partition leader
//! writes a share-partition's whole durable state to its share coordinator
//! (KIP-932) after an acknowledgement. CLUSTER_ACTION on the cluster, as
//! in Kafka.

use super::{Handler, HandlerFuture, Request};
use coordinators::share::ShareKey;
use kafka_protocol::messages::write_share_group_state_response::{
    PartitionResult, WriteStateResult,
};
use kafka_protocol::messages::{ApiKey, WriteShareGroupStateRequest, WriteShareGroupStateResponse};
use runtimes::cluster_runtime;
use runtimes::share_coordinator::{self, StateRequest};
use runtimes::share_runtime::state_wire::snapshot_of_write;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (Kafka 4.1's).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::WriteShareGroupState,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: WriteShareGroupStateRequest = request.decode()?;
        let mut response = WriteShareGroupStateResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refused = authz.cluster(Operation::ClusterAction).err();
        for topic in body.topics {
            let mut out = WriteStateResult::default();
            out.topic_id = topic.topic_id;
            for partition in topic.partitions {
                let topic_id = *topic.topic_id.as_bytes();
                let key = ShareKey::new(body.group_id.to_string(), topic_id, partition.partition);
                let snapshot = snapshot_of_write(&partition);
                let written = match refused {
                    Some(code) => Err(code),
                    None => share_coordinator::call(&shard, StateRequest::Write { key, snapshot })
                        .await
                        .map(drop),
                };
                let mut result = PartitionResult::default();
                result.partition = partition.partition;
                if let Err(code) = written {
                    result.error_code = code.code();
                }
                out.partitions.push(result);
            }
            response.results.push(out);
        }
        request.respond(&response)
    })
}

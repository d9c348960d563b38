//! ReadShareGroupStateSummary (key 87, between brokers): a
//! share-partition's state epoch, last writer's leader epoch and start
//! offset, without its window (what DescribeShareGroupOffsets shows). It
//! fences no partition leader, unlike ReadShareGroupState. A key never
//! written answers start offset -1 and state epoch -1. CLUSTER_ACTION on
//! the cluster, as in Kafka.

use super::{Handler, HandlerFuture, Request};
use coordinators::share::ShareKey;
use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult, ReadStateSummaryResult,
};
use kafka_protocol::messages::{
    ApiKey, ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
};
use runtimes::cluster_runtime;
use runtimes::share_coordinator::{self, StateRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (Kafka 4.1's).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ReadShareGroupStateSummary,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ReadShareGroupStateSummaryRequest = request.decode()?;
        let mut response = ReadShareGroupStateSummaryResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refused = authz.cluster(Operation::ClusterAction).err();
        for topic in body.topics {
            let mut out = ReadStateSummaryResult::default();
            out.topic_id = topic.topic_id;
            for partition in topic.partitions {
                let topic_id = *topic.topic_id.as_bytes();
                let key = ShareKey::new(body.group_id.to_string(), topic_id, partition.partition);
                // Leader epoch -1 raises no fence.
                let read = StateRequest::Read {
                    key,
                    leader_epoch: -1,
                };
                let outcome = match refused {
                    Some(code) => Err(code),
                    None => share_coordinator::call(&shard, read).await,
                };
                let mut result = PartitionResult::default();
                result.partition = partition.partition;
                (result.state_epoch, result.leader_epoch, result.start_offset) = (-1, -1, -1);
                match outcome {
                    Ok(Some(snapshot)) => {
                        result.state_epoch = snapshot.state_epoch;
                        result.leader_epoch = snapshot.leader_epoch;
                        result.start_offset = snapshot.start_offset;
                    }
                    Ok(None) => {}
                    Err(code) => result.error_code = code.code(),
                }
                out.partitions.push(result);
            }
            response.results.push(out);
        }
        request.respond(&response)
    })
}

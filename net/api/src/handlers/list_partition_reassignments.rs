//! ListPartitionReassignments (key 46, KIP-455): the partitions whose
//! replicas are moving, with all current replicas and the ones being added
//! and removed, as `kafka-reassign-partitions.sh --verify` and
//! `Admin.listPartitionReassignments` show them. Answered from this
//! broker's copy of the committed metadata image.

use super::{Handler, HandlerFuture, Request};
use cluster::metadata::ongoing_reassignments;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use runtimes::cluster_runtime;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ListPartitionReassignments,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ListPartitionReassignmentsRequest = request.decode()?;
        let image = shard.runtime().view.image();
        // `topics: null` asks for every reassignment.
        let wanted = |topic: &str, partition: i32| {
            body.topics.as_ref().is_none_or(|topics| {
                topics
                    .iter()
                    .any(|t| t.name.0.as_str() == topic && t.partition_indexes.contains(&partition))
            })
        };
        let brokers = |ids: &[i32]| ids.iter().map(|&id| BrokerId(id)).collect::<Vec<_>>();
        let mut response = ListPartitionReassignmentsResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.cluster(Operation::Describe) {
            response.error_code = code.code();
            return request.respond(&response);
        }
        for ongoing in ongoing_reassignments(&image) {
            if !wanted(&ongoing.topic, ongoing.partition) {
                continue;
            }
            let mut partition = OngoingPartitionReassignment::default();
            partition.partition_index = ongoing.partition;
            partition.replicas = brokers(&ongoing.replicas);
            partition.adding_replicas = brokers(&ongoing.adding);
            partition.removing_replicas = brokers(&ongoing.removing);
            match response.topics.last_mut() {
                Some(topic) if topic.name.0.as_str() == ongoing.topic => {
                    topic.partitions.push(partition)
                }
                _ => {
                    let mut topic = OngoingTopicReassignment::default();
                    topic.name = TopicName(StrBytes::from_string(ongoing.topic.clone()));
                    topic.partitions.push(partition);
                    response.topics.push(topic);
                }
            }
        }
        request.respond(&response)
    })
}

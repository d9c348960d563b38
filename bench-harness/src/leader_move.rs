//! Moves a partition's leadership to one chosen replica, as an operator
//! would: its replicas reordered so that one comes first
//! (AlterPartitionReassignments with the same set), then a preferred
//! election (ElectLeaders). `rill-bench failover --target controller` puts
//! the partition on the active controller this way before each kill.

use crate::error::{BenchError, Result};
use crate::kafka::client::{connect_any_with_ranges, topic_name};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{AlterPartitionReassignmentsRequest, BrokerId, ElectLeadersRequest};
use std::time::Duration;

/// The versions these requests are sent at (Metadata for the connection's
/// own use).
const RANGES: [(i16, i16, i16); 3] = [
    (3, 1, 12), // Metadata
    (43, 1, 2), // ElectLeaders (v1+: an election type)
    (45, 0, 0), // AlterPartitionReassignments
];

/// Kafka's ElectLeaders election type for the preferred replica.
const PREFERRED: i8 = 0;
/// ElectLeaders' answer when the preferred replica leads already.
const ELECTION_NOT_NEEDED: i16 = 84;

/// Makes `node` the first of partition 0's `replicas` and asks for a
/// preferred election. The caller waits for the new leader: the election
/// is asked, not waited for.
pub async fn lead_on(bootstrap: &str, topic: &str, node: i32, replicas: &[i32]) -> Result<()> {
    let timeout = Duration::from_secs(2);
    let client = "rill-bench-leader-move";
    let connection = connect_any_with_ranges(bootstrap, client, timeout, &RANGES).await?;
    let mut order = vec![BrokerId(node)];
    order.extend(
        replicas
            .iter()
            .filter(|&&r| r != node)
            .map(|&r| BrokerId(r)),
    );
    let partition = ReassignablePartition::default()
        .with_partition_index(0)
        .with_replicas(Some(order));
    let reassign = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![partition])]);
    let answer = connection.call(&reassign).await?;
    let codes = answer.responses.iter().flat_map(|t| &t.partitions);
    let refused = codes.map(|p| p.error_code).find(|&code| code != 0);
    if let Some(code) = refused.or((answer.error_code != 0).then_some(answer.error_code)) {
        return Err(BenchError::Protocol(format!(
            "reordering the replicas of {topic}-0 was refused: error {code}"
        )));
    }
    let elect = ElectLeadersRequest::default()
        .with_election_type(PREFERRED)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![0])]))
        .with_timeout_ms(10_000);
    let answer = connection.call(&elect).await?;
    let results = answer.replica_election_results.iter();
    let mut codes = results
        .flat_map(|t| &t.partition_result)
        .map(|p| p.error_code);
    match codes.find(|&c| c != 0 && c != ELECTION_NOT_NEEDED) {
        Some(code) => Err(BenchError::Protocol(format!(
            "the preferred election of {topic}-0 was refused: error {code}"
        ))),
        None => Ok(()),
    }
}

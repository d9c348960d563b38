//! KIP-430's authorized operations: the bit field (`1 << operation code`
//! for each) of what the caller may do on a topic, a group or the cluster,
//! which Metadata, DescribeCluster, DescribeTopicPartitions, DescribeGroups,
//! ConsumerGroupDescribe and ShareGroupDescribe return when asked. Each
//! resource type lists Kafka's supported operations for it; implied ones
//! count (READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies
//! DESCRIBE_CONFIGS), as the authorizer answers them.

use super::checks::Authz;
use super::model::{Operation, ResourceType, CLUSTER_NAME};

/// What a response holds when the request did not ask (Kafka's
/// `Integer.MIN_VALUE`).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Kafka's supported operations of a TOPIC.
const TOPIC_OPERATIONS: &[Operation] = &[
    Operation::Read,
    Operation::Write,
    Operation::Create,
    Operation::Delete,
    Operation::Alter,
    Operation::Describe,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
];

/// Kafka 4's supported operations of a GROUP (the configs ones came with
/// group configs).
const GROUP_OPERATIONS: &[Operation] = &[
    Operation::Read,
    Operation::Describe,
    Operation::Delete,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
];

/// Kafka's supported operations of the CLUSTER.
const CLUSTER_OPERATIONS: &[Operation] = &[
    Operation::Create,
    Operation::ClusterAction,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
    Operation::IdempotentWrite,
    Operation::Alter,
    Operation::Describe,
];

impl Authz {
    /// The bit field of the operations the caller may do on topic `name`,
    /// or [`AUTHORIZED_OPERATIONS_OMITTED`] when not `asked`.
    pub fn topic_operations(&self, asked: bool, name: &str) -> i32 {
        self.operations(asked, TOPIC_OPERATIONS, ResourceType::Topic, name)
    }

    /// As [`Self::topic_operations`], for group `name`.
    pub fn group_operations(&self, asked: bool, name: &str) -> i32 {
        self.operations(asked, GROUP_OPERATIONS, ResourceType::Group, name)
    }

    /// As [`Self::topic_operations`], for the cluster.
    pub fn cluster_operations(&self, asked: bool) -> i32 {
        self.operations(
            asked,
            CLUSTER_OPERATIONS,
            ResourceType::Cluster,
            CLUSTER_NAME,
        )
    }

    fn operations(
        &self,
        asked: bool,
        supported: &[Operation],
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        if !asked {
            return AUTHORIZED_OPERATIONS_OMITTED;
        }
        (supported.iter())
            .filter(|&&op| self.allows(op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_authorizer_every_supported_operation_is_allowed() {
        let all = Authz::allow_all();
        assert_eq!(
            all.topic_operations(false, "t"),
            AUTHORIZED_OPERATIONS_OMITTED
        );
        // Kafka's codes: READ 3 .. ALTER_CONFIGS 11; the topic has all but
        // CLUSTER_ACTION (9) and IDEMPOTENT_WRITE (12).
        assert_eq!(all.topic_operations(true, "t"), 0b0_1101_1111_1000);
        assert_eq!(all.group_operations(true, "g").count_ones(), 5);
        assert_eq!(all.cluster_operations(true).count_ones(), 7);
    }
}

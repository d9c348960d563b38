//! The admin tool's view of a cluster, on rill-bench's Kafka client
//! (`bench_harness::kafka`): a bootstrap connection, connections to other
//! brokers by node id, the coordinator of a group, and the version table
//! of the admin APIs.

use crate::error::{check, AdminError, Result};
use bench_harness::kafka::client::{connect_any_with_ranges, list_offsets, topic_name};
use bench_harness::kafka::connection::Connection;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::{Request, StrBytes};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The APIs `rill admin` speaks, `(api key, our min, our max)`. Each
/// maximum is the highest version whose fields the commands fill in as
/// that version means them (DeleteTopics v6 names topics by id, Fetch v13
/// too, FindCoordinator v4 batches keys, OffsetFetch v8 batches groups:
/// those stay below). SaslHandshake and SaslAuthenticate are here because
/// a SASL connection authenticates with this table's versions.
pub const ADMIN_RANGES: [(i16, i16, i16); 37] = [
    (0, 3, 9),  // Produce
    (1, 4, 12), // Fetch
    (2, 1, 7),  // ListOffsets
    (3, 1, 12), // Metadata
    (8, 2, 8),  // OffsetCommit
    (9, 2, 7),  // OffsetFetch (v2+: null topics, all of them)
    (10, 1, 3), // FindCoordinator
    (15, 0, 5), // DescribeGroups
    (16, 0, 4), // ListGroups
    (17, 1, 1), // SaslHandshake
    (18, 0, 3), // ApiVersions
    (19, 2, 7), // CreateTopics
    (20, 1, 5), // DeleteTopics
    (29, 1, 3), // DescribeAcls
    (30, 1, 3), // CreateAcls
    (31, 1, 3), // DeleteAcls
    (32, 1, 4), // DescribeConfigs
    (34, 1, 2), // AlterReplicaLogDirs
    (35, 1, 4), // DescribeLogDirs
    (36, 0, 2), // SaslAuthenticate
    (37, 0, 3), // CreatePartitions
    (42, 0, 2), // DeleteGroups
    (43, 1, 2), // ElectLeaders (v1+: election type)
    (44, 0, 1), // IncrementalAlterConfigs
    (45, 0, 1), // AlterPartitionReassignments
    (46, 0, 0), // ListPartitionReassignments
    (48, 0, 1), // DescribeClientQuotas
    (49, 0, 1), // AlterClientQuotas
    (50, 0, 0), // DescribeUserScramCredentials
    (51, 0, 0), // AlterUserScramCredentials
    (55, 0, 2), // DescribeQuorum (v2: the members' listeners)
    (57, 1, 1), // UpdateFeatures (v1: upgrade type; v2 drops the results)
    (60, 0, 1), // DescribeCluster
    (64, 0, 0), // UnregisterBroker
    (69, 0, 1), // ConsumerGroupDescribe (v1: member types)
    (80, 0, 0), // AddRaftVoter
    (81, 0, 0), // RemoveRaftVoter
];

/// Broker error codes the tool acts on by name.
pub mod codes {
    pub const NOT_CONTROLLER: i16 = 41;
    pub const ELECTION_NOT_NEEDED: i16 = 84;
}

const CLIENT_ID: &str = "rill-admin";

/// Connections to one cluster.
pub struct Admin {
    any: Arc<Connection>,
    timeout: Duration,
    connections: HashMap<i32, Arc<Connection>>,
}

impl Admin {
    /// Connects to the first broker of `bootstrap` (`host:port,...`) that
    /// answers.
    pub async fn connect(bootstrap: &str, timeout: Duration) -> Result<Admin> {
        let any = connect_any_with_ranges(bootstrap, CLIENT_ID, timeout, &ADMIN_RANGES).await?;
        Ok(Admin {
            any,
            timeout,
            connections: HashMap::new(),
        })
    }

    /// The bootstrap connection: for requests any broker answers.
    pub fn any(&self) -> Arc<Connection> {
        self.any.clone()
    }

    /// Sends `request` on `connection` and waits for its answer, at most
    /// the `--timeout-ms` (the client itself would wait forever).
    pub async fn call<R: Request>(
        &self,
        connection: &Connection,
        request: &R,
    ) -> Result<R::Response> {
        match tokio::time::timeout(self.timeout, connection.call(request)).await {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(AdminError::Timeout(format!(
                "api {} at {}",
                R::KEY,
                connection.addr()
            ))),
        }
    }

    /// [`Admin::call`] on the active controller's connection (a broker
    /// that forwards to it, for rill and KRaft).
    pub async fn call_controller<R: Request>(&mut self, request: &R) -> Result<R::Response> {
        let controller = self.controller().await?;
        self.call(&controller, request).await
    }

    /// [`Admin::call`] on the bootstrap connection.
    pub async fn call_any<R: Request>(&self, request: &R) -> Result<R::Response> {
        let any = self.any();
        self.call(&any, request).await
    }

    /// Metadata of `topics` (`None`: every topic); a topic's own error
    /// code is left for the caller.
    pub async fn metadata(&self, topics: Option<&[String]>) -> Result<MetadataResponse> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|names| {
                names
                    .iter()
                    .map(|name| MetadataRequestTopic::default().with_name(Some(topic_name(name))))
                    .collect()
            }))
            .with_allow_auto_topic_creation(false);
        self.call_any(&request).await
    }

    /// A connection to broker `node_id`, opened once.
    pub async fn broker(&mut self, node_id: i32) -> Result<Arc<Connection>> {
        if let Some(connection) = self.connections.get(&node_id) {
            if !connection.is_closed() {
                return Ok(connection.clone());
            }
        }
        let metadata = self.metadata(Some(&[])).await?;
        let broker = metadata
            .brokers
            .iter()
            .find(|b| b.node_id.0 == node_id)
            .ok_or_else(|| {
                AdminError::Answer(format!("broker {node_id} is not in the metadata"))
            })?;
        let addr = format!("{}:{}", broker.host.as_str(), broker.port);
        let connection = tokio::time::timeout(
            self.timeout,
            Connection::connect_with_ranges(&addr, CLIENT_ID, &ADMIN_RANGES),
        )
        .await
        .map_err(|_| AdminError::Timeout(format!("connect to broker {node_id} at {addr}")))??;
        self.connections.insert(node_id, connection.clone());
        Ok(connection)
    }

    /// A connection to the controller Metadata names (Kafka before KRaft
    /// wanted some admin requests there; any broker of rill answers).
    pub async fn controller(&mut self) -> Result<Arc<Connection>> {
        let controller_id = self.metadata(Some(&[])).await?.controller_id.0;
        if controller_id < 0 {
            return Ok(self.any());
        }
        self.broker(controller_id).await
    }

    /// A connection to the coordinator of consumer group `group`.
    pub async fn coordinator(&mut self, group: &str) -> Result<Arc<Connection>> {
        let request = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(group.to_string()))
            .with_key_type(0);
        let answer = self.call_any(&request).await?;
        check(
            answer.error_code,
            answer.error_message.as_deref(),
            format!("find the coordinator of group {group}"),
        )?;
        self.broker(answer.node_id.0).await
    }

    /// The partitions of `topics` by leader, from Metadata; a topic's error
    /// (say, it does not exist) fails the call.
    pub async fn leaders(&self, topics: &[String]) -> Result<HashMap<i32, Vec<(String, i32)>>> {
        let metadata = self.metadata(Some(topics)).await?;
        let mut by_leader: HashMap<i32, Vec<(String, i32)>> = HashMap::new();
        for topic in &metadata.topics {
            let name = topic.name.as_ref().map_or("", |n| n.0.as_str()).to_string();
            check(topic.error_code, None, format!("metadata of topic {name}"))?;
            for partition in &topic.partitions {
                by_leader
                    .entry(partition.leader_id.0)
                    .or_default()
                    .push((name.clone(), partition.partition_index));
            }
        }
        Ok(by_leader)
    }

    /// The offset at `timestamp` (`-2` earliest, `-1` latest) of every
    /// partition of `topics`, each asked of its leader.
    pub async fn offsets(
        &mut self,
        topics: &[String],
        timestamp: i64,
    ) -> Result<HashMap<(String, i32), i64>> {
        let mut offsets = HashMap::new();
        for (leader, partitions) in self.leaders(topics).await? {
            let connection = self.broker(leader).await?;
            let asked = list_offsets(&connection, &partitions, timestamp);
            let found = tokio::time::timeout(self.timeout, asked)
                .await
                .map_err(|_| AdminError::Timeout(format!("ListOffsets at broker {leader}")))??;
            offsets.extend(found);
        }
        Ok(offsets)
    }
}

/// `key=value` into its halves.
pub fn key_value(pair: &str) -> Result<(String, String)> {
    pair.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| AdminError::Usage(format!("{pair:?} is not key=value")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_split_at_the_first_equals() {
        assert_eq!(
            key_value("retention.ms=1000").unwrap(),
            ("retention.ms".to_string(), "1000".to_string())
        );
        assert_eq!(key_value("a=b=c").unwrap().1, "b=c");
        assert!(key_value("novalue").is_err());
        assert!(key_value("=v").is_err());
    }

    #[test]
    fn every_admin_range_is_sane_and_listed_once() {
        let mut keys: Vec<i16> = ADMIN_RANGES.iter().map(|r| r.0).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), ADMIN_RANGES.len());
        assert!(ADMIN_RANGES.iter().all(|(_, min, max)| min <= max));
    }
}

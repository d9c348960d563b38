//! The cluster view a load generator needs: bootstrap (a comma-separated
//! list, any one of which may answer), Metadata (brokers, partition leaders
//! and ISRs), CreateTopics and ListOffsets, and one connection per broker
//! for each client that asks for its own.

use crate::error::{BenchError, Result};
use crate::kafka::connection::Connection;
use crate::kafka::versions::{ApiRanges, SUPPORTED_RANGES};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, ListOffsetsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const TOPIC_ALREADY_EXISTS: i16 = 36;
const NOT_CONTROLLER: i16 = 41;
/// Error codes after which the client should ask Metadata again and retry:
/// the partition's leadership is moving (5, 6), the ISR is below
/// `min.insync.replicas` for a moment (19, 20), or the client's leader epoch
/// is stale (74 FENCED_LEADER_EPOCH, 75 UNKNOWN_LEADER_EPOCH).
pub const RETRIABLE_LEADER_ERRORS: [i16; 6] = [5, 6, 19, 20, 74, 75];

/// Whether `error_code` means "refresh metadata and try again".
pub fn is_retriable_leader_error(error_code: i16) -> bool {
    RETRIABLE_LEADER_ERRORS.contains(&error_code)
}

/// Splits a bootstrap list `h1:p1,h2:p2` into addresses, rejecting empty
/// entries and ones without a port.
pub fn parse_bootstrap(list: &str) -> Result<Vec<String>> {
    let addrs: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect();
    if addrs.is_empty() {
        return Err(BenchError::Other(format!("empty bootstrap list {list:?}")));
    }
    for addr in &addrs {
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(BenchError::Other(format!(
                "bootstrap address {addr:?} is not host:port"
            )));
        }
    }
    Ok(addrs)
}

/// Connects to the first broker of the bootstrap list that answers, so a
/// run (or a metadata refresh) works while any one broker is down.
pub async fn connect_any(
    bootstrap: &str,
    client_id: &str,
    timeout: Duration,
) -> Result<Arc<Connection>> {
    connect_any_with_ranges(bootstrap, client_id, timeout, &SUPPORTED_RANGES).await
}

/// [`connect_any`] negotiating another client's API `ranges`.
pub async fn connect_any_with_ranges(
    bootstrap: &str,
    client_id: &str,
    timeout: Duration,
    ranges: ApiRanges,
) -> Result<Arc<Connection>> {
    let mut last_error = None;
    for addr in parse_bootstrap(bootstrap)? {
        let connect = Connection::connect_with_ranges(&addr, client_id, ranges);
        match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(connection)) => return Ok(connection),
            Ok(Err(error)) => last_error = Some(error),
            Err(_) => last_error = Some(BenchError::Timeout(format!("connect to {addr}"))),
        }
    }
    Err(last_error.unwrap_or_else(|| BenchError::Other("no bootstrap broker".into())))
}
/// `topic`'s layout from the first broker of `bootstrap` that answers
/// within a second, its Metadata within two; `None` otherwise. For probes
/// run while brokers are being killed (the failover measurement, the
/// verify nemesis): a dead broker costs a second, never a hang.
pub async fn topic_layout_from_any(
    bootstrap: &str,
    client_id: &str,
    topic: &str,
) -> Option<TopicLayout> {
    let connection = connect_any(bootstrap, client_id, Duration::from_secs(1))
        .await
        .ok()?;
    let metadata = tokio::time::timeout(
        Duration::from_secs(2),
        fetch_metadata(&connection, &[topic.to_string()]),
    )
    .await
    .ok()?
    .ok()?;
    metadata.topics.into_iter().find(|t| t.name == topic)
}

/// ListOffsets timestamps with special meaning.
pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;

/// Leaders of one topic's partitions, by partition index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicLayout {
    pub name: String,
    /// Zero when the broker answers Metadata below v10.
    pub id: uuid::Uuid,
    pub leaders: Vec<i32>,
    /// In-sync replicas of each partition, by partition index.
    pub isr: Vec<Vec<i32>>,
}

/// Brokers and topic layouts known from the last Metadata response.
#[derive(Debug, Clone, Default)]
pub struct ClusterMetadata {
    pub brokers: HashMap<i32, String>,
    pub controller_id: i32,
    pub topics: Vec<TopicLayout>,
}

/// Fetches metadata for `topics` through `connection`.
pub async fn fetch_metadata(connection: &Connection, topics: &[String]) -> Result<ClusterMetadata> {
    let request = MetadataRequest::default()
        .with_topics(Some(
            topics
                .iter()
                .map(|name| MetadataRequestTopic::default().with_name(Some(topic_name(name))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(false);
    let response = connection.call(&request).await?;
    let brokers = response
        .brokers
        .iter()
        .map(|broker| {
            (
                broker.node_id.0,
                format!("{}:{}", broker.host.as_str(), broker.port),
            )
        })
        .collect();
    let mut layouts = Vec::new();
    for topic in &response.topics {
        let name = topic
            .name
            .as_ref()
            .map(|n| n.0.as_str().to_string())
            .unwrap_or_default();
        if topic.error_code != 0 {
            return Err(BenchError::Broker {
                error_code: topic.error_code,
                context: format!("metadata for topic {name}"),
            });
        }
        let mut leaders = vec![-1; topic.partitions.len()];
        let mut isr = vec![Vec::new(); topic.partitions.len()];
        for partition in &topic.partitions {
            let index = partition.partition_index as usize;
            if index >= leaders.len() {
                return Err(BenchError::Protocol(format!(
                    "topic {name}: partition {index} out of range"
                )));
            }
            leaders[index] = partition.leader_id.0;
            isr[index] = partition.isr_nodes.iter().map(|b| b.0).collect();
        }
        layouts.push(TopicLayout {
            name,
            id: topic.topic_id,
            leaders,
            isr,
        });
    }
    Ok(ClusterMetadata {
        brokers,
        controller_id: response.controller_id.0,
        topics: layouts,
    })
}

/// Waits until every topic has a leader for every partition (a new topic
/// needs a moment on most brokers).
pub async fn wait_for_leaders(
    connection: &Connection,
    topics: &[String],
    timeout: Duration,
) -> Result<ClusterMetadata> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let result = fetch_metadata(connection, topics).await;
        if let Ok(metadata) = &result {
            let complete = metadata.topics.len() == topics.len()
                && metadata.topics.iter().all(|t| {
                    !t.leaders.is_empty()
                        && t.leaders.iter().all(|l| metadata.brokers.contains_key(l))
                });
            if complete {
                return result;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return match result {
                Err(error) => Err(error),
                Ok(_) => Err(BenchError::Timeout(format!(
                    "leaders for topics {topics:?}"
                ))),
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates topics; ones that already exist are accepted as they are.
pub async fn create_topics(
    bootstrap: &Connection,
    client_id: &str,
    names: &[String],
    partitions: u32,
    replication_factor: i16,
) -> Result<()> {
    create_topics_with_configs(
        bootstrap,
        client_id,
        names,
        partitions,
        replication_factor,
        &[],
    )
    .await
}

/// [`create_topics`] with topic configs such as `min.insync.replicas`.
pub async fn create_topics_with_configs(
    bootstrap: &Connection,
    client_id: &str,
    names: &[String],
    partitions: u32,
    replication_factor: i16,
    configs: &[(String, String)],
) -> Result<()> {
    let configs: Vec<CreatableTopicConfig> = configs
        .iter()
        .map(|(name, value)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_value(Some(StrBytes::from_string(value.clone())))
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            names
                .iter()
                .map(|name| {
                    CreatableTopic::default()
                        .with_name(topic_name(name))
                        .with_num_partitions(partitions as i32)
                        .with_replication_factor(replication_factor)
                        .with_configs(configs.clone())
                })
                .collect(),
        );
    let mut response = bootstrap.call(&request).await?;
    if response
        .topics
        .iter()
        .any(|t| t.error_code == NOT_CONTROLLER)
    {
        // Older Kafka wants CreateTopics at the controller.
        let metadata = fetch_metadata(bootstrap, &[]).await?;
        let addr = metadata
            .brokers
            .get(&metadata.controller_id)
            .ok_or_else(|| BenchError::Protocol("controller not among brokers".into()))?;
        let controller = Connection::connect(addr, client_id).await?;
        response = controller.call(&request).await?;
    }
    for topic in &response.topics {
        if topic.error_code != 0 && topic.error_code != TOPIC_ALREADY_EXISTS {
            return Err(BenchError::Broker {
                error_code: topic.error_code,
                context: format!(
                    "create topic {}: {}",
                    topic.name.0.as_str(),
                    topic.error_message.as_ref().map_or("", |m| m.as_str())
                ),
            });
        }
    }
    Ok(())
}

/// Offsets of `(topic, partition)` pairs at `timestamp` (earliest/latest),
/// asked of `connection` (the leader of all of them).
pub async fn list_offsets(
    connection: &Connection,
    partitions: &[(String, i32)],
    timestamp: i64,
) -> Result<HashMap<(String, i32), i64>> {
    let mut by_topic: HashMap<&str, Vec<i32>> = HashMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic.as_str()).or_default().push(*partition);
    }
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(
            by_topic
                .iter()
                .map(|(topic, indexes)| {
                    ListOffsetsTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(
                            indexes
                                .iter()
                                .map(|&index| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(index)
                                        .with_current_leader_epoch(-1)
                                        .with_timestamp(timestamp)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let response = connection.call(&request).await?;
    let mut offsets = HashMap::new();
    for topic in &response.topics {
        for partition in &topic.partitions {
            if partition.error_code != 0 {
                return Err(BenchError::Broker {
                    error_code: partition.error_code,
                    context: format!(
                        "list offsets {}-{}",
                        topic.name.0.as_str(),
                        partition.partition_index
                    ),
                });
            }
            offsets.insert(
                (topic.name.0.as_str().to_string(), partition.partition_index),
                partition.offset,
            );
        }
    }
    Ok(offsets)
}

/// One client's connections, one per broker, opened lazily.
pub struct ConnectionPool {
    client_id: String,
    brokers: HashMap<i32, String>,
    connections: HashMap<i32, Arc<Connection>>,
}

impl ConnectionPool {
    pub fn new(client_id: String, brokers: HashMap<i32, String>) -> Self {
        ConnectionPool {
            client_id,
            brokers,
            connections: HashMap::new(),
        }
    }

    /// Replaces the broker addresses (after a metadata refresh), keeping
    /// open connections to brokers whose address did not change.
    pub fn update_brokers(&mut self, brokers: HashMap<i32, String>) {
        self.connections.retain(|id, connection| {
            brokers.get(id).map(String::as_str) == Some(connection.addr())
        });
        self.brokers = brokers;
    }

    pub async fn get(&mut self, node_id: i32) -> Result<Arc<Connection>> {
        if let Some(connection) = self.connections.get(&node_id) {
            if !connection.is_closed() {
                return Ok(connection.clone());
            }
        }
        let addr = self
            .brokers
            .get(&node_id)
            .ok_or_else(|| BenchError::Protocol(format!("no address for broker {node_id}")))?;
        let connection = Connection::connect(addr, &self.client_id).await?;
        self.connections.insert(node_id, connection.clone());
        Ok(connection)
    }
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_lists_split_and_validate() {
        assert_eq!(
            parse_bootstrap("127.0.0.1:9092, h2:19092,,h3:1").unwrap(),
            vec!["127.0.0.1:9092", "h2:19092", "h3:1"]
        );
        assert_eq!(parse_bootstrap("a:1").unwrap(), vec!["a:1"]);
        assert!(parse_bootstrap("").is_err());
        assert!(parse_bootstrap(" , ").is_err());
        assert!(parse_bootstrap("nohost").is_err());
        assert!(parse_bootstrap("h:notaport").is_err());
        assert!(parse_bootstrap(":9092").is_err());
    }

    #[test]
    fn leader_errors_are_retriable_others_not() {
        for code in [5, 6, 19, 20] {
            assert!(is_retriable_leader_error(code));
        }
        for code in [0, 1, 3, 36, 87] {
            assert!(!is_retriable_leader_error(code));
        }
    }
}

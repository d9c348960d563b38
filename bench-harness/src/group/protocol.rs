//! The consumer protocol's embedded payloads: the subscription a member puts
//! in JoinGroup's protocol metadata and the assignment the leader puts in
//! SyncGroup. Each is an `i16` version followed by the body. Pure.

use crate::error::{BenchError, Result};
use crate::group::assignor::TopicPartition;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::collections::BTreeMap;

/// Subscription version we write: v1 carries owned partitions.
const SUBSCRIPTION_VERSION: i16 = 1;
const ASSIGNMENT_VERSION: i16 = 1;
/// Highest versions the crate decodes.
const SUBSCRIPTION_MAX_VERSION: i16 = 3;
const ASSIGNMENT_MAX_VERSION: i16 = 3;

fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut grouped: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        grouped.entry(topic.as_str()).or_default().push(*partition);
    }
    grouped
}

fn protocol_error(what: &str, error: impl std::fmt::Display) -> BenchError {
    BenchError::Protocol(format!("{what}: {error}"))
}

/// Encodes a subscription to `topics`, owning `owned`.
pub fn encode_subscription(topics: &[String], owned: &[TopicPartition]) -> Result<Bytes> {
    let subscription = ConsumerProtocolSubscription::default()
        .with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        )
        .with_owned_partitions(
            by_topic(owned)
                .into_iter()
                .map(|(topic, partitions)| {
                    OwnedTopic::default()
                        .with_topic(crate::kafka::client::topic_name(topic))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let mut buf = BytesMut::new();
    buf.put_i16(SUBSCRIPTION_VERSION);
    subscription
        .encode(&mut buf, SUBSCRIPTION_VERSION)
        .map_err(|e| protocol_error("encode subscription", e))?;
    Ok(buf.freeze())
}

/// Decodes a member's subscription: its topics and owned partitions.
pub fn decode_subscription(mut bytes: Bytes) -> Result<(Vec<String>, Vec<TopicPartition>)> {
    if bytes.remaining() < 2 {
        return Err(BenchError::Protocol(
            "subscription shorter than its version".into(),
        ));
    }
    let version = bytes.get_i16().clamp(0, SUBSCRIPTION_MAX_VERSION);
    let subscription = ConsumerProtocolSubscription::decode(&mut bytes, version)
        .map_err(|e| protocol_error("decode subscription", e))?;
    let topics = subscription.topics.iter().map(|t| t.to_string()).collect();
    let owned = subscription
        .owned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
        .collect();
    Ok((topics, owned))
}

/// Encodes one member's assignment.
pub fn encode_assignment(partitions: &[TopicPartition]) -> Result<Bytes> {
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
        by_topic(partitions)
            .into_iter()
            .map(|(topic, partitions)| {
                AssignedTopic::default()
                    .with_topic(crate::kafka::client::topic_name(topic))
                    .with_partitions(partitions)
            })
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.put_i16(ASSIGNMENT_VERSION);
    assignment
        .encode(&mut buf, ASSIGNMENT_VERSION)
        .map_err(|e| protocol_error("encode assignment", e))?;
    Ok(buf.freeze())
}

/// Decodes an assignment; an empty payload is an empty assignment.
pub fn decode_assignment(mut bytes: Bytes) -> Result<Vec<TopicPartition>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    if bytes.remaining() < 2 {
        return Err(BenchError::Protocol(
            "assignment shorter than its version".into(),
        ));
    }
    let version = bytes.get_i16().clamp(0, ASSIGNMENT_MAX_VERSION);
    let assignment = ConsumerProtocolAssignment::decode(&mut bytes, version)
        .map_err(|e| protocol_error("decode assignment", e))?;
    let mut partitions: Vec<TopicPartition> = assignment
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
        .collect();
    partitions.sort();
    Ok(partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_and_assignment_round_trip() {
        let topics = vec!["a".to_string(), "b".to_string()];
        let owned = vec![
            ("a".to_string(), 2),
            ("b".to_string(), 0),
            ("a".to_string(), 1),
        ];
        let bytes = encode_subscription(&topics, &owned).unwrap();
        assert_eq!(&bytes[0..2], &[0, 1]);
        let (back_topics, mut back_owned) = decode_subscription(bytes).unwrap();
        back_owned.sort();
        assert_eq!(back_topics, topics);
        assert_eq!(
            back_owned,
            vec![
                ("a".to_string(), 1),
                ("a".to_string(), 2),
                ("b".to_string(), 0)
            ]
        );
        let bytes = encode_assignment(&owned).unwrap();
        assert_eq!(
            decode_assignment(bytes).unwrap(),
            vec![
                ("a".to_string(), 1),
                ("a".to_string(), 2),
                ("b".to_string(), 0)
            ]
        );
        assert!(decode_assignment(Bytes::new()).unwrap().is_empty());
        assert!(decode_subscription(Bytes::from_static(&[0])).is_err());
    }
}

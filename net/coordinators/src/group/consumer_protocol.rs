//! The consumer protocol's embedded payloads, read and written for classic
//! members that a KIP-848 group hosts (see [`super::migration`]): the
//! subscription in JoinGroup's protocol metadata, and the assignment a
//! SyncGroup answer carries. Each is an `int16` version and then its body;
//! a version above the highest known one is read as that one, as Kafka's
//! `ConsumerProtocol` does (later versions only add fields at the end).

use super::TopicPartition;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::collections::{BTreeMap, BTreeSet};

/// The highest version of either payload this broker reads and writes.
const HIGHEST_VERSION: i16 = 3;

/// A classic member's subscription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    /// Subscribed topics.
    pub topics: BTreeSet<String>,
    /// Partitions the member still owns (v1+; none before).
    pub owned: Vec<TopicPartition>,
    /// Rack id (v3+).
    pub rack_id: Option<String>,
}

/// The version a payload starts with, `None` when it is too short or
/// negative.
pub fn version_of(payload: &[u8]) -> Option<i16> {
    let bytes: [u8; 2] = payload.get(..2)?.try_into().ok()?;
    Some(i16::from_be_bytes(bytes)).filter(|v| *v >= 0)
}

/// Reads a subscription; `None` when it does not decode.
pub fn parse_subscription(metadata: &[u8]) -> Option<Subscription> {
    let version = version_of(metadata)?.min(HIGHEST_VERSION);
    let mut body = Bytes::copy_from_slice(&metadata[2..]);
    let decoded = ConsumerProtocolSubscription::decode(&mut body, version).ok()?;
    Some(Subscription {
        topics: decoded.topics.iter().map(|t| t.to_string()).collect(),
        owned: (decoded.owned_partitions.iter())
            .flat_map(|t| {
                let topic = t.topic.0.to_string();
                (t.partitions.iter()).map(move |p| TopicPartition::new(topic.clone(), *p))
            })
            .collect(),
        rack_id: decoded.rack_id.map(|r| r.to_string()),
    })
}

/// Reads an assignment; an empty payload assigns nothing. `None` when it
/// does not decode, or carries user data (a custom assignor's, which a
/// KIP-848 group could not keep).
pub fn parse_assignment(payload: &[u8]) -> Option<BTreeSet<TopicPartition>> {
    if payload.is_empty() {
        return Some(BTreeSet::new());
    }
    let version = version_of(payload)?.min(HIGHEST_VERSION);
    let mut body = Bytes::copy_from_slice(&payload[2..]);
    let decoded = ConsumerProtocolAssignment::decode(&mut body, version).ok()?;
    if decoded
        .user_data
        .as_ref()
        .is_some_and(|d| d.has_remaining())
    {
        return None;
    }
    Some(
        (decoded.assigned_partitions.iter())
            .flat_map(|t| {
                let topic = t.topic.0.to_string();
                (t.partitions.iter()).map(move |p| TopicPartition::new(topic.clone(), *p))
            })
            .collect(),
    )
}

/// Writes an assignment of `partitions` in the version of the member's
/// subscription `metadata` (Kafka answers in the version the member speaks).
pub fn encode_assignment(metadata: &[u8], partitions: &BTreeSet<TopicPartition>) -> Vec<u8> {
    let version = version_of(metadata).unwrap_or(0).min(HIGHEST_VERSION);
    let by_topic = by_topic(
        partitions
            .iter()
            .map(|tp| (tp.topic.as_str(), tp.partition)),
    );
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
        (by_topic.into_iter())
            .map(|(topic, partitions)| {
                AssignedTopic::default()
                    .with_topic(topic.into())
                    .with_partitions(partitions)
            })
            .collect(),
    );
    let mut out = BytesMut::new();
    out.put_i16(version);
    // Encoding a message built here can fail only on a field a version
    // lacks, and every version 0–3 has both fields; an empty assignment
    // is the safe answer if that ever changes.
    match assignment.encode(&mut out, version) {
        Ok(()) => out.to_vec(),
        Err(_) => Vec::new(),
    }
}

/// Partitions grouped by topic, as both payloads list them.
fn by_topic<'a>(partitions: impl Iterator<Item = (&'a str, i32)>) -> BTreeMap<StrBytes, Vec<i32>> {
    let mut out: BTreeMap<StrBytes, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        let topic = StrBytes::from_string(topic.to_string());
        out.entry(topic).or_default().push(partition);
    }
    out
}

/// A subscription to `topics` owning `owned`, in `version` (tests only).
#[cfg(test)]
pub(crate) fn encode_subscription(version: i16, topics: &[&str], owned: &[(&str, i32)]) -> Vec<u8> {
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
    let s = ConsumerProtocolSubscription::default()
        .with_topics(
            (topics.iter())
                .map(|t| StrBytes::from_string(t.to_string()))
                .collect(),
        )
        .with_owned_partitions(
            (by_topic(owned.iter().copied()).into_iter())
                .map(|(t, ps)| {
                    OwnedTopic::default()
                        .with_topic(t.into())
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_rack_id(Some(StrBytes::from_static_str("r1")));
    let mut out = BytesMut::new();
    out.put_i16(version);
    // A test's own message in a version 0–3: it always encodes.
    if s.encode(&mut out, version.min(HIGHEST_VERSION)).is_err() {
        return Vec::new();
    }
    out.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscription(version: i16, owned: &[(&str, i32)]) -> Vec<u8> {
        encode_subscription(version, &["t", "u"], owned)
    }

    #[test]
    fn subscriptions_of_every_version_are_read() {
        let v0 = parse_subscription(&subscription(0, &[])).expect("v0");
        assert_eq!(v0.topics, ["t".to_string(), "u".to_string()].into());
        assert!(v0.owned.is_empty());
        assert_eq!(v0.rack_id, None, "v0 has no rack");
        let v3 = parse_subscription(&subscription(3, &[("t", 1), ("t", 0)])).expect("v3");
        assert_eq!(
            v3.owned,
            vec![TopicPartition::new("t", 1), TopicPartition::new("t", 0)]
        );
        assert_eq!(v3.rack_id.as_deref(), Some("r1"));
        // A later version is read as the highest known one.
        let mut v9 = subscription(3, &[("u", 2)]);
        v9[..2].copy_from_slice(&9i16.to_be_bytes());
        assert_eq!(parse_subscription(&v9).expect("v9").owned.len(), 1);
        assert_eq!(parse_subscription(&[0]), None);
        assert_eq!(parse_subscription(&[0xff, 0xff, 0, 0]), None);
        assert_eq!(parse_subscription(&[0, 0, 0, 0, 0, 9]), None);
    }

    #[test]
    fn assignments_round_trip_in_the_members_version() {
        let parts: BTreeSet<TopicPartition> = [("t", 0), ("t", 3), ("u", 1)]
            .iter()
            .map(|(t, p)| TopicPartition::new(t.to_string(), *p))
            .collect();
        for version in [0, 1, 3] {
            let bytes = encode_assignment(&subscription(version, &[]), &parts);
            assert_eq!(version_of(&bytes), Some(version));
            assert_eq!(parse_assignment(&bytes), Some(parts.clone()));
        }
        assert_eq!(parse_assignment(&[]), Some(BTreeSet::new()));
        assert_eq!(parse_assignment(&[0, 0, 0]), None);
        let with_user_data = ConsumerProtocolAssignment::default()
            .with_user_data(Some(Bytes::from_static(b"sticky")));
        let mut out = BytesMut::new();
        out.put_i16(0);
        with_user_data.encode(&mut out, 0).expect("encodes");
        assert_eq!(parse_assignment(&out), None, "a custom assignor's data");
    }
}

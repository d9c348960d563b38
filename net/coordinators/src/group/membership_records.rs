//! The membership records of KIP-848 consumer groups and share groups, in
//! `__consumer_offsets` under rill's own key versions (beside 32000 and
//! 32001, far above Kafka's):
//! - 32002 `{group}`: the group's head, [`HeadValue`] (its kind, epochs,
//!   assignor, the topics' partition counts it last assigned);
//! - 32003 `{group, member}`: one member, [`MemberValue`] (who it is, what
//!   it subscribes to, its epochs, what it owns, must give up and is
//!   aiming at).
//!
//! Kafka splits the same state over six record types keyed by topic id;
//! rill keeps one record per member so that a heartbeat rewrites only the
//! members it changed, and names topics as its coordinator does. Both
//! values start with an `int16` version (0) and then the group kind.
//! A missing value is a tombstone: the member left, or the group is gone
//! or of another kind now.

use super::error::RecordError;
use super::migration::ClassicMemberMetadata;
use super::records::put_bytes;
use super::records::{
    put_i16, put_i32, put_i64, put_nullable_str, put_str, Reader, MEMBERSHIP_HEAD_KEY_VERSION,
    MEMBERSHIP_MEMBER_KEY_VERSION,
};
use super::TopicPartition;
use std::collections::{BTreeMap, BTreeSet};

/// Which protocol a membership record belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    /// A KIP-848 consumer group.
    Consumer,
    /// A KIP-932 share group.
    Share,
}

impl GroupKind {
    fn code(self) -> i8 {
        match self {
            GroupKind::Consumer => 0,
            GroupKind::Share => 1,
        }
    }

    fn from_code(code: i8) -> Result<Self, RecordError> {
        match code {
            0 => Ok(GroupKind::Consumer),
            1 => Ok(GroupKind::Share),
            other => Err(RecordError::UnsupportedVersion {
                what: "membership group kind",
                version: i16::from(other),
            }),
        }
    }
}

/// A group's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadValue {
    /// The group's protocol.
    pub kind: GroupKind,
    /// The group epoch.
    pub group_epoch: i32,
    /// The epoch of the target assignment (a share group's group epoch).
    pub assignment_epoch: i32,
    /// The assignor of the last target (empty for a share group).
    pub assignor: String,
    /// When the group last became empty.
    pub empty_since_ms: i64,
    /// Partition counts of the subscribed topics at the last assignment.
    pub topic_partitions: BTreeMap<String, i32>,
}

/// One member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    /// The group's protocol.
    pub kind: GroupKind,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// Rack id.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Subscribed topics.
    pub subscribed_topics: BTreeSet<String>,
    /// The server assignor the member asked for.
    pub server_assignor: Option<String>,
    /// The regular expression it subscribes with.
    pub subscribed_regex: Option<String>,
    /// The topics that expression matched when last resolved.
    pub regex_topics: BTreeSet<String>,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Member epoch.
    pub member_epoch: i32,
    /// The epoch before the last bump.
    pub previous_member_epoch: i32,
    /// Reconciliation state (0 stable, 1 unrevoked, 2 unreleased).
    pub state: i8,
    /// Partitions the member owns (a share member's assignment).
    pub assigned: BTreeSet<TopicPartition>,
    /// Partitions the member must give up.
    pub pending_revocation: BTreeSet<TopicPartition>,
    /// The member's target.
    pub target: BTreeSet<TopicPartition>,
    /// A classic member's session timeout and protocols (an optional tail:
    /// records written before online migration end without it).
    pub classic: Option<ClassicMemberMetadata>,
}

const VALUE_VERSION: i16 = 0;

/// Encodes the key of a group's head.
pub fn encode_head_key(group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + group.len());
    put_i16(&mut out, MEMBERSHIP_HEAD_KEY_VERSION);
    put_str(&mut out, group);
    out
}

/// Encodes the key of one member.
pub fn encode_member_key(group: &str, member: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + group.len() + member.len());
    put_i16(&mut out, MEMBERSHIP_MEMBER_KEY_VERSION);
    put_str(&mut out, group);
    put_str(&mut out, member);
    out
}

/// Encodes a head.
pub fn encode_head_value(value: &HeadValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + 16 * value.topic_partitions.len());
    put_i16(&mut out, VALUE_VERSION);
    out.push(value.kind.code() as u8);
    put_i32(&mut out, value.group_epoch);
    put_i32(&mut out, value.assignment_epoch);
    put_str(&mut out, &value.assignor);
    put_i64(&mut out, value.empty_since_ms);
    put_i32(&mut out, value.topic_partitions.len() as i32);
    for (topic, partitions) in &value.topic_partitions {
        put_str(&mut out, topic);
        put_i32(&mut out, *partitions);
    }
    out
}

/// Encodes a member.
pub fn encode_member_value(value: &MemberValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    put_i16(&mut out, VALUE_VERSION);
    out.push(value.kind.code() as u8);
    put_nullable_str(&mut out, value.instance_id.as_deref());
    put_nullable_str(&mut out, value.rack_id.as_deref());
    put_str(&mut out, &value.client_id);
    put_str(&mut out, &value.client_host);
    put_i32(&mut out, value.subscribed_topics.len() as i32);
    for topic in &value.subscribed_topics {
        put_str(&mut out, topic);
    }
    put_nullable_str(&mut out, value.server_assignor.as_deref());
    put_i32(&mut out, value.rebalance_timeout_ms);
    put_i32(&mut out, value.member_epoch);
    put_i32(&mut out, value.previous_member_epoch);
    out.push(value.state as u8);
    for partitions in [&value.assigned, &value.pending_revocation, &value.target] {
        put_partitions(&mut out, partitions);
    }
    put_nullable_str(&mut out, value.subscribed_regex.as_deref());
    put_i32(&mut out, value.regex_topics.len() as i32);
    for topic in &value.regex_topics {
        put_str(&mut out, topic);
    }
    if let Some(classic) = &value.classic {
        put_i32(&mut out, classic.session_timeout_ms);
        put_i32(&mut out, classic.protocols.len() as i32);
        for (name, metadata) in &classic.protocols {
            put_str(&mut out, name);
            put_bytes(&mut out, metadata);
        }
    }
    out
}

/// A classic member's tail of a member value, `None` when there is none.
fn classic_tail(r: &mut Reader<'_>) -> Result<Option<ClassicMemberMetadata>, RecordError> {
    if r.buf.is_empty() {
        return Ok(None);
    }
    let session_timeout_ms = r.i32("classic session timeout")?;
    let count = count(r, "classic protocols", 6)?;
    let mut protocols = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let name = r.str("classic protocol")?;
        protocols.push((name, r.bytes("classic protocol metadata")?));
    }
    Ok(Some(ClassicMemberMetadata {
        session_timeout_ms,
        protocols,
    }))
}

/// Partitions by topic: `[topic, [partition]]`.
fn put_partitions(out: &mut Vec<u8>, partitions: &BTreeSet<TopicPartition>) {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    put_i32(out, by_topic.len() as i32);
    for (topic, partitions) in by_topic {
        put_str(out, topic);
        put_i32(out, partitions.len() as i32);
        for partition in partitions {
            put_i32(out, partition);
        }
    }
}

/// Decodes a head.
pub fn decode_head_value(value: &[u8]) -> Result<HeadValue, RecordError> {
    let mut r = Reader { buf: value };
    let kind = version_and_kind(&mut r, "membership head value")?;
    let group_epoch = r.i32("group epoch")?;
    let assignment_epoch = r.i32("assignment epoch")?;
    let assignor = r.str("assignor")?;
    let empty_since_ms = r.i64("empty since")?;
    let count = count(&mut r, "topic count", 6)?;
    let mut topic_partitions = BTreeMap::new();
    for _ in 0..count {
        let topic = r.str("topic")?;
        topic_partitions.insert(topic, r.i32("partition count")?);
    }
    Ok(HeadValue {
        kind,
        group_epoch,
        assignment_epoch,
        assignor,
        empty_since_ms,
        topic_partitions,
    })
}

/// Decodes a member.
pub fn decode_member_value(value: &[u8]) -> Result<MemberValue, RecordError> {
    let mut r = Reader { buf: value };
    let kind = version_and_kind(&mut r, "membership member value")?;
    let instance_id = r.nullable_str("instance id")?;
    let rack_id = r.nullable_str("rack id")?;
    let client_id = r.str("client id")?;
    let client_host = r.str("client host")?;
    let subscribed_topics = names(&mut r, "subscription count")?;
    Ok(MemberValue {
        kind,
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topics,
        server_assignor: r.nullable_str("server assignor")?,
        rebalance_timeout_ms: r.i32("rebalance timeout")?,
        member_epoch: r.i32("member epoch")?,
        previous_member_epoch: r.i32("previous member epoch")?,
        state: r.take(1, "member state")?[0] as i8,
        assigned: partitions(&mut r)?,
        pending_revocation: partitions(&mut r)?,
        target: partitions(&mut r)?,
        subscribed_regex: r.nullable_str("subscribed regex")?,
        regex_topics: names(&mut r, "regex topic count")?,
        classic: classic_tail(&mut r)?,
    })
}

fn version_and_kind(r: &mut Reader<'_>, what: &'static str) -> Result<GroupKind, RecordError> {
    match r.i16("membership value version")? {
        VALUE_VERSION => GroupKind::from_code(r.take(1, "group kind")?[0] as i8),
        version => Err(RecordError::UnsupportedVersion { what, version }),
    }
}

/// A count of entries of at least `min_size` bytes each: one past what the
/// rest of the buffer can hold is a bad record, not an allocation.
fn count(r: &mut Reader<'_>, field: &'static str, min_size: usize) -> Result<i32, RecordError> {
    let count = r.i32(field)?;
    if count < 0 || count as usize > r.buf.len() / min_size {
        return Err(RecordError::BadLength {
            field,
            length: count,
        });
    }
    Ok(count)
}

fn names(r: &mut Reader<'_>, field: &'static str) -> Result<BTreeSet<String>, RecordError> {
    let count = count(r, field, 2)?;
    (0..count).map(|_| r.str("topic name")).collect()
}

fn partitions(r: &mut Reader<'_>) -> Result<BTreeSet<TopicPartition>, RecordError> {
    let topics = count(r, "partition topics", 6)?;
    let mut out = BTreeSet::new();
    for _ in 0..topics {
        let topic = r.str("topic")?;
        let partitions = count(r, "partitions", 4)?;
        for _ in 0..partitions {
            out.insert(TopicPartition::new(topic.clone(), r.i32("partition")?));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(t.to_string(), *p))
            .collect()
    }

    #[test]
    fn values_round_trip_and_bad_bytes_are_errors() {
        let head = HeadValue {
            kind: GroupKind::Consumer,
            group_epoch: 7,
            assignment_epoch: 6,
            assignor: "uniform".into(),
            empty_since_ms: 123,
            topic_partitions: [("a".to_string(), 3), ("b".to_string(), 1)].into(),
        };
        assert_eq!(decode_head_value(&encode_head_value(&head)), Ok(head));
        let member = MemberValue {
            kind: GroupKind::Share,
            instance_id: Some("i".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topics: ["a".to_string(), "b".to_string()].into(),
            server_assignor: None,
            subscribed_regex: Some("t.*".into()),
            regex_topics: ["t1".to_string()].into(),
            rebalance_timeout_ms: 30_000,
            member_epoch: 5,
            previous_member_epoch: 4,
            state: 1,
            assigned: tps(&[("a", 0), ("a", 2), ("b", 0)]),
            pending_revocation: tps(&[("a", 1)]),
            target: tps(&[("a", 0)]),
            classic: None,
        };
        let bytes = encode_member_value(&member);
        assert_eq!(decode_member_value(&bytes), Ok(member.clone()));
        assert!(decode_member_value(&bytes[..bytes.len() - 1]).is_err());
        let classic = MemberValue {
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: 45_000,
                protocols: vec![
                    ("range".into(), vec![0, 1, 2]),
                    ("roundrobin".into(), vec![]),
                ],
            }),
            ..member
        };
        let bytes = encode_member_value(&classic);
        assert_eq!(decode_member_value(&bytes), Ok(classic));
        assert!(decode_member_value(&bytes[..bytes.len() - 1]).is_err());
        // An empty head ends with its topic count.
        let mut huge = encode_head_value(&head_of_kind(GroupKind::Share));
        let at = huge.len() - 4;
        huge[at..].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            decode_head_value(&huge),
            Err(RecordError::BadLength { .. })
        ));
        let mut other_kind = encode_head_value(&head_of_kind(GroupKind::Share));
        other_kind[2] = 9;
        assert!(decode_head_value(&other_kind).is_err());
    }

    fn head_of_kind(kind: GroupKind) -> HeadValue {
        HeadValue {
            kind,
            group_epoch: 1,
            assignment_epoch: 1,
            assignor: String::new(),
            empty_since_ms: 0,
            topic_partitions: BTreeMap::new(),
        }
    }
}

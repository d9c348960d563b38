//! The `__consumer_offsets` record formats, byte for byte as Kafka writes them.
//!
//! Every key and value starts with a big-endian `int16` schema version. Keys:
//! - versions 0 and 1: `OffsetCommitKey {group, topic, partition}` (we write 1);
//! - version 2: `GroupMetadataKey {group}`;
//! - version 32000 (rill's own): a transactional offset commit waiting for
//!   its transaction's marker, `{producer_id, group, topic, partition}`;
//! - version 32001 (rill's own): the topics a share group has had assigned
//!   `{group}`, whose value is `{version 0, topics[]}` (Kafka keeps the
//!   like in ShareGroupStatePartitionMetadata): where its share-partition
//!   states are, for DeleteGroups;
//! - versions 32002 and 32003 (rill's own): the membership of a KIP-848 or
//!   share group, `{group}` for its head (epochs, topics) and
//!   `{group, member}` for each member (see [`super::membership_records`]).
//!
//! Values: `OffsetCommitValue` v3 `{offset, leader_epoch, metadata,
//! commit_timestamp}` and `GroupMetadataValue` v3 `{protocol_type, generation,
//! protocol, leader, current_state_timestamp, members[]}`. Older value versions
//! (0-2) are read too, so a log written by an old Kafka replays. A missing value
//! is a tombstone: the offset or the group is gone.
//!
//! Kafka's own key versions 3 and above (its KIP-848 and share-group records)
//! are not read: rill keeps that membership in its own compact records
//! above, and [`decode_key`] reports Kafka's as [`RecordKey::Other`] so a log
//! a Kafka broker wrote replays without its membership instead of failing.

use super::error::RecordError;

/// Key version written for offset commits.
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// Key version of group metadata.
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// Key version of a transactional offset commit that waits for its
/// transaction's marker (rill's own schema, far above Kafka's: Kafka keeps
/// these as transactional offset-commit records that the marker resolves;
/// rill keeps them as plain records under this key, with the producer id,
/// and writes the offset commit, or nothing, when the marker comes). Its
/// value is an `OffsetCommitValue`.
pub const PENDING_TXN_OFFSET_KEY_VERSION: i16 = 32_000;
/// Key version of a share group's topics (rill's own schema, beside
/// [`PENDING_TXN_OFFSET_KEY_VERSION`]).
pub const SHARE_GROUP_TOPICS_KEY_VERSION: i16 = 32_001;
/// Key version of a KIP-848 or share group's head (rill's own schema).
pub const MEMBERSHIP_HEAD_KEY_VERSION: i16 = 32_002;
/// Key version of one member of a KIP-848 or share group (rill's own).
pub const MEMBERSHIP_MEMBER_KEY_VERSION: i16 = 32_003;
/// Value version written for offset commits.
pub const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// Value version written for group metadata.
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// A decoded record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    /// The committed offset of one partition for one group.
    OffsetCommit {
        /// Group id.
        group: String,
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
    },
    /// The metadata of one classic group.
    GroupMetadata {
        /// Group id.
        group: String,
    },
    /// A transactional offset commit waiting for its transaction's marker.
    PendingTxnOffset {
        /// The transaction's producer id.
        producer_id: i64,
        /// Group id.
        group: String,
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
    },
    /// The topics a share group has had assigned.
    ShareGroupTopics {
        /// Group id.
        group: String,
    },
    /// The head of a KIP-848 or share group's membership.
    MembershipHead {
        /// Group id.
        group: String,
    },
    /// One member of a KIP-848 or share group.
    MembershipMember {
        /// Group id.
        group: String,
        /// Member id.
        member: String,
    },
    /// A key of a schema this broker does not replay (Kafka's KIP-848 records).
    Other {
        /// The key version read.
        version: i16,
    },
}

impl RecordKey {
    /// The group the record belongs to (`None` for a key not replayed).
    pub fn group(&self) -> Option<&str> {
        match self {
            RecordKey::OffsetCommit { group, .. }
            | RecordKey::GroupMetadata { group }
            | RecordKey::PendingTxnOffset { group, .. }
            | RecordKey::ShareGroupTopics { group }
            | RecordKey::MembershipHead { group }
            | RecordKey::MembershipMember { group, .. } => Some(group),
            RecordKey::Other { .. } => None,
        }
    }
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    /// The next offset to consume.
    pub offset: i64,
    /// Leader epoch of the last consumed record, -1 when unknown.
    pub leader_epoch: i32,
    /// Client metadata string.
    pub metadata: String,
    /// When the commit was accepted.
    pub commit_timestamp_ms: i64,
    /// When it expires, set by an OffsetCommit v2–v4 `retention_time_ms`
    /// (value version 1); `None`: the broker's retention applies.
    pub expire_timestamp_ms: Option<i64>,
}

/// One member inside a [`GroupMetadataValue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadataValue {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Metadata of the selected protocol (the subscription).
    pub subscription: Vec<u8>,
    /// The assignment the leader gave this member.
    pub assignment: Vec<u8>,
}

/// The persisted state of a classic group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// Protocol type (`consumer`, `connect`, ...).
    pub protocol_type: String,
    /// Generation id.
    pub generation: i32,
    /// Selected protocol, none while the group is empty.
    pub protocol: Option<String>,
    /// Leader member id.
    pub leader: Option<String>,
    /// When the group entered its current state, -1 when unknown.
    pub current_state_timestamp_ms: i64,
    /// Members with their assignments.
    pub members: Vec<MemberMetadataValue>,
}

// ---------------------------------------------------------------- encoding

pub(super) fn put_i16(out: &mut Vec<u8>, v: i16) {
    out.extend_from_slice(&v.to_be_bytes());
}
pub(super) fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}
pub(super) fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}
pub(super) fn put_str(out: &mut Vec<u8>, s: &str) {
    // Kafka strings are int16-prefixed; ids and names are far below 32 KiB, and
    // a longer one is truncated at a char boundary rather than corrupting the record.
    let mut end = s.len().min(i16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    put_i16(out, end as i16);
    out.extend_from_slice(&s.as_bytes()[..end]);
}
pub(super) fn put_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => put_i16(out, -1),
    }
}
pub(super) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_i32(out, b.len() as i32);
    out.extend_from_slice(b);
}

/// Encodes an `OffsetCommitKey` (version 1).
pub fn encode_offset_commit_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + group.len() + topic.len());
    put_i16(&mut out, OFFSET_COMMIT_KEY_VERSION);
    put_str(&mut out, group);
    put_str(&mut out, topic);
    put_i32(&mut out, partition);
    out
}

/// Encodes the key of a pending transactional offset commit.
pub fn encode_pending_txn_offset_key(
    producer_id: i64,
    group: &str,
    topic: &str,
    partition: i32,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + group.len() + topic.len());
    put_i16(&mut out, PENDING_TXN_OFFSET_KEY_VERSION);
    put_i64(&mut out, producer_id);
    put_str(&mut out, group);
    put_str(&mut out, topic);
    put_i32(&mut out, partition);
    out
}

/// Encodes a `GroupMetadataKey` (version 2).
pub fn encode_group_metadata_key(group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + group.len());
    put_i16(&mut out, GROUP_METADATA_KEY_VERSION);
    put_str(&mut out, group);
    out
}

/// Encodes the key of a share group's topics.
pub fn encode_share_group_topics_key(group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + group.len());
    put_i16(&mut out, SHARE_GROUP_TOPICS_KEY_VERSION);
    put_str(&mut out, group);
    out
}

/// Encodes a share group's topics (value version 0).
pub fn encode_share_group_topics_value<'a>(
    topics: impl ExactSizeIterator<Item = &'a String>,
) -> Vec<u8> {
    let mut out = Vec::new();
    put_i16(&mut out, 0);
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for topic in topics {
        put_str(&mut out, topic);
    }
    out
}

/// Decodes a share group's topics.
pub fn decode_share_group_topics_value(value: &[u8]) -> Result<Vec<String>, RecordError> {
    let mut r = Reader { buf: value };
    match r.i16("share topics version")? {
        0 => {}
        version => {
            return Err(RecordError::UnsupportedVersion {
                what: "share group topics value",
                version,
            })
        }
    }
    let count = r.i32("topic count")?;
    // Each topic takes 2 bytes at least: a count past that is a bad record.
    if count < 0 || count as usize > r.buf.len() / 2 {
        return Err(RecordError::BadLength {
            field: "topic count",
            length: count,
        });
    }
    (0..count).map(|_| r.str("topic")).collect()
}

/// Encodes an `OffsetCommitValue` (version 3).
pub fn encode_offset_commit_value(value: &OffsetCommitValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + value.metadata.len());
    if let Some(expire_timestamp_ms) = value.expire_timestamp_ms {
        // Kafka's version 1, the one that carries an expiry (no leader epoch).
        put_i16(&mut out, 1);
        put_i64(&mut out, value.offset);
        put_str(&mut out, &value.metadata);
        put_i64(&mut out, value.commit_timestamp_ms);
        put_i64(&mut out, expire_timestamp_ms);
        return out;
    }
    put_i16(&mut out, OFFSET_COMMIT_VALUE_VERSION);
    put_i64(&mut out, value.offset);
    put_i32(&mut out, value.leader_epoch);
    put_str(&mut out, &value.metadata);
    put_i64(&mut out, value.commit_timestamp_ms);
    out
}

/// Encodes a `GroupMetadataValue` (version 3).
pub fn encode_group_metadata_value(value: &GroupMetadataValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    put_i16(&mut out, GROUP_METADATA_VALUE_VERSION);
    put_str(&mut out, &value.protocol_type);
    put_i32(&mut out, value.generation);
    put_nullable_str(&mut out, value.protocol.as_deref());
    put_nullable_str(&mut out, value.leader.as_deref());
    put_i64(&mut out, value.current_state_timestamp_ms);
    put_i32(&mut out, value.members.len() as i32);
    for m in &value.members {
        put_str(&mut out, &m.member_id);
        put_nullable_str(&mut out, m.group_instance_id.as_deref());
        put_str(&mut out, &m.client_id);
        put_str(&mut out, &m.client_host);
        put_i32(&mut out, m.rebalance_timeout_ms);
        put_i32(&mut out, m.session_timeout_ms);
        put_bytes(&mut out, &m.subscription);
        put_bytes(&mut out, &m.assignment);
    }
    out
}

// ---------------------------------------------------------------- decoding

/// A cursor over a record's bytes.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], RecordError> {
        if self.buf.len() < n {
            return Err(RecordError::Truncated { field });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    pub(super) fn i16(&mut self, field: &'static str) -> Result<i16, RecordError> {
        let b = self.take(2, field)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    pub(super) fn i32(&mut self, field: &'static str) -> Result<i32, RecordError> {
        let b = self.take(4, field)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(super) fn i64(&mut self, field: &'static str) -> Result<i64, RecordError> {
        let b = self.take(8, field)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    pub(super) fn nullable_str(
        &mut self,
        field: &'static str,
    ) -> Result<Option<String>, RecordError> {
        let len = self.i16(field)?;
        if len < 0 {
            return Ok(None);
        }
        let b = self.take(len as usize, field)?;
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| RecordError::NotUtf8 { field })
    }
    pub(super) fn str(&mut self, field: &'static str) -> Result<String, RecordError> {
        self.nullable_str(field)?
            .ok_or(RecordError::BadLength { field, length: -1 })
    }
    pub(super) fn bytes(&mut self, field: &'static str) -> Result<Vec<u8>, RecordError> {
        let len = self.i32(field)?;
        if len < 0 {
            // A null byte array in a member is read as empty, as Kafka does.
            return Ok(Vec::new());
        }
        Ok(self.take(len as usize, field)?.to_vec())
    }
}

/// Decodes a record key.
pub fn decode_key(key: &[u8]) -> Result<RecordKey, RecordError> {
    let mut r = Reader { buf: key };
    let version = r.i16("key version")?;
    match version {
        0 | 1 => Ok(RecordKey::OffsetCommit {
            group: r.str("group")?,
            topic: r.str("topic")?,
            partition: r.i32("partition")?,
        }),
        2 => Ok(RecordKey::GroupMetadata {
            group: r.str("group")?,
        }),
        PENDING_TXN_OFFSET_KEY_VERSION => Ok(RecordKey::PendingTxnOffset {
            producer_id: r.i64("producer_id")?,
            group: r.str("group")?,
            topic: r.str("topic")?,
            partition: r.i32("partition")?,
        }),
        SHARE_GROUP_TOPICS_KEY_VERSION => Ok(RecordKey::ShareGroupTopics {
            group: r.str("group")?,
        }),
        MEMBERSHIP_HEAD_KEY_VERSION => Ok(RecordKey::MembershipHead {
            group: r.str("group")?,
        }),
        MEMBERSHIP_MEMBER_KEY_VERSION => Ok(RecordKey::MembershipMember {
            group: r.str("group")?,
            member: r.str("member")?,
        }),
        v if v > 2 => Ok(RecordKey::Other { version: v }),
        v => Err(RecordError::UnsupportedVersion {
            what: "key",
            version: v,
        }),
    }
}

/// Decodes an `OffsetCommitValue` of versions 0 to 3.
pub fn decode_offset_commit_value(value: &[u8]) -> Result<OffsetCommitValue, RecordError> {
    let mut r = Reader { buf: value };
    let version = r.i16("offset value version")?;
    match version {
        0..=2 => {
            let offset = r.i64("offset")?;
            let metadata = r.str("metadata")?;
            let commit_timestamp_ms = r.i64("commit_timestamp")?;
            let expire_timestamp_ms = if version == 1 {
                Some(r.i64("expire_timestamp")?)
            } else {
                None
            };
            Ok(OffsetCommitValue {
                offset,
                leader_epoch: -1,
                metadata,
                commit_timestamp_ms,
                expire_timestamp_ms,
            })
        }
        3 => Ok(OffsetCommitValue {
            offset: r.i64("offset")?,
            leader_epoch: r.i32("leader_epoch")?,
            metadata: r.str("metadata")?,
            commit_timestamp_ms: r.i64("commit_timestamp")?,
            expire_timestamp_ms: None,
        }),
        v => Err(RecordError::UnsupportedVersion {
            what: "offset commit value",
            version: v,
        }),
    }
}

/// Decodes a `GroupMetadataValue` of versions 0 to 3.
pub fn decode_group_metadata_value(value: &[u8]) -> Result<GroupMetadataValue, RecordError> {
    let mut r = Reader { buf: value };
    let version = r.i16("group value version")?;
    if !(0..=3).contains(&version) {
        return Err(RecordError::UnsupportedVersion {
            what: "group metadata value",
            version,
        });
    }
    let protocol_type = r.str("protocol_type")?;
    let generation = r.i32("generation")?;
    let protocol = r.nullable_str("protocol")?;
    let leader = r.nullable_str("leader")?;
    let current_state_timestamp_ms = if version >= 2 {
        r.i64("current_state_timestamp")?
    } else {
        -1
    };
    let count = r.i32("members")?;
    if count < 0 {
        return Err(RecordError::BadLength {
            field: "members",
            length: count,
        });
    }
    // Bound the pre-allocation by what the buffer could hold, not by the prefix.
    let mut members = Vec::with_capacity((count as usize).min(r.buf.len() / 16));
    for _ in 0..count {
        let member_id = r.str("member_id")?;
        let group_instance_id = if version >= 3 {
            r.nullable_str("group_instance_id")?
        } else {
            None
        };
        let client_id = r.str("client_id")?;
        let client_host = r.str("client_host")?;
        let rebalance_timeout_ms = if version >= 1 {
            r.i32("rebalance_timeout")?
        } else {
            -1
        };
        let session_timeout_ms = r.i32("session_timeout")?;
        let rebalance_timeout_ms = if version >= 1 {
            rebalance_timeout_ms
        } else {
            session_timeout_ms
        };
        members.push(MemberMetadataValue {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription: r.bytes("subscription")?,
            assignment: r.bytes("assignment")?,
        });
    }
    Ok(GroupMetadataValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_commit_round_trip_and_layout() {
        let key = encode_offset_commit_key("g", "t", 7);
        // version 1, "g", "t", partition 7
        assert_eq!(key, vec![0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]);
        assert_eq!(
            decode_key(&key),
            Ok(RecordKey::OffsetCommit {
                group: "g".into(),
                topic: "t".into(),
                partition: 7
            })
        );
        let value = OffsetCommitValue {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp_ms: 1000,
            expire_timestamp_ms: None,
        };
        let bytes = encode_offset_commit_value(&value);
        assert_eq!(&bytes[..2], &[0, 3]);
        assert_eq!(bytes.len(), 2 + 8 + 4 + 3 + 8);
        assert_eq!(decode_offset_commit_value(&bytes), Ok(value));
        // An explicit expiry is Kafka's version 1, which has no leader epoch.
        let expiring = OffsetCommitValue {
            offset: 42,
            leader_epoch: -1,
            metadata: "m".into(),
            commit_timestamp_ms: 1000,
            expire_timestamp_ms: Some(61_000),
        };
        let bytes = encode_offset_commit_value(&expiring);
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(bytes.len(), 2 + 8 + 3 + 8 + 8);
        assert_eq!(decode_offset_commit_value(&bytes), Ok(expiring));
    }

    #[test]
    fn offset_commit_value_v1_is_read() {
        // v1: offset, metadata, commit timestamp, expire timestamp
        let mut v = vec![0, 1];
        v.extend_from_slice(&5i64.to_be_bytes());
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(&9i64.to_be_bytes());
        v.extend_from_slice(&99i64.to_be_bytes());
        let d = decode_offset_commit_value(&v).unwrap();
        assert_eq!(
            (d.offset, d.leader_epoch, d.commit_timestamp_ms),
            (5, -1, 9)
        );
    }

    #[test]
    fn group_metadata_round_trip() {
        let key = encode_group_metadata_key("grp");
        assert_eq!(key, vec![0, 2, 0, 3, b'g', b'r', b'p']);
        assert_eq!(
            decode_key(&key),
            Ok(RecordKey::GroupMetadata {
                group: "grp".into()
            })
        );
        let value = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp_ms: 123,
            members: vec![MemberMetadataValue {
                member_id: "m1".into(),
                group_instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: vec![1, 2, 3],
                assignment: vec![4, 5],
            }],
        };
        let bytes = encode_group_metadata_value(&value);
        assert_eq!(&bytes[..2], &[0, 3]);
        assert_eq!(decode_group_metadata_value(&bytes), Ok(value.clone()));
        let empty = GroupMetadataValue {
            protocol: None,
            leader: None,
            members: vec![],
            ..value
        };
        assert_eq!(
            decode_group_metadata_value(&encode_group_metadata_value(&empty)),
            Ok(empty)
        );
    }

    #[test]
    fn truncated_records_are_errors_not_panics() {
        let key = encode_offset_commit_key("group", "topic", 1);
        for n in 0..key.len() {
            assert!(decode_key(&key[..n]).is_err(), "prefix {n}");
        }
        let v = encode_offset_commit_value(&OffsetCommitValue {
            offset: 1,
            leader_epoch: 1,
            metadata: "abc".into(),
            commit_timestamp_ms: 1,
            expire_timestamp_ms: None,
        });
        for n in 0..v.len() {
            assert!(decode_offset_commit_value(&v[..n]).is_err());
        }
        assert_eq!(
            decode_key(&[0, 3, 0, 0]),
            Ok(RecordKey::Other { version: 3 })
        );
    }
}

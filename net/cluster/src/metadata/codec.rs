//! The byte format of a [`MetadataRecord`], as it sits in a Raft log entry.
//!
//! One frame per record, all integers big-endian:
//!
//! ```text
//! length: u32   bytes after this field
//! crc:    u32   CRC32C of everything after this field
//! version: u8   FORMAT_VERSION
//! type:    u8   the record type (RECORD_TYPE_* below)
//! body          the record's fields in declaration order
//! ```
//!
//! Body primitives: `i16`/`i32`/`i64`/`u16` fixed width; a string is a `u32`
//! length and UTF-8 bytes; an option a `u8` flag (0 or 1) and the value; a
//! list a `u32` count and the items; a topic id its 16 bytes.
//!
//! Fields added after a record type first shipped (the partition records'
//! eligible leader replicas, KIP-966) sit at the end of its body and are
//! written only when they hold something: a frame that ends before them is
//! the older layout and reads with their defaults (empty, unchanged). Old
//! logs stay readable, and a record without them is byte-identical to what
//! older builds wrote. An older build cannot read a record with them (it
//! skips it), which is why rill does not promise mixed-version clusters
//! (docs/operations.md, Upgrade).
//!
//! A new record type takes the next `RECORD_TYPE_*` number (never reuse
//! one) and lists its body here or in its own file; an older build skips
//! it as an [`DecodeError::UnknownRecordType`]. The remote log segment
//! records of tiered storage (types 19–21) are encoded and decoded side by
//! side in `codec/remote_segments.rs`:
//!
//! ```text
//! RemoteLogSegment (19):      topic_id, partition: i32, segment_id: [u8; 16],
//!                             base_offset: i64, end_offset: i64,
//!                             max_timestamp_ms: i64, size_bytes: i64,
//!                             broker_id: i32, leader_epoch: i32,
//!                             segment_leader_epochs: list of (i32, i64),
//!                             state: u8 (Kafka's RemoteLogSegmentState id)
//! RemoteLogSegmentState (20): topic_id, partition: i32, segment_id, state: u8
//! RemoteTopicPurged (21):     topic_id
//! ```
//!
//! Feature levels (KIP-584): `FeatureLevel` (22) is `name`, `level: i16`.
//! `RegisterBroker` gained a trailing list of supported features, each
//! `name`, `min_level: i16`, `max_level: i16`, written only when not empty.
//! `CordonBroker` (23, KIP-1066) is `broker_id: i32`, `broker_epoch: i64`,
//! `cordoned: u8` flag.
//! `RegisterController` (24, KIP-853) is `node_id: i32`, `host`,
//! `port: u16`.
//!
//! Why our own format rather than Kafka's generated record schemata: the
//! metadata log is internal to rill (no Kafka tool reads it), and a small
//! hand-written format with a version byte and a CRC (Raft replicates bytes,
//! a disk can still flip them) is less code than a schema compiler. The CRC
//! is checked on every decode; a decoder never panics and never allocates
//! more than the frame could hold.

use std::collections::BTreeMap;

use crate::placement::BrokerId;

use super::record::{
    AclRecord, Endpoint, MetadataRecord, PartitionChangeRecord, PartitionRecord, ScramCredential,
    SupportedFeature,
};

/// Version byte written in every frame.
pub const FORMAT_VERSION: u8 = 1;

/// length (4) + crc (4) + version (1) + type (1).
const HEADER_BYTES: usize = 10;

const RECORD_TYPE_REGISTER_BROKER: u8 = 1;
const RECORD_TYPE_UNREGISTER_BROKER: u8 = 2;
const RECORD_TYPE_FENCE_BROKER: u8 = 3;
const RECORD_TYPE_UNFENCE_BROKER: u8 = 4;
const RECORD_TYPE_TOPIC: u8 = 5;
const RECORD_TYPE_REMOVE_TOPIC: u8 = 6;
const RECORD_TYPE_PARTITION: u8 = 7;
const RECORD_TYPE_PARTITION_CHANGE: u8 = 8;
const RECORD_TYPE_CONFIG_CHANGE: u8 = 9;
const RECORD_TYPE_PRODUCER_IDS: u8 = 10;
const RECORD_TYPE_REASSIGNMENT: u8 = 11;
const RECORD_TYPE_BROKER_CONFIG_CHANGE: u8 = 12;
const RECORD_TYPE_USER_SCRAM_CREDENTIAL: u8 = 13;
const RECORD_TYPE_REMOVE_USER_SCRAM_CREDENTIAL: u8 = 14;
const RECORD_TYPE_ACCESS_CONTROL_ENTRY: u8 = 15;
const RECORD_TYPE_REMOVE_ACCESS_CONTROL_ENTRY: u8 = 16;
const RECORD_TYPE_CLIENT_QUOTA: u8 = 17;
const RECORD_TYPE_CLIENT_METRICS_CONFIG_CHANGE: u8 = 18;
const RECORD_TYPE_REMOTE_LOG_SEGMENT: u8 = 19;
const RECORD_TYPE_REMOTE_LOG_SEGMENT_STATE: u8 = 20;
const RECORD_TYPE_REMOTE_TOPIC_PURGED: u8 = 21;
const RECORD_TYPE_FEATURE_LEVEL: u8 = 22;
const RECORD_TYPE_CORDON_BROKER: u8 = 23;
const RECORD_TYPE_REGISTER_CONTROLLER: u8 = 24;
const RECORD_TYPE_GROUP_CONFIG_CHANGE: u8 = 25;

mod remote_segments;

/// Why bytes are not a record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than a field or the declared length needs.
    #[error(
        "truncated metadata record: needed {needed} bytes at offset {at}, {available} available"
    )]
    Truncated {
        /// Position of the field.
        at: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// The frame's length field does not match the bytes given.
    #[error("metadata record length {declared} does not match the {actual} bytes after it")]
    LengthMismatch {
        /// The length field.
        declared: u32,
        /// Bytes after the length field.
        actual: usize,
    },
    /// The CRC does not match: the bytes were damaged.
    #[error("metadata record CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC in the frame.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// A format version this build does not read.
    #[error("unsupported metadata record format version {0}")]
    UnsupportedVersion(u8),
    /// A record type this build does not know.
    #[error("unknown metadata record type {0}")]
    UnknownRecordType(u8),
    /// An option flag other than 0 or 1.
    #[error("invalid option flag {0}")]
    InvalidFlag(u8),
    /// A string that is not UTF-8.
    #[error("metadata record string is not UTF-8")]
    InvalidUtf8,
    /// A remote segment state that is not one of Kafka's four ids.
    #[error("invalid remote log segment state {0}")]
    InvalidRemoteSegmentState(u8),
    /// A config key listed twice.
    #[error("config key {0:?} listed twice")]
    DuplicateConfigKey(String),
    /// The body ends before the frame does.
    #[error("{0} bytes after the end of the metadata record")]
    TrailingBytes(usize),
}

impl MetadataRecord {
    /// The record's frame.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Writer(Vec::with_capacity(64));
        body.u8(FORMAT_VERSION);
        body.record(self);
        let body = body.0;
        let length = u32::try_from(body.len() + 4).unwrap_or(u32::MAX);
        assert!(
            usize::try_from(length).is_ok_and(|length| length == body.len() + 4),
            "metadata record of {} bytes does not fit a u32 length",
            body.len()
        );
        let mut frame = Vec::with_capacity(body.len() + 8);
        frame.extend_from_slice(&length.to_be_bytes());
        frame.extend_from_slice(&crc_fast::crc32_iscsi(&body).to_be_bytes());
        frame.extend_from_slice(&body);
        assert_eq!(frame.len(), body.len() + 8);
        // Read back before it leaves (records are rare: the cost is nothing
        // next to a Raft round trip), so an encoder bug stops here instead
        // of in every node that applies the log.
        assert_eq!(MetadataRecord::decode(&frame).as_ref(), Ok(self));
        frame
    }

    /// Decodes one whole frame (exactly the bytes [`MetadataRecord::encode`]
    /// wrote: a Raft entry holds one record).
    pub fn decode(frame: &[u8]) -> Result<MetadataRecord, DecodeError> {
        let mut header = Reader::new(frame, 0, truncated);
        if frame.len() < HEADER_BYTES {
            return Err(header.truncated(HEADER_BYTES));
        }
        let declared = header.u32()?;
        if usize::try_from(declared).ok() != Some(frame.len() - 4) {
            return Err(DecodeError::LengthMismatch {
                declared,
                actual: frame.len() - 4,
            });
        }
        let stored = header.u32()?;
        let computed = crc_fast::crc32_iscsi(&frame[8..]);
        if stored != computed {
            return Err(DecodeError::CrcMismatch { stored, computed });
        }
        let mut body = Reader::new(frame, header.at, truncated);
        let version = body.u8()?;
        if version != FORMAT_VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let record = body.record()?;
        if body.at != frame.len() {
            return Err(DecodeError::TrailingBytes(frame.len() - body.at));
        }
        Ok(record)
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, value: u8) {
        self.0.push(value);
    }
    fn i8(&mut self, value: i8) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    fn u16(&mut self, value: u16) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    fn i16(&mut self, value: i16) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    fn i32(&mut self, value: i32) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    fn i64(&mut self, value: i64) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    fn bytes16(&mut self, value: &[u8; 16]) {
        self.0.extend_from_slice(value);
    }
    fn flag(&mut self, value: bool) {
        self.u8(u8::from(value));
    }
    fn count(&mut self, count: usize) {
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        assert!(count < u32::MAX, "a metadata list of 2^32 items");
        self.0.extend_from_slice(&count.to_be_bytes());
    }
    fn string(&mut self, value: &str) {
        self.count(value.len());
        self.0.extend_from_slice(value.as_bytes());
    }
    fn blob(&mut self, value: &[u8]) {
        self.count(value.len());
        self.0.extend_from_slice(value);
    }
    fn option_string(&mut self, value: Option<&str>) {
        self.flag(value.is_some());
        if let Some(value) = value {
            self.string(value);
        }
    }
    fn brokers(&mut self, brokers: &[BrokerId]) {
        self.count(brokers.len());
        for &broker in brokers {
            self.i32(broker);
        }
    }
    fn record(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::RegisterBroker { .. }
            | MetadataRecord::UnregisterBroker { .. }
            | MetadataRecord::FenceBroker { .. }
            | MetadataRecord::UnfenceBroker { .. }
            | MetadataRecord::CordonBroker { .. }
            | MetadataRecord::ProducerIds { .. } => self.broker_record(record),
            MetadataRecord::Topic { .. }
            | MetadataRecord::RemoveTopic { .. }
            | MetadataRecord::Partition(_)
            | MetadataRecord::PartitionChange(_)
            | MetadataRecord::Reassignment { .. } => self.topic_record(record),
            MetadataRecord::ConfigChange { .. }
            | MetadataRecord::BrokerConfigChange { .. }
            | MetadataRecord::ClientMetricsConfigChange { .. }
            | MetadataRecord::GroupConfigChange { .. }
            | MetadataRecord::ClientQuota { .. }
            | MetadataRecord::FeatureLevel { .. }
            | MetadataRecord::RegisterController { .. } => self.config_record(record),
            MetadataRecord::UserScramCredential { .. }
            | MetadataRecord::RemoveUserScramCredential { .. }
            | MetadataRecord::AccessControlEntry(_)
            | MetadataRecord::RemoveAccessControlEntry { .. } => self.security_record(record),
            MetadataRecord::RemoteLogSegment(_)
            | MetadataRecord::RemoteLogSegmentState { .. }
            | MetadataRecord::RemoteTopicPurged { .. } => self.remote_record(record),
        }
    }

    /// The broker records (producer-id blocks included) of [`Self::record`].
    fn broker_record(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::RegisterBroker {
                broker_id,
                incarnation_id,
                broker_epoch,
                listeners,
                rack,
                features,
            } => {
                self.u8(RECORD_TYPE_REGISTER_BROKER);
                self.i32(*broker_id);
                self.bytes16(incarnation_id);
                self.i64(*broker_epoch);
                self.count(listeners.len());
                for listener in listeners {
                    self.string(&listener.name);
                    self.string(&listener.host);
                    self.u16(listener.port);
                }
                self.option_string(rack.as_deref());
                // Trailing, and only when present: see the module docs.
                if !features.is_empty() {
                    self.count(features.len());
                    for feature in features {
                        self.string(&feature.name);
                        self.i16(feature.min_level);
                        self.i16(feature.max_level);
                    }
                }
            }
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            } => self.broker_and_epoch(RECORD_TYPE_UNREGISTER_BROKER, *broker_id, *broker_epoch),
            MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            } => self.broker_and_epoch(RECORD_TYPE_FENCE_BROKER, *broker_id, *broker_epoch),
            MetadataRecord::UnfenceBroker {
                broker_id,
                broker_epoch,
            } => self.broker_and_epoch(RECORD_TYPE_UNFENCE_BROKER, *broker_id, *broker_epoch),
            MetadataRecord::CordonBroker {
                broker_id,
                broker_epoch,
                cordoned,
            } => {
                self.broker_and_epoch(RECORD_TYPE_CORDON_BROKER, *broker_id, *broker_epoch);
                self.flag(*cordoned);
            }
            MetadataRecord::ProducerIds {
                broker_id,
                broker_epoch,
                next_block_start,
            } => {
                self.u8(RECORD_TYPE_PRODUCER_IDS);
                self.i32(*broker_id);
                self.i64(*broker_epoch);
                self.i64(*next_block_start);
            }
            _ => unreachable!("not a broker record: {}", record.kind()),
        }
    }

    /// The topic and partition records of [`Self::record`].
    fn topic_record(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::Topic {
                name,
                topic_id,
                configs,
            } => {
                self.u8(RECORD_TYPE_TOPIC);
                self.string(name);
                self.bytes16(topic_id);
                self.count(configs.len());
                for (key, value) in configs {
                    self.string(key);
                    self.string(value);
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                self.u8(RECORD_TYPE_REMOVE_TOPIC);
                self.bytes16(topic_id);
            }
            MetadataRecord::Partition(partition) => self.partition(partition),
            MetadataRecord::PartitionChange(change) => self.partition_change(change),
            MetadataRecord::Reassignment {
                topic_id,
                partition,
                adding,
                removing,
            } => {
                self.u8(RECORD_TYPE_REASSIGNMENT);
                self.bytes16(topic_id);
                self.i32(*partition);
                self.brokers(adding);
                self.brokers(removing);
            }
            _ => unreachable!("not a topic record: {}", record.kind()),
        }
    }

    /// The config and quota records of [`Self::record`].
    fn config_record(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::ConfigChange { topic, key, value } => {
                self.u8(RECORD_TYPE_CONFIG_CHANGE);
                self.string(topic);
                self.string(key);
                self.option_string(value.as_deref());
            }
            MetadataRecord::BrokerConfigChange { broker, key, value } => {
                self.u8(RECORD_TYPE_BROKER_CONFIG_CHANGE);
                self.string(broker);
                self.string(key);
                self.option_string(value.as_deref());
            }
            MetadataRecord::ClientMetricsConfigChange { name, key, value } => {
                self.u8(RECORD_TYPE_CLIENT_METRICS_CONFIG_CHANGE);
                self.string(name);
                self.string(key);
                self.option_string(value.as_deref());
            }
            MetadataRecord::GroupConfigChange { group, key, value } => {
                self.u8(RECORD_TYPE_GROUP_CONFIG_CHANGE);
                self.string(group);
                self.string(key);
                self.option_string(value.as_deref());
            }
            MetadataRecord::FeatureLevel { name, level } => {
                self.u8(RECORD_TYPE_FEATURE_LEVEL);
                self.string(name);
                self.i16(*level);
            }
            MetadataRecord::RegisterController {
                node_id,
                host,
                port,
            } => {
                self.u8(RECORD_TYPE_REGISTER_CONTROLLER);
                self.i32(*node_id);
                self.string(host);
                self.u16(*port);
            }
            MetadataRecord::ClientQuota { entity, key, value } => {
                self.u8(RECORD_TYPE_CLIENT_QUOTA);
                self.count(entity.len());
                for (kind, name) in entity {
                    self.string(kind);
                    self.option_string(name.as_deref());
                }
                self.string(key);
                self.option_string(value.as_deref());
            }
            _ => unreachable!("not a config record: {}", record.kind()),
        }
    }

    /// The SCRAM and ACL records of [`Self::record`].
    fn security_record(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::UserScramCredential {
                name,
                mechanism,
                credential,
            } => {
                self.u8(RECORD_TYPE_USER_SCRAM_CREDENTIAL);
                self.string(name);
                self.u8(*mechanism);
                self.blob(&credential.salt);
                self.i32(credential.iterations);
                self.blob(&credential.stored_key);
                self.blob(&credential.server_key);
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                self.u8(RECORD_TYPE_REMOVE_USER_SCRAM_CREDENTIAL);
                self.string(name);
                self.u8(*mechanism);
            }
            MetadataRecord::AccessControlEntry(acl) => {
                self.u8(RECORD_TYPE_ACCESS_CONTROL_ENTRY);
                self.bytes16(&acl.id);
                self.i8(acl.resource_type);
                self.string(&acl.resource_name);
                self.i8(acl.pattern_type);
                self.string(&acl.principal);
                self.string(&acl.host);
                self.i8(acl.operation);
                self.i8(acl.permission_type);
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                self.u8(RECORD_TYPE_REMOVE_ACCESS_CONTROL_ENTRY);
                self.bytes16(id);
            }
            _ => unreachable!("not a SCRAM or ACL record: {}", record.kind()),
        }
    }

    fn partition(&mut self, partition: &PartitionRecord) {
        self.u8(RECORD_TYPE_PARTITION);
        self.bytes16(&partition.topic_id);
        self.i32(partition.partition);
        self.brokers(&partition.replicas);
        self.brokers(&partition.isr);
        self.i32(partition.leader);
        self.i32(partition.leader_epoch);
        self.i32(partition.partition_epoch);
        // A later field: written only when set (see the module doc).
        if !partition.eligible_leader_replicas.is_empty() || !partition.last_known_elr.is_empty() {
            self.brokers(&partition.eligible_leader_replicas);
            self.brokers(&partition.last_known_elr);
        }
    }

    fn partition_change(&mut self, change: &PartitionChangeRecord) {
        self.u8(RECORD_TYPE_PARTITION_CHANGE);
        self.bytes16(&change.topic_id);
        self.i32(change.partition);
        self.flag(change.leader.is_some());
        if let Some(leader) = change.leader {
            self.i32(leader);
        }
        self.flag(change.isr.is_some());
        if let Some(isr) = &change.isr {
            self.brokers(isr);
        }
        self.option_brokers(change.replicas.as_deref());
        // Later fields: written only when set (see the module doc).
        if change.eligible_leader_replicas.is_some() || change.last_known_elr.is_some() {
            self.option_brokers(change.eligible_leader_replicas.as_deref());
            self.option_brokers(change.last_known_elr.as_deref());
        }
    }

    fn option_brokers(&mut self, brokers: Option<&[BrokerId]>) {
        self.flag(brokers.is_some());
        if let Some(brokers) = brokers {
            self.brokers(brokers);
        }
    }

    fn broker_and_epoch(&mut self, record_type: u8, broker_id: BrokerId, broker_epoch: i64) {
        self.u8(record_type);
        self.i32(broker_id);
        self.i64(broker_epoch);
    }
}

/// The codec's reader: truncation is a [`DecodeError::Truncated`].
type Reader<'a> = super::reader::Reader<'a, DecodeError>;

fn truncated(at: usize, needed: usize, available: usize) -> DecodeError {
    DecodeError::Truncated {
        at,
        needed,
        available,
    }
}

impl Reader<'_> {
    fn flag(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(DecodeError::InvalidFlag(other)),
        }
    }

    fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes([self.u8()?]))
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(self.u16()? as i16)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let length = self.count(1)?;
        let bytes = self.take(length)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::InvalidUtf8)
    }

    fn blob(&mut self) -> Result<Vec<u8>, DecodeError> {
        let length = self.count(1)?;
        Ok(self.take(length)?.to_vec())
    }

    fn option_string(&mut self) -> Result<Option<String>, DecodeError> {
        Ok(if self.flag()? {
            Some(self.string()?)
        } else {
            None
        })
    }

    fn brokers(&mut self) -> Result<Vec<BrokerId>, DecodeError> {
        let count = self.count(4)?;
        (0..count).map(|_| self.i32()).collect()
    }

    fn record(&mut self) -> Result<MetadataRecord, DecodeError> {
        let record_type = self.u8()?;
        match record_type {
            RECORD_TYPE_REGISTER_BROKER
            | RECORD_TYPE_UNREGISTER_BROKER
            | RECORD_TYPE_FENCE_BROKER
            | RECORD_TYPE_UNFENCE_BROKER
            | RECORD_TYPE_CORDON_BROKER
            | RECORD_TYPE_PRODUCER_IDS => self.broker_record(record_type),
            RECORD_TYPE_TOPIC
            | RECORD_TYPE_REMOVE_TOPIC
            | RECORD_TYPE_PARTITION
            | RECORD_TYPE_PARTITION_CHANGE
            | RECORD_TYPE_REASSIGNMENT => self.topic_record(record_type),
            RECORD_TYPE_CONFIG_CHANGE
            | RECORD_TYPE_BROKER_CONFIG_CHANGE
            | RECORD_TYPE_CLIENT_METRICS_CONFIG_CHANGE
            | RECORD_TYPE_GROUP_CONFIG_CHANGE
            | RECORD_TYPE_CLIENT_QUOTA
            | RECORD_TYPE_FEATURE_LEVEL
            | RECORD_TYPE_REGISTER_CONTROLLER => self.config_record(record_type),
            RECORD_TYPE_USER_SCRAM_CREDENTIAL
            | RECORD_TYPE_REMOVE_USER_SCRAM_CREDENTIAL
            | RECORD_TYPE_ACCESS_CONTROL_ENTRY
            | RECORD_TYPE_REMOVE_ACCESS_CONTROL_ENTRY => self.security_record(record_type),
            RECORD_TYPE_REMOTE_LOG_SEGMENT
            | RECORD_TYPE_REMOTE_LOG_SEGMENT_STATE
            | RECORD_TYPE_REMOTE_TOPIC_PURGED => self.remote_record(record_type),
            other => Err(DecodeError::UnknownRecordType(other)),
        }
    }

    /// The broker records (producer-id blocks included) of [`Self::record`].
    fn broker_record(&mut self, record_type: u8) -> Result<MetadataRecord, DecodeError> {
        Ok(match record_type {
            RECORD_TYPE_REGISTER_BROKER => self.register_broker()?,
            RECORD_TYPE_UNREGISTER_BROKER => MetadataRecord::UnregisterBroker {
                broker_id: self.i32()?,
                broker_epoch: self.i64()?,
            },
            RECORD_TYPE_FENCE_BROKER => MetadataRecord::FenceBroker {
                broker_id: self.i32()?,
                broker_epoch: self.i64()?,
            },
            RECORD_TYPE_UNFENCE_BROKER => MetadataRecord::UnfenceBroker {
                broker_id: self.i32()?,
                broker_epoch: self.i64()?,
            },
            RECORD_TYPE_CORDON_BROKER => MetadataRecord::CordonBroker {
                broker_id: self.i32()?,
                broker_epoch: self.i64()?,
                cordoned: self.flag()?,
            },
            RECORD_TYPE_PRODUCER_IDS => MetadataRecord::ProducerIds {
                broker_id: self.i32()?,
                broker_epoch: self.i64()?,
                next_block_start: self.i64()?,
            },
            other => unreachable!("not a broker record type: {other}"),
        })
    }

    /// The topic and partition records of [`Self::record`].
    fn topic_record(&mut self, record_type: u8) -> Result<MetadataRecord, DecodeError> {
        Ok(match record_type {
            RECORD_TYPE_TOPIC => self.topic()?,
            RECORD_TYPE_REMOVE_TOPIC => MetadataRecord::RemoveTopic {
                topic_id: self.array()?,
            },
            RECORD_TYPE_PARTITION => self.partition()?,
            RECORD_TYPE_PARTITION_CHANGE => self.partition_change()?,
            RECORD_TYPE_REASSIGNMENT => MetadataRecord::Reassignment {
                topic_id: self.array()?,
                partition: self.i32()?,
                adding: self.brokers()?,
                removing: self.brokers()?,
            },
            other => unreachable!("not a topic record type: {other}"),
        })
    }

    /// The config and quota records of [`Self::record`].
    fn config_record(&mut self, record_type: u8) -> Result<MetadataRecord, DecodeError> {
        Ok(match record_type {
            RECORD_TYPE_CONFIG_CHANGE => MetadataRecord::ConfigChange {
                topic: self.string()?,
                key: self.string()?,
                value: self.option_string()?,
            },
            RECORD_TYPE_BROKER_CONFIG_CHANGE => MetadataRecord::BrokerConfigChange {
                broker: self.string()?,
                key: self.string()?,
                value: self.option_string()?,
            },
            RECORD_TYPE_CLIENT_METRICS_CONFIG_CHANGE => MetadataRecord::ClientMetricsConfigChange {
                name: self.string()?,
                key: self.string()?,
                value: self.option_string()?,
            },
            RECORD_TYPE_GROUP_CONFIG_CHANGE => MetadataRecord::GroupConfigChange {
                group: self.string()?,
                key: self.string()?,
                value: self.option_string()?,
            },
            RECORD_TYPE_FEATURE_LEVEL => MetadataRecord::FeatureLevel {
                name: self.string()?,
                level: self.i16()?,
            },
            RECORD_TYPE_REGISTER_CONTROLLER => MetadataRecord::RegisterController {
                node_id: self.i32()?,
                host: self.string()?,
                port: self.u16()?,
            },
            RECORD_TYPE_CLIENT_QUOTA => {
                // Each part is at least a string length and a flag.
                let parts = self.count(5)?;
                let mut entity = Vec::with_capacity(parts);
                for _ in 0..parts {
                    entity.push((self.string()?, self.option_string()?));
                }
                MetadataRecord::ClientQuota {
                    entity,
                    key: self.string()?,
                    value: self.option_string()?,
                }
            }
            other => unreachable!("not a config record type: {other}"),
        })
    }

    /// The SCRAM and ACL records of [`Self::record`].
    fn security_record(&mut self, record_type: u8) -> Result<MetadataRecord, DecodeError> {
        Ok(match record_type {
            RECORD_TYPE_USER_SCRAM_CREDENTIAL => MetadataRecord::UserScramCredential {
                name: self.string()?,
                mechanism: self.u8()?,
                credential: ScramCredential {
                    salt: self.blob()?,
                    iterations: self.i32()?,
                    stored_key: self.blob()?,
                    server_key: self.blob()?,
                },
            },
            RECORD_TYPE_REMOVE_USER_SCRAM_CREDENTIAL => MetadataRecord::RemoveUserScramCredential {
                name: self.string()?,
                mechanism: self.u8()?,
            },
            RECORD_TYPE_ACCESS_CONTROL_ENTRY => MetadataRecord::AccessControlEntry(AclRecord {
                id: self.array()?,
                resource_type: self.i8()?,
                resource_name: self.string()?,
                pattern_type: self.i8()?,
                principal: self.string()?,
                host: self.string()?,
                operation: self.i8()?,
                permission_type: self.i8()?,
            }),
            RECORD_TYPE_REMOVE_ACCESS_CONTROL_ENTRY => {
                MetadataRecord::RemoveAccessControlEntry { id: self.array()? }
            }
            other => unreachable!("not a SCRAM or ACL record type: {other}"),
        })
    }

    fn register_broker(&mut self) -> Result<MetadataRecord, DecodeError> {
        let broker_id = self.i32()?;
        let incarnation_id = self.array()?;
        let broker_epoch = self.i64()?;
        // name (4) + host (4) + port (2) at least.
        let count = self.count(10)?;
        let mut listeners = Vec::with_capacity(count);
        for _ in 0..count {
            listeners.push(Endpoint {
                name: self.string()?,
                host: self.string()?,
                port: self.u16()?,
            });
        }
        let rack = self.option_string()?;
        let mut features = Vec::new();
        if self.has_more() {
            // name (4) + min (2) + max (2) at least.
            for _ in 0..self.count(8)? {
                features.push(SupportedFeature {
                    name: self.string()?,
                    min_level: self.i16()?,
                    max_level: self.i16()?,
                });
            }
        }
        Ok(MetadataRecord::RegisterBroker {
            broker_id,
            incarnation_id,
            broker_epoch,
            listeners,
            rack,
            features,
        })
    }

    fn topic(&mut self) -> Result<MetadataRecord, DecodeError> {
        let name = self.string()?;
        let topic_id = self.array()?;
        let count = self.count(8)?;
        let mut configs = BTreeMap::new();
        for _ in 0..count {
            let key = self.string()?;
            let value = self.string()?;
            if configs.contains_key(&key) {
                return Err(DecodeError::DuplicateConfigKey(key));
            }
            configs.insert(key, value);
        }
        Ok(MetadataRecord::Topic {
            name,
            topic_id,
            configs,
        })
    }

    /// Whether the frame has bytes left: a later field follows.
    fn has_more(&self) -> bool {
        self.at < self.buf.len()
    }

    fn partition(&mut self) -> Result<MetadataRecord, DecodeError> {
        let mut record = PartitionRecord {
            topic_id: self.array()?,
            partition: self.i32()?,
            replicas: self.brokers()?,
            isr: self.brokers()?,
            leader: self.i32()?,
            leader_epoch: self.i32()?,
            partition_epoch: self.i32()?,
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        };
        if self.has_more() {
            record.eligible_leader_replicas = self.brokers()?;
            record.last_known_elr = self.brokers()?;
        }
        Ok(MetadataRecord::Partition(record))
    }

    fn option_brokers(&mut self) -> Result<Option<Vec<BrokerId>>, DecodeError> {
        Ok(if self.flag()? {
            Some(self.brokers()?)
        } else {
            None
        })
    }

    fn partition_change(&mut self) -> Result<MetadataRecord, DecodeError> {
        let topic_id = self.array()?;
        let partition = self.i32()?;
        let leader = if self.flag()? {
            Some(self.i32()?)
        } else {
            None
        };
        let mut change = PartitionChangeRecord {
            topic_id,
            partition,
            leader,
            isr: self.option_brokers()?,
            replicas: self.option_brokers()?,
            eligible_leader_replicas: None,
            last_known_elr: None,
        };
        if self.has_more() {
            change.eligible_leader_replicas = self.option_brokers()?;
            change.last_known_elr = self.option_brokers()?;
        }
        Ok(MetadataRecord::PartitionChange(change))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            broker_id: 3,
            incarnation_id: [7; 16],
            broker_epoch: 42,
            listeners: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "localhost".into(),
                port: 9092,
            }],
            rack: Some("r1".into()),
            features: crate::metadata::features::supported_by_this_binary(),
        }
    }

    #[test]
    fn a_frame_has_length_crc_version_and_type() {
        let frame = MetadataRecord::RemoveTopic { topic_id: [9; 16] }.encode();
        assert_eq!(frame.len(), HEADER_BYTES + 16);
        assert_eq!(&frame[0..4], &(frame.len() as u32 - 4).to_be_bytes());
        assert_eq!(
            &frame[4..8],
            &crc_fast::crc32_iscsi(&frame[8..]).to_be_bytes()
        );
        assert_eq!(frame[8], FORMAT_VERSION);
        assert_eq!(frame[9], RECORD_TYPE_REMOVE_TOPIC);
        assert_eq!(
            MetadataRecord::decode(&frame),
            Ok(MetadataRecord::RemoveTopic { topic_id: [9; 16] })
        );
    }

    #[test]
    fn a_registration_lists_its_features_after_the_older_layout() {
        let with = sample();
        let MetadataRecord::RegisterBroker { features, .. } = &with else {
            unreachable!()
        };
        let trailing: usize = 4 + features.iter().map(|f| 4 + f.name.len() + 4).sum::<usize>();
        let mut without = with.clone();
        if let MetadataRecord::RegisterBroker { features, .. } = &mut without {
            features.clear();
        }
        // Without features the frame is the older layout, byte for byte
        // the same length; with them, the list follows it.
        let (long, short) = (with.encode(), without.encode());
        assert_eq!(long.len(), short.len() + trailing);
        assert_eq!(&long[10..short.len()], &short[10..]);
        assert_eq!(MetadataRecord::decode(&long), Ok(with));
        assert_eq!(MetadataRecord::decode(&short), Ok(without));
        let level = MetadataRecord::FeatureLevel {
            name: "group.version".into(),
            level: 0,
        };
        assert_eq!(MetadataRecord::decode(&level.encode()), Ok(level));
    }

    #[test]
    fn acl_records_round_trip() {
        let acl = MetadataRecord::AccessControlEntry(AclRecord {
            id: [3; 16],
            resource_type: 2,
            resource_name: "orders".into(),
            pattern_type: 4,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 3,
            permission_type: -1,
        });
        let frame = acl.encode();
        assert_eq!(frame[9], RECORD_TYPE_ACCESS_CONTROL_ENTRY);
        assert_eq!(MetadataRecord::decode(&frame), Ok(acl));
        let remove = MetadataRecord::RemoveAccessControlEntry { id: [4; 16] };
        assert_eq!(MetadataRecord::decode(&remove.encode()), Ok(remove));
        for length in 0..frame.len() {
            assert!(MetadataRecord::decode(&frame[..length]).is_err());
        }
    }

    /// A frame around `body` with a valid length and CRC.
    pub(super) fn framed(body: &[u8]) -> Vec<u8> {
        let mut frame = ((body.len() + 4) as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&crc_fast::crc32_iscsi(body).to_be_bytes());
        frame.extend_from_slice(body);
        frame
    }

    /// A partition record of the layout before the ELR fields: what
    /// older builds wrote.
    fn partition_frame_without_elr() -> Vec<u8> {
        let mut body = vec![FORMAT_VERSION, RECORD_TYPE_PARTITION];
        body.extend_from_slice(&[5; 16]);
        body.extend_from_slice(&0i32.to_be_bytes());
        for list in [[1i32, 2, 3], [1, 2, 3]] {
            body.extend_from_slice(&3u32.to_be_bytes());
            for broker in list {
                body.extend_from_slice(&broker.to_be_bytes());
            }
        }
        for field in [1i32, 4, 7] {
            body.extend_from_slice(&field.to_be_bytes());
        }
        framed(&body)
    }

    #[test]
    fn partition_records_of_older_builds_read_with_an_empty_elr() {
        let old = partition_frame_without_elr();
        let record = PartitionRecord {
            topic_id: [5; 16],
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            leader: 1,
            leader_epoch: 4,
            partition_epoch: 7,
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        };
        assert_eq!(
            MetadataRecord::decode(&old),
            Ok(MetadataRecord::Partition(record.clone()))
        );
        // Without an ELR the new build writes exactly the old bytes.
        assert_eq!(MetadataRecord::Partition(record.clone()).encode(), old);
        let with_elr = MetadataRecord::Partition(PartitionRecord {
            isr: vec![1],
            eligible_leader_replicas: vec![3],
            last_known_elr: vec![2],
            ..record
        });
        let frame = with_elr.encode();
        assert!(frame.len() > old.len());
        assert_eq!(MetadataRecord::decode(&frame), Ok(with_elr));
        // A body cut inside the later fields, behind a good CRC, is refused.
        for length in old.len() + 1..frame.len() {
            let cut = framed(&frame[8..length]);
            assert!(MetadataRecord::decode(&cut).is_err(), "cut at {length}");
        }
    }

    #[test]
    fn partition_changes_carry_the_elr_only_when_set() {
        let plain = PartitionChangeRecord {
            topic_id: [6; 16],
            partition: 2,
            leader: Some(3),
            isr: Some(vec![3]),
            replicas: None,
            eligible_leader_replicas: None,
            last_known_elr: None,
        };
        let plain_frame = MetadataRecord::PartitionChange(plain.clone()).encode();
        // Topic id, partition, three flags, the leader and a one-broker ISR.
        assert_eq!(plain_frame.len(), HEADER_BYTES + 16 + 4 + 3 + 4 + 8);
        for (elr, last_known) in [
            (Some(vec![1, 2]), None),
            (None, Some(vec![])),
            (Some(vec![]), Some(vec![2])),
        ] {
            let change = MetadataRecord::PartitionChange(PartitionChangeRecord {
                eligible_leader_replicas: elr,
                last_known_elr: last_known,
                ..plain.clone()
            });
            assert_eq!(MetadataRecord::decode(&change.encode()), Ok(change));
        }
    }

    #[test]
    fn every_flipped_bit_is_caught() {
        let frame = sample().encode();
        for byte in 0..frame.len() {
            for bit in 0..8 {
                let mut damaged = frame.clone();
                damaged[byte] ^= 1 << bit;
                assert!(
                    MetadataRecord::decode(&damaged).is_err(),
                    "flip of bit {bit} in byte {byte} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn scram_credential_records_round_trip() {
        let upsert = MetadataRecord::UserScramCredential {
            name: "alice".into(),
            mechanism: 2,
            credential: ScramCredential {
                salt: vec![1, 2, 3],
                iterations: 4096,
                stored_key: vec![4; 64],
                server_key: vec![5; 64],
            },
        };
        let remove = MetadataRecord::RemoveUserScramCredential {
            name: "alice".into(),
            mechanism: 1,
        };
        for record in [upsert, remove] {
            let frame = record.encode();
            assert_eq!(MetadataRecord::decode(&frame), Ok(record));
            for length in 0..frame.len() {
                assert!(MetadataRecord::decode(&frame[..length]).is_err());
            }
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let frame = sample().encode();
        for length in 0..frame.len() {
            assert!(MetadataRecord::decode(&frame[..length]).is_err());
        }
        let mut longer = frame.clone();
        longer.push(0);
        assert!(matches!(
            MetadataRecord::decode(&longer),
            Err(DecodeError::LengthMismatch { .. })
        ));
    }

    /// A frame with a valid CRC but a bad body (as a future version or a
    /// bug would write) is refused with the precise reason.
    #[test]
    fn bad_bodies_behind_a_good_crc_are_refused() {
        assert_eq!(
            MetadataRecord::decode(&framed(&[2, RECORD_TYPE_REMOVE_TOPIC])),
            Err(DecodeError::UnsupportedVersion(2))
        );
        assert_eq!(
            MetadataRecord::decode(&framed(&[FORMAT_VERSION, 99])),
            Err(DecodeError::UnknownRecordType(99))
        );
        let mut trailing = vec![FORMAT_VERSION, RECORD_TYPE_REMOVE_TOPIC];
        trailing.extend_from_slice(&[0; 17]);
        assert_eq!(
            MetadataRecord::decode(&framed(&trailing)),
            Err(DecodeError::TrailingBytes(1))
        );
        // A list count far beyond the frame.
        let mut huge = vec![FORMAT_VERSION, RECORD_TYPE_TOPIC];
        huge.extend_from_slice(&1u32.to_be_bytes());
        huge.push(b't');
        huge.extend_from_slice(&[1; 16]);
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            MetadataRecord::decode(&framed(&huge)),
            Err(DecodeError::Truncated { .. })
        ));
        // A bad option flag and a string that is not UTF-8.
        let mut flag = vec![FORMAT_VERSION, RECORD_TYPE_CONFIG_CHANGE];
        for s in ["t", "k"] {
            flag.extend_from_slice(&1u32.to_be_bytes());
            flag.extend_from_slice(s.as_bytes());
        }
        flag.push(2);
        assert_eq!(
            MetadataRecord::decode(&framed(&flag)),
            Err(DecodeError::InvalidFlag(2))
        );
        let mut utf8 = vec![FORMAT_VERSION, RECORD_TYPE_CONFIG_CHANGE];
        utf8.extend_from_slice(&1u32.to_be_bytes());
        utf8.push(0xff);
        assert_eq!(
            MetadataRecord::decode(&framed(&utf8)),
            Err(DecodeError::InvalidUtf8)
        );
        // The same config key twice.
        let mut twice = vec![FORMAT_VERSION, RECORD_TYPE_TOPIC];
        twice.extend_from_slice(&1u32.to_be_bytes());
        twice.push(b't');
        twice.extend_from_slice(&[1; 16]);
        twice.extend_from_slice(&2u32.to_be_bytes());
        for _ in 0..2 {
            for s in ["k", "v"] {
                twice.extend_from_slice(&1u32.to_be_bytes());
                twice.extend_from_slice(s.as_bytes());
            }
        }
        assert_eq!(
            MetadataRecord::decode(&framed(&twice)),
            Err(DecodeError::DuplicateConfigKey("k".into()))
        );
    }
}

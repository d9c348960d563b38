//! A whole [`MetadataImage`] as bytes and back: what the metadata quorum
//! stores when it compacts its log, and what a lagging member installs
//! instead of replaying entries the leader no longer has.
//!
//! Why records rather than a dump of the image's maps: the image already
//! knows how to check a record before it applies it, so a snapshot that is
//! rebuilt by applying records gets every rule of [`MetadataImage::apply`]
//! for free — a damaged or hostile snapshot is refused with an error, it
//! cannot build an image that breaks an invariant. The records are the
//! ones [`MetadataImage::snapshot_records`] derives from the image (brokers
//! in epoch order, unfenced ones unfenced, then every topic with its
//! configs and partitions, each followed by its reassignment if one is in
//! progress, and its remote log segments in the state each has reached),
//! framed by the metadata [`super::codec`] (each with its own CRC). A
//! deleted topic whose remote objects are still to purge is rebuilt as the
//! log made it: the topic, stand-in partitions for its segments, the
//! segments, its removal (see [`MetadataImage::snapshot_records`]). What no record states — the offset each broker
//! registered at, the highest broker epoch ever handed out (its broker may
//! be gone), where the next producer-id block starts (a `ProducerIds`
//! record needs a registered broker), the last applied offset — sits in a
//! header before them.
//!
//! The bytes, integers big-endian:
//!
//! ```text
//! magic:   [u8; 4]  SNAPSHOT_MAGIC
//! version: u16      SNAPSHOT_FORMAT_VERSION
//! crc:     u32      CRC32C of everything after this field
//! last_applied_offset:          i64
//! last_broker_epoch:            i64
//! next_producer_id_block_start: i64
//! brokers: u32 count, then (broker_id: i32, registered_at_offset: i64),
//!          broker ids strictly increasing
//! records: u32 count, then one codec frame each (a frame starts with its
//!          own u32 length)
//! ```
//!
//! Size: a broker is ~60 bytes, a topic ~40 plus its configs, a partition
//! with three replicas ~60; 10 brokers and 10 000 partitions make ~600 KB,
//! written once per `snapshot_interval_entries` (1024) committed records.
//! A remote segment is ~100 bytes: 100 000 of them (100 TB in 1 GiB
//! segments) add ~10 MB.

use std::collections::BTreeMap;

use crate::placement::BrokerId;

use super::codec::DecodeError;
use super::error::MetadataError;
use super::image::MetadataImage;
use super::record::{MetadataRecord, PartitionRecord, NO_LEADER};

/// The first bytes of every snapshot ("rill metadata snapshot").
pub const SNAPSHOT_MAGIC: [u8; 4] = *b"RLMS";

/// The format version this build writes and reads.
pub const SNAPSHOT_FORMAT_VERSION: u16 = 1;

/// magic (4) + version (2) + crc (4).
const PREAMBLE_BYTES: usize = 10;

/// broker id (4) + registration offset (8).
const BROKER_ENTRY_BYTES: usize = 12;

/// The smallest codec frame: length, crc, version, type.
const FRAME_BYTES_MIN: usize = 10;

/// Why bytes are not a metadata snapshot.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Fewer bytes than a field needs.
    #[error(
        "truncated metadata snapshot: needed {needed} bytes at offset {at}, {available} available"
    )]
    Truncated {
        /// Position of the field.
        at: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// The bytes do not start with [`SNAPSHOT_MAGIC`].
    #[error("not a metadata snapshot: magic {0:02x?}")]
    NotASnapshot([u8; 4]),
    /// A format version this build does not read.
    #[error("unsupported metadata snapshot format version {0}")]
    UnsupportedVersion(u16),
    /// The CRC does not match: the bytes were damaged.
    #[error("metadata snapshot CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC in the snapshot.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// A record's frame does not decode.
    #[error("metadata snapshot record {index}: {source}")]
    Record {
        /// Position of the record in the snapshot.
        index: usize,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// A record the image refuses at its place in the snapshot.
    #[error("metadata snapshot record {index} refused: {source}")]
    Refused {
        /// Position of the record in the snapshot.
        index: usize,
        /// Why.
        #[source]
        source: MetadataError,
    },
    /// The header does not fit the image the records built.
    #[error("metadata snapshot header does not fit its records: {0}")]
    InvalidHeader(String),
    /// Bytes after the last record.
    #[error("{0} bytes after the end of the metadata snapshot")]
    TrailingBytes(usize),
}

/// A snapshot's header: what the records cannot state.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Header {
    last_applied_offset: i64,
    last_broker_epoch: i64,
    next_producer_id_block_start: i64,
    registered_at_offsets: BTreeMap<BrokerId, i64>,
}

impl MetadataImage {
    /// Records that rebuild this image when applied, in order, to an empty
    /// one: every broker registered in epoch order (the order the image
    /// accepts) and unfenced if it is, then each topic with its configs and
    /// its partitions `0..n` as they stand now (epochs included) and its
    /// remote log segments. Unfencing comes before any partition, so a led
    /// partition finds its ISR live. Deleted topics still to purge come
    /// before the live topics, so that a live topic that took the name of
    /// one does not collide with it.
    ///
    /// The records leave out what no record states; [`Self::encode_snapshot`]
    /// carries that beside them.
    pub fn snapshot_records(&self) -> Vec<MetadataRecord> {
        let mut brokers: Vec<_> = self.brokers().values().collect();
        brokers.sort_by_key(|broker| broker.broker_epoch);
        let mut records = Vec::with_capacity(2 * brokers.len() + self.topics().len());
        for broker in brokers {
            records.push(MetadataRecord::RegisterBroker {
                broker_id: broker.broker_id,
                incarnation_id: broker.incarnation_id,
                broker_epoch: broker.broker_epoch,
                listeners: broker.listeners.clone(),
                rack: broker.rack.clone(),
                features: broker.features.clone(),
            });
            if !broker.fenced {
                records.push(MetadataRecord::UnfenceBroker {
                    broker_id: broker.broker_id,
                    broker_epoch: broker.broker_epoch,
                });
            }
            if broker.cordoned {
                records.push(MetadataRecord::CordonBroker {
                    broker_id: broker.broker_id,
                    broker_epoch: broker.broker_epoch,
                    cordoned: true,
                });
            }
        }
        self.push_config_records(&mut records);
        for ((name, mechanism), credential) in self.scram_credentials() {
            records.push(MetadataRecord::UserScramCredential {
                name: name.clone(),
                mechanism: *mechanism,
                credential: credential.clone(),
            });
        }
        for acl in self.acls().values() {
            records.push(MetadataRecord::AccessControlEntry(acl.clone()));
        }
        self.push_topics_to_purge(&mut records);
        for topic in self.topics().values() {
            records.push(MetadataRecord::Topic {
                name: topic.name.clone(),
                topic_id: topic.topic_id,
                configs: topic.configs.clone(),
            });
            for (&partition, state) in &topic.partitions {
                records.push(MetadataRecord::Partition(PartitionRecord {
                    topic_id: topic.topic_id,
                    partition,
                    replicas: state.replicas.clone(),
                    isr: state.isr.clone(),
                    leader: state.leader,
                    leader_epoch: state.leader_epoch,
                    partition_epoch: state.partition_epoch,
                    eligible_leader_replicas: state.eligible_leader_replicas.clone(),
                    last_known_elr: state.last_known_elr.clone(),
                }));
                if state.is_reassigning() {
                    records.push(MetadataRecord::Reassignment {
                        topic_id: topic.topic_id,
                        partition,
                        adding: state.adding_replicas.clone(),
                        removing: state.removing_replicas.clone(),
                    });
                }
            }
            for &partition in topic.partitions.keys() {
                let segments = self.remote_segments(&topic.topic_id, partition);
                records.extend(segments.cloned().map(MetadataRecord::RemoteLogSegment));
            }
        }
        records
    }

    /// The deleted topics whose remote objects are still to purge, of
    /// [`Self::snapshot_records`]. No record states one by itself: each is
    /// rebuilt as the log made it, by creating the topic, its segments and
    /// removing it. The segments need partitions; the ones written are
    /// stand-ins (leaderless, on broker 0, which need not exist) that go
    /// with the topic, since a topic to purge keeps only its name and
    /// segments.
    fn push_topics_to_purge(&self, records: &mut Vec<MetadataRecord>) {
        for (topic_id, purge) in self.remote_topics_to_purge() {
            records.push(MetadataRecord::Topic {
                name: purge.name().to_owned(),
                topic_id,
                configs: BTreeMap::new(),
            });
            let partitions = purge.partitions().map(|(p, _)| p + 1).max().unwrap_or(0);
            for partition in 0..partitions {
                records.push(MetadataRecord::Partition(PartitionRecord {
                    topic_id,
                    partition,
                    replicas: vec![0],
                    isr: vec![0],
                    leader: NO_LEADER,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    eligible_leader_replicas: Vec::new(),
                    last_known_elr: Vec::new(),
                }));
            }
            let segments = purge.segments().cloned();
            records.extend(segments.map(MetadataRecord::RemoteLogSegment));
            records.push(MetadataRecord::RemoveTopic { topic_id });
        }
    }

    /// The dynamic broker configs, client-metrics subscriptions and client
    /// quotas of [`Self::snapshot_records`].
    fn push_config_records(&self, records: &mut Vec<MetadataRecord>) {
        for (broker, configs) in self.broker_configs() {
            for (key, value) in configs {
                records.push(MetadataRecord::BrokerConfigChange {
                    broker: broker.clone(),
                    key: key.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        for (name, configs) in self.client_metrics_configs() {
            for (key, value) in configs {
                records.push(MetadataRecord::ClientMetricsConfigChange {
                    name: name.clone(),
                    key: key.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        for (group, configs) in self.group_configs() {
            for (key, value) in configs {
                records.push(MetadataRecord::GroupConfigChange {
                    group: group.clone(),
                    key: key.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        for (name, &level) in self.finalized_features() {
            records.push(MetadataRecord::FeatureLevel {
                name: name.clone(),
                level,
            });
        }
        for (&node_id, (host, port)) in self.controllers() {
            records.push(MetadataRecord::RegisterController {
                node_id,
                host: host.clone(),
                port: *port,
            });
        }
        for (entity, quotas) in self.client_quotas() {
            for (key, value) in quotas {
                records.push(MetadataRecord::ClientQuota {
                    entity: entity.clone(),
                    key: key.clone(),
                    value: Some(value.clone()),
                });
            }
        }
    }

    /// The whole image as snapshot bytes (see the module doc).
    ///
    /// Reads the bytes back and compares before it returns, as the record
    /// codec does: an encoder bug stops here rather than on every member
    /// that installs the snapshot. Snapshots are taken once per
    /// `snapshot_interval_entries` records, so the second pass costs little.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let header = Header {
            last_applied_offset: self.last_applied_offset(),
            last_broker_epoch: self.last_broker_epoch(),
            next_producer_id_block_start: self.next_producer_id_block_start(),
            registered_at_offsets: self
                .brokers()
                .iter()
                .map(|(&broker_id, broker)| (broker_id, broker.registered_at_offset))
                .collect(),
        };
        let bytes = encode_parts(&header, &self.snapshot_records());
        assert_eq!(
            MetadataImage::decode_snapshot(&bytes).as_ref(),
            Ok(self),
            "a metadata snapshot reads back as its image"
        );
        bytes
    }

    /// The image that `bytes` (from [`Self::encode_snapshot`]) describe.
    /// Damaged or inconsistent bytes give an error, never a panic, and never
    /// an image that breaks an invariant.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<MetadataImage, SnapshotError> {
        let mut reader = Reader::new(bytes, 0, truncated);
        let magic = reader.array::<4>()?;
        if magic != SNAPSHOT_MAGIC {
            return Err(SnapshotError::NotASnapshot(magic));
        }
        let version = reader.u16()?;
        if version != SNAPSHOT_FORMAT_VERSION {
            return Err(SnapshotError::UnsupportedVersion(version));
        }
        let stored = reader.u32()?;
        let computed = crc_fast::crc32_iscsi(&bytes[PREAMBLE_BYTES..]);
        if stored != computed {
            return Err(SnapshotError::CrcMismatch { stored, computed });
        }
        let header = reader.header()?;
        let mut image = MetadataImage::new();
        let record_count = reader.count(FRAME_BYTES_MIN)?;
        for index in 0..record_count {
            let record = MetadataRecord::decode(reader.frame()?)
                .map_err(|source| SnapshotError::Record { index, source })?;
            // Stand-in offsets; the header puts the real ones back below.
            let offset = i64::try_from(index).unwrap_or(i64::MAX);
            image
                .apply(offset, &record)
                .map_err(|source| SnapshotError::Refused { index, source })?;
        }
        if reader.at != bytes.len() {
            return Err(SnapshotError::TrailingBytes(bytes.len() - reader.at));
        }
        image
            .restore_snapshot_state(
                header.last_applied_offset,
                header.last_broker_epoch,
                header.next_producer_id_block_start,
                &header.registered_at_offsets,
            )
            .map_err(SnapshotError::InvalidHeader)?;
        // Applying checked each record; this checks the whole, header
        // included (a failure is a bug in the checks above).
        image.check_invariants();
        Ok(image)
    }
}

/// The snapshot bytes of a header and records, whatever they say (tests
/// build inconsistent snapshots with it).
fn encode_parts(header: &Header, records: &[MetadataRecord]) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 + 64 * records.len());
    body.extend_from_slice(&header.last_applied_offset.to_be_bytes());
    body.extend_from_slice(&header.last_broker_epoch.to_be_bytes());
    body.extend_from_slice(&header.next_producer_id_block_start.to_be_bytes());
    put_count(&mut body, header.registered_at_offsets.len());
    for (broker_id, offset) in &header.registered_at_offsets {
        body.extend_from_slice(&broker_id.to_be_bytes());
        body.extend_from_slice(&offset.to_be_bytes());
    }
    put_count(&mut body, records.len());
    for record in records {
        body.extend_from_slice(&record.encode());
    }
    let mut bytes = Vec::with_capacity(PREAMBLE_BYTES + body.len());
    bytes.extend_from_slice(&SNAPSHOT_MAGIC);
    bytes.extend_from_slice(&SNAPSHOT_FORMAT_VERSION.to_be_bytes());
    bytes.extend_from_slice(&crc_fast::crc32_iscsi(&body).to_be_bytes());
    bytes.extend_from_slice(&body);
    assert_eq!(bytes.len(), PREAMBLE_BYTES + body.len());
    bytes
}

fn put_count(bytes: &mut Vec<u8>, count: usize) {
    let count = u32::try_from(count).unwrap_or(u32::MAX);
    assert!(count < u32::MAX, "a metadata snapshot list of 2^32 items");
    bytes.extend_from_slice(&count.to_be_bytes());
}

/// The snapshot's reader: truncation is a [`SnapshotError::Truncated`].
type Reader<'a> = super::reader::Reader<'a, SnapshotError>;

fn truncated(at: usize, needed: usize, available: usize) -> SnapshotError {
    SnapshotError::Truncated {
        at,
        needed,
        available,
    }
}

impl<'a> Reader<'a> {
    fn header(&mut self) -> Result<Header, SnapshotError> {
        let last_applied_offset = self.i64()?;
        let last_broker_epoch = self.i64()?;
        let next_producer_id_block_start = self.i64()?;
        let broker_count = self.count(BROKER_ENTRY_BYTES)?;
        let mut registered_at_offsets = BTreeMap::new();
        for _ in 0..broker_count {
            let broker_id = self.i32()?;
            let offset = self.i64()?;
            if registered_at_offsets
                .last_key_value()
                .is_some_and(|(&last, _)| last >= broker_id)
            {
                return Err(SnapshotError::InvalidHeader(format!(
                    "broker id {broker_id} out of order"
                )));
            }
            registered_at_offsets.insert(broker_id, offset);
        }
        Ok(Header {
            last_applied_offset,
            last_broker_epoch,
            next_producer_id_block_start,
            registered_at_offsets,
        })
    }

    /// One codec frame: its `u32` length and that many bytes after it.
    fn frame(&mut self) -> Result<&'a [u8], SnapshotError> {
        let start = self.at;
        let length = usize::try_from(self.u32()?).unwrap_or(usize::MAX);
        self.take(length)?;
        Ok(&self.buf[start..self.at])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::record::Endpoint;

    /// Two brokers (one fenced, one gone after taking a higher epoch),
    /// a topic with configs and a led and a leaderless partition, a
    /// producer-id block taken.
    fn sample_image() -> MetadataImage {
        let mut image = MetadataImage::new();
        let register = |broker_id, broker_epoch| MetadataRecord::RegisterBroker {
            broker_id,
            incarnation_id: [broker_id as u8 + 1; 16],
            broker_epoch,
            listeners: vec![Endpoint {
                name: "PLAINTEXT".to_owned(),
                host: format!("host-{broker_id}"),
                port: 9092,
            }],
            rack: (broker_id == 1).then(|| "rack-a".to_owned()),
            features: crate::metadata::features::supported_by_this_binary(),
        };
        let topic_id = [7; 16];
        let records = vec![
            register(1, 0),
            register(2, 1),
            register(3, 2),
            MetadataRecord::UnfenceBroker {
                broker_id: 1,
                broker_epoch: 0,
            },
            MetadataRecord::UnregisterBroker {
                broker_id: 3,
                broker_epoch: 2,
            },
            MetadataRecord::Topic {
                name: "orders".to_owned(),
                topic_id,
                configs: BTreeMap::from([("retention.ms".to_owned(), "1000".to_owned())]),
            },
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition: 0,
                replicas: vec![1, 2],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                eligible_leader_replicas: Vec::new(),
                last_known_elr: Vec::new(),
            }),
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition: 1,
                replicas: vec![2, 3],
                isr: vec![2, 3],
                leader: crate::metadata::NO_LEADER,
                leader_epoch: 0,
                partition_epoch: 0,
                eligible_leader_replicas: Vec::new(),
                last_known_elr: Vec::new(),
            }),
            MetadataRecord::PartitionChange(crate::metadata::PartitionChangeRecord {
                topic_id,
                partition: 0,
                leader: Some(1),
                isr: None,
                replicas: None,
                eligible_leader_replicas: None,
                last_known_elr: None,
            }),
            MetadataRecord::ProducerIds {
                broker_id: 1,
                broker_epoch: 0,
                next_block_start: 1000,
            },
            MetadataRecord::ConfigChange {
                topic: "orders".to_owned(),
                key: "cleanup.policy".to_owned(),
                value: Some("compact".to_owned()),
            },
            MetadataRecord::UserScramCredential {
                name: "alice".to_owned(),
                mechanism: 2,
                credential: crate::metadata::ScramCredential {
                    salt: vec![1; 16],
                    iterations: 4096,
                    stored_key: vec![2; 64],
                    server_key: vec![3; 64],
                },
            },
            MetadataRecord::AccessControlEntry(crate::metadata::AclRecord {
                id: [5; 16],
                resource_type: 2,
                resource_name: "orders".to_owned(),
                pattern_type: 3,
                principal: "User:alice".to_owned(),
                host: "*".to_owned(),
                operation: 3,
                permission_type: 3,
            }),
        ];
        for (offset, record) in (3..).step_by(2).zip(&records) {
            assert_eq!(image.apply(offset, record), Ok(()), "{record:?}");
        }
        image
    }

    #[test]
    fn scram_credentials_are_kept_replaced_and_removed() {
        let mut image = sample_image();
        let offset = image.last_applied_offset();
        assert_eq!(
            image.scram_credential("alice", 2).map(|c| c.iterations),
            Some(4096)
        );
        let remove = |mechanism| MetadataRecord::RemoveUserScramCredential {
            name: "alice".to_owned(),
            mechanism,
        };
        // Only an existing credential of a known mechanism can go.
        assert!(image.apply(offset + 1, &remove(1)).is_err());
        assert!(image.apply(offset + 1, &remove(7)).is_err());
        assert_eq!(image.apply(offset + 1, &remove(2)), Ok(()));
        assert!(image.scram_credential("alice", 2).is_none());
        assert!(image.scram_credentials().is_empty());
    }

    #[test]
    fn an_image_survives_its_snapshot() {
        let image = sample_image();
        assert_eq!(image.scram_credentials().len(), 1);
        assert_eq!(image.last_broker_epoch(), 2);
        assert!(image.broker(3).is_none());
        assert_eq!(image.acls().len(), 1);
        let bytes = image.encode_snapshot();
        assert_eq!(&bytes[..4], &SNAPSHOT_MAGIC);
        let restored = MetadataImage::decode_snapshot(&bytes);
        assert_eq!(restored.as_ref(), Ok(&image));
        let empty = MetadataImage::new();
        assert_eq!(
            MetadataImage::decode_snapshot(&empty.encode_snapshot()),
            Ok(empty)
        );
    }

    /// The sample image with remote log segments: topic `tiered` with a
    /// segment in each state that stays in the image, and topic `gone`,
    /// deleted with segments on its partition 2 (so to purge), whose name
    /// a new topic took.
    fn remote_image() -> MetadataImage {
        use crate::metadata::{RemoteSegmentRecord, RemoteSegmentState};
        let mut image = sample_image();
        let partition = |topic_id, partition, leader| {
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition,
                replicas: vec![1, 2],
                isr: vec![1],
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
                eligible_leader_replicas: Vec::new(),
                last_known_elr: Vec::new(),
            })
        };
        let segment = |topic_id, partition, n: u8, base: i64| {
            MetadataRecord::RemoteLogSegment(RemoteSegmentRecord {
                topic_id,
                partition,
                segment_id: [n; 16],
                base_offset: base,
                end_offset: base + 99,
                max_timestamp_ms: 5,
                size_bytes: 1000,
                broker_id: 1,
                leader_epoch: 0,
                segment_leader_epochs: vec![(0, base)],
                state: RemoteSegmentState::CopySegmentStarted,
            })
        };
        let to = |topic_id, n: u8, state| MetadataRecord::RemoteLogSegmentState {
            topic_id,
            partition: 0,
            segment_id: [n; 16],
            state,
        };
        let topic = |name: &str, topic_id| MetadataRecord::Topic {
            name: name.to_owned(),
            topic_id,
            configs: BTreeMap::from([("remote.storage.enable".to_owned(), "true".to_owned())]),
        };
        let (tiered, gone, again) = ([11; 16], [12; 16], [13; 16]);
        let records = vec![
            topic("tiered", tiered),
            partition(tiered, 0, 1),
            partition(tiered, 1, 1),
            segment(tiered, 0, 1, 0),
            segment(tiered, 0, 2, 100),
            segment(tiered, 0, 3, 200),
            segment(tiered, 1, 4, 0),
            to(tiered, 1, RemoteSegmentState::CopySegmentFinished),
            to(tiered, 2, RemoteSegmentState::CopySegmentFinished),
            to(tiered, 1, RemoteSegmentState::DeleteSegmentStarted),
            topic("gone", gone),
            partition(gone, 0, 1),
            partition(gone, 1, 1),
            partition(gone, 2, 1),
            segment(gone, 2, 5, 0),
            segment(gone, 2, 6, 100),
            MetadataRecord::RemoveTopic { topic_id: gone },
            topic("gone", again),
            partition(again, 0, 1),
        ];
        let start = image.last_applied_offset() + 1;
        for (offset, record) in (start..).zip(&records) {
            assert_eq!(image.apply(offset, record), Ok(()), "{record:?}");
        }
        image.check_invariants();
        image
    }

    #[test]
    fn remote_segments_and_topics_to_purge_survive_a_snapshot() {
        let image = remote_image();
        let tiered = [11; 16];
        let states: Vec<_> = image.remote_segments(&tiered, 0).map(|s| s.state).collect();
        assert_eq!(states.len(), 3);
        assert_eq!(image.remote_log_start_offset(&tiered, 0), Some(100));
        let to_purge: Vec<_> = image.remote_topics_to_purge().collect();
        assert_eq!(to_purge.len(), 1);
        assert_eq!((to_purge[0].0, to_purge[0].1.name()), ([12; 16], "gone"));
        assert_eq!(to_purge[0].1.segments().count(), 2);

        let bytes = image.encode_snapshot();
        let restored = MetadataImage::decode_snapshot(&bytes);
        assert_eq!(restored.as_ref(), Ok(&image));
        let mut restored = restored.expect("restored");
        assert_eq!(restored.encode_snapshot(), bytes);
        // The restored image goes on as the original would.
        let purged = MetadataRecord::RemoteTopicPurged { topic_id: [12; 16] };
        let mut original = image.clone();
        let offset = image.last_applied_offset() + 1;
        assert_eq!(original.apply(offset, &purged), Ok(()));
        assert_eq!(restored.apply(offset, &purged), Ok(()));
        assert_eq!(restored, original);
        assert_eq!(restored.remote_topics_to_purge().count(), 0);
    }

    #[test]
    fn a_snapshot_rebuilds_topics_to_purge_before_the_live_topics() {
        let records = remote_image().snapshot_records();
        let position = |wanted: &MetadataRecord| records.iter().position(|r| r == wanted);
        let removal = position(&MetadataRecord::RemoveTopic { topic_id: [12; 16] });
        let removal = removal.expect("the topic to purge is removed");
        // Stand-in partitions 0..=2 for the segments of partition 2.
        let stand_ins = records[..removal]
            .iter()
            .filter(|r| matches!(r, MetadataRecord::Partition(p) if p.topic_id == [12; 16]))
            .count();
        assert_eq!(stand_ins, 3);
        let live = records.iter().position(
            |r| matches!(r, MetadataRecord::Topic { topic_id, .. } if *topic_id != [12; 16]),
        );
        assert!(live > Some(removal), "{records:?}");
    }

    #[test]
    fn every_damaged_byte_and_every_cut_is_an_error() {
        for image in [sample_image(), remote_image()] {
            every_damage_is_an_error(&image.encode_snapshot());
        }
    }

    fn every_damage_is_an_error(bytes: &[u8]) {
        for at in 0..bytes.len() {
            let mut damaged = bytes.to_vec();
            damaged[at] ^= 0x5a;
            assert!(
                MetadataImage::decode_snapshot(&damaged).is_err(),
                "byte {at}"
            );
            assert!(
                MetadataImage::decode_snapshot(&bytes[..at]).is_err(),
                "cut at {at}"
            );
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(MetadataImage::decode_snapshot(&longer).is_err());
    }

    fn header_of(image: &MetadataImage) -> Header {
        Header {
            last_applied_offset: image.last_applied_offset(),
            last_broker_epoch: image.last_broker_epoch(),
            next_producer_id_block_start: image.next_producer_id_block_start(),
            registered_at_offsets: image
                .brokers()
                .iter()
                .map(|(&id, broker)| (id, broker.registered_at_offset))
                .collect(),
        }
    }

    #[test]
    fn a_well_framed_snapshot_that_breaks_the_rules_is_refused() {
        let image = sample_image();
        let header = header_of(&image);
        let records = image.snapshot_records();
        let decode = |header: &Header, records: &[MetadataRecord]| {
            MetadataImage::decode_snapshot(&encode_parts(header, records))
        };
        assert_eq!(decode(&header, &records).as_ref(), Ok(&image));

        // Partitions before their brokers are unfenced: the led one refuses.
        let mut reordered = records.clone();
        let unfence = reordered
            .iter()
            .position(|record| matches!(record, MetadataRecord::UnfenceBroker { .. }))
            .expect("an unfenced broker");
        let unfence = reordered.remove(unfence);
        reordered.push(unfence);
        assert!(matches!(
            decode(&header, &reordered),
            Err(SnapshotError::Refused { .. })
        ));

        let broken_headers = [
            Header {
                last_applied_offset: -2,
                ..header.clone()
            },
            Header {
                last_broker_epoch: 0,
                ..header.clone()
            },
            Header {
                next_producer_id_block_start: -1,
                ..header.clone()
            },
            Header {
                registered_at_offsets: BTreeMap::new(),
                ..header.clone()
            },
            Header {
                registered_at_offsets: header
                    .registered_at_offsets
                    .keys()
                    .map(|&id| (id, header.last_applied_offset + 1))
                    .collect(),
                ..header.clone()
            },
        ];
        for broken in &broken_headers {
            assert!(
                matches!(
                    decode(broken, &records),
                    Err(SnapshotError::InvalidHeader(_))
                ),
                "{broken:?}"
            );
        }
    }

    #[test]
    fn foreign_bytes_are_not_a_snapshot() {
        assert!(matches!(
            MetadataImage::decode_snapshot(b"nope, not this"),
            Err(SnapshotError::NotASnapshot(_))
        ));
        let mut bytes = MetadataImage::new().encode_snapshot();
        bytes[5] = 9;
        assert_eq!(
            MetadataImage::decode_snapshot(&bytes),
            Err(SnapshotError::UnsupportedVersion(9))
        );
        assert!(matches!(
            MetadataImage::decode_snapshot(&[]),
            Err(SnapshotError::Truncated { .. })
        ));
    }
}

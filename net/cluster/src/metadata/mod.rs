//! The cluster metadata state machine (KRaft-like): what every node knows
//! about the cluster, as the result of applying one replicated log.
//!
//! - The log's entries are [`MetadataRecord`]s (broker registrations and
//!   fencing, topics, partitions with leader, epochs and ISR, topic configs,
//!   producer-id blocks), encoded by [`codec`] into CRC-checked frames.
//! - [`MetadataImage`] is the state after applying the committed records in
//!   order; equal logs give equal images on every node.
//! - [`Controller`] holds the active controller's decisions (register,
//!   heartbeat, fence, unfence, create/delete topics and partitions,
//!   AlterPartition, controlled shutdown, producer ids, ElectLeaders and the
//!   preferred-leader rebalance, eligible leader replicas, remote log
//!   segments):
//!   pure functions of the image, a [`ControllerConfig`] and `now_ms` that
//!   return records to propose — nothing changes until they are committed
//!   and applied.
//! - [`remote_segments`] holds tiered storage's remote log metadata
//!   (KIP-405) in the image: each partition's segments in remote storage
//!   and their copy/delete state, and deleted topics whose remote objects
//!   are still to purge — in the quorum instead of Kafka's
//!   `__remote_log_metadata` topic.
//! - [`features`] says which feature levels (KIP-584) this binary
//!   supports and at which level each runs in the cluster.
//! - [`BrokerHeartbeats`] is the controller's in-memory record of when each
//!   broker last heartbeated; it is deliberately not replicated.
//! - [`MetadataImage::encode_snapshot`] and
//!   [`MetadataImage::decode_snapshot`] turn a whole image into bytes and
//!   back (the records that rebuild it, plus a header), for the quorum's
//!   log compaction.
//! - [`MetadataMachine`] is the image as the quorum's
//!   [`crate::quorum::StateMachine`]: it applies committed entries (skipping,
//!   deterministically, any that do not decode or are refused), snapshots
//!   and restores, and tells the runtime what changed.
//!
//! Nothing here does I/O: the quorum ([`crate::quorum`]) replicates the
//! bytes, a runtime in `rill-runtimes` steps the controller and applies records
//! on every shard.
//!
//! Files: `record.rs` (the records), `codec.rs` (bytes), `image.rs` (apply
//! and invariants), `remote_segments.rs` (the image's remote log metadata
//! and its accessors), `snapshot.rs` (an image as bytes), `machine.rs` (the
//! quorum's state machine), `heartbeats.rs`, `error.rs`, `controller/`
//! (decisions, one file per area), `tests.rs` (property tests over random
//! decision sequences).

pub mod codec;
pub mod controller;
pub mod error;
pub mod features;
pub mod heartbeats;
pub mod image;
mod image_remote;
pub mod machine;
mod reader;
pub mod record;
pub mod remote_segments;
pub mod snapshot;

#[cfg(test)]
mod tests;

pub use codec::DecodeError;
pub use controller::{
    ongoing_reassignments, AlterPartitionOutcome, AlterPartitionRequest, BrokerHeartbeatRequest,
    BrokerRegistrationRequest, Controller, ControllerConfig, CreateTopicRequest,
    ElectLeadersOutcome, ElectionType, FeatureUpdate, HeartbeatOutcome, OngoingReassignment,
    PartitionElection, RegisterOutcome, RemoteCopyRequest, RemoteSegmentTransition,
    TopicAssignment, UpgradeType,
};
pub use error::MetadataError;
pub use heartbeats::{BrokerHeartbeats, DEFAULT_BROKER_SESSION_TIMEOUT_MS};
pub use image::{
    BrokerRegistration, MetadataImage, PartitionState, QuotaEntity, TopicImage, QUOTA_ENTITY_TYPES,
    REMOTE_STORAGE_ENABLE,
};
pub use machine::{MetadataMachine, CHANGES_MAX};
pub use record::{
    AclRecord, Endpoint, MetadataRecord, PartitionChangeRecord, PartitionRecord,
    RemoteSegmentRecord, RemoteSegmentState, ScramCredential, SupportedFeature, NO_LEADER,
    SCRAM_MECHANISMS,
};
pub use remote_segments::{
    RemoteLogImage, RemotePartitionSegments, RemoteSegment, RemoteTopicToPurge,
};
pub use snapshot::{SnapshotError, SNAPSHOT_FORMAT_VERSION, SNAPSHOT_MAGIC};

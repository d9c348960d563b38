//! [`MetadataError`]: why a controller decision was refused, or why a record
//! could not be applied, each with the Kafka error code a client expects.
//!
//! Two kinds share the enum because the controller proposes records it has
//! validated against the same rules that [`super::MetadataImage::apply`]
//! checks: a request error (unknown topic, stale epoch) is an answer to a
//! client, while [`MetadataError::InvalidRecord`] from `apply` means a
//! controller proposed something it should not have (a bug to report, but
//! not one that may corrupt the image: a refused record changes nothing).

use engine::types::TopicId;
use engine::ErrorCode;

use crate::placement::{BrokerId, PlacementError};

use super::record::RemoteSegmentState;

/// A refused decision or record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// Replica placement or an explicit assignment was refused.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// The broker is not registered (Kafka's `BROKER_ID_NOT_REGISTERED`, 102).
    #[error("broker {broker_id} is not registered")]
    BrokerNotRegistered {
        /// The broker.
        broker_id: BrokerId,
    },
    /// A request from an old incarnation of a broker (Kafka's
    /// `STALE_BROKER_EPOCH`, 77).
    #[error("broker {broker_id} epoch {broker_epoch} is not its current epoch {current_epoch}")]
    StaleBrokerEpoch {
        /// The broker.
        broker_id: BrokerId,
        /// The epoch in the request.
        broker_epoch: i64,
        /// The registered epoch.
        current_epoch: i64,
    },
    /// Another incarnation of the broker id is alive (Kafka's
    /// `DUPLICATE_BROKER_REGISTRATION`, 101).
    #[error("broker {broker_id} is already registered by a live incarnation")]
    DuplicateBrokerRegistration {
        /// The broker.
        broker_id: BrokerId,
    },
    /// A registering broker cannot run a feature at the cluster's level
    /// (Kafka's `UNSUPPORTED_VERSION` to a BrokerRegistration).
    #[error("broker {broker_id} does not support {feature} at the cluster's level {level}")]
    UnsupportedFeatureLevel {
        /// The broker.
        broker_id: BrokerId,
        /// The feature.
        feature: String,
        /// The cluster's finalized level.
        level: i16,
    },
    /// A change that needs a feature at a higher level than the cluster
    /// runs (a record older brokers of a rolling upgrade could not read;
    /// Kafka's `UNSUPPORTED_VERSION`).
    #[error("{what} needs {feature} {needed}; the cluster runs {level} (a broker still runs an older binary, or UpdateFeatures lowered it)")]
    FeatureLevelTooLow {
        /// What was asked.
        what: &'static str,
        /// The feature.
        feature: &'static str,
        /// The level it needs.
        needed: i16,
        /// The level the cluster runs.
        level: i16,
    },
    /// An UpdateFeatures change that cannot be made (Kafka's
    /// `INVALID_UPDATE_VERSION`, 95).
    #[error("{reason}")]
    InvalidFeatureUpdate {
        /// Why.
        reason: String,
    },
    /// A new replica for the ISR is fenced, unregistered, or not a replica
    /// (Kafka's `INELIGIBLE_REPLICA`, 107).
    #[error("broker {broker_id} cannot join the ISR of {topic_id:?}-{partition}")]
    IneligibleReplica {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// The broker.
        broker_id: BrokerId,
    },
    /// The topic name is not legal (`INVALID_TOPIC_EXCEPTION`).
    #[error("invalid topic name {name:?}")]
    InvalidTopicName {
        /// The name.
        name: String,
    },
    /// The name differs from an existing topic's only by `.` against `_`
    /// (`INVALID_TOPIC_EXCEPTION`): both map to the same metric names.
    #[error("topic {name:?} collides with existing topic {existing:?}")]
    TopicNameCollision {
        /// The name asked for.
        name: String,
        /// The existing topic.
        existing: String,
    },
    /// The topic exists already (`TOPIC_ALREADY_EXISTS`).
    #[error("topic {name:?} already exists")]
    TopicAlreadyExists {
        /// The name.
        name: String,
    },
    /// The topic name is unknown (`UNKNOWN_TOPIC_OR_PARTITION`).
    #[error("unknown topic {name:?}")]
    UnknownTopic {
        /// The name.
        name: String,
    },
    /// The topic id is unknown (`UNKNOWN_TOPIC_ID`).
    #[error("unknown topic id {topic_id:?}")]
    UnknownTopicId {
        /// The id.
        topic_id: TopicId,
    },
    /// The partition does not exist (`UNKNOWN_TOPIC_OR_PARTITION`).
    #[error("unknown partition {topic_id:?}-{partition}")]
    UnknownPartition {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
    },
    /// CreatePartitions asked for no more partitions than exist
    /// (`INVALID_PARTITIONS`).
    #[error("topic {name:?} has {current} partitions; {requested} would not be an increase")]
    PartitionCountNotIncreasing {
        /// The topic.
        name: String,
        /// Its partition count.
        current: i32,
        /// The count asked for.
        requested: i32,
    },
    /// No replica of a new partition is alive to lead it
    /// (`INVALID_REPLICA_ASSIGNMENT`, as KRaft answers).
    #[error("every replica of new partition {partition} is fenced: {replicas:?}")]
    NoLiveReplica {
        /// The partition.
        partition: i32,
        /// Its replicas.
        replicas: Vec<BrokerId>,
    },
    /// AlterPartition or a remote log request with a leader epoch that is
    /// not the partition's, or a copy finished in another epoch than it
    /// started in (Kafka's `FENCED_LEADER_EPOCH`, 74).
    #[error("leader epoch {leader_epoch} of {topic_id:?}-{partition} is not the current {current_leader_epoch}")]
    FencedLeaderEpoch {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// The epoch in the request.
        leader_epoch: i32,
        /// The partition's epoch.
        current_leader_epoch: i32,
    },
    /// AlterPartition with a partition epoch that is not the partition's
    /// (`INVALID_UPDATE_VERSION`).
    #[error("partition epoch {partition_epoch} of {topic_id:?}-{partition} is not the current {current_partition_epoch}")]
    InvalidUpdateVersion {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// The epoch in the request.
        partition_epoch: i32,
        /// The partition's epoch.
        current_partition_epoch: i32,
    },
    /// A malformed request: AlterPartition from a broker that does not lead
    /// the partition, or an ISR without its leader (`INVALID_REQUEST`).
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What was wrong.
        reason: String,
    },
    /// A reassignment's target replicas are unusable
    /// (`INVALID_REPLICA_ASSIGNMENT`).
    #[error("invalid replica assignment: {reason}")]
    InvalidReplicaAssignment {
        /// What was wrong.
        reason: String,
    },
    /// A reassignment cancelled where none is in progress
    /// (`NO_REASSIGNMENT_IN_PROGRESS`).
    #[error("no reassignment in progress for {topic}-{partition}")]
    NoReassignmentInProgress {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A topic config the metadata layer refuses (`INVALID_CONFIG`).
    #[error("invalid config {key}={value:?}: {reason}")]
    InvalidConfig {
        /// Config name.
        key: String,
        /// Offered value.
        value: Option<String>,
        /// Why it was refused.
        reason: String,
    },
    /// A remote log request from a broker that does not lead the
    /// partition at the leader epoch it gave (Kafka's
    /// `NOT_LEADER_OR_FOLLOWER`, 6).
    #[error("broker {broker_id} does not lead {topic_id:?}-{partition} (its leader is {leader})")]
    NotLeaderOrFollower {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// The broker that asked.
        broker_id: BrokerId,
        /// The partition's leader (or `NO_LEADER`).
        leader: BrokerId,
    },
    /// A remote segment copy on a topic without `remote.storage.enable=true`
    /// (`INVALID_REQUEST`).
    #[error("topic {topic:?} does not have remote.storage.enable=true: its segments are not copied to remote storage")]
    RemoteStorageNotEnabled {
        /// The topic.
        topic: String,
    },
    /// A copy that would not extend the remote log contiguously: it must
    /// start at or below the remote log end + 1 and end above it
    /// (`INVALID_REQUEST`; the uploader's view is stale, or it skipped a
    /// segment).
    #[error("remote segment {base_offset}..={end_offset} of {topic_id:?}-{partition} does not extend the remote log (which ends at {remote_log_end_offset:?}) contiguously")]
    RemoteSegmentNotExtending {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// The segment's first offset.
        base_offset: i64,
        /// The segment's last offset.
        end_offset: i64,
        /// The partition's remote log end offset (`None`: nothing uploaded).
        remote_log_end_offset: Option<i64>,
    },
    /// Finishing or deleting a remote segment would leave a gap between
    /// the finished segments (`INVALID_REQUEST`): reads would find no
    /// segment for offsets inside the remote log.
    #[error("{change} remote segment {base_offset}..={end_offset} of {topic_id:?}-{partition} would leave a gap in the remote log {remote_log:?}")]
    RemoteLogGap {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// What was asked: `finishing` or `deleting`.
        change: &'static str,
        /// The segment's first offset.
        base_offset: i64,
        /// The segment's last offset.
        end_offset: i64,
        /// The offsets the finished segments cover now.
        remote_log: Option<(i64, i64)>,
    },
    /// A copy that names a segment id the partition has for another
    /// segment (`INVALID_REQUEST`): ids are drawn at random per upload.
    #[error("remote segment id {segment_id:02x?} of {topic_id:?}-{partition} is taken by another segment")]
    RemoteSegmentIdInUse {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// The id.
        segment_id: [u8; 16],
    },
    /// A transition of a segment the partition does not have (Kafka's
    /// `RESOURCE_NOT_FOUND`, 91).
    #[error("unknown remote segment {segment_id:02x?} of {topic_id:?}-{partition}")]
    UnknownRemoteSegment {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// The id.
        segment_id: [u8; 16],
    },
    /// A transition KIP-405 does not allow, such as a finished deletion
    /// back to a copy (`INVALID_REQUEST`).
    #[error("remote segment {segment_id:02x?} cannot go from {from:?} to {to:?}")]
    InvalidRemoteSegmentTransition {
        /// The segment.
        segment_id: [u8; 16],
        /// Its state.
        from: RemoteSegmentState,
        /// The state asked for.
        to: RemoteSegmentState,
    },
    /// RemoteTopicPurged for a topic that is not deleted (`INVALID_REQUEST`):
    /// its remote data is still the live topic's.
    #[error("topic {topic_id:?} is not deleted: its remote data cannot be purged")]
    RemoteTopicNotDeleted {
        /// The topic.
        topic_id: TopicId,
    },
    /// Every producer id has been handed out.
    #[error("producer ids exhausted at {next_block_start}")]
    ProducerIdsExhausted {
        /// Where the next block would start.
        next_block_start: i64,
    },
    /// `apply` refused a record that breaks the image's rules; nothing was
    /// changed.
    #[error("invalid {kind} record at offset {offset}: {reason}")]
    InvalidRecord {
        /// The record type.
        kind: &'static str,
        /// Its log offset.
        offset: i64,
        /// The rule it breaks.
        reason: String,
    },
}

impl MetadataError {
    /// The Kafka error code to answer with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            MetadataError::Placement(error) => error.error_code(),
            MetadataError::BrokerNotRegistered { .. } => ErrorCode::BrokerIdNotRegistered,
            MetadataError::StaleBrokerEpoch { .. } => ErrorCode::StaleBrokerEpoch,
            MetadataError::DuplicateBrokerRegistration { .. } => {
                ErrorCode::DuplicateBrokerRegistration
            }
            MetadataError::IneligibleReplica { .. } => ErrorCode::IneligibleReplica,
            MetadataError::UnsupportedFeatureLevel { .. }
            | MetadataError::FeatureLevelTooLow { .. } => ErrorCode::UnsupportedVersion,
            MetadataError::InvalidFeatureUpdate { .. } => ErrorCode::InvalidUpdateVersion,
            MetadataError::FencedLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
            MetadataError::NotLeaderOrFollower { .. } => ErrorCode::NotLeaderOrFollower,
            MetadataError::UnknownRemoteSegment { .. } => ErrorCode::ResourceNotFound,
            MetadataError::RemoteStorageNotEnabled { .. }
            | MetadataError::RemoteSegmentNotExtending { .. }
            | MetadataError::RemoteLogGap { .. }
            | MetadataError::RemoteSegmentIdInUse { .. }
            | MetadataError::InvalidRemoteSegmentTransition { .. }
            | MetadataError::RemoteTopicNotDeleted { .. } => ErrorCode::InvalidRequest,
            MetadataError::InvalidTopicName { .. } | MetadataError::TopicNameCollision { .. } => {
                ErrorCode::InvalidTopicException
            }
            MetadataError::TopicAlreadyExists { .. } => ErrorCode::TopicAlreadyExists,
            MetadataError::UnknownTopic { .. } | MetadataError::UnknownPartition { .. } => {
                ErrorCode::UnknownTopicOrPartition
            }
            MetadataError::UnknownTopicId { .. } => ErrorCode::UnknownTopicId,
            MetadataError::PartitionCountNotIncreasing { .. } => ErrorCode::InvalidPartitions,
            MetadataError::NoLiveReplica { .. } => ErrorCode::InvalidReplicaAssignment,
            MetadataError::InvalidUpdateVersion { .. } => ErrorCode::InvalidUpdateVersion,
            MetadataError::InvalidRequest { .. } => ErrorCode::InvalidRequest,
            MetadataError::InvalidReplicaAssignment { .. } => ErrorCode::InvalidReplicaAssignment,
            MetadataError::NoReassignmentInProgress { .. } => ErrorCode::NoReassignmentInProgress,
            MetadataError::InvalidConfig { .. } => ErrorCode::InvalidConfig,
            MetadataError::ProducerIdsExhausted { .. } | MetadataError::InvalidRecord { .. } => {
                ErrorCode::UnknownServerError
            }
        }
    }
}

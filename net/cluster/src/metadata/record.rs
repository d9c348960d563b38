//! [`MetadataRecord`]: the entries of the replicated metadata log.
//!
//! They are KRaft's records (`RegisterBrokerRecord`, `FenceBrokerRecord`,
//! `TopicRecord`, `PartitionRecord`, `PartitionChangeRecord`,
//! `ProducerIdsRecord`, …), trimmed to what rill uses, plus tiered
//! storage's remote log metadata (KIP-405's `RemoteLogSegmentMetadata`
//! records, which Kafka keeps in its `__remote_log_metadata` topic and rill
//! keeps here; see [`super::remote_segments`]). A record states a
//! fact that the controller decided; every node applies the committed ones
//! in log order ([`super::MetadataImage::apply`]) and so holds the same
//! image. The byte format is in [`super::codec`].

use std::collections::BTreeMap;

use engine::types::TopicId;

use crate::placement::BrokerId;

/// "No leader": the partition cannot be produced to or fetched from until
/// one of its ISR comes back (or an unclean election picks a replica).
pub const NO_LEADER: BrokerId = -1;

/// A feature a broker's binary supports, with the lowest and highest
/// level it can run at (Kafka's `BrokerRegistrationRecord.features`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SupportedFeature {
    /// The feature's name.
    pub name: String,
    /// Lowest supported level.
    pub min_level: i16,
    /// Highest supported level.
    pub max_level: i16,
}

/// One listener a broker serves clients on (Kafka's `listeners` entry).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// Listener name, e.g. `PLAINTEXT`.
    pub name: String,
    /// Host clients connect to.
    pub host: String,
    /// Port clients connect to.
    pub port: u16,
}

/// A partition as created (KRaft's `PartitionRecord`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRecord {
    /// The topic.
    pub topic_id: TopicId,
    /// Partition number; a topic's partitions are created as 0, 1, 2, …
    pub partition: i32,
    /// Replica brokers, the first being the preferred leader.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas: a non-empty subset of `replicas`.
    pub isr: Vec<BrokerId>,
    /// Leader, a member of `isr`, or [`NO_LEADER`].
    pub leader: BrokerId,
    /// Leader epoch (0 at creation).
    pub leader_epoch: i32,
    /// Partition epoch, bumped by every change (0 at creation).
    pub partition_epoch: i32,
    /// Eligible leader replicas (KIP-966): replicas out of the ISR that
    /// still hold every committed record, so they may lead cleanly when no
    /// ISR member can. Empty at creation (and in logs written before rill
    /// kept them).
    pub eligible_leader_replicas: Vec<BrokerId>,
    /// KIP-966's `LastKnownElr` (Kafka 4.1's use): the last leader of a
    /// partition that has none, for an operator deciding an unclean
    /// election. Empty at creation.
    pub last_known_elr: Vec<BrokerId>,
}

/// A change to an existing partition (KRaft's `PartitionChangeRecord`).
///
/// `None` fields stay as they are. Applying it always bumps the partition
/// epoch, and bumps the leader epoch when `leader` is set (even to the same
/// broker: that is how a controller fences a leader's in-flight requests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionChangeRecord {
    /// The topic.
    pub topic_id: TopicId,
    /// Partition number.
    pub partition: i32,
    /// The new leader (a member of the new ISR, or [`NO_LEADER`]).
    pub leader: Option<BrokerId>,
    /// The new ISR.
    pub isr: Option<Vec<BrokerId>>,
    /// The new replica list (reassignment).
    pub replicas: Option<Vec<BrokerId>>,
    /// The new eligible leader replicas (KIP-966). Left `None` by a
    /// decision, the controller's `Proposal` fills it by KIP-966's rules
    /// from the change's ISR (see `controller::elr`).
    pub eligible_leader_replicas: Option<Vec<BrokerId>>,
    /// The new last known ELR (KIP-966), filled like
    /// `eligible_leader_replicas`.
    pub last_known_elr: Option<Vec<BrokerId>>,
}

/// A SASL/SCRAM credential as stored (Kafka's `UserScramCredentialRecord`):
/// never the password, only what RFC 5802 lets a server verify a proof
/// with — the salt, the iteration count, `StoredKey = H(ClientKey)` and
/// `ServerKey`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    /// Salt of the salted password.
    pub salt: Vec<u8>,
    /// PBKDF2 iterations of the salted password.
    pub iterations: i32,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
}

/// SCRAM mechanism numbers, as Kafka's `ScramMechanism` (and its admin
/// API) numbers them: 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512.
pub const SCRAM_MECHANISMS: [u8; 2] = [1, 2];

/// One ACL as the metadata log keeps it (Kafka's AccessControlEntryRecord),
/// with Kafka's codes for the resource type, pattern type, operation and
/// permission (the broker's `security::acl` model gives them meaning).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclRecord {
    /// The ACL's id (a UUID, never all zeros).
    pub id: [u8; 16],
    /// Kafka's `ResourceType` code.
    pub resource_type: i8,
    /// The resource name (`*` for every one).
    pub resource_name: String,
    /// Kafka's `PatternType` code (LITERAL or PREFIXED).
    pub pattern_type: i8,
    /// `User:name` or `User:*`.
    pub principal: String,
    /// A client address or `*`.
    pub host: String,
    /// Kafka's `AclOperation` code.
    pub operation: i8,
    /// Kafka's `AclPermissionType` code (ALLOW or DENY).
    pub permission_type: i8,
}

impl AclRecord {
    /// Whether two records state the same ACL (ids aside).
    pub fn same_binding(&self, other: &AclRecord) -> bool {
        AclRecord {
            id: [0; 16],
            ..self.clone()
        } == AclRecord {
            id: [0; 16],
            ..other.clone()
        }
    }
}

/// A remote log segment's state (KIP-405's `RemoteLogSegmentState`, with
/// its names and its ids: the codec writes [`RemoteSegmentState::id`]).
///
/// A segment moves only forward: CopySegmentStarted → CopySegmentFinished
/// → DeleteSegmentStarted → DeleteSegmentFinished, or from
/// CopySegmentStarted straight to DeleteSegmentStarted (a copy abandoned,
/// cleaned up by a later leader).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RemoteSegmentState {
    /// The uploader is copying the segment's objects; readers ignore it.
    CopySegmentStarted,
    /// The objects are complete: the segment serves remote reads.
    CopySegmentFinished,
    /// The objects are being deleted (retention, or an abandoned copy); the
    /// segment no longer serves reads.
    DeleteSegmentStarted,
    /// The objects are gone; applying this removes the segment.
    DeleteSegmentFinished,
}

impl RemoteSegmentState {
    /// Every state, in Kafka's id order.
    pub const ALL: [RemoteSegmentState; 4] = [
        RemoteSegmentState::CopySegmentStarted,
        RemoteSegmentState::CopySegmentFinished,
        RemoteSegmentState::DeleteSegmentStarted,
        RemoteSegmentState::DeleteSegmentFinished,
    ];

    /// Kafka's id of the state (`RemoteLogSegmentState.id()`).
    pub fn id(self) -> u8 {
        match self {
            RemoteSegmentState::CopySegmentStarted => 0,
            RemoteSegmentState::CopySegmentFinished => 1,
            RemoteSegmentState::DeleteSegmentStarted => 2,
            RemoteSegmentState::DeleteSegmentFinished => 3,
        }
    }

    /// The state of a Kafka id, if it is one.
    pub fn from_id(id: u8) -> Option<RemoteSegmentState> {
        RemoteSegmentState::ALL.get(usize::from(id)).copied()
    }

    /// Whether a segment in this state may move to `next` (Kafka's
    /// `RemoteLogSegmentState.isValidTransition`, a state to itself
    /// excluded).
    pub fn may_become(self, next: RemoteSegmentState) -> bool {
        use RemoteSegmentState::*;
        matches!(
            (self, next),
            (CopySegmentStarted, CopySegmentFinished)
                | (CopySegmentStarted, DeleteSegmentStarted)
                | (CopySegmentFinished, DeleteSegmentStarted)
                | (DeleteSegmentStarted, DeleteSegmentFinished)
        )
    }
}

/// A segment of a partition's log copied to remote storage (KIP-405's
/// `RemoteLogSegmentMetadataRecord`). The record that starts a copy; the
/// image keeps it as the segment ([`super::remote_segments::RemoteSegment`]),
/// `state` following its transitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteSegmentRecord {
    /// The topic.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// Random id chosen by the uploader (a UUID, never all zeros). Objects
    /// are keyed by it, so that a retried or abandoned upload never writes
    /// over another's.
    pub segment_id: [u8; 16],
    /// First offset in the segment.
    pub base_offset: i64,
    /// Last offset in the segment (inclusive).
    pub end_offset: i64,
    /// The largest record timestamp in the segment.
    pub max_timestamp_ms: i64,
    /// The segment's size in bytes.
    pub size_bytes: i64,
    /// The uploader: the partition's leader when the copy started.
    pub broker_id: BrokerId,
    /// The uploader's leader epoch when the copy started.
    pub leader_epoch: i32,
    /// Each leader epoch of the segment's records and the offset where it
    /// starts within the segment (Kafka's `segmentLeaderEpochs`): epochs and
    /// offsets strictly increasing, the first at `base_offset`.
    pub segment_leader_epochs: Vec<(i32, i64)>,
    /// CopySegmentStarted when the controller proposes it; a snapshot
    /// writes a segment with the state it has reached.
    pub state: RemoteSegmentState,
}

/// An entry of the metadata log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataRecord {
    /// A broker (re)registers: a new incarnation with a new broker epoch. It
    /// starts fenced until it has caught up with the metadata log.
    RegisterBroker {
        /// Broker id.
        broker_id: BrokerId,
        /// Random id of this process incarnation (Kafka's `incarnationId`).
        incarnation_id: [u8; 16],
        /// The broker epoch, greater than any epoch given before.
        broker_epoch: i64,
        /// Where clients reach it.
        listeners: Vec<Endpoint>,
        /// `broker.rack`.
        rack: Option<String>,
        /// The feature levels its binary supports (Kafka's
        /// `BrokerRegistrationRecord.features`); empty for a binary older
        /// than feature levels (see [`super::features`]).
        features: Vec<SupportedFeature>,
    },
    /// A broker leaves the cluster for good (decommission).
    UnregisterBroker {
        /// Broker id.
        broker_id: BrokerId,
        /// Its current epoch.
        broker_epoch: i64,
    },
    /// A broker is cordoned (KIP-1066: every one of its log dirs is in
    /// `cordoned.log.dirs`), or no longer: a cordoned broker keeps its
    /// replicas, but new partitions are not placed on it.
    CordonBroker {
        /// Broker id.
        broker_id: BrokerId,
        /// Its current epoch.
        broker_epoch: i64,
        /// Cordoned from now on, or not.
        cordoned: bool,
    },
    /// A broker may no longer lead or join an ISR (session expired, or
    /// controlled shutdown).
    FenceBroker {
        /// Broker id.
        broker_id: BrokerId,
        /// Its current epoch.
        broker_epoch: i64,
    },
    /// A fenced broker has caught up and may serve again.
    UnfenceBroker {
        /// Broker id.
        broker_id: BrokerId,
        /// Its current epoch.
        broker_epoch: i64,
    },
    /// A topic is created (its partitions follow as [`MetadataRecord::Partition`]).
    Topic {
        /// Topic name.
        name: String,
        /// Topic id (a UUID, never all zeros).
        topic_id: TopicId,
        /// Topic configs set at creation (Kafka names).
        configs: BTreeMap<String, String>,
    },
    /// A topic and all its partitions are deleted.
    RemoveTopic {
        /// Topic id.
        topic_id: TopicId,
    },
    /// A partition is created.
    Partition(PartitionRecord),
    /// A partition's leader, ISR or replicas change. A change that sets
    /// `replicas` also ends any reassignment the partition was in (it is
    /// how a reassignment completes or is cancelled).
    PartitionChange(PartitionChangeRecord),
    /// A partition reassignment starts (KRaft keeps these as the
    /// `addingReplicas` / `removingReplicas` of its partition records): the
    /// replicas being added and those to remove once the added ones are in
    /// sync. Both are subsets of the partition's replicas (which the
    /// preceding `PartitionChange` grew to old ∪ new). Changes no epoch: it
    /// is bookkeeping for the controller and for
    /// ListPartitionReassignments, not a change of who serves what.
    Reassignment {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// Replicas being added (catching up as followers).
        adding: Vec<BrokerId>,
        /// Replicas removed once every adding one is in the ISR.
        removing: Vec<BrokerId>,
    },
    /// A topic config is set (`Some`) or removed (`None`).
    ConfigChange {
        /// Topic name.
        topic: String,
        /// Config name.
        key: String,
        /// New value, or `None` to return to the default.
        value: Option<String>,
    },
    /// A dynamic broker config is set (`Some`) or removed (`None`): Kafka's
    /// ConfigRecord on a BROKER resource, `broker` being its name (empty:
    /// the cluster-wide default of every broker; else one broker's id).
    BrokerConfigChange {
        /// `""` or a broker id in decimal.
        broker: String,
        /// Config name (a broker key, such as `log.retention.ms`).
        key: String,
        /// New value, or `None` to return to the static setting.
        value: Option<String>,
    },
    /// A client-metrics subscription config is set (`Some`) or removed
    /// (`None`): Kafka's ConfigRecord on a CLIENT_METRICS resource (KIP-714),
    /// `name` being the subscription's name. A subscription with no config
    /// left no longer exists.
    ClientMetricsConfigChange {
        /// The subscription's (resource's) name, never empty.
        name: String,
        /// `metrics`, `interval.ms` or `match`.
        key: String,
        /// New value, or `None` to remove it.
        value: Option<String>,
    },
    /// A group config is set (`Some`) or removed (`None`): Kafka's
    /// ConfigRecord on a GROUP resource (KIP-848, KIP-932), `group` being
    /// the group id. A group with no config left has none.
    GroupConfigChange {
        /// The group id, never empty.
        group: String,
        /// Config name (`share.auto.offset.reset`, ...).
        key: String,
        /// New value, or `None` to return to the default.
        value: Option<String>,
    },
    /// A client quota is set (`Some`) or removed (`None`): Kafka's
    /// ClientQuotaRecord. `entity` is its (type, name) parts in order, types
    /// `user`, `client-id` or `ip`, a `None` name being the type's default
    /// entity (`<default>`).
    ClientQuota {
        /// The entity, e.g. `[("user", Some("alice")), ("client-id", None)]`.
        entity: Vec<(String, Option<String>)>,
        /// Quota name (`producer_byte_rate`, `consumer_byte_rate`, ...).
        key: String,
        /// The value as decimal text, or `None` to remove it.
        value: Option<String>,
    },
    /// A user's SCRAM credential for one mechanism is created or replaced
    /// (Kafka's `UserScramCredentialRecord`).
    UserScramCredential {
        /// User name.
        name: String,
        /// Mechanism, one of [`SCRAM_MECHANISMS`].
        mechanism: u8,
        /// The credential.
        credential: ScramCredential,
    },
    /// A user's SCRAM credential for one mechanism is deleted (Kafka's
    /// `RemoveUserScramCredentialRecord`).
    RemoveUserScramCredential {
        /// User name.
        name: String,
        /// Mechanism, one of [`SCRAM_MECHANISMS`].
        mechanism: u8,
    },
    /// An ACL is created (Kafka's AccessControlEntryRecord).
    AccessControlEntry(AclRecord),
    /// An ACL is deleted (Kafka's RemoveAccessControlEntryRecord).
    RemoveAccessControlEntry {
        /// The ACL's id.
        id: [u8; 16],
    },
    /// A segment's copy to remote storage starts (tiered storage,
    /// KIP-405).
    RemoteLogSegment(RemoteSegmentRecord),
    /// A remote segment moves to another state (KIP-405's
    /// `RemoteLogSegmentMetadataUpdateRecord`).
    RemoteLogSegmentState {
        /// The topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// The segment.
        segment_id: [u8; 16],
        /// Its new state.
        state: RemoteSegmentState,
    },
    /// Every remote object of a deleted topic is gone: it leaves the
    /// image's topics to purge.
    RemoteTopicPurged {
        /// The deleted topic's id.
        topic_id: TopicId,
    },
    /// A broker took the producer-id block that ends just below
    /// A feature's finalized level changes (Kafka's `FeatureLevelRecord`,
    /// written by UpdateFeatures): every broker then behaves at `level`.
    /// Level 0 turns the feature off.
    FeatureLevel {
        /// `metadata.version`, `group.version`, …
        name: String,
        /// The new finalized level.
        level: i16,
    },
    /// A controller's listener (KIP-853's `RegisterControllerRecord`,
    /// reduced to its endpoint): written before a node is added as a voter,
    /// so that every member and observer can reach it once it votes.
    RegisterController {
        /// Its `node.id`.
        node_id: BrokerId,
        /// Host of its controller listener.
        host: String,
        /// Port of its controller listener.
        port: u16,
    },
    /// `next_block_start` (KIP-730).
    ProducerIds {
        /// Broker that took the block.
        broker_id: BrokerId,
        /// Its epoch.
        broker_epoch: i64,
        /// Where the next block starts.
        next_block_start: i64,
    },
}

impl MetadataRecord {
    /// The record's name, for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            MetadataRecord::RegisterBroker { .. } => "RegisterBroker",
            MetadataRecord::UnregisterBroker { .. } => "UnregisterBroker",
            MetadataRecord::FenceBroker { .. } => "FenceBroker",
            MetadataRecord::UnfenceBroker { .. } => "UnfenceBroker",
            MetadataRecord::CordonBroker { .. } => "CordonBroker",
            MetadataRecord::Topic { .. } => "Topic",
            MetadataRecord::RemoveTopic { .. } => "RemoveTopic",
            MetadataRecord::Partition(_) => "Partition",
            MetadataRecord::PartitionChange(_) => "PartitionChange",
            MetadataRecord::Reassignment { .. } => "Reassignment",
            MetadataRecord::ConfigChange { .. } => "ConfigChange",
            MetadataRecord::BrokerConfigChange { .. } => "BrokerConfigChange",
            MetadataRecord::ClientMetricsConfigChange { .. } => "ClientMetricsConfigChange",
            MetadataRecord::GroupConfigChange { .. } => "GroupConfigChange",
            MetadataRecord::ProducerIds { .. } => "ProducerIds",
            MetadataRecord::FeatureLevel { .. } => "FeatureLevel",
            MetadataRecord::RegisterController { .. } => "RegisterController",
            MetadataRecord::ClientQuota { .. } => "ClientQuota",
            MetadataRecord::UserScramCredential { .. } => "UserScramCredential",
            MetadataRecord::RemoveUserScramCredential { .. } => "RemoveUserScramCredential",
            MetadataRecord::AccessControlEntry(_) => "AccessControlEntry",
            MetadataRecord::RemoveAccessControlEntry { .. } => "RemoveAccessControlEntry",
            MetadataRecord::RemoteLogSegment(_) => "RemoteLogSegment",
            MetadataRecord::RemoteLogSegmentState { .. } => "RemoteLogSegmentState",
            MetadataRecord::RemoteTopicPurged { .. } => "RemoteTopicPurged",
        }
    }
}

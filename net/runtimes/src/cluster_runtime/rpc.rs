//! What brokers ask the active controller, and its answers: Kafka's
//! BrokerRegistration (62) and BrokerHeartbeat (63), carried between rill
//! nodes on the controller listener as JSON bodies of
//! [`super::transport`] frames. Why not Kafka's encodings: the controller
//! listener speaks only to rill nodes of the same build, and these are
//! small and rare (a heartbeat per broker per interval).

use cluster::metadata::{
    AclRecord, BrokerHeartbeatRequest, BrokerRegistrationRequest, Endpoint, SupportedFeature,
};
use engine::ErrorCode;
use serde::{Deserialize, Serialize};

/// How long AddRaftVoter waits for the new voter to catch up as a
/// learner before it gives up (the voter stays a learner).
pub const ADD_VOTER_CATCH_UP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A request for the active controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerRpc {
    /// BrokerRegistration: a new broker epoch, fenced until caught up.
    Register {
        /// `node.id`.
        broker_id: i32,
        /// Random id of this process.
        incarnation_id: [u8; 16],
        /// Client listeners as (name, host, port).
        listeners: Vec<(String, String, u16)>,
        /// `broker.rack`.
        rack: Option<String>,
        /// The feature levels this binary supports, as (name, min, max).
        /// Absent from an older binary's request (JSON): none listed.
        #[serde(default)]
        features: Vec<(String, i16, i16)>,
    },
    /// BrokerHeartbeat: keeps the session, unfences once caught up.
    Heartbeat {
        /// `node.id`.
        broker_id: i32,
        /// The epoch its registration got.
        broker_epoch: i64,
        /// The highest metadata offset it has applied.
        metadata_offset: i64,
        /// It asks for a controlled shutdown.
        want_shutdown: bool,
        /// Every one of its data dirs is cordoned (KIP-1066). Absent from
        /// an older binary's request (JSON): not cordoned.
        #[serde(default)]
        cordoned: bool,
        /// The partitions it cannot append to now, `(topic id, partition)`:
        /// a full data dir, an offline partition. Absent from an older
        /// binary's request: none.
        #[serde(default)]
        unwritable: Vec<([u8; 16], i32)>,
    },
    /// CreateTopics (validated by the asking broker), or the adoption of a
    /// topic a single node had on disk before it kept metadata (explicit
    /// assignment and the topic's own id).
    CreateTopic {
        /// Name.
        name: String,
        /// Id (drawn by the asking broker; an adopted topic keeps its own).
        topic_id: [u8; 16],
        /// Partition count (placed) when `assignment` is empty.
        partitions: i32,
        /// Replicas per partition (placed).
        replication_factor: i16,
        /// Explicit (partition, replicas); empty: placed.
        assignment: Vec<(i32, Vec<i32>)>,
        /// Topic config overrides.
        configs: Vec<(String, String)>,
    },
    /// DeleteTopics.
    DeleteTopic {
        /// Name.
        name: String,
        /// The id the asking broker saw: a retry finds it gone and is done.
        topic_id: [u8; 16],
    },
    /// CreatePartitions: grow to `count`, placed.
    CreatePartitions {
        /// Name.
        name: String,
        /// New total.
        count: i32,
        /// The count the asking broker saw: a retry finds `count` and is done.
        from_count: i32,
        /// One replica list per new partition, in order; empty: placed.
        /// Absent from an older binary's request (JSON): placed.
        #[serde(default)]
        assignment: Vec<Vec<i32>>,
    },
    /// Tiered storage: the partition's leader starts copying a sealed
    /// segment (objects are written only once this commits).
    RemoteCopyStarted {
        /// The uploader, which must lead the partition.
        broker_id: i32,
        /// Its leader epoch, which must be the partition's.
        leader_epoch: i32,
        /// Topic id.
        topic_id: [u8; 16],
        /// Partition.
        partition: i32,
        /// Random id of this upload.
        segment_id: [u8; 16],
        /// First offset.
        base_offset: i64,
        /// Last offset (inclusive).
        end_offset: i64,
        /// Newest record timestamp.
        max_timestamp_ms: i64,
        /// Log bytes.
        size_bytes: i64,
        /// Leader epoch → first offset within the segment.
        segment_leader_epochs: Vec<(i32, i64)>,
    },
    /// Tiered storage: a remote segment moves on (copy finished, deletion
    /// started or finished); the state is Kafka's id.
    RemoteSegmentState {
        /// The asking leader.
        broker_id: i32,
        /// Its leader epoch.
        leader_epoch: i32,
        /// Topic id.
        topic_id: [u8; 16],
        /// Partition.
        partition: i32,
        /// The segment.
        segment_id: [u8; 16],
        /// `RemoteSegmentState::id`.
        state: u8,
    },
    /// Tiered storage: every object of a deleted topic is gone.
    RemoteTopicPurged {
        /// The deleted topic's id.
        topic_id: [u8; 16],
    },
    /// AlterPartition: a leader shrinks or expands a partition's ISR.
    AlterPartition {
        /// The leader asking.
        broker_id: i32,
        /// The topic.
        topic_id: [u8; 16],
        /// The partition.
        partition: i32,
        /// The leader epoch it leads in.
        leader_epoch: i32,
        /// The partition epoch its ISR is based on.
        partition_epoch: i32,
        /// The whole proposed ISR.
        new_isr: Vec<i32>,
    },
    /// AlterPartitionReassignments for one partition: move it to `target`,
    /// or cancel the reassignment in progress (`None`).
    AlterReassignment {
        /// Topic name.
        topic: String,
        /// Partition.
        partition: i32,
        /// The replicas to move to; `None` cancels.
        target: Option<Vec<i32>>,
    },
    /// AllocateProducerIds (KIP-730): the next block of producer ids for
    /// this broker, unique in the cluster.
    AllocateProducerIds {
        /// `node.id`.
        broker_id: i32,
        /// The epoch its registration got.
        broker_epoch: i64,
    },
    /// AlterConfigs / IncrementalAlterConfigs: the topic's whole set of
    /// overrides after the change.
    SetTopicConfigs {
        /// Name.
        name: String,
        /// Every override the topic keeps.
        configs: Vec<(String, String)>,
    },
    /// AlterClientQuotas: set (`Some`, decimal text) or remove (`None`)
    /// quotas of one entity.
    AlterClientQuotas {
        /// The entity's (type, name) parts, `None` for a default entity.
        entity: Vec<(String, Option<String>)>,
        /// The changes.
        changes: Vec<(String, Option<String>)>,
    },
    /// IncrementalAlterConfigs on a BROKER resource: its whole set of
    /// dynamic configs after the change.
    SetBrokerConfigs {
        /// `""` (every broker's default) or a broker id.
        broker: String,
        /// Every dynamic config the resource keeps.
        configs: Vec<(String, String)>,
    },
    /// IncrementalAlterConfigs / AlterConfigs on a CLIENT_METRICS resource
    /// (KIP-714): the subscription's whole set of configs after the change
    /// (empty: the subscription is deleted).
    SetClientMetricsConfigs {
        /// The subscription's name.
        name: String,
        /// Every config the subscription keeps.
        configs: Vec<(String, String)>,
    },
    /// IncrementalAlterConfigs / AlterConfigs on a GROUP resource: the
    /// group's whole set of configs after the change (empty: none left).
    SetGroupConfigs {
        /// The group id.
        group: String,
        /// Every config the group keeps.
        configs: Vec<(String, String)>,
    },
    /// AlterUserScramCredentials (and the bootstrap users): SCRAM
    /// credentials to create or replace, and to delete.
    AlterScramCredentials {
        /// (user, mechanism number, salt, iterations, StoredKey, ServerKey).
        upserts: Vec<ScramUpsert>,
        /// (user, mechanism number); one that does not exist is skipped.
        deletions: Vec<(String, u8)>,
    },
    /// CreateAcls: the ACLs to add (checked, each with a new id).
    CreateAcls {
        /// The ACLs.
        acls: Vec<WireAcl>,
    },
    /// DeleteAcls: the ids of the ACLs the filters matched.
    DeleteAcls {
        /// The ids.
        ids: Vec<[u8; 16]>,
    },
    /// ElectLeaders (KIP-460): Kafka's election type code (0 preferred,
    /// 1 unclean) and the partitions by topic name (`None`: all).
    ElectLeaders {
        /// Kafka's `ElectionType` code.
        election_type: i8,
        /// (topic, partitions); `None`: every partition.
        partitions: Option<Vec<(String, Vec<i32>)>>,
    },
    /// UpdateFeatures (key 57, KIP-584): finalized feature levels to set,
    /// all or none.
    UpdateFeatures {
        /// (feature, level, Kafka's upgrade type code).
        updates: Vec<(String, i16, i8)>,
        /// Check only.
        validate_only: bool,
    },
    /// UnregisterBroker (key 64): remove a broker's registration for good
    /// (decommission), its leaderships and ISR memberships first.
    UnregisterBroker {
        /// The broker.
        broker_id: i32,
    },
    /// AddRaftVoter (key 80, KIP-853): make `node_id`, whose controller
    /// listener is `host:port`, a voter of the metadata quorum.
    AddVoter {
        /// The new voter's `node.id`.
        node_id: i32,
        /// Host of its controller listener.
        host: String,
        /// Port of its controller listener.
        port: u16,
    },
    /// RemoveRaftVoter (key 81, KIP-853): `node_id` stops voting.
    RemoveVoter {
        /// The voter's `node.id`.
        node_id: i32,
    },
    /// DescribeQuorum asked of a node that is not the leader: only the
    /// leader knows every member's progress (and an observer not even the
    /// members).
    DescribeQuorum,
}

/// One topic's ElectLeaders answers: its name, and (partition, Kafka error
/// code, message) for each partition.
pub type TopicElections = (String, Vec<(i32, i16, Option<String>)>);

/// An ACL as [`ControllerRpc::CreateAcls`] carries it ([`AclRecord`]'s fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireAcl {
    /// Id.
    pub id: [u8; 16],
    /// Kafka's resource type code.
    pub resource_type: i8,
    /// Resource name.
    pub resource_name: String,
    /// Kafka's pattern type code.
    pub pattern_type: i8,
    /// `User:name`.
    pub principal: String,
    /// Address or `*`.
    pub host: String,
    /// Kafka's operation code.
    pub operation: i8,
    /// Kafka's permission type code.
    pub permission_type: i8,
}

impl From<&AclRecord> for WireAcl {
    fn from(r: &AclRecord) -> Self {
        WireAcl {
            id: r.id,
            resource_type: r.resource_type,
            resource_name: r.resource_name.clone(),
            pattern_type: r.pattern_type,
            principal: r.principal.clone(),
            host: r.host.clone(),
            operation: r.operation,
            permission_type: r.permission_type,
        }
    }
}

impl From<&WireAcl> for AclRecord {
    fn from(w: &WireAcl) -> Self {
        AclRecord {
            id: w.id,
            resource_type: w.resource_type,
            resource_name: w.resource_name.clone(),
            pattern_type: w.pattern_type,
            principal: w.principal.clone(),
            host: w.host.clone(),
            operation: w.operation,
            permission_type: w.permission_type,
        }
    }
}

/// A SCRAM credential in a controller request: (user, mechanism number,
/// salt, iterations, StoredKey, ServerKey).
pub type ScramUpsert = (String, u8, Vec<u8>, i32, Vec<u8>, Vec<u8>);

/// The active controller's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerReply {
    /// Registered with this epoch (committed).
    Registered {
        /// The broker's new epoch.
        broker_epoch: i64,
    },
    /// A heartbeat's outcome (its records committed).
    Heartbeat {
        /// The broker has applied the metadata up to its registration.
        is_caught_up: bool,
        /// The broker stays fenced.
        is_fenced: bool,
        /// A broker asking for shutdown may stop now.
        should_shut_down: bool,
    },
    /// A producer-id block, taken (committed) for the asking broker.
    ProducerIds {
        /// First id of the block.
        first: i64,
        /// Last id of the block (inclusive).
        last: i64,
    },
    /// The change is committed at this metadata offset.
    Committed {
        /// Offset of its last record.
        offset: i64,
    },
    /// ElectLeaders' answers, its elections committed at `offset`.
    Elected {
        /// Offset of its last record.
        offset: i64,
        /// Per topic, each partition's answer.
        results: Vec<TopicElections>,
    },
    /// This node is not the active controller; ask `leader` (a node id), if known.
    NotController {
        /// The active controller this node knows of.
        leader: Option<i32>,
    },
    /// The quorum as the active controller sees it.
    Quorum(QuorumDescription),
    /// Refused with a Kafka error code.
    Error {
        /// The code's number.
        code: i16,
        /// Why.
        message: String,
    },
}

impl ControllerReply {
    /// A refusal with `code`.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        ControllerReply::Error {
            code: code.code(),
            message: message.into(),
        }
    }
}

impl ControllerRpc {
    /// The cluster core's registration request.
    pub fn registration(&self) -> Option<BrokerRegistrationRequest> {
        match self {
            ControllerRpc::Register {
                broker_id,
                incarnation_id,
                listeners,
                rack,
                features,
            } => Some(BrokerRegistrationRequest {
                broker_id: *broker_id,
                incarnation_id: *incarnation_id,
                listeners: listeners
                    .iter()
                    .map(|(name, host, port)| Endpoint {
                        name: name.clone(),
                        host: host.clone(),
                        port: *port,
                    })
                    .collect(),
                rack: rack.clone(),
                features: features
                    .iter()
                    .map(|(name, min_level, max_level)| SupportedFeature {
                        name: name.clone(),
                        min_level: *min_level,
                        max_level: *max_level,
                    })
                    .collect(),
            }),
            _ => None,
        }
    }

    /// The cluster core's heartbeat request.
    pub fn heartbeat(&self) -> Option<BrokerHeartbeatRequest> {
        match self {
            ControllerRpc::Heartbeat {
                broker_id,
                broker_epoch,
                metadata_offset,
                want_shutdown,
                cordoned,
                unwritable,
            } => Some(BrokerHeartbeatRequest {
                broker_id: *broker_id,
                broker_epoch: *broker_epoch,
                current_metadata_offset: *metadata_offset,
                want_fence: false,
                want_shutdown: *want_shutdown,
                cordoned: *cordoned,
                unwritable: unwritable.clone(),
            }),
            _ => None,
        }
    }
}

/// Encodes a request or reply as a frame body.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
    serde_json::to_vec(value).map_err(|e| e.to_string())
}

/// Decodes a frame body; bad bytes are an error, never a panic.
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip() {
        let register = ControllerRpc::Register {
            broker_id: 2,
            incarnation_id: [7; 16],
            listeners: vec![("PLAINTEXT".into(), "10.0.0.2".into(), 9092)],
            rack: Some("r1".into()),
            features: vec![("group.version".into(), 0, 1)],
        };
        let bytes = encode(&register).unwrap();
        assert_eq!(decode::<ControllerRpc>(&bytes).unwrap(), register);
        let core = register.registration().unwrap();
        assert_eq!(core.listeners[0].port, 9092);
        assert_eq!(core.features[0].max_level, 1);
        // An older binary's registration, without features, still reads.
        let older = String::from_utf8(bytes)
            .unwrap()
            .replace(r#","features":[["group.version",0,1]]"#, "");
        assert!(!older.contains("features"), "{older}");
        match decode::<ControllerRpc>(older.as_bytes()).unwrap() {
            ControllerRpc::Register { features, .. } => assert!(features.is_empty()),
            other => panic!("{other:?}"),
        }
        assert!(register.heartbeat().is_none());
        let reply = ControllerReply::error(ErrorCode::StaleBrokerEpoch, "old");
        let bytes = encode(&reply).unwrap();
        assert_eq!(decode::<ControllerReply>(&bytes).unwrap(), reply);
        assert!(decode::<ControllerReply>(b"{nope").is_err());
    }
}

/// What DescribeQuorum reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    /// The leader's node id, if known.
    pub leader_id: Option<i32>,
    /// The Raft term (KRaft's leader epoch).
    pub term: u64,
    /// The commit index (KRaft's high watermark).
    pub high_watermark: u64,
    /// (node id, log end offset; -1 unknown) per voter.
    pub voters: Vec<(i32, i64)>,
    /// The same for each learner: a controller AddRaftVoter is adding,
    /// still catching up.
    pub observers: Vec<(i32, i64)>,
    /// (node id, host, port) of each member's controller listener, where
    /// known.
    pub endpoints: Vec<(i32, String, u16)>,
}

//! [`MetadataImage`]: the cluster metadata as of the last applied record.
//!
//! Every node (controller or broker) holds one and changes it only through
//! [`MetadataImage::apply`], with the committed records in log order, so two
//! nodes that applied the same prefix hold equal images (`BTreeMap`s
//! throughout: no hash order can make them differ). `apply` validates a
//! record before touching anything — a refused record leaves the image as it
//! was — and asserts the invariants of what it changed afterwards:
//!
//! - a partition's ISR is a non-empty subset of its replicas, without
//!   duplicates, and its leader is in the ISR or is [`NO_LEADER`];
//! - a partition with a leader has only registered, unfenced brokers in its
//!   ISR (leader included): fencing a broker takes it out of every ISR first;
//!   a leaderless partition keeps its last ISR members, fenced or not;
//! - leader epochs and partition epochs never go back, and every change of a
//!   partition bumps its partition epoch;
//! - broker epochs only grow; producer-id blocks only move forward;
//! - a topic's partitions are numbered `0..n` and its name maps to its id;
//! - remote log segments (tiered storage, [`super::remote_segments`]) are
//!   of existing partitions, well formed, and a deleted topic's are kept
//!   until purged, its id never reused meanwhile.
//!
//! [`MetadataImage::check_invariants`] checks all of them over the whole
//! image (the property tests run it after every step; `apply` checks only
//! what the record touched, so that applying is not quadratic).

use std::collections::BTreeMap;
use std::sync::Arc;

use engine::types::{is_valid_topic_name, TopicId};
use engine::ProducerIdBlocks;

use crate::placement::BrokerId;

use super::error::MetadataError;
use super::record::{
    AclRecord, Endpoint, MetadataRecord, PartitionChangeRecord, PartitionRecord, ScramCredential,
    SupportedFeature, NO_LEADER, SCRAM_MECHANISMS,
};
use super::remote_segments::RemoteLogImage;

/// The topic config that lets an out-of-sync replica lead (Kafka's name).
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// The topic config that turns tiered storage on (Kafka's name).
pub const REMOTE_STORAGE_ENABLE: &str = "remote.storage.enable";

/// A registered broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    /// Broker id.
    pub broker_id: BrokerId,
    /// Incarnation (process) id.
    pub incarnation_id: [u8; 16],
    /// Current broker epoch.
    pub broker_epoch: i64,
    /// Client listeners.
    pub listeners: Vec<Endpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// Fenced brokers lead nothing and join no ISR.
    pub fenced: bool,
    /// The feature levels its binary supports; empty for a binary older
    /// than feature levels.
    pub features: Vec<SupportedFeature>,
    /// Every one of its log dirs is cordoned (KIP-1066): new partitions are
    /// not placed on it.
    pub cordoned: bool,
    /// Log offset of its registration: it has caught up once its metadata
    /// offset reaches this.
    pub registered_at_offset: i64,
}

/// A partition's replicas, ISR, leader and epochs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionState {
    /// Replicas, the first being the preferred leader.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas (never empty: when the last one fails it stays, so
    /// that it can lead cleanly when it comes back).
    pub isr: Vec<BrokerId>,
    /// Leader or [`NO_LEADER`].
    pub leader: BrokerId,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Partition epoch.
    pub partition_epoch: i32,
    /// Replicas being added by an ongoing reassignment (empty: none).
    pub adding_replicas: Vec<BrokerId>,
    /// Replicas an ongoing reassignment removes once the added ones are in
    /// sync (empty: none).
    pub removing_replicas: Vec<BrokerId>,
    /// Eligible leader replicas (KIP-966): out of the ISR, yet holding
    /// every committed record, so they may lead cleanly when no ISR member
    /// can. Disjoint from the ISR, within the replicas.
    pub eligible_leader_replicas: Vec<BrokerId>,
    /// KIP-966's `LastKnownElr`, as Kafka 4.1 keeps it: the last leader of
    /// a partition that has none (empty while it has one). Disjoint from
    /// the ELR, within the replicas.
    pub last_known_elr: Vec<BrokerId>,
}

impl PartitionState {
    /// Whether a reassignment is in progress.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas a reassignment moves to: every replica but the ones
    /// being removed (all of them when none is in progress).
    pub fn target_replicas(&self) -> Vec<BrokerId> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing_replicas.contains(r))
            .collect()
    }
}

/// A topic with its configs and partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    /// Name.
    pub name: String,
    /// Id.
    pub topic_id: TopicId,
    /// Configs set on the topic (the rest are defaults).
    pub configs: BTreeMap<String, String>,
    /// Partitions `0..n`.
    pub partitions: BTreeMap<i32, PartitionState>,
}

impl TopicImage {
    /// Partition count.
    pub fn partition_count(&self) -> i32 {
        i32::try_from(self.partitions.len()).unwrap_or(i32::MAX)
    }

    /// Whether `remote.storage.enable` is `true` on this topic (tiered
    /// storage: its segments are copied to remote storage). Kafka reads
    /// booleans without regard to case.
    pub fn remote_storage_enabled(&self) -> bool {
        self.configs
            .get(REMOTE_STORAGE_ENABLE)
            .is_some_and(|value| value.eq_ignore_ascii_case("true"))
    }

    /// `unclean.leader.election.enable` on this topic, if set to a boolean.
    pub fn unclean_leader_election(&self) -> Option<bool> {
        match self.configs.get(UNCLEAN_LEADER_ELECTION_ENABLE)?.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
}

/// The applied cluster metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataImage {
    last_applied_offset: i64,
    brokers: BTreeMap<BrokerId, BrokerRegistration>,
    /// The highest broker epoch ever registered, so that an epoch is never
    /// handed out twice, even after its broker unregistered.
    last_broker_epoch: i64,
    /// Each topic behind an `Arc`: the image is cloned for every applied
    /// batch (published to every shard) and every controller decision, and
    /// with thousands of partitions a deep clone cost milliseconds each time
    /// (it starved heartbeats while topics were created in bulk). A change
    /// copies only the topic it touches (`Arc::make_mut`).
    topics: BTreeMap<TopicId, Arc<TopicImage>>,
    topic_ids: BTreeMap<String, TopicId>,
    producer_ids: ProducerIdBlocks,
    /// Dynamic broker configs by resource name (`""`: every broker's
    /// default; else a broker id), each `key -> value`.
    broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Client-metrics subscriptions (KIP-714) by name, each
    /// `key -> value`; a name with no config is absent.
    client_metrics_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Group configs (GROUP resources), by group id.
    group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Client quotas by entity, each `key -> value` (decimal text).
    client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, String>>,
    /// SCRAM credentials by (user, mechanism number).
    scram_credentials: BTreeMap<(String, u8), ScramCredential>,
    /// ACLs by id (Kafka's AccessControlEntryRecords).
    acls: BTreeMap<[u8; 16], AclRecord>,
    /// Remote log segments (tiered storage) and deleted topics whose remote
    /// objects are still to delete.
    remote: RemoteLogImage,
    /// Feature levels finalized by UpdateFeatures (KIP-584), 0 (off)
    /// included; a feature never set runs at its default (see
    /// [`super::features`]).
    finalized_features: BTreeMap<String, i16>,
    /// Controller listeners registered for KIP-853's AddRaftVoter, by node
    /// id (a voter named in `controller.quorum.voters` needs none).
    controllers: BTreeMap<BrokerId, (String, u16)>,
}

/// A client-quota entity: its (type, name) parts, a `None` name being the
/// type's default entity.
pub type QuotaEntity = Vec<(String, Option<String>)>;

/// Entity types of client quotas (Kafka's `user`, `client-id`, `ip`).
pub const QUOTA_ENTITY_TYPES: [&str; 3] = ["user", "client-id", "ip"];

impl Default for MetadataImage {
    fn default() -> Self {
        MetadataImage::new()
    }
}

impl MetadataImage {
    /// The image before the first record.
    pub fn new() -> Self {
        MetadataImage {
            last_applied_offset: -1,
            brokers: BTreeMap::new(),
            last_broker_epoch: -1,
            topics: BTreeMap::new(),
            topic_ids: BTreeMap::new(),
            producer_ids: ProducerIdBlocks::default(),
            broker_configs: BTreeMap::new(),
            client_metrics_configs: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            client_quotas: BTreeMap::new(),
            scram_credentials: BTreeMap::new(),
            acls: BTreeMap::new(),
            remote: RemoteLogImage::default(),
            finalized_features: BTreeMap::new(),
            controllers: BTreeMap::new(),
        }
    }

    /// Controller listeners registered by AddRaftVoter (KIP-853), as
    /// `node id -> (host, port)`.
    pub fn controllers(&self) -> &BTreeMap<BrokerId, (String, u16)> {
        &self.controllers
    }

    /// Feature levels set by UpdateFeatures, 0 (off) included; a feature
    /// absent here runs at its default ([`super::features::finalized_level`]).
    pub fn finalized_features(&self) -> &BTreeMap<String, i16> {
        &self.finalized_features
    }

    /// Remote log segments (tiered storage, KIP-405) and the deleted topics
    /// whose remote objects are still to delete; the broker's accessors
    /// are in [`super::remote_segments`].
    pub fn remote_log(&self) -> &RemoteLogImage {
        &self.remote
    }

    /// ACLs by id.
    pub fn acls(&self) -> &BTreeMap<[u8; 16], AclRecord> {
        &self.acls
    }

    /// Dynamic broker configs by resource name (`""`: the cluster-wide
    /// default; else a broker id in decimal).
    pub fn broker_configs(&self) -> &BTreeMap<String, BTreeMap<String, String>> {
        &self.broker_configs
    }

    /// Client-metrics subscriptions (KIP-714) by name, each `key -> value`
    /// as set (`metrics`, `interval.ms`, `match`).
    pub fn client_metrics_configs(&self) -> &BTreeMap<String, BTreeMap<String, String>> {
        &self.client_metrics_configs
    }

    /// The dynamic configs of groups (GROUP resources), by group id.
    pub fn group_configs(&self) -> &BTreeMap<String, BTreeMap<String, String>> {
        &self.group_configs
    }

    /// Client quotas by entity.
    pub fn client_quotas(&self) -> &BTreeMap<QuotaEntity, BTreeMap<String, String>> {
        &self.client_quotas
    }

    /// SCRAM credentials by (user, mechanism number: 1 = SCRAM-SHA-256,
    /// 2 = SCRAM-SHA-512).
    pub fn scram_credentials(&self) -> &BTreeMap<(String, u8), ScramCredential> {
        &self.scram_credentials
    }

    /// One user's SCRAM credential for a mechanism.
    pub fn scram_credential(&self, name: &str, mechanism: u8) -> Option<&ScramCredential> {
        self.scram_credentials.get(&(name.to_owned(), mechanism))
    }

    /// Offset of the last applied record (`-1`: none).
    pub fn last_applied_offset(&self) -> i64 {
        self.last_applied_offset
    }

    /// Registered brokers by id.
    pub fn brokers(&self) -> &BTreeMap<BrokerId, BrokerRegistration> {
        &self.brokers
    }

    /// One broker's registration.
    pub fn broker(&self, broker_id: BrokerId) -> Option<&BrokerRegistration> {
        self.brokers.get(&broker_id)
    }

    /// Whether the broker is registered and unfenced (may lead, may be in
    /// a new ISR).
    pub fn is_live(&self, broker_id: BrokerId) -> bool {
        self.broker(broker_id).is_some_and(|broker| !broker.fenced)
    }

    /// The highest broker epoch handed out (`-1`: none).
    pub fn last_broker_epoch(&self) -> i64 {
        self.last_broker_epoch
    }

    /// Topics by id.
    pub fn topics(&self) -> &BTreeMap<TopicId, Arc<TopicImage>> {
        &self.topics
    }

    /// A topic by id.
    pub fn topic(&self, topic_id: &TopicId) -> Option<&TopicImage> {
        self.topics.get(topic_id).map(Arc::as_ref)
    }

    /// A topic by name.
    pub fn topic_by_name(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(self.topic_ids.get(name)?).map(Arc::as_ref)
    }

    /// A partition.
    pub fn partition(&self, topic_id: &TopicId, partition: i32) -> Option<&PartitionState> {
        self.topic(topic_id)?.partitions.get(&partition)
    }

    /// Every partition, in (topic id, partition) order.
    pub fn partitions(&self) -> impl Iterator<Item = (&TopicImage, i32, &PartitionState)> {
        self.topics.values().flat_map(|topic| {
            let topic: &TopicImage = topic;
            topic
                .partitions
                .iter()
                .map(move |(&partition, state)| (topic, partition, state))
        })
    }

    /// Where the next producer-id block starts.
    pub fn next_producer_id_block_start(&self) -> i64 {
        self.producer_ids.next_block_start()
    }

    /// Applies one committed record at `offset` (greater than the last).
    ///
    /// On `Err` the image is unchanged.
    pub fn apply(&mut self, offset: i64, record: &MetadataRecord) -> Result<(), MetadataError> {
        let refuse = |reason: String| MetadataError::InvalidRecord {
            kind: record.kind(),
            offset,
            reason,
        };
        if offset <= self.last_applied_offset {
            return Err(refuse(format!(
                "offset not after the last applied {}",
                self.last_applied_offset
            )));
        }
        self.validate(record).map_err(refuse)?;
        let before_offset = self.last_applied_offset;
        self.mutate(offset, record);
        self.last_applied_offset = offset;
        assert!(self.last_applied_offset > before_offset);
        Ok(())
    }

    /// Whether `record` may be applied now; the reason if not.
    fn validate(&self, record: &MetadataRecord) -> Result<(), String> {
        match record {
            MetadataRecord::RegisterBroker { .. }
            | MetadataRecord::UnregisterBroker { .. }
            | MetadataRecord::FenceBroker { .. }
            | MetadataRecord::UnfenceBroker { .. }
            | MetadataRecord::CordonBroker { .. } => self.validate_broker(record),
            MetadataRecord::Topic { .. }
            | MetadataRecord::RemoveTopic { .. }
            | MetadataRecord::Partition(_)
            | MetadataRecord::PartitionChange(_)
            | MetadataRecord::Reassignment { .. } => self.validate_topic(record),
            MetadataRecord::ConfigChange { .. }
            | MetadataRecord::ClientQuota { .. }
            | MetadataRecord::ClientMetricsConfigChange { .. }
            | MetadataRecord::GroupConfigChange { .. }
            | MetadataRecord::BrokerConfigChange { .. } => self.validate_config(record),
            MetadataRecord::UserScramCredential { .. }
            | MetadataRecord::RemoveUserScramCredential { .. }
            | MetadataRecord::AccessControlEntry(_)
            | MetadataRecord::RemoveAccessControlEntry { .. } => self.validate_security(record),
            MetadataRecord::RemoteLogSegment(_)
            | MetadataRecord::RemoteLogSegmentState { .. }
            | MetadataRecord::RemoteTopicPurged { .. } => self.validate_remote(record),
            MetadataRecord::FeatureLevel { name, level } => {
                if name.is_empty() || *level < 0 {
                    return Err(format!("feature {name:?} level {level}"));
                }
                Ok(())
            }
            MetadataRecord::RegisterController {
                node_id,
                host,
                port,
            } => {
                if *node_id < 0 || host.is_empty() || *port == 0 {
                    return Err(format!("controller {node_id} at {host}:{port}"));
                }
                Ok(())
            }
            MetadataRecord::ProducerIds {
                broker_id,
                broker_epoch,
                next_block_start,
            } => {
                self.check_epoch(*broker_id, *broker_epoch)?;
                if *next_block_start <= self.producer_ids.next_block_start() {
                    return Err(format!(
                        "next producer-id block start {next_block_start} not above {}",
                        self.producer_ids.next_block_start()
                    ));
                }
                Ok(())
            }
        }
    }

    /// The broker records' part of [`MetadataImage::validate`].
    fn validate_broker(&self, record: &MetadataRecord) -> Result<(), String> {
        match record {
            MetadataRecord::RegisterBroker {
                broker_id,
                broker_epoch,
                ..
            } => {
                if *broker_id < 0 {
                    return Err(format!("negative broker id {broker_id}"));
                }
                if *broker_epoch <= self.last_broker_epoch {
                    return Err(format!(
                        "broker epoch {broker_epoch} not above the last {}",
                        self.last_broker_epoch
                    ));
                }
                // A new incarnation starts fenced: the old one must lead nothing.
                self.check_serves_nothing(*broker_id)
            }
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            }
            | MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            } => {
                let broker = self.check_epoch(*broker_id, *broker_epoch)?;
                if matches!(record, MetadataRecord::FenceBroker { .. }) && broker.fenced {
                    return Err(format!("broker {broker_id} is fenced already"));
                }
                self.check_serves_nothing(*broker_id)
            }
            MetadataRecord::UnfenceBroker {
                broker_id,
                broker_epoch,
            } => {
                if !self.check_epoch(*broker_id, *broker_epoch)?.fenced {
                    return Err(format!("broker {broker_id} is not fenced"));
                }
                Ok(())
            }
            MetadataRecord::CordonBroker {
                broker_id,
                broker_epoch,
                cordoned,
            } => {
                if self.check_epoch(*broker_id, *broker_epoch)?.cordoned == *cordoned {
                    return Err(format!("broker {broker_id} cordoned is {cordoned} already"));
                }
                Ok(())
            }
            _ => unreachable!("not a broker record: {}", record.kind()),
        }
    }

    /// The topic and partition records' part of [`MetadataImage::validate`].
    fn validate_topic(&self, record: &MetadataRecord) -> Result<(), String> {
        match record {
            MetadataRecord::Topic { name, topic_id, .. } => {
                if !is_valid_topic_name(name) {
                    return Err(format!("invalid topic name {name:?}"));
                }
                if self.topic_ids.contains_key(name) {
                    return Err(format!("topic {name:?} exists"));
                }
                if *topic_id == [0; 16]
                    || self.topics.contains_key(topic_id)
                    || self.remote.is_purging(topic_id)
                {
                    return Err(format!("topic id {topic_id:?} is zero or taken"));
                }
                Ok(())
            }
            MetadataRecord::RemoveTopic { topic_id } => self
                .topic(topic_id)
                .map(|_| ())
                .ok_or_else(|| format!("unknown topic id {topic_id:?}")),
            MetadataRecord::Partition(partition) => self.validate_partition(partition),
            MetadataRecord::PartitionChange(change) => self.changed_partition(change).map(|_| ()),
            MetadataRecord::Reassignment {
                topic_id,
                partition,
                adding,
                removing,
            } => self
                .reassigned_partition(topic_id, *partition, adding, removing)
                .map(|_| ()),
            _ => unreachable!("not a topic record: {}", record.kind()),
        }
    }

    /// The config and quota records' part of [`MetadataImage::validate`].
    fn validate_config(&self, record: &MetadataRecord) -> Result<(), String> {
        match record {
            MetadataRecord::ConfigChange { topic, key, .. } => {
                if !self.topic_ids.contains_key(topic) {
                    return Err(format!("unknown topic {topic:?}"));
                }
                if key.is_empty() {
                    return Err("empty config name".to_owned());
                }
                Ok(())
            }
            MetadataRecord::ClientQuota { entity, key, value } => {
                check_quota_entity(entity)?;
                if key.is_empty() {
                    return Err("empty quota name".to_owned());
                }
                match value.as_deref().map(str::parse::<f64>) {
                    None => Ok(()),
                    Some(Ok(v)) if v.is_finite() && v > 0.0 => Ok(()),
                    Some(_) => Err(format!("quota {key} is not a positive number")),
                }
            }
            MetadataRecord::BrokerConfigChange { broker, key, .. } => {
                if !broker.is_empty() && broker.parse::<BrokerId>().is_err() {
                    return Err(format!("broker resource {broker:?} is not an id"));
                }
                if key.is_empty() {
                    return Err("empty config name".to_owned());
                }
                Ok(())
            }
            MetadataRecord::GroupConfigChange { group, key, .. } => {
                if group.is_empty() {
                    return Err("empty group id".to_owned());
                }
                if key.is_empty() {
                    return Err("empty config name".to_owned());
                }
                Ok(())
            }
            MetadataRecord::ClientMetricsConfigChange { name, key, .. } => {
                if name.is_empty() {
                    return Err("empty client-metrics resource name".to_owned());
                }
                if key.is_empty() {
                    return Err("empty config name".to_owned());
                }
                Ok(())
            }
            _ => unreachable!("not a config record: {}", record.kind()),
        }
    }

    /// The SCRAM and ACL records' part of [`MetadataImage::validate`].
    fn validate_security(&self, record: &MetadataRecord) -> Result<(), String> {
        match record {
            MetadataRecord::UserScramCredential {
                name,
                mechanism,
                credential,
            } => {
                check_scram_user(name, *mechanism)?;
                if credential.salt.is_empty()
                    || credential.iterations <= 0
                    || credential.stored_key.is_empty()
                    || credential.server_key.is_empty()
                {
                    return Err(format!("incomplete SCRAM credential of {name:?}"));
                }
                Ok(())
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                check_scram_user(name, *mechanism)?;
                if !self
                    .scram_credentials
                    .contains_key(&(name.clone(), *mechanism))
                {
                    return Err(format!("{name:?} has no SCRAM credential {mechanism}"));
                }
                Ok(())
            }
            MetadataRecord::AccessControlEntry(acl) => {
                if acl.id == [0; 16] || self.acls.contains_key(&acl.id) {
                    return Err(format!("ACL id {:?} is zero or taken", acl.id));
                }
                if acl.resource_name.is_empty() || acl.principal.is_empty() || acl.host.is_empty() {
                    return Err("ACL with an empty resource name, principal or host".to_owned());
                }
                Ok(())
            }
            MetadataRecord::RemoveAccessControlEntry { id } => self
                .acls
                .get(id)
                .map(|_| ())
                .ok_or_else(|| format!("unknown ACL id {id:?}")),
            _ => unreachable!("not a SCRAM or ACL record: {}", record.kind()),
        }
    }

    /// The remote log records' part of [`MetadataImage::validate`]: a
    /// segment record names an existing partition of a live topic.
    fn validate_remote(&self, record: &MetadataRecord) -> Result<(), String> {
        let partition = match record {
            MetadataRecord::RemoteLogSegment(segment) => {
                Some((&segment.topic_id, segment.partition))
            }
            MetadataRecord::RemoteLogSegmentState {
                topic_id,
                partition,
                ..
            } => Some((topic_id, *partition)),
            _ => None,
        };
        if let Some((topic_id, partition)) = partition {
            if self.partition(topic_id, partition).is_none() {
                return Err(format!("unknown partition {topic_id:?}-{partition}"));
            }
        }
        self.remote.validate(record)
    }

    fn check_epoch(
        &self,
        broker_id: BrokerId,
        broker_epoch: i64,
    ) -> Result<&BrokerRegistration, String> {
        let broker = self
            .broker(broker_id)
            .ok_or_else(|| format!("broker {broker_id} is not registered"))?;
        if broker.broker_epoch != broker_epoch {
            return Err(format!(
                "broker {broker_id} epoch {broker_epoch} is not the current {}",
                broker.broker_epoch
            ));
        }
        Ok(broker)
    }

    /// A broker about to be fenced, re-registered or unregistered must lead
    /// nothing and be in no ISR of a partition that has a leader (the
    /// leader would wait for it). It may stay in the ISR of a leaderless
    /// partition: the last in-sync members are kept there.
    fn check_serves_nothing(&self, broker_id: BrokerId) -> Result<(), String> {
        let serves = |state: &PartitionState| {
            state.leader == broker_id
                || (state.leader != NO_LEADER && state.isr.contains(&broker_id))
        };
        match self.partitions().find(|(_, _, state)| serves(state)) {
            Some((topic, partition, _)) => Err(format!(
                "broker {broker_id} still leads or is in the ISR of {}-{partition}",
                topic.name
            )),
            None => Ok(()),
        }
    }

    fn validate_partition(&self, record: &PartitionRecord) -> Result<(), String> {
        let topic = self
            .topic(&record.topic_id)
            .ok_or_else(|| format!("unknown topic id {:?}", record.topic_id))?;
        if record.partition != topic.partition_count() {
            return Err(format!(
                "partition {} created where {} is next",
                record.partition,
                topic.partition_count()
            ));
        }
        if record.leader_epoch < 0 || record.partition_epoch < 0 {
            return Err("negative epoch".to_owned());
        }
        let state = PartitionState {
            replicas: record.replicas.clone(),
            isr: record.isr.clone(),
            leader: record.leader,
            leader_epoch: record.leader_epoch,
            partition_epoch: record.partition_epoch,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            eligible_leader_replicas: record.eligible_leader_replicas.clone(),
            last_known_elr: record.last_known_elr.clone(),
        };
        self.check_partition_state(&state)
    }

    /// The partition as `change` leaves it, if that is allowed.
    fn changed_partition(&self, change: &PartitionChangeRecord) -> Result<PartitionState, String> {
        let current = self
            .partition(&change.topic_id, change.partition)
            .ok_or_else(|| {
                format!(
                    "unknown partition {:?}-{}",
                    change.topic_id, change.partition
                )
            })?;
        if change.leader.is_none()
            && change.isr.is_none()
            && change.replicas.is_none()
            && change.eligible_leader_replicas.is_none()
            && change.last_known_elr.is_none()
        {
            return Err("a partition change that changes nothing".to_owned());
        }
        let bump = |epoch: i32| {
            epoch
                .checked_add(1)
                .ok_or_else(|| "epoch overflow".to_owned())
        };
        let next = PartitionState {
            replicas: change
                .replicas
                .clone()
                .unwrap_or_else(|| current.replicas.clone()),
            isr: change.isr.clone().unwrap_or_else(|| current.isr.clone()),
            leader: change.leader.unwrap_or(current.leader),
            leader_epoch: match change.leader {
                Some(_) => bump(current.leader_epoch)?,
                None => current.leader_epoch,
            },
            partition_epoch: bump(current.partition_epoch)?,
            // New replicas end a reassignment; anything else keeps it.
            adding_replicas: match change.replicas {
                Some(_) => Vec::new(),
                None => current.adding_replicas.clone(),
            },
            removing_replicas: match change.replicas {
                Some(_) => Vec::new(),
                None => current.removing_replicas.clone(),
            },
            eligible_leader_replicas: change
                .eligible_leader_replicas
                .clone()
                .unwrap_or_else(|| current.eligible_leader_replicas.clone()),
            last_known_elr: change
                .last_known_elr
                .clone()
                .unwrap_or_else(|| current.last_known_elr.clone()),
        };
        self.check_partition_state(&next)?;
        Ok(next)
    }

    /// The partition as a `Reassignment` record leaves it, if allowed.
    fn reassigned_partition(
        &self,
        topic_id: &TopicId,
        partition: i32,
        adding: &[BrokerId],
        removing: &[BrokerId],
    ) -> Result<PartitionState, String> {
        let current = self
            .partition(topic_id, partition)
            .ok_or_else(|| format!("unknown partition {topic_id:?}-{partition}"))?;
        if adding.is_empty() && removing.is_empty() {
            return Err("a reassignment that adds and removes nothing".to_owned());
        }
        let next = PartitionState {
            adding_replicas: adding.to_vec(),
            removing_replicas: removing.to_vec(),
            ..current.clone()
        };
        self.check_partition_state(&next)?;
        Ok(next)
    }

    /// The rules every partition state obeys.
    fn check_partition_state(&self, state: &PartitionState) -> Result<(), String> {
        let distinct = |brokers: &[BrokerId]| {
            brokers
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == brokers.len()
        };
        if state.replicas.is_empty() || !distinct(&state.replicas) {
            return Err(format!("replicas {:?} empty or repeated", state.replicas));
        }
        if state.replicas.iter().any(|&broker| broker < 0) {
            return Err(format!(
                "negative broker id in replicas {:?}",
                state.replicas
            ));
        }
        if state.isr.is_empty() || !distinct(&state.isr) {
            return Err(format!("ISR {:?} empty or repeated", state.isr));
        }
        if !state
            .isr
            .iter()
            .all(|broker| state.replicas.contains(broker))
        {
            return Err(format!(
                "ISR {:?} not within replicas {:?}",
                state.isr, state.replicas
            ));
        }
        let reassigning = state.adding_replicas.iter().chain(&state.removing_replicas);
        let within = |brokers: &[BrokerId]| brokers.iter().all(|b| state.replicas.contains(b));
        if !distinct(&reassigning.copied().collect::<Vec<_>>())
            || !within(&state.adding_replicas)
            || !within(&state.removing_replicas)
        {
            return Err(format!(
                "adding {:?} and removing {:?} overlap, repeat or leave replicas {:?}",
                state.adding_replicas, state.removing_replicas, state.replicas
            ));
        }
        if state.removing_replicas.len() >= state.replicas.len() {
            return Err(format!(
                "a reassignment removes every replica of {:?}",
                state.replicas
            ));
        }
        check_elr(state)?;
        if state.leader != NO_LEADER {
            if !state.isr.contains(&state.leader) {
                return Err(format!(
                    "leader {} not in ISR {:?}",
                    state.leader, state.isr
                ));
            }
            if let Some(stale) = state.isr.iter().find(|&&broker| !self.is_live(broker)) {
                return Err(format!(
                    "leader or ISR member {stale} of a led partition is fenced or unregistered"
                ));
            }
        }
        Ok(())
    }

    /// Changes the image; `validate` accepted the record.
    fn mutate(&mut self, offset: i64, record: &MetadataRecord) {
        match record {
            MetadataRecord::RegisterBroker { .. }
            | MetadataRecord::UnregisterBroker { .. }
            | MetadataRecord::FenceBroker { .. }
            | MetadataRecord::UnfenceBroker { .. }
            | MetadataRecord::CordonBroker { .. } => self.mutate_broker(offset, record),
            MetadataRecord::Topic { .. }
            | MetadataRecord::RemoveTopic { .. }
            | MetadataRecord::Partition(_)
            | MetadataRecord::PartitionChange(_)
            | MetadataRecord::Reassignment { .. } => self.mutate_topic(record),
            MetadataRecord::ConfigChange { .. }
            | MetadataRecord::ClientQuota { .. }
            | MetadataRecord::ClientMetricsConfigChange { .. }
            | MetadataRecord::GroupConfigChange { .. }
            | MetadataRecord::BrokerConfigChange { .. } => self.mutate_config(record),
            MetadataRecord::UserScramCredential { .. }
            | MetadataRecord::RemoveUserScramCredential { .. }
            | MetadataRecord::AccessControlEntry(_)
            | MetadataRecord::RemoveAccessControlEntry { .. } => self.mutate_security(record),
            MetadataRecord::RemoteLogSegment(_)
            | MetadataRecord::RemoteLogSegmentState { .. }
            | MetadataRecord::RemoteTopicPurged { .. } => self.remote.mutate(record),
            MetadataRecord::FeatureLevel { name, level } => {
                // Level 0 is kept: it means off, where an absent feature
                // runs at its default (see `features`).
                self.finalized_features.insert(name.clone(), *level);
            }
            MetadataRecord::RegisterController {
                node_id,
                host,
                port,
            } => {
                self.controllers.insert(*node_id, (host.clone(), *port));
            }
            MetadataRecord::ProducerIds {
                next_block_start, ..
            } => {
                let before = self.producer_ids.next_block_start();
                self.producer_ids = ProducerIdBlocks::new(*next_block_start);
                assert!(self.producer_ids.next_block_start() > before);
            }
        }
        self.assert_touched(record);
    }

    /// The topic and partition records' part of [`MetadataImage::mutate`].
    fn mutate_topic(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::Topic {
                name,
                topic_id,
                configs,
            } => {
                let topic = TopicImage {
                    name: name.clone(),
                    topic_id: *topic_id,
                    configs: configs.clone(),
                    partitions: BTreeMap::new(),
                };
                assert!(self.topics.insert(*topic_id, Arc::new(topic)).is_none());
                assert!(self.topic_ids.insert(name.clone(), *topic_id).is_none());
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                let removed = self.topics.remove(topic_id);
                let Some(removed) = removed else {
                    unreachable!("validated: topic {topic_id:?} exists")
                };
                assert_eq!(self.topic_ids.remove(&removed.name), Some(*topic_id));
                self.remote.remove_topic(topic_id, &removed.name);
            }
            MetadataRecord::Partition(record) => {
                let state = PartitionState {
                    replicas: record.replicas.clone(),
                    isr: record.isr.clone(),
                    leader: record.leader,
                    leader_epoch: record.leader_epoch,
                    partition_epoch: record.partition_epoch,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                    eligible_leader_replicas: record.eligible_leader_replicas.clone(),
                    last_known_elr: record.last_known_elr.clone(),
                };
                let topic = self.topic_mut(&record.topic_id);
                assert!(topic.partitions.insert(record.partition, state).is_none());
                assert_eq!(topic.partition_count(), record.partition + 1);
            }
            MetadataRecord::PartitionChange(change) => self.mutate_partition_change(change),
            MetadataRecord::Reassignment {
                topic_id,
                partition,
                adding,
                removing,
            } => {
                let next = match self.reassigned_partition(topic_id, *partition, adding, removing) {
                    Ok(next) => next,
                    Err(reason) => unreachable!("validated, yet: {reason}"),
                };
                let topic = self.topic_mut(topic_id);
                let Some(state) = topic.partitions.get_mut(partition) else {
                    unreachable!("validated: partition {partition} exists")
                };
                assert_eq!(next.partition_epoch, state.partition_epoch);
                *state = next;
            }
            _ => unreachable!("not a topic record: {}", record.kind()),
        }
    }

    /// The config and quota records' part of [`MetadataImage::mutate`].
    fn mutate_config(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::ClientQuota { entity, key, value } => {
                let quotas = self.client_quotas.entry(entity.clone()).or_default();
                match value {
                    Some(value) => quotas.insert(key.clone(), value.clone()),
                    None => quotas.remove(key),
                };
                if quotas.is_empty() {
                    self.client_quotas.remove(entity);
                }
            }
            MetadataRecord::BrokerConfigChange { broker, key, value } => {
                let configs = self.broker_configs.entry(broker.clone()).or_default();
                match value {
                    Some(value) => configs.insert(key.clone(), value.clone()),
                    None => configs.remove(key),
                };
                if configs.is_empty() {
                    self.broker_configs.remove(broker);
                }
            }
            MetadataRecord::GroupConfigChange { group, key, value } => {
                let configs = self.group_configs.entry(group.clone()).or_default();
                match value {
                    Some(value) => configs.insert(key.clone(), value.clone()),
                    None => configs.remove(key),
                };
                if configs.is_empty() {
                    self.group_configs.remove(group);
                }
            }
            MetadataRecord::ClientMetricsConfigChange { name, key, value } => {
                let configs = self.client_metrics_configs.entry(name.clone()).or_default();
                match value {
                    Some(value) => configs.insert(key.clone(), value.clone()),
                    None => configs.remove(key),
                };
                if configs.is_empty() {
                    self.client_metrics_configs.remove(name);
                }
            }
            MetadataRecord::ConfigChange { topic, key, value } => {
                let Some(topic_id) = self.topic_ids.get(topic).copied() else {
                    unreachable!("validated: topic {topic:?} exists")
                };
                let configs = &mut self.topic_mut(&topic_id).configs;
                match value {
                    Some(value) => configs.insert(key.clone(), value.clone()),
                    None => configs.remove(key),
                };
            }
            _ => unreachable!("not a config record: {}", record.kind()),
        }
    }

    /// The SCRAM and ACL records' part of [`MetadataImage::mutate`].
    fn mutate_security(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::UserScramCredential {
                name,
                mechanism,
                credential,
            } => {
                self.scram_credentials
                    .insert((name.clone(), *mechanism), credential.clone());
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                self.scram_credentials.remove(&(name.clone(), *mechanism));
            }
            MetadataRecord::AccessControlEntry(acl) => {
                assert!(self.acls.insert(acl.id, acl.clone()).is_none());
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                assert!(self.acls.remove(id).is_some());
            }
            _ => unreachable!("not a SCRAM or ACL record: {}", record.kind()),
        }
    }

    /// The broker records' part of [`MetadataImage::mutate`].
    fn mutate_broker(&mut self, offset: i64, record: &MetadataRecord) {
        match record {
            MetadataRecord::RegisterBroker {
                broker_id,
                incarnation_id,
                broker_epoch,
                listeners,
                rack,
                features,
            } => {
                let registration = BrokerRegistration {
                    broker_id: *broker_id,
                    incarnation_id: *incarnation_id,
                    broker_epoch: *broker_epoch,
                    listeners: listeners.clone(),
                    rack: rack.clone(),
                    fenced: true,
                    features: features.clone(),
                    cordoned: false,
                    registered_at_offset: offset,
                };
                let previous = self.brokers.insert(*broker_id, registration);
                if let Some(previous) = previous {
                    assert!(previous.broker_epoch < *broker_epoch);
                }
                assert!(*broker_epoch > self.last_broker_epoch);
                self.last_broker_epoch = *broker_epoch;
            }
            MetadataRecord::UnregisterBroker { broker_id, .. } => {
                let removed = self.brokers.remove(broker_id);
                assert!(removed.is_some());
            }
            MetadataRecord::FenceBroker { broker_id, .. }
            | MetadataRecord::UnfenceBroker { broker_id, .. } => {
                let fence = matches!(record, MetadataRecord::FenceBroker { .. });
                let broker = self.brokers.get_mut(broker_id);
                let Some(broker) = broker else {
                    unreachable!("validated: broker {broker_id} is registered")
                };
                assert_ne!(broker.fenced, fence);
                broker.fenced = fence;
            }
            MetadataRecord::CordonBroker {
                broker_id,
                cordoned,
                ..
            } => {
                let Some(broker) = self.brokers.get_mut(broker_id) else {
                    unreachable!("validated: broker {broker_id} is registered")
                };
                broker.cordoned = *cordoned;
            }
            _ => unreachable!("not a broker record: {}", record.kind()),
        }
    }

    /// A validated partition change: the new state, with its epochs bumped.
    fn mutate_partition_change(&mut self, change: &PartitionChangeRecord) {
        let next = match self.changed_partition(change) {
            Ok(next) => next,
            Err(reason) => unreachable!("validated, yet: {reason}"),
        };
        let topic = self.topic_mut(&change.topic_id);
        let Some(state) = topic.partitions.get_mut(&change.partition) else {
            unreachable!("validated: partition {} exists", change.partition)
        };
        assert_eq!(next.partition_epoch, state.partition_epoch + 1);
        assert!(next.leader_epoch >= state.leader_epoch);
        assert_eq!(
            next.leader_epoch > state.leader_epoch,
            change.leader.is_some()
        );
        *state = next;
    }

    fn topic_mut(&mut self, topic_id: &TopicId) -> &mut TopicImage {
        match self.topics.get_mut(topic_id) {
            Some(topic) => Arc::make_mut(topic),
            None => unreachable!("validated: topic {topic_id:?} exists"),
        }
    }

    /// The invariants of what `record` changed (after the change).
    fn assert_touched(&self, record: &MetadataRecord) {
        match record {
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition,
                ..
            })
            | MetadataRecord::PartitionChange(PartitionChangeRecord {
                topic_id,
                partition,
                ..
            })
            | MetadataRecord::Reassignment {
                topic_id,
                partition,
                ..
            } => {
                let state = self.partition(topic_id, *partition);
                let checked = state.map(|state| self.check_partition_state(state));
                assert_eq!(checked, Some(Ok(())), "{topic_id:?}-{partition}");
            }
            MetadataRecord::RegisterBroker { broker_id, .. }
            | MetadataRecord::FenceBroker { broker_id, .. } => {
                assert!(!self.is_live(*broker_id));
                assert_eq!(self.check_serves_nothing(*broker_id), Ok(()));
            }
            MetadataRecord::UnregisterBroker { broker_id, .. } => {
                assert!(self.broker(*broker_id).is_none());
                assert_eq!(self.check_serves_nothing(*broker_id), Ok(()));
            }
            MetadataRecord::UnfenceBroker { broker_id, .. } => {
                assert!(self.is_live(*broker_id));
            }
            MetadataRecord::CordonBroker {
                broker_id,
                cordoned,
                ..
            } => {
                assert_eq!(self.broker(*broker_id).map(|b| b.cordoned), Some(*cordoned));
            }
            MetadataRecord::Topic { name, topic_id, .. } => {
                assert_eq!(self.topic_ids.get(name), Some(topic_id));
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                assert!(self.topic(topic_id).is_none());
                assert!(!self.remote.has_segments(topic_id));
            }
            MetadataRecord::ConfigChange { .. }
            | MetadataRecord::ClientQuota { .. }
            | MetadataRecord::ClientMetricsConfigChange { .. }
            | MetadataRecord::GroupConfigChange { .. }
            | MetadataRecord::BrokerConfigChange { .. } => self.assert_touched_config(record),
            MetadataRecord::UserScramCredential { .. }
            | MetadataRecord::RemoveUserScramCredential { .. }
            | MetadataRecord::AccessControlEntry(_)
            | MetadataRecord::RemoveAccessControlEntry { .. } => {
                self.assert_touched_security(record)
            }
            MetadataRecord::RemoteLogSegment(_)
            | MetadataRecord::RemoteLogSegmentState { .. }
            | MetadataRecord::RemoteTopicPurged { .. } => self.assert_touched_remote(record),
            MetadataRecord::ProducerIds {
                next_block_start, ..
            } => {
                assert_eq!(self.producer_ids.next_block_start(), *next_block_start);
            }
            MetadataRecord::FeatureLevel { name, level } => {
                assert_eq!(self.finalized_features.get(name), Some(level));
            }
            MetadataRecord::RegisterController {
                node_id,
                host,
                port,
            } => {
                assert_eq!(self.controllers.get(node_id), Some(&(host.clone(), *port)));
            }
        }
        assert_eq!(self.topics.len(), self.topic_ids.len());
    }

    /// The config and quota records' part of [`MetadataImage::assert_touched`].
    fn assert_touched_config(&self, record: &MetadataRecord) {
        match record {
            MetadataRecord::ClientQuota { entity, key, value } => {
                let now = self
                    .client_quotas
                    .get(entity)
                    .and_then(|quotas| quotas.get(key));
                assert_eq!(now, value.as_ref());
            }
            MetadataRecord::BrokerConfigChange { broker, key, value } => {
                let now = self
                    .broker_configs
                    .get(broker)
                    .and_then(|configs| configs.get(key));
                assert_eq!(now, value.as_ref());
            }
            MetadataRecord::GroupConfigChange { group, key, value } => {
                let now = self.group_configs.get(group).and_then(|c| c.get(key));
                assert_eq!(now, value.as_ref());
                assert!(self.group_configs.values().all(|c| !c.is_empty()));
            }
            MetadataRecord::ClientMetricsConfigChange { name, key, value } => {
                let now = self
                    .client_metrics_configs
                    .get(name)
                    .and_then(|configs| configs.get(key));
                assert_eq!(now, value.as_ref());
                assert!(self.client_metrics_configs.values().all(|c| !c.is_empty()));
            }
            MetadataRecord::ConfigChange { topic, key, value } => {
                let now = self
                    .topic_by_name(topic)
                    .and_then(|topic| topic.configs.get(key));
                assert_eq!(now, value.as_ref());
            }
            _ => unreachable!("not a config record: {}", record.kind()),
        }
    }

    /// The SCRAM and ACL records' part of [`MetadataImage::assert_touched`].
    fn assert_touched_security(&self, record: &MetadataRecord) {
        match record {
            MetadataRecord::UserScramCredential {
                name,
                mechanism,
                credential,
            } => {
                assert_eq!(self.scram_credential(name, *mechanism), Some(credential));
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                assert!(self.scram_credential(name, *mechanism).is_none());
            }
            MetadataRecord::AccessControlEntry(acl) => {
                assert_eq!(self.acls.get(&acl.id), Some(acl));
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                assert!(!self.acls.contains_key(id));
            }
            _ => unreachable!("not a SCRAM or ACL record: {}", record.kind()),
        }
    }

    /// Sets what a snapshot carries beside its records
    /// ([`super::snapshot`]): the image was rebuilt by applying the
    /// snapshot's records at stand-in offsets, and this puts back the real
    /// offsets and the high-water marks that no record states on its own.
    /// Checks every value against the rebuilt image first; on `Err` nothing
    /// changed.
    pub(super) fn restore_snapshot_state(
        &mut self,
        last_applied_offset: i64,
        last_broker_epoch: i64,
        next_producer_id_block_start: i64,
        registered_at_offsets: &BTreeMap<BrokerId, i64>,
    ) -> Result<(), String> {
        if last_applied_offset < -1 {
            return Err(format!("last applied offset {last_applied_offset}"));
        }
        if last_broker_epoch < self.last_broker_epoch {
            return Err(format!(
                "last broker epoch {last_broker_epoch} below a registered epoch {}",
                self.last_broker_epoch
            ));
        }
        if next_producer_id_block_start < self.producer_ids.next_block_start() {
            return Err(format!(
                "next producer-id block start {next_producer_id_block_start} below {}",
                self.producer_ids.next_block_start()
            ));
        }
        if !registered_at_offsets.keys().eq(self.brokers.keys()) {
            return Err("registration offsets do not list exactly the brokers".to_owned());
        }
        if let Some((broker_id, offset)) = registered_at_offsets
            .iter()
            .find(|(_, &offset)| !(0..=last_applied_offset).contains(&offset))
        {
            return Err(format!(
                "broker {broker_id} registered at offset {offset}, not in [0, {last_applied_offset}]"
            ));
        }
        for (broker_id, broker) in &mut self.brokers {
            if let Some(&offset) = registered_at_offsets.get(broker_id) {
                broker.registered_at_offset = offset;
            }
        }
        self.last_applied_offset = last_applied_offset;
        self.last_broker_epoch = last_broker_epoch;
        self.producer_ids = ProducerIdBlocks::new(next_producer_id_block_start);
        Ok(())
    }

    /// Checks every invariant over the whole image; panics on a broken one
    /// (a bug). Linear in the image's size.
    pub fn check_invariants(&self) {
        assert!(self.last_applied_offset >= -1);
        assert_eq!(self.topics.len(), self.topic_ids.len());
        for (id, broker) in &self.brokers {
            assert_eq!(*id, broker.broker_id);
            assert!(broker.broker_epoch <= self.last_broker_epoch);
            assert!(broker.registered_at_offset <= self.last_applied_offset);
        }
        for (topic_id, topic) in &self.topics {
            assert_eq!(*topic_id, topic.topic_id);
            assert_eq!(self.topic_ids.get(&topic.name), Some(topic_id));
            for (expected, (&partition, state)) in topic.partitions.iter().enumerate() {
                assert_eq!(usize::try_from(partition).ok(), Some(expected));
                assert_eq!(
                    self.check_partition_state(state),
                    Ok(()),
                    "{}-{partition}",
                    topic.name
                );
                assert!(state.leader_epoch >= 0 && state.partition_epoch >= 0);
            }
        }
        assert!(self.producer_ids.next_block_start() >= 0);
        self.remote.check_invariants(
            |topic_id, partition| self.partition(topic_id, partition).is_some(),
            |topic_id| self.topic(topic_id).is_some(),
        );
    }
}

/// KIP-966's lists: the ELR out of the ISR, the last known ELR out of the
/// ELR, each within the replicas and without repeats.
fn check_elr(state: &PartitionState) -> Result<(), String> {
    let elr = &state.eligible_leader_replicas;
    let last_known = &state.last_known_elr;
    let distinct = |brokers: &[BrokerId]| {
        brokers
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            == brokers.len()
    };
    let within = |brokers: &[BrokerId]| brokers.iter().all(|b| state.replicas.contains(b));
    if !distinct(elr) || !distinct(last_known) || !within(elr) || !within(last_known) {
        return Err(format!(
            "ELR {elr:?} or last known ELR {last_known:?} repeats or leaves replicas {:?}",
            state.replicas
        ));
    }
    if elr.iter().any(|b| state.isr.contains(b)) {
        return Err(format!("ELR {elr:?} overlaps ISR {:?}", state.isr));
    }
    if last_known.iter().any(|b| elr.contains(b)) {
        return Err(format!(
            "last known ELR {last_known:?} overlaps ELR {elr:?}"
        ));
    }
    Ok(())
}

/// A quota entity has one to three parts of distinct known types.
pub(crate) fn check_quota_entity(entity: &QuotaEntity) -> Result<(), String> {
    if entity.is_empty() || entity.len() > QUOTA_ENTITY_TYPES.len() {
        return Err(format!("quota entity of {} parts", entity.len()));
    }
    for (i, (kind, name)) in entity.iter().enumerate() {
        if !QUOTA_ENTITY_TYPES.contains(&kind.as_str()) {
            return Err(format!("unknown quota entity type {kind:?}"));
        }
        if entity[..i].iter().any(|(other, _)| other == kind) {
            return Err(format!("quota entity type {kind:?} twice"));
        }
        if name.as_deref() == Some("") {
            return Err(format!("empty {kind} name in a quota entity"));
        }
    }
    Ok(())
}

/// A SCRAM record names a user and a known mechanism.
fn check_scram_user(name: &str, mechanism: u8) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty SCRAM user name".to_owned());
    }
    if !SCRAM_MECHANISMS.contains(&mechanism) {
        return Err(format!("unknown SCRAM mechanism {mechanism}"));
    }
    Ok(())
}

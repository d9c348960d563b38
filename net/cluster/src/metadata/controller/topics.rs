//! Topic decisions: CreateTopics, DeleteTopics, CreatePartitions and
//! config changes (IncrementalAlterConfigs on a topic, or on the brokers'
//! cluster-wide default).
//!
//! Two configs act on the partitions as they change, in the same decision
//! (KRaft does the same): `unclean.leader.election.enable` turned on elects
//! a leader, uncleanly if need be, for every leaderless partition it now
//! governs — an operator who flips it wants the partition back now, not at
//! the next broker event; and a new `min.insync.replicas` empties the
//! eligible leader replicas of the partitions it governs (see
//! [`super::elr`]: a lower minimum lets the high watermark pass them).
//!
//! New partitions are placed over the live (registered, unfenced) brokers by
//! [`crate::placement`], or take an explicit assignment checked against the
//! registered brokers (KRaft accepts a fenced broker in an explicit
//! assignment: it is a replica that will catch up). A new partition's ISR is
//! its live replicas and its leader the first of them in replica order, so
//! the preferred leader leads whenever it is alive; a partition with no live
//! replica cannot be created (nobody could take a write).

use std::collections::{BTreeMap, BTreeSet};

use engine::types::{is_valid_topic_name, TopicId};

use crate::placement::{
    assign_replicas_to_brokers, validate_replica_assignment, BrokerId, PlacementBroker,
    PlacementError, PlacementSeed,
};

use super::super::error::MetadataError;
use super::super::image::{MetadataImage, TopicImage, UNCLEAN_LEADER_ELECTION_ENABLE};
use super::super::record::{MetadataRecord, PartitionChangeRecord, PartitionRecord, NO_LEADER};
use super::election::elect_without;
use super::elr::MIN_INSYNC_REPLICAS;
use super::{Controller, Proposal};

/// How a new topic's replicas are chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicAssignment {
    /// Placed by [`assign_replicas_to_brokers`] over the live brokers.
    Placed {
        /// Partition count.
        partitions: i32,
        /// Replicas per partition.
        replication_factor: i16,
        /// The placement's random start and shift, drawn by the caller.
        seed: PlacementSeed,
    },
    /// CreateTopics' `assignments`: (partition, replicas) pairs.
    Explicit(Vec<(i32, Vec<BrokerId>)>),
}

/// A CreateTopics entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateTopicRequest {
    /// Topic name.
    pub name: String,
    /// Its id, drawn by the caller from its seeded source (never all zeros).
    pub topic_id: TopicId,
    /// Replica placement.
    pub assignment: TopicAssignment,
    /// Topic configs.
    pub configs: BTreeMap<String, String>,
}

impl Controller<'_> {
    /// CreateTopics: a `Topic` record and one `Partition` record per
    /// partition.
    pub fn create_topic(
        &self,
        request: &CreateTopicRequest,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let name = &request.name;
        if !is_valid_topic_name(name) {
            return Err(MetadataError::InvalidTopicName { name: name.clone() });
        }
        if let Some(existing) = self.image.topic_by_name(name) {
            // The same id: a retry of this very request, whose first try
            // committed but whose answer was lost (a timeout, a controller
            // move). Nothing to add; the asker waits for what is there.
            if existing.topic_id == request.topic_id {
                return Ok(Vec::new());
            }
            return Err(MetadataError::TopicAlreadyExists { name: name.clone() });
        }
        // Kafka's `Topic.hasCollision`: `a.b` and `a_b` share metric names.
        let unified = |name: &str| name.replace('.', "_");
        if let Some(existing) = self
            .image
            .topics()
            .values()
            .find(|topic| unified(&topic.name) == unified(name))
        {
            return Err(MetadataError::TopicNameCollision {
                name: name.clone(),
                existing: existing.name.clone(),
            });
        }
        // An id still naming a deleted topic's remote objects is taken too.
        let purging = self.image.remote_log().is_purging(&request.topic_id);
        if request.topic_id == [0; 16] || self.image.topic(&request.topic_id).is_some() || purging {
            return Err(MetadataError::InvalidRequest {
                reason: format!("topic id {:?} is zero or taken", request.topic_id),
            });
        }
        for (key, value) in &request.configs {
            check_config(key, Some(value))?;
        }
        let replicas = match &request.assignment {
            TopicAssignment::Placed {
                partitions,
                replication_factor,
                seed,
            } => assign_replicas_to_brokers(
                &live_brokers(self.image),
                *partitions,
                *replication_factor,
                *seed,
                0,
            )?,
            TopicAssignment::Explicit(assignment) => {
                validate_replica_assignment(assignment, 0, None, &registered_brokers(self.image))?
            }
        };
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::Topic {
            name: name.clone(),
            topic_id: request.topic_id,
            configs: request.configs.clone(),
        });
        push_new_partitions(&mut proposal, request.topic_id, 0, replicas)?;
        Ok(proposal.into_records())
    }

    /// DeleteTopics: removes the topic and its partitions.
    pub fn delete_topic(&self, name: &str) -> Result<Vec<MetadataRecord>, MetadataError> {
        let topic = self
            .image
            .topic_by_name(name)
            .ok_or_else(|| MetadataError::UnknownTopic {
                name: name.to_owned(),
            })?;
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::RemoveTopic {
            topic_id: topic.topic_id,
        });
        Ok(proposal.into_records())
    }

    /// DeleteTopics of the topic `topic_id` the asking broker saw as
    /// `name`. Gone already: a retry whose first try committed (its answer
    /// lost to a timeout or a controller move); nothing to add.
    pub fn delete_seen_topic(
        &self,
        name: &str,
        topic_id: &TopicId,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        if self.image.topic(topic_id).is_none() {
            return Ok(Vec::new());
        }
        self.delete_topic(name)
    }

    /// CreatePartitions, placed or as `assignment` says (one replica list
    /// per new partition), from the `from_count` the asking broker saw to
    /// `total_count`. At `total_count` already: a retry whose first try
    /// committed; nothing to add.
    pub fn grow_seen_topic(
        &self,
        name: &str,
        from_count: i32,
        total_count: i32,
        assignment: Option<&[Vec<BrokerId>]>,
        seed: PlacementSeed,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let now = self
            .image
            .topic_by_name(name)
            .map(TopicImage::partition_count);
        if from_count < total_count && now == Some(total_count) {
            return Ok(Vec::new());
        }
        self.create_partitions(name, total_count, assignment, seed)
    }

    /// CreatePartitions: grows the topic to `total_count` partitions, placed
    /// (continuing the numbering, with partition 0's replica count) or given
    /// as one replica list per new partition.
    pub fn create_partitions(
        &self,
        name: &str,
        total_count: i32,
        assignment: Option<&[Vec<BrokerId>]>,
        seed: PlacementSeed,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let topic = self
            .image
            .topic_by_name(name)
            .ok_or_else(|| MetadataError::UnknownTopic {
                name: name.to_owned(),
            })?;
        let current = topic.partition_count();
        if total_count <= current {
            return Err(MetadataError::PartitionCountNotIncreasing {
                name: name.to_owned(),
                current,
                requested: total_count,
            });
        }
        let replication_factor = topic
            .partitions
            .get(&0)
            .map_or(0, |partition0| partition0.replicas.len());
        assert!(replication_factor > 0, "topic {name} has no partition 0");
        let added = total_count - current;
        let replicas = match assignment {
            Some(lists) => {
                if usize::try_from(added).ok() != Some(lists.len()) {
                    return Err(MetadataError::Placement(
                        PlacementError::AssignmentCountMismatch {
                            added,
                            assignments: lists.len(),
                        },
                    ));
                }
                let numbered: Vec<(i32, Vec<BrokerId>)> =
                    (current..).zip(lists.iter().cloned()).collect();
                validate_replica_assignment(
                    &numbered,
                    current,
                    Some(replication_factor),
                    &registered_brokers(self.image),
                )?
            }
            None => assign_replicas_to_brokers(
                &live_brokers(self.image),
                added,
                i16::try_from(replication_factor).unwrap_or(i16::MAX),
                seed,
                current,
            )?,
        };
        let mut proposal = self.proposal();
        push_new_partitions(&mut proposal, topic.topic_id, current, replicas)?;
        Ok(proposal.into_records())
    }

    /// Sets (`Some`) or removes (`None`) a dynamic broker config of
    /// `broker` (`""`: every broker's default). The broker layer checks the
    /// key and value against its own settings first.
    pub fn alter_broker_config(
        &self,
        broker: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        check_config(key, value)?;
        if !broker.is_empty() && broker.parse::<BrokerId>().is_err() {
            return Err(MetadataError::InvalidConfig {
                key: key.to_owned(),
                value: value.map(str::to_owned),
                reason: format!("broker resource {broker:?} is not a broker id"),
            });
        }
        if !broker.is_empty() && ELECTION_KEYS.contains(&key) {
            // The controller's elections read one value for the cluster;
            // Kafka refuses a per-broker minimum ISR with the ELR too.
            return Err(MetadataError::InvalidConfig {
                key: key.to_owned(),
                value: value.map(str::to_owned),
                reason: String::from(
                    "cluster-wide only: set it on the default broker resource (no broker id)",
                ),
            });
        }
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::BrokerConfigChange {
            broker: broker.to_owned(),
            key: key.to_owned(),
            value: value.map(str::to_owned),
        });
        follow_config_change(&mut proposal, None, key);
        Ok(proposal.into_records())
    }

    /// The cluster-level `min.insync.replicas` (the `""` broker resource),
    /// set to this controller's configured value, when the image has none.
    /// Kafka 4.1's controller writes the same record once the ELR is on
    /// (KAFKA-16540), so that every broker and controller judges "under
    /// min ISR" by one value even if their config files differ; from then
    /// on it is changed only cluster-wide, and never removed. Nothing
    /// else follows it: the minimum in force does not change.
    pub fn cluster_min_insync_replicas(&self) -> Vec<MetadataRecord> {
        let cluster = self.image.broker_configs().get("");
        if cluster.is_some_and(|configs| configs.contains_key(MIN_INSYNC_REPLICAS)) {
            return Vec::new();
        }
        vec![MetadataRecord::BrokerConfigChange {
            broker: String::new(),
            key: MIN_INSYNC_REPLICAS.to_owned(),
            value: Some(self.config.min_insync_replicas.to_string()),
        }]
    }

    /// Sets (`Some`) or removes (`None`) a topic config.
    pub fn alter_topic_config(
        &self,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        if self.image.topic_by_name(name).is_none() {
            return Err(MetadataError::UnknownTopic {
                name: name.to_owned(),
            });
        }
        check_config(key, value)?;
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::ConfigChange {
            topic: name.to_owned(),
            key: key.to_owned(),
            value: value.map(str::to_owned),
        });
        follow_config_change(&mut proposal, Some(name), key);
        Ok(proposal.into_records())
    }
}

/// The configs the controller's elections read.
const ELECTION_KEYS: [&str; 2] = [UNCLEAN_LEADER_ELECTION_ENABLE, MIN_INSYNC_REPLICAS];

/// What a change of config `key` (of topic `topic`, or cluster-wide when
/// `None`), already in `proposal`, does to the partitions it governs (see
/// the module doc).
fn follow_config_change(proposal: &mut Proposal, topic: Option<&str>, key: &str) {
    let in_scope: Vec<([u8; 16], i32)> = proposal
        .image()
        .partitions()
        .filter(|(t, _, _)| topic.is_none_or(|name| t.name == name))
        .filter(|(_, _, state)| match key {
            UNCLEAN_LEADER_ELECTION_ENABLE => state.leader == NO_LEADER,
            MIN_INSYNC_REPLICAS => {
                !state.eligible_leader_replicas.is_empty() || !state.last_known_elr.is_empty()
            }
            _ => false,
        })
        .map(|(t, partition, _)| (t.topic_id, partition))
        .collect();
    for (topic_id, partition) in in_scope {
        let image = proposal.image();
        let change = match key {
            UNCLEAN_LEADER_ELECTION_ENABLE => image.topic(&topic_id).and_then(|topic| {
                elect_without(image, proposal.config(), topic, partition, &BTreeSet::new())
            }),
            _ => Some(PartitionChangeRecord {
                topic_id,
                partition,
                leader: None,
                isr: None,
                replicas: None,
                eligible_leader_replicas: Some(Vec::new()),
                last_known_elr: Some(Vec::new()),
            }),
        };
        if let Some(change) = change {
            proposal.push(MetadataRecord::PartitionChange(change));
        }
    }
}

/// The config checks the metadata layer owns: a name, and a boolean for the
/// one config its elections read. (The engine checks the log configs.)
fn check_config(key: &str, value: Option<&str>) -> Result<(), MetadataError> {
    let refuse = |reason: &str| MetadataError::InvalidConfig {
        key: key.to_owned(),
        value: value.map(str::to_owned),
        reason: reason.to_owned(),
    };
    if key.is_empty() {
        return Err(refuse("empty config name"));
    }
    if key == UNCLEAN_LEADER_ELECTION_ENABLE
        && !matches!(value, None | Some("true") | Some("false"))
    {
        return Err(refuse("must be true or false"));
    }
    if key == MIN_INSYNC_REPLICAS
        && value.is_some_and(|v| v.trim().parse::<u32>().map_or(true, |n| n < 1))
    {
        return Err(refuse("must be a whole number of at least 1"));
    }
    Ok(())
}

/// Registered, unfenced brokers with their racks, less the cordoned ones
/// (KIP-1066): new partitions are placed on these.
fn live_brokers(image: &MetadataImage) -> Vec<PlacementBroker> {
    image
        .brokers()
        .values()
        .filter(|broker| !broker.fenced && !broker.cordoned)
        .map(|broker| PlacementBroker {
            id: broker.broker_id,
            rack: broker.rack.clone(),
        })
        .collect()
}

fn registered_brokers(image: &MetadataImage) -> BTreeSet<BrokerId> {
    image.brokers().keys().copied().collect()
}

/// `Partition` records for new partitions numbered from `first`: ISR the
/// live replicas, leader the first of them.
fn push_new_partitions(
    proposal: &mut Proposal,
    topic_id: TopicId,
    first: i32,
    replicas: Vec<Vec<BrokerId>>,
) -> Result<(), MetadataError> {
    let mut records = Vec::with_capacity(replicas.len());
    for (partition, replicas) in (first..).zip(replicas) {
        let isr: Vec<BrokerId> = replicas
            .iter()
            .copied()
            .filter(|&broker| proposal.image().is_live(broker))
            .collect();
        let Some(&leader) = isr.first() else {
            return Err(MetadataError::NoLiveReplica {
                partition,
                replicas,
            });
        };
        records.push(PartitionRecord {
            topic_id,
            partition,
            replicas,
            isr,
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        });
    }
    // All checked before the first is proposed: a refused request proposes nothing.
    for record in records {
        proposal.push(MetadataRecord::Partition(record));
    }
    Ok(())
}

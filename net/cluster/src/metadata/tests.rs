//! Property tests of the whole state machine: random sequences of controller
//! decisions (register, heartbeat, fence, unfence, create/delete topics and
//! partitions, AlterPartition, controlled shutdown, unregister, producer
//! ids, preferred election, ElectLeaders, config changes, remote log
//! segment copies, transitions and purges) with random time steps.
//!
//! After every step: the image's invariants hold, no epoch went back and
//! every partition change bumped the partition epoch, a leader from outside
//! the ISR and the eligible leader replicas came only where unclean
//! election was allowed or asked for, a second image fed
//! the same committed records is equal, every record survives
//! encode → decode; at the end, replaying the whole log into a fresh image
//! gives the same image again. The remote log operations live in
//! `tests/remote_ops.rs`.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::placement::{BrokerId, PlacementSeed};

use super::controller::tests::topic_id;
use super::image::{REMOTE_STORAGE_ENABLE, UNCLEAN_LEADER_ELECTION_ENABLE};
use super::*;

mod remote_ops;

const BROKERS: i32 = 5;
const TOPIC_NAMES: [&str; 3] = ["a", "b", "c"];

#[derive(Clone, Debug)]
enum Op {
    Register {
        broker: BrokerId,
        new_incarnation: bool,
    },
    Heartbeat {
        broker: BrokerId,
        caught_up: bool,
        want_fence: bool,
        cordoned: bool,
        /// Which partitions it says it cannot append to: none (0), or
        /// those whose `(index + unwritable) % 3 == 0`.
        unwritable: u8,
    },
    Advance {
        ms: i64,
    },
    FenceStale,
    ControlledShutdown {
        broker: BrokerId,
    },
    Unregister {
        broker: BrokerId,
    },
    CreateTopic {
        name: usize,
        partitions: i32,
        replication_factor: i16,
        seed: (usize, usize),
    },
    CreateExplicit {
        name: usize,
        replicas: Vec<Vec<BrokerId>>,
    },
    DeleteTopic {
        name: usize,
    },
    CreatePartitions {
        name: usize,
        add: i32,
    },
    AlterIsr {
        pick: usize,
        member: usize,
        stale: u8,
    },
    AllocateProducerIds {
        broker: BrokerId,
    },
    PreferredElection,
    SetUnclean {
        name: usize,
        value: Option<bool>,
    },
    SetClusterUnclean {
        value: Option<bool>,
    },
    SetMinIsr {
        name: usize,
        value: Option<u8>,
    },
    ElectLeaders {
        unclean: bool,
        name: Option<usize>,
    },
    /// A leader copies a segment to remote storage (`stale`: 1 at an old
    /// leader epoch, 2 from a follower, 3 leaving a gap).
    RemoteCopy {
        pick: usize,
        length: i64,
        overlap: i64,
        stale: u8,
    },
    /// A leader moves a remote segment to `RemoteSegmentState::ALL[to]`
    /// (`to` of 4 and more: to the state after its own).
    RemoteTransition {
        pick: usize,
        to: u8,
        stale: bool,
    },
    /// A deleted (or live, or unknown) topic's remote data is purged.
    RemotePurge {
        pick: usize,
    },
}

/// The topics with tiered storage: `b` and `c` (of [`TOPIC_NAMES`]).
fn topic_configs(name: usize) -> BTreeMap<String, String> {
    match name {
        0 => BTreeMap::new(),
        _ => BTreeMap::from([(REMOTE_STORAGE_ENABLE.to_owned(), "true".to_owned())]),
    }
}

fn op() -> impl Strategy<Value = Op> {
    let broker = 0..BROKERS;
    let name = 0..TOPIC_NAMES.len();
    prop_oneof![
        3 => (broker.clone(), any::<bool>()).prop_map(|(broker, new_incarnation)| Op::Register { broker, new_incarnation }),
        6 => (broker.clone(), prop::bool::weighted(0.9), prop::bool::weighted(0.1), prop::bool::weighted(0.15), prop_oneof![3 => Just(0u8), 1 => 1u8..4])
            .prop_map(|(broker, caught_up, want_fence, cordoned, unwritable)| Op::Heartbeat { broker, caught_up, want_fence, cordoned, unwritable }),
        3 => (0i64..6_000).prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::FenceStale),
        1 => broker.clone().prop_map(|broker| Op::ControlledShutdown { broker }),
        1 => broker.clone().prop_map(|broker| Op::Unregister { broker }),
        3 => (name.clone(), 1i32..5, 1i16..4, (0usize..10, 0usize..10))
            .prop_map(|(name, partitions, replication_factor, seed)| Op::CreateTopic { name, partitions, replication_factor, seed }),
        1 => (name.clone(), prop::collection::vec(prop::collection::vec(0..BROKERS, 1..3), 1..3))
            .prop_map(|(name, replicas)| Op::CreateExplicit { name, replicas }),
        1 => name.clone().prop_map(|name| Op::DeleteTopic { name }),
        1 => (name.clone(), 1i32..3).prop_map(|(name, add)| Op::CreatePartitions { name, add }),
        5 => (any::<usize>(), any::<usize>(), 0u8..6).prop_map(|(pick, member, stale)| Op::AlterIsr { pick, member, stale }),
        1 => broker.clone().prop_map(|broker| Op::AllocateProducerIds { broker }),
        1 => Just(Op::PreferredElection),
        1 => (name.clone(), prop::option::of(any::<bool>())).prop_map(|(name, value)| Op::SetUnclean { name, value }),
        1 => prop::option::of(any::<bool>()).prop_map(|value| Op::SetClusterUnclean { value }),
        2 => (name.clone(), prop::option::of(1u8..4)).prop_map(|(name, value)| Op::SetMinIsr { name, value }),
        2 => (any::<bool>(), prop::option::of(name)).prop_map(|(unclean, name)| Op::ElectLeaders { unclean, name }),
        4 => (any::<usize>(), 1i64..200, 0i64..50, 0u8..8)
            .prop_map(|(pick, length, overlap, stale)| Op::RemoteCopy { pick, length, overlap, stale }),
        5 => (any::<usize>(), 0u8..8, prop::bool::weighted(0.1))
            .prop_map(|(pick, to, stale)| Op::RemoteTransition { pick, to, stale }),
        2 => any::<usize>().prop_map(|pick| Op::RemotePurge { pick }),
    ]
}

/// The controller's image, a follower's image fed the same records, and the
/// committed log.
struct Model {
    leader: MetadataImage,
    follower: MetadataImage,
    log: Vec<(i64, MetadataRecord)>,
    heartbeats: BrokerHeartbeats,
    config: ControllerConfig,
    now_ms: i64,
    next_topic_id: u8,
    /// How many records of each kind were committed (the coverage test
    /// checks that the random sequences reach every kind).
    kinds: BTreeMap<&'static str, usize>,
}

/// What must never go back, taken before a step.
struct Snapshot {
    partitions: BTreeMap<([u8; 16], i32), PartitionState>,
    broker_epochs: BTreeMap<BrokerId, i64>,
    last_broker_epoch: i64,
    next_producer_id_block_start: i64,
}

impl Model {
    fn new(unclean: bool) -> Self {
        Model {
            leader: MetadataImage::new(),
            follower: MetadataImage::new(),
            log: Vec::new(),
            heartbeats: BrokerHeartbeats::new(),
            config: ControllerConfig {
                unclean_leader_election_enable: unclean,
                ..ControllerConfig::default()
            },
            now_ms: 0,
            next_topic_id: 1,
            kinds: BTreeMap::new(),
        }
    }

    /// A model with a few live brokers, so that topics can be created.
    fn started(unclean: bool) -> Self {
        let mut model = Model::new(unclean);
        for broker in 0..3 {
            model.step(&Op::Register {
                broker,
                new_incarnation: false,
            });
            model.step(&Op::Heartbeat {
                broker,
                caught_up: true,
                want_fence: false,
                cordoned: false,
                unwritable: 0,
            });
        }
        model
    }

    fn commit(&mut self, records: Vec<MetadataRecord>) {
        for record in records {
            let frame = record.encode();
            assert_eq!(MetadataRecord::decode(&frame).as_ref(), Ok(&record));
            // Offsets with gaps, as a Raft log has (leader-change entries).
            let offset = self.leader.last_applied_offset() + 1 + (self.log.len() as i64 % 2);
            assert_eq!(self.leader.apply(offset, &record), Ok(()), "{record:?}");
            assert_eq!(self.follower.apply(offset, &record), Ok(()), "{record:?}");
            *self.kinds.entry(record.kind()).or_default() += 1;
            self.log.push((offset, record));
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            partitions: self
                .leader
                .partitions()
                .map(|(topic, partition, state)| ((topic.topic_id, partition), state.clone()))
                .collect(),
            broker_epochs: self
                .leader
                .brokers()
                .iter()
                .map(|(&id, broker)| (id, broker.broker_epoch))
                .collect(),
            last_broker_epoch: self.leader.last_broker_epoch(),
            next_producer_id_block_start: self.leader.next_producer_id_block_start(),
        }
    }

    fn check_step(&self, before: &Snapshot, op: &Op) {
        self.leader.check_invariants();
        assert_eq!(self.leader, self.follower);
        for (topic, partition, state) in self.leader.partitions() {
            let Some(old) = before.partitions.get(&(topic.topic_id, partition)) else {
                continue;
            };
            let unclean = state.leader != old.leader
                && state.leader != NO_LEADER
                && !old.isr.contains(&state.leader)
                && !old.eligible_leader_replicas.contains(&state.leader);
            if unclean {
                let allowed =
                    controller::election::unclean_allowed(&self.leader, topic, &self.config)
                        || matches!(op, Op::ElectLeaders { unclean: true, .. });
                assert!(
                    allowed,
                    "an unclean leader without leave: {old:?} -> {state:?}"
                );
            }
            assert!(state.leader_epoch >= old.leader_epoch);
            assert!(state.partition_epoch >= old.partition_epoch);
            if state != old {
                assert!(
                    state.partition_epoch > old.partition_epoch,
                    "{old:?} -> {state:?}"
                );
            }
            if state.leader != old.leader {
                assert!(
                    state.leader_epoch > old.leader_epoch,
                    "{old:?} -> {state:?}"
                );
            }
        }
        for (id, broker) in self.leader.brokers() {
            if let Some(&old) = before.broker_epochs.get(id) {
                assert!(broker.broker_epoch >= old);
            }
        }
        assert!(self.leader.last_broker_epoch() >= before.last_broker_epoch);
        assert!(self.leader.next_producer_id_block_start() >= before.next_producer_id_block_start);
        remote_ops::check_remote_log(&self.leader);
    }

    fn epoch(&self, broker: BrokerId) -> i64 {
        self.leader.broker(broker).map_or(-1, |b| b.broker_epoch)
    }

    fn step(&mut self, op: &Op) {
        let before = self.snapshot();
        let controller = Controller::new(&self.leader, &self.config);
        let now_ms = self.now_ms;
        let records: Vec<MetadataRecord> = match op {
            Op::Register {
                broker,
                new_incarnation,
            } => {
                let incarnation = (if *new_incarnation { 0x80 } else { 0x01 }) | *broker as u8;
                let request = BrokerRegistrationRequest {
                    broker_id: *broker,
                    incarnation_id: [incarnation; 16],
                    listeners: vec![],
                    rack: Some(format!("rack-{}", broker % 2)),
                    features: crate::metadata::features::supported_by_this_binary(),
                };
                match controller.register_broker(&mut self.heartbeats, &request, now_ms) {
                    Ok(outcome) => {
                        assert_eq!(outcome.broker_epoch, before.last_broker_epoch + 1);
                        outcome.records
                    }
                    Err(error) => {
                        assert_eq!(
                            error,
                            MetadataError::DuplicateBrokerRegistration { broker_id: *broker }
                        );
                        Vec::new()
                    }
                }
            }
            Op::Heartbeat {
                broker,
                caught_up,
                want_fence,
                cordoned,
                unwritable,
            } => {
                let offset = self.leader.last_applied_offset();
                let picked = (self.leader.partitions().enumerate())
                    .filter(|(index, _)| {
                        *unwritable > 0 && (index + *unwritable as usize).is_multiple_of(3)
                    })
                    .map(|(_, (topic, partition, _))| (topic.topic_id, partition))
                    .collect();
                let request = BrokerHeartbeatRequest {
                    broker_id: *broker,
                    broker_epoch: self.epoch(*broker),
                    current_metadata_offset: if *caught_up { offset } else { -1 },
                    want_fence: *want_fence,
                    want_shutdown: false,
                    cordoned: *cordoned,
                    unwritable: picked,
                };
                controller
                    .heartbeat(&mut self.heartbeats, &request, now_ms)
                    .map(|outcome| outcome.records)
                    .unwrap_or_default()
            }
            Op::Advance { ms } => {
                self.now_ms += ms;
                Vec::new()
            }
            Op::FenceStale => controller.fence_stale_brokers(&mut self.heartbeats, now_ms),
            Op::ControlledShutdown { broker } => controller
                .controlled_shutdown(*broker, self.epoch(*broker))
                .unwrap_or_default(),
            Op::Unregister { broker } => controller
                .unregister_broker(&mut self.heartbeats, *broker)
                .unwrap_or_default(),
            Op::CreateTopic {
                name,
                partitions,
                replication_factor,
                seed,
            } => {
                let request = CreateTopicRequest {
                    name: TOPIC_NAMES[*name].to_owned(),
                    topic_id: topic_id(self.next_topic_id),
                    assignment: TopicAssignment::Placed {
                        partitions: *partitions,
                        replication_factor: *replication_factor,
                        seed: PlacementSeed {
                            start_index: seed.0,
                            shift: seed.1,
                        },
                    },
                    configs: topic_configs(*name),
                };
                self.next_topic_id = self.next_topic_id.wrapping_add(1).max(1);
                controller.create_topic(&request).unwrap_or_default()
            }
            Op::CreateExplicit { name, replicas } => {
                let request = CreateTopicRequest {
                    name: TOPIC_NAMES[*name].to_owned(),
                    topic_id: topic_id(self.next_topic_id),
                    assignment: TopicAssignment::Explicit(
                        (0..).zip(replicas.iter().cloned()).collect(),
                    ),
                    configs: topic_configs(*name),
                };
                self.next_topic_id = self.next_topic_id.wrapping_add(1).max(1);
                controller.create_topic(&request).unwrap_or_default()
            }
            Op::DeleteTopic { name } => controller
                .delete_topic(TOPIC_NAMES[*name])
                .unwrap_or_default(),
            Op::CreatePartitions { name, add } => {
                let name = TOPIC_NAMES[*name];
                let total = self
                    .leader
                    .topic_by_name(name)
                    .map_or(0, |t| t.partition_count())
                    + add;
                controller
                    .create_partitions(name, total, None, PlacementSeed::fixed(*add as usize))
                    .unwrap_or_default()
            }
            Op::AlterIsr {
                pick,
                member,
                stale,
            } => self.alter_isr(*pick, *member, *stale),
            Op::AllocateProducerIds { broker } => controller
                .allocate_producer_ids(*broker, self.epoch(*broker))
                .map(|(block, records)| {
                    assert_eq!(block.first, before.next_producer_id_block_start);
                    records
                })
                .unwrap_or_default(),
            Op::PreferredElection => controller.auto_leader_rebalance(),
            Op::SetUnclean { name, value } => controller
                .alter_topic_config(
                    TOPIC_NAMES[*name],
                    UNCLEAN_LEADER_ELECTION_ENABLE,
                    value.map(|v| if v { "true" } else { "false" }),
                )
                .unwrap_or_default(),
            Op::SetClusterUnclean { value } => controller
                .alter_broker_config(
                    "",
                    UNCLEAN_LEADER_ELECTION_ENABLE,
                    value.map(|v| if v { "true" } else { "false" }),
                )
                .unwrap_or_default(),
            Op::SetMinIsr { name, value } => {
                let value = value.map(|v| v.to_string());
                controller
                    .alter_topic_config(TOPIC_NAMES[*name], "min.insync.replicas", value.as_deref())
                    .unwrap_or_default()
            }
            Op::ElectLeaders { unclean, name } => {
                let election = if *unclean {
                    ElectionType::Unclean
                } else {
                    ElectionType::Preferred
                };
                let asked: Option<Vec<(String, Vec<i32>)>> =
                    name.map(|n| vec![(TOPIC_NAMES[n].to_owned(), vec![0, 1, 2, 9])]);
                controller.elect_leaders(election, asked.as_deref()).records
            }
            Op::RemoteCopy { .. } | Op::RemoteTransition { .. } | Op::RemotePurge { .. } => {
                self.remote_step(op)
            }
        };
        self.commit(records);
        self.check_step(&before, op);
    }

    /// The leader of a random partition drops or adds a random replica,
    /// sometimes with stale epochs (which must be refused).
    fn alter_isr(&self, pick: usize, member: usize, stale: u8) -> Vec<MetadataRecord> {
        let partitions: Vec<_> = self.leader.partitions().collect();
        if partitions.is_empty() {
            return Vec::new();
        }
        let (topic, partition, state) = partitions[pick % partitions.len()];
        if state.leader == NO_LEADER {
            return Vec::new();
        }
        let candidate = state.replicas[member % state.replicas.len()];
        let new_isr: Vec<BrokerId> = if state.isr.contains(&candidate) {
            state
                .isr
                .iter()
                .copied()
                .filter(|&b| b != candidate || b == state.leader)
                .collect()
        } else {
            state.isr.iter().copied().chain([candidate]).collect()
        };
        let request = AlterPartitionRequest {
            broker_id: state.leader,
            broker_epoch: self.epoch(state.leader),
            topic_id: topic.topic_id,
            partition,
            leader_epoch: state.leader_epoch - i32::from(stale == 1),
            partition_epoch: state.partition_epoch - i32::from(stale == 2),
            new_isr,
        };
        let result = Controller::new(&self.leader, &self.config).alter_partition(&request);
        match (stale, result) {
            (1, result) => {
                assert!(
                    matches!(result, Err(MetadataError::FencedLeaderEpoch { .. })),
                    "{result:?}"
                );
                Vec::new()
            }
            (2, result) => {
                assert!(
                    matches!(result, Err(MetadataError::InvalidUpdateVersion { .. })),
                    "{result:?}"
                );
                Vec::new()
            }
            (_, Ok(outcome)) => outcome.records,
            (_, Err(error)) => {
                // Only adding a fenced broker may be refused.
                assert!(
                    matches!(error, MetadataError::IneligibleReplica { broker_id, .. } if !self.leader.is_live(broker_id)),
                    "{error:?}"
                );
                Vec::new()
            }
        }
    }

    /// Replaying the whole log into a fresh image gives the same image.
    fn check_replay(&self) {
        let mut replayed = MetadataImage::new();
        for (offset, record) in &self.log {
            assert_eq!(replayed.apply(*offset, record), Ok(()));
        }
        assert_eq!(replayed, self.leader);
    }
}

fn partition_change() -> impl Strategy<Value = PartitionChangeRecord> {
    let brokers = prop::collection::vec(-1i32..1000, 0..6);
    (
        any::<[u8; 16]>(),
        any::<i32>(),
        prop::option::of(any::<i32>()),
        prop::option::of(brokers.clone()),
        prop::option::of(brokers),
    )
        .prop_map(
            |(topic_id, partition, leader, isr, replicas)| PartitionChangeRecord {
                topic_id,
                partition,
                leader,
                isr,
                replicas,
                eligible_leader_replicas: None,
                last_known_elr: None,
            },
        )
}

fn any_record() -> impl Strategy<Value = MetadataRecord> {
    let text = "[a-zA-Z0-9._é-]{0,12}";
    let brokers = prop::collection::vec(any::<i32>(), 0..6);
    let endpoint =
        (text, text, any::<u16>()).prop_map(|(name, host, port)| Endpoint { name, host, port });
    let feature = (text, any::<i16>(), any::<i16>()).prop_map(|(name, min_level, max_level)| {
        SupportedFeature {
            name,
            min_level,
            max_level,
        }
    });
    prop_oneof![
        (
            any::<i32>(),
            any::<[u8; 16]>(),
            any::<i64>(),
            prop::collection::vec(endpoint, 0..3),
            prop::option::of(text),
            prop::collection::vec(feature, 0..3)
        )
            .prop_map(
                |(broker_id, incarnation_id, broker_epoch, listeners, rack, features)| {
                    MetadataRecord::RegisterBroker {
                        broker_id,
                        incarnation_id,
                        broker_epoch,
                        listeners,
                        rack,
                        features,
                    }
                }
            ),
        (any::<i32>(), any::<i64>()).prop_map(|(broker_id, broker_epoch)| {
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            }
        }),
        (any::<i32>(), any::<i64>()).prop_map(|(broker_id, broker_epoch)| {
            MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            }
        }),
        (any::<i32>(), any::<i64>()).prop_map(|(broker_id, broker_epoch)| {
            MetadataRecord::UnfenceBroker {
                broker_id,
                broker_epoch,
            }
        }),
        (
            text,
            any::<[u8; 16]>(),
            prop::collection::btree_map(text, text, 0..4)
        )
            .prop_map(|(name, topic_id, configs)| MetadataRecord::Topic {
                name,
                topic_id,
                configs
            }),
        any::<[u8; 16]>().prop_map(|topic_id| MetadataRecord::RemoveTopic { topic_id }),
        (
            any::<[u8; 16]>(),
            any::<i32>(),
            brokers.clone(),
            brokers,
            any::<i32>(),
            any::<i32>(),
            any::<i32>()
        )
            .prop_map(
                |(topic_id, partition, replicas, isr, leader, leader_epoch, partition_epoch)| {
                    MetadataRecord::Partition(PartitionRecord {
                        topic_id,
                        partition,
                        replicas,
                        isr,
                        leader,
                        leader_epoch,
                        partition_epoch,
                        eligible_leader_replicas: Vec::new(),
                        last_known_elr: Vec::new(),
                    })
                }
            ),
        partition_change().prop_map(MetadataRecord::PartitionChange),
        (text, text, prop::option::of(text))
            .prop_map(|(topic, key, value)| MetadataRecord::ConfigChange { topic, key, value }),
        (text, text, prop::option::of(text)).prop_map(|(broker, key, value)| {
            MetadataRecord::BrokerConfigChange { broker, key, value }
        }),
        (text, text, prop::option::of(text)).prop_map(|(name, key, value)| {
            MetadataRecord::ClientMetricsConfigChange { name, key, value }
        }),
        (text, text, prop::option::of(text)).prop_map(|(group, key, value)| {
            MetadataRecord::GroupConfigChange { group, key, value }
        }),
        (text, any::<i16>()).prop_map(|(name, level)| MetadataRecord::FeatureLevel { name, level }),
        (any::<i32>(), text, any::<u16>()).prop_map(|(node_id, host, port)| {
            MetadataRecord::RegisterController {
                node_id,
                host,
                port,
            }
        }),
        (any::<i32>(), any::<i64>(), any::<bool>()).prop_map(
            |(broker_id, broker_epoch, cordoned)| {
                MetadataRecord::CordonBroker {
                    broker_id,
                    broker_epoch,
                    cordoned,
                }
            }
        ),
        (
            prop::collection::vec((text, prop::option::of(text)), 0..3),
            text,
            prop::option::of(text)
        )
            .prop_map(|(entity, key, value)| MetadataRecord::ClientQuota {
                entity,
                key,
                value
            }),
        (
            text,
            any::<u8>(),
            prop::collection::vec(any::<u8>(), 0..8),
            any::<i32>(),
            prop::collection::vec(any::<u8>(), 0..8),
        )
            .prop_map(|(name, mechanism, salt, iterations, key)| {
                MetadataRecord::UserScramCredential {
                    name,
                    mechanism,
                    credential: crate::metadata::ScramCredential {
                        salt,
                        iterations,
                        stored_key: key.clone(),
                        server_key: key,
                    },
                }
            }),
        (text, any::<u8>()).prop_map(|(name, mechanism)| {
            MetadataRecord::RemoveUserScramCredential { name, mechanism }
        }),
        remote_ops::any_remote_record(),
        (any::<i32>(), any::<i64>(), any::<i64>()).prop_map(
            |(broker_id, broker_epoch, next_block_start)| {
                MetadataRecord::ProducerIds {
                    broker_id,
                    broker_epoch,
                    next_block_start,
                }
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_decisions_keep_every_invariant(
        ops in prop::collection::vec(op(), 1..120),
        unclean in prop::bool::weighted(0.3),
    ) {
        let mut model = Model::started(unclean);
        for op in &ops {
            model.step(op);
        }
        model.check_replay();
    }

    #[test]
    fn a_snapshot_restores_an_equal_image_that_applies_alike(
        before in prop::collection::vec(op(), 1..100),
        after in prop::collection::vec(op(), 0..40),
        unclean in prop::bool::weighted(0.3),
    ) {
        let mut model = Model::started(unclean);
        for op in &before {
            model.step(op);
        }
        let bytes = model.leader.encode_snapshot();
        let restored = MetadataImage::decode_snapshot(&bytes);
        prop_assert_eq!(restored.as_ref(), Ok(&model.leader));
        let restored = restored.expect("restored");
        // Equal images make equal bytes: the snapshot is deterministic.
        prop_assert_eq!(restored.encode_snapshot(), bytes);
        // The follower goes on from the snapshot; every step compares it
        // with the leader, which never left its log.
        model.follower = restored;
        for op in &after {
            model.step(op);
        }
        prop_assert_eq!(&model.follower, &model.leader);
        model.check_replay();
    }

    #[test]
    fn a_damaged_snapshot_with_a_good_crc_is_refused_or_valid(
        ops in prop::collection::vec(op(), 1..60),
        damage in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        let mut model = Model::started(false);
        for op in &ops {
            model.step(op);
        }
        let mut bytes = model.leader.encode_snapshot();
        let preamble_bytes = 10;
        let body_bytes = bytes.len() - preamble_bytes;
        for (at, flip) in &damage {
            bytes[preamble_bytes + at.index(body_bytes)] ^= flip;
        }
        // Fix the CRC so that the damage reaches the parser and the image's
        // checks; decoding must refuse or give an image that keeps every
        // invariant (decode_snapshot checks them), never panic.
        let crc = crc_fast::crc32_iscsi(&bytes[preamble_bytes..]);
        bytes[6..preamble_bytes].copy_from_slice(&crc.to_be_bytes());
        if let Ok(image) = MetadataImage::decode_snapshot(&bytes) {
            image.check_invariants();
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_snapshot_decoder(
        body in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut bytes = SNAPSHOT_MAGIC.to_vec();
        bytes.extend_from_slice(&SNAPSHOT_FORMAT_VERSION.to_be_bytes());
        bytes.extend_from_slice(&crc_fast::crc32_iscsi(&body).to_be_bytes());
        bytes.extend_from_slice(&body);
        let _ = MetadataImage::decode_snapshot(&bytes);
    }

    #[test]
    fn every_record_round_trips_through_its_bytes(record in any_record()) {
        let frame = record.encode();
        prop_assert_eq!(MetadataRecord::decode(&frame), Ok(record));
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = MetadataRecord::decode(&bytes);
    }
}

/// The random sequences are only worth something if they reach every
/// decision: run a fixed set of them and count what they committed.
#[test]
fn random_sequences_reach_every_record_kind() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(op(), 100..120);
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut leaderless = 0;
    let mut eligible = 0;
    for case in 0..40 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let mut model = Model::started(case % 3 == 0);
        for op in &ops {
            model.step(op);
            leaderless += model
                .leader
                .partitions()
                .filter(|(_, _, s)| s.leader == NO_LEADER)
                .count();
            eligible += model
                .leader
                .partitions()
                .filter(|(_, _, s)| !s.eligible_leader_replicas.is_empty())
                .count();
        }
        model.check_replay();
        for (kind, count) in model.kinds {
            *kinds.entry(kind).or_default() += count;
        }
    }
    for kind in [
        "RegisterBroker",
        "UnregisterBroker",
        "FenceBroker",
        "UnfenceBroker",
        "Topic",
        "RemoveTopic",
        "Partition",
        "PartitionChange",
        "ConfigChange",
        "ProducerIds",
        "RemoteLogSegment",
        "RemoteLogSegmentState",
        "RemoteTopicPurged",
    ] {
        assert!(
            kinds.get(kind).copied().unwrap_or(0) >= 5,
            "{kind}: {kinds:?}"
        );
    }
    assert!(
        leaderless > 0,
        "no sequence left a partition without a leader"
    );
    assert!(eligible > 0, "no sequence made an eligible leader replica");
}

/// The snapshot property test is only worth something if the images it
/// snapshots hold what a snapshot must carry beyond plain records: fenced
/// and unfenced brokers, a highest broker epoch whose broker is gone, a
/// producer-id block taken, topic configs, leaderless partitions, remote
/// segments, deleted topics still to purge. Run a fixed set of sequences,
/// snapshot each image at every step, and count.
#[test]
fn snapshots_of_random_sequences_cover_every_part_of_the_image() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(op(), 60..80);
    let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
    for case in 0..30 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let mut model = Model::started(case % 3 == 0);
        for op in &ops {
            model.step(op);
            let image = &model.leader;
            let restored = MetadataImage::decode_snapshot(&image.encode_snapshot());
            assert_eq!(restored.as_ref(), Ok(image));
            let brokers = image.brokers().values();
            let highest_epoch = brokers.clone().map(|b| b.broker_epoch).max();
            let facts = [
                ("fenced broker", brokers.clone().any(|b| b.fenced)),
                ("unfenced broker", brokers.clone().any(|b| !b.fenced)),
                (
                    "epoch of a gone broker",
                    highest_epoch < Some(image.last_broker_epoch()),
                ),
                ("producer ids", image.next_producer_id_block_start() > 0),
                (
                    "topic configs",
                    image.topics().values().any(|t| !t.configs.is_empty()),
                ),
                (
                    "leaderless partition",
                    image.partitions().any(|(_, _, s)| s.leader == NO_LEADER),
                ),
                (
                    "changed partition",
                    image.partitions().any(|(_, _, s)| s.partition_epoch > 0),
                ),
                (
                    "remote segment",
                    image.partitions().any(|(topic, partition, _)| {
                        image.remote_segments(&topic.topic_id, partition).count() > 0
                    }),
                ),
                ("topic to purge", image.remote_topics_to_purge().count() > 0),
            ];
            for (fact, holds) in facts {
                *seen.entry(fact).or_default() += usize::from(holds);
            }
        }
    }
    assert_eq!(seen.len(), 9);
    assert!(seen.values().all(|&count| count > 0), "{seen:?}");
}

#[test]
fn two_images_fed_the_same_records_are_equal_and_order_matters() {
    let mut model = Model::new(false);
    for broker in 0..4 {
        model.step(&Op::Register {
            broker,
            new_incarnation: false,
        });
        model.step(&Op::Heartbeat {
            broker,
            caught_up: true,
            want_fence: false,
            cordoned: false,
            unwritable: 0,
        });
    }
    model.step(&Op::CreateTopic {
        name: 0,
        partitions: 6,
        replication_factor: 3,
        seed: (1, 2),
    });
    model.step(&Op::AlterIsr {
        pick: 2,
        member: 1,
        stale: 0,
    });
    model.step(&Op::Advance { ms: 9_000 });
    model.step(&Op::Heartbeat {
        broker: 1,
        caught_up: true,
        want_fence: false,
        cordoned: false,
        unwritable: 0,
    });
    model.step(&Op::FenceStale);
    model.step(&Op::AllocateProducerIds { broker: 1 });
    assert!(model.log.len() > 20);
    // Two fresh images fed the same committed log are equal.
    let mut first = MetadataImage::new();
    let mut second = MetadataImage::new();
    for (offset, record) in &model.log {
        first.apply(*offset, record).unwrap();
        second.apply(*offset, record).unwrap();
    }
    assert_eq!(first, second);
    assert_eq!(first, model.leader);
    // A record applied twice is refused (its offset is not after the last),
    // and the image is unchanged.
    let (offset, record) = model.log.last().unwrap().clone();
    let before = first.clone();
    assert!(first.apply(offset, &record).is_err());
    assert_eq!(first, before);
}

#[test]
fn apply_refuses_records_that_break_the_rules_and_changes_nothing() {
    let mut model = Model::new(false);
    for broker in 0..3 {
        model.step(&Op::Register {
            broker,
            new_incarnation: false,
        });
        model.step(&Op::Heartbeat {
            broker,
            caught_up: true,
            want_fence: false,
            cordoned: false,
            unwritable: 0,
        });
    }
    model.step(&Op::CreateTopic {
        name: 0,
        partitions: 2,
        replication_factor: 2,
        seed: (0, 0),
    });
    let image = model.leader.clone();
    let id = image.topic_by_name("a").unwrap().topic_id;
    let leader = image.partition(&id, 0).unwrap().leader;
    let epoch = image.broker(leader).unwrap().broker_epoch;
    let change = |leader, isr: Option<Vec<BrokerId>>| {
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition: 0,
            leader,
            isr,
            replicas: None,
            eligible_leader_replicas: None,
            last_known_elr: None,
        })
    };
    let refused = [
        // A leader may not be fenced while it leads.
        MetadataRecord::FenceBroker {
            broker_id: leader,
            broker_epoch: epoch,
        },
        MetadataRecord::UnregisterBroker {
            broker_id: leader,
            broker_epoch: epoch,
        },
        MetadataRecord::FenceBroker {
            broker_id: 2,
            broker_epoch: 99,
        },
        MetadataRecord::UnfenceBroker {
            broker_id: 1,
            broker_epoch: image.broker(1).unwrap().broker_epoch,
        },
        // Epochs only grow.
        MetadataRecord::RegisterBroker {
            broker_id: 9,
            incarnation_id: [0; 16],
            broker_epoch: 0,
            listeners: vec![],
            rack: None,
            features: Vec::new(),
        },
        MetadataRecord::Topic {
            name: "a".into(),
            topic_id: [7; 16],
            configs: BTreeMap::new(),
        },
        MetadataRecord::Topic {
            name: "z".into(),
            topic_id: [0; 16],
            configs: BTreeMap::new(),
        },
        MetadataRecord::Topic {
            name: "z".into(),
            topic_id: id,
            configs: BTreeMap::new(),
        },
        MetadataRecord::RemoveTopic { topic_id: [7; 16] },
        // Partitions are created in order.
        MetadataRecord::Partition(PartitionRecord {
            topic_id: id,
            partition: 3,
            replicas: vec![0],
            isr: vec![0],
            leader: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        }),
        MetadataRecord::Partition(PartitionRecord {
            topic_id: id,
            partition: 2,
            replicas: vec![0],
            isr: vec![1],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        }),
        change(None, None),
        change(None, Some(vec![])),
        change(Some(7), None),
        change(Some(NO_LEADER), Some(vec![0, 0])),
        change(None, Some(vec![4])),
        change(Some(NO_LEADER), Some(vec![4])),
        MetadataRecord::ConfigChange {
            topic: "nope".into(),
            key: "k".into(),
            value: None,
        },
        MetadataRecord::ConfigChange {
            topic: "a".into(),
            key: String::new(),
            value: None,
        },
        MetadataRecord::ProducerIds {
            broker_id: 0,
            broker_epoch: image.broker(0).unwrap().broker_epoch,
            next_block_start: 0,
        },
    ];
    let mut image = image;
    let offset = image.last_applied_offset() + 1;
    for record in refused {
        let before = image.clone();
        let result = image.apply(offset, &record);
        assert!(
            matches!(result, Err(MetadataError::InvalidRecord { .. })),
            "{record:?} gave {result:?}"
        );
        assert_eq!(image, before, "{record:?}");
    }
    // The leader epoch bumps on a leader change even to the same broker.
    let state = image.partition(&id, 0).unwrap().clone();
    image
        .apply(offset, &change(Some(state.leader), None))
        .unwrap();
    let after = image.partition(&id, 0).unwrap();
    assert_eq!(after.leader_epoch, state.leader_epoch + 1);
    assert_eq!(after.partition_epoch, state.partition_epoch + 1);
}

/// A clone of the image shares every topic with its source, and a change
/// copies only the topic it touches: the image is cloned for every
/// published batch and every decision, and deep clones of thousands of
/// partitions starved heartbeats while topics were created in bulk.
#[test]
fn a_clone_shares_its_topics_and_a_change_copies_only_the_topic_it_touches() {
    let mut model = Model::started(false);
    for name in 0..2 {
        model.step(&Op::CreateTopic {
            name,
            partitions: 4,
            replication_factor: 3,
            seed: (name, 1),
        });
    }
    let before = model.leader.clone();
    let shared = |a: &MetadataImage, b: &MetadataImage| -> Vec<bool> {
        a.topics()
            .iter()
            .map(|(id, topic)| std::sync::Arc::ptr_eq(topic, &b.topics()[id]))
            .collect()
    };
    assert_eq!(shared(&before, &model.leader), vec![true, true]);
    let offset_before = model.log.len();
    model.step(&Op::AlterIsr {
        pick: 0,
        member: 1,
        stale: 0,
    });
    assert!(
        model.log.len() > offset_before,
        "the ISR change was committed"
    );
    let after = shared(&before, &model.leader);
    assert_eq!(
        after.iter().filter(|same| !**same).count(),
        1,
        "exactly the changed topic was copied: {after:?}"
    );
    assert_ne!(before, model.leader);
}

//! Unit tests of each controller decision, on a small cluster whose image
//! applies every proposed record (as if committed at once).

use std::collections::BTreeMap;

use engine::types::TopicId;
use engine::ErrorCode;

use crate::placement::{assign_replicas_to_brokers, BrokerId, PlacementBroker, PlacementSeed};

use super::super::error::MetadataError;
use super::super::heartbeats::BrokerHeartbeats;
use super::super::image::{MetadataImage, PartitionState, UNCLEAN_LEADER_ELECTION_ENABLE};
use super::super::record::{Endpoint, MetadataRecord, NO_LEADER};
use super::*;

/// A controller with its image, committing everything it proposes.
pub(crate) struct Cluster {
    pub(crate) image: MetadataImage,
    pub(crate) heartbeats: BrokerHeartbeats,
    pub(crate) config: ControllerConfig,
    pub(crate) epochs: BTreeMap<BrokerId, i64>,
}

/// A registration of `broker_id` (its incarnation id, one PLAINTEXT
/// listener) with `rack` and `features`.
pub(crate) fn registration(
    broker_id: BrokerId,
    rack: Option<&str>,
    features: Vec<crate::metadata::SupportedFeature>,
) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest {
        broker_id,
        incarnation_id: [broker_id as u8 + 1; 16],
        listeners: vec![Endpoint {
            name: "PLAINTEXT".into(),
            host: format!("broker-{broker_id}"),
            port: 9092,
        }],
        rack: rack.map(str::to_owned),
        features,
    }
}

pub(crate) fn topic_id(n: u8) -> TopicId {
    let mut id = [0u8; 16];
    id[0] = 0xa0;
    id[15] = n;
    id
}

impl Cluster {
    pub(crate) fn new() -> Self {
        Cluster {
            image: MetadataImage::new(),
            heartbeats: BrokerHeartbeats::new(),
            config: ControllerConfig::default(),
            epochs: BTreeMap::new(),
        }
    }

    pub(crate) fn controller(&self) -> Controller<'_> {
        Controller::new(&self.image, &self.config)
    }

    /// Applies records as the next committed offsets.
    pub(crate) fn commit(&mut self, records: &[MetadataRecord]) {
        for record in records {
            let offset = self.image.last_applied_offset() + 1;
            let applied = self.image.apply(offset, record);
            assert_eq!(applied, Ok(()), "{record:?}");
            let frame = record.encode();
            assert_eq!(MetadataRecord::decode(&frame).as_ref(), Ok(record));
        }
        self.image.check_invariants();
    }

    /// Registers a broker and heartbeats it unfenced.
    pub(crate) fn start_broker(&mut self, broker_id: BrokerId, rack: Option<&str>, now_ms: i64) {
        let features = crate::metadata::features::supported_by_this_binary();
        let request = registration(broker_id, rack, features);
        let controller = Controller::new(&self.image, &self.config);
        let outcome = controller
            .register_broker(&mut self.heartbeats, &request, now_ms)
            .unwrap();
        self.commit(&outcome.records);
        self.epochs.insert(broker_id, outcome.broker_epoch);
        let beat = self.beat(broker_id, now_ms).unwrap();
        assert!(!beat.is_fenced);
        assert!(self.image.is_live(broker_id));
    }

    /// A caught-up heartbeat, committing what it decides.
    pub(crate) fn beat(
        &mut self,
        broker_id: BrokerId,
        now_ms: i64,
    ) -> Result<HeartbeatOutcome, MetadataError> {
        let request = BrokerHeartbeatRequest {
            broker_id,
            broker_epoch: self.epochs.get(&broker_id).copied().unwrap_or(-1),
            current_metadata_offset: self.image.last_applied_offset(),
            want_fence: false,
            want_shutdown: false,
            cordoned: false,
            unwritable: Vec::new(),
        };
        let controller = Controller::new(&self.image, &self.config);
        let outcome = controller.heartbeat(&mut self.heartbeats, &request, now_ms)?;
        self.commit(&outcome.records);
        Ok(outcome)
    }

    pub(crate) fn create(&mut self, name: &str, id: u8, partitions: i32, replication_factor: i16) {
        let request = CreateTopicRequest {
            name: name.into(),
            topic_id: topic_id(id),
            assignment: TopicAssignment::Placed {
                partitions,
                replication_factor,
                seed: PlacementSeed::fixed(0),
            },
            configs: BTreeMap::new(),
        };
        let records = self.controller().create_topic(&request).unwrap();
        self.commit(&records);
    }

    pub(crate) fn state(&self, id: u8, partition: i32) -> PartitionState {
        self.image
            .partition(&topic_id(id), partition)
            .unwrap()
            .clone()
    }

    pub(crate) fn fence_stale(&mut self, now_ms: i64) -> Vec<MetadataRecord> {
        let controller = Controller::new(&self.image, &self.config);
        let records = controller.fence_stale_brokers(&mut self.heartbeats, now_ms);
        self.commit(&records);
        records
    }

    pub(crate) fn alter(
        &mut self,
        id: u8,
        partition: i32,
        new_isr: Vec<BrokerId>,
    ) -> Result<AlterPartitionOutcome, MetadataError> {
        let state = self.state(id, partition);
        let request = AlterPartitionRequest {
            broker_id: state.leader,
            broker_epoch: self.epochs[&state.leader],
            topic_id: topic_id(id),
            partition,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            new_isr,
        };
        let outcome = self.controller().alter_partition(&request)?;
        self.commit(&outcome.records);
        Ok(outcome)
    }
}

pub(crate) fn three_brokers() -> Cluster {
    let mut cluster = Cluster::new();
    for broker in 0..3 {
        cluster.start_broker(broker, None, 0);
    }
    cluster
}

#[test]
fn a_registered_broker_starts_fenced_and_is_unfenced_once_caught_up() {
    let mut cluster = Cluster::new();
    let request = BrokerRegistrationRequest {
        broker_id: 7,
        incarnation_id: [1; 16],
        listeners: vec![],
        rack: Some("r1".into()),
        features: crate::metadata::features::supported_by_this_binary(),
    };
    let outcome = Controller::new(&cluster.image, &cluster.config)
        .register_broker(&mut cluster.heartbeats, &request, 100)
        .unwrap();
    assert_eq!(outcome.broker_epoch, 0);
    cluster.commit(&outcome.records);
    let registration = cluster.image.broker(7).unwrap().clone();
    assert!(registration.fenced);
    assert_eq!(registration.rack.as_deref(), Some("r1"));
    assert_eq!(cluster.heartbeats.last_heartbeat_ms(7), Some(100));

    let mut beat = BrokerHeartbeatRequest {
        broker_id: 7,
        broker_epoch: 0,
        current_metadata_offset: registration.registered_at_offset - 1,
        want_fence: false,
        want_shutdown: false,
        cordoned: false,
        unwritable: Vec::new(),
    };
    // Behind its own registration: stays fenced.
    let behind = Controller::new(&cluster.image, &cluster.config)
        .heartbeat(&mut cluster.heartbeats, &beat, 200)
        .unwrap();
    assert!(behind.records.is_empty() && behind.is_fenced && !behind.is_caught_up);
    // Caught up but asking to stay fenced.
    beat.current_metadata_offset = registration.registered_at_offset;
    beat.want_fence = true;
    let wants_fence = Controller::new(&cluster.image, &cluster.config)
        .heartbeat(&mut cluster.heartbeats, &beat, 300)
        .unwrap();
    assert!(wants_fence.records.is_empty() && wants_fence.is_fenced && wants_fence.is_caught_up);
    // Caught up: unfenced.
    beat.want_fence = false;
    let ready = Controller::new(&cluster.image, &cluster.config)
        .heartbeat(&mut cluster.heartbeats, &beat, 400)
        .unwrap();
    assert_eq!(
        ready.records,
        vec![MetadataRecord::UnfenceBroker {
            broker_id: 7,
            broker_epoch: 0
        }]
    );
    assert!(!ready.is_fenced);
    cluster.commit(&ready.records);
    assert!(cluster.image.is_live(7));
    assert_eq!(cluster.heartbeats.last_heartbeat_ms(7), Some(400));
}

#[test]
fn broker_epochs_grow_across_brokers_and_incarnations() {
    let mut cluster = three_brokers();
    assert_eq!(
        cluster.epochs.values().copied().collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    // Broker 1 restarts (same incarnation id, as start_broker uses): new epoch.
    cluster.start_broker(1, None, 10);
    assert_eq!(cluster.epochs[&1], 3);
    assert_eq!(cluster.image.last_broker_epoch(), 3);
}

#[test]
fn heartbeats_with_a_stale_epoch_or_unknown_id_are_refused() {
    let mut cluster = three_brokers();
    let stale = BrokerHeartbeatRequest {
        broker_id: 1,
        broker_epoch: 0,
        current_metadata_offset: 0,
        want_fence: false,
        want_shutdown: false,
        cordoned: false,
        unwritable: Vec::new(),
    };
    let error = Controller::new(&cluster.image, &cluster.config)
        .heartbeat(&mut cluster.heartbeats, &stale, 1)
        .unwrap_err();
    assert_eq!(
        error,
        MetadataError::StaleBrokerEpoch {
            broker_id: 1,
            broker_epoch: 0,
            current_epoch: 1
        }
    );
    assert_eq!(error.error_code().code(), 77);
    assert_eq!(error.error_code(), ErrorCode::StaleBrokerEpoch);
    let unknown = BrokerHeartbeatRequest {
        broker_id: 9,
        ..stale
    };
    let error = Controller::new(&cluster.image, &cluster.config)
        .heartbeat(&mut cluster.heartbeats, &unknown, 1)
        .unwrap_err();
    assert_eq!(error, MetadataError::BrokerNotRegistered { broker_id: 9 });
    assert_eq!(error.error_code().code(), 102);
}

/// A registration of `broker_id` by another process than the one
/// [`three_brokers`] registered (incarnation id `0xee…`).
fn new_incarnation_of(broker_id: BrokerId) -> BrokerRegistrationRequest {
    let features = crate::metadata::features::supported_by_this_binary();
    BrokerRegistrationRequest {
        incarnation_id: [0xee; 16],
        ..registration(broker_id, None, features)
    }
}

#[test]
fn a_second_incarnation_is_refused_while_the_first_has_a_session() {
    let mut cluster = three_brokers();
    let impostor = new_incarnation_of(2);
    let refused = Controller::new(&cluster.image, &cluster.config).register_broker(
        &mut cluster.heartbeats,
        &impostor,
        8_999,
    );
    assert_eq!(
        refused,
        Err(MetadataError::DuplicateBrokerRegistration { broker_id: 2 })
    );
    assert_eq!(refused.unwrap_err().error_code().code(), 101);
    // Once the session has expired the new incarnation may register.
    let accepted = Controller::new(&cluster.image, &cluster.config)
        .register_broker(&mut cluster.heartbeats, &impostor, 9_000)
        .unwrap();
    cluster.commit(&accepted.records);
    assert_eq!(cluster.image.broker(2).unwrap().incarnation_id, [0xee; 16]);
}

#[test]
fn a_fenced_incarnation_is_replaced_at_once() {
    let mut cluster = three_brokers();
    // Broker 2 stops cleanly: its controlled shutdown fences it, within
    // its session.
    let fenced = cluster
        .controller()
        .controlled_shutdown(2, cluster.epochs[&2])
        .unwrap();
    cluster.commit(&fenced);
    assert!(cluster.image.broker(2).unwrap().fenced);
    let restarted = new_incarnation_of(2);
    // A fenced broker has no session (Kafka's rule): the new process
    // registers without waiting for the old session to expire.
    let accepted = Controller::new(&cluster.image, &cluster.config)
        .register_broker(&mut cluster.heartbeats, &restarted, 1)
        .unwrap();
    cluster.commit(&accepted.records);
    let registration = cluster.image.broker(2).unwrap();
    assert_eq!(registration.incarnation_id, [0xee; 16]);
    assert!(registration.fenced, "a new incarnation starts fenced");
}

#[test]
fn a_restarting_leader_loses_its_leaderships_until_it_rejoins() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 3);
    // Partition 1 is led by broker 1 (replicas [1, 2, 0]).
    assert_eq!(cluster.state(1, 1).leader, 1);
    cluster.start_broker(1, None, 100);
    let state = cluster.state(1, 1);
    assert_eq!(state.leader, 2, "first live ISR member in replica order");
    assert_eq!(state.isr, vec![2, 0]);
    assert_eq!(state.leader_epoch, 1);
    assert_eq!(state.partition_epoch, 1);
}

#[test]
fn a_silent_broker_is_fenced_after_the_session_timeout() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 6, 3);
    let before: Vec<PartitionState> = (0..6).map(|p| cluster.state(1, p)).collect();
    for broker in [1, 2] {
        cluster.beat(broker, 5_000).unwrap();
    }
    assert!(
        cluster.fence_stale(8_999).is_empty(),
        "broker 0 has 1 ms left"
    );
    let records = cluster.fence_stale(9_000);
    assert_eq!(
        records.last(),
        Some(&MetadataRecord::FenceBroker {
            broker_id: 0,
            broker_epoch: 0
        })
    );
    assert!(!cluster.image.is_live(0));
    for (partition, old) in before.iter().enumerate() {
        let new = cluster.state(1, partition as i32);
        assert!(!new.isr.contains(&0), "{new:?}");
        if old.leader == 0 {
            let expected = old.replicas.iter().copied().find(|&b| b != 0).unwrap();
            assert_eq!(new.leader, expected);
            assert_eq!(new.leader_epoch, old.leader_epoch + 1);
        } else {
            assert_eq!(new.leader, old.leader);
            assert_eq!(new.leader_epoch, old.leader_epoch);
        }
        assert_eq!(new.partition_epoch, old.partition_epoch + 1);
    }
    // Nothing more to fence, and a fenced broker is not fenced twice.
    let fenced = cluster
        .fence_stale(20_000)
        .iter()
        .filter(|record| matches!(record, MetadataRecord::FenceBroker { .. }))
        .count();
    assert_eq!(fenced, 2, "1 and 2 expire at 14 000");
    // No ISR member is left alive: no leaders, and the ISRs are not emptied.
    for partition in 0..6 {
        let state = cluster.state(1, partition);
        assert_eq!(state.leader, NO_LEADER);
        assert!(!state.isr.is_empty());
    }
    assert!(cluster.fence_stale(30_000).is_empty());
}

#[test]
fn the_last_isr_member_keeps_its_place_and_leads_again_when_back() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 1, 2);
    // Replicas [0, 1]; the leader drops 1 from the ISR.
    cluster.alter(1, 0, vec![0]).unwrap();
    cluster.beat(1, 5_000).unwrap();
    cluster.beat(2, 5_000).unwrap();
    cluster.fence_stale(9_000);
    let state = cluster.state(1, 0);
    assert_eq!(state.leader, NO_LEADER, "1 is alive but out of sync");
    assert_eq!(state.isr, vec![0], "the ISR is never emptied");
    assert_eq!(state.leader_epoch, 1);
    // Broker 0 restarts and catches up: it leads again, cleanly.
    cluster.start_broker(0, None, 10_000);
    let state = cluster.state(1, 0);
    assert_eq!(state.leader, 0);
    assert_eq!(state.isr, vec![0]);
    assert_eq!(state.leader_epoch, 2);
}

#[test]
fn unclean_election_picks_a_live_out_of_sync_replica_only_when_enabled() {
    for (enabled, expected_leader) in [(false, NO_LEADER), (true, 1)] {
        let mut cluster = three_brokers();
        cluster.create("t", 1, 1, 2);
        let config = cluster
            .controller()
            .alter_topic_config(
                "t",
                UNCLEAN_LEADER_ELECTION_ENABLE,
                Some(&enabled.to_string()),
            )
            .unwrap();
        cluster.commit(&config);
        cluster.alter(1, 0, vec![0]).unwrap();
        cluster.beat(1, 5_000).unwrap();
        cluster.beat(2, 5_000).unwrap();
        cluster.fence_stale(9_000);
        let state = cluster.state(1, 0);
        assert_eq!(state.leader, expected_leader, "unclean={enabled}");
        let expected_isr = if enabled { vec![1] } else { vec![0] };
        assert_eq!(state.isr, expected_isr);
    }
    // The cluster default applies when the topic says nothing.
    let mut cluster = three_brokers();
    cluster.config.unclean_leader_election_enable = true;
    cluster.create("t", 1, 1, 2);
    cluster.alter(1, 0, vec![0]).unwrap();
    cluster.beat(1, 5_000).unwrap();
    cluster.beat(2, 5_000).unwrap();
    cluster.fence_stale(9_000);
    assert_eq!(cluster.state(1, 0).leader, 1);
}

#[test]
fn create_topic_places_over_live_brokers_and_leads_with_the_first_replica() {
    let mut cluster = three_brokers();
    cluster.start_broker(3, None, 0);
    // Broker 3 is fenced by a controlled shutdown: placement skips it.
    let shutdown = cluster
        .controller()
        .controlled_shutdown(3, cluster.epochs[&3])
        .unwrap();
    cluster.commit(&shutdown);
    let request = CreateTopicRequest {
        name: "orders".into(),
        topic_id: topic_id(1),
        assignment: TopicAssignment::Placed {
            partitions: 4,
            replication_factor: 2,
            seed: PlacementSeed {
                start_index: 1,
                shift: 2,
            },
        },
        configs: BTreeMap::from([("retention.ms".to_owned(), "1000".to_owned())]),
    };
    let records = cluster.controller().create_topic(&request).unwrap();
    assert_eq!(records.len(), 5);
    cluster.commit(&records);
    let live: Vec<PlacementBroker> = (0..3)
        .map(|id| PlacementBroker { id, rack: None })
        .collect();
    let expected = assign_replicas_to_brokers(
        &live,
        4,
        2,
        PlacementSeed {
            start_index: 1,
            shift: 2,
        },
        0,
    )
    .unwrap();
    for (partition, replicas) in expected.into_iter().enumerate() {
        let state = cluster.state(1, partition as i32);
        assert_eq!(state.leader, replicas[0]);
        assert_eq!(state.isr, replicas);
        assert_eq!(state.replicas, replicas);
        assert_eq!((state.leader_epoch, state.partition_epoch), (0, 0));
    }
    let topic = cluster.image.topic_by_name("orders").unwrap();
    assert_eq!(
        topic.configs.get("retention.ms").map(String::as_str),
        Some("1000")
    );
}

#[test]
fn create_topic_with_an_explicit_assignment() {
    let mut cluster = three_brokers();
    let shutdown = cluster
        .controller()
        .controlled_shutdown(2, cluster.epochs[&2])
        .unwrap();
    cluster.commit(&shutdown);
    let request = CreateTopicRequest {
        name: "manual".into(),
        topic_id: topic_id(2),
        assignment: TopicAssignment::Explicit(vec![(1, vec![2, 1]), (0, vec![0, 2])]),
        configs: BTreeMap::new(),
    };
    let records = cluster.controller().create_topic(&request).unwrap();
    cluster.commit(&records);
    // Fenced broker 2 is a replica but not in the ISR, and does not lead.
    assert_eq!(cluster.state(2, 0).isr, vec![0]);
    assert_eq!(cluster.state(2, 0).leader, 0);
    assert_eq!(cluster.state(2, 1).leader, 1);
    assert_eq!(cluster.state(2, 1).replicas, vec![2, 1]);
    // Only fenced replicas: nobody could lead.
    let dead = CreateTopicRequest {
        name: "dead".into(),
        topic_id: topic_id(3),
        assignment: TopicAssignment::Explicit(vec![(0, vec![2])]),
        configs: BTreeMap::new(),
    };
    let error = cluster.controller().create_topic(&dead).unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::InvalidReplicaAssignment);
}

#[test]
fn a_retried_create_topic_adds_nothing_and_another_id_is_refused() {
    let mut cluster = three_brokers();
    let request = CreateTopicRequest {
        name: "retried".into(),
        topic_id: topic_id(4),
        assignment: TopicAssignment::Explicit(vec![(0, vec![0, 1])]),
        configs: BTreeMap::new(),
    };
    let records = cluster.controller().create_topic(&request).unwrap();
    assert!(!records.is_empty());
    cluster.commit(&records);
    // The broker retries when the first answer was lost: same id, no records.
    assert_eq!(cluster.controller().create_topic(&request).unwrap(), vec![]);
    let another = CreateTopicRequest {
        topic_id: topic_id(5),
        ..request
    };
    let error = cluster.controller().create_topic(&another).unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::TopicAlreadyExists);
}

#[test]
fn create_topic_refusals_carry_kafkas_codes() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 1, 1);
    cluster.create("my.topic", 4, 1, 1);
    let base = CreateTopicRequest {
        name: "new".into(),
        topic_id: topic_id(9),
        assignment: TopicAssignment::Placed {
            partitions: 1,
            replication_factor: 1,
            seed: PlacementSeed::default(),
        },
        configs: BTreeMap::new(),
    };
    let code = |request: &CreateTopicRequest| {
        Controller::new(&cluster.image, &cluster.config)
            .create_topic(request)
            .unwrap_err()
            .error_code()
    };
    let exists = CreateTopicRequest {
        name: "t".into(),
        ..base.clone()
    };
    assert_eq!(code(&exists), ErrorCode::TopicAlreadyExists);
    let bad_name = CreateTopicRequest {
        name: "a/b".into(),
        ..base.clone()
    };
    assert_eq!(code(&bad_name), ErrorCode::InvalidTopicException);
    let colliding = CreateTopicRequest {
        name: "my_topic".into(),
        ..base.clone()
    };
    assert_eq!(
        cluster.controller().create_topic(&colliding),
        Err(MetadataError::TopicNameCollision {
            name: "my_topic".into(),
            existing: "my.topic".into()
        })
    );
    assert_eq!(code(&colliding), ErrorCode::InvalidTopicException);
    let taken_id = CreateTopicRequest {
        topic_id: topic_id(1),
        ..base.clone()
    };
    assert_eq!(code(&taken_id), ErrorCode::InvalidRequest);
    let too_many = CreateTopicRequest {
        assignment: TopicAssignment::Placed {
            partitions: 1,
            replication_factor: 4,
            seed: PlacementSeed::default(),
        },
        ..base.clone()
    };
    assert_eq!(code(&too_many), ErrorCode::InvalidReplicationFactor);
    let no_partitions = CreateTopicRequest {
        assignment: TopicAssignment::Placed {
            partitions: 0,
            replication_factor: 1,
            seed: PlacementSeed::default(),
        },
        ..base.clone()
    };
    assert_eq!(code(&no_partitions), ErrorCode::InvalidPartitions);
    let unknown_broker = CreateTopicRequest {
        assignment: TopicAssignment::Explicit(vec![(0, vec![5])]),
        ..base.clone()
    };
    assert_eq!(code(&unknown_broker), ErrorCode::InvalidReplicaAssignment);
    let bad_config = CreateTopicRequest {
        configs: BTreeMap::from([(UNCLEAN_LEADER_ELECTION_ENABLE.to_owned(), "yes".to_owned())]),
        ..base.clone()
    };
    assert_eq!(code(&bad_config), ErrorCode::InvalidConfig);
    // Nothing was proposed by any refusal: the image still has two topics.
    assert_eq!(cluster.image.topics().len(), 2);
}

#[test]
fn retried_deletes_and_grows_add_nothing() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 2);
    let seed = PlacementSeed::default();
    let grow = cluster
        .controller()
        .grow_seen_topic("t", 3, 5, None, seed)
        .unwrap();
    assert!(!grow.is_empty());
    cluster.commit(&grow);
    // The retry of that grow finds 5 partitions: nothing more to add.
    assert_eq!(
        cluster.controller().grow_seen_topic("t", 3, 5, None, seed),
        Ok(vec![])
    );
    // Asked by someone who saw 5 already: Kafka's refusal.
    let error = cluster
        .controller()
        .grow_seen_topic("t", 5, 5, None, seed)
        .unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::InvalidPartitions);
    let delete = (cluster.controller())
        .delete_seen_topic("t", &topic_id(1))
        .unwrap();
    assert!(!delete.is_empty());
    cluster.commit(&delete);
    let retried = cluster.controller().delete_seen_topic("t", &topic_id(1));
    assert_eq!(retried, Ok(vec![]));
    // A topic of the same name created since is not deleted by the retry.
    cluster.create("t", 2, 1, 1);
    let again = cluster.controller().delete_seen_topic("t", &topic_id(1));
    assert_eq!(again, Ok(vec![]));
}

#[test]
fn delete_topic_removes_it_and_frees_the_name() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 2);
    let records = cluster.controller().delete_topic("t").unwrap();
    assert_eq!(
        records,
        vec![MetadataRecord::RemoveTopic {
            topic_id: topic_id(1)
        }]
    );
    cluster.commit(&records);
    assert!(cluster.image.topic_by_name("t").is_none());
    assert_eq!(
        cluster.controller().delete_topic("t"),
        Err(MetadataError::UnknownTopic { name: "t".into() })
    );
    cluster.create("t", 2, 1, 1);
    assert_eq!(
        cluster.image.topic_by_name("t").unwrap().topic_id,
        topic_id(2)
    );
}

#[test]
fn create_partitions_continues_the_numbering_with_the_same_replication_factor() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 2, 2);
    let seed = PlacementSeed::fixed(0);
    let error = cluster
        .controller()
        .create_partitions("t", 2, None, seed)
        .unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::InvalidPartitions);
    let records = cluster
        .controller()
        .create_partitions("t", 5, None, seed)
        .unwrap();
    assert_eq!(records.len(), 3);
    cluster.commit(&records);
    let live: Vec<PlacementBroker> = (0..3)
        .map(|id| PlacementBroker { id, rack: None })
        .collect();
    let expected = assign_replicas_to_brokers(&live, 3, 2, seed, 2).unwrap();
    for (k, replicas) in expected.into_iter().enumerate() {
        assert_eq!(cluster.state(1, 2 + k as i32).replicas, replicas);
    }
    // Explicit lists: one per new partition, with partition 0's RF.
    let wrong_count = cluster
        .controller()
        .create_partitions("t", 7, Some(&[vec![0, 1]]), seed)
        .unwrap_err();
    assert_eq!(
        wrong_count.error_code(),
        ErrorCode::InvalidReplicaAssignment
    );
    let wrong_rf = cluster
        .controller()
        .create_partitions("t", 6, Some(&[vec![0]]), seed)
        .unwrap_err();
    assert_eq!(wrong_rf.error_code(), ErrorCode::InvalidReplicaAssignment);
    let records = cluster
        .controller()
        .create_partitions("t", 6, Some(&[vec![2, 0]]), seed)
        .unwrap();
    cluster.commit(&records);
    assert_eq!(cluster.state(1, 5).replicas, vec![2, 0]);
    assert_eq!(cluster.state(1, 5).leader, 2);
    let unknown = cluster
        .controller()
        .create_partitions("nope", 6, None, seed);
    assert_eq!(
        unknown,
        Err(MetadataError::UnknownTopic {
            name: "nope".into()
        })
    );
}

#[test]
fn alter_partition_shrinks_and_expands_the_isr() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 1, 3);
    let shrunk = cluster.alter(1, 0, vec![0, 2]).unwrap();
    assert_eq!(shrunk.isr, vec![0, 2]);
    assert_eq!(
        (shrunk.leader, shrunk.leader_epoch, shrunk.partition_epoch),
        (0, 0, 1)
    );
    assert_eq!(cluster.state(1, 0).isr, vec![0, 2]);
    let expanded = cluster.alter(1, 0, vec![0, 2, 1]).unwrap();
    assert_eq!(expanded.partition_epoch, 2);
    // The same ISR again (in any order) changes nothing.
    let same = cluster.alter(1, 0, vec![1, 0, 2]).unwrap();
    assert!(same.records.is_empty());
    assert_eq!(same.partition_epoch, 2);
}

#[test]
fn alter_partition_refuses_stale_and_invalid_requests() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 1, 3);
    cluster.alter(1, 0, vec![0, 1]).unwrap();
    let current = AlterPartitionRequest {
        broker_id: 0,
        broker_epoch: cluster.epochs[&0],
        topic_id: topic_id(1),
        partition: 0,
        leader_epoch: 0,
        partition_epoch: 1,
        new_isr: vec![0],
    };
    let attempt = |request: AlterPartitionRequest| cluster.controller().alter_partition(&request);

    let stale_leader_epoch = attempt(AlterPartitionRequest {
        leader_epoch: 1,
        ..current.clone()
    })
    .unwrap_err();
    assert!(matches!(
        stale_leader_epoch,
        MetadataError::FencedLeaderEpoch {
            current_leader_epoch: 0,
            ..
        }
    ));
    assert_eq!(stale_leader_epoch.error_code().code(), 74);
    let stale_partition_epoch = attempt(AlterPartitionRequest {
        partition_epoch: 0,
        ..current.clone()
    })
    .unwrap_err();
    assert_eq!(
        stale_partition_epoch.error_code(),
        ErrorCode::InvalidUpdateVersion
    );
    let not_leader = attempt(AlterPartitionRequest {
        broker_id: 1,
        broker_epoch: cluster.epochs[&1],
        ..current.clone()
    })
    .unwrap_err();
    assert_eq!(not_leader.error_code(), ErrorCode::InvalidRequest);
    let stale_broker = attempt(AlterPartitionRequest {
        broker_epoch: 99,
        ..current.clone()
    })
    .unwrap_err();
    assert_eq!(stale_broker.error_code().code(), 77);
    let without_leader = attempt(AlterPartitionRequest {
        new_isr: vec![1],
        ..current.clone()
    })
    .unwrap_err();
    assert_eq!(without_leader.error_code(), ErrorCode::InvalidRequest);
    let repeated = attempt(AlterPartitionRequest {
        new_isr: vec![0, 0],
        ..current.clone()
    })
    .unwrap_err();
    assert_eq!(repeated.error_code(), ErrorCode::InvalidRequest);
    let unknown_partition = attempt(AlterPartitionRequest {
        partition: 3,
        ..current.clone()
    })
    .unwrap_err();
    assert_eq!(
        unknown_partition.error_code(),
        ErrorCode::UnknownTopicOrPartition
    );
    let unknown_topic = attempt(AlterPartitionRequest {
        topic_id: topic_id(8),
        ..current.clone()
    })
    .unwrap_err();
    assert_eq!(unknown_topic.error_code(), ErrorCode::UnknownTopicId);
    // A fenced broker may not join the ISR.
    let shutdown = cluster
        .controller()
        .controlled_shutdown(2, cluster.epochs[&2])
        .unwrap();
    cluster.commit(&shutdown);
    let fenced = cluster.alter(1, 0, vec![0, 1, 2]).unwrap_err();
    assert!(matches!(
        fenced,
        MetadataError::IneligibleReplica { broker_id: 2, .. }
    ));
    assert_eq!(fenced.error_code().code(), 107);
    // Nor may a broker that is not a replica.
    cluster.start_broker(5, None, 0);
    let stranger = cluster.alter(1, 0, vec![0, 5]).unwrap_err();
    assert!(matches!(
        stranger,
        MetadataError::IneligibleReplica { broker_id: 5, .. }
    ));
}

#[test]
fn controlled_shutdown_moves_leaderships_first_then_fences() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 2);
    let led_by_1: Vec<i32> = (0..3)
        .filter(|&p| cluster.state(1, p).leader == 1)
        .collect();
    assert!(!led_by_1.is_empty());
    let request = BrokerHeartbeatRequest {
        broker_id: 1,
        broker_epoch: cluster.epochs[&1],
        current_metadata_offset: cluster.image.last_applied_offset(),
        want_fence: false,
        want_shutdown: true,
        cordoned: false,
        unwritable: Vec::new(),
    };
    let outcome = Controller::new(&cluster.image, &cluster.config)
        .heartbeat(&mut cluster.heartbeats, &request, 50)
        .unwrap();
    assert!(outcome.should_shut_down && outcome.is_fenced);
    assert!(matches!(
        outcome.records.last(),
        Some(MetadataRecord::FenceBroker { broker_id: 1, .. })
    ));
    cluster.commit(&outcome.records);
    for partition in 0..3 {
        let state = cluster.state(1, partition);
        assert_ne!(state.leader, 1);
        assert!(!state.isr.contains(&1));
        assert_ne!(
            state.leader, NO_LEADER,
            "every partition had another ISR member"
        );
    }
    // Asking again changes nothing.
    let again = cluster
        .controller()
        .controlled_shutdown(1, cluster.epochs[&1])
        .unwrap();
    assert!(again.is_empty());
}

#[test]
fn producer_id_blocks_are_monotonic_and_never_overlap() {
    let mut cluster = three_brokers();
    let mut last = -1;
    for broker in [0, 1, 0, 2] {
        let (block, records) = cluster
            .controller()
            .allocate_producer_ids(broker, cluster.epochs[&broker])
            .unwrap();
        assert_eq!(block.first, last + 1);
        assert_eq!(block.len(), 1000);
        cluster.commit(&records);
        assert_eq!(cluster.image.next_producer_id_block_start(), block.last + 1);
        last = block.last;
    }
    assert_eq!(last, 3999);
    let stale = cluster
        .controller()
        .allocate_producer_ids(0, 77)
        .unwrap_err();
    assert_eq!(stale.error_code().code(), 77);
}

#[test]
fn auto_rebalance_returns_leadership_to_the_first_replica() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 3);
    cluster.beat(1, 5_000).unwrap();
    cluster.beat(2, 5_000).unwrap();
    cluster.fence_stale(9_000);
    assert_ne!(cluster.state(1, 0).leader, 0);
    // Broker 0 comes back; it is not in any ISR yet, so it cannot lead.
    cluster.start_broker(0, None, 9_500);
    assert!(cluster.controller().auto_leader_rebalance().is_empty());
    // The leaders add it back to their ISRs.
    for partition in 0..3 {
        let mut isr = cluster.state(1, partition).isr;
        isr.push(0);
        cluster.alter(1, partition, isr).unwrap();
    }
    let records = cluster.controller().auto_leader_rebalance();
    cluster.commit(&records);
    for partition in 0..3 {
        let state = cluster.state(1, partition);
        assert_eq!(state.leader, state.replicas[0]);
    }
    assert!(cluster.controller().auto_leader_rebalance().is_empty());
}

#[test]
fn unregistering_moves_leaderships_and_keeps_the_replica_listed() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 2);
    let records = Controller::new(&cluster.image, &cluster.config)
        .unregister_broker(&mut cluster.heartbeats, 0)
        .unwrap();
    cluster.commit(&records);
    assert!(cluster.image.broker(0).is_none());
    assert_eq!(cluster.heartbeats.last_heartbeat_ms(0), None);
    let holds_0 = (0..3)
        .filter(|&p| cluster.state(1, p).replicas.contains(&0))
        .count();
    assert!(holds_0 > 0);
    for partition in 0..3 {
        assert!(!cluster.state(1, partition).isr.contains(&0));
    }
}

#[test]
fn a_new_controller_gives_every_broker_a_full_session() {
    let mut cluster = three_brokers();
    // The new controller heard from nobody; start_sessions at 20 000.
    cluster.heartbeats = BrokerHeartbeats::new();
    cluster.heartbeats.start_sessions(&cluster.image, 20_000);
    assert!(cluster.fence_stale(28_999).is_empty());
    assert_eq!(cluster.fence_stale(29_000).len(), 3);
    // A controller that skipped start_sessions starts them on its first check.
    let mut fresh = three_brokers();
    fresh.heartbeats = BrokerHeartbeats::new();
    assert!(fresh.fence_stale(50_000).is_empty());
    assert_eq!(fresh.fence_stale(59_000).len(), 3);
}

#[test]
fn a_broker_known_dead_is_fenced_at_once_and_a_live_one_comes_back_by_heartbeat() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 3);
    let leaders: Vec<BrokerId> = (0..3).map(|p| cluster.state(1, p).leader).collect();
    assert!(leaders.contains(&0));
    let records = {
        let controller = Controller::new(&cluster.image, &cluster.config);
        controller.fence_brokers_now(&mut cluster.heartbeats, &[0, 7])
    };
    cluster.commit(&records);
    assert!(
        !cluster.image.is_live(0),
        "fenced without waiting for its session"
    );
    for p in 0..3 {
        let state = cluster.state(1, p);
        assert_ne!(state.leader, 0);
        assert!(!state.isr.contains(&0));
    }
    assert_eq!(cluster.heartbeats.last_heartbeat_ms(0), None);
    // Fencing it again is nothing.
    let again = Controller::new(&cluster.image, &cluster.config)
        .fence_brokers_now(&mut cluster.heartbeats, &[0]);
    assert!(again.is_empty());
    // It was alive after all: its next heartbeat unfences it.
    let beat = cluster.beat(0, 10).unwrap();
    assert!(!beat.is_fenced);
    assert!(cluster.image.is_live(0));
}

/// A heartbeat of `broker_id` saying whether its dirs are all cordoned.
fn beat_cordoned(cluster: &mut Cluster, broker_id: BrokerId, cordoned: bool) {
    beat_with(cluster, broker_id, cordoned, Vec::new());
}

/// A heartbeat of `broker_id` with its cordon flag and the partitions it
/// cannot append to, committing what it decides; those records.
fn beat_with(
    cluster: &mut Cluster,
    broker_id: BrokerId,
    cordoned: bool,
    unwritable: Vec<([u8; 16], i32)>,
) -> Vec<MetadataRecord> {
    let request = BrokerHeartbeatRequest {
        broker_id,
        broker_epoch: cluster.epochs[&broker_id],
        current_metadata_offset: cluster.image.last_applied_offset(),
        want_fence: false,
        want_shutdown: false,
        cordoned,
        unwritable,
    };
    let outcome = Controller::new(&cluster.image, &cluster.config)
        .heartbeat(&mut cluster.heartbeats, &request, 0)
        .unwrap();
    cluster.commit(&outcome.records);
    outcome.records
}

#[test]
fn a_broker_that_cannot_append_hands_its_leaderships_and_isr_places_over() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 3);
    let led: Vec<i32> = (0..3)
        .filter(|&p| cluster.state(1, p).leader == 0)
        .collect();
    assert!(!led.is_empty(), "broker 0 leads a partition");
    let all: Vec<([u8; 16], i32)> = (0..3).map(|p| (topic_id(1), p)).collect();
    // Broker 0's disk is full: it leads nothing and is in no ISR.
    assert!(!beat_with(&mut cluster, 0, false, all.clone()).is_empty());
    for partition in 0..3 {
        let state = cluster.state(1, partition);
        assert_ne!(state.leader, 0, "{state:?}");
        assert!(!state.isr.contains(&0), "{state:?}");
    }
    // Said again: nothing more to change.
    assert!(beat_with(&mut cluster, 0, false, all.clone()).is_empty());
    // Broker 1's too, and broker 2 would be the last writable member:
    // broker 1 goes; then broker 2's as well, and a partition whose every
    // ISR member cannot append keeps its leader (reads go on).
    beat_with(&mut cluster, 1, false, all.clone());
    for partition in 0..3 {
        assert_eq!(cluster.state(1, partition).isr, vec![2]);
    }
    assert!(beat_with(&mut cluster, 2, false, all).is_empty());
    assert_eq!(cluster.state(1, 0).leader, 2);
    // Space again: nothing reported, and the leader may put them back.
    beat_with(&mut cluster, 0, false, Vec::new());
    assert!(cluster
        .heartbeats
        .unwritable_at(topic_id(1), 0)
        .contains(&1));
    assert!(!cluster
        .heartbeats
        .unwritable_at(topic_id(1), 0)
        .contains(&0));
    assert!(cluster.alter(1, 0, vec![2, 0]).is_ok());
}

#[test]
fn a_move_off_a_full_broker_keeps_min_insync_replicas_in_the_isr() {
    let mut cluster = three_brokers();
    cluster.config.min_insync_replicas = 2;
    cluster.create("t", 1, 3, 3);
    let all: Vec<([u8; 16], i32)> = (0..3).map(|p| (topic_id(1), p)).collect();
    // Broker 0 full: two members stay, so it leaves.
    beat_with(&mut cluster, 0, false, all.clone());
    let isr_of = |cluster: &Cluster, partition| {
        let mut isr = cluster.state(1, partition).isr.clone();
        isr.sort_unstable();
        isr
    };
    for partition in 0..3 {
        assert_eq!(isr_of(&cluster, partition), vec![1, 2]);
    }
    // Broker 1 full too: taking it out would leave one member, below the
    // minimum (writes are refused either way, and the lone leader's high
    // watermark could hide what the old one had acknowledged): no move.
    assert!(beat_with(&mut cluster, 1, false, all).is_empty());
    for partition in 0..3 {
        assert_eq!(isr_of(&cluster, partition), vec![1, 2]);
        assert_ne!(cluster.state(1, partition).leader, 0);
    }
}

#[test]
fn a_cordoned_broker_keeps_its_replicas_and_gets_no_new_ones() {
    let mut cluster = Cluster::new();
    for broker in 1..=3 {
        cluster.start_broker(broker, None, 0);
    }
    cluster.create("before", 1, 6, 3);
    beat_cordoned(&mut cluster, 3, true);
    assert!(cluster.image.broker(3).unwrap().cordoned);
    // Its replicas stay, and it stays live and in the ISRs.
    assert!(cluster.state(1, 0).replicas.contains(&3));
    assert!(cluster.image.is_live(3));
    // New partitions go to the others only; three replicas cannot be
    // placed on two brokers.
    cluster.create("after", 2, 6, 2);
    for partition in 0..6 {
        assert!(!cluster.state(2, partition).replicas.contains(&3));
    }
    let three = CreateTopicRequest {
        name: "three".into(),
        topic_id: topic_id(3),
        assignment: TopicAssignment::Placed {
            partitions: 1,
            replication_factor: 3,
            seed: PlacementSeed::fixed(0),
        },
        configs: BTreeMap::new(),
    };
    assert!(cluster.controller().create_topic(&three).is_err());
    // The same heartbeat again changes nothing; uncordoned, it is placed on.
    beat_cordoned(&mut cluster, 3, true);
    beat_cordoned(&mut cluster, 3, false);
    assert!(!cluster.image.broker(3).unwrap().cordoned);
    let records = cluster.controller().create_topic(&three).unwrap();
    cluster.commit(&records);
    // A snapshot keeps the flag.
    beat_cordoned(&mut cluster, 2, true);
    let restored = MetadataImage::decode_snapshot(&cluster.image.encode_snapshot()).unwrap();
    assert!(restored.broker(2).unwrap().cordoned);
}

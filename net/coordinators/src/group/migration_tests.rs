//! Scenario tests of online migration: a live classic group that a
//! KIP-848 member joins turns KIP-848 and keeps serving its classic
//! members; once the last KIP-848 member leaves it turns classic again.
//! Every step checks that no partition is held by two members.

use engine::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

use super::consumer::ConsumerHeartbeatRequest;
use super::consumer_protocol::{encode_subscription, parse_assignment};
use super::coordinator::{JoinOutcome, OffsetCommitRequest, SyncOutcome};
use super::*;

const GROUP: &str = "g";

/// Topic "t" has 6 partitions.
fn topics(name: &str) -> Option<TopicInfo> {
    (name == "t").then_some(TopicInfo {
        id: [7; 16],
        partitions: 6,
    })
}

fn partitions(list: &[i32]) -> BTreeSet<TopicPartition> {
    list.iter().map(|p| TopicPartition::new("t", *p)).collect()
}

/// A coordinator, its clock and every record it wrote.
struct World {
    c: GroupCoordinator,
    now_ms: i64,
    token: u64,
    log: Vec<Record>,
}

/// What each member holds now: classic members by their last SyncGroup
/// (with their generation), KIP-848 members by their last assignment.
#[derive(Default)]
struct Holdings {
    classic: BTreeMap<String, (i32, BTreeSet<TopicPartition>)>,
    kip848: BTreeMap<String, (i32, BTreeSet<TopicPartition>)>,
}

/// The first member of `members`, with what it holds.
fn first(
    members: &BTreeMap<String, (i32, BTreeSet<TopicPartition>)>,
) -> (String, (i32, BTreeSet<TopicPartition>)) {
    let (id, held) = members.first_key_value().expect("a member");
    (id.clone(), held.clone())
}

impl Holdings {
    /// Panics if a partition is held twice.
    fn assert_exclusive(&self) {
        let mut seen = BTreeSet::new();
        for (_, held) in self.classic.values().chain(self.kip848.values()) {
            for tp in held {
                assert!(seen.insert(tp.clone()), "{tp:?} is held twice");
            }
        }
    }

    fn all(&self) -> Vec<usize> {
        (self.classic.values().chain(self.kip848.values()))
            .map(|(_, held)| held.len())
            .collect()
    }
}

impl World {
    fn new(policy: MigrationPolicy) -> Self {
        let config = GroupConfig {
            initial_rebalance_delay_ms: 0,
            migration_policy: policy,
            ..GroupConfig::default()
        };
        Self {
            c: GroupCoordinator::new(config),
            now_ms: 1_000,
            token: 0,
            log: Vec::new(),
        }
    }

    fn join(&mut self, member_id: &str, owned: &BTreeSet<TopicPartition>) -> JoinOutcome {
        let owned: Vec<(&str, i32)> = owned.iter().map(|tp| ("t", tp.partition)).collect();
        let req = JoinRequest {
            group_id: GROUP.into(),
            member_id: member_id.into(),
            client_id: "classic".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), encode_subscription(1, &["t"], &owned))],
            require_known_member_id: true,
            supports_skip_assignment: true,
            ..JoinRequest::default()
        };
        self.token += 1;
        let (outcome, records) =
            (self.c).join_group(self.now_ms, self.token, req, (&topics, &|_| Vec::new()));
        self.log.extend(records);
        outcome
    }

    fn sync(
        &mut self,
        member_id: &str,
        generation_id: i32,
        assignments: Vec<(String, Vec<u8>)>,
    ) -> SyncOutcome {
        let req = SyncRequest {
            group_id: GROUP.into(),
            generation_id,
            member_id: member_id.into(),
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments,
            ..SyncRequest::default()
        };
        self.token += 1;
        let (outcome, records) = self.c.sync_group(self.now_ms, self.token, req);
        self.log.extend(records);
        outcome
    }

    fn beat(&mut self, member_id: &str, generation_id: i32) -> ErrorCode {
        let req = HeartbeatRequest {
            group_id: GROUP.into(),
            generation_id,
            member_id: member_id.into(),
            group_instance_id: None,
        };
        self.c.heartbeat(self.now_ms, &req)
    }

    fn kip848(
        &mut self,
        member_id: &str,
        epoch: i32,
        owned: &BTreeSet<TopicPartition>,
    ) -> ConsumerHeartbeatResponse {
        let req = ConsumerHeartbeatRequest {
            group_id: GROUP.into(),
            member_id: member_id.into(),
            member_epoch: epoch,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            owned_partitions: Some(owned.iter().cloned().collect()),
            client_id: "kip848".into(),
            ..ConsumerHeartbeatRequest::default()
        };
        let (r, records) = self.c.consumer_heartbeat(self.now_ms, &req, &topics);
        self.log.extend(records);
        r
    }

    /// A new coordinator that replayed the whole log.
    fn moved(&self) -> World {
        let mut next = World::new(self.c.config().migration_policy);
        next.now_ms = self.now_ms;
        for (key, value) in &self.log {
            next.c.replay(key, value.as_deref()).expect("replays");
        }
        assert_eq!(next.c.finish_replay(self.now_ms, &|_| true), Vec::new());
        next.log = self.log.clone();
        next
    }
}

fn joined(outcome: JoinOutcome) -> JoinResponse {
    match outcome {
        JoinOutcome::Respond(r) => r,
        JoinOutcome::Pending => panic!("a join answered later"),
    }
}

fn synced(outcome: SyncOutcome) -> SyncResponse {
    match outcome {
        SyncOutcome::Respond(r) => r,
        SyncOutcome::Pending => panic!("a sync answered later"),
    }
}

fn assignment(list: &[i32]) -> Vec<u8> {
    super::consumer_protocol::encode_assignment(
        &encode_subscription(1, &["t"], &[]),
        &partitions(list),
    )
}

/// A Stable classic group: `a` holds 0–2 and `b` 3–5.
fn classic_group_of_two(w: &mut World) -> Holdings {
    let a = joined(w.join("", &BTreeSet::new())).member_id;
    let first = joined(w.join(&a, &BTreeSet::new()));
    assert_eq!(first.error_code, ErrorCode::None);
    synced(w.sync(
        &a,
        first.generation_id,
        vec![(a.clone(), assignment(&[0, 1, 2, 3, 4, 5]))],
    ));
    let b = joined(w.join("", &BTreeSet::new())).member_id;
    assert!(matches!(w.join(&b, &BTreeSet::new()), JoinOutcome::Pending));
    assert_eq!(
        w.beat(&a, first.generation_id),
        ErrorCode::RebalanceInProgress
    );
    let second = joined(w.join(&a, &BTreeSet::new()));
    assert_eq!(second.leader, a);
    let generation = second.generation_id;
    let plan = vec![
        (a.clone(), assignment(&[0, 1, 2])),
        (b.clone(), assignment(&[3, 4, 5])),
    ];
    synced(w.sync(&a, generation, plan));
    w.c.take_responses();
    synced(w.sync(&b, generation, Vec::new()));
    let mut held = Holdings::default();
    held.classic.insert(a, (generation, partitions(&[0, 1, 2])));
    held.classic.insert(b, (generation, partitions(&[3, 4, 5])));
    held
}

/// One step of every member, each doing what its client would: a classic
/// member told to rejoin joins (with what it holds) and syncs; a KIP-848
/// member heartbeats with what it owns and takes its new assignment.
fn round(w: &mut World, held: &mut Holdings) {
    let classic: Vec<String> = held.classic.keys().cloned().collect();
    for id in classic {
        let (generation, owned) = held.classic[&id].clone();
        match w.beat(&id, generation) {
            ErrorCode::None => continue,
            ErrorCode::RebalanceInProgress => {}
            other => panic!("classic heartbeat: {other:?}"),
        }
        let joined = joined(w.join(&id, &owned));
        assert_eq!(joined.error_code, ErrorCode::None);
        assert!(
            joined.leader.is_empty() && joined.members.is_empty(),
            "nobody assigns"
        );
        let synced = synced(w.sync(&id, joined.generation_id, Vec::new()));
        assert_eq!(synced.error_code, ErrorCode::None);
        let now = parse_assignment(&synced.assignment).expect("an assignment");
        held.classic.insert(id, (joined.generation_id, now));
        held.assert_exclusive();
    }
    let kip848: Vec<String> = held.kip848.keys().cloned().collect();
    for id in kip848 {
        let (epoch, owned) = held.kip848[&id].clone();
        let r = w.kip848(&id, epoch, &owned);
        assert_eq!(r.error_code, ErrorCode::None);
        let now = r.assignment.map_or(owned, |a| a.into_iter().collect());
        held.kip848.insert(id, (r.member_epoch, now));
        held.assert_exclusive();
    }
}

/// `a` and `b` classic, `c` KIP-848, all settled on 2 partitions each.
fn upgraded_group(w: &mut World) -> Holdings {
    let mut held = classic_group_of_two(w);
    let c = w.kip848("", 0, &BTreeSet::new());
    assert_eq!(c.error_code, ErrorCode::None);
    assert!(
        w.log.iter().any(
            |(key, value)| *key == records::encode_group_metadata_key(GROUP) && value.is_none()
        ),
        "the classic group's metadata is deleted"
    );
    held.kip848
        .insert(c.member_id, (c.member_epoch, BTreeSet::new()));
    held.assert_exclusive();
    for _ in 0..6 {
        w.now_ms += 1_000;
        round(w, &mut held);
    }
    held
}

#[test]
fn a_kip848_member_joins_a_live_classic_group_without_a_partition_held_twice() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let held = upgraded_group(&mut w);
    assert_eq!(
        held.all(),
        vec![2, 2, 2],
        "every member settled on its share"
    );
    let g = w.c.describe_consumer_group(GROUP).expect("a KIP-848 group");
    assert_eq!(g.state().name(), "Stable");
    assert_eq!(
        g.members.values().filter(|m| m.classic.is_some()).count(),
        2
    );
    // Its classic members go on after a coordinator move.
    let mut moved = w.moved();
    for (id, (generation, _)) in &held.classic {
        assert_eq!(moved.beat(id, *generation), ErrorCode::None);
        assert_eq!(moved.beat(id, generation - 1), ErrorCode::IllegalGeneration);
    }
}

#[test]
fn the_last_kip848_member_leaving_turns_the_group_classic_again() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let held = upgraded_group(&mut w);
    let (c, (epoch, _)) = first(&held.kip848);
    let left = w.kip848(&c, -1, &BTreeSet::new());
    assert_eq!(left.error_code, ErrorCode::None);
    assert_eq!(
        w.c.classic_group(GROUP).map(|g| g.state),
        Some(ClassicState::PreparingRebalance)
    );
    assert!(epoch > 0);
    // Both classic members are told to join again, and do.
    let ids: Vec<String> = held.classic.keys().cloned().collect();
    for id in &ids {
        let generation = held.classic[id].0;
        let code = w.beat(id, generation);
        assert!(
            matches!(
                code,
                ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration
            ),
            "{code:?}"
        );
    }
    assert!(matches!(
        w.join(&ids[0], &BTreeSet::new()),
        JoinOutcome::Pending
    ));
    let second = joined(w.join(&ids[1], &BTreeSet::new()));
    assert_eq!(second.error_code, ErrorCode::None);
    let moved = w.moved();
    let g = moved
        .c
        .classic_group(GROUP)
        .expect("classic after a move too");
    assert_eq!(g.members.len(), 2);
    assert!(moved.c.describe_consumer_group(GROUP).is_err());
}

#[test]
fn the_policy_decides_which_way_a_group_may_turn() {
    let mut disabled = World::new(MigrationPolicy::Disabled);
    classic_group_of_two(&mut disabled);
    let refused = disabled.kip848("", 0, &BTreeSet::new());
    assert_eq!(refused.error_code, ErrorCode::GroupIdNotFound);
    assert!(disabled.c.classic_group(GROUP).is_some(), "still classic");

    let mut upgrade_only = World::new(MigrationPolicy::Upgrade);
    let held = upgraded_group(&mut upgrade_only);
    let (c, _) = held.kip848.iter().next().expect("c");
    assert_eq!(
        upgrade_only.kip848(c, -1, &BTreeSet::new()).error_code,
        ErrorCode::None
    );
    assert!(
        upgrade_only.c.describe_consumer_group(GROUP).is_ok(),
        "never turns back"
    );

    let mut kip848_only = World::new(MigrationPolicy::Disabled);
    kip848_only.kip848("", 0, &BTreeSet::new());
    let r = joined(kip848_only.join("", &BTreeSet::new()));
    assert_eq!(r.error_code, ErrorCode::InconsistentGroupProtocol);
}

#[test]
fn a_hosted_classic_member_keeps_its_own_session_and_commits_at_its_generation() {
    let mut w = World::new(MigrationPolicy::Upgrade);
    let held = upgraded_group(&mut w);
    let (a, (generation, _)) = first(&held.classic);
    let commit = |generation: i32| OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id_or_member_epoch: generation,
        member_id: a.clone(),
        offsets: vec![(TopicPartition::new("t", 0), 5, -1, String::new(), -1)],
        retention_ms: -1,
        ..OffsetCommitRequest::default()
    };
    let codes = |w: &mut World, generation: i32| -> Vec<ErrorCode> {
        let (answers, records) = w.c.commit_offsets(w.now_ms, &commit(generation));
        w.log.extend(records);
        answers.into_iter().map(|(_, code)| code).collect()
    };
    assert_eq!(codes(&mut w, generation), vec![ErrorCode::None]);
    assert_eq!(
        codes(&mut w, generation - 1),
        vec![ErrorCode::IllegalGeneration]
    );
    // The KIP-848 session (45 s) would keep it; its own 10 s does not.
    w.now_ms += 10_001;
    let records = w.c.tick(w.now_ms);
    w.log.extend(records);
    let g = w.c.describe_consumer_group(GROUP).expect("still KIP-848");
    assert!(
        !g.members.contains_key(&a),
        "removed at its own session timeout"
    );
}

#[test]
fn a_classic_member_that_never_joins_again_is_removed_at_its_rebalance_timeout() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let mut held = upgraded_group(&mut w);
    let (a, (generation, _)) = first(&held.classic);
    // A second KIP-848 member moves the group on; `a` is told to join
    // again and only heartbeats, inside its session, past its 30 s
    // rebalance timeout.
    let d = w.kip848("", 0, &BTreeSet::new());
    held.kip848
        .insert(d.member_id, (d.member_epoch, BTreeSet::new()));
    for _ in 0..31 {
        w.now_ms += 1_000;
        let records = w.c.tick(w.now_ms);
        w.log.extend(records);
        let code = w.beat(&a, generation);
        if code == ErrorCode::UnknownMemberId {
            return;
        }
        assert_eq!(code, ErrorCode::RebalanceInProgress);
    }
    panic!("{a} was kept past its rebalance timeout");
}

#[test]
fn a_classic_member_that_joins_and_never_syncs_is_removed_at_its_rebalance_timeout() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    upgraded_group(&mut w);
    let id = joined(w.join("", &BTreeSet::new())).member_id;
    let joined = joined(w.join(&id, &BTreeSet::new()));
    assert_eq!(joined.error_code, ErrorCode::None);
    // It heartbeats inside its 10 s session but never syncs: Kafka's sync
    // timeout (its 30 s rebalance timeout) removes it.
    for _ in 0..31 {
        w.now_ms += 1_000;
        let records = w.c.tick(w.now_ms);
        w.log.extend(records);
        if w.beat(&id, joined.generation_id) == ErrorCode::UnknownMemberId {
            return;
        }
    }
    panic!("{id} was kept past its rebalance timeout without syncing");
}

//! Scenario tests of KIP-848 and share groups' membership across a
//! coordinator move: every record a coordinator wrote, replayed by a new
//! one, lets the members go on at their epochs.

use engine::ErrorCode;
use std::collections::BTreeSet;

use super::consumer::{ConsumerGroupState, ConsumerHeartbeatRequest, MemberState};
use super::*;

/// Topic "t" has 6 partitions.
fn topics(name: &str) -> Option<TopicInfo> {
    (name == "t").then_some(TopicInfo {
        id: [7; 16],
        partitions: 6,
    })
}

/// A coordinator and every record it wrote.
struct Logged {
    c: GroupCoordinator,
    log: Vec<Record>,
}

impl Logged {
    fn new() -> Self {
        Self {
            c: GroupCoordinator::new(GroupConfig::default()),
            log: Vec::new(),
        }
    }

    /// A new coordinator that replayed the whole log at `now_ms`.
    fn moved(&self, now_ms: i64) -> Logged {
        let mut next = Logged::new();
        for (key, value) in &self.log {
            next.c.replay(key, value.as_deref()).expect("replays");
        }
        assert_eq!(next.c.finish_replay(now_ms, &|_| true), Vec::new());
        next.log = self.log.clone();
        next
    }
}

struct Client {
    member_id: String,
    epoch: i32,
    owned: BTreeSet<TopicPartition>,
}

impl Client {
    fn new(member_id: &str) -> Self {
        Self {
            member_id: member_id.into(),
            epoch: 0,
            owned: BTreeSet::new(),
        }
    }

    fn request(&self) -> ConsumerHeartbeatRequest {
        ConsumerHeartbeatRequest {
            group_id: "cg".into(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            rebalance_timeout_ms: 60_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            server_assignor: Some("uniform".into()),
            owned_partitions: Some(self.owned.iter().cloned().collect()),
            client_id: "client".into(),
            ..ConsumerHeartbeatRequest::default()
        }
    }

    /// One heartbeat, whose records go to the log; the client takes what
    /// it is told.
    fn beat(&mut self, at: &mut Logged, now_ms: i64) -> ErrorCode {
        let (r, records) = at.c.consumer_heartbeat(now_ms, &self.request(), &topics);
        at.log.extend(records);
        if r.error_code == ErrorCode::None {
            self.epoch = r.member_epoch;
            if let Some(assignment) = r.assignment {
                self.owned = assignment.into_iter().collect();
            }
        }
        r.error_code
    }
}

/// Three members that converged on a stable group.
fn stable_group() -> (Logged, Vec<Client>, i64) {
    let mut at = Logged::new();
    let mut clients: Vec<Client> = ["a", "b", "c"].into_iter().map(Client::new).collect();
    let mut now_ms = 0;
    for _round in 0..6 {
        for client in clients.iter_mut() {
            now_ms += 100;
            assert_eq!(client.beat(&mut at, now_ms), ErrorCode::None);
        }
    }
    let g = at.c.describe_consumer_group("cg").expect("the group");
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    (at, clients, now_ms)
}

#[test]
fn kip848_members_go_on_at_their_epochs_after_a_coordinator_move() {
    let (mut at, mut clients, now_ms) = stable_group();
    let (_, nothing) =
        at.c.consumer_heartbeat(now_ms, &clients[0].request(), &topics);
    assert_eq!(
        nothing,
        Vec::new(),
        "a heartbeat that changes nothing writes nothing"
    );
    let before =
        at.c.describe_consumer_group("cg")
            .expect("the group")
            .clone();
    let mut moved = at.moved(now_ms + 1_000);
    let after = moved.c.describe_consumer_group("cg").expect("restored");
    assert_eq!(after.group_epoch, before.group_epoch);
    assert_eq!(after.assignment_epoch, before.assignment_epoch);
    assert_eq!(after.target, before.target);
    assert_eq!(after.topic_partitions, before.topic_partitions);
    for (id, member) in &before.members {
        let restored = &after.members[id];
        assert_eq!(
            (restored.member_epoch, &restored.assigned, restored.state),
            (member.member_epoch, &member.assigned, member.state)
        );
    }
    for client in clients.iter_mut() {
        let (epoch, owned) = (client.epoch, client.owned.clone());
        assert_eq!(client.beat(&mut moved, now_ms + 1_100), ErrorCode::None);
        assert_eq!(
            (client.epoch, &client.owned),
            (epoch, &owned),
            "no rebalance"
        );
    }
    // The restored sessions run out like any other: the group, empty and
    // with no offsets, goes, and a third coordinator replays it gone.
    let records = moved.c.tick(now_ms + 1_100 + 45_001);
    moved.log.extend(records);
    assert!(moved.c.describe_consumer_group("cg").is_err());
    let third = moved.moved(now_ms + 100_000);
    assert!(third.c.group("cg").is_none());
}

#[test]
fn a_member_revoking_when_the_coordinator_moved_still_has_to_revoke() {
    let (mut at, mut clients, mut now_ms) = stable_group();
    // A fourth member joins: the others must give up partitions.
    let mut d = Client::new("d");
    now_ms += 100;
    assert_eq!(d.beat(&mut at, now_ms), ErrorCode::None);
    now_ms += 100;
    assert_eq!(clients[0].beat(&mut at, now_ms), ErrorCode::None);
    let g = at.c.describe_consumer_group("cg").expect("the group");
    assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
    let mut moved = at.moved(now_ms + 1_000);
    let restored = moved.c.describe_consumer_group("cg").expect("restored");
    assert_eq!(
        restored.members["a"].state,
        MemberState::UnrevokedPartitions
    );
    assert_eq!(
        restored.members["a"].pending_revocation,
        g.members["a"].pending_revocation
    );
    // Its rebalance timeout starts again at the move, and still binds: a
    // member that never revokes is removed when it runs out, although its
    // session is kept alive.
    let mut t = now_ms + 1_000;
    let mut stuck = clients[0].request();
    let a = &restored.members["a"];
    let still_owned = a.assigned.union(&a.pending_revocation).cloned();
    stuck.owned_partitions = Some(still_owned.collect());
    while t < now_ms + 1_000 + 60_000 {
        t += 5_000;
        let (r, records) = moved.c.consumer_heartbeat(t, &stuck, &topics);
        moved.log.extend(records);
        assert_eq!(r.error_code, ErrorCode::None);
        for other in clients[1..].iter_mut().chain([&mut d]) {
            assert_eq!(other.beat(&mut moved, t), ErrorCode::None);
        }
    }
    let records = moved.c.tick(t + 1);
    moved.log.extend(records);
    let g = moved.c.describe_consumer_group("cg").expect("the group");
    assert!(
        !g.members.contains_key("a"),
        "removed at its rebalance timeout"
    );
    let third = moved.moved(t + 2);
    let g = third.c.describe_consumer_group("cg").expect("kept");
    assert!(!g.members.contains_key("a"));
}

#[test]
fn an_emptied_kip848_group_that_turns_classic_leaves_no_membership() {
    let mut at = Logged::new();
    let mut a = Client::new("a");
    for now_ms in [0, 100] {
        assert_eq!(a.beat(&mut at, now_ms), ErrorCode::None);
    }
    a.epoch = -1;
    assert_eq!(a.beat(&mut at, 200), ErrorCode::None);
    let join = JoinRequest {
        group_id: "cg".into(),
        member_id: String::new(),
        group_instance_id: None,
        client_id: "classic".into(),
        client_host: "/10.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Vec::new())],
        require_known_member_id: false,
        supports_skip_assignment: true,
    };
    let (_, records) = at.c.join_group(300, 1, join, (&topics, &|_| Vec::new()));
    assert!(
        records.iter().any(|(_, value)| value.is_none()),
        "the KIP-848 membership is deleted"
    );
    at.log.extend(records);
    let moved = at.moved(400);
    assert!(matches!(
        moved.c.group("cg"),
        Some(Group::Classic(_)) | None
    ));
    assert!(moved.c.describe_consumer_group("cg").is_err());
}

/// A share member's heartbeat on topic "t".
fn share_beat(at: &mut Logged, now_ms: i64, member: &str, epoch: i32) -> ShareHeartbeatResponse {
    let req = ShareHeartbeatRequest {
        group_id: "sg".into(),
        member_id: member.into(),
        member_epoch: epoch,
        subscribed_topic_names: Some(vec!["t".into()]),
        ..Default::default()
    };
    let (r, records) = at.c.share_heartbeat(now_ms, &req, &topics);
    at.log.extend(records);
    r
}

#[test]
fn share_members_go_on_after_a_coordinator_move_and_a_leave_is_kept() {
    let mut at = Logged::new();
    let a = share_beat(&mut at, 0, "a", 0);
    let b = share_beat(&mut at, 100, "b", 0);
    let a = share_beat(&mut at, 200, "a", a.member_epoch);
    assert_eq!(a.member_epoch, b.member_epoch);
    let mut moved = at.moved(1_000);
    let again = share_beat(&mut moved, 1_100, "b", b.member_epoch);
    assert_eq!(again.error_code, ErrorCode::None);
    assert_eq!(again.member_epoch, b.member_epoch, "no new epoch");
    assert_eq!(again.assignment, b.assignment);
    let left = share_beat(&mut moved, 1_200, "a", -1);
    assert_eq!(left.error_code, ErrorCode::None);
    let third = moved.moved(2_000);
    let g = third.c.describe_share_group("sg").expect("restored");
    assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["b"]);
    assert_eq!(
        g.group_epoch,
        moved
            .c
            .describe_share_group("sg")
            .expect("the group")
            .group_epoch
    );
    // DeleteGroups, once empty, deletes the membership too.
    let mut third = third;
    let left = share_beat(&mut third, 2_100, "b", -1);
    assert_eq!(left.error_code, ErrorCode::None);
    let (codes, records) = third.c.delete_groups(&["sg".to_string()]);
    assert_eq!(codes, vec![("sg".to_string(), ErrorCode::None)]);
    third.log.extend(records);
    assert!(third.moved(3_000).c.group("sg").is_none());
}

#[test]
fn a_regex_member_gets_the_topics_its_expression_matches_now_and_later() {
    // "t" exists from the start; "u" is created later.
    let created = std::cell::Cell::new(false);
    let topics = |name: &str| match name {
        "t" => topics(name),
        "u" if created.get() => Some(TopicInfo {
            id: [8; 16],
            partitions: 2,
        }),
        _ => None,
    };
    let matching = |expression: &str| -> Vec<String> {
        assert_eq!(expression, "[tu]");
        let mut names = vec!["t".to_string()];
        if created.get() {
            names.push("u".to_string());
        }
        names
    };
    let mut at = Logged::new();
    let mut req = ConsumerHeartbeatRequest {
        group_id: "cg".into(),
        member_id: "r".into(),
        member_epoch: 0,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_regex: Some("[tu]".into()),
        client_id: "client".into(),
        ..ConsumerHeartbeatRequest::default()
    };
    let beat = |at: &mut Logged, req: &ConsumerHeartbeatRequest, now_ms: i64| {
        let (r, records) =
            at.c.consumer_heartbeat_matching(now_ms, req, &topics, &matching);
        at.log.extend(records);
        assert_eq!(r.error_code, ErrorCode::None);
        r
    };
    let first = beat(&mut at, &req, 0);
    let owned: BTreeSet<TopicPartition> = first.assignment.expect("assigned").into_iter().collect();
    assert_eq!(owned.len(), 6, "t's six partitions");
    req.member_epoch = first.member_epoch;
    req.subscribed_topic_regex = None;
    req.owned_partitions = Some(owned.iter().cloned().collect());
    created.set(true);
    let second = beat(&mut at, &req, 100);
    assert!(
        second.member_epoch > first.member_epoch,
        "a new topic, a new epoch"
    );
    let owned = second.assignment.expect("assigned again");
    assert_eq!(owned.len(), 8, "u's two partitions join: {owned:?}");
    // The expression is kept with the member across a coordinator move.
    let moved = at.moved(200);
    let g = moved.c.describe_consumer_group("cg").expect("restored");
    assert_eq!(g.members["r"].subscribed_regex.as_deref(), Some("[tu]"));
    assert_eq!(g.members["r"].regex_topics.len(), 2);
}

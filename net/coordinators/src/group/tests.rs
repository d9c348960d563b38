//! Scenario tests of the group coordinator: whole JoinGroup / SyncGroup /
//! Heartbeat flows, KIP-848 reconciliation, offsets, and replay.

use engine::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

use super::consumer::ConsumerHeartbeatRequest;
use super::coordinator::{JoinOutcome, OffsetCommitRequest, SyncOutcome};
use super::*;

const GROUP: &str = "g";

fn config(initial_rebalance_delay_ms: i64) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms,
        ..GroupConfig::default()
    }
}

/// A ConsumerProtocol subscription v0 naming `topics`.
fn subscription(topics: &[&str]) -> Vec<u8> {
    let mut out = vec![0, 0];
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

fn join_request(member_id: &str, client_id: &str) -> JoinRequest {
    JoinRequest {
        group_id: GROUP.into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: client_id.into(),
        client_host: "/10.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(&["t"]))],
        require_known_member_id: true,
        supports_skip_assignment: true,
    }
}

/// Test driver: a coordinator, a clock, a token counter and every record.
struct Harness {
    c: GroupCoordinator,
    now_ms: i64,
    next_token: u64,
    log: Vec<Record>,
}

impl Harness {
    fn new(initial_rebalance_delay_ms: i64) -> Self {
        Self {
            c: GroupCoordinator::new(config(initial_rebalance_delay_ms)),
            now_ms: 1_000,
            next_token: 1,
            log: Vec::new(),
        }
    }

    fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    fn join(&mut self, req: JoinRequest) -> (u64, JoinOutcome) {
        let token = self.token();
        let (outcome, records) =
            self.c
                .join_group(self.now_ms, token, req, (&|_| None, &|_| Vec::new()));
        self.log.extend(records);
        (token, outcome)
    }

    /// First join: MEMBER_ID_REQUIRED, then the real join. Returns the id.
    fn join_new(&mut self, client_id: &str) -> (String, u64, JoinOutcome) {
        let (_, first) = self.join(join_request("", client_id));
        let JoinOutcome::Respond(r) = first else {
            panic!("first join must answer at once");
        };
        assert_eq!(r.error_code, ErrorCode::MemberIdRequired);
        assert!(r.member_id.starts_with(client_id));
        let (token, outcome) = self.join(join_request(&r.member_id, client_id));
        (r.member_id, token, outcome)
    }

    fn sync(
        &mut self,
        member_id: &str,
        generation_id: i32,
        assignments: Vec<(String, Vec<u8>)>,
    ) -> (u64, SyncOutcome) {
        let token = self.token();
        let req = SyncRequest {
            group_id: GROUP.into(),
            generation_id,
            member_id: member_id.into(),
            group_instance_id: None,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments,
        };
        let (outcome, records) = self.c.sync_group(self.now_ms, token, req);
        self.log.extend(records);
        (token, outcome)
    }

    fn heartbeat(&mut self, member_id: &str, generation_id: i32) -> ErrorCode {
        self.c.heartbeat(
            self.now_ms,
            &HeartbeatRequest {
                group_id: GROUP.into(),
                generation_id,
                member_id: member_id.into(),
                group_instance_id: None,
            },
        )
    }

    fn advance(&mut self, by_ms: i64) {
        self.now_ms += by_ms;
        let records = self.c.tick(self.now_ms);
        self.log.extend(records);
    }

    fn responses(&mut self) -> BTreeMap<u64, GroupResponse> {
        self.c.take_responses().into_iter().collect()
    }

    fn state(&self) -> ClassicState {
        self.c
            .classic_group(GROUP)
            .map_or(ClassicState::Dead, |g| g.state)
    }

    fn commit(
        &mut self,
        member_id: &str,
        generation: i32,
        partition: i32,
        offset: i64,
    ) -> ErrorCode {
        let req = OffsetCommitRequest {
            retention_ms: -1,
            group_id: GROUP.into(),
            generation_id_or_member_epoch: generation,
            member_id: member_id.into(),
            group_instance_id: None,
            offsets: vec![(
                TopicPartition::new("t", partition),
                offset,
                0,
                "m".into(),
                -1,
            )],
        };
        let (codes, records) = self.c.commit_offsets(self.now_ms, &req);
        self.log.extend(records);
        codes[0].1
    }

    /// Replays every record into a fresh coordinator.
    fn replayed(&self) -> GroupCoordinator {
        let mut fresh = GroupCoordinator::new(config(0));
        for (k, v) in &self.log {
            fresh.replay(k, v.as_deref()).expect("replay");
        }
        assert_eq!(fresh.finish_replay(self.now_ms, &|_| true), Vec::new());
        fresh
    }
}

fn join_response(r: &GroupResponse) -> &JoinResponse {
    match r {
        GroupResponse::Join(j) => j,
        other => panic!("expected a join answer, got {other:?}"),
    }
}

fn sync_response(r: &GroupResponse) -> &SyncResponse {
    match r {
        GroupResponse::Sync(s) => s,
        other => panic!("expected a sync answer, got {other:?}"),
    }
}

/// Two members join during the initial delay, sync, and heartbeat: Stable.
/// Returns (harness, leader id, follower id, generation).
fn two_member_stable() -> (Harness, String, String, i32) {
    let mut h = Harness::new(3_000);
    let (a, ta, oa) = h.join_new("a");
    assert_eq!(
        oa,
        JoinOutcome::Pending,
        "initial delay holds the first join"
    );
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    h.advance(1_000);
    let (b, tb, ob) = h.join_new("b");
    assert_eq!(ob, JoinOutcome::Pending);
    // First delay expires at +3000, but B joined during it: extended by 3000.
    h.advance(2_000);
    assert!(h.responses().is_empty());
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    h.advance(3_000);
    let out = h.responses();
    let ja = join_response(&out[&ta]);
    let jb = join_response(&out[&tb]);
    assert_eq!(
        (ja.error_code, jb.error_code),
        (ErrorCode::None, ErrorCode::None)
    );
    assert_eq!(ja.generation_id, 1);
    assert_eq!(ja.leader, a);
    assert_eq!(ja.protocol_name.as_deref(), Some("range"));
    assert_eq!(ja.members.len(), 2, "the leader sees every member");
    assert!(jb.members.is_empty(), "followers see none");
    assert_eq!(h.state(), ClassicState::CompletingRebalance);

    // Follower syncs first and waits for the leader.
    let (tbs, sb) = h.sync(&b, 1, vec![]);
    assert_eq!(sb, SyncOutcome::Pending);
    let (_, sa) = h.sync(&a, 1, vec![(a.clone(), vec![1]), (b.clone(), vec![2])]);
    let SyncOutcome::Respond(sa) = sa else {
        panic!("the leader's sync answers at once")
    };
    assert_eq!(sa.assignment, vec![1]);
    let out = h.responses();
    assert_eq!(sync_response(&out[&tbs]).assignment, vec![2]);
    assert_eq!(h.state(), ClassicState::Stable);
    assert_eq!(h.heartbeat(&a, 1), ErrorCode::None);
    assert_eq!(h.heartbeat(&b, 1), ErrorCode::None);
    (h, a, b, 1)
}

#[test]
fn two_members_join_sync_and_are_stable() {
    let (h, a, b, _) = two_member_stable();
    let g = h.c.classic_group(GROUP).unwrap();
    assert_eq!(g.members.len(), 2);
    assert_eq!(g.members[&a].assignment, vec![1]);
    assert_eq!(g.members[&b].assignment, vec![2]);
    let described = h.c.describe_group(GROUP);
    assert_eq!(described.state, "Stable");
    assert_eq!(described.protocol, "range");
    assert_eq!(described.members.len(), 2);
    assert_eq!(h.c.list_groups(&["stable".into()]).len(), 1);
    assert!(h.c.list_groups(&["Empty".into()]).is_empty());
}

#[test]
fn three_members_join_without_initial_delay() {
    let mut h = Harness::new(0);
    let (a, _, oa) = h.join_new("a");
    // No delay: a lone member completes its join at once.
    let JoinOutcome::Respond(ja) = oa else {
        panic!()
    };
    assert_eq!((ja.generation_id, ja.leader.as_str()), (1, a.as_str()));
    // B joining forces a rebalance; it waits for A to rejoin.
    let (b, tb, ob) = h.join_new("b");
    assert_eq!(ob, JoinOutcome::Pending);
    assert_eq!(h.heartbeat(&a, 1), ErrorCode::RebalanceInProgress);
    let (c, tc, oc) = h.join_new("c");
    assert_eq!(oc, JoinOutcome::Pending);
    let (_, oa) = h.join(join_request(&a, "a"));
    let JoinOutcome::Respond(ja) = oa else {
        panic!("all members rejoined: the join completes")
    };
    assert_eq!((ja.generation_id, ja.members.len()), (2, 3));
    let out = h.responses();
    for t in [tb, tc] {
        let j = join_response(&out[&t]);
        assert_eq!(
            (j.error_code, j.generation_id, j.leader.as_str()),
            (ErrorCode::None, 2, a.as_str())
        );
    }
    let assignments = vec![
        (a.clone(), vec![0]),
        (b.clone(), vec![1]),
        (c.clone(), vec![2]),
    ];
    h.sync(&b, 2, vec![]);
    h.sync(&c, 2, vec![]);
    h.sync(&a, 2, assignments);
    assert_eq!(h.responses().len(), 2);
    assert_eq!(h.state(), ClassicState::Stable);
}

#[test]
fn a_leaving_member_triggers_a_rebalance_with_a_new_generation() {
    let (mut h, a, b, generation) = two_member_stable();
    let (codes, _) = h.c.leave_group(
        h.now_ms,
        GROUP,
        &[LeavingMember {
            member_id: a.clone(),
            group_instance_id: None,
        }],
    );
    assert_eq!(codes, vec![ErrorCode::None]);
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    assert_eq!(h.heartbeat(&b, generation), ErrorCode::RebalanceInProgress);
    assert_eq!(h.heartbeat(&a, generation), ErrorCode::UnknownMemberId);
    let (_, ob) = h.join(join_request(&b, "b"));
    let JoinOutcome::Respond(jb) = ob else {
        panic!("the only member rejoined: completes")
    };
    assert_eq!(jb.generation_id, generation + 1);
    assert_eq!(jb.leader, b, "the leader left: the next member leads");
    let (_, sb) = h.sync(&b, generation + 1, vec![(b.clone(), vec![9])]);
    assert!(matches!(sb, SyncOutcome::Respond(ref r) if r.assignment == vec![9]));
    assert_eq!(h.state(), ClassicState::Stable);
    // An old-generation commit is refused; a current one is accepted.
    assert_eq!(
        h.commit(&b, generation, 0, 10),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(h.commit(&b, generation + 1, 0, 10), ErrorCode::None);
}

#[test]
fn a_member_whose_session_expires_is_removed() {
    let (mut h, a, b, generation) = two_member_stable();
    // A heartbeats every 3 s; B never does; B's 10 s session ends.
    for _ in 0..3 {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&a, generation), ErrorCode::None);
    }
    assert_eq!(h.state(), ClassicState::Stable);
    let deadline = h.c.next_deadline_ms().unwrap();
    h.advance(deadline - h.now_ms);
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    assert!(!h.c.classic_group(GROUP).unwrap().members.contains_key(&b));
    let (_, oa) = h.join(join_request(&a, "a"));
    let JoinOutcome::Respond(ja) = oa else {
        panic!()
    };
    assert_eq!(ja.generation_id, generation + 1);
    assert_eq!(ja.members.len(), 1);
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let (mut h, a, b, _) = two_member_stable();
    let mut req = join_request(&a, "a");
    req.protocols = vec![("range".into(), subscription(&["t", "u"]))];
    let (ta, oa) = h.join(req);
    assert_eq!(oa, JoinOutcome::Pending);
    // B keeps heartbeating but never rejoins; the 30 s rebalance timeout ends it.
    for _ in 0..10 {
        h.advance(3_000);
        if h.state() == ClassicState::PreparingRebalance {
            h.heartbeat(&b, 1);
        }
    }
    let out = h.responses();
    let ja = join_response(&out[&ta]);
    assert_eq!((ja.generation_id, ja.members.len()), (2, 1));
}

/// A group of one static member (`instance-1`), its leader, synced with
/// assignment `[7]` in generation 1: the harness, its join request (to
/// rejoin with) and its member id.
fn static_leader_synced() -> (Harness, JoinRequest, String) {
    let mut h = Harness::new(0);
    let mut req = join_request("", "s");
    req.group_instance_id = Some("instance-1".into());
    let (_, o) = h.join(req.clone());
    let JoinOutcome::Respond(j) = o else {
        panic!("a static member skips ErrorCode::MemberIdRequired")
    };
    assert_eq!(j.error_code, ErrorCode::None);
    let old_id = j.member_id.clone();
    h.sync(&old_id, 1, vec![(old_id.clone(), vec![7])]);
    assert_eq!(h.state(), ClassicState::Stable);
    (h, req, old_id)
}

#[test]
fn a_static_leader_rejoining_before_v9_is_named_by_its_old_id() {
    // JoinGroup v5..v8 has no skip_assignment (KIP-814): Kafka names the
    // rejoined leader by its old member id and lists no members, so the
    // client syncs for its assignment; nobody rebalances.
    let (mut h, mut req, old_id) = static_leader_synced();
    req.supports_skip_assignment = false;
    let (_, o) = h.join(req);
    let JoinOutcome::Respond(j) = o else {
        panic!("a known static member is answered at once")
    };
    assert_eq!((j.error_code, j.generation_id), (ErrorCode::None, 1));
    assert_ne!(j.member_id, old_id);
    assert_eq!(j.leader, old_id, "the leader under its old id");
    assert!(!j.skip_assignment && j.members.is_empty(), "{j:?}");
    assert_eq!(h.state(), ClassicState::Stable);
}

#[test]
fn static_member_restart_keeps_its_assignment_without_rebalance() {
    let (mut h, req, old_id) = static_leader_synced();

    // The process restarts: same instance id, no member id, same metadata.
    let (_, o) = h.join(req);
    let JoinOutcome::Respond(j) = o else {
        panic!("a known static member is answered at once")
    };
    assert_eq!(
        (j.error_code, j.generation_id),
        (ErrorCode::None, 1),
        "no new generation"
    );
    assert_ne!(j.member_id, old_id);
    assert_eq!(h.state(), ClassicState::Stable);
    let new_id = j.member_id;
    let old_heartbeat = h.c.heartbeat(
        h.now_ms,
        &HeartbeatRequest {
            group_id: GROUP.into(),
            generation_id: 1,
            member_id: old_id,
            group_instance_id: Some("instance-1".into()),
        },
    );
    assert_eq!(old_heartbeat, ErrorCode::FencedInstanceId);
    let token = h.token();
    let (o, _) = h.c.sync_group(
        h.now_ms,
        token,
        SyncRequest {
            group_id: GROUP.into(),
            generation_id: 1,
            member_id: new_id.clone(),
            group_instance_id: Some("instance-1".into()),
            ..SyncRequest::default()
        },
    );
    assert!(matches!(o, SyncOutcome::Respond(ref r) if r.assignment == vec![7]));
    // The replacement was persisted: replay knows the new member id.
    let fresh = h.replayed();
    assert!(fresh
        .classic_group(GROUP)
        .unwrap()
        .members
        .contains_key(&new_id));
}

#[test]
fn inconsistent_protocols_are_refused() {
    let (mut h, ..) = two_member_stable();
    let mut req = join_request("", "x");
    req.require_known_member_id = false;
    req.protocols = vec![("roundrobin".into(), vec![])];
    let (_, o) = h.join(req);
    assert!(
        matches!(o, JoinOutcome::Respond(ref r) if r.error_code == ErrorCode::InconsistentGroupProtocol)
    );
}

#[test]
fn replay_rebuilds_offsets_and_groups() {
    let (mut h, a, b, generation) = two_member_stable();
    assert_eq!(h.commit(&a, generation, 0, 100), ErrorCode::None);
    assert_eq!(h.commit(&b, generation, 1, 200), ErrorCode::None);
    assert_eq!(h.commit(&a, generation, 0, 150), ErrorCode::None);
    // A simple (group-less) commit to another group.
    let (codes, records) = h.c.commit_offsets(
        h.now_ms,
        &OffsetCommitRequest {
            retention_ms: -1,
            group_id: "simple".into(),
            generation_id_or_member_epoch: -1,
            offsets: vec![(TopicPartition::new("t", 3), 7, -1, String::new(), -1)],
            ..OffsetCommitRequest::default()
        },
    );
    assert_eq!(codes[0].1, ErrorCode::None);
    h.log.extend(records);
    let fresh = h.replayed();
    assert_eq!(fresh.offsets(), h.c.offsets());
    let live = h.c.classic_group(GROUP).unwrap();
    let back = fresh.classic_group(GROUP).unwrap();
    assert_eq!(back.to_record_value(), live.to_record_value());
    assert_eq!(back.state, ClassicState::Stable);
    let fetched = fresh.fetch_offsets(
        GROUP,
        Some(&[TopicPartition::new("t", 0), TopicPartition::new("t", 9)]),
    );
    assert_eq!((fetched[0].offset, fetched[1].offset), (150, -1));
    assert_eq!(fresh.fetch_offsets("simple", None)[0].offset, 7);
}

/// A coordinator that loses a partition forgets exactly its groups: their
/// members, offsets and timers; other groups keep theirs.
#[test]
fn unload_forgets_only_the_selected_groups() {
    let (mut h, a, _b, generation) = two_member_stable();
    assert_eq!(h.commit(&a, generation, 0, 100), ErrorCode::None);
    let (codes, _) = h.c.commit_offsets(
        h.now_ms,
        &OffsetCommitRequest {
            retention_ms: -1,
            group_id: "other".into(),
            generation_id_or_member_epoch: -1,
            offsets: vec![(TopicPartition::new("t", 3), 7, -1, String::new(), -1)],
            ..OffsetCommitRequest::default()
        },
    );
    assert_eq!(codes[0].1, ErrorCode::None);
    assert!(h.c.next_deadline_ms().is_some());
    h.c.unload(&|group| group == GROUP);
    assert!(h.c.classic_group(GROUP).is_none());
    assert_eq!(h.c.fetch_offsets(GROUP, None).len(), 0);
    assert_eq!(h.c.fetch_offsets("other", None)[0].offset, 7);
    assert_eq!(h.heartbeat(&a, generation), ErrorCode::UnknownMemberId);
    h.c.unload(&|_| true);
    assert!(
        h.c.next_deadline_ms().is_none(),
        "no timer survives an unload"
    );
}

#[test]
fn offsets_of_empty_groups_expire_and_the_group_goes() {
    let mut h = Harness::new(0);
    assert_eq!(h.commit("", -1, 0, 5), ErrorCode::None);
    assert_eq!(h.state(), ClassicState::Empty);
    h.advance(1);
    let retention_ms = h.c.config().offsets_retention_ms;
    h.advance(retention_ms);
    assert_eq!(h.state(), ClassicState::Dead, "group removed");
    assert!(h.c.fetch_offsets(GROUP, None).is_empty());
    // The expiry wrote tombstones: replay agrees.
    let fresh = h.replayed();
    assert!(fresh.group(GROUP).is_none());
    assert!(!fresh.offsets().has_offsets(GROUP));
}

#[test]
fn offset_delete_and_group_delete_rules() {
    let (mut h, a, _, generation) = two_member_stable();
    assert_eq!(h.commit(&a, generation, 0, 1), ErrorCode::None);
    let (code, parts, _) = h.c.delete_offsets(GROUP, &[TopicPartition::new("t", 0)]);
    assert_eq!(code, ErrorCode::None);
    assert_eq!(parts[0].1, ErrorCode::GroupSubscribedToTopic);
    let (codes, _) = h.c.delete_groups(&[GROUP.into(), "nope".into()]);
    assert_eq!(
        codes,
        vec![
            (GROUP.into(), ErrorCode::NonEmptyGroup),
            ("nope".into(), ErrorCode::GroupIdNotFound)
        ]
    );
}

// ---------------------------------------------------------------- KIP-848

fn topics(name: &str) -> Option<TopicInfo> {
    (name == "t").then_some(TopicInfo {
        id: [7; 16],
        partitions: 6,
    })
}

struct Client {
    member_id: String,
    epoch: i32,
    owned: BTreeSet<TopicPartition>,
}

fn consumer_heartbeat(
    c: &mut GroupCoordinator,
    now_ms: i64,
    client: &mut Client,
) -> ConsumerHeartbeatResponse {
    let req = ConsumerHeartbeatRequest {
        group_id: "cg".into(),
        member_id: client.member_id.clone(),
        member_epoch: client.epoch,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        server_assignor: Some("uniform".into()),
        owned_partitions: Some(client.owned.iter().cloned().collect()),
        client_id: "client".into(),
        ..ConsumerHeartbeatRequest::default()
    };
    let (r, _) = c.consumer_heartbeat(now_ms, &req, &topics);
    if r.error_code == ErrorCode::None {
        client.member_id = r.member_id.clone();
        client.epoch = r.member_epoch;
        if let Some(a) = &r.assignment {
            // A client revokes and takes exactly what it is told.
            client.owned = a.iter().cloned().collect();
        }
    }
    r
}

fn assert_no_partition_owned_twice(c: &GroupCoordinator, clients: &[Client]) {
    let mut seen = BTreeSet::new();
    for client in clients {
        for tp in &client.owned {
            assert!(seen.insert(tp.clone()), "{tp:?} owned by two clients");
        }
    }
    let g = c.describe_consumer_group("cg").unwrap();
    let mut seen = BTreeSet::new();
    for m in g.members.values() {
        for tp in m.assigned.iter().chain(&m.pending_revocation) {
            assert!(seen.insert(tp.clone()), "{tp:?} held twice by the broker");
        }
    }
}

#[test]
fn kip848_three_members_converge_without_double_ownership() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    let mut now_ms = 0;
    let mut clients: Vec<Client> = Vec::new();
    for _ in 0..3 {
        let mut client = Client {
            member_id: String::new(),
            epoch: 0,
            owned: BTreeSet::new(),
        };
        let r = consumer_heartbeat(&mut c, now_ms, &mut client);
        assert_eq!(r.error_code, ErrorCode::None);
        assert_eq!(r.heartbeat_interval_ms, 5_000);
        assert!(!client.member_id.is_empty());
        clients.push(client);
        assert_no_partition_owned_twice(&c, &clients);
        // Existing members heartbeat after each join.
        for client in clients.iter_mut() {
            now_ms += 100;
            consumer_heartbeat(&mut c, now_ms, client);
        }
        assert_no_partition_owned_twice(&c, &clients);
    }
    for _round in 0..5 {
        for i in 0..clients.len() {
            now_ms += 100;
            let r = consumer_heartbeat(&mut c, now_ms, &mut clients[i]);
            assert_eq!(r.error_code, ErrorCode::None);
            assert_no_partition_owned_twice(&c, &clients);
        }
    }
    let g = c.describe_consumer_group("cg").unwrap();
    assert_eq!(g.state(), consumer::ConsumerGroupState::Stable);
    for client in &clients {
        assert_eq!(client.owned.len(), 2, "6 partitions over 3 members");
        assert_eq!(client.epoch, g.group_epoch);
    }

    // A stale epoch from the future is fenced; an old one too.
    let mut ghost = Client {
        member_id: clients[0].member_id.clone(),
        epoch: clients[0].epoch + 1,
        owned: BTreeSet::new(),
    };
    assert_eq!(
        consumer_heartbeat(&mut c, now_ms, &mut ghost).error_code,
        ErrorCode::FencedMemberEpoch
    );
    ghost.epoch = 1;
    ghost.owned = clients[1].owned.clone();
    assert_eq!(
        consumer_heartbeat(&mut c, now_ms, &mut ghost).error_code,
        ErrorCode::FencedMemberEpoch
    );

    // Offset commits check the member epoch.
    let commit = |c: &mut GroupCoordinator, epoch: i32| {
        let (codes, _) = c.commit_offsets(
            now_ms,
            &OffsetCommitRequest {
                retention_ms: -1,
                group_id: "cg".into(),
                generation_id_or_member_epoch: epoch,
                member_id: clients[0].member_id.clone(),
                group_instance_id: None,
                offsets: vec![(TopicPartition::new("t", 0), 1, 0, String::new(), -1)],
            },
        );
        codes[0].1
    };
    let epoch = clients[0].epoch;
    assert_eq!(commit(&mut c, epoch), ErrorCode::None);
    assert_eq!(commit(&mut c, epoch - 1), ErrorCode::StaleMemberEpoch);
    assert_eq!(commit(&mut c, epoch + 1), ErrorCode::FencedMemberEpoch);

    // A member leaves: the others take its partitions.
    let mut leaving = Client {
        member_id: clients[2].member_id.clone(),
        epoch: -1,
        owned: BTreeSet::new(),
    };
    assert_eq!(
        consumer_heartbeat(&mut c, now_ms, &mut leaving).error_code,
        ErrorCode::None
    );
    clients.pop();
    for _ in 0..3 {
        for i in 0..clients.len() {
            now_ms += 100;
            consumer_heartbeat(&mut c, now_ms, &mut clients[i]);
            assert_no_partition_owned_twice(&c, &clients);
        }
    }
    assert!(clients.iter().all(|c| c.owned.len() == 3));
}

#[test]
fn kip848_session_timeout_removes_a_member() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    let mut a = Client {
        member_id: String::new(),
        epoch: 0,
        owned: BTreeSet::new(),
    };
    let mut b = Client {
        member_id: String::new(),
        epoch: 0,
        owned: BTreeSet::new(),
    };
    consumer_heartbeat(&mut c, 0, &mut a);
    consumer_heartbeat(&mut c, 0, &mut b);
    for t in (5_000..=50_000).step_by(5_000) {
        consumer_heartbeat(&mut c, t, &mut a);
        c.tick(t);
    }
    let g = c.describe_consumer_group("cg").unwrap();
    assert_eq!(g.members.len(), 1);
    assert_eq!(
        consumer_heartbeat(&mut c, 50_000, &mut b).error_code,
        ErrorCode::UnknownMemberId
    );
    consumer_heartbeat(&mut c, 50_100, &mut a);
    assert_eq!(a.owned.len(), 6);
}

#[test]
fn kip848_unknown_assignor_is_refused() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    let req = ConsumerHeartbeatRequest {
        group_id: "cg".into(),
        subscribed_topic_names: Some(vec!["t".into()]),
        server_assignor: Some("magic".into()),
        ..ConsumerHeartbeatRequest::default()
    };
    assert_eq!(
        c.consumer_heartbeat(0, &req, &topics).0.error_code,
        ErrorCode::UnsupportedAssignor
    );
}

#[test]
fn txn_offsets_are_checked_at_txn_offset_commit_and_applied_unchecked() {
    let (mut h, a, _, generation) = two_member_stable();
    let req = |member: &str, generation: i32, offset: i64| OffsetCommitRequest {
        retention_ms: -1,
        group_id: GROUP.into(),
        generation_id_or_member_epoch: generation,
        member_id: member.into(),
        group_instance_id: None,
        offsets: vec![(TopicPartition::new("t", 0), offset, -1, String::new(), -1)],
    };
    assert_eq!(
        h.c.validate_txn_offset_commit(&req(&a, generation, 5)),
        ErrorCode::None
    );
    assert_eq!(
        h.c.validate_txn_offset_commit(&req(&a, generation + 1, 5)),
        ErrorCode::IllegalGeneration,
        "a zombie's generation is refused"
    );
    assert_eq!(
        h.c.validate_txn_offset_commit(&req("nobody", generation, 5)),
        ErrorCode::UnknownMemberId
    );
    // No membership named (TxnOffsetCommit v0–v2): not checked, as in Kafka.
    assert_eq!(
        h.c.validate_txn_offset_commit(&req("", -1, 5)),
        ErrorCode::None
    );
    // The check was made: the commit applies even to a non-member request,
    // twice (a re-forward after a crash) with the same result.
    for _ in 0..2 {
        let (codes, records) = h.c.commit_txn_offsets(h.now_ms, &req("", -1, 42));
        assert_eq!(codes[0].1, ErrorCode::None);
        h.log.extend(records);
    }
    assert_eq!(h.c.fetch_offsets(GROUP, None)[0].offset, 42);
    assert_eq!(h.replayed().fetch_offsets(GROUP, None)[0].offset, 42);
    // An unknown group becomes an offsets-only group.
    let mut other = req("", -1, 3);
    other.group_id = "txn-only".into();
    let (codes, _) = h.c.commit_txn_offsets(h.now_ms, &other);
    assert_eq!(codes[0].1, ErrorCode::None);
    assert_eq!(h.c.fetch_offsets("txn-only", None)[0].offset, 3);
}

#[test]
fn staged_txn_offsets_wait_for_the_marker_and_survive_a_replay() {
    let (mut h, a, _, generation) = two_member_stable();
    let req = |member: &str, generation: i32, offset: i64| OffsetCommitRequest {
        retention_ms: -1,
        group_id: GROUP.into(),
        generation_id_or_member_epoch: generation,
        member_id: member.into(),
        group_instance_id: None,
        offsets: vec![(TopicPartition::new("t", 0), offset, -1, String::new(), -1)],
    };
    let everywhere = |_: &str| true;
    // A zombie's stage is refused like its TxnOffsetCommit would be.
    let (codes, records) =
        h.c.stage_txn_offsets(h.now_ms, 7, &req(&a, generation + 1, 5));
    assert_eq!(codes[0].1, ErrorCode::IllegalGeneration);
    assert!(records.is_empty());
    // Staged: not visible to OffsetFetch, but in the log.
    let (codes, records) = h.c.stage_txn_offsets(h.now_ms, 7, &req(&a, generation, 12));
    assert_eq!(codes[0].1, ErrorCode::None);
    h.log.extend(records);
    assert_eq!(h.c.fetch_offsets(GROUP, None).len(), 0);
    assert_eq!(h.c.pending_txn_offsets(7), 1);
    // A restart before the marker keeps them staged.
    let mut restarted = h.replayed();
    assert_eq!(restarted.pending_txn_offsets(7), 1);
    // Another producer's marker, or one for another partition, changes nothing.
    assert!(h.c.complete_txn(h.now_ms, 8, true, &everywhere).is_empty());
    assert!(h
        .c
        .complete_txn(h.now_ms, 7, true, &|_: &str| false)
        .is_empty());
    // The commit marker applies them and deletes the staged record.
    let records = h.c.complete_txn(h.now_ms, 7, true, &everywhere);
    assert_eq!(records.len(), 2, "a tombstone and the offset commit");
    h.log.extend(records);
    assert_eq!(h.c.fetch_offsets(GROUP, None)[0].offset, 12);
    assert_eq!(h.c.pending_txn_offsets(7), 0);
    let replayed = h.replayed();
    assert_eq!(replayed.fetch_offsets(GROUP, None)[0].offset, 12);
    assert_eq!(replayed.pending_txn_offsets(7), 0);
    // The restarted coordinator completes what it loaded the same way.
    let records = restarted.complete_txn(h.now_ms, 7, true, &everywhere);
    assert_eq!(records.len(), 2);
    assert_eq!(restarted.fetch_offsets(GROUP, None)[0].offset, 12);
    // An abort marker drops staged offsets.
    let (_, records) = h.c.stage_txn_offsets(h.now_ms, 7, &req(&a, generation, 30));
    h.log.extend(records);
    let records = h.c.complete_txn(h.now_ms, 7, false, &everywhere);
    assert_eq!(records.len(), 1, "only the tombstone");
    h.log.extend(records);
    assert_eq!(h.c.fetch_offsets(GROUP, None)[0].offset, 12);
    assert_eq!(h.replayed().pending_txn_offsets(7), 0);
}

/// A coordinator that takes over a KIP-848 group finds only its offsets in
/// `__consumer_offsets` (an empty classic group): a member heartbeating with
/// its epoch is told UNKNOWN_MEMBER_ID, which makes it rejoin, never
/// GROUP_ID_NOT_FOUND, which librdkafka takes as fatal (found by
/// `rill-bench verify --group-protocol consumer` killing the coordinator).
#[test]
fn kip848_members_rejoin_a_coordinator_that_replayed_only_the_offsets() {
    let mut first = GroupCoordinator::new(GroupConfig::default());
    let mut client = Client {
        member_id: String::new(),
        epoch: 0,
        owned: BTreeSet::new(),
    };
    for now_ms in [0, 100, 200] {
        assert_eq!(
            consumer_heartbeat(&mut first, now_ms, &mut client).error_code,
            ErrorCode::None
        );
    }
    let (codes, log) = first.commit_offsets(
        300,
        &OffsetCommitRequest {
            retention_ms: -1,
            group_id: "cg".into(),
            generation_id_or_member_epoch: client.epoch,
            member_id: client.member_id.clone(),
            group_instance_id: None,
            offsets: vec![(TopicPartition::new("t", 0), 42, 0, String::new(), -1)],
        },
    );
    assert_eq!(codes[0].1, ErrorCode::None);
    let mut second = GroupCoordinator::new(GroupConfig::default());
    for (k, v) in &log {
        second.replay(k, v.as_deref()).expect("replay");
    }
    assert_eq!(second.finish_replay(400, &|_| true), Vec::new());
    assert!(client.epoch > 0);
    assert_eq!(
        consumer_heartbeat(&mut second, 500, &mut client).error_code,
        ErrorCode::UnknownMemberId
    );
    // The client then rejoins with epoch 0 and gets its partitions back;
    // the committed offset is still there.
    client.epoch = 0;
    client.owned.clear();
    for now_ms in [600, 700] {
        assert_eq!(
            consumer_heartbeat(&mut second, now_ms, &mut client).error_code,
            ErrorCode::None
        );
    }
    assert!(client.epoch > 0 && !client.owned.is_empty());
    let offset = second.offsets().get("cg", &TopicPartition::new("t", 0));
    assert_eq!(offset.map(|o| o.offset), Some(42));
}

/// The coordinator's first tick runs the offset-expiry check, which drops
/// empty groups without offsets; a group holding a member between its
/// MEMBER_ID_REQUIRED and its second join is not one of them (KafkaJS's
/// first join on a fresh broker got UNKNOWN_MEMBER_ID).
#[test]
fn the_expiry_check_keeps_a_group_whose_member_was_just_given_its_id() {
    let mut h = Harness::new(0);
    let (_, first) = h.join(join_request("", "kjs"));
    let JoinOutcome::Respond(r) = first else {
        panic!("first join must answer at once");
    };
    assert_eq!(r.error_code, ErrorCode::MemberIdRequired);
    h.advance(1);
    let (token, outcome) = h.join(join_request(&r.member_id, "kjs"));
    let joined = match outcome {
        JoinOutcome::Respond(r) => r,
        JoinOutcome::Pending => {
            h.advance(1);
            match h.responses().remove(&token) {
                Some(GroupResponse::Join(j)) => j,
                other => panic!("no join answer: {other:?}"),
            }
        }
    };
    assert_eq!(joined.error_code, ErrorCode::None);
    assert_eq!(joined.member_id, r.member_id);
}

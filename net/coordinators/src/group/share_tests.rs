//! Scenario tests of share groups at the coordinator (KIP-932).

use engine::ErrorCode;

use super::consumer::{ConsumerHeartbeatRequest, TopicInfo};
use super::share::{ShareHeartbeatRequest, ShareHeartbeatResponse};
use super::*;

/// Topic "one" has 1 partition, "four" 4.
fn topics(name: &str) -> Option<TopicInfo> {
    let partitions = match name {
        "one" => 1,
        "four" => 4,
        _ => return None,
    };
    Some(TopicInfo {
        id: [1; 16],
        partitions,
    })
}

fn beat(
    c: &mut GroupCoordinator,
    now_ms: i64,
    member: &str,
    epoch: i32,
    topics_named: Option<&[&str]>,
) -> ShareHeartbeatResponse {
    let req = ShareHeartbeatRequest {
        group_id: "sg".into(),
        member_id: member.into(),
        member_epoch: epoch,
        subscribed_topic_names: topics_named.map(|t| t.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    };
    c.share_heartbeat(now_ms, &req, &topics).0
}

fn partitions(r: &ShareHeartbeatResponse) -> Vec<i32> {
    let mut p: Vec<i32> = r
        .assignment
        .iter()
        .flatten()
        .map(|tp| tp.partition)
        .collect();
    p.sort_unstable();
    p
}

#[test]
fn several_members_share_one_partition() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    let a = beat(&mut c, 0, "a", 0, Some(&["one"]));
    assert_eq!((a.error_code, a.member_epoch), (ErrorCode::None, 1));
    assert_eq!(partitions(&a), vec![0]);
    let b = beat(&mut c, 0, "b", 0, Some(&["one"]));
    assert_eq!((b.member_epoch, partitions(&b)), (2, vec![0]));
    // "a" catches up with the new epoch, and keeps the partition.
    let a = beat(&mut c, 10, "a", 1, None);
    assert_eq!((a.error_code, a.member_epoch), (ErrorCode::None, 2));
    assert_eq!(partitions(&a), vec![0]);
    let listed = c.list_groups(&[]);
    assert_eq!(listed[0].group_type, "share");
    assert_eq!(listed[0].state, "Stable");
}

#[test]
fn partitions_are_split_while_members_are_fewer() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    beat(&mut c, 0, "a", 0, Some(&["four"]));
    let b = beat(&mut c, 0, "b", 0, Some(&["four"]));
    let a = beat(&mut c, 0, "a", 1, None);
    assert_eq!(partitions(&a), vec![0, 2]);
    assert_eq!(partitions(&b), vec![1, 3]);
}

#[test]
fn leaving_and_expiring_give_the_partitions_to_the_others() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    beat(&mut c, 0, "a", 0, Some(&["four"]));
    beat(&mut c, 0, "b", 0, Some(&["four"]));
    let left = beat(&mut c, 0, "b", 2, Some(&["four"]));
    assert_eq!(left.error_code, ErrorCode::None);
    let gone = beat(&mut c, 0, "b", -1, None);
    assert_eq!((gone.error_code, gone.member_epoch), (ErrorCode::None, -1));
    let a = beat(&mut c, 0, "a", 2, None);
    assert_eq!((a.member_epoch, partitions(&a)), (3, vec![0, 1, 2, 3]));
    // "a" stops heartbeating: dropped after the session timeout.
    let timeout = GroupConfig::default().share.session_timeout_ms;
    c.tick(timeout + 1);
    assert!(c.describe_share_group("sg").unwrap().members.is_empty());
    assert_eq!(
        beat(&mut c, timeout + 2, "a", 3, None).error_code,
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn a_groups_own_timeouts_set_the_interval_and_the_session() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    let own = MemberTimeouts {
        session_timeout_ms: 50_000,
        heartbeat_interval_ms: 7_000,
    };
    let share = ShareHeartbeatRequest {
        group_id: "sg".into(),
        member_id: "a".into(),
        subscribed_topic_names: Some(vec!["one".into()]),
        timeouts: Some(own),
        ..Default::default()
    };
    let answer = c.share_heartbeat(0, &share, &topics).0;
    assert_eq!(answer.heartbeat_interval_ms, 7_000);
    let consumer = ConsumerHeartbeatRequest {
        group_id: "cg".into(),
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(vec!["one".into()]),
        timeouts: Some(own),
        ..Default::default()
    };
    let answer = c.consumer_heartbeat(0, &consumer, &topics).0;
    assert_eq!(answer.heartbeat_interval_ms, 7_000);
    // Past the broker's 45 s, within the groups' own 50 s: both stay.
    c.tick(49_000);
    assert_eq!(c.describe_share_group("sg").map(|g| g.members.len()), Ok(1));
    assert_eq!(
        c.describe_consumer_group("cg").map(|g| g.members.len()),
        Ok(1)
    );
    c.tick(50_001);
    assert_eq!(c.describe_share_group("sg").map(|g| g.members.len()), Ok(0));
    assert_eq!(
        c.describe_consumer_group("cg").map(|g| g.members.len()),
        Ok(0)
    );
}

#[test]
fn stale_and_unknown_epochs_are_fenced() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    beat(&mut c, 0, "a", 0, Some(&["one"]));
    beat(&mut c, 0, "b", 0, Some(&["one"]));
    // "a" is at 1; the group at 2. 1 is tolerated (a lost answer), 7 is not.
    assert_eq!(
        beat(&mut c, 0, "a", 7, None).error_code,
        ErrorCode::FencedMemberEpoch
    );
    assert_eq!(beat(&mut c, 0, "a", 1, None).error_code, ErrorCode::None);
    assert_eq!(
        beat(&mut c, 0, "zz", 4, None).error_code,
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn a_share_group_id_is_not_another_protocols() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    beat(&mut c, 0, "a", 0, Some(&["one"]));
    let consumer = ConsumerHeartbeatRequest {
        group_id: "sg".into(),
        member_epoch: 0,
        subscribed_topic_names: Some(vec!["one".into()]),
        ..Default::default()
    };
    let (r, _) = c.consumer_heartbeat(0, &consumer, &topics);
    assert_eq!(r.error_code, ErrorCode::GroupIdNotFound);
    // A share group commits no consumer offsets.
    let commit = coordinator::OffsetCommitRequest {
        group_id: "sg".into(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets: vec![(TopicPartition::new("one", 0), 5, -1, String::new(), -1)],
        retention_ms: -1,
    };
    let (codes, _) = c.commit_offsets(0, &commit);
    assert!(codes
        .iter()
        .all(|(_, code)| *code == ErrorCode::GroupIdNotFound));
}

#[test]
fn a_share_groups_topics_outlive_its_members_and_go_with_the_group() {
    let mut c = GroupCoordinator::new(GroupConfig::default());
    let req = ShareHeartbeatRequest {
        group_id: "sg".into(),
        member_id: "a".into(),
        member_epoch: 0,
        subscribed_topic_names: Some(vec!["one".into(), "four".into()]),
        ..Default::default()
    };
    let (_, records) = c.share_heartbeat(0, &req, &topics);
    let topics_key = super::records::encode_share_group_topics_key("sg");
    let recorded = records.iter().filter(|(key, _)| *key == topics_key);
    assert_eq!(recorded.count(), 1, "the new topics are recorded");
    let (again, none) = c.share_heartbeat(
        1,
        &ShareHeartbeatRequest {
            member_epoch: 1,
            ..req.clone()
        },
        &topics,
    );
    assert_eq!(again.error_code, ErrorCode::None);
    assert!(none.is_empty(), "nothing new");
    let both: Vec<&str> = vec!["four", "one"];
    let known = |c: &GroupCoordinator| -> Option<Vec<String>> {
        c.share_group_topics("sg")
            .map(|t| t.iter().cloned().collect())
    };
    assert_eq!(
        known(&c),
        Some(both.iter().map(|s| s.to_string()).collect())
    );
    // A coordinator that replays the record knows them without the member.
    let mut replayed = GroupCoordinator::new(GroupConfig::default());
    for (key, value) in &records {
        replayed.replay(key, value.as_deref()).unwrap();
    }
    assert_eq!(known(&replayed), known(&c));
    // DeleteGroups there (the group has no member it knows) drops them.
    let (codes, tombstones) = replayed.delete_groups(&["sg".to_string()]);
    assert_eq!(codes, vec![("sg".to_string(), ErrorCode::None)]);
    assert!(tombstones
        .iter()
        .any(|(key, value)| *key == topics_key && value.is_none()));
    assert_eq!(known(&replayed), None);
}

//! Static group membership (KIP-345) on the classic protocol, by hand: a
//! static leader that restarts (rejoins with its `group.instance.id` and
//! no member id) keeps its assignment and nobody rebalances, whatever the
//! JoinGroup version. From v9 the answer names it the leader with
//! `skip_assignment` (KIP-814); before v9 there is no such field, and
//! Kafka names the leader by its old member id, so the client syncs as a
//! follower. rill used to set `skip_assignment` at every version, which a
//! v5 answer (librdkafka's) cannot carry: the broker closed the
//! connection, and the restarted consumer only got in after its session
//! expired, with a rebalance (librdkafka's 0102_static_group_rebalance).

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, GroupId, JoinGroupRequest, JoinGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use rill_tests::cluster::wait_for;
use rill_tests::raw;
use rill_tests::{data_dir, Broker};
use std::net::SocketAddr;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// The offsets topic's creation and load on a loaded machine.
const READY: Duration = Duration::from_secs(30);

/// A JoinGroup of static member `instance-1` of `group` at `version`.
fn join(addr: SocketAddr, version: i16, group: &str, member_id: &str) -> JoinGroupResponse {
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    protocol.metadata = bytes::Bytes::from_static(b"subscription");
    let mut body = JoinGroupRequest::default();
    body.group_id = GroupId(StrBytes::from_string(group.to_string()));
    body.session_timeout_ms = 30_000;
    body.rebalance_timeout_ms = 30_000;
    body.member_id = StrBytes::from_string(member_id.to_string());
    body.group_instance_id = Some(StrBytes::from_static_str("instance-1"));
    body.protocol_type = StrBytes::from_static_str("consumer");
    body.protocols = vec![protocol];
    raw::request(addr, ApiKey::JoinGroup, version, &body)
        .unwrap_or_else(|e| panic!("JoinGroup v{version} answered, not {e}"))
}

/// A SyncGroup v3 of `member_id` in `generation`, handing out `assignments`.
fn sync(
    addr: SocketAddr,
    group: &str,
    (member_id, generation): (&str, i32),
    assignments: Vec<SyncGroupRequestAssignment>,
) -> SyncGroupResponse {
    let mut body = SyncGroupRequest::default();
    body.group_id = GroupId(StrBytes::from_string(group.to_string()));
    body.generation_id = generation;
    body.member_id = StrBytes::from_string(member_id.to_string());
    body.group_instance_id = Some(StrBytes::from_static_str("instance-1"));
    body.assignments = assignments;
    raw::request(addr, ApiKey::SyncGroup, 3, &body).expect("SyncGroup answered")
}

#[test]
fn a_static_leader_rejoins_without_a_rebalance_at_every_join_version() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    for version in [5, 9] {
        let group = format!("static-v{version}");
        let first = wait_for("the group coordinator", READY, || {
            let answer = join(broker.addr, version, &group, "");
            (answer.error_code == 0).then_some(answer)
        });
        let (leader, generation) = (first.member_id.to_string(), first.generation_id);
        assert_eq!(first.leader.as_str(), leader, "the first member leads");
        let mut assignment = SyncGroupRequestAssignment::default();
        assignment.member_id = first.member_id.clone();
        assignment.assignment = bytes::Bytes::from_static(b"mine");
        let synced = sync(broker.addr, &group, (&leader, generation), vec![assignment]);
        assert_eq!(synced.error_code, 0);

        // The process restarts: same instance id, no member id.
        let again = join(broker.addr, version, &group, "");
        assert_eq!((again.error_code, again.generation_id), (0, generation));
        let new_id = again.member_id.to_string();
        assert_ne!(new_id, leader, "a new member id");
        if version >= 9 {
            assert_eq!(again.leader.as_str(), new_id, "told it leads");
            assert!(again.skip_assignment, "and that it need not assign");
            assert_eq!(again.members.len(), 1);
        } else {
            assert_eq!(again.leader.as_str(), leader, "named by its old id");
            assert!(again.members.is_empty(), "so it does not assign");
        }
        let resynced = sync(broker.addr, &group, (&new_id, generation), Vec::new());
        assert_eq!(resynced.error_code, 0);
        assert_eq!(resynced.assignment.as_ref(), b"mine", "its assignment kept");
    }
}

//! A share group's offsets changed by an admin (KIP-932):
//! AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) against a
//! real `rill`, read back with confluent-kafka's `ShareConsumer`
//! (`tests/python/share_groups.py`), and the share-state APIs behind them
//! (InitializeShareGroupState 83, DeleteShareGroupState 86,
//! ReadShareGroupStateSummary 87) over a raw socket.
//!
//! What must hold, on one broker and on three:
//! - a group with a member is refused (NON_EMPTY_GROUP), and nothing moves;
//! - an empty group's start offset moves to the offset asked, and the next
//!   share consumer reads from there, although the partition's leader
//!   still held the old state in memory: records already accepted are
//!   delivered again, each once;
//! - deleted offsets start the group again by `share.auto.offset.reset`,
//!   and DescribeShareGroupOffsets shows none (-1) until then;
//! - each reset raises the state epoch (ReadShareGroupStateSummary), and a
//!   partition leader's write of the old epoch is FENCED_STATE_EPOCH;
//! - an unknown topic or partition, or a negative offset, is refused for
//!   that partition alone;
//! - DeleteGroups of a share group drops its states too, even after a
//!   restart (when the coordinator knows its topics but no member), so the
//!   same group id then starts afresh.

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::{
    read_share_group_state_summary_request, write_share_group_state_request,
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, ApiKey, DeleteGroupsRequest,
    DeleteGroupsResponse, DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, GroupId,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, TopicName,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::protocol::StrBytes;
use rill_tests::cluster::{find_coordinator, wait_for, Cluster};
use rill_tests::kafka::create_topic_replicated;
use rill_tests::python::share_groups as share;
use rill_tests::{data_dir, raw, Broker};
use std::net::SocketAddr;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const SETTLE: Duration = Duration::from_secs(60);
const GROUP: &str = "resettable";
const TOPIC: &str = "replayed";

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const GROUP_ID_NOT_FOUND: i16 = 69;
const INVALID_REQUEST: i16 = 42;
const NON_EMPTY_GROUP: i16 = 68;
const FENCED_STATE_EPOCH: i16 = 124;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_are_altered_and_deleted_on_one_broker() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let bootstrap = broker.bootstrap();
    create_topic_replicated(&bootstrap, TOPIC, 1, 1, &[]).await;
    let topic_id = reset_and_replay(&bootstrap, &[broker.addr]);
    // Two resets since the first state (alter, delete): epoch 2, the last
    // reader's start offset past every record; a write of epoch 0 is
    // fenced. One broker coordinates everything.
    assert_eq!(summary(broker.addr, topic_id), (2, 20));
    assert_eq!(write_of_epoch(broker.addr, topic_id, 0), FENCED_STATE_EPOCH);

    // After a restart the coordinator knows no member of the group but its
    // topics: DeleteGroups drops its state too, and the same group id then
    // reads from the start again.
    broker.stop();
    broker.restart();
    let deleted = wait_for(
        "DeleteGroups answered by a loaded coordinator",
        SETTLE,
        || {
            let code = delete_group(broker.addr);
            (code != COORDINATOR_LOAD_IN_PROGRESS).then_some(code)
        },
    );
    assert_eq!(deleted, 0);
    assert_eq!(delete_group(broker.addr), GROUP_ID_NOT_FOUND);
    assert_eq!(describe(broker.addr).0, -1);
    assert_eq!(collect(&bootstrap, 20), (0..20).collect::<Vec<_>>());
}

/// DeleteGroups of the group: its code.
fn delete_group(addr: SocketAddr) -> i16 {
    let mut request = DeleteGroupsRequest::default();
    request.groups_names = vec![GroupId(StrBytes::from_static_str(GROUP))];
    let response: DeleteGroupsResponse =
        raw::request(addr, ApiKey::DeleteGroups, 2, &request).expect("DeleteGroups");
    response.results[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_are_altered_and_deleted_on_three_brokers() {
    let cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    create_topic_replicated(&bootstrap, TOPIC, 1, 3, &[]).await;
    let addresses: Vec<SocketAddr> = cluster.brokers.iter().map(|b| b.addr).collect();
    reset_and_replay(&bootstrap, &addresses);
}

/// The whole scenario against the brokers at `addresses`; the topic's id.
fn reset_and_replay(bootstrap: &str, addresses: &[SocketAddr]) -> [u8; 16] {
    share(
        bootstrap,
        &["config", GROUP, "share.auto.offset.reset=earliest"],
    );
    share(bootstrap, &["produce", TOPIC, "0", "20"]);
    assert_eq!(collect(bootstrap, 20), (0..20).collect::<Vec<_>>());
    let coordinator = coordinator_of(bootstrap, addresses);
    let (start, topic_id) = describe(coordinator);
    assert_eq!(start, 20, "every record accepted");

    // A member: refused, and nothing moves.
    heartbeat(coordinator, 0);
    assert_eq!(
        alter(coordinator, TOPIC, &[(0, 5)]),
        (NON_EMPTY_GROUP, vec![])
    );
    assert_eq!(delete(coordinator, TOPIC), (NON_EMPTY_GROUP, None));
    heartbeat(coordinator, -1);
    assert_eq!(describe(coordinator).0, 20);

    // Empty: back to 5, and the next consumer reads 5..20 again, once each.
    let altered = wait_for("the group to be empty", SETTLE, || {
        let answer = alter(coordinator, TOPIC, &[(0, 5)]);
        (answer.0 != NON_EMPTY_GROUP).then_some(answer)
    });
    assert_eq!(altered, (0, vec![0]));
    assert_eq!(describe(coordinator).0, 5);
    assert_eq!(collect(bootstrap, 15), (5..20).collect::<Vec<_>>());
    assert_eq!(describe(coordinator).0, 20);

    // Refused alone: a partition the topic lacks, a negative offset, an
    // unknown topic.
    let refusals = wait_for("the group to be empty", SETTLE, || {
        let answer = alter(coordinator, TOPIC, &[(1, 0), (0, -3)]);
        (answer.0 != NON_EMPTY_GROUP).then_some(answer)
    });
    assert_eq!(
        refusals,
        (0, vec![UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST])
    );
    assert_eq!(alter(coordinator, "no-such-topic", &[(0, 0)]), (0, vec![3]));
    assert_eq!(delete(coordinator, "no-such-topic"), (0, Some(3)));

    // Deleted: no start offset until a consumer starts again, from the
    // earliest record (the group's share.auto.offset.reset).
    assert_eq!(delete(coordinator, TOPIC), (0, Some(0)));
    assert_eq!(describe(coordinator).0, -1);
    assert_eq!(collect(bootstrap, 20), (0..20).collect::<Vec<_>>());
    assert_eq!(describe(coordinator).0, 20);
    topic_id
}

/// `count` records read (and accepted) by one share consumer of the
/// group, as numbers in the order read, sorted.
fn collect(bootstrap: &str, count: usize) -> Vec<i64> {
    let read = share(bootstrap, &["collect", TOPIC, GROUP, &count.to_string()]);
    let mut values: Vec<i64> = read["values"]
        .as_array()
        .unwrap_or_else(|| panic!("values: {read}"))
        .iter()
        .filter_map(|v| v.as_str()?.parse().ok())
        .collect();
    values.sort_unstable();
    values
}

/// The group's coordinator among `addresses`.
fn coordinator_of(bootstrap: &str, addresses: &[SocketAddr]) -> SocketAddr {
    let id = wait_for("the group's coordinator", SETTLE, || {
        find_coordinator(bootstrap, GROUP, 0)
    });
    // Node ids are 1..=n in start order; a single broker is node 1.
    addresses[usize::try_from(id - 1)
        .unwrap_or(0)
        .min(addresses.len() - 1)]
}

/// A ShareGroupHeartbeat of member "admin-probe" at `epoch` (0 joins, -1
/// leaves); it must be answered without error.
fn heartbeat(addr: SocketAddr, epoch: i32) {
    let code = rill_tests::share::heartbeat(addr, GROUP, "admin-probe-member", epoch, &[TOPIC]);
    assert_eq!(code, 0);
}

/// AlterShareGroupOffsets of `topic`'s `(partition, start offset)`s: the
/// top-level code and each partition's.
fn alter(addr: SocketAddr, topic: &str, offsets: &[(i32, i64)]) -> (i16, Vec<i16>) {
    let mut asked = AlterShareGroupOffsetsRequestTopic::default();
    asked.topic_name = TopicName(StrBytes::from_string(topic.into()));
    asked.partitions = (offsets.iter())
        .map(|&(partition, offset)| {
            let mut p = AlterShareGroupOffsetsRequestPartition::default();
            p.partition_index = partition;
            p.start_offset = offset;
            p
        })
        .collect();
    let mut request = AlterShareGroupOffsetsRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str(GROUP));
    request.topics = vec![asked];
    let response: AlterShareGroupOffsetsResponse =
        raw::request(addr, ApiKey::AlterShareGroupOffsets, 0, &request).expect("alter");
    let codes = (response.responses.iter())
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    (response.error_code, codes)
}

/// DeleteShareGroupOffsets of `topic`: the top-level code and the topic's.
fn delete(addr: SocketAddr, topic: &str) -> (i16, Option<i16>) {
    let mut asked = DeleteShareGroupOffsetsRequestTopic::default();
    asked.topic_name = TopicName(StrBytes::from_string(topic.into()));
    let mut request = DeleteShareGroupOffsetsRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str(GROUP));
    request.topics = vec![asked];
    let response: DeleteShareGroupOffsetsResponse =
        raw::request(addr, ApiKey::DeleteShareGroupOffsets, 0, &request).expect("delete");
    let code = response.responses.first().map(|t| t.error_code);
    (response.error_code, code)
}

/// DescribeShareGroupOffsets of partition 0: its start offset and the
/// topic's id.
fn describe(addr: SocketAddr) -> (i64, [u8; 16]) {
    let mut t = DescribeShareGroupOffsetsRequestTopic::default();
    t.topic_name = TopicName(StrBytes::from_static_str(TOPIC));
    t.partitions = vec![0];
    let mut asked = DescribeShareGroupOffsetsRequestGroup::default();
    asked.group_id = GroupId(StrBytes::from_static_str(GROUP));
    asked.topics = Some(vec![t]);
    let mut request = DescribeShareGroupOffsetsRequest::default();
    request.groups = vec![asked];
    let response: DescribeShareGroupOffsetsResponse =
        raw::request(addr, ApiKey::DescribeShareGroupOffsets, 0, &request).expect("describe");
    let topic = &response.groups[0].topics[0];
    let partition = &topic.partitions[0];
    assert_eq!(partition.error_code, 0, "{response:?}");
    (partition.start_offset, *topic.topic_id.as_bytes())
}

/// ReadShareGroupStateSummary of partition 0 (this broker coordinates its
/// state): its state epoch and start offset.
fn summary(addr: SocketAddr, topic_id: [u8; 16]) -> (i32, i64) {
    let mut partition = read_share_group_state_summary_request::PartitionData::default();
    partition.leader_epoch = -1;
    let mut topic = read_share_group_state_summary_request::ReadStateSummaryData::default();
    topic.topic_id = uuid::Uuid::from_bytes(topic_id);
    topic.partitions = vec![partition];
    let mut request = ReadShareGroupStateSummaryRequest::default();
    request.group_id = StrBytes::from_static_str(GROUP);
    request.topics = vec![topic];
    let response: ReadShareGroupStateSummaryResponse =
        raw::request(addr, ApiKey::ReadShareGroupStateSummary, 0, &request).expect("summary");
    let result = &response.results[0].partitions[0];
    assert_eq!(result.error_code, 0, "{response:?}");
    (result.state_epoch, result.start_offset)
}

/// A WriteShareGroupState of partition 0 at `state_epoch` (as a partition
/// leader that read the state then would send): its code.
fn write_of_epoch(addr: SocketAddr, topic_id: [u8; 16], state_epoch: i32) -> i16 {
    let mut partition = write_share_group_state_request::PartitionData::default();
    partition.state_epoch = state_epoch;
    partition.leader_epoch = i32::MAX;
    partition.start_offset = 0;
    let mut topic = write_share_group_state_request::WriteStateData::default();
    topic.topic_id = uuid::Uuid::from_bytes(topic_id);
    topic.partitions = vec![partition];
    let mut request = WriteShareGroupStateRequest::default();
    request.group_id = StrBytes::from_static_str(GROUP);
    request.topics = vec![topic];
    let response: WriteShareGroupStateResponse =
        raw::request(addr, ApiKey::WriteShareGroupState, 0, &request).expect("write");
    response.results[0].partitions[0].error_code
}

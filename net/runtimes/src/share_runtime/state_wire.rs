//! The share-partition state as Kafka's share-state APIs carry it
//! (ReadShareGroupState, WriteShareGroupState, InitializeShareGroupState,
//! ReadShareGroupStateSummary), both the partition leader's side and the
//! share coordinator's.
//!
//! `state_epoch` is Kafka's: raised by each reset. The sequence that
//! orders one leader's writes has no field in Kafka's layout, so it
//! travels in a tagged field of rill's ([`SEQUENCE_TAG`]), which other
//! brokers skip. A key never written reads as start offset -1 and state
//! epoch -1; a key reset to nothing as start offset -1 and its state epoch.

use coordinators::share::state::StateRun;
use coordinators::share::{ShareKey, ShareSnapshot};
use engine::ErrorCode;
use kafka_protocol::messages::{
    initialize_share_group_state_request, read_share_group_state_request,
    read_share_group_state_response, write_share_group_state_request,
    InitializeShareGroupStateRequest, ReadShareGroupStateRequest, WriteShareGroupStateRequest,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

/// The tagged field holding the write sequence (4 bytes, big-endian), far
/// above the tags Kafka's schemas use.
pub const SEQUENCE_TAG: i32 = 10_000;

/// The tagged fields carrying `sequence`.
fn sequence_tag(sequence: i32) -> BTreeMap<i32, bytes::Bytes> {
    let bytes = bytes::Bytes::copy_from_slice(&sequence.to_be_bytes());
    BTreeMap::from([(SEQUENCE_TAG, bytes)])
}

/// The sequence in `tags` (0 when absent: a writer that does not send it).
fn sequence_of(tags: &BTreeMap<i32, bytes::Bytes>) -> i32 {
    (tags.get(&SEQUENCE_TAG))
        .and_then(|bytes| <[u8; 4]>::try_from(bytes.as_ref()).ok())
        .map_or(0, i32::from_be_bytes)
}

/// The wire's state batches of `runs` (the same fields in each message).
macro_rules! wire_batches {
    ($batch:ty, $runs:expr) => {
        ($runs.iter())
            .map(|run| {
                let mut batch = <$batch>::default();
                batch.first_offset = run.first_offset;
                batch.last_offset = run.last_offset;
                batch.delivery_state = run.state as i8;
                batch.delivery_count = run.delivery_count;
                batch
            })
            .collect()
    };
}

/// The runs of the wire's state batches.
macro_rules! runs_of {
    ($batches:expr) => {
        ($batches.iter())
            .map(|b| StateRun {
                first_offset: b.first_offset,
                last_offset: b.last_offset,
                state: b.delivery_state as u8,
                delivery_count: b.delivery_count,
            })
            .collect()
    };
}

/// ReadShareGroupState of `key` by the leader of epoch `leader_epoch`.
pub fn read_request(key: &ShareKey, leader_epoch: i32) -> ReadShareGroupStateRequest {
    let mut partition = read_share_group_state_request::PartitionData::default();
    partition.partition = key.partition;
    partition.leader_epoch = leader_epoch;
    let mut topic = read_share_group_state_request::ReadStateData::default();
    topic.topic_id = uuid::Uuid::from_bytes(key.topic_id);
    topic.partitions = vec![partition];
    let mut request = ReadShareGroupStateRequest::default();
    request.group_id = StrBytes::from_string(key.group.clone());
    request.topics = vec![topic];
    request
}

/// WriteShareGroupState of `snapshot` as `key`'s state.
pub fn write_request(key: &ShareKey, snapshot: &ShareSnapshot) -> WriteShareGroupStateRequest {
    let mut partition = write_share_group_state_request::PartitionData::default();
    partition.partition = key.partition;
    partition.state_epoch = snapshot.state_epoch;
    partition.leader_epoch = snapshot.leader_epoch;
    partition.unknown_tagged_fields = sequence_tag(snapshot.sequence);
    partition.start_offset = snapshot.start_offset;
    partition.state_batches =
        wire_batches!(write_share_group_state_request::StateBatch, snapshot.runs);
    let mut topic = write_share_group_state_request::WriteStateData::default();
    topic.topic_id = uuid::Uuid::from_bytes(key.topic_id);
    topic.partitions = vec![partition];
    let mut request = WriteShareGroupStateRequest::default();
    request.group_id = StrBytes::from_string(key.group.clone());
    request.topics = vec![topic];
    request
}

/// A WriteShareGroupState partition's snapshot (its coordinator's side).
pub fn snapshot_of_write(
    partition: &write_share_group_state_request::PartitionData,
) -> ShareSnapshot {
    ShareSnapshot {
        leader_epoch: partition.leader_epoch,
        sequence: sequence_of(&partition.unknown_tagged_fields),
        state_epoch: partition.state_epoch,
        start_offset: partition.start_offset,
        runs: runs_of!(partition.state_batches),
    }
}

/// A ReadShareGroupState partition's answer for `snapshot` (its
/// coordinator's side; `None`: start offset and state epoch -1).
pub fn read_result(
    partition: i32,
    snapshot: Option<&ShareSnapshot>,
) -> read_share_group_state_response::PartitionResult {
    let mut result = read_share_group_state_response::PartitionResult::default();
    result.partition = partition;
    result.start_offset = -1;
    result.state_epoch = -1;
    if let Some(snapshot) = snapshot {
        result.state_epoch = snapshot.state_epoch;
        result.unknown_tagged_fields = sequence_tag(snapshot.sequence);
        result.start_offset = snapshot.start_offset;
        result.state_batches =
            wire_batches!(read_share_group_state_response::StateBatch, snapshot.runs);
    }
    result
}

/// The snapshot a ReadShareGroupState answer holds (the partition
/// leader's side; `None`: never written).
pub fn snapshot_of_read(
    result: &read_share_group_state_response::PartitionResult,
) -> Result<Option<ShareSnapshot>, ErrorCode> {
    match ErrorCode::from_code(result.error_code).unwrap_or(ErrorCode::UnknownServerError) {
        ErrorCode::None => {}
        code => return Err(code),
    }
    if result.start_offset < 0 && result.state_epoch < 0 {
        return Ok(None);
    }
    Ok(Some(ShareSnapshot {
        leader_epoch: -1,
        sequence: sequence_of(&result.unknown_tagged_fields),
        state_epoch: result.state_epoch,
        start_offset: result.start_offset,
        runs: runs_of!(result.state_batches),
    }))
}

/// InitializeShareGroupState of `key` at `state_epoch` (`None`: -1, one
/// above the key's, which rill's share coordinator reads so) from
/// `start_offset` (-1: nothing).
pub fn initialize_request(
    key: &ShareKey,
    state_epoch: Option<i32>,
    start_offset: i64,
) -> InitializeShareGroupStateRequest {
    let mut partition = initialize_share_group_state_request::PartitionData::default();
    partition.partition = key.partition;
    partition.state_epoch = state_epoch.unwrap_or(-1);
    partition.start_offset = start_offset;
    let mut topic = initialize_share_group_state_request::InitializeStateData::default();
    topic.topic_id = uuid::Uuid::from_bytes(key.topic_id);
    topic.partitions = vec![partition];
    let mut request = InitializeShareGroupStateRequest::default();
    request.group_id = StrBytes::from_string(key.group.clone());
    request.topics = vec![topic];
    request
}

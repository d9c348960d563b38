//! The partition leader's side of the share-partition state: reads and
//! writes go to the share coordinator of the key, on this broker when it
//! leads the key's `__share_group_state` partition, else over the wire
//! (ReadShareGroupState / WriteShareGroupState v0, as Kafka's persister
//! sends them), to the broker that does.
//!
//! On the wire the snapshot's sequence travels as `state_epoch`, and a
//! key never written reads as start offset -1.

use crate::cluster_runtime::partition_leader;
use crate::replication_runtime::client::KafkaConnection;
use crate::share_coordinator::{self, state_partition_for, StateRequest, STATE_TOPIC};
use crate::Shard;
use coordinators::share::state::StateRun;
use coordinators::share::{ShareKey, ShareSnapshot};
use engine::ErrorCode;
use kafka_protocol::messages::{
    read_share_group_state_request, read_share_group_state_response,
    write_share_group_state_request, ApiKey, ReadShareGroupStateRequest,
    ReadShareGroupStateResponse, WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::net::ToSocketAddrs;
use std::rc::Rc;
use std::time::Duration;

/// How long a connection to another broker's share coordinator may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The key's state (`None`: never written), read as the partition leader
/// of epoch `leader_epoch` (older leaders are fenced from then on).
pub async fn read(
    shard: &Rc<Shard>,
    key: &ShareKey,
    leader_epoch: i32,
) -> Result<Option<ShareSnapshot>, ErrorCode> {
    let request = StateRequest::Read {
        key: key.clone(),
        leader_epoch,
    };
    route(shard, request).await
}

/// Replaces the key's state.
pub async fn write(
    shard: &Rc<Shard>,
    key: &ShareKey,
    snapshot: ShareSnapshot,
) -> Result<(), ErrorCode> {
    let request = StateRequest::Write {
        key: key.clone(),
        snapshot,
    };
    route(shard, request).await.map(|_| ())
}

async fn route(
    shard: &Rc<Shard>,
    request: StateRequest,
) -> Result<Option<ShareSnapshot>, ErrorCode> {
    let key = match &request {
        StateRequest::Read { key, .. } | StateRequest::Write { key, .. } => key.clone(),
    };
    let partitions = share_coordinator::ensure_state_topic(shard).await?;
    let partition = state_partition_for(&key, partitions);
    match partition_leader(shard, STATE_TOPIC, partition) {
        Ok((leader, host, port)) if leader != shard.config.broker_id => {
            remote(shard, (&host, port), request).await
        }
        _ => share_coordinator::call(shard, request).await,
    }
}

/// The request over the wire to the share coordinator at `host:port`.
async fn remote(
    shard: &Shard,
    (host, port): (&str, i32),
    request: StateRequest,
) -> Result<Option<ShareSnapshot>, ErrorCode> {
    let address = (host, u16::try_from(port).unwrap_or(0))
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let client_id = format!("rill-share-persister-{}", shard.config.broker_id);
    let mut connection = KafkaConnection::connect(address, CONNECT_TIMEOUT, client_id)
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, "share coordinator not reached");
            ErrorCode::CoordinatorNotAvailable
        })?;
    let unanswered = |e: String| {
        tracing::debug!(error = %e, "share coordinator did not answer");
        ErrorCode::CoordinatorNotAvailable
    };
    match request {
        StateRequest::Read { key, leader_epoch } => {
            let wire = read_request(&key, leader_epoch);
            let response: ReadShareGroupStateResponse = connection
                .request(ApiKey::ReadShareGroupState, 0, &wire)
                .await
                .map_err(unanswered)?;
            let result = response
                .results
                .into_iter()
                .flat_map(|r| r.partitions)
                .next();
            let result = result.ok_or(ErrorCode::CoordinatorNotAvailable)?;
            snapshot_of_read(&result)
        }
        StateRequest::Write { key, snapshot } => {
            let wire = write_request(&key, &snapshot);
            let response: WriteShareGroupStateResponse = connection
                .request(ApiKey::WriteShareGroupState, 0, &wire)
                .await
                .map_err(unanswered)?;
            let result = response
                .results
                .into_iter()
                .flat_map(|r| r.partitions)
                .next();
            let code = result.map_or(ErrorCode::CoordinatorNotAvailable.code(), |r| r.error_code);
            match ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError) {
                ErrorCode::None => Ok(None),
                code => Err(code),
            }
        }
    }
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

fn read_request(key: &ShareKey, leader_epoch: i32) -> ReadShareGroupStateRequest {
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

fn write_request(key: &ShareKey, snapshot: &ShareSnapshot) -> WriteShareGroupStateRequest {
    let mut partition = write_share_group_state_request::PartitionData::default();
    partition.partition = key.partition;
    partition.state_epoch = snapshot.sequence;
    partition.leader_epoch = snapshot.leader_epoch;
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
        sequence: partition.state_epoch,
        start_offset: partition.start_offset,
        runs: runs_of!(partition.state_batches),
    }
}

/// A ReadShareGroupState partition's answer for `snapshot` (its
/// coordinator's side; `None`: start offset -1).
pub fn read_result(
    partition: i32,
    snapshot: Option<&ShareSnapshot>,
) -> read_share_group_state_response::PartitionResult {
    let mut result = read_share_group_state_response::PartitionResult::default();
    result.partition = partition;
    result.start_offset = -1;
    if let Some(snapshot) = snapshot {
        result.state_epoch = snapshot.sequence;
        result.start_offset = snapshot.start_offset;
        result.state_batches =
            wire_batches!(read_share_group_state_response::StateBatch, snapshot.runs);
    }
    result
}

/// The snapshot a ReadShareGroupState answer holds (the partition
/// leader's side).
fn snapshot_of_read(
    result: &read_share_group_state_response::PartitionResult,
) -> Result<Option<ShareSnapshot>, ErrorCode> {
    match ErrorCode::from_code(result.error_code).unwrap_or(ErrorCode::UnknownServerError) {
        ErrorCode::None => {}
        code => return Err(code),
    }
    if result.start_offset < 0 {
        return Ok(None);
    }
    Ok(Some(ShareSnapshot {
        leader_epoch: -1,
        sequence: result.state_epoch,
        start_offset: result.start_offset,
        runs: runs_of!(result.state_batches),
    }))
}

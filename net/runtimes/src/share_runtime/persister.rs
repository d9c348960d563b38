//! The partition leader's side of the share-partition state: reads and
//! writes go to the share coordinator of the key, on this broker when it
//! leads the key's `__share_group_state` partition, else over the wire
//! (ReadShareGroupState / WriteShareGroupState v0, as Kafka's persister
//! sends them), to the broker that does.
//!
//! A reset (AlterShareGroupOffsets, DeleteShareGroupOffsets) goes the same
//! way, as InitializeShareGroupState. The wire's layouts are in
//! [`super::state_wire`].

use super::state_wire::{initialize_request, read_request, snapshot_of_read, write_request};
use crate::cluster_runtime::partition_leader;
use crate::replication_runtime::client::KafkaConnection;
use crate::share_coordinator::{self, state_partition_for, StateRequest, STATE_TOPIC};
use crate::Shard;
use coordinators::share::{ShareKey, ShareSnapshot};
use engine::ErrorCode;
use kafka_protocol::messages::{
    ApiKey, InitializeShareGroupStateResponse, ReadShareGroupStateResponse,
    WriteShareGroupStateResponse,
};
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

/// Starts the key's state again one state epoch higher: its window empty
/// from `start_offset`, or nothing (-1). The partition leader's next write
/// of the old state is fenced, and it reads the new one.
pub async fn reset(shard: &Rc<Shard>, key: &ShareKey, start_offset: i64) -> Result<(), ErrorCode> {
    let request = StateRequest::Reset {
        key: key.clone(),
        state_epoch: None,
        start_offset,
    };
    route(shard, request).await.map(|_| ())
}

async fn route(
    shard: &Rc<Shard>,
    request: StateRequest,
) -> Result<Option<ShareSnapshot>, ErrorCode> {
    let key = request.key().clone();
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
    let mut connection =
        KafkaConnection::connect(&shard.config, (host, address), CONNECT_TIMEOUT, client_id)
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
            snapshot_of_read(&result.ok_or(ErrorCode::CoordinatorNotAvailable)?)
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
            answered(result.map(|r| r.error_code))
        }
        StateRequest::Reset {
            key,
            state_epoch,
            start_offset,
        } => {
            let wire = initialize_request(&key, state_epoch, start_offset);
            let response: InitializeShareGroupStateResponse = connection
                .request(ApiKey::InitializeShareGroupState, 0, &wire)
                .await
                .map_err(unanswered)?;
            let result = response
                .results
                .into_iter()
                .flat_map(|r| r.partitions)
                .next();
            answered(result.map(|r| r.error_code))
        }
    }
}

/// A write's or reset's answer: its partition's code (none at all: the
/// coordinator is not there).
fn answered(code: Option<i16>) -> Result<Option<ShareSnapshot>, ErrorCode> {
    let code = code.unwrap_or(ErrorCode::CoordinatorNotAvailable.code());
    match ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError) {
        ErrorCode::None => Ok(None),
        code => Err(code),
    }
}

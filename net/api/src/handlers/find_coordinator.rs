//! FindCoordinator (key 10): a group's coordinator is the leader of its
//! `__consumer_offsets` partition, a transactional id's the leader of its
//! `__transaction_state` partition (from the committed metadata image); the
//! topic is created here if needed, as Kafka does, so that it exists before
//! the first coordinator call.

use super::{str_bytes, Handler, HandlerFuture, Request};
use coordinators::group::offsets_partition_for;
use coordinators::txn::{txn_partition_for, TXN_STATE_TOPIC};
use engine::ErrorCode;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use runtimes::cluster_runtime;
use runtimes::cluster_runtime::{partition_leader_on, LeaderEndpoint};
use runtimes::group_runtime::{self, OFFSETS_TOPIC};
use runtimes::txn_runtime;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v5 (v4 batches keys; v6 adds share-group keys, which rill lacks).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::FindCoordinator,
    min_version: 0,
    max_version: 5,
    handle,
};

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: FindCoordinatorRequest = request.decode()?;
        let keys: Vec<StrBytes> = if request.version >= 4 {
            body.coordinator_keys.clone()
        } else {
            vec![body.key.clone()]
        };
        let authz = cluster_runtime::authz(&shard, &request.session);
        let mut found = Vec::with_capacity(keys.len());
        for key in &keys {
            // DESCRIBE on the group or the transactional id, as Kafka.
            let refused = if body.key_type == KEY_TYPE_GROUP {
                authz.group(Operation::Describe, key.as_str()).err()
            } else {
                authz
                    .transactional_id(Operation::Describe, key.as_str())
                    .err()
            };
            if let Some(code) = refused {
                found.push(Err(code));
                continue;
            }
            found.push(
                coordinator_of(
                    &shard,
                    body.key_type,
                    key.as_str(),
                    &request.session.listener,
                )
                .await,
            );
        }
        let mut response = FindCoordinatorResponse::default();
        if request.version >= 4 {
            response.coordinators = keys
                .into_iter()
                .zip(found)
                .map(|(key, outcome)| {
                    let mut c = Coordinator::default();
                    c.key = key;
                    let (node_id, host, port, code) = answer(outcome);
                    c.node_id = node_id;
                    c.host = host;
                    c.port = port;
                    c.error_code = code;
                    c
                })
                .collect();
        } else if let Some(outcome) = found.into_iter().next() {
            let (node_id, host, port, code) = answer(outcome);
            response.error_code = code;
            response.node_id = node_id;
            response.host = host;
            response.port = port;
        }
        request.respond(&response)
    })
}

/// The broker leading the key's coordinator partition, creating the
/// coordinator's topic first if needed (as Kafka does), so that it exists
/// before the first group or transaction call.
async fn coordinator_of(
    shard: &Rc<Shard>,
    key_type: i8,
    key: &str,
    listener: &str,
) -> Result<LeaderEndpoint, ErrorCode> {
    match key_type {
        KEY_TYPE_GROUP => {
            let partitions = group_runtime::ensure_offsets_topic(shard).await?;
            partition_leader_on(
                shard,
                OFFSETS_TOPIC,
                offsets_partition_for(key, partitions),
                listener,
            )
        }
        KEY_TYPE_TRANSACTION => {
            txn_runtime::ensure_txn_topic(shard).await?;
            partition_leader_on(shard, TXN_STATE_TOPIC, txn_partition_for(key), listener)
        }
        _ => Err(ErrorCode::InvalidRequest),
    }
}

fn answer(outcome: Result<LeaderEndpoint, ErrorCode>) -> (BrokerId, StrBytes, i32, i16) {
    match outcome {
        Ok((node_id, host, port)) => (BrokerId(node_id), str_bytes(host), port, 0),
        Err(code) => (BrokerId(-1), str_bytes(String::new()), -1, code.code()),
    }
}

//! FindCoordinator (key 10): every coordinator (group or transaction) lives
//! on this single node, so the answer is always this broker's advertised
//! listener. For group keys `__consumer_offsets` is created here if needed,
//! as Kafka does, so that it exists before the first group call.

use super::{str_bytes, Handler, HandlerFuture, Request};
use crate::group_runtime;
use crate::shard::Shard;
use engine::ErrorCode;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
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
        let error_code = match body.key_type {
            KEY_TYPE_GROUP => match group_runtime::ensure_offsets_topic(&shard).await {
                Ok(_) => ErrorCode::None,
                Err(code) => code,
            },
            KEY_TYPE_TRANSACTION => ErrorCode::None,
            _ => ErrorCode::InvalidRequest,
        };
        let node_id = BrokerId(if error_code == ErrorCode::None {
            shard.config.broker_id
        } else {
            -1
        });
        let host = str_bytes(if error_code == ErrorCode::None {
            shard.config.advertised_host.clone()
        } else {
            String::new()
        });
        let port = if error_code == ErrorCode::None {
            shard.config.advertised_port
        } else {
            -1
        };
        let mut response = FindCoordinatorResponse::default();
        if request.version >= 4 {
            response.coordinators = body
                .coordinator_keys
                .into_iter()
                .map(|key| {
                    let mut c = Coordinator::default();
                    c.key = key;
                    c.node_id = node_id;
                    c.host = host.clone();
                    c.port = port;
                    c.error_code = error_code.code();
                    c
                })
                .collect();
        } else {
            response.error_code = error_code.code();
            response.node_id = node_id;
            response.host = host;
            response.port = port;
        }
        request.respond(&response)
    })
}

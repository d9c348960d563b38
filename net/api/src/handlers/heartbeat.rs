//! Heartbeat (key 12): keeps a classic member's session alive and tells it
//! when a rebalance started.

use super::{Handler, HandlerFuture, Request};
use coordinators::group::HeartbeatRequest as CoreHeartbeat;
use engine::ErrorCode;
use kafka_protocol::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v4.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::Heartbeat,
    min_version: 0,
    max_version: 4,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: HeartbeatRequest = request.decode()?;
        let group_id = body.group_id.0.to_string();
        let heartbeat = CoreHeartbeat {
            group_id: group_id.clone(),
            generation_id: body.generation_id,
            member_id: body.member_id.to_string(),
            group_instance_id: body.group_instance_id.map(|s| s.to_string()),
        };
        let mut response = HeartbeatResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.group(Operation::Read, &group_id) {
            response.error_code = code.code();
            return request.respond(&response);
        }
        response.error_code = match group_runtime::call(
            &shard,
            &group_id,
            GroupRequest::Heartbeat(heartbeat),
        )
        .await
        {
            GroupReply::Code(code) | GroupReply::Unavailable(code) => code,
            _ => ErrorCode::UnknownServerError,
        }
        .code();
        request.respond(&response)
    })
}

//! SyncGroup (key 14): the leader hands in the assignment; every member
//! waits on the coordinator shard until it is there.

use super::{str_bytes, Handler, HandlerFuture, Request};
use coordinators::group::SyncRequest;
use engine::ErrorCode;
use kafka_protocol::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v5 (v5 names the protocol type and name).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::SyncGroup,
    min_version: 0,
    max_version: 5,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: SyncGroupRequest = request.decode()?;
        let group_id = body.group_id.0.to_string();
        let sync = SyncRequest {
            group_id: group_id.clone(),
            generation_id: body.generation_id,
            member_id: body.member_id.to_string(),
            group_instance_id: body.group_instance_id.map(|s| s.to_string()),
            protocol_type: body.protocol_type.map(|s| s.to_string()),
            protocol_name: body.protocol_name.map(|s| s.to_string()),
            assignments: body
                .assignments
                .into_iter()
                .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
                .collect(),
        };
        let mut response = SyncGroupResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.group(Operation::Read, &group_id) {
            response.error_code = code.code();
            return request.respond(&response);
        }
        match group_runtime::call(&shard, &group_id, GroupRequest::Sync(sync)).await {
            GroupReply::Sync(r) => {
                response.error_code = r.error_code.code();
                response.protocol_type = r.protocol_type.map(str_bytes);
                response.protocol_name = r.protocol_name.map(str_bytes);
                response.assignment = r.assignment.into();
            }
            GroupReply::Unavailable(code) => response.error_code = code.code(),
            _ => response.error_code = ErrorCode::UnknownServerError.code(),
        }
        request.respond(&response)
    })
}

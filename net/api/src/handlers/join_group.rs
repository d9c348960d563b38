//! JoinGroup (key 11): runs on the group's coordinator shard; the answer
//! usually waits until every member has joined or the rebalance times out.

use super::{str_bytes, Handler, HandlerFuture, Request};
use coordinators::group::JoinRequest;
use engine::ErrorCode;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v9 (v4 requires a known member id, v9 carries `skip_assignment`).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::JoinGroup,
    min_version: 0,
    max_version: 9,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: JoinGroupRequest = request.decode()?;
        let version = request.version;
        let group_id = body.group_id.0.to_string();
        let join = JoinRequest {
            group_id: group_id.clone(),
            member_id: body.member_id.to_string(),
            group_instance_id: body.group_instance_id.map(|s| s.to_string()),
            client_id: client_id(&request),
            client_host: request.session.client_host(),
            session_timeout_ms: body.session_timeout_ms,
            // v0 has no rebalance timeout: Kafka uses the session timeout.
            rebalance_timeout_ms: if version == 0 {
                body.session_timeout_ms
            } else {
                body.rebalance_timeout_ms
            },
            protocol_type: body.protocol_type.to_string(),
            protocols: body
                .protocols
                .into_iter()
                .map(|p| (p.name.to_string(), p.metadata.to_vec()))
                .collect(),
            require_known_member_id: version >= 4,
            supports_skip_assignment: version >= 9,
        };
        let mut response = JoinGroupResponse::default();
        response.generation_id = -1;
        // Non-nullable before v7.
        response.protocol_name = Some(str_bytes(""));
        response.member_id = body.member_id;
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.group(Operation::Read, &group_id) {
            response.error_code = code.code();
            return request.respond(&response);
        }
        match group_runtime::call(&shard, &group_id, GroupRequest::Join(join)).await {
            GroupReply::Join(r) => {
                response.error_code = r.error_code.code();
                response.generation_id = r.generation_id;
                response.protocol_type = r.protocol_type.map(str_bytes);
                if let Some(name) = r.protocol_name {
                    response.protocol_name = Some(str_bytes(name));
                }
                response.leader = str_bytes(r.leader);
                response.skip_assignment = r.skip_assignment;
                response.member_id = str_bytes(r.member_id);
                response.members = r
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut member = JoinGroupResponseMember::default();
                        member.member_id = str_bytes(m.member_id);
                        member.group_instance_id = m.group_instance_id.map(str_bytes);
                        member.metadata = m.metadata.into();
                        member
                    })
                    .collect();
            }
            GroupReply::Unavailable(code) => response.error_code = code.code(),
            _ => response.error_code = ErrorCode::UnknownServerError.code(),
        }
        if version < 7 && response.protocol_name.is_none() {
            response.protocol_name = Some(str_bytes(""));
        }
        request.respond(&response)
    })
}

/// The client id of the request header ("" when absent).
pub fn client_id(request: &Request) -> String {
    request
        .header
        .client_id
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default()
}

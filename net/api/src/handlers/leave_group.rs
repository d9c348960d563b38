//! LeaveGroup (key 13): one member (v0–v2) or a batch of members (v3+,
//! static members by instance id) leave at once.

use super::{str_bytes, Handler, HandlerFuture, Request};
use coordinators::group::LeavingMember;
use engine::ErrorCode;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v5.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::LeaveGroup,
    min_version: 0,
    max_version: 5,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: LeaveGroupRequest = request.decode()?;
        let batch = request.version >= 3;
        let group_id = body.group_id.0.to_string();
        let members: Vec<LeavingMember> = if batch {
            body.members
                .iter()
                .map(|m| LeavingMember {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
                })
                .collect()
        } else {
            vec![LeavingMember {
                member_id: body.member_id.to_string(),
                group_instance_id: None,
            }]
        };
        let leave = GroupRequest::Leave {
            group_id: group_id.clone(),
            members: members.clone(),
        };
        let mut response = LeaveGroupResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.group(Operation::Read, &group_id) {
            response.error_code = code.code();
            return request.respond(&response);
        }
        let member_codes = match group_runtime::call(&shard, &group_id, leave).await {
            GroupReply::Codes(member_codes) => member_codes,
            GroupReply::Unavailable(code) => {
                response.error_code = code.code();
                return request.respond(&response);
            }
            _ => vec![ErrorCode::UnknownServerError; members.len()],
        };
        if batch {
            response.members = members
                .into_iter()
                .zip(member_codes)
                .map(|(m, code)| {
                    let mut r = MemberResponse::default();
                    r.member_id = str_bytes(m.member_id);
                    r.group_instance_id = m.group_instance_id.map(str_bytes);
                    r.error_code = code.code();
                    r
                })
                .collect();
        } else {
            response.error_code = member_codes
                .first()
                .copied()
                .unwrap_or(ErrorCode::None)
                .code();
        }
        request.respond(&response)
    })
}

//! DescribeGroups (key 15): classic groups' state and members, each group
//! answered by its coordinator shard.

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::operations::AUTHORIZED_OPERATIONS_OMITTED;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v5 (v6 adds an error message).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeGroups,
    min_version: 0,
    max_version: 5,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeGroupsRequest = request.decode()?;
        let mut response = DescribeGroupsResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);

        for group_id in body.groups {
            let id = group_id.0.to_string();
            let mut out = DescribedGroup::default();
            out.group_id = group_id;
            out.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
            let reply = match authz.group(Operation::Describe, &id) {
                Err(code) => GroupReply::Unavailable(code),
                Ok(()) => {
                    group_runtime::call(&shard, &id, GroupRequest::Describe(id.clone())).await
                }
            };
            match reply {
                GroupReply::Described(g) => {
                    out.error_code = g.error_code.code();
                    out.group_state = str_bytes(g.state);
                    out.protocol_type = str_bytes(g.protocol_type);
                    out.protocol_data = str_bytes(g.protocol);
                    out.members = g
                        .members
                        .into_iter()
                        .map(|m| {
                            let mut member = DescribedGroupMember::default();
                            member.member_id = str_bytes(m.member_id);
                            member.group_instance_id = m.group_instance_id.map(str_bytes);
                            member.client_id = str_bytes(m.client_id);
                            member.client_host = str_bytes(m.client_host);
                            member.member_metadata = m.metadata.into();
                            member.member_assignment = m.assignment.into();
                            member
                        })
                        .collect();
                }
                GroupReply::Unavailable(code) => out.error_code = code.code(),
                _ => out.error_code = ErrorCode::UnknownServerError.code(),
            }
            if out.error_code == 0 {
                let asked = body.include_authorized_operations;
                out.authorized_operations = authz.group_operations(asked, &id);
            }
            response.groups.push(out);
        }
        request.respond(&response)
    })
}

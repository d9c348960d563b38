//! ListGroups (key 16): every shard coordinates some groups, so each is asked
//! and the lists are joined.

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v5 (v4 filters by state, v5 by type).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ListGroups,
    min_version: 0,
    max_version: 5,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ListGroupsRequest = request.decode()?;
        let states: Vec<String> = body.states_filter.iter().map(|s| s.to_string()).collect();
        let types: Vec<String> = body.types_filter.iter().map(|s| s.to_string()).collect();
        let mut response = ListGroupsResponse::default();
        // DESCRIBE on the cluster lists every group; else the ones the
        // caller may DESCRIBE, as Kafka.
        let authz = cluster_runtime::authz(&shard, &request.session);
        let all = authz.allows_cluster(Operation::Describe);
        for target in 0..shard.count {
            match group_runtime::call_on(&shard, target, GroupRequest::List(states.clone())).await {
                GroupReply::Listed(groups) => {
                    for g in groups {
                        if !all && !authz.allows_group(Operation::Describe, &g.group_id) {
                            continue;
                        }
                        if !types.is_empty()
                            && !types.iter().any(|t| t.eq_ignore_ascii_case(&g.group_type))
                        {
                            continue;
                        }
                        let mut listed = ListedGroup::default();
                        listed.group_id = GroupId(str_bytes(g.group_id));
                        listed.protocol_type = str_bytes(g.protocol_type);
                        listed.group_state = str_bytes(g.state);
                        listed.group_type = str_bytes(g.group_type);
                        response.groups.push(listed);
                    }
                }
                GroupReply::Unavailable(code) => response.error_code = code.code(),
                _ => response.error_code = ErrorCode::UnknownServerError.code(),
            }
        }
        request.respond(&response)
    })
}

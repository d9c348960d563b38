//! DeleteGroups (key 42): remove empty groups and their offsets (tombstones
//! in `__consumer_offsets`, so compaction drops them). A share group's
//! share-partition states go first (`share_runtime::admin::forget_states`).

use super::{Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::share_runtime::admin;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v2.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DeleteGroups,
    min_version: 0,
    max_version: 2,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DeleteGroupsRequest = request.decode()?;
        let mut response = DeleteGroupsResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);

        for group_id in body.groups_names {
            let id = group_id.0.to_string();
            let mut result = DeletableGroupResult::default();
            result.group_id = group_id;
            if let Err(code) = authz.group(Operation::Delete, &id) {
                result.error_code = code.code();
                response.results.push(result);
                continue;
            }
            if let Err(code) = admin::forget_states(&shard, &id).await {
                result.error_code = code.code();
                response.results.push(result);
                continue;
            }
            result.error_code =
                match group_runtime::call(&shard, &id, GroupRequest::DeleteGroup(id.clone())).await
                {
                    GroupReply::Code(code) | GroupReply::Unavailable(code) => code,
                    _ => ErrorCode::UnknownServerError,
                }
                .code();
            response.results.push(result);
        }
        request.respond(&response)
    })
}

//! DeleteAcls (key 31): remove the ACLs each filter matches, answering with
//! what each removed (INVALID_REQUEST for an UNKNOWN filter field;
//! SECURITY_DISABLED without an authorizer; CLUSTER_AUTHORIZATION_FAILED
//! without ALTER on the cluster).

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse};
use runtimes::admin_changes::acls;
use runtimes::cluster_runtime::{self, acls::binding_of, ControllerRpc};
use runtimes::Shard;
use security::acl::{AclFilter, Operation};
use std::collections::BTreeSet;
use std::rc::Rc;

/// v1–v3 (the codec's and Kafka 4.0's range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DeleteAcls,
    min_version: 1,
    max_version: 3,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DeleteAclsRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refusal = authz.acl_api_refusal(Operation::Alter);
        let image = shard.runtime().view.image();
        let mut results = Vec::with_capacity(body.filters.len());
        let mut ids = BTreeSet::new();
        for wire in &body.filters {
            let mut result = DeleteAclsFilterResult::default();
            let filter = AclFilter::from_codes(
                wire.resource_type_filter,
                wire.resource_name_filter.as_deref(),
                wire.pattern_type_filter,
                wire.principal_filter.as_deref(),
                wire.host_filter.as_deref(),
                wire.operation,
                wire.permission_type,
            );
            let filter = match (&refusal, filter) {
                (Some((code, message)), _) => Err((*code, message.clone())),
                (None, filter) => filter.map_err(|reason| (ErrorCode::InvalidRequest, reason)),
            };
            match filter {
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = Some(str_bytes(message));
                }
                Ok(filter) => {
                    for (id, record) in image.acls() {
                        let Some(acl) = binding_of(record).filter(|acl| filter.matches(acl)) else {
                            continue;
                        };
                        ids.insert(*id);
                        let mut matching = DeleteAclsMatchingAcl::default();
                        matching.resource_type = acl.resource_type.code();
                        matching.resource_name = str_bytes(acl.resource_name);
                        matching.pattern_type = acl.pattern_type.code();
                        matching.principal = str_bytes(acl.principal);
                        matching.host = str_bytes(acl.host);
                        matching.operation = acl.operation.code();
                        matching.permission_type = acl.permission.code();
                        result.matching_acls.push(matching);
                    }
                }
            }
            results.push(result);
        }
        if !ids.is_empty() {
            let change = ControllerRpc::DeleteAcls {
                ids: ids.into_iter().collect(),
            };
            if let Err((code, message)) = acls::submit(&shard, change).await {
                for result in results.iter_mut().filter(|r| r.error_code == 0) {
                    result.error_code = code.code();
                    result.error_message = Some(str_bytes(message.clone()));
                    result.matching_acls.clear();
                }
            }
        }
        let mut response = DeleteAclsResponse::default();
        response.filter_results = results;
        request.respond(&response)
    })
}

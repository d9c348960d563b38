//! DescribeAcls (key 29): the ACLs that match a filter, grouped by resource
//! pattern (INVALID_REQUEST for an UNKNOWN filter field; SECURITY_DISABLED
//! without an authorizer; CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on
//! the cluster).

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};
use runtimes::cluster_runtime::{self, acls::binding_of};
use runtimes::Shard;
use security::acl::{AclFilter, Operation};
use std::collections::BTreeMap;
use std::rc::Rc;

/// v1–v3 (the codec's and Kafka 4.0's range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeAcls,
    min_version: 1,
    max_version: 3,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeAclsRequest = request.decode()?;
        let mut response = DescribeAclsResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        let filter = AclFilter::from_codes(
            body.resource_type_filter,
            body.resource_name_filter.as_deref(),
            body.pattern_type_filter,
            body.principal_filter.as_deref(),
            body.host_filter.as_deref(),
            body.operation,
            body.permission_type,
        );
        let outcome = if let Some(refusal) = authz.acl_api_refusal(Operation::Describe) {
            Err(refusal)
        } else {
            filter.map_err(|reason| (ErrorCode::InvalidRequest, reason))
        };
        match outcome {
            Err((code, message)) => {
                response.error_code = code.code();
                response.error_message = Some(str_bytes(message));
            }
            Ok(filter) => {
                let image = shard.runtime().view.image();
                let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> =
                    BTreeMap::new();
                for acl in image.acls().values().filter_map(binding_of) {
                    if !filter.matches(&acl) {
                        continue;
                    }
                    let mut description = AclDescription::default();
                    description.principal = str_bytes(acl.principal);
                    description.host = str_bytes(acl.host);
                    description.operation = acl.operation.code();
                    description.permission_type = acl.permission.code();
                    by_resource
                        .entry((
                            acl.resource_type.code(),
                            acl.resource_name,
                            acl.pattern_type.code(),
                        ))
                        .or_default()
                        .push(description);
                }
                response.resources = by_resource
                    .into_iter()
                    .map(|((resource_type, name, pattern_type), acls)| {
                        let mut resource = DescribeAclsResource::default();
                        resource.resource_type = resource_type;
                        resource.resource_name = str_bytes(name);
                        resource.pattern_type = pattern_type;
                        resource.acls = acls;
                        resource
                    })
                    .collect();
            }
        }
        request.respond(&response)
    })
}

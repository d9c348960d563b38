//! CreateAcls (key 30): add ACLs to the metadata log (Kafka's checks per
//! ACL: INVALID_REQUEST for a bad one; SECURITY_DISABLED without an
//! authorizer; CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster).

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse};
use runtimes::admin_changes::acls;
use runtimes::cluster_runtime::{self, ControllerRpc, WireAcl};
use runtimes::Shard;
use security::acl::{AclBinding, Operation};
use std::rc::Rc;

/// v1–v3 (the codec's and Kafka 4.0's range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::CreateAcls,
    min_version: 1,
    max_version: 3,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: CreateAclsRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refusal = authz.acl_api_refusal(Operation::Alter);
        // Each creation's outcome; the valid ones are committed together.
        let mut outcomes: Vec<Result<(), (ErrorCode, String)>> = Vec::new();
        let mut valid = Vec::new();
        for creation in &body.creations {
            if let Some((code, message)) = &refusal {
                outcomes.push(Err((*code, message.clone())));
                continue;
            }
            match AclBinding::from_codes(
                creation.resource_type,
                &creation.resource_name,
                creation.resource_pattern_type,
                &creation.principal,
                &creation.host,
                creation.operation,
                creation.permission_type,
            ) {
                Ok(binding) => {
                    valid.push(WireAcl {
                        id: rand::random(),
                        resource_type: binding.resource_type.code(),
                        resource_name: binding.resource_name,
                        pattern_type: binding.pattern_type.code(),
                        principal: binding.principal,
                        host: binding.host,
                        operation: binding.operation.code(),
                        permission_type: binding.permission.code(),
                    });
                    outcomes.push(Ok(()));
                }
                Err(reason) => outcomes.push(Err((ErrorCode::InvalidRequest, reason))),
            }
        }
        if !valid.is_empty() {
            if let Err(error) =
                acls::submit(&shard, ControllerRpc::CreateAcls { acls: valid }).await
            {
                for outcome in outcomes.iter_mut().filter(|o| o.is_ok()) {
                    *outcome = Err(error.clone());
                }
            }
        }
        let mut response = CreateAclsResponse::default();
        response.results = outcomes
            .into_iter()
            .map(|outcome| {
                let mut result = AclCreationResult::default();
                if let Err((code, message)) = outcome {
                    result.error_code = code.code();
                    result.error_message = Some(str_bytes(message));
                }
                result
            })
            .collect();
        request.respond(&response)
    })
}

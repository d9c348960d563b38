//! AlterConfigs (key 33): replace a topic's overrides, a broker
//! resource's dynamic configs, or a client-metrics subscription's configs
//! (KIP-714), with the given set.

use super::describe_configs::{
    RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP, RESOURCE_TOPIC,
};
use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};
use runtimes::admin_changes::broker_configs::{self, AlterBrokerConfigs};
use runtimes::admin_changes::named_configs::{self, AlterNamedConfigs, NamedResource};
use runtimes::admin_changes::{self, ConfigOpKind, ControllerRequest};
use runtimes::cluster_runtime;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v2 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::AlterConfigs,
    min_version: 0,
    max_version: 2,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: AlterConfigsRequest = request.decode()?;
        let mut response = AlterConfigsResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        for resource in body.resources {
            let mut out = AlterConfigsResourceResponse::default();
            out.resource_type = resource.resource_type;
            out.resource_name = resource.resource_name.clone();
            if let Err(code) = authz.config_resource(
                Operation::AlterConfigs,
                resource.resource_type,
                &resource.resource_name,
            ) {
                out.error_code = code.code();
                response.responses.push(out);
                continue;
            }
            let ops: Vec<_> = resource
                .configs
                .iter()
                .filter_map(|c| {
                    c.value
                        .as_ref()
                        .map(|v| (c.name.to_string(), Some(v.to_string()), ConfigOpKind::Set))
                })
                .collect();
            let outcome = match resource.resource_type {
                RESOURCE_TOPIC => {
                    let change = ControllerRequest::AlterConfigs {
                        name: resource.resource_name.to_string(),
                        ops,
                        replace_all: true,
                        validate_only: body.validate_only,
                    };
                    admin_changes::submit(&shard, change).await.map(|_| ())
                }
                RESOURCE_BROKER => {
                    let change = AlterBrokerConfigs {
                        broker: resource.resource_name.to_string(),
                        ops,
                        replace_all: true,
                        validate_only: body.validate_only,
                    };
                    broker_configs::submit(&shard, change).await
                }
                kind @ (RESOURCE_CLIENT_METRICS | RESOURCE_GROUP) => {
                    let change = AlterNamedConfigs {
                        resource: if kind == RESOURCE_GROUP {
                            NamedResource::Group
                        } else {
                            NamedResource::ClientMetrics
                        },
                        name: resource.resource_name.to_string(),
                        ops,
                        replace_all: true,
                        validate_only: body.validate_only,
                    };
                    named_configs::submit(&shard, change).await
                }
                other => Err((
                    ErrorCode::InvalidRequest,
                    format!("resource type {other} is not supported"),
                )),
            };
            if let Err((code, message)) = outcome {
                out.error_code = code.code();
                out.error_message = Some(str_bytes(message));
            }
            response.responses.push(out);
        }
        request.respond(&response)
    })
}

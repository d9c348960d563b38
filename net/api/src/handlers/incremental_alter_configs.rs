//! IncrementalAlterConfigs (key 44): set / delete / append / subtract single
//! topic configs; set / delete the dynamic broker configs (the broker-wide
//! topic defaults, see `admin_changes::broker_configs`); the configs of
//! client-metrics subscriptions (KIP-714, `admin_changes::client_metrics`);
//! group configs (`admin_changes::group_configs`).

use super::describe_configs::{
    RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP, RESOURCE_TOPIC,
};
use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use runtimes::admin_changes::broker_configs::{self, AlterBrokerConfigs};
use runtimes::admin_changes::named_configs::{self, AlterNamedConfigs, NamedResource};
use runtimes::admin_changes::{self, ConfigOpKind, ControllerRequest};
use runtimes::cluster_runtime;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v1 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::IncrementalAlterConfigs,
    min_version: 0,
    max_version: 1,
    handle,
};

fn op_kind(code: i8) -> Option<ConfigOpKind> {
    match code {
        0 => Some(ConfigOpKind::Set),
        1 => Some(ConfigOpKind::Delete),
        2 => Some(ConfigOpKind::Append),
        3 => Some(ConfigOpKind::Subtract),
        _ => None,
    }
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: IncrementalAlterConfigsRequest = request.decode()?;
        let mut response = IncrementalAlterConfigsResponse::default();
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
            let ops: Option<Vec<_>> = resource
                .configs
                .iter()
                .map(|c| {
                    op_kind(c.config_operation).map(|kind| {
                        (
                            c.name.to_string(),
                            c.value.as_ref().map(|v| v.to_string()),
                            kind,
                        )
                    })
                })
                .collect();
            let outcome = match ops {
                Some(ops) => {
                    let name = resource.resource_name.to_string();
                    let kind = resource.resource_type;
                    alter(&shard, kind, name, ops, body.validate_only).await
                }
                None => Err((
                    ErrorCode::InvalidRequest,
                    String::from("unknown config operation"),
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

/// One resource's changes, by its type.
async fn alter(
    shard: &Rc<Shard>,
    resource_type: i8,
    name: String,
    ops: Vec<(String, Option<String>, ConfigOpKind)>,
    validate_only: bool,
) -> Result<(), (ErrorCode, String)> {
    match resource_type {
        RESOURCE_TOPIC => {
            let change = ControllerRequest::AlterConfigs {
                name,
                ops,
                replace_all: false,
                validate_only,
            };
            admin_changes::submit(shard, change).await.map(|_| ())
        }
        RESOURCE_BROKER => {
            let change = AlterBrokerConfigs {
                broker: name,
                ops,
                replace_all: false,
                validate_only,
            };
            broker_configs::submit(shard, change).await
        }
        RESOURCE_CLIENT_METRICS | RESOURCE_GROUP => {
            let resource = if resource_type == RESOURCE_GROUP {
                NamedResource::Group
            } else {
                NamedResource::ClientMetrics
            };
            let change = AlterNamedConfigs {
                resource,
                name,
                ops,
                replace_all: false,
                validate_only,
            };
            named_configs::submit(shard, change).await
        }
        other => Err((
            ErrorCode::InvalidRequest,
            format!("resource type {other} is not supported"),
        )),
    }
}

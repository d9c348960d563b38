//! IncrementalAlterConfigs (key 44): set / delete / append / subtract single
//! topic configs; set / delete the dynamic broker configs (the broker-wide
//! topic defaults, see `admin_changes::broker_configs`); the configs of
//! client-metrics subscriptions (KIP-714, `admin_changes::client_metrics`).

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::list_config_resources::RESOURCE_CLIENT_METRICS;
use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use runtimes::admin_changes::broker_configs::{self, AlterBrokerConfigs};
use runtimes::admin_changes::client_metrics::{self, AlterClientMetricsConfigs};
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
            let outcome = match resource.resource_type {
                RESOURCE_TOPIC => match ops {
                    Some(ops) => {
                        let change = ControllerRequest::AlterConfigs {
                            name: resource.resource_name.to_string(),
                            ops,
                            replace_all: false,
                            validate_only: body.validate_only,
                        };
                        admin_changes::submit(&shard, change).await.map(|_| ())
                    }
                    None => Err((
                        ErrorCode::InvalidRequest,
                        String::from("unknown config operation"),
                    )),
                },
                RESOURCE_BROKER => match ops {
                    Some(ops) => {
                        let change = AlterBrokerConfigs {
                            broker: resource.resource_name.to_string(),
                            ops,
                            replace_all: false,
                            validate_only: body.validate_only,
                        };
                        broker_configs::submit(&shard, change).await
                    }
                    None => Err((
                        ErrorCode::InvalidRequest,
                        String::from("unknown config operation"),
                    )),
                },
                RESOURCE_CLIENT_METRICS => match ops {
                    Some(ops) => {
                        let change = AlterClientMetricsConfigs {
                            name: resource.resource_name.to_string(),
                            ops,
                            replace_all: false,
                            validate_only: body.validate_only,
                        };
                        client_metrics::submit(&shard, change).await
                    }
                    None => Err((
                        ErrorCode::InvalidRequest,
                        String::from("unknown config operation"),
                    )),
                },
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

//! ListConfigResources (key 74; v0 was KIP-714's ListClientMetricsResources):
//! the names of the config resources of the asked types. v0 lists the
//! CLIENT_METRICS resources (`kafka-configs --describe --entity-type
//! client-metrics` starts here) and needs DESCRIBE_CONFIGS on the cluster;
//! v1 (KIP-1142) takes a list of types, empty for all: topics the caller
//! may DESCRIBE_CONFIGS, and, where it may on the cluster, the brokers
//! (for BROKER and BROKER_LOGGER) and the client-metrics subscriptions.
//! GROUP lists the groups with configs set that the caller may
//! DESCRIBE_CONFIGS; any other type is UNSUPPORTED_VERSION, as Kafka answers.

use super::describe_configs::{
    RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP,
    RESOURCE_TOPIC,
};
use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ApiKey, ListConfigResourcesRequest, ListConfigResourcesResponse};
use runtimes::cluster_runtime;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v1 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ListConfigResources,
    min_version: 0,
    max_version: 1,
    handle,
};

/// The types v1 lists, in the order they are listed.
const LISTED_TYPES: [i8; 5] = [
    RESOURCE_TOPIC,
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
];

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ListConfigResourcesRequest = request.decode()?;
        let mut response = ListConfigResourcesResponse::default();
        response.throttle_time_ms = request.quota_throttle_ms;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let cluster_allowed = authz.cluster(Operation::DescribeConfigs).is_ok();
        let types: Vec<i8> = if request.version == 0 {
            if !cluster_allowed {
                response.error_code = ErrorCode::ClusterAuthorizationFailed.code();
                return request.respond(&response);
            }
            vec![RESOURCE_CLIENT_METRICS]
        } else if body.resource_types.is_empty() {
            LISTED_TYPES.to_vec()
        } else if body.resource_types.iter().all(|t| LISTED_TYPES.contains(t)) {
            body.resource_types
        } else {
            response.error_code = ErrorCode::UnsupportedVersion.code();
            return request.respond(&response);
        };
        let image = shard.runtime().view.image();
        let mut listed = Vec::new();
        for resource_type in types {
            let names: Vec<String> = match resource_type {
                RESOURCE_TOPIC => (shard.topics.borrow().iter())
                    .map(|topic| topic.name.clone())
                    .filter(|name| authz.allows_topic(Operation::DescribeConfigs, name))
                    .collect(),
                RESOURCE_BROKER | RESOURCE_BROKER_LOGGER if cluster_allowed => {
                    image.brokers().keys().map(|id| id.to_string()).collect()
                }
                RESOURCE_CLIENT_METRICS if cluster_allowed => {
                    image.client_metrics_configs().keys().cloned().collect()
                }
                RESOURCE_GROUP => (image.group_configs().keys())
                    .filter(|group| authz.group(Operation::DescribeConfigs, group).is_ok())
                    .cloned()
                    .collect(),
                _ => Vec::new(),
            };
            listed.extend(names.into_iter().map(|name| {
                let mut resource = ConfigResource::default();
                resource.resource_name = str_bytes(name);
                resource.resource_type = resource_type;
                resource
            }));
        }
        response.config_resources = listed;
        request.respond(&response)
    })
}

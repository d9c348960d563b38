//! DescribeConfigs (key 32): topic configs (overrides marked dynamic), the
//! broker's settings, client-metrics subscriptions (KIP-714: every
//! config of the named one, those not set at their defaults, as Kafka
//! answers even for a name not configured), and group configs (likewise).

use super::{legacy, str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kernel::config::BrokerConfig;
use kernel::error::RequestError;
use runtimes::admin_changes::{broker_configs, group_configs, topic_defaults};
use runtimes::cluster_runtime;
use runtimes::telemetry::subscription::{self, DEFAULT_INTERVAL_MS};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v4 (v0 through `legacy`: `is_default` instead of `config_source`).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeConfigs,
    min_version: 0,
    max_version: 4,
    handle,
};

/// Kafka's `ConfigResource.Type`.
pub const RESOURCE_TOPIC: i8 = 2;
/// Kafka's `ConfigResource.Type`.
pub const RESOURCE_BROKER: i8 = 4;
/// Kafka's `ConfigResource.Type`.
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
/// Kafka's `ConfigResource.Type`: a client-metrics subscription (KIP-714).
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
/// Kafka's `ConfigResource.Type`.
pub const RESOURCE_GROUP: i8 = 32;
/// Kafka's `ConfigSource`: a topic override.
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
/// Kafka's `ConfigSource`: a dynamic config of this broker.
const SOURCE_DYNAMIC_BROKER: i8 = 2;
/// Kafka's `ConfigSource`: a dynamic default of every broker.
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
/// Kafka's `ConfigSource`: from the broker's file.
const SOURCE_STATIC_BROKER: i8 = 4;
/// Kafka's `ConfigSource`: a default.
const SOURCE_DEFAULT: i8 = 5;
/// Kafka's `ConfigSource`: a client-metrics subscription's config.
const SOURCE_CLIENT_METRICS: i8 = 7;
/// Kafka's `ConfigSource`: a group's config.
const SOURCE_GROUP: i8 = 8;

/// Kafka's `ConfigDef.Type` ids (DescribeConfigs v3+'s `ConfigType`).
const TYPE_UNKNOWN: i8 = 0;
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

/// How a described config is reported: where its value comes from,
/// whether it is read-only, and its Kafka type.
#[derive(Clone, Copy)]
struct Described {
    source: i8,
    read_only: bool,
    config_type: i8,
}

fn entry(name: &str, value: String, how: Described) -> DescribeConfigsResourceResult {
    let mut c = DescribeConfigsResourceResult::default();
    c.name = str_bytes(name);
    c.value = Some(str_bytes(value));
    c.config_source = how.source;
    c.read_only = how.read_only;
    c.config_type = how.config_type;
    c
}

/// The Kafka type of a topic config (or of its broker synonym), as
/// Kafka's `LogConfig` defines it.
fn topic_config_type(name: &str) -> i8 {
    use engine::config::kafka_topic_configs::{spec_of, spec_of_broker_name, ConfigKind};
    let Some(spec) = spec_of(name).or_else(|| spec_of_broker_name(name)) else {
        return TYPE_UNKNOWN;
    };
    match spec.kind {
        ConfigKind::Long { .. } => TYPE_LONG,
        ConfigKind::Int { .. } | ConfigKind::GzipLevel => TYPE_INT,
        ConfigKind::Double { .. } => TYPE_DOUBLE,
        ConfigKind::Bool => TYPE_BOOLEAN,
        ConfigKind::OneOf(_) => TYPE_STRING,
        ConfigKind::ListOf(_) | ConfigKind::ThrottledReplicas => TYPE_LIST,
    }
}

/// The Kafka type of a static broker setting [`broker_entries`] reports.
fn broker_config_type(name: &str) -> i8 {
    match name {
        "auto.create.topics.enable" | "delete.topic.enable" => TYPE_BOOLEAN,
        "listeners" | "advertised.listeners" => TYPE_LIST,
        "log.dirs" | "broker.rack" | "replica.selector.class" => TYPE_STRING,
        "broker.id"
        | "node.id"
        | "num.partitions"
        | "default.replication.factor"
        | "socket.request.max.bytes"
        | "max.connections"
        | "offsets.topic.num.partitions" => TYPE_INT,
        _ => TYPE_UNKNOWN,
    }
}

/// The broker-wide topic defaults, by Kafka's synonyms (`log.retention.ms`,
/// `log.cleaner.min.cleanable.ratio`, ...), as (name, value, source): most
/// change at runtime (see `admin_changes::broker_configs`).
fn dynamic_entries(shard: &Shard) -> Vec<(&'static str, String, i8)> {
    let image = shard.runtime().view.image();
    let dynamic = image.broker_configs();
    let defaults = topic_defaults::effective_topic_defaults(&shard.config, dynamic);
    let own = dynamic.get(&shard.config.broker_id.to_string());
    let cluster_wide = dynamic.get("");
    let mut out = Vec::new();
    for spec in &engine::config::kafka_topic_configs::SPECS {
        let (Some(name), Some(value)) = (spec.broker_name, defaults.get(spec.name)) else {
            continue;
        };
        let source = if own.is_some_and(|c| c.contains_key(name)) {
            SOURCE_DYNAMIC_BROKER
        } else if cluster_wide.is_some_and(|c| c.contains_key(name)) {
            SOURCE_DYNAMIC_DEFAULT_BROKER
        } else {
            SOURCE_STATIC_BROKER
        };
        out.push((name, value, source));
    }
    out
}

/// Where each topic config without an override gets its value, as Kafka
/// reports it: this broker's dynamic config, the cluster-wide dynamic
/// default, the config file, else (absent here) Kafka's default.
fn inherited_sources(shard: &Shard) -> std::collections::HashMap<&'static str, i8> {
    let static_defaults = shard.config.topic_defaults();
    dynamic_entries(shard)
        .into_iter()
        .filter_map(|(broker_name, _, source)| {
            let spec = engine::config::kafka_topic_configs::spec_of_broker_name(broker_name)?;
            let from_file = static_defaults.get(spec.name).as_deref() != Some(spec.default);
            match source {
                SOURCE_STATIC_BROKER if !from_file => None,
                source => Some((spec.name, source)),
            }
        })
        .collect()
}

/// Broker settings reported under the broker resource (static: read from
/// the file at start).
fn broker_entries(config: &BrokerConfig) -> Vec<(&'static str, String)> {
    let cluster = &config.cluster;
    let rack = cluster.rack.clone().map(|rack| ("broker.rack", rack));
    let selector = (cluster.replica_selector.class_name())
        .map(|class| ("replica.selector.class", class.to_string()));
    let mut entries = vec![
        ("broker.id", config.broker_id.to_string()),
        ("node.id", config.broker_id.to_string()),
        (
            "auto.create.topics.enable",
            config.auto_create_topics_enable.to_string(),
        ),
        (
            "delete.topic.enable",
            config.delete_topic_enable.to_string(),
        ),
        ("num.partitions", config.num_partitions.to_string()),
        (
            "default.replication.factor",
            config.default_replication_factor.to_string(),
        ),
        (
            "socket.request.max.bytes",
            config.socket_request_max_bytes.to_string(),
        ),
        ("max.connections", config.max_connections.to_string()),
        (
            "offsets.topic.num.partitions",
            config.offsets_topic_num_partitions.to_string(),
        ),
        (
            "log.dirs",
            config
                .data_dirs()
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(","),
        ),
    ];
    entries.extend(rack.into_iter().chain(selector));
    let listed = |address: &dyn Fn(&kernel::config::ClientListener) -> String| {
        let each = config.listeners.iter();
        each.map(|l| format!("{}://{}", l.name, address(l)))
            .collect::<Vec<_>>()
            .join(",")
    };
    entries.push(("listeners", listed(&|l| l.bind.to_string())));
    let advertised = |l: &kernel::config::ClientListener| match l.advertised_host.contains(':') {
        true => format!("[{}]:{}", l.advertised_host, l.advertised_port),
        false => format!("{}:{}", l.advertised_host, l.advertised_port),
    };
    entries.push(("advertised.listeners", listed(&advertised)));
    entries
}

/// The request body as this version lays it out (also the fuzzed decoder,
/// see [`crate::fuzzing`]).
pub(crate) fn decode_body(request: &mut Request) -> Result<DescribeConfigsRequest, RequestError> {
    if request.version == 0 {
        // v1 without `include_synonyms`.
        request.body = legacy::with_trailing_false(&request.body);
        request.decode_as(1)
    } else {
        request.decode()
    }
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body = decode_body(&mut request)?;
        let mut response = DescribeConfigsResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        for resource in body.resources {
            let mut result = DescribeConfigsResult::default();
            result.resource_type = resource.resource_type;
            result.resource_name = resource.resource_name.clone();
            if let Err(code) = authz.config_resource(
                Operation::DescribeConfigs,
                resource.resource_type,
                &resource.resource_name,
            ) {
                result.error_code = code.code();
                response.results.push(result);
                continue;
            }
            let wanted = |name: &str| {
                resource
                    .configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
            };
            match resource.resource_type {
                RESOURCE_TOPIC => {
                    let name = resource.resource_name.to_string();
                    describe_topic(&shard, &mut result, name, wanted);
                }
                RESOURCE_BROKER => {
                    describe_broker(&shard, &mut result, resource.resource_name.as_str(), wanted)
                }
                RESOURCE_CLIENT_METRICS => {
                    let name = resource.resource_name.as_str();
                    describe_client_metrics(&shard, &mut result, name, wanted)
                }
                RESOURCE_GROUP => {
                    let name = resource.resource_name.as_str();
                    describe_group(&shard, &mut result, name, wanted)
                }
                other => {
                    result.error_code = ErrorCode::InvalidRequest.code();
                    result.error_message =
                        Some(str_bytes(format!("resource type {other} is not supported")));
                }
            }
            response.results.push(result);
        }
        if request.version == 0 {
            return request.respond_raw(&legacy::describe_configs::encode(&response));
        }
        request.respond(&response)
    })
}

/// A topic's configs that `wanted` asks for, each with where its value
/// comes from (an override, else where the default is set).
fn describe_topic(
    shard: &Shard,
    result: &mut DescribeConfigsResult,
    name: String,
    wanted: impl Fn(&str) -> bool,
) {
    match shard.topics.borrow().get(&name) {
        Some(topic) => {
            let defaults = &topic_defaults::topic_defaults(shard);
            let inherited = inherited_sources(shard);
            for config_name in engine::TopicConfig::NAMES.iter().filter(|n| wanted(n)) {
                let Some(value) = topic.config.get(config_name) else {
                    continue;
                };
                let source = if defaults.get(config_name).as_deref() == Some(value.as_str()) {
                    inherited
                        .get(config_name)
                        .copied()
                        .unwrap_or(SOURCE_DEFAULT)
                } else {
                    SOURCE_DYNAMIC_TOPIC
                };
                let config_type = topic_config_type(config_name);
                let how = Described {
                    source,
                    read_only: false,
                    config_type,
                };
                result.configs.push(entry(config_name, value, how));
            }
        }
        None => {
            result.error_code = ErrorCode::UnknownTopicOrPartition.code();
            result.error_message = Some(str_bytes(format!("unknown topic '{name}'")));
        }
    }
}

/// This broker's settings that `wanted` asks for (`name` empty or this
/// broker's id): the static ones from the file, then the dynamic topic
/// defaults.
fn describe_broker(
    shard: &Shard,
    result: &mut DescribeConfigsResult,
    name: &str,
    wanted: impl Fn(&str) -> bool,
) {
    if !name.is_empty() && name != shard.config.broker_id.to_string() {
        result.error_code = ErrorCode::InvalidRequest.code();
        result.error_message = Some(str_bytes(format!("unknown broker '{name}'")));
        return;
    }
    for (config_name, value) in broker_entries(&shard.config)
        .into_iter()
        .filter(|(n, _)| wanted(n))
    {
        let how = Described {
            source: SOURCE_STATIC_BROKER,
            read_only: true,
            config_type: broker_config_type(config_name),
        };
        result.configs.push(entry(config_name, value, how));
    }
    for (config_name, value, source) in dynamic_entries(shard)
        .into_iter()
        .filter(|(n, _, _)| wanted(n))
    {
        let how = Described {
            source,
            read_only: !broker_configs::is_dynamic(config_name),
            config_type: topic_config_type(config_name),
        };
        result.configs.push(entry(config_name, value, how));
    }
}

/// A group's configs that `wanted` asks for: those set, and the others at
/// their defaults.
fn describe_group(
    shard: &Shard,
    result: &mut DescribeConfigsResult,
    group: &str,
    wanted: impl Fn(&str) -> bool,
) {
    if group.is_empty() {
        result.error_code = ErrorCode::InvalidRequest.code();
        result.error_message = Some(str_bytes("a group resource needs a group id"));
        return;
    }
    let image = shard.runtime().view.image();
    let set = image.group_configs().get(group);
    for (name, default) in group_configs::group_config_defaults(&shard.config.group) {
        if !wanted(name) {
            continue;
        }
        let config_type = match name {
            group_configs::SHARE_AUTO_OFFSET_RESET | group_configs::SHARE_ISOLATION_LEVEL => {
                TYPE_STRING
            }
            _ => TYPE_INT,
        };
        let (value, source) = match set.and_then(|c| c.get(name)) {
            Some(value) => (value.clone(), SOURCE_GROUP),
            None => (default, SOURCE_DEFAULT),
        };
        let how = Described {
            source,
            read_only: false,
            config_type,
        };
        result.configs.push(entry(name, value, how));
    }
}

/// A client-metrics subscription's configs that `wanted` asks for: those
/// set, and the others at Kafka's defaults.
fn describe_client_metrics(
    shard: &Shard,
    result: &mut DescribeConfigsResult,
    name: &str,
    wanted: impl Fn(&str) -> bool,
) {
    if name.is_empty() {
        result.error_code = ErrorCode::InvalidRequest.code();
        result.error_message = Some(str_bytes(
            "client metrics subscription name must not be empty",
        ));
        return;
    }
    let image = shard.runtime().view.image();
    let set = image.client_metrics_configs().get(name);
    for config_name in subscription::CONFIGS.into_iter().filter(|n| wanted(n)) {
        let config_type = match config_name {
            subscription::INTERVAL_MS => TYPE_INT,
            _ => TYPE_LIST,
        };
        let (value, source) = match set.and_then(|configs| configs.get(config_name)) {
            Some(value) => (value.clone(), SOURCE_CLIENT_METRICS),
            None => match config_name {
                subscription::INTERVAL_MS => (DEFAULT_INTERVAL_MS.to_string(), SOURCE_DEFAULT),
                _ => (String::new(), SOURCE_DEFAULT),
            },
        };
        let how = Described {
            source,
            read_only: false,
            config_type,
        };
        result.configs.push(entry(config_name, value, how));
    }
}

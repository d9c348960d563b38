//! CreateTopics (key 19): one controller change per topic; one bad topic does not fail the others.

use super::{legacy, str_bytes, uuid, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
use kernel::error::RequestError;
use kernel::topics::TopicEntry;
use runtimes::admin_changes::{self, ControllerReply, ControllerRequest, TopicChange};
use runtimes::cluster_runtime;
use runtimes::Shard;
use security::acl::Authz;
use std::rc::Rc;

/// v0–v7 (v0/v1 through `legacy`).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::CreateTopics,
    min_version: 0,
    max_version: 7,
    handle,
};

/// The request body as this version lays it out (also the fuzzed decoder,
/// see [`crate::fuzzing`]).
pub(crate) fn decode_body(request: &mut Request) -> Result<CreateTopicsRequest, RequestError> {
    match request.version {
        // v0 is v1 without `validate_only`, and v1 is v2's layout.
        0 => {
            request.body = legacy::with_trailing_false(&request.body);
            request.decode_as(2)
        }
        1 => request.decode_as(2),
        _ => request.decode(),
    }
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body = decode_body(&mut request)?;
        let version = request.version;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let mut results = Vec::with_capacity(body.topics.len());
        for topic in body.topics {
            let mut result = CreatableTopicResult::default();
            result.name = topic.name.clone();
            result.num_partitions = -1;
            result.replication_factor = -1;
            let outcome = create_one(&shard, &authz, &topic, body.validate_only).await;
            match outcome {
                Ok(TopicChange::Upsert(entry)) => {
                    describe_created(&shard, &mut result, &entry, version)
                }
                Ok(TopicChange::Delete { .. }) => {}
                Err((code, message)) => {
                    result.error_code = code.code();
                    if version >= 1 {
                        result.error_message = Some(str_bytes(message));
                    }
                }
            }
            results.push(result);
        }
        let mut response = CreateTopicsResponse::default();
        response.topics = results;
        if version < 2 {
            return request.respond_raw(&legacy::create_topics::encode(&response, version));
        }
        request.respond(&response)
    })
}

/// Checks one topic of the request (its shape, then CREATE) and submits
/// its creation to the controller: the controller's answer, or why it was
/// refused.
async fn create_one(
    shard: &Rc<Shard>,
    authz: &Authz,
    topic: &CreatableTopic,
    validate_only: bool,
) -> ControllerReply {
    let name = topic.name.0.to_string();
    let assignment: Vec<(i32, Vec<i32>)> = topic
        .assignments
        .iter()
        .map(|a| {
            (
                a.partition_index,
                a.broker_ids.iter().map(|b| b.0).collect(),
            )
        })
        .collect();
    if !assignment.is_empty() && (topic.num_partitions != -1 || topic.replication_factor != -1) {
        // Kafka: an explicit assignment says both, so neither may be set.
        return Err((
            ErrorCode::InvalidRequest,
            String::from(
                "both numPartitions and replicationFactor must be -1 with a replica assignment",
            ),
        ));
    }
    if let Err(code) = authz.create_topic(&name) {
        return Err((
            code,
            String::from("CREATE on the cluster or the topic is needed"),
        ));
    }
    let configs = topic
        .configs
        .iter()
        .filter_map(|c| {
            c.value
                .as_ref()
                .map(|v| (c.name.to_string(), v.to_string()))
        })
        .collect();
    admin_changes::submit(
        shard,
        ControllerRequest::CreateTopic {
            name,
            partitions: topic.num_partitions,
            configs,
            replication_factor: topic.replication_factor,
            assignment,
            validate_only,
        },
    )
    .await
}

/// Fills a created (or validated) topic's result with what this version
/// reports of it: its id (v7+), its partition and replica counts and its
/// configs (v5+).
fn describe_created(
    shard: &Shard,
    result: &mut CreatableTopicResult,
    entry: &TopicEntry,
    version: i16,
) {
    if version >= 7 {
        result.topic_id = uuid(entry.topic_id);
    }
    if version < 5 {
        return;
    }
    result.num_partitions = entry.partitions;
    // The committed replica count (validate-only: none yet).
    result.replication_factor = shard
        .runtime()
        .view
        .clone()
        .image()
        .topic_by_name(&entry.name)
        .and_then(|t| t.partitions.get(&0))
        .map_or(-1, |p| i16::try_from(p.replicas.len()).unwrap_or(-1));
    result.configs = Some(
        engine::TopicConfig::NAMES
            .iter()
            .filter_map(|n| {
                let value = entry.config.get(n)?;
                let mut c = CreatableTopicConfigs::default();
                c.name = str_bytes(*n);
                c.value = Some(str_bytes(value));
                // 5 = DEFAULT_CONFIG, 1 = DYNAMIC_TOPIC_CONFIG
                c.config_source = 5;
                Some(c)
            })
            .collect(),
    );
}

//! ConsumerGroupHeartbeat (key 68): the KIP-848 protocol. The broker assigns
//! (server-side assignors); topics cross the wire by id, the coordinator
//! works by name, so ids are mapped here with this shard's topic table.

use super::{by_topic, str_bytes, Handler, HandlerFuture, Request};
use cluster::metadata::features;
use coordinators::group::{ConsumerHeartbeatRequest, TopicPartition};
use engine::ErrorCode;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use runtimes::admin_changes::group_configs;
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v1 (v1 adds regex subscriptions, resolved by the coordinator against
/// the topics, whole names only, internal topics never; one that does not
/// compile is INVALID_REGULAR_EXPRESSION, as in Kafka).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ConsumerGroupHeartbeat,
    min_version: 0,
    max_version: 1,
    handle,
};

/// Why a heartbeat is answered before it reaches the coordinator, if it is:
/// a regular expression that does not compile, the protocol turned off
/// (`group.version` 0: ApiVersions no longer lists this API, and a client
/// that calls it anyway is told, as in Kafka), or no READ on the group.
fn refusal(
    shard: &Shard,
    request: &Request,
    body: &ConsumerGroupHeartbeatRequest,
) -> Option<(ErrorCode, Option<String>)> {
    let regex = body
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty());
    if let Some(bad) = regex.filter(|r| group_runtime::regex::whole_name_regex(r).is_none()) {
        let message = format!("invalid regular expression {bad:?}");
        return Some((ErrorCode::InvalidRegularExpression, Some(message)));
    }
    let image = shard.runtime().view.image();
    if features::finalized_level(&image, features::GROUP_VERSION) < 1 {
        let message = "group.version is 0: the consumer group protocol is off";
        return Some((ErrorCode::UnsupportedVersion, Some(message.to_string())));
    }
    let authz = cluster_runtime::authz(shard, &request.session);
    authz
        .group(Operation::Read, &body.group_id)
        .err()
        .map(|code| (code, None))
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ConsumerGroupHeartbeatRequest = request.decode()?;
        let mut response = ConsumerGroupHeartbeatResponse::default();
        response.member_id = Some(body.member_id.clone());
        response.member_epoch = body.member_epoch;
        if let Some((code, message)) = refusal(&shard, &request, &body) {
            response.error_code = code.code();
            response.error_message = message.map(str_bytes);
            return request.respond(&response);
        }
        let regex = body.subscribed_topic_regex.as_ref().map(|r| r.to_string());
        let owned = body.topic_partitions.map(|topics| {
            let table = shard.topics.borrow();
            topics
                .into_iter()
                .filter_map(|t| {
                    let name = table.by_id(t.topic_id.as_bytes())?.name.clone();
                    Some(
                        t.partitions
                            .into_iter()
                            .map(move |p| TopicPartition::new(name.clone(), p)),
                    )
                })
                .flatten()
                .collect::<Vec<_>>()
        });
        let group_id = body.group_id.0.to_string();
        let heartbeat = ConsumerHeartbeatRequest {
            group_id: group_id.clone(),
            member_id: body.member_id.to_string(),
            member_epoch: body.member_epoch,
            instance_id: body.instance_id.map(|s| s.to_string()),
            rack_id: body.rack_id.map(|s| s.to_string()),
            rebalance_timeout_ms: body.rebalance_timeout_ms,
            subscribed_topic_names: body
                .subscribed_topic_names
                .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
            subscribed_topic_regex: regex,
            server_assignor: body.server_assignor.map(|s| s.to_string()),
            owned_partitions: owned,
            client_id: super::join_group::client_id(&request),
            client_host: request.session.client_host(),
            timeouts: Some(group_configs::consumer_timeouts(
                shard.runtime().view.image().group_configs().get(&group_id),
                &shard.config.group,
            )),
        };
        match group_runtime::call(
            &shard,
            &group_id,
            GroupRequest::ConsumerHeartbeat(heartbeat),
        )
        .await
        {
            GroupReply::ConsumerHeartbeat(r) => {
                response.error_code = r.error_code.code();
                response.member_id = Some(str_bytes(r.member_id));
                response.member_epoch = r.member_epoch;
                response.heartbeat_interval_ms = r.heartbeat_interval_ms;
                response.assignment = r
                    .assignment
                    .map(|partitions| assignment(&shard, partitions));
            }
            GroupReply::Unavailable(code) => response.error_code = code.code(),
            _ => response.error_code = ErrorCode::UnknownServerError.code(),
        }
        request.respond(&response)
    })
}

/// The assignment by topic id; partitions of topics gone meanwhile are left out.
fn assignment(shard: &Shard, partitions: Vec<TopicPartition>) -> Assignment {
    let mut out = Assignment::default();
    out.topic_partitions = by_topic(shard, &partitions)
        .into_iter()
        .filter_map(|(_, id, partitions)| {
            let mut t = TopicPartitions::default();
            t.topic_id = id?;
            t.partitions = partitions;
            Some(t)
        })
        .collect();
    out
}

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
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v1 (v1 adds regex subscriptions, answered INVALID_REQUEST for now).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ConsumerGroupHeartbeat,
    min_version: 0,
    max_version: 1,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ConsumerGroupHeartbeatRequest = request.decode()?;
        let mut response = ConsumerGroupHeartbeatResponse::default();
        response.member_id = Some(body.member_id.clone());
        response.member_epoch = body.member_epoch;
        if body.subscribed_topic_regex.is_some() && body.subscribed_topic_names.is_none() {
            response.error_code = ErrorCode::InvalidRequest.code();
            response.error_message = Some(str_bytes("regex subscriptions are not supported"));
            return request.respond(&response);
        }
        // `group.version` 0 turns the protocol off, as in Kafka (ApiVersions
        // no longer lists this API; a client that calls it anyway is told).
        let image = shard.runtime().view.image();
        if features::finalized_level(&image, features::GROUP_VERSION) < 1 {
            response.error_code = ErrorCode::UnsupportedVersion.code();
            response.error_message = Some(str_bytes(
                "group.version is 0: the consumer group protocol is off",
            ));
            return request.respond(&response);
        }
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.group(Operation::Read, &body.group_id) {
            response.error_code = code.code();
            return request.respond(&response);
        }
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
            server_assignor: body.server_assignor.map(|s| s.to_string()),
            owned_partitions: owned,
            client_id: super::join_group::client_id(&request),
            client_host: String::new(),
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

//! ShareGroupHeartbeat (key 76): a share consumer (KIP-932) joins, stays
//! in and leaves its share group, and learns its assignment. Topics cross
//! the wire by id; the coordinator works by name.

use super::{by_topic, str_bytes, Handler, HandlerFuture, Request};
use cluster::metadata::features;
use coordinators::group::{ShareHeartbeatRequest, TopicPartition};
use engine::ErrorCode;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ApiKey, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use runtimes::admin_changes::group_configs;
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v1 (Kafka 4.1's first production version; v0 was the early access).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ShareGroupHeartbeat,
    min_version: 1,
    max_version: 1,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ShareGroupHeartbeatRequest = request.decode()?;
        let mut response = ShareGroupHeartbeatResponse::default();
        response.member_id = Some(body.member_id.clone());
        response.member_epoch = body.member_epoch;
        // `share.version` 0 turns share groups off, as in Kafka (ApiVersions
        // no longer lists the APIs; a client that calls anyway is told).
        let image = shard.runtime().view.image();
        if features::finalized_level(&image, features::SHARE_VERSION) < 1 {
            response.error_code = ErrorCode::UnsupportedVersion.code();
            response.error_message = Some(str_bytes("share.version is 0: share groups are off"));
            return request.respond(&response);
        }
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.group(Operation::Read, &body.group_id) {
            response.error_code = code.code();
            return request.respond(&response);
        }
        let group_id = body.group_id.0.to_string();
        let heartbeat = ShareHeartbeatRequest {
            group_id: group_id.clone(),
            member_id: body.member_id.to_string(),
            member_epoch: body.member_epoch,
            rack_id: body.rack_id.map(|s| s.to_string()),
            subscribed_topic_names: body
                .subscribed_topic_names
                .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
            client_id: super::join_group::client_id(&request),
            client_host: request.session.client_host(),
            timeouts: Some(group_configs::share_timeouts(
                shard.runtime().view.image().group_configs().get(&group_id),
                &shard.config.group,
            )),
        };
        let call = GroupRequest::ShareHeartbeat(heartbeat);
        match group_runtime::call(&shard, &group_id, call).await {
            GroupReply::ShareHeartbeat(r) => {
                response.error_code = r.error_code.code();
                if r.error_code != ErrorCode::None {
                    response.error_message = Some(str_bytes(r.error_code.name()));
                }
                response.member_id = Some(str_bytes(r.member_id));
                response.member_epoch = r.member_epoch;
                response.heartbeat_interval_ms = r.heartbeat_interval_ms;
                response.assignment = r.assignment.map(|p| assignment(&shard, p));
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

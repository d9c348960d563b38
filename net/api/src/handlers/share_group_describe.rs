//! ShareGroupDescribe (key 77): share groups (KIP-932) with their members
//! and assignments.

use super::{by_topic, str_bytes, Handler, HandlerFuture, Request};
use coordinators::group::{ShareGroup, TopicPartition};
use engine::ErrorCode;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ApiKey, ShareGroupDescribeRequest, ShareGroupDescribeResponse};
use kafka_protocol::protocol::StrBytes;
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::operations::AUTHORIZED_OPERATIONS_OMITTED;
use security::acl::Operation;
use std::rc::Rc;

/// v1 (Kafka 4.1's).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ShareGroupDescribe,
    min_version: 1,
    max_version: 1,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ShareGroupDescribeRequest = request.decode()?;
        let mut response = ShareGroupDescribeResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        for group_id in body.group_ids {
            let id = group_id.0.to_string();
            let mut out = DescribedGroup::default();
            out.group_id = group_id;
            out.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
            let reply = match authz.group(Operation::Describe, &id) {
                Err(code) => GroupReply::Unavailable(code),
                Ok(()) => {
                    group_runtime::call(&shard, &id, GroupRequest::DescribeShare(id.clone())).await
                }
            };
            match reply {
                GroupReply::DescribedShare(Ok(g)) => describe(&shard, &g, &mut out),
                GroupReply::DescribedShare(Err(code)) | GroupReply::Unavailable(code) => {
                    out.error_code = code.code();
                    out.error_message = Some(str_bytes(format!("group {id}: {}", code.name())));
                }
                _ => out.error_code = ErrorCode::UnknownServerError.code(),
            }
            if out.error_code == 0 {
                let asked = body.include_authorized_operations;
                out.authorized_operations = authz.group_operations(asked, &id);
            }
            response.groups.push(out);
        }
        request.respond(&response)
    })
}

fn describe(shard: &Shard, g: &ShareGroup, out: &mut DescribedGroup) {
    out.group_state = StrBytes::from_static_str(g.state_name());
    out.group_epoch = g.group_epoch;
    out.assignment_epoch = g.group_epoch;
    out.assignor_name = StrBytes::from_static_str("simple");
    out.members = g
        .members
        .values()
        .map(|m| {
            let mut member = Member::default();
            member.member_id = str_bytes(m.member_id.clone());
            member.rack_id = m.rack_id.clone().map(str_bytes);
            member.member_epoch = m.member_epoch;
            member.client_id = str_bytes(m.client_id.clone());
            member.client_host = str_bytes(m.client_host.clone());
            member.subscribed_topic_names = m
                .subscribed_topics
                .iter()
                .map(|t| str_bytes(t.clone()).into())
                .collect();
            member.assignment = assignment(shard, &m.assignment);
            member
        })
        .collect();
}

fn assignment(shard: &Shard, partitions: &[TopicPartition]) -> Assignment {
    let mut out = Assignment::default();
    out.topic_partitions = by_topic(shard, partitions)
        .into_iter()
        .filter_map(|(name, id, partitions)| {
            let mut t = TopicPartitions::default();
            t.topic_id = id?;
            t.topic_name = str_bytes(name).into();
            t.partitions = partitions;
            Some(t)
        })
        .collect();
    out
}

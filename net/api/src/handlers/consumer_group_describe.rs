//! ConsumerGroupDescribe (key 69): KIP-848 groups with their members'
//! current and target assignments.

use super::{by_topic, str_bytes, Handler, HandlerFuture, Request};
use coordinators::group::assignor::MemberAssignment;
use engine::ErrorCode;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::operations::AUTHORIZED_OPERATIONS_OMITTED;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v1.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ConsumerGroupDescribe,
    min_version: 0,
    max_version: 1,
    handle,
};

/// `member_type` (v1, KIP-1099): a classic member the group hosts during
/// an online migration, and a member of the consumer protocol.
const MEMBER_TYPE_CLASSIC: i8 = 0;
const MEMBER_TYPE_CONSUMER: i8 = 1;

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ConsumerGroupDescribeRequest = request.decode()?;
        let mut response = ConsumerGroupDescribeResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        for group_id in body.group_ids {
            let id = group_id.0.to_string();
            let mut out = DescribedGroup::default();
            out.group_id = group_id;
            out.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
            let reply = match authz.group(Operation::Describe, &id) {
                Err(code) => GroupReply::Unavailable(code),
                Ok(()) => {
                    group_runtime::call(&shard, &id, GroupRequest::DescribeConsumer(id.clone()))
                        .await
                }
            };
            match reply {
                GroupReply::DescribedConsumer(Ok(g)) => {
                    out.group_state = str_bytes(g.state().name());
                    out.group_epoch = g.group_epoch;
                    out.assignment_epoch = g.assignment_epoch;
                    out.assignor_name = str_bytes(g.assignor.name());
                    out.members = g
                        .members
                        .values()
                        .map(|m| {
                            let mut member = Member::default();
                            member.member_id = str_bytes(m.member_id.clone());
                            member.instance_id = m.instance_id.clone().map(str_bytes);
                            member.rack_id = m.rack_id.clone().map(str_bytes);
                            member.member_epoch = m.member_epoch;
                            member.client_id = str_bytes(m.client_id.clone());
                            member.client_host = str_bytes(m.client_host.clone());
                            member.subscribed_topic_names = m
                                .subscribed_topics
                                .iter()
                                .map(|t| str_bytes(t.clone()).into())
                                .collect();
                            member.subscribed_topic_regex =
                                m.subscribed_regex.clone().map(str_bytes);
                            member.assignment = assignment(&shard, &m.assigned);
                            let empty = MemberAssignment::new();
                            member.target_assignment =
                                assignment(&shard, g.target.get(&m.member_id).unwrap_or(&empty));
                            member.member_type = match m.classic {
                                Some(_) => MEMBER_TYPE_CLASSIC,
                                None => MEMBER_TYPE_CONSUMER,
                            };
                            member
                        })
                        .collect();
                }
                GroupReply::DescribedConsumer(Err(code)) | GroupReply::Unavailable(code) => {
                    out.error_code = code.code()
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

fn assignment(shard: &Shard, partitions: &MemberAssignment) -> Assignment {
    let mut out = Assignment::default();
    out.topic_partitions = by_topic(shard, partitions)
        .into_iter()
        .map(|(name, id, partitions)| {
            let mut t = TopicPartitions::default();
            t.topic_id = id.unwrap_or_default();
            t.topic_name = str_bytes(name).into();
            t.partitions = partitions;
            t
        })
        .collect();
    out
}

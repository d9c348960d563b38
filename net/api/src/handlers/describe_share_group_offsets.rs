//! DescribeShareGroupOffsets (key 90): each share-partition's start offset
//! (KIP-932), as `kafka-share-groups --describe --offsets` shows it, read
//! from the share coordinator of each partition. With no topics named,
//! every partition of the topics the group's members subscribe to or it
//! has had assigned. A partition the group never read has start offset -1.

use super::{str_bytes, uuid, Handler, HandlerFuture, Request};
use coordinators::share::ShareKey;
use engine::ErrorCode;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
};
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::share_runtime::persister;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (Kafka 4.1's).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeShareGroupOffsets,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeShareGroupOffsetsRequest = request.decode()?;
        let mut response = DescribeShareGroupOffsetsResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        for group in body.groups {
            let id = group.group_id.0.to_string();
            let mut out = DescribeShareGroupOffsetsResponseGroup::default();
            out.group_id = group.group_id;
            if let Err(code) = authz.group(Operation::Describe, &id) {
                out.error_code = code.code();
                response.groups.push(out);
                continue;
            }
            let named: Option<Vec<(String, Option<Vec<i32>>)>> = group.topics.map(|topics| {
                let named = topics.into_iter();
                named
                    .map(|t| (t.topic_name.0.to_string(), Some(t.partitions)))
                    .collect()
            });
            let topics = match named {
                Some(topics) => topics,
                None => match subscribed(&shard, &id).await {
                    Ok(topics) => topics.into_iter().map(|t| (t, None)).collect(),
                    Err(code) => {
                        out.error_code = code.code();
                        out.error_message = Some(str_bytes(code.name()));
                        response.groups.push(out);
                        continue;
                    }
                },
            };
            for (name, partitions) in topics {
                if !authz.allows_topic(Operation::Describe, &name) {
                    continue;
                }
                out.topics
                    .push(describe_topic(&shard, &id, name, partitions).await);
            }
            response.groups.push(out);
        }
        request.respond(&response)
    })
}

/// The topics the share group's members subscribe to, and those it has
/// had assigned.
async fn subscribed(shard: &Rc<Shard>, group: &str) -> Result<Vec<String>, ErrorCode> {
    let call = GroupRequest::ShareTopics(group.to_string());
    let mut topics = match group_runtime::call(shard, group, call).await {
        GroupReply::ShareTopics(topics) => topics,
        GroupReply::Unavailable(code) => return Err(code),
        _ => return Err(ErrorCode::UnknownServerError),
    };
    let call = GroupRequest::DescribeShare(group.to_string());
    match group_runtime::call(shard, group, call).await {
        GroupReply::DescribedShare(Ok(g)) => topics.extend(g.subscribed_topics()),
        GroupReply::DescribedShare(Err(_)) if !topics.is_empty() => {}
        GroupReply::DescribedShare(Err(code)) | GroupReply::Unavailable(code) => return Err(code),
        _ => return Err(ErrorCode::UnknownServerError),
    }
    Ok(topics.into_iter().collect())
}

/// One topic's start offsets (`None` partitions: all of them).
async fn describe_topic(
    shard: &Rc<Shard>,
    group: &str,
    name: String,
    partitions: Option<Vec<i32>>,
) -> DescribeShareGroupOffsetsResponseTopic {
    let mut topic = DescribeShareGroupOffsetsResponseTopic::default();
    let entry = shard
        .topics
        .borrow()
        .get(&name)
        .map(|e| (e.topic_id, e.partitions));
    topic.topic_name = str_bytes(name).into();
    let Some((topic_id, count)) = entry else {
        let mut p = DescribeShareGroupOffsetsResponsePartition::default();
        p.error_code = ErrorCode::UnknownTopicOrPartition.code();
        p.start_offset = -1;
        topic.partitions.push(p);
        return topic;
    };
    topic.topic_id = uuid(topic_id);
    for partition in partitions.unwrap_or_else(|| (0..count).collect()) {
        let key = ShareKey::new(group.to_string(), topic_id, partition);
        let mut p = DescribeShareGroupOffsetsResponsePartition::default();
        p.partition_index = partition;
        p.leader_epoch = -1;
        // i32::MIN: a read for a description fences no partition leader.
        match persister::read(shard, &key, i32::MIN).await {
            Ok(snapshot) => p.start_offset = snapshot.map_or(-1, |s| s.start_offset),
            Err(code) => {
                p.start_offset = -1;
                p.error_code = code.code();
            }
        }
        topic.partitions.push(p);
    }
    topic
}

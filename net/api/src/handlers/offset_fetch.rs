//! OffsetFetch (key 9): committed offsets of one group (v1–v7) or of several
//! groups at once (v8+), each answered by its coordinator shard.

use super::{str_bytes, Handler, HandlerFuture, Request};
use coordinators::group::{FetchedOffset, TopicPartition};
use engine::ErrorCode;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse};
use kernel::error::RequestError;
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::{Authz, Operation};
use std::collections::BTreeMap;
use std::rc::Rc;

/// v0–v9 (v8 batches groups; v10 names topics by id). v0 is v1's layout
/// and, as in Kafka 3.9 without ZooKeeper, reads the same committed offsets.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::OffsetFetch,
    min_version: 0,
    max_version: 9,
    handle,
};

/// The request body as this version lays it out (also the fuzzed decoder,
/// see [`crate::fuzzing`]).
pub(crate) fn decode_body(request: &mut Request) -> Result<OffsetFetchRequest, RequestError> {
    let layout = request.version.max(1);
    request.decode_as(layout)
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let layout = request.version.max(1);
        let body = decode_body(&mut request)?;
        let mut response = OffsetFetchResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        if request.version >= 8 {
            for group in body.groups {
                let partitions = group.topics.map(|topics| {
                    topics
                        .into_iter()
                        .flat_map(|t| asked(t.name.0.to_string(), t.partition_indexes))
                        .collect::<Vec<_>>()
                });
                let group_id = group.group_id.0.to_string();
                let (error_code, rows) = fetch(&shard, &authz, &group_id, partitions).await;
                let mut out = OffsetFetchResponseGroup::default();
                out.group_id = group.group_id;
                out.error_code = error_code.code();
                out.topics = by_topic(rows)
                    .into_iter()
                    .map(|(name, rows)| {
                        let mut topic = OffsetFetchResponseTopics::default();
                        topic.name = str_bytes(name).into();
                        topic.partitions = rows
                            .into_iter()
                            .map(|r| {
                                let mut p = OffsetFetchResponsePartitions::default();
                                p.partition_index = r.partition.partition;
                                p.committed_offset = r.offset;
                                p.committed_leader_epoch = r.leader_epoch;
                                p.metadata = Some(str_bytes(r.metadata));
                                p
                            })
                            .collect();
                        topic
                    })
                    .collect();
                response.groups.push(out);
            }
        } else {
            let partitions = body.topics.map(|topics| {
                topics
                    .into_iter()
                    .flat_map(|t| asked(t.name.0.to_string(), t.partition_indexes))
                    .collect::<Vec<_>>()
            });
            let group_id = body.group_id.0.to_string();
            let (error_code, rows) = fetch(&shard, &authz, &group_id, partitions).await;
            response.error_code = error_code.code();
            response.topics = by_topic(rows)
                .into_iter()
                .map(|(name, rows)| {
                    let mut topic = OffsetFetchResponseTopic::default();
                    topic.name = str_bytes(name).into();
                    topic.partitions = rows
                        .into_iter()
                        .map(|r| {
                            let mut p = OffsetFetchResponsePartition::default();
                            p.partition_index = r.partition.partition;
                            p.committed_offset = r.offset;
                            p.committed_leader_epoch = r.leader_epoch;
                            p.metadata = Some(str_bytes(r.metadata));
                            // v0/v1 carry errors per partition only.
                            p.error_code = if request.version < 2 {
                                error_code.code()
                            } else {
                                ErrorCode::None.code()
                            };
                            p
                        })
                        .collect();
                    topic
                })
                .collect();
        }
        request.respond_as(&response, layout)
    })
}

/// One group's committed offsets from its coordinator: (group error, rows).
async fn fetch(
    shard: &Rc<Shard>,
    authz: &Authz,
    group_id: &str,
    partitions: Option<Vec<TopicPartition>>,
) -> (ErrorCode, Vec<FetchedOffset>) {
    let asked = partitions.clone();
    // DESCRIBE on the group; the offsets of topics the caller may not
    // DESCRIBE are left out.
    if let Err(code) = authz.group(Operation::Describe, group_id) {
        return (code, Vec::new());
    }
    let (code, mut rows) = fetch_allowed(shard, group_id, partitions, asked).await;
    rows.retain(|row| authz.allows_topic(Operation::Describe, &row.partition.topic));
    (code, rows)
}

async fn fetch_allowed(
    shard: &Rc<Shard>,
    group_id: &str,
    partitions: Option<Vec<TopicPartition>>,
    asked: Option<Vec<TopicPartition>>,
) -> (ErrorCode, Vec<FetchedOffset>) {
    let call = GroupRequest::Fetch {
        group_id: group_id.to_string(),
        partitions,
    };
    match group_runtime::call(shard, group_id, call).await {
        GroupReply::Fetched(rows) => (ErrorCode::None, rows),
        GroupReply::Unavailable(code) => {
            // Asked partitions are still listed, with no offset.
            let rows = asked
                .unwrap_or_default()
                .into_iter()
                .map(|partition| FetchedOffset {
                    partition,
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                })
                .collect();
            (code, rows)
        }
        _ => (ErrorCode::UnknownServerError, Vec::new()),
    }
}

/// Rows grouped by topic, topics in first-seen order.
fn by_topic(rows: Vec<FetchedOffset>) -> Vec<(String, Vec<FetchedOffset>)> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<FetchedOffset>> = BTreeMap::new();
    for row in rows {
        let topic = row.partition.topic.clone();
        if !groups.contains_key(&topic) {
            order.push(topic.clone());
        }
        groups.entry(topic).or_default().push(row);
    }
    order
        .into_iter()
        .filter_map(|t| groups.remove(&t).map(|rows| (t, rows)))
        .collect()
}

/// The partitions a request names for one topic (both request forms).
fn asked(topic: String, partitions: Vec<i32>) -> impl Iterator<Item = TopicPartition> {
    partitions
        .into_iter()
        .map(move |p| TopicPartition::new(topic.clone(), p))
}

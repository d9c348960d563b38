//! OffsetCommit (key 8): store committed offsets on the group's coordinator
//! shard; acknowledged only once the records are durable in
//! `__consumer_offsets`. A fenced generation gets ILLEGAL_GENERATION.

use super::{legacy, Handler, HandlerFuture, Request};
use coordinators::group::{OffsetCommitRequest as CoreCommit, TopicPartition};
use engine::ErrorCode;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};
use kernel::error::RequestError;
use runtimes::cluster_runtime;
use runtimes::group_runtime::{self, GroupReply, GroupRequest};
use runtimes::Shard;
use security::acl::{Authz, Operation};
use std::collections::HashMap;
use std::rc::Rc;

/// v0–v9 (v10 names topics by id; v0/v1 are decoded by `legacy`, their
/// responses are v2's layout).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::OffsetCommit,
    min_version: 0,
    max_version: 9,
    handle,
};

/// One partition of the request: its index and the error found up front
/// (`None`: sent to the coordinator).
type Slot = (i32, Option<ErrorCode>);

/// The request body as this version lays it out, with v1's commit
/// timestamps (also the fuzzed decoder, see [`crate::fuzzing`]).
pub(crate) fn decode_body(
    request: &mut Request,
) -> Result<(OffsetCommitRequest, Vec<i64>), RequestError> {
    if request.version < 2 {
        legacy::offset_commit::decode(request.body.clone(), request.version)
            .map_err(|e| request.decode_error(e))
    } else {
        Ok((request.decode()?, Vec::new()))
    }
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let (body, timestamps) = decode_body(&mut request)?;
        let group_id = body.group_id.0.to_string();
        // READ on the group, then READ on each topic (Kafka's order).
        let authz = cluster_runtime::authz(&shard, &request.session);
        let group_refused = authz.group(Operation::Read, &group_id).err();
        let checks = Checks {
            shard: &shard,
            authz: &authz,
            group_refused,
        };
        let (layout, offsets) = checks.sort(&body.topics, timestamps);
        let mut answered: HashMap<TopicPartition, ErrorCode> = HashMap::new();
        if !offsets.is_empty() {
            let commit = CoreCommit {
                group_id: group_id.clone(),
                generation_id_or_member_epoch: body.generation_id_or_member_epoch,
                member_id: body.member_id.to_string(),
                group_instance_id: body.group_instance_id.map(|s| s.to_string()),
                offsets: offsets.clone(),
                // v2–v4 may ask for their own retention (v5 dropped it).
                retention_ms: if (2..=4).contains(&request.version) {
                    body.retention_time_ms
                } else {
                    -1
                },
            };
            answered = commit_offsets(&shard, &group_id, commit, offsets).await;
        }
        let mut response = OffsetCommitResponse::default();
        response.topics = encode_topics(layout, &answered);
        request.respond_as(&response, request.version.max(2))
    })
}

/// One offset for the coordinator: partition, offset, leader epoch,
/// metadata, commit timestamp.
type Offset = (TopicPartition, i64, i32, String, i64);

/// What each partition of the request is checked against before the commit.
struct Checks<'a> {
    shard: &'a Shard,
    authz: &'a Authz,
    /// READ on the group refused, with this code.
    group_refused: Option<ErrorCode>,
}

impl Checks<'_> {
    /// Per topic, in request order, each partition with the error found up
    /// front (`None`: sent to the coordinator); and the offsets to send.
    fn sort(
        &self,
        topics: &[OffsetCommitRequestTopic],
        timestamps: Vec<i64>,
    ) -> (Vec<(String, Vec<Slot>)>, Vec<Offset>) {
        // v1's commit timestamps, in request order (-1: the time of the commit).
        let mut timestamps = timestamps.into_iter();
        // Per (topic, partition): the error found up front, or None when sent.
        let mut layout: Vec<(String, Vec<Slot>)> = Vec::new();
        let mut offsets = Vec::new();
        let table = self.shard.topics.borrow();
        for topic in topics {
            let name = topic.name.0.to_string();
            let count = table.get(&name).map(|e| e.partitions);
            let mut slots = Vec::with_capacity(topic.partitions.len());
            for p in &topic.partitions {
                let commit_timestamp_ms = timestamps.next().unwrap_or(-1);
                let refused = self
                    .group_refused
                    .or_else(|| self.authz.topic(Operation::Read, &name).err());
                if let Some(code) = refused {
                    slots.push((p.partition_index, Some(code)));
                    continue;
                }
                let known = count.is_some_and(|c| p.partition_index >= 0 && p.partition_index < c);
                if known {
                    offsets.push((
                        TopicPartition::new(name.clone(), p.partition_index),
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata
                            .as_ref()
                            .map(|m| m.to_string())
                            .unwrap_or_default(),
                        commit_timestamp_ms,
                    ));
                    slots.push((p.partition_index, None));
                } else {
                    slots.push((p.partition_index, Some(ErrorCode::UnknownTopicOrPartition)));
                }
            }
            layout.push((name, slots));
        }
        (layout, offsets)
    }
}

/// Sends `commit` to the group's coordinator: each partition's code (every
/// one of `offsets` gets the coordinator's error when it could not take
/// them).
async fn commit_offsets(
    shard: &Rc<Shard>,
    group_id: &str,
    commit: CoreCommit,
    offsets: Vec<Offset>,
) -> HashMap<TopicPartition, ErrorCode> {
    let mut answered = HashMap::new();
    match group_runtime::call(shard, group_id, GroupRequest::Commit(commit)).await {
        GroupReply::Committed(rows) => answered.extend(rows),
        GroupReply::Unavailable(code) => {
            answered.extend(offsets.into_iter().map(|(tp, ..)| (tp, code)))
        }
        _ => answered.extend(
            offsets
                .into_iter()
                .map(|(tp, ..)| (tp, ErrorCode::UnknownServerError)),
        ),
    }
    answered
}

/// The response's topics, in request order: each partition's early error,
/// else the coordinator's answer.
fn encode_topics(
    layout: Vec<(String, Vec<Slot>)>,
    answered: &HashMap<TopicPartition, ErrorCode>,
) -> Vec<OffsetCommitResponseTopic> {
    layout
        .into_iter()
        .map(|(name, slots)| {
            let mut topic = OffsetCommitResponseTopic::default();
            topic.partitions = slots
                .into_iter()
                .map(|(index, early)| {
                    let mut p = OffsetCommitResponsePartition::default();
                    p.partition_index = index;
                    p.error_code = early
                        .unwrap_or_else(|| {
                            answered
                                .get(&TopicPartition::new(name.clone(), index))
                                .copied()
                                .unwrap_or(ErrorCode::UnknownServerError)
                        })
                        .code();
                    p
                })
                .collect();
            topic.name = super::str_bytes(name).into();
            topic
        })
        .collect()
}

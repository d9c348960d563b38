//! Fetch (key 1) from a follower replica (`replica_id` ≥ 0): each partition
//! is served by its owner shard's replication runtime, which takes the
//! fetch offset as the follower's log end (moving the HW) and reads what
//! this leader has made durable — past the HW, which consumers stop at.
//! Partitions are fetched one after another; a follower asks for one per
//! request (rill's fetchers run one per partition), in a fetch session
//! (KIP-227) of that one partition.
//!
//! v12+ carries the follower's `last_fetched_epoch`; when its log parts
//! from the leader's, the partition is answered with no records and
//! `diverging_epoch` (KIP-595), and the follower truncates.
//!
//! A leader replication throttle (KIP-73, `runtimes::quotas::replication`)
//! counts the bytes of the partitions it lists, and while over its rate
//! those partitions are answered with no records to followers out of the
//! ISR.

use super::fetch_session::{self as session, Context, Outcome};
use super::{Request, Response};
use engine::TopicPartition;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kernel::error::RequestError;
use runtimes::fetch_sessions::{PartitionSeen, TopicRef};
use runtimes::quotas::replication::{self, Side};
use runtimes::replication_runtime::{FollowerFetchReply, ServeFollowerFetch};
use runtimes::Shard;
use std::rc::Rc;
use std::time::Duration;

/// Answers a follower's fetch: the partitions it asks, or in an
/// incremental session every partition of the session, of which the
/// response carries those that changed ([`super::fetch_session`]; a follower's session
/// outranks consumers' in the cache).
pub async fn serve(
    shard: &Rc<Shard>,
    request: &Request,
    body: FetchRequest,
    replica: i32,
) -> Result<Response, RequestError> {
    let max_wait = Duration::from_millis(body.max_wait_ms.clamp(0, 10_000) as u64);
    let (context, asked) = session::open(shard, &body, request.version, true);
    let mut response = FetchResponse::default();
    response.session_id = context.session_id();
    if let Context::Refused(code) = context {
        response.error_code = code.code();
        return request.respond(&response);
    }
    let mut replies = Vec::with_capacity(asked.len());
    // KIP-73: `None` unless this broker has a leader throttle rate.
    let over_rate = replication::over_rate(shard, Side::Leader);
    for ((topic_ref, partition), params) in &asked {
        let name = topic_name(shard, topic_ref);
        let tp = TopicPartition::new(name, *partition);
        let owner = shard.owner(&tp);
        let listed = over_rate.is_some() && replication::throttles(shard, &tp, Side::Leader);
        let call = ServeFollowerFetch {
            tp,
            replica,
            fetch_offset: params.fetch_offset,
            current_leader_epoch: params.current_leader_epoch,
            last_fetched_epoch: params.last_fetched_epoch,
            log_start_offset: params.log_start_offset,
            max_bytes: params.max_bytes.max(0) as usize,
            max_wait,
            throttled: listed && over_rate == Some(true),
        };
        let reply = shard.call(owner, call).await?;
        if listed {
            let bytes = reply.records.as_ref().map_or(0, |r| r.len());
            shard
                .runtime()
                .quotas
                .record_replication(Side::Leader, bytes);
        }
        replies.push(reply);
    }
    let outcomes: Vec<Outcome> = replies.iter().map(outcome).collect();
    let carried = session::carried(shard, context, &asked, &outcomes);
    let parts = asked.into_iter().zip(replies).zip(carried);
    for ((((topic_ref, partition), _), reply), _) in parts.filter(|(_, carried)| *carried) {
        let is_same = |t: &FetchableTopicResponse| match &topic_ref {
            TopicRef::Id(id) => t.topic_id.as_bytes() == id,
            TopicRef::Name(name) => t.topic.0.as_str() == name,
        };
        if !response.responses.last().is_some_and(is_same) {
            response.responses.push(topic_answer(&topic_ref));
        }
        if let Some(answer) = response.responses.last_mut() {
            answer.partitions.push(partition_data(partition, reply));
        }
    }
    request.respond(&response)
}

/// The topic's name (resolved from its id on v13+; empty when unknown,
/// which the owner answers UNKNOWN_TOPIC_OR_PARTITION).
fn topic_name(shard: &Shard, topic_ref: &TopicRef) -> String {
    match topic_ref {
        TopicRef::Name(name) => name.clone(),
        TopicRef::Id(id) => shard
            .topics
            .borrow()
            .by_id(id)
            .map(|entry| entry.name.clone())
            .unwrap_or_default(),
    }
}

fn topic_answer(topic_ref: &TopicRef) -> FetchableTopicResponse {
    let mut answer = FetchableTopicResponse::default();
    match topic_ref {
        TopicRef::Name(name) => answer.topic = TopicName(StrBytes::from_string(name.clone())),
        TopicRef::Id(id) => answer.topic_id = uuid::Uuid::from_bytes(*id),
    }
    answer
}

/// What the session records of a reply: a diverging epoch, like records,
/// must reach the follower.
fn outcome(reply: &FollowerFetchReply) -> Outcome {
    Outcome {
        seen: PartitionSeen {
            high_watermark: reply.high_watermark,
            last_stable_offset: reply.high_watermark,
            log_start_offset: reply.log_start_offset,
        },
        has_records: reply.records.as_ref().is_some_and(|r| !r.is_empty())
            || reply.diverging_epoch.is_some(),
        error_code: reply.error,
    }
}

fn partition_data(partition: i32, reply: FollowerFetchReply) -> PartitionData {
    let mut data = PartitionData::default();
    data.partition_index = partition;
    data.error_code = reply.error.code();
    data.high_watermark = reply.high_watermark;
    data.last_stable_offset = reply.high_watermark;
    data.log_start_offset = reply.log_start_offset;
    data.records = reply.records;
    if let Some(diverging) = reply.diverging_epoch {
        data.diverging_epoch.epoch = diverging.epoch;
        data.diverging_epoch.end_offset = diverging.end_offset;
    }
    data
}

//! Fetch (key 1) from a follower replica (`replica_id` ≥ 0): each partition
//! is served by its owner shard's replication runtime, which takes the
//! fetch offset as the follower's log end (moving the HW) and reads what
//! this leader has made durable — past the HW, which consumers stop at.
//! Partitions are fetched one after another; a follower asks for one per
//! request (rill's fetchers run one per partition).
//!
//! v12+ carries the follower's `last_fetched_epoch`; when its log parts
//! from the leader's, the partition is answered with no records and
//! `diverging_epoch` (KIP-595), and the follower truncates.

use super::{Request, Response};
use engine::TopicPartition;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kernel::error::RequestError;
use runtimes::replication_runtime::ServeFollowerFetch;
use runtimes::Shard;
use std::rc::Rc;
use std::time::Duration;

/// Answers a follower's fetch.
pub async fn serve(
    shard: &Rc<Shard>,
    request: &Request,
    body: FetchRequest,
    replica: i32,
) -> Result<Response, RequestError> {
    let max_wait = Duration::from_millis(body.max_wait_ms.clamp(0, 10_000) as u64);
    let mut response = FetchResponse::default();
    for topic in body.topics {
        let name = if request.version >= 13 {
            shard
                .topics
                .borrow()
                .by_id(topic.topic_id.as_bytes())
                .map(|entry| entry.name.clone())
                .unwrap_or_default()
        } else {
            topic.topic.0.to_string()
        };
        let mut answer = FetchableTopicResponse::default();
        answer.topic = topic.topic.clone();
        answer.topic_id = topic.topic_id;
        for partition in topic.partitions {
            let tp = TopicPartition::new(name.clone(), partition.partition);
            let owner = shard.owner(&tp);
            let call = ServeFollowerFetch {
                tp,
                replica,
                fetch_offset: partition.fetch_offset,
                current_leader_epoch: partition.current_leader_epoch,
                last_fetched_epoch: partition.last_fetched_epoch,
                max_bytes: partition.partition_max_bytes.max(0) as usize,
                max_wait,
            };
            let reply = shard.call(owner, call).await?;
            let mut data = PartitionData::default();
            data.partition_index = partition.partition;
            data.error_code = reply.error.code();
            data.high_watermark = reply.high_watermark;
            data.last_stable_offset = reply.high_watermark;
            data.log_start_offset = reply.log_start_offset;
            data.records = reply.records;
            if let Some(diverging) = reply.diverging_epoch {
                data.diverging_epoch.epoch = diverging.epoch;
                data.diverging_epoch.end_offset = diverging.end_offset;
            }
            answer.partitions.push(data);
        }
        response.responses.push(answer);
    }
    request.respond(&response)
}

//! Produce (key 0): append each partition's batches on its owner shard and
//! answer per partition; one bad partition never fails the others. acks=-1
//! waits for durability, acks=1 for the write, acks=0 sends no response.

use super::{Handler, HandlerFuture, Request, Response};
use crate::cluster_runtime;
use crate::controller::{self, ControllerRequest};
use crate::routing::run_on_owners;
use crate::routing::{PartitionOp, PartitionReply};
use crate::security::acl::{Authz, Operation};
use crate::shard::Shard;
use crate::topics::valid_topic_name;
use engine::ErrorCode;
use engine::TopicPartition;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use std::rc::Rc;

/// v3–v11. v12 is the same request sent by clients that use transactions
/// v2 (KIP-890: partitions join a transaction implicitly), which rill does
/// not finalize as a feature, so such clients stay on v11; v13 names topics
/// by id.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::Produce,
    min_version: 3,
    max_version: 11,
    handle,
};

/// Where one partition of the request stands before the append.
enum Slot {
    /// Rejected up front with this error.
    Rejected(ErrorCode),
    /// Sent as the op at this position.
    Sent(usize),
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ProduceRequest = request.decode()?;
        let acks = body.acks;
        let acks_valid = matches!(acks, -1..=1);
        let authz = cluster_runtime::authz(&shard, &request.session);
        // A transactional producer needs WRITE on its transactional id;
        // every partition is refused without it, as Kafka answers.
        let txn_refused = body
            .transactional_id
            .as_ref()
            .and_then(|id| authz.transactional_id(Operation::Write, id).err());
        let mut ops = Vec::new();
        let mut layout: Vec<(kafka_protocol::messages::TopicName, Vec<(i32, Slot)>)> = Vec::new();
        for topic in body.topic_data {
            let name = topic.name.0.to_string();
            let partitions = if let Some(code) = txn_refused {
                Err(code)
            } else if let Err(code) = authz.topic(Operation::Write, &name) {
                Err(code)
            } else if acks_valid {
                topic_partitions(&shard, &name, &authz).await
            } else {
                Err(ErrorCode::InvalidRequiredAcks)
            };
            let mut slots = Vec::with_capacity(topic.partition_data.len());
            for data in topic.partition_data {
                let slot = match (&partitions, data.records) {
                    (Err(code), _) => Slot::Rejected(*code),
                    (Ok(count), _) if data.index < 0 || data.index >= *count => {
                        Slot::Rejected(ErrorCode::UnknownTopicOrPartition)
                    }
                    (Ok(_), None) => Slot::Rejected(ErrorCode::CorruptMessage),
                    (Ok(_), Some(records)) => {
                        ops.push(PartitionOp::Produce {
                            tp: TopicPartition::new(name.clone(), data.index),
                            // The engine writes offsets into the batches in
                            // place, so the records leave the shared frame here.
                            records: records.to_vec(),
                            acks,
                            timeout_ms: body.timeout_ms,
                        });
                        Slot::Sent(ops.len() - 1)
                    }
                };
                slots.push((data.index, slot));
            }
            layout.push((topic.name, slots));
        }
        let replies = run_on_owners(&shard, ops).await;
        if acks == 0 {
            return Ok(Response::Nothing);
        }
        let mut response = ProduceResponse::default();
        // Counted when the request was read (`connection::dispatch`).
        response.throttle_time_ms = request.quota_throttle_ms;
        response.responses = layout
            .into_iter()
            .map(|(name, slots)| {
                let mut topic = TopicProduceResponse::default();
                topic.name = name;
                topic.partition_responses = slots
                    .into_iter()
                    .map(|(index, slot)| partition_response(index, slot, &replies))
                    .collect();
                topic
            })
            .collect();
        request.respond(&response)
    })
}

fn partition_response(
    index: i32,
    slot: Slot,
    replies: &[PartitionReply],
) -> PartitionProduceResponse {
    let mut p = PartitionProduceResponse::default();
    p.index = index;
    p.base_offset = -1;
    p.log_append_time_ms = -1;
    p.log_start_offset = -1;
    let outcome = match slot {
        Slot::Rejected(code) => Err(code),
        Slot::Sent(position) => match replies.get(position) {
            Some(PartitionReply::Produce(outcome)) => *outcome,
            _ => Err(ErrorCode::UnknownServerError),
        },
    };
    match outcome {
        Ok(done) => {
            p.base_offset = done.base_offset;
            p.log_append_time_ms = done.log_append_time_ms;
            p.log_start_offset = done.log_start_offset;
        }
        Err(code) => p.error_code = code.code(),
    }
    p
}

/// The partition count of a topic, auto-creating it as Kafka does when allowed
/// (by `auto.create.topics.enable` and by CREATE on the cluster or topic).
async fn topic_partitions(shard: &Rc<Shard>, name: &str, authz: &Authz) -> Result<i32, ErrorCode> {
    if let Some(entry) = shard.topics.borrow().get(name) {
        return Ok(entry.partitions);
    }
    if !valid_topic_name(name) {
        return Err(ErrorCode::InvalidTopicException);
    }
    if !shard.config.auto_create_topics_enable {
        return Err(ErrorCode::UnknownTopicOrPartition);
    }
    authz.create_topic(name)?;
    let request = ControllerRequest::CreateTopic {
        name: name.to_string(),
        partitions: -1,
        configs: Vec::new(),
        replication_factor: controller::DEFAULT_REPLICATION,
        assignment: Vec::new(),
        validate_only: false,
    };
    match controller::submit(shard, request).await {
        Ok(_) | Err((ErrorCode::TopicAlreadyExists, _)) => shard
            .topics
            .borrow()
            .get(name)
            .map(|e| e.partitions)
            .ok_or(ErrorCode::UnknownTopicOrPartition),
        Err((code, _)) => Err(code),
    }
}

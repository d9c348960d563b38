//! DescribeProducers (key 61, KIP-664): the idempotent and transactional
//! producers each asked partition knows, read on the shard that owns it.
//! Kafka's checks, in its order: READ on the topic
//! (TOPIC_AUTHORIZATION_FAILED), the partition exists
//! (UNKNOWN_TOPIC_OR_PARTITION), a replica of it is here
//! (NOT_LEADER_OR_FOLLOWER).

use super::{Handler, HandlerFuture, Request};
use engine::producer_state::ActiveProducer;
use engine::ErrorCode;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use runtimes::cluster_runtime;
use runtimes::routing::run_authorized;
use runtimes::routing::{PartitionOp, PartitionReply};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeProducers,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeProducersRequest = request.decode()?;
        let pairs: Vec<(String, i32)> = body
            .topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |&p| (t.name.0.to_string(), p))
            })
            .collect();
        let authz = cluster_runtime::authz(&shard, &request.session);
        let readable = |topic: &str| authz.allows_topic(Operation::Read, topic);
        let mut replies = run_authorized(&shard, &pairs, readable, |tp, _| {
            PartitionOp::DescribeProducers { tp }
        })
        .await
        .into_iter();
        let mut response = DescribeProducersResponse::default();
        for topic in body.topics {
            let mut out = TopicResponse::default();
            out.name = topic.name;
            for partition_index in topic.partition_indexes {
                let mut part = PartitionResponse::default();
                part.partition_index = partition_index;
                match replies.next() {
                    Some(Ok(PartitionReply::Producers(Ok(producers)))) => {
                        part.active_producers = producers.iter().map(producer_state).collect();
                    }
                    Some(Ok(PartitionReply::Producers(Err(code)))) | Some(Err(code)) => {
                        part.error_code = code.code()
                    }
                    _ => part.error_code = ErrorCode::UnknownServerError.code(),
                }
                out.partitions.push(part);
            }
            response.topics.push(out);
        }
        request.respond(&response)
    })
}

fn producer_state(producer: &ActiveProducer) -> ProducerState {
    let mut state = ProducerState::default();
    state.producer_id = ProducerId(producer.producer_id);
    state.producer_epoch = i32::from(producer.producer_epoch);
    state.last_sequence = producer.last_sequence;
    state.last_timestamp = producer.last_timestamp_ms;
    state.coordinator_epoch = producer.coordinator_epoch;
    state.current_txn_start_offset = producer.current_txn_start_offset;
    state
}

//! An in-memory Kafka-protocol broker, just enough for the harness's own
//! client: ApiVersions, Metadata, CreateTopics, ListOffsets, Produce, Fetch.
//! One node, every partition led by it, batches kept as they arrived (with
//! the base offset rewritten). It lets the runner be tested end to end
//! without a real broker.

#![allow(dead_code)]

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable, StrBytes};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Default)]
struct Partition {
    batches: Vec<(i64, Bytes)>,
    next_offset: i64,
}

#[derive(Default)]
struct State {
    topics: HashMap<String, Vec<Partition>>,
}

type Shared = Arc<Mutex<State>>;

/// Starts a mock broker on 127.0.0.1:0 and returns its address.
pub async fn start_mock_broker() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state: Shared = Arc::default();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve(stream, state.clone(), addr.port() as i32));
        }
    });
    addr.to_string()
}

async fn serve(mut stream: TcpStream, state: Shared, port: i32) {
    stream.set_nodelay(true).unwrap();
    loop {
        let Ok(len) = stream.read_i32().await else {
            return;
        };
        let mut frame = vec![0u8; len as usize];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let mut frame = Bytes::from(frame);
        let header = decode_request_header_from_buffer(&mut frame).unwrap();
        let api_key = ApiKey::try_from(header.request_api_key).unwrap();
        let version = header.request_api_version;
        let mut body = BytesMut::new();
        let respond = handle(api_key, version, &mut frame, &state, port, &mut body).await;
        if !respond {
            continue;
        }
        let mut out = BytesMut::new();
        out.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut out, api_key.response_header_version(version))
            .unwrap();
        out.put_slice(&body);
        let total = (out.len() - 4) as i32;
        out[0..4].copy_from_slice(&total.to_be_bytes());
        if stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

async fn handle(
    api_key: ApiKey,
    version: i16,
    frame: &mut Bytes,
    state: &Shared,
    port: i32,
    out: &mut BytesMut,
) -> bool {
    match api_key {
        ApiKey::ApiVersions => {
            let keys = [
                (0, 3, 9),
                (1, 4, 11),
                (2, 1, 5),
                (3, 1, 9),
                (18, 0, 3),
                (19, 2, 5),
            ];
            ApiVersionsResponse::default()
                .with_api_keys(
                    keys.iter()
                        .map(|&(k, min, max)| {
                            ApiVersion::default()
                                .with_api_key(k)
                                .with_min_version(min)
                                .with_max_version(max)
                        })
                        .collect(),
                )
                .encode(out, version)
                .unwrap();
        }
        ApiKey::Metadata => {
            let request = MetadataRequest::decode(frame, version).unwrap();
            let state = state.lock().unwrap();
            let names: Vec<String> = match request.topics {
                Some(topics) => topics
                    .iter()
                    .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
                    .collect(),
                None => state.topics.keys().cloned().collect(),
            };
            let topics = names
                .iter()
                .map(|n| match state.topics.get(n) {
                    Some(partitions) => MetadataResponseTopic::default()
                        .with_name(Some(name(n)))
                        .with_partitions(
                            (0..partitions.len() as i32)
                                .map(|p| {
                                    MetadataResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_leader_id(BrokerId(0))
                                        .with_replica_nodes(vec![BrokerId(0)])
                                        .with_isr_nodes(vec![BrokerId(0)])
                                })
                                .collect(),
                        ),
                    None => MetadataResponseTopic::default()
                        .with_name(Some(name(n)))
                        .with_error_code(3),
                })
                .collect();
            MetadataResponse::default()
                .with_brokers(vec![MetadataResponseBroker::default()
                    .with_node_id(BrokerId(0))
                    .with_host(StrBytes::from_static_str("127.0.0.1"))
                    .with_port(port)])
                .with_controller_id(BrokerId(0))
                .with_topics(topics)
                .encode(out, version)
                .unwrap();
        }
        ApiKey::CreateTopics => {
            let request = CreateTopicsRequest::decode(frame, version).unwrap();
            let mut state = state.lock().unwrap();
            let results = request
                .topics
                .iter()
                .map(|t| {
                    let n = t.name.0.to_string();
                    let error_code = match state.topics.entry(n) {
                        std::collections::hash_map::Entry::Occupied(_) => 36,
                        std::collections::hash_map::Entry::Vacant(slot) => {
                            slot.insert(
                                (0..t.num_partitions)
                                    .map(|_| Partition::default())
                                    .collect(),
                            );
                            0
                        }
                    };
                    CreatableTopicResult::default()
                        .with_name(t.name.clone())
                        .with_error_code(error_code)
                })
                .collect();
            CreateTopicsResponse::default()
                .with_topics(results)
                .encode(out, version)
                .unwrap();
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::decode(frame, version).unwrap();
            let state = state.lock().unwrap();
            let topics = request
                .topics
                .iter()
                .map(|t| {
                    let partitions = &state.topics[t.name.0.as_str()];
                    ListOffsetsTopicResponse::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    let end = partitions[p.partition_index as usize].next_offset;
                                    let offset = if p.timestamp == -2 { 0 } else { end };
                                    ListOffsetsPartitionResponse::default()
                                        .with_partition_index(p.partition_index)
                                        .with_offset(offset)
                                        .with_timestamp(-1)
                                })
                                .collect(),
                        )
                })
                .collect();
            ListOffsetsResponse::default()
                .with_topics(topics)
                .encode(out, version)
                .unwrap();
        }
        ApiKey::Produce => {
            let request = ProduceRequest::decode(frame, version).unwrap();
            let mut state = state.lock().unwrap();
            let mut responses = Vec::new();
            for topic in &request.topic_data {
                let partitions = state.topics.get_mut(topic.name.0.as_str()).unwrap();
                let mut partition_responses = Vec::new();
                for data in &topic.partition_data {
                    let partition = &mut partitions[data.index as usize];
                    let mut records = data.records.clone().unwrap();
                    let base = partition.next_offset;
                    // Possibly several batches back to back.
                    while records.remaining() >= 61 {
                        let batch_len =
                            i32::from_be_bytes(records[8..12].try_into().unwrap()) as usize + 12;
                        let last_delta =
                            i32::from_be_bytes(records[23..27].try_into().unwrap()) as i64;
                        let mut batch = BytesMut::from(&records[..batch_len]);
                        batch[0..8].copy_from_slice(&partition.next_offset.to_be_bytes());
                        partition
                            .batches
                            .push((partition.next_offset, batch.freeze()));
                        partition.next_offset += last_delta + 1;
                        records.advance(batch_len);
                    }
                    partition_responses.push(
                        PartitionProduceResponse::default()
                            .with_index(data.index)
                            .with_base_offset(base),
                    );
                }
                responses.push(
                    TopicProduceResponse::default()
                        .with_name(topic.name.clone())
                        .with_partition_responses(partition_responses),
                );
            }
            if request.acks == 0 {
                return false;
            }
            ProduceResponse::default()
                .with_responses(responses)
                .encode(out, version)
                .unwrap();
        }
        ApiKey::Fetch => {
            let request = FetchRequest::decode(frame, version).unwrap();
            for attempt in 0..2 {
                let mut any = false;
                let responses: Vec<FetchableTopicResponse> = {
                    let state = state.lock().unwrap();
                    request
                        .topics
                        .iter()
                        .map(|t| {
                            let partitions = &state.topics[t.topic.0.as_str()];
                            FetchableTopicResponse::default()
                                .with_topic(t.topic.clone())
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            let partition = &partitions[p.partition as usize];
                                            let mut records = BytesMut::new();
                                            for (base, batch) in &partition.batches {
                                                let last = base
                                                    + i32::from_be_bytes(
                                                        batch[23..27].try_into().unwrap(),
                                                    )
                                                        as i64;
                                                if last >= p.fetch_offset {
                                                    if !records.is_empty()
                                                        && records.len() + batch.len()
                                                            > p.partition_max_bytes as usize
                                                    {
                                                        break;
                                                    }
                                                    records.put_slice(batch);
                                                }
                                            }
                                            any |= !records.is_empty();
                                            PartitionData::default()
                                                .with_partition_index(p.partition)
                                                .with_high_watermark(partition.next_offset)
                                                .with_records(Some(records.freeze()))
                                        })
                                        .collect(),
                                )
                        })
                        .collect()
                };
                if any || attempt == 1 {
                    FetchResponse::default()
                        .with_responses(responses)
                        .encode(out, version)
                        .unwrap();
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
        other => panic!("mock broker: unexpected api {other:?}"),
    }
    true
}

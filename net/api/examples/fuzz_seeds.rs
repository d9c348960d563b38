//! Writes the seed corpora of the fuzz targets (see docs/fuzzing.md):
//! real requests encoded with `kafka-protocol` and real record batches
//! built with the engine's `BatchBuilder`, one file each.
//!
//! `cargo run -p rill-api --example fuzz_seeds -- fuzz/corpus`
//!
//! - `request_frame/`: every API rill serves at every version it serves
//!   (a default body, and richer ones for Produce, Fetch, Metadata), framed
//!   with its header; plus two frames in one input and a cut frame.
//! - `produce_request/`, `fetch_request/`: a version byte (the offset from
//!   the lowest served version) then the body.
//! - `record_batch/`: produce payloads: each codec, idempotent and
//!   transactional batches, a transaction marker, several batches.

use api::handlers::REGISTRY;
use bytes::{Bytes, BytesMut};
use engine::batch::{BatchBuilder, Compression};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::args().nth(1).unwrap_or("fuzz/corpus".into()));
    let batches = record_sets()?;
    let mut count = 0usize;
    for (name, payload) in &batches {
        write(&root.join("record_batch"), name, payload)?;
        count += 1;
    }

    let produce = handler(ApiKey::Produce);
    for version in produce.min_version..=produce.max_version {
        for (name, payload) in &batches {
            let body = produce_body(payload.clone());
            let bytes = encode(&body, version)?;
            let pick = (version - produce.min_version) as u8;
            write(
                &root.join("produce_request"),
                &format!("v{version}-{name}"),
                &[&[pick], &bytes[..]].concat(),
            )?;
            if version == produce.max_version || version == produce.min_version {
                write(
                    &root.join("request_frame"),
                    &format!("produce-v{version}-{name}"),
                    &frame(ApiKey::Produce, version, &bytes)?,
                )?;
            }
            count += 2;
        }
    }

    let fetch = handler(ApiKey::Fetch);
    for version in fetch.min_version..=fetch.max_version {
        let bytes = encode(&fetch_body(version), version)?;
        let pick = (version - fetch.min_version) as u8;
        write(
            &root.join("fetch_request"),
            &format!("v{version}"),
            &[&[pick], &bytes[..]].concat(),
        )?;
        write(
            &root.join("request_frame"),
            &format!("fetch-v{version}"),
            &frame(ApiKey::Fetch, version, &bytes)?,
        )?;
        count += 2;
    }

    for h in REGISTRY {
        for version in h.min_version..=h.max_version {
            // Versions below the codec's floor (decoded by `legacy`) do not
            // encode with it; the fuzzer reaches them from the others.
            let Some(body) = default_body(h.api_key, version) else {
                continue;
            };
            let name = format!("{:?}-v{version}", h.api_key).to_lowercase();
            write(
                &root.join("request_frame"),
                &name,
                &frame(h.api_key, version, &body)?,
            )?;
            count += 1;
        }
    }

    let metadata = encode(&metadata_body(), 12)?;
    let two = [
        frame(ApiKey::Metadata, 12, &metadata)?,
        frame(ApiKey::Fetch, 16, &encode(&fetch_body(16), 16)?)?,
    ]
    .concat();
    write(&root.join("request_frame"), "two-frames", &two)?;
    let cut = &two[..two.len() - 5];
    write(&root.join("request_frame"), "cut-frame", cut)?;
    count += 2;
    println!("wrote {count} seeds under {}", root.display());
    Ok(())
}

fn handler(api_key: ApiKey) -> &'static api::handlers::Handler {
    api::handlers::find(api_key as i16).expect("a served API")
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(format!("seed-{name}")), bytes)
}

fn encode<T: Encodable>(body: &T, version: i16) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version)?;
    Ok(buf.to_vec())
}

/// Length prefix, request header of `api_key`'s header version, body.
fn frame(
    api_key: ApiKey,
    version: i16,
    body: &[u8],
) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let mut header = RequestHeader::default();
    header.request_api_key = api_key as i16;
    header.request_api_version = version;
    header.correlation_id = 42;
    header.client_id = Some(StrBytes::from_static_str("rdkafka"));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, api_key.request_header_version(version))?;
    let mut out = ((buf.len() + body.len()) as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out.extend_from_slice(body);
    Ok(out)
}

fn default_body(api_key: ApiKey, version: i16) -> Option<Vec<u8>> {
    macro_rules! d {
        ($t:ty) => {
            encode(&<$t>::default(), version).ok()
        };
    }
    match api_key {
        ApiKey::Produce => d!(ProduceRequest),
        ApiKey::Fetch => d!(FetchRequest),
        ApiKey::ListOffsets => d!(ListOffsetsRequest),
        ApiKey::Metadata => encode(&metadata_body(), version).ok(),
        ApiKey::ApiVersions => d!(ApiVersionsRequest),
        ApiKey::CreateTopics => d!(CreateTopicsRequest),
        ApiKey::DeleteTopics => d!(DeleteTopicsRequest),
        ApiKey::DeleteRecords => d!(DeleteRecordsRequest),
        ApiKey::InitProducerId => d!(InitProducerIdRequest),
        ApiKey::OffsetForLeaderEpoch => d!(OffsetForLeaderEpochRequest),
        ApiKey::DescribeConfigs => d!(DescribeConfigsRequest),
        ApiKey::AlterConfigs => d!(AlterConfigsRequest),
        ApiKey::DescribeLogDirs => d!(DescribeLogDirsRequest),
        ApiKey::CreatePartitions => d!(CreatePartitionsRequest),
        ApiKey::IncrementalAlterConfigs => d!(IncrementalAlterConfigsRequest),
        ApiKey::DescribeCluster => d!(DescribeClusterRequest),
        ApiKey::DescribeQuorum => d!(DescribeQuorumRequest),
        ApiKey::AlterPartitionReassignments => d!(AlterPartitionReassignmentsRequest),
        ApiKey::ListPartitionReassignments => d!(ListPartitionReassignmentsRequest),
        ApiKey::ElectLeaders => d!(ElectLeadersRequest),
        ApiKey::AddPartitionsToTxn => d!(AddPartitionsToTxnRequest),
        ApiKey::AddOffsetsToTxn => d!(AddOffsetsToTxnRequest),
        ApiKey::EndTxn => d!(EndTxnRequest),
        ApiKey::WriteTxnMarkers => d!(WriteTxnMarkersRequest),
        ApiKey::TxnOffsetCommit => d!(TxnOffsetCommitRequest),
        ApiKey::DescribeTransactions => d!(DescribeTransactionsRequest),
        ApiKey::DescribeProducers => d!(DescribeProducersRequest),
        ApiKey::DescribeTopicPartitions => d!(DescribeTopicPartitionsRequest),
        ApiKey::ListTransactions => d!(ListTransactionsRequest),
        ApiKey::ConsumerGroupDescribe => d!(ConsumerGroupDescribeRequest),
        ApiKey::ConsumerGroupHeartbeat => d!(ConsumerGroupHeartbeatRequest),
        ApiKey::DeleteGroups => d!(DeleteGroupsRequest),
        ApiKey::DescribeGroups => d!(DescribeGroupsRequest),
        ApiKey::FindCoordinator => d!(FindCoordinatorRequest),
        ApiKey::Heartbeat => d!(HeartbeatRequest),
        ApiKey::JoinGroup => d!(JoinGroupRequest),
        ApiKey::LeaveGroup => d!(LeaveGroupRequest),
        ApiKey::ListGroups => d!(ListGroupsRequest),
        ApiKey::OffsetCommit => d!(OffsetCommitRequest),
        ApiKey::OffsetDelete => d!(OffsetDeleteRequest),
        ApiKey::OffsetFetch => d!(OffsetFetchRequest),
        ApiKey::SyncGroup => d!(SyncGroupRequest),
        _ => None,
    }
}

fn metadata_body() -> MetadataRequest {
    let mut topic = MetadataRequestTopic::default();
    topic.name = Some(TopicName(StrBytes::from_static_str("events")));
    let mut body = MetadataRequest::default();
    body.topics = Some(vec![topic]);
    body.allow_auto_topic_creation = true;
    body
}

fn produce_body(records: Vec<u8>) -> ProduceRequest {
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(Bytes::from(records));
    let mut topic = TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_static_str("events"));
    topic.partition_data = vec![partition];
    let mut body = ProduceRequest::default();
    body.acks = -1;
    body.timeout_ms = 30_000;
    body.topic_data = vec![topic];
    body
}

/// A consumer's Fetch, with only the fields `version` has.
fn fetch_body(version: i16) -> FetchRequest {
    let mut partition = FetchPartition::default();
    partition.partition = 0;
    partition.fetch_offset = 100;
    if version >= 9 {
        partition.current_leader_epoch = 3;
    }
    partition.partition_max_bytes = 1_048_576;
    let mut topic = FetchTopic::default();
    if version >= 13 {
        topic.topic_id = uuid::Uuid::from_bytes([7; 16]);
    } else {
        topic.topic = TopicName(StrBytes::from_static_str("events"));
    }
    topic.partitions = vec![partition];
    let mut forgotten = ForgottenTopic::default();
    if version >= 13 {
        forgotten.topic_id = uuid::Uuid::from_bytes([9; 16]);
    } else {
        forgotten.topic = TopicName(StrBytes::from_static_str("old"));
    }
    forgotten.partitions = vec![1, 2];
    let mut body = FetchRequest::default();
    body.replica_id = BrokerId(-1);
    body.max_wait_ms = 500;
    body.min_bytes = 1;
    body.max_bytes = 52_428_800;
    body.isolation_level = 1;
    body.topics = vec![topic];
    if version >= 7 {
        body.forgotten_topics_data = vec![forgotten];
    }
    if version >= 11 {
        body.rack_id = StrBytes::from_static_str("rack-a");
    }
    body
}

/// Named seeds.
type Seeds = Vec<(String, Vec<u8>)>;

/// Produce payloads as clients send them.
fn record_sets() -> Result<Seeds, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for (codec, name) in [
        (Compression::None, "none"),
        (Compression::Gzip, "gzip"),
        (Compression::Snappy, "snappy"),
        (Compression::Lz4, "lz4"),
        (Compression::Zstd, "zstd"),
    ] {
        let mut plain = BatchBuilder::new(0, codec);
        plain.push(0, 1_700_000_000_000, None, Some(b"hello"), &[]);
        out.push((format!("{name}-one"), plain.build()?));

        let mut rich = BatchBuilder::new(0, codec)
            .producer(1000, 2, 5, false)
            .partition_leader_epoch(-1);
        for i in 0..4 {
            let key = format!("key-{i}");
            let value = format!("value-{i}-value-value-value");
            rich.push(
                i,
                1_700_000_000_000 + i64::from(i),
                Some(key.as_bytes()),
                if i == 2 { None } else { Some(value.as_bytes()) },
                &[(b"trace", Some(b"abc")), (b"empty", None)],
            );
        }
        out.push((format!("{name}-idempotent"), rich.build()?));

        let mut txn = BatchBuilder::new(0, codec).producer(2000, 0, 0, true);
        txn.push(0, 1_700_000_000_000, Some(b"k"), Some(b"v"), &[]);
        txn.push(1, 1_700_000_000_001, Some(b"k"), Some(b"w"), &[]);
        out.push((format!("{name}-transactional"), txn.build()?));
    }
    let (key, value) = engine::producer_state::marker_record(true, 4);
    let mut marker = BatchBuilder::new(0, Compression::None)
        .producer(2000, 0, -1, true)
        .control(true);
    marker.push(0, 1_700_000_000_002, Some(&key), Some(&value), &[]);
    out.push(("marker-commit".into(), marker.build()?));
    let mut two = Vec::new();
    for (_, payload) in out.iter().take(3) {
        two.extend_from_slice(payload);
    }
    out.push(("three-batches".into(), two));
    Ok(out)
}

//! Broker-side `compression.type` through real clients: for every topic
//! setting (producer, uncompressed, gzip, snappy, lz4, zstd) and every
//! librdkafka `compression.codec` (none, gzip, snappy, lz4, zstd), records
//! read back equal (keys, values, headers) and the batches a raw Fetch
//! returns carry the topic's codec (the producer's under `producer`), from
//! an idempotent producer;
//! `rill_recompressed_batches_total` counts the rewrites; AlterConfigs
//! changes the codec of the next batch; the KIP-390 levels are shown by
//! DescribeConfigs and bad ones refused with INVALID_CONFIG.

use engine::batch::{batches, BatchHeader, Compression};
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rill_tests::kafka::{client_config, create_topic, producer};
use rill_tests::raw::request;
use rill_tests::{data_dir, Broker};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

const TOPIC_TYPES: [&str; 6] = ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"];
const PRODUCER_CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
const RECORDS_PER_CASE: usize = 5;
/// Kafka's resource type of a topic, and the INVALID_CONFIG error code.
const RESOURCE_TOPIC: i8 = 2;
const INVALID_CONFIG: i16 = 40;

/// A consumed record: key, value, headers.
type Record = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

fn case_topic(topic_type: &str, codec: &str) -> String {
    format!("c-{topic_type}-{codec}")
}

/// The records of one case: keyed, compressible (librdkafka sends a batch
/// uncompressed when its codec does not shrink it), with headers.
fn case_records(topic: &str) -> Vec<Record> {
    (0..RECORDS_PER_CASE)
        .map(|i| {
            (
                Some(format!("{topic}-key-{i}").into_bytes()),
                Some(format!("{topic}-value-{i}-{}", "abc".repeat(60)).into_bytes()),
                vec![
                    ("n".to_string(), Some(i.to_string().into_bytes())),
                    ("null".to_string(), None),
                ],
            )
        })
        .collect()
}

async fn produce(producer: &FutureProducer, topic: &str, records: &[Record]) {
    let mut futures = Vec::new();
    for (key, value, headers) in records {
        let mut owned = OwnedHeaders::new();
        for (name, value) in headers {
            owned = owned.insert(Header {
                key: name,
                value: value.as_deref(),
            });
        }
        let record: FutureRecord<'_, Vec<u8>, Vec<u8>> = FutureRecord::to(topic)
            .key(key.as_ref().expect("keyed"))
            .payload(value.as_ref().expect("a value"))
            .headers(owned);
        futures.push(producer.send(record, Duration::from_secs(20)));
    }
    for f in futures {
        f.await
            .map_err(|(e, _)| e)
            .unwrap_or_else(|e| panic!("{topic}: not delivered: {e}"));
    }
}

/// Every record of partition 0 of each of `topics`, in offset order.
fn consume(bootstrap: &str, topics: &[String], expected: usize) -> BTreeMap<String, Vec<Record>> {
    let places: Vec<(&str, i32)> = topics.iter().map(|t| (t.as_str(), 0)).collect();
    let consumer = rill_tests::kafka::from_beginning(bootstrap, &places, &[]);
    let mut out: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    let mut count = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while count < expected && Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let m = message.expect("consumed without error");
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default();
        out.entry(m.topic().to_string()).or_default().push((
            m.key().map(<[u8]>::to_vec),
            m.payload().map(<[u8]>::to_vec),
            headers,
        ));
        count += 1;
    }
    assert_eq!(count, expected, "records consumed");
    out
}

/// The codec of every batch of partition 0 of `topic`, by a raw Fetch v12.
fn stored_codecs(broker: &Broker, topic: &str) -> Vec<Compression> {
    stored_headers(broker, topic)
        .iter()
        .map(|header| header.compression().expect("a known codec"))
        .collect()
}

/// The header of every batch of partition 0 of `topic`, by a raw Fetch v12.
fn stored_headers(broker: &Broker, topic: &str) -> Vec<BatchHeader> {
    let mut partition = FetchPartition::default();
    partition.partition = 0;
    partition.fetch_offset = 0;
    partition.partition_max_bytes = 1 << 20;
    let answer = rill_tests::raw::fetch_v12(broker.addr, topic, -1, partition);
    assert_eq!(answer.error_code, 0, "{topic}: fetch error");
    let records = answer.records.unwrap_or_default();
    let mut iter = batches(&records);
    let headers: Vec<BatchHeader> = iter
        .by_ref()
        .map(|item| {
            let (_, range) = item.expect("whole batches");
            engine::batch::validate_batch(&records[range], usize::MAX).expect("a valid batch")
        })
        .collect();
    assert_eq!(iter.remainder_bytes(), 0, "{topic}: whole batches");
    headers
}

/// Sum of a per-shard counter in the broker's /metrics.
fn metric_total(broker: &Broker, name: &str) -> u64 {
    broker.metric_sum(name).max(0) as u64
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    client_config(bootstrap).create().expect("admin client")
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_topic_type_and_producer_codec() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    let mut topics = Vec::new();
    for topic_type in TOPIC_TYPES {
        for codec in PRODUCER_CODECS {
            let topic = case_topic(topic_type, codec);
            create_topic(&bootstrap, &topic, 1, &[("compression.type", topic_type)]).await;
            topics.push(topic);
        }
    }
    let mut sent: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    for codec in PRODUCER_CODECS {
        // Idempotent: the sequence checks read the header fields a
        // rewrite keeps.
        let p = producer(
            &bootstrap,
            &[
                ("compression.codec", codec),
                ("acks", "all"),
                ("enable.idempotence", "true"),
            ],
        );
        for topic_type in TOPIC_TYPES {
            let topic = case_topic(topic_type, codec);
            let records = case_records(&topic);
            produce(&p, &topic, &records).await;
            sent.insert(topic, records);
        }
        p.flush(Duration::from_secs(10)).expect("flush");
    }
    let got = consume(&bootstrap, &topics, topics.len() * RECORDS_PER_CASE);
    assert_eq!(got, sent, "keys, values and headers read back");
    let mut rewritten = 0;
    for topic_type in TOPIC_TYPES {
        for codec in PRODUCER_CODECS {
            let topic = case_topic(topic_type, codec);
            let produced = Compression::from_name(codec).expect("a codec");
            let expected = Compression::from_name(topic_type).unwrap_or(produced);
            let headers = stored_headers(&broker, &topic);
            assert!(!headers.is_empty(), "{topic}: batches stored");
            assert!(
                headers.iter().all(|h| h.producer_id >= 0),
                "{topic}: idempotent batches"
            );
            let codecs: Vec<Compression> =
                headers.iter().map(|h| h.compression().unwrap()).collect();
            assert!(
                codecs.iter().all(|&c| c == expected),
                "{topic}: stored {codecs:?}, expected {expected:?}"
            );
            if expected != produced {
                rewritten += codecs.len() as u64;
            }
        }
    }
    assert_eq!(
        metric_total(&broker, "rill_recompressed_batches_total"),
        rewritten,
        "every rewritten batch counted once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_configs_changes_the_next_batch_and_levels_are_configs() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    let admin = admin(&bootstrap);
    create_topic(
        &bootstrap,
        "altered",
        1,
        &[("compression.zstd.level", "10")],
    )
    .await;
    let p = producer(&bootstrap, &[("compression.codec", "lz4"), ("acks", "all")]);
    let first = case_records("first");
    produce(&p, "altered", &first).await;
    let before = stored_codecs(&broker, "altered");
    assert!(before.iter().all(|&c| c == Compression::Lz4), "{before:?}");

    // AlterConfigs (the whole set: the level must be given again).
    let change = AlterConfig::new(ResourceSpecifier::Topic("altered"))
        .set("compression.type", "zstd")
        .set("compression.zstd.level", "10");
    for result in admin.alter_configs(&[change], &options()).await.unwrap() {
        result.expect("altered");
    }
    let second = case_records("second");
    produce(&p, "altered", &second).await;
    let after = stored_codecs(&broker, "altered");
    assert_eq!(
        after[..before.len()],
        before,
        "batches before the change kept"
    );
    assert!(
        after.len() > before.len()
            && after[before.len()..]
                .iter()
                .all(|&c| c == Compression::Zstd),
        "batches after the change rewritten: {after:?}"
    );
    let got = consume(&bootstrap, &["altered".to_string()], 2 * RECORDS_PER_CASE);
    assert_eq!(got["altered"], [first, second].concat());

    // DescribeConfigs shows the levels: the one set, and Kafka's defaults.
    let described = admin
        .describe_configs(&[ResourceSpecifier::Topic("altered")], &options())
        .await
        .unwrap();
    let resource = described[0].as_ref().expect("described");
    let value = |name: &str| {
        resource
            .get(name)
            .and_then(|e| e.value.clone())
            .unwrap_or_else(|| panic!("{name} described"))
    };
    assert_eq!(value("compression.type"), "zstd");
    assert_eq!(value("compression.zstd.level"), "10");
    assert_eq!(value("compression.gzip.level"), "-1");
    assert_eq!(value("compression.lz4.level"), "9");

    // Out-of-range levels are INVALID_CONFIG, at create and at alter.
    let bad = NewTopic::new("bad-level", 1, TopicReplication::Fixed(1))
        .set("compression.gzip.level", "10");
    let created = admin.create_topics(&[bad], &options()).await.unwrap();
    assert!(
        matches!(&created[0], Err((_, RDKafkaErrorCode::InvalidConfig))),
        "{created:?}"
    );
    // (rust-rdkafka drops AlterConfigs' per-resource errors: a raw request.)
    let mut bad = AlterableConfig::default();
    bad.name = StrBytes::from_static_str("compression.lz4.level");
    bad.value = Some(StrBytes::from_static_str("18"));
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = RESOURCE_TOPIC;
    resource.resource_name = StrBytes::from_static_str("altered");
    resource.configs = vec![bad];
    let mut body = AlterConfigsRequest::default();
    body.resources = vec![resource];
    let answer: AlterConfigsResponse =
        request(broker.addr, ApiKey::AlterConfigs, 1, &body).expect("AlterConfigs answered");
    assert_eq!(answer.responses[0].error_code, INVALID_CONFIG);
}

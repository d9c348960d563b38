//! Produce and consume through librdkafka against a real `rill serve`:
//! every codec, every acks level, keyed partitioning, exact read-back with
//! per-partition order; ListOffsets by time and watermarks; an oversize
//! message; acks=all refused under `min.insync.replicas`; and the three
//! fetch send paths returning identical data.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::FutureRecord;
use rdkafka::TopicPartitionList;
use rill_tests::kafka::{
    assert_delivered_as_consumed, assert_offsets_contiguous, client_config, consume_all,
    create_topic, produce_all, producer, Rec,
};
use rill_tests::{data_dir, Broker};
use std::collections::BTreeMap;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

fn keyed(prefix: &str, n: usize) -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                Some(format!("{prefix}-key-{}", i % 17).into_bytes()),
                format!("{prefix}-value-{i}-{}", "x".repeat(i % 300)).into_bytes(),
            )
        })
        .collect()
}

/// Checks that `got` holds exactly `sent`, and that within each partition the
/// values arrive in the order they were produced with strictly rising offsets.
fn assert_exact(sent: &[(Option<Vec<u8>>, Vec<u8>)], got: &[Rec]) {
    assert_eq!(got.len(), sent.len(), "record count");
    let mut by_partition: BTreeMap<i32, Vec<&Rec>> = BTreeMap::new();
    for r in got {
        by_partition.entry(r.partition).or_default().push(r);
    }
    let position: BTreeMap<&[u8], usize> = sent
        .iter()
        .enumerate()
        .map(|(i, (_, v))| (v.as_slice(), i))
        .collect();
    for (partition, records) in &by_partition {
        for pair in records.windows(2) {
            assert!(
                pair[0].offset < pair[1].offset,
                "offsets rise in partition {partition}"
            );
            let a = position[pair[0].value.as_deref().unwrap()];
            let b = position[pair[1].value.as_deref().unwrap()];
            assert!(a < b, "produce order kept in partition {partition}");
        }
    }
    let mut sent_sorted: Vec<_> = sent
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    let mut got_sorted: Vec<_> = got
        .iter()
        .map(|r| (r.key.clone(), r.value.clone()))
        .collect();
    sent_sorted.sort();
    got_sorted.sort();
    assert_eq!(sent_sorted, got_sorted);
    // The same key always lands on the same partition.
    let mut key_partition: BTreeMap<Vec<u8>, i32> = BTreeMap::new();
    for r in got {
        if let Some(k) = &r.key {
            let p = *key_partition.entry(k.clone()).or_insert(r.partition);
            assert_eq!(p, r.partition, "key {k:?} on one partition");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_and_acks_level_round_trips() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "one", 1, &[]).await;
    create_topic(&bootstrap, "three", 3, &[]).await;
    for (topic, partitions) in [("one", 1), ("three", 3)] {
        let mut sent = Vec::new();
        let (mut acknowledged, mut acknowledgements) = (Vec::new(), Vec::new());
        for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
            for acks in ["0", "1", "all"] {
                let records = keyed(&format!("{topic}-{codec}-{acks}"), 40);
                let p = producer(&bootstrap, &[("compression.codec", codec), ("acks", acks)]);
                let deliveries = produce_all(&p, topic, &records, None).await;
                if acks != "0" {
                    acknowledged.extend(records.iter().cloned());
                    acknowledgements.extend(deliveries);
                }
                rdkafka::producer::Producer::flush(&p, Duration::from_secs(10)).expect("flush");
                sent.extend(records);
            }
        }
        let got = consume_all(
            &bootstrap,
            topic,
            partitions,
            sent.len(),
            Duration::from_secs(30),
            &[],
        );
        assert_exact(&sent, &got);
        assert_delivered_as_consumed(&acknowledged, &acknowledgements, &got);
        assert_offsets_contiguous(&got);
        if partitions == 3 {
            let used: std::collections::BTreeSet<i32> = got.iter().map(|r| r.partition).collect();
            assert_eq!(used.len(), 3, "keys spread over all partitions");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_by_time_and_watermarks() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "times", 1, &[]).await;
    let p = producer(&bootstrap, &[("acks", "all"), ("linger.ms", "0")]);
    for i in 0..30i64 {
        let value = format!("v{i}");
        let record: FutureRecord<'_, (), String> = FutureRecord::to("times")
            .payload(&value)
            .timestamp(1_000_000 + i * 1_000);
        p.send(record, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .expect("sent");
    }
    let consumer: BaseConsumer = {
        let mut c = client_config(&bootstrap);
        c.set("group.id", "times");
        c.create().expect("consumer")
    };
    let (low, high) = consumer
        .fetch_watermarks("times", 0, Duration::from_secs(10))
        .expect("watermarks");
    assert_eq!((low, high), (0, 30));
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("times", 0, rdkafka::Offset::Offset(1_000_000 + 12_500))
        .expect("tpl");
    let found = consumer
        .offsets_for_times(tpl, Duration::from_secs(10))
        .expect("offsets_for_times");
    let offset = found
        .find_partition("times", 0)
        .expect("partition")
        .offset();
    assert_eq!(
        offset,
        rdkafka::Offset::Offset(13),
        "first record at or after the time"
    );
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("times", 0, rdkafka::Offset::Offset(9_000_000))
        .expect("tpl");
    let found = consumer
        .offsets_for_times(tpl, Duration::from_secs(10))
        .expect("offsets_for_times");
    assert_eq!(
        found.find_partition("times", 0).expect("p").offset(),
        rdkafka::Offset::End
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_message_is_refused_and_the_broker_stays_up() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "small", 1, &[("max.message.bytes", "10000")]).await;
    let p = producer(
        &bootstrap,
        &[("acks", "all"), ("message.max.bytes", "2000000")],
    );
    let big = vec![b'z'; 50_000];
    let record: FutureRecord<'_, (), Vec<u8>> = FutureRecord::to("small").payload(&big);
    let err = p
        .send(record, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .expect_err("refused");
    assert_eq!(
        err,
        KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)
    );
    let sent = produce_all(&p, "small", &[(None, b"fits".to_vec())], None).await;
    assert_eq!(
        sent,
        vec![(0, 0)],
        "the next message is accepted at offset 0"
    );
    assert!(broker.is_running());
}

/// A Produce frame of 300 records of 1,000 bytes (over the size read into a
/// buffer of its own), record `i` holding `i` in its first bytes: v9 naming
/// `topic`, or v13 naming it by its id when `topic_id` is given.
fn large_produce_frame(topic: &str, topic_id: Option<[u8; 16]>, correlation_id: i32) -> Vec<u8> {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut builder = engine::batch::BatchBuilder::new(0, engine::batch::Compression::None);
    for i in 0..300 {
        let value = large_value(i);
        builder.push(i, 0, None, Some(value.as_slice()), &[]);
    }
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(bytes::Bytes::from(builder.build().expect("batch")));
    let mut data = TopicProduceData::default();
    data.name = TopicName(StrBytes::from_string(topic.to_string()));
    if let Some(id) = topic_id {
        data.topic_id = uuid::Uuid::from_bytes(id);
    }
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![data];
    let version = if topic_id.is_some() { 13 } else { 9 };
    rill_tests::raw::request_frame(ApiKey::Produce, version, correlation_id, &request)
}

fn large_value(i: i32) -> Vec<u8> {
    let mut value = format!("record-{i:03}-").into_bytes();
    value.resize(1000, b'a' + (i % 26) as u8);
    value
}

/// The base offset the broker answered a Produce of `version` with (its
/// error must be 0).
fn produced_at(socket: &mut std::net::TcpStream, version: i16, correlation_id: i32) -> i64 {
    use kafka_protocol::messages::{ApiKey, ProduceResponse};
    let response: ProduceResponse =
        rill_tests::raw::read_response(socket, ApiKey::Produce, version, correlation_id)
            .expect("Produce answered");
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, 0);
    partition.base_offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_produce_arriving_in_pieces_is_stored_whole() {
    use std::io::Write;
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "pieces", 1, &[]).await;
    let mut socket = std::net::TcpStream::connect(&bootstrap).expect("connect");
    socket.set_nodelay(true).expect("nodelay");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    // In nine pieces with pauses: the broker finds the socket empty
    // between them and waits for the rest.
    let frame = large_produce_frame("pieces", None, 1);
    assert!(frame.len() > 300_000);
    for piece in frame.chunks(frame.len() / 8) {
        socket.write_all(piece).expect("piece sent");
        std::thread::sleep(Duration::from_millis(30));
    }
    assert_eq!(produced_at(&mut socket, 9, 1), 0);
    // Then in one write: all of it is in the socket when read.
    socket
        .write_all(&large_produce_frame("pieces", None, 2))
        .expect("frame sent");
    assert_eq!(produced_at(&mut socket, 9, 2), 300);
    let got = consume_all(&bootstrap, "pieces", 1, 600, Duration::from_secs(20), &[]);
    assert_eq!(got.len(), 600);
    for (n, record) in got.iter().enumerate() {
        assert_eq!(record.offset, n as i64);
        assert_eq!(
            record.value.as_deref(),
            Some(large_value(n as i32 % 300).as_slice()),
            "offset {n}"
        );
    }
    assert!(broker.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_is_refused_when_min_insync_replicas_exceeds_the_isr() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    // One broker: every partition's ISR is that broker alone.
    create_topic(&bootstrap, "guarded", 1, &[("min.insync.replicas", "2")]).await;
    // No retries, so the broker's answer reaches the test instead of a timeout.
    let all = producer(&bootstrap, &[("acks", "all"), ("retries", "0")]);
    let record: FutureRecord<'_, (), [u8]> = FutureRecord::to("guarded").payload(b"durable?");
    let err = all
        .send(record, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .expect_err("acks=all refused");
    assert_eq!(
        err,
        KafkaError::MessageProduction(RDKafkaErrorCode::NotEnoughReplicas)
    );
    // acks=1 is not guarded, and the refused write left nothing behind:
    // the accepted one is the first record of the log.
    let one = producer(&bootstrap, &[("acks", "1")]);
    let sent = produce_all(&one, "guarded", &[(None, b"written".to_vec())], None).await;
    assert_eq!(sent, vec![(0, 0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_send_paths_return_identical_data() {
    let dir = data_dir();
    let records = keyed("paths", 3_000);
    {
        let mut broker = Broker::start(RILL, dir.path(), &["--fetch-send-path", "copy"]);
        create_topic(
            &broker.bootstrap(),
            "paths",
            3,
            &[("segment.bytes", "200000")],
        )
        .await;
        let p = producer(
            &broker.bootstrap(),
            &[("acks", "all"), ("compression.codec", "lz4")],
        );
        produce_all(&p, "paths", &records, None).await;
        assert_eq!(broker.stop(), Some(0));
    }
    let mut results = Vec::new();
    for path in ["copy", "sendfile", "splice"] {
        let mut broker = Broker::start(RILL, dir.path(), &["--fetch-send-path", path]);
        let mut got = consume_all(
            &broker.bootstrap(),
            "paths",
            3,
            records.len(),
            Duration::from_secs(30),
            &[("max.partition.fetch.bytes", "100000")],
        );
        got.sort();
        assert_eq!(got.len(), records.len(), "{path} returned everything");
        results.push(got);
        assert_eq!(broker.stop(), Some(0));
    }
    assert_eq!(results[0], results[1], "copy == sendfile");
    assert_eq!(results[0], results[2], "copy == splice");
}

/// Metadata at every version rill advertises, encoded and decoded by the
/// `kafka-protocol` crate over a plain socket: the flexible versions
/// (v9 and later, v13 with its top-level error code) as well as v0, which
/// old clients still send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_answers_every_advertised_version() {
    use bytes::{Buf, BytesMut};
    use kafka_protocol::messages::{
        ApiKey, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader, TopicName,
    };
    use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
    use std::io::{Read, Write};

    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "meta-versions", 3, &[]).await;
    let mut socket = rill_tests::raw::connect(&bootstrap, Duration::from_secs(10));
    for version in 0..=13i16 {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Metadata as i16)
            .with_request_api_version(version)
            .with_correlation_id(i32::from(version) + 100)
            .with_client_id(Some(StrBytes::from_static_str("metadata-versions")));
        let mut topic = kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
        topic.name = Some(TopicName(StrBytes::from_static_str("meta-versions")));
        let request = MetadataRequest::default().with_topics(Some(vec![topic]));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, MetadataRequest::header_version(version))
            .expect("header");
        request.encode(&mut body, version).expect("body");
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        socket.write_all(&frame).expect("send");
        let mut length = [0u8; 4];
        socket.read_exact(&mut length).expect("response length");
        let mut answer = vec![0u8; i32::from_be_bytes(length) as usize];
        socket.read_exact(&mut answer).expect("response");
        let mut answer = bytes::Bytes::from(answer);
        let response_header =
            ResponseHeader::decode(&mut answer, MetadataResponse::header_version(version))
                .expect("response header");
        assert_eq!(response_header.correlation_id, i32::from(version) + 100);
        let response = MetadataResponse::decode(&mut answer, version)
            .unwrap_or_else(|e| panic!("v{version} response does not decode: {e}"));
        assert_eq!(answer.remaining(), 0, "v{version}: trailing bytes");
        assert_eq!(response.error_code, 0, "v{version}");
        assert_eq!(response.brokers.len(), 1, "v{version}");
        assert_eq!(response.topics.len(), 1, "v{version}");
        let topic = &response.topics[0];
        assert_eq!(topic.error_code, 0, "v{version}");
        assert_eq!(topic.partitions.len(), 3, "v{version}");
    }
}

/// A raw Fetch v12 of partitions 0 and 1 of `topic` from offset 0, as a
/// consumer: how long it took, and each partition's (high watermark,
/// record bytes).
fn timed_fetch(
    addr: std::net::SocketAddr,
    topic: &str,
    max_wait_ms: i32,
    min_bytes: i32,
) -> (Duration, Vec<(i64, usize)>) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut fetched = FetchTopic::default();
    fetched.topic = TopicName(StrBytes::from_string(topic.to_string()));
    fetched.partitions = (0..2)
        .map(|partition| {
            let mut asked = FetchPartition::default();
            asked.partition = partition;
            asked.partition_max_bytes = 1 << 20;
            asked
        })
        .collect();
    let mut body = FetchRequest::default();
    body.replica_id = BrokerId(-1);
    body.max_wait_ms = max_wait_ms;
    body.min_bytes = min_bytes;
    body.max_bytes = 1 << 20;
    body.session_epoch = -1;
    body.topics = vec![fetched];
    let started = std::time::Instant::now();
    let response: FetchResponse =
        rill_tests::raw::request(addr, ApiKey::Fetch, 12, &body).expect("Fetch answered");
    let elapsed = started.elapsed();
    let mut partitions: Vec<_> = response
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .map(|p| {
            assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
            let bytes = p.records.map(|r| r.len()).unwrap_or(0);
            (p.partition_index, (p.high_watermark, bytes))
        })
        .collect();
    partitions.sort_by_key(|(index, _)| *index);
    (elapsed, partitions.into_iter().map(|(_, p)| p).collect())
}

/// Appends one record to `partition` of `topic`, acks=all.
async fn produce_to(bootstrap: &str, topic: &str, partition: i32, value: &[u8]) {
    let p = producer(bootstrap, &[("acks", "all"), ("linger.ms", "0")]);
    let record: FutureRecord<'_, (), [u8]> =
        FutureRecord::to(topic).partition(partition).payload(value);
    p.send(record, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .expect("sent");
}

/// Long polls whose partitions live on two shards (`--cores 2`: partitions
/// 0 and 1 of a topic are on different shards): one wakes on an append to
/// either; one whose partitions hold `min_bytes` only together answers at
/// once; one short of `min_bytes` answers at `max_wait_ms` with what there
/// is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_across_shards() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let (bootstrap, addr) = (broker.bootstrap(), broker.addr);
    create_topic(&bootstrap, "poll", 2, &[]).await;

    let waiting = std::thread::spawn(move || timed_fetch(addr, "poll", 10_000, 1));
    tokio::time::sleep(Duration::from_millis(500)).await;
    produce_to(&bootstrap, "poll", 1, &[b'a'; 500]).await;
    let (elapsed, woken) = waiting.join().expect("fetch thread");
    assert!(
        elapsed < Duration::from_secs(8),
        "woken by the append: {elapsed:?}"
    );
    assert_eq!(woken[0], (0, 0), "partition 0 has nothing");
    assert_eq!(woken[1].0, 1, "partition 1's HW");
    let one_batch = woken[1].1;
    assert!(one_batch > 500, "partition 1's batch: {one_batch} bytes");

    produce_to(&bootstrap, "poll", 0, &[b'b'; 500]).await;
    let together = i32::try_from(one_batch + 1).expect("small");
    let (elapsed, both) = timed_fetch(addr, "poll", 10_000, together);
    assert!(
        elapsed < Duration::from_secs(5),
        "answered at once: {elapsed:?}"
    );
    assert!(
        both.iter().all(|&(hw, bytes)| hw == 1 && bytes > 500),
        "{both:?}"
    );

    let (elapsed, short) = timed_fetch(addr, "poll", 800, 1 << 20);
    assert!(elapsed >= Duration::from_millis(700), "waited: {elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(8),
        "until max_wait_ms: {elapsed:?}"
    );
    assert_eq!(short, both, "answered with what there is");
}

/// Sends `count` records to partition 0 of `topic` at once (every tenth
/// keyless, each stamped by `timestamp_of(i)`) and returns each one's
/// delivery error, None when it was written.
async fn send_burst(
    p: &rdkafka::producer::FutureProducer,
    topic: &str,
    count: usize,
    timestamp_of: impl Fn(usize) -> i64,
) -> Vec<Option<RDKafkaErrorCode>> {
    let values: Vec<String> = (0..count).map(|i| format!("v{i}")).collect();
    let keys: Vec<String> = (0..count).map(|i| format!("k{i}")).collect();
    let mut sends = Vec::new();
    for i in 0..count {
        let mut record: FutureRecord<'_, String, String> = FutureRecord::to(topic)
            .payload(&values[i])
            .partition(0)
            .timestamp(timestamp_of(i));
        if i % 10 != 0 {
            record = record.key(&keys[i]);
        }
        // Queued at once (`send` would queue only when awaited), so that
        // the records travel together.
        sends.push(p.send_result(record).map_err(|(e, _)| e).expect("queued"));
    }
    let mut out = Vec::new();
    for send in sends {
        out.push(match send.await.expect("a delivery report") {
            Ok(_) => None,
            Err((e, _)) => Some(
                e.rdkafka_error_code()
                    .expect("a broker or client error code"),
            ),
        });
    }
    out
}

/// How many of `outcomes` are each of: written, `refused` (named by the
/// broker), and refused for another record of their batch.
fn tally(
    outcomes: &[Option<RDKafkaErrorCode>],
    refused: RDKafkaErrorCode,
) -> (usize, usize, usize) {
    let count = |want: Option<RDKafkaErrorCode>| outcomes.iter().filter(|o| **o == want).count();
    let tallied = (
        count(None),
        count(Some(refused)),
        count(Some(RDKafkaErrorCode::InvalidDifferentRecord)),
    );
    assert_eq!(
        tallied.0 + tallied.1 + tallied.2,
        outcomes.len(),
        "{outcomes:?}"
    );
    tallied
}

/// KIP-467, as librdkafka's 0011-produce_batch checks it: a batch with bad
/// records is refused whole, the response names the bad ones (a keyless
/// record on a compacted topic, a timestamp past `message.timestamp.after.max.ms`),
/// and the client fails those with the broker's code and the rest with
/// `_INVALID_DIFFERENT_RECORD`; one record per batch fails only the bad.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_refused_one_by_one_are_named_in_the_produce_response() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "kv", 1, &[("cleanup.policy", "compact")]).await;
    create_topic(&bootstrap, "stamped", 1, &[]).await;
    let settings = |batch_size: &'static str| {
        [
            ("acks", "all"),
            ("enable.idempotence", "false"),
            ("retries", "0"),
            ("linger.ms", "200"),
            ("batch.size", batch_size),
        ]
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let now = |_| now_ms;
    let batched = producer(&bootstrap, &settings("1000000"));
    let outcomes = send_burst(&batched, "kv", 100, now).await;
    assert_eq!(
        tally(&outcomes, RDKafkaErrorCode::InvalidRecord),
        (0, 10, 90)
    );
    let single = producer(&bootstrap, &settings("1"));
    let outcomes = send_burst(&single, "kv", 100, now).await;
    assert_eq!(
        tally(&outcomes, RDKafkaErrorCode::InvalidRecord),
        (90, 10, 0)
    );
    let written = consume_all(&bootstrap, "kv", 1, 90, Duration::from_secs(10), &[]);
    assert_eq!(
        written.len(),
        90,
        "only the keyed records of the second round"
    );
    assert!(written.iter().all(|r| r.key.is_some()));

    // Kafka 4's default `message.timestamp.after.max.ms` is one hour: the
    // records stamped two hours ahead are named, whatever their key. (With
    // more than one named, librdkafka reports each as INVALID_RECORD; alone
    // in its batch, with the partition's INVALID_TIMESTAMP.)
    let two_hours_ms = 2 * 3_600_000;
    let ahead = |i: usize| {
        if i % 25 == 3 {
            now_ms + two_hours_ms
        } else {
            now_ms
        }
    };
    let outcomes = send_burst(&batched, "stamped", 100, ahead).await;
    assert_eq!(
        tally(&outcomes, RDKafkaErrorCode::InvalidRecord),
        (0, 4, 96)
    );
    let outcomes = send_burst(&single, "stamped", 100, ahead).await;
    assert_eq!(
        tally(&outcomes, RDKafkaErrorCode::InvalidTimestamp),
        (96, 4, 0)
    );
    // One record named: librdkafka (2.12 to 2.16) reports every record of
    // the batch with the partition's code, though the response names one.
    let one_ahead = |i: usize| {
        if i == 7 {
            now_ms + two_hours_ms
        } else {
            now_ms
        }
    };
    let outcomes = send_burst(&batched, "stamped", 20, one_ahead).await;
    assert_eq!(
        tally(&outcomes, RDKafkaErrorCode::InvalidTimestamp),
        (0, 20, 0)
    );
    // A topic that allows a day ahead takes the same records.
    let a_day_ahead = [("message.timestamp.after.max.ms", "86400000")];
    create_topic(&bootstrap, "lenient", 1, &a_day_ahead).await;
    let outcomes = send_burst(&batched, "lenient", 100, ahead).await;
    assert_eq!(
        tally(&outcomes, RDKafkaErrorCode::InvalidTimestamp),
        (100, 0, 0)
    );
}

/// Produce v13 (Kafka 4.1, KIP-516) of one record to partition 0 of the
/// topic with id `topic_id`: the answer's (topic id, error code, base
/// offset).
fn produce_by_id(
    addr: std::net::SocketAddr,
    topic_id: [u8; 16],
    value: &str,
) -> ([u8; 16], i16, i64) {
    use kafka_protocol::messages::produce_request::TopicProduceData;
    use kafka_protocol::messages::{ApiKey, ProduceResponse};
    let mut data = TopicProduceData::default();
    data.topic_id = uuid::Uuid::from_bytes(topic_id);
    let request = rill_tests::raw::one_record_produce(data, value.as_bytes());
    let response: ProduceResponse =
        rill_tests::raw::request(addr, ApiKey::Produce, 13, &request).expect("Produce v13");
    let topic = &response.responses[0];
    let partition = &topic.partition_responses[0];
    (
        *topic.topic_id.as_bytes(),
        partition.error_code,
        partition.base_offset,
    )
}

/// Produce v13 names topics by id, in the request and the answer; an id
/// the broker does not know is UNKNOWN_TOPIC_ID and creates nothing (a
/// producer holding the id of a deleted topic writes nothing into a new
/// topic of the same name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_v13_names_topics_by_id() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "by-id", 1, &[]).await;
    let id = rill_tests::raw::topic_id(broker.addr, "by-id").expect("topic id");
    assert_eq!(produce_by_id(broker.addr, id, "first"), (id, 0, 0));
    assert_eq!(produce_by_id(broker.addr, id, "second"), (id, 0, 1));
    let unknown = [9; 16];
    assert_eq!(produce_by_id(broker.addr, unknown, "nowhere").1, 100);
    let got = consume_all(&bootstrap, "by-id", 1, 2, Duration::from_secs(20), &[]);
    let values: Vec<_> = got
        .iter()
        .map(|r| r.value.clone().unwrap_or_default())
        .collect();
    assert_eq!(values, vec![b"first".to_vec(), b"second".to_vec()]);
}

/// librdkafka's large batches over several partitions are read apart as
/// they arrive, each partition's records placed in memory as they will lie
/// in its segment file, and most of their bytes go to the disk straight
/// from there (`rill_disk_uncopied_bytes_total`, against the copy into DMA
/// buffers). Every acknowledged record reads back exactly after a SIGKILL
/// and a restart, when the reads come from the files, not the batch cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_batches_reach_the_disk_without_a_copy() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--flush-policy", "fsync"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "placed", 4, &[]).await;
    let sent: Vec<(Option<Vec<u8>>, Vec<u8>)> = keyed("placed", 12_000)
        .into_iter()
        .map(|(k, mut v)| {
            v.resize(1000, b'.');
            (k, v)
        })
        .collect();
    let large_batches = [
        ("acks", "all"),
        ("linger.ms", "50"),
        ("batch.size", "1000000"),
        ("compression.type", "none"),
    ];
    let p = producer(&bootstrap, &large_batches);
    let delivered = produce_all(&p, "placed", &sent, None).await;
    drop(p);
    let written = broker.metric_sum("rill_disk_written_bytes_total");
    let uncopied = broker.metric_sum("rill_disk_uncopied_bytes_total");
    assert!(written >= 12_000_000, "{written} bytes written");
    assert!(
        uncopied * 2 > written,
        "{uncopied} of {written} bytes written without a copy"
    );
    broker.kill();
    broker.restart();
    let got = consume_all(
        &bootstrap,
        "placed",
        4,
        sent.len(),
        Duration::from_secs(30),
        &[],
    );
    assert_delivered_as_consumed(&sent, &delivered, &got);
    assert_exact(&sent, &got);
}

/// Pipelined Produce frames for one partition are each placed where they
/// will lie: the second is read before the first is appended, so it is
/// placed after the first's reservation, not at the end the log published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_large_produces_are_each_placed_in_line() {
    use std::io::Write;
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--flush-policy", "fsync"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "pipelined", 1, &[]).await;
    let mut socket = rill_tests::raw::connect(&bootstrap, Duration::from_secs(20));
    // The first append publishes the partition's hint.
    socket
        .write_all(&large_produce_frame("pipelined", None, 1))
        .expect("frame sent");
    assert_eq!(produced_at(&mut socket, 9, 1), 0);
    let before = broker.metric_sum("rill_disk_uncopied_bytes_total");
    let mut frames = large_produce_frame("pipelined", None, 2);
    frames.extend(large_produce_frame("pipelined", None, 3));
    socket.write_all(&frames).expect("frames sent");
    assert_eq!(produced_at(&mut socket, 9, 2), 300);
    assert_eq!(produced_at(&mut socket, 9, 3), 600);
    let uncopied = broker.metric_sum("rill_disk_uncopied_bytes_total") - before;
    // Each frame's ~300 KB less the blocks at its edges.
    assert!(
        uncopied > 500_000,
        "{uncopied} bytes of two pipelined frames written without a copy"
    );
    let got = consume_all(
        &bootstrap,
        "pipelined",
        1,
        900,
        Duration::from_secs(20),
        &[],
    );
    assert_large_frames_read_back(&got, 3);
}

/// Produce v13 (Kafka 4.1's clients name topics by id) is placed too: the
/// connection finds the topic's name by its id. The second frame's records
/// start off a block boundary, so only a placement by the right hint lines
/// them up with the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_produce_naming_its_topic_by_id_is_placed_by_that_id() {
    use std::io::Write;
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--flush-policy", "fsync"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "by-id", 1, &[]).await;
    let id = rill_tests::raw::topic_id(broker.addr, "by-id").expect("topic id");
    let mut socket = rill_tests::raw::connect(&bootstrap, Duration::from_secs(20));
    let mut uncopied = Vec::new();
    for (n, correlation_id) in [(0, 1), (300, 2)] {
        let frame = large_produce_frame("", Some(id), correlation_id);
        socket.write_all(&frame).expect("frame sent");
        assert_eq!(produced_at(&mut socket, 13, correlation_id), n);
        uncopied.push(broker.metric_sum("rill_disk_uncopied_bytes_total"));
    }
    assert!(
        uncopied[1] - uncopied[0] > 200_000,
        "the second frame's bytes written without a copy: {uncopied:?}"
    );
    let got = consume_all(&bootstrap, "by-id", 1, 600, Duration::from_secs(20), &[]);
    assert_large_frames_read_back(&got, 2);
}

/// `got` is `frames` [`large_produce_frame`]s' records, in order from
/// offset 0.
fn assert_large_frames_read_back(got: &[Rec], frames: usize) {
    assert_eq!(got.len(), frames * 300);
    for (n, record) in got.iter().enumerate() {
        assert_eq!(record.offset, n as i64);
        assert_eq!(
            record.value.as_deref(),
            Some(large_value(n as i32 % 300).as_slice())
        );
    }
}

//! rdkafka helpers: clients configured for tests, create topics, produce and
//! consume everything.

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::TopicPartitionList;
use std::time::{Duration, Instant};

/// A record as the tests see it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rec {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key.
    pub key: Option<Vec<u8>>,
    /// Value.
    pub value: Option<Vec<u8>>,
}

/// Base client config for `bootstrap`.
pub fn client_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("socket.timeout.ms", "10000")
        .set("message.timeout.ms", "20000");
    c
}

/// Creates a topic with the admin API and waits for the answer.
pub async fn create_topic(bootstrap: &str, name: &str, partitions: i32, configs: &[(&str, &str)]) {
    create_topic_replicated(bootstrap, name, partitions, 1, configs).await
}

/// [`create_topic`] with `replication_factor` replicas per partition.
pub async fn create_topic_replicated(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replication_factor: i32,
    configs: &[(&str, &str)],
) {
    let admin: AdminClient<DefaultClientContext> =
        client_config(bootstrap).create().expect("admin client");
    let mut topic = NewTopic::new(
        name,
        partitions,
        TopicReplication::Fixed(replication_factor),
    );
    for (k, v) in configs {
        topic = topic.set(k, v);
    }
    let results = admin
        .create_topics(
            &[topic],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("create_topics request");
    for r in results {
        r.expect("topic created");
    }
}

/// A producer with extra settings.
pub fn producer(bootstrap: &str, settings: &[(&str, &str)]) -> FutureProducer {
    let mut c = client_config(bootstrap);
    c.set("linger.ms", "5");
    for (k, v) in settings {
        c.set(*k, *v);
    }
    c.create().expect("producer")
}

/// A producer that reports a refused write at once (no retries, no
/// idempotence), so a test sees the broker's error code.
pub fn producer_without_retries(bootstrap: &str) -> FutureProducer {
    producer(
        bootstrap,
        &[
            ("acks", "all"),
            ("enable.idempotence", "false"),
            ("retries", "0"),
            ("linger.ms", "0"),
            ("message.timeout.ms", "15000"),
            ("request.timeout.ms", "10000"),
        ],
    )
}

/// Produces `(key, value)` pairs to `topic` (partition by key hash, or the
/// given partition), returning (partition, offset) of each delivery.
///
/// Every record is queued before any delivery is awaited, so they travel
/// in batches as an application's would (`FutureProducer::send` queues a
/// record only when its future is first polled: awaited one by one, that
/// is one request and one linger per record). A full queue waits for room.
pub async fn produce_all(
    producer: &FutureProducer,
    topic: &str,
    records: &[(Option<Vec<u8>>, Vec<u8>)],
    partition: Option<i32>,
) -> Vec<(i32, i64)> {
    let mut deliveries = Vec::with_capacity(records.len());
    for (key, value) in records {
        let mut record: FutureRecord<'_, Vec<u8>, Vec<u8>> = FutureRecord::to(topic).payload(value);
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(p) = partition {
            record = record.partition(p);
        }
        loop {
            match producer.send_result(record) {
                Ok(delivery) => break deliveries.push(delivery),
                Err((e, back)) if queue_full(&e) => {
                    record = back;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err((e, _)) => panic!("record not queued: {e}"),
            }
        }
    }
    let mut out = Vec::with_capacity(deliveries.len());
    for delivery in deliveries {
        let delivered = delivery
            .await
            .expect("a delivery report")
            .map_err(|(e, _)| e)
            .expect("delivered");
        out.push((delivered.partition, delivered.offset));
    }
    out
}

/// Whether librdkafka refused a record because its queue is full.
fn queue_full(e: &rdkafka::error::KafkaError) -> bool {
    e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
}

/// Whether librdkafka reports `e` about a connection it retries by itself.
fn is_transient(e: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode::{AllBrokersDown, BrokerTransportFailure};
    matches!(
        e.rdkafka_error_code(),
        Some(AllBrokersDown | BrokerTransportFailure)
    )
}

/// A consumer outside any group, assigned `places` (topic, partition) from
/// their beginning, polling fetches every 100 ms, with `settings` on top.
pub fn from_beginning(
    bootstrap: &str,
    places: &[(&str, i32)],
    settings: &[(&str, &str)],
) -> BaseConsumer {
    let mut c = client_config(bootstrap);
    c.set("group.id", "rill-tests-unused")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100");
    for (k, v) in settings {
        c.set(*k, *v);
    }
    let consumer: BaseConsumer = c.create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for (topic, partition) in places {
        tpl.add_partition_offset(topic, *partition, rdkafka::Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    consumer
}

/// Consumes every partition of `topic` from the beginning until `expected`
/// records arrived (or `timeout` passes), with an assigned (group-less) consumer.
pub fn consume_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: usize,
    timeout: Duration,
    settings: &[(&str, &str)],
) -> Vec<Rec> {
    let places: Vec<(&str, i32)> = (0..partitions).map(|p| (topic, p)).collect();
    let consumer = from_beginning(bootstrap, &places, settings);
    let mut out = Vec::new();
    let deadline = Instant::now() + timeout;
    // Connection-state events librdkafka reports and then recovers from by
    // itself (a broker just restarted); a consumer keeps polling through
    // them. Any other error fails the test.
    let mut transient = Vec::new();
    while out.len() < expected && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let _ = m.headers().map(|h| h.count());
                out.push(Rec {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(|k| k.to_vec()),
                    value: m.payload().map(|v| v.to_vec()),
                })
            }
            Some(Err(e)) if is_transient(&e) => transient.push(e.to_string()),
            Some(Err(e)) => panic!("consume error: {e}"),
            None => {}
        }
    }
    if !transient.is_empty() {
        eprintln!(
            "consume_all: {} of {expected} records; connection events: {transient:?}",
            out.len()
        );
    }
    out
}

/// Consumes every partition of `topic` from the beginning up to the high
/// watermark each has when the call starts: everything committed, however
/// many records that is (a test that stopped a broker mid-write does not
/// know how many of its unacknowledged records made it).
pub fn consume_to_end(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Vec<Rec> {
    let mut c = client_config(bootstrap);
    c.set("group.id", "rill-tests-unused")
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = c.create().expect("consumer");
    let deadline = Instant::now() + timeout;
    let mut ends = Vec::new();
    for partition in 0..partitions {
        let end = loop {
            match consumer.fetch_watermarks(topic, partition, Duration::from_secs(5)) {
                Ok((_, high)) => break high,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "watermarks of {topic}-{partition}: {e}"
                    );
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        };
        ends.push(end);
    }
    let remaining = deadline.saturating_duration_since(Instant::now());
    let got = consume_below(bootstrap, topic, &ends, remaining);
    for (partition, end) in ends.iter().enumerate() {
        let read = got
            .iter()
            .filter(|r| r.partition == partition as i32)
            .count();
        assert_eq!(read as i64, *end, "records read from {topic}-{partition}");
    }
    got
}

/// Every record of partition `p` of `topic` below `ends[p]`, from the
/// beginning, until each partition has them all or `timeout` passes.
/// Partition by partition, not a total: a partition whose high watermark
/// rose after `ends` was taken (followers catching up) must not make up
/// for one still being read.
fn consume_below(bootstrap: &str, topic: &str, ends: &[i64], timeout: Duration) -> Vec<Rec> {
    let places: Vec<(&str, i32)> = (0..ends.len() as i32).map(|p| (topic, p)).collect();
    let consumer = from_beginning(bootstrap, &places, &[]);
    let mut read = vec![0i64; ends.len()];
    let mut out = Vec::new();
    let deadline = Instant::now() + timeout;
    while read.iter().zip(ends).any(|(r, e)| r < e) && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) if m.offset() < ends[m.partition() as usize] => {
                read[m.partition() as usize] += 1;
                out.push(Rec {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(|k| k.to_vec()),
                    value: m.payload().map(|v| v.to_vec()),
                });
            }
            Some(Ok(_)) | None => {}
            Some(Err(e)) if is_transient(&e) => {}
            Some(Err(e)) => panic!("consume error: {e}"),
        }
    }
    out
}

/// Asserts what a producer was told matches what a consumer reads: every
/// acknowledged `(partition, offset)` is given once, and the consumer finds
/// the record sent with that acknowledgement at exactly that place.
/// `delivered[i]` is the acknowledgement of `sent[i]`.
pub fn assert_delivered_as_consumed(
    sent: &[(Option<Vec<u8>>, Vec<u8>)],
    delivered: &[(i32, i64)],
    consumed: &[Rec],
) {
    assert_eq!(
        sent.len(),
        delivered.len(),
        "one acknowledgement per record"
    );
    let at: std::collections::HashMap<(i32, i64), &Rec> = consumed
        .iter()
        .map(|r| ((r.partition, r.offset), r))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for ((key, value), &(partition, offset)) in sent.iter().zip(delivered) {
        assert!(offset >= 0, "an acknowledged record has an offset");
        assert!(
            seen.insert((partition, offset)),
            "{partition}/{offset} given twice"
        );
        let found = at
            .get(&(partition, offset))
            .unwrap_or_else(|| panic!("nothing consumed at {partition}/{offset}"));
        assert_eq!(
            found.value.as_ref(),
            Some(value),
            "value at {partition}/{offset}"
        );
        assert_eq!(&found.key, key, "key at {partition}/{offset}");
    }
}

/// Asserts every partition's consumed offsets run from 0 without a gap or
/// a repeat (a topic with no transactions and no compaction).
pub fn assert_offsets_contiguous(consumed: &[Rec]) {
    let mut by_partition: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
    for r in consumed {
        by_partition.entry(r.partition).or_default().push(r.offset);
    }
    for (partition, mut offsets) in by_partition {
        offsets.sort_unstable();
        let want: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, want, "partition {partition}'s offsets");
    }
}

/// AlterConfigs (legacy: the resource's whole set) of `resource` through
/// librdkafka's admin client; panics when it is refused.
pub async fn alter_configs(
    bootstrap: &str,
    resource: rdkafka::admin::ResourceSpecifier<'_>,
    configs: &[(&str, &str)],
) {
    use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        client_config(bootstrap).create().expect("admin client");
    let mut alter = AlterConfig::new(resource);
    for (key, value) in configs {
        alter = alter.set(key, value);
    }
    let results =
        (admin.alter_configs(&[alter], &AdminOptions::new()).await).expect("AlterConfigs answered");
    for result in results {
        result.expect("configs altered");
    }
}

//! Memory bounded by configuration: with a small `rill.cache.index.max.bytes`
//! and small segments, sealed segments' indexes go through the bounded
//! index cache. Every record reads back from the beginning, from offsets in
//! the middle and from timestamps (ListOffsets by time through
//! `offsets_for_times`), while `/metrics` never shows a shard's index cache
//! above its cap and shows evictions. And the broker takes no transparent
//! huge pages for its heap.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::TopicPartitionList;
use rill_tests::kafka::{client_config, consume_all, create_topic, producer};
use rill_tests::{data_dir, http_get, Broker};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TOPIC: &str = "bounded";
const PARTITIONS: i32 = 6;
const PER_PARTITION: i64 = 800;
/// Broker-wide cap: 4 KiB per shard on 2 shards, room for a few segments'
/// indexes of the dozens there are.
const CAP: i64 = 8192;

fn timestamp(i: i64) -> i64 {
    1_600_000_000_000 + i * 10
}

fn value(partition: i32, i: i64) -> String {
    format!("p{partition}-r{i}-{}", "v".repeat(150 + (i % 50) as usize))
}

/// Each shard's `(bytes, cap)` of the index cache, from `/metrics`.
fn index_cache_by_shard(broker: &Broker) -> BTreeMap<String, (i64, i64)> {
    let text = http_get(broker.admin_addr, "/metrics");
    let mut shards: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for line in text.lines() {
        let (slot, rest) = if let Some(rest) = line.strip_prefix("rill_index_cache_bytes{") {
            (0, rest)
        } else if let Some(rest) = line.strip_prefix("rill_index_cache_max_bytes{") {
            (1, rest)
        } else {
            continue;
        };
        let (labels, number) = rest.split_once("} ").expect("a sample");
        let number: i64 = number.trim().parse().expect("a number");
        let entry = shards.entry(labels.to_string()).or_default();
        if slot == 0 {
            entry.0 = number;
        } else {
            entry.1 = number;
        }
    }
    shards
}

fn assert_within_cap(broker: &Broker) {
    let shards = index_cache_by_shard(broker);
    assert_eq!(shards.len(), 2, "two shards report: {shards:?}");
    for (shard, (bytes, cap)) in &shards {
        assert_eq!(*cap, CAP / 2, "shard {shard}'s share of the cap");
        assert!(bytes <= cap, "shard {shard} holds {bytes} > {cap}");
    }
}

fn consumer(bootstrap: &str) -> BaseConsumer {
    let mut c = client_config(bootstrap);
    c.set("group.id", "bounded-unused")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .set("max.partition.fetch.bytes", "2048");
    c.create().expect("consumer")
}

/// Reads `count` records of `partition` from `offset` and checks each.
fn read_from(bootstrap: &str, partition: i32, offset: i64, count: i64) {
    let consumer = consumer(bootstrap);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, partition, rdkafka::Offset::Offset(offset))
        .expect("tpl");
    consumer.assign(&tpl).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut next = offset;
    while next < offset + count {
        assert!(
            Instant::now() < deadline,
            "partition {partition}: stuck at {next}"
        );
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                assert_eq!(m.offset(), next, "partition {partition}");
                let got = std::str::from_utf8(m.payload().expect("payload")).expect("utf8");
                assert_eq!(
                    got,
                    value(partition, next),
                    "partition {partition} offset {next}"
                );
                assert_eq!(m.timestamp().to_millis(), Some(timestamp(next)));
                next += 1;
            }
            Some(Err(e)) => panic!("consume error: {e}"),
            None => {}
        }
    }
}

/// One producer writes record `i` of each partition in order to a topic
/// nothing else writes: it must be acknowledged at offset `i`.
fn assert_delivered_at(
    delivery: rdkafka::producer::future_producer::OwnedDeliveryResult,
    partition: i32,
    i: i64,
) {
    let delivery = delivery.map_err(|(e, _)| e).expect("delivered");
    assert_eq!((delivery.partition, delivery.offset), (partition, i));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealed_indexes_stay_within_the_cache_cap_and_every_record_reads_back() {
    let dir = data_dir();
    let config = dir.path().join("rill.toml");
    std::fs::write(
        &config,
        format!("\"rill.cache.index.max.bytes\" = {CAP}\n\"rill.batch_cache_bytes\" = 0\n"),
    )
    .expect("config");
    let config = config.to_string_lossy().to_string();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2", "--config", &config]);
    let bootstrap = broker.bootstrap();
    create_topic(
        &bootstrap,
        TOPIC,
        PARTITIONS,
        &[("segment.bytes", "16384"), ("index.interval.bytes", "512")],
    )
    .await;
    let p = producer(
        &bootstrap,
        // Batches of a few records: many batches, and index entries, per segment.
        &[
            ("acks", "all"),
            ("linger.ms", "2"),
            ("batch.size", "1000"),
            ("enable.idempotence", "true"),
        ],
    );
    // Enqueued at once (send_result), awaited in groups: batches of several
    // records per partition.
    let mut pending = Vec::new();
    for i in 0..PER_PARTITION {
        for partition in 0..PARTITIONS {
            let v = value(partition, i);
            let record: FutureRecord<'_, (), String> = FutureRecord::to(TOPIC)
                .partition(partition)
                .payload(&v)
                .timestamp(timestamp(i));
            let delivery = p.send_result(record).map_err(|(e, _)| e).expect("enqueued");
            pending.push((partition, i, delivery));
        }
        if i % 100 == 99 {
            for (partition, i, delivery) in pending.drain(..) {
                assert_delivered_at(delivery.await.expect("not cancelled"), partition, i);
            }
        }
    }
    for (partition, i, delivery) in pending.drain(..) {
        assert_delivered_at(delivery.await.expect("not cancelled"), partition, i);
    }
    rdkafka::producer::Producer::flush(&p, Duration::from_secs(30)).expect("flush");
    let segments = std::fs::read_dir(dir.path())
        .expect("data dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(TOPIC))
        .flat_map(|e| std::fs::read_dir(e.path()).expect("partition dir"))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .count();
    assert!(segments > 40, "many segments rolled: {segments}");
    assert_within_cap(&broker);

    // From the beginning: every record of every partition.
    let got = consume_all(
        &bootstrap,
        TOPIC,
        PARTITIONS,
        (PER_PARTITION * PARTITIONS as i64) as usize,
        Duration::from_secs(60),
        &[("max.partition.fetch.bytes", "2048")],
    );
    assert_eq!(got.len() as i64, PER_PARTITION * PARTITIONS as i64);
    for r in &got {
        let v = std::str::from_utf8(r.value.as_deref().expect("value")).expect("utf8");
        assert_eq!(v, value(r.partition, r.offset));
    }
    assert_within_cap(&broker);

    // From the middle, by offset.
    for partition in 0..PARTITIONS {
        read_from(&bootstrap, partition, 137 + partition as i64 * 41, 40);
        assert_within_cap(&broker);
    }

    // From the middle, by timestamp: an exact one, one between two records,
    // one before everything, one after everything.
    let c = consumer(&bootstrap);
    for partition in 0..PARTITIONS {
        for (target, want) in [
            (timestamp(250), Some(250)),
            (timestamp(377) + 5, Some(378)),
            (timestamp(3 + partition as i64), Some(3 + partition as i64)),
            (timestamp(0) - 1_000, Some(0)),
            (timestamp(PER_PARTITION) + 1, None),
        ] {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(TOPIC, partition, rdkafka::Offset::Offset(target))
                .expect("tpl");
            let found = c
                .offsets_for_times(tpl, Duration::from_secs(10))
                .expect("offsets_for_times");
            let offset = found
                .find_partition(TOPIC, partition)
                .expect("partition")
                .offset();
            match want {
                Some(want) => {
                    assert_eq!(
                        offset,
                        rdkafka::Offset::Offset(want),
                        "partition {partition} time {target}"
                    );
                    read_from(&bootstrap, partition, want, 20);
                }
                None => assert_eq!(
                    offset,
                    rdkafka::Offset::End,
                    "partition {partition} past the end"
                ),
            }
            assert_within_cap(&broker);
        }
    }
    let cache_lines: Vec<String> = http_get(broker.admin_addr, "/metrics")
        .lines()
        .filter(|l| l.starts_with("rill_index_cache"))
        .map(str::to_string)
        .collect();
    assert!(
        broker.metric_sum("rill_index_cache_evictions_total") > 0,
        "the small cap evicted: {cache_lines:#?}"
    );
    assert!(broker.metric_sum("rill_index_cache_misses_total") > 0);
    assert_eq!(broker.metric_sum("rill_index_cache_rebuilds_total"), 0);
}

/// `rill.cache.batch.max.bytes` caps the batch cache for the whole broker
/// (split across the shards) and `/metrics` shows it; a connection's read
/// buffer is counted while it is open and given back when it closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_cache_and_read_buffers_show_on_metrics_within_their_caps() {
    // 4 MiB a shard: larger than any group-commit round of this load (a
    // round's chunk bigger than the shard's share is not cached at all).
    const BATCH_CAP: i64 = 8 << 20;
    let dir = data_dir();
    let config = dir.path().join("rill.toml");
    std::fs::write(
        &config,
        format!("\"rill.cache.batch.max.bytes\" = {BATCH_CAP}\n"),
    )
    .expect("config");
    let config = config.to_string_lossy().to_string();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2", "--config", &config]);
    assert_eq!(broker.metric_sum("rill_batch_cache_max_bytes"), BATCH_CAP);
    let idle_buffers = broker.metric_sum("rill_connection_read_buffer_bytes");
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "cached", 4, &[]).await;
    let p = producer(&bootstrap, &[("acks", "all"), ("linger.ms", "5")]);
    // 24 MiB in all, three times the cap.
    let payload = "c".repeat(1024);
    let mut pending = Vec::new();
    for i in 0..24 * 1024 {
        let record: FutureRecord<'_, (), String> = FutureRecord::to("cached")
            .partition(i % 4)
            .payload(&payload);
        pending.push(p.send_result(record).map_err(|(e, _)| e).expect("enqueued"));
    }
    for delivery in pending {
        delivery
            .await
            .expect("not cancelled")
            .map_err(|(e, _)| e)
            .expect("delivered");
    }
    let cached = broker.metric_sum("rill_batch_cache_bytes");
    assert!(
        cached > 0 && cached <= BATCH_CAP,
        "batch cache {cached} within (0, {BATCH_CAP}]"
    );
    let open_buffers = broker.metric_sum("rill_connection_read_buffer_bytes");
    assert!(
        open_buffers > idle_buffers,
        "the producer's connections hold read buffers: {open_buffers} > {idle_buffers}"
    );
    drop(p);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = broker.metric_sum("rill_connection_read_buffer_bytes");
        if now <= idle_buffers {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "read buffers given back after the producer left: {now} > {idle_buffers}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// rill turns transparent huge pages off for itself (PR_SET_THP_DISABLE):
/// request frames are allocated and freed at the produce rate, and each
/// fresh huge page is a 2 MiB zeroing fault (docs/benchmarks/per-request-costs.md).
#[test]
fn the_broker_takes_no_transparent_huge_pages() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let pid = broker.pid().expect("the broker runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    // `THP_enabled` is in /proc/PID/status since Linux 5.0.
    let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) else {
        rill_tests::skipped("this kernel's /proc/PID/status has no THP_enabled");
        return;
    };
    assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
}

//! The load that found the broker's heap corruption (issue #29), at CI size:
//! a large acks=all produce to an 8-partition topic, a consumer reading it
//! all, then rounds of rate-limited acks=all produce (`linger.ms=1`), each
//! round to a new topic that Metadata auto-creates.
//!
//! Before the fix, the broker died of SIGSEGV within a few rounds: replies
//! crossing shards woke their tasks from another thread, and glommio 0.9.0
//! could free a task while such a wake was queued (see
//! `engine/tests/foreign_wakes.rs`, which hits that race directly, and
//! third_party/README.md). Here the broker must stay up and every
//! acknowledged record must read back, each exactly once.
//! `.ci/asan.sh` runs this test against a broker built with
//! AddressSanitizer.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rill_tests::kafka::{consume_all, create_topic, producer};
use rill_tests::{data_dir, Broker};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Records of the first, unpaced produce.
const BULK_RECORDS: usize = 40_000;
/// Rounds of paced produce, each to a new auto-created topic.
const ROUNDS: usize = 6;
/// Records per round and their rate: 2 s per round.
const ROUND_RECORDS: usize = 16_000;
const ROUND_RATE_PER_S: f64 = 8_000.0;

fn value(topic: &str, i: usize) -> Vec<u8> {
    let mut v = format!("{topic}-{i:08}-").into_bytes();
    v.resize(1024, b'v');
    v
}

/// Produces `count` records to `topic` at `rate_per_s` (unpaced when
/// `None`), and returns the offsets of those acknowledged, per partition.
async fn produce_paced(
    producer: &FutureProducer,
    topic: &str,
    count: usize,
    rate_per_s: Option<f64>,
) -> BTreeSet<(i32, i64, usize)> {
    let start = Instant::now();
    let mut pending = Vec::with_capacity(count);
    for i in 0..count {
        if let Some(rate) = rate_per_s {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                tokio::time::sleep(wait).await;
            }
        }
        let payload = value(topic, i);
        let mut record: FutureRecord<'_, (), Vec<u8>> = FutureRecord::to(topic).payload(&payload);
        // Queued now (the delivery future owns nothing of `record`); a full
        // queue is waited out.
        let delivery = loop {
            match producer.send_result(record) {
                Ok(delivery) => break delivery,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => panic!("record {i} of {topic} not queued: {e}"),
            }
        };
        pending.push((i, delivery));
    }
    let mut acked = BTreeSet::new();
    for (i, delivery) in pending {
        let done = delivery
            .await
            .expect("the producer lives")
            .unwrap_or_else(|(e, _)| panic!("record {i} of {topic} not acknowledged: {e}"));
        assert!(
            acked.insert((done.partition, done.offset, i)),
            "offset given twice"
        );
    }
    acked
}

/// Reads `topic` back and checks it holds exactly the acknowledged records:
/// each at the offset it was acknowledged with, none twice.
fn assert_reads_back(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    acked: &BTreeSet<(i32, i64, usize)>,
) {
    let got = consume_all(
        &broker.bootstrap(),
        topic,
        partitions,
        acked.len(),
        Duration::from_secs(60),
        &[],
    );
    let index: BTreeMap<(i32, i64), usize> = acked.iter().map(|&(p, o, i)| ((p, o), i)).collect();
    let read: BTreeSet<(i32, i64, usize)> = got
        .iter()
        .map(|r| {
            let v = r.value.as_deref().expect("a value");
            let i = *index
                .get(&(r.partition, r.offset))
                .unwrap_or_else(|| panic!("{topic}: offset {} was never acknowledged", r.offset));
            assert_eq!(v, value(topic, i).as_slice(), "{topic}: record {i} intact");
            (r.partition, r.offset, i)
        })
        .collect();
    assert_eq!(got.len(), read.len(), "{topic}: no record read twice");
    assert_eq!(
        &read, acked,
        "{topic}: every acknowledged record reads back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_produce_to_new_topics_after_a_bulk_load_keeps_the_broker_up() {
    let dir = data_dir();
    // Two shards, so replies cross cores as on any multi-core host.
    let mut broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "peer", 8, &[]).await;
    let bulk = producer(&bootstrap, &[("acks", "all")]);
    let acked = produce_paced(&bulk, "peer", BULK_RECORDS, None).await;
    assert_reads_back(&broker, "peer", 8, &acked);

    for round in 0..ROUNDS {
        let topic = format!("churn-{round}");
        let paced = producer(&bootstrap, &[("acks", "all"), ("linger.ms", "1")]);
        let acked = produce_paced(&paced, &topic, ROUND_RECORDS, Some(ROUND_RATE_PER_S)).await;
        assert!(
            broker.is_running(),
            "the broker died in round {round}:\n{}",
            broker.log()
        );
        assert_reads_back(&broker, &topic, 1, &acked);
    }
    assert!(broker.is_running(), "the broker died:\n{}", broker.log());
    assert_eq!(broker.stop_with(libc::SIGTERM), Some(0), "a clean stop");
}

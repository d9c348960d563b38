//! A full data disk never stops the broker (issue #31 point 1): a single
//! `rill` whose data dir — metadata log included — is a small ext4 file
//! system (a loop mount: root only; skipped with a message elsewhere),
//! with the default free-space reserve, filled by several producers at
//! once.
//!
//! What must hold once the disk is full: the broker stays up; produce gets
//! KAFKA_STORAGE_ERROR; every acknowledged record reads back; offsets
//! commit (`__consumer_offsets` writes below the data reserve); a topic can
//! be created and another deleted (the metadata log has its own reserve);
//! and produce resumes by itself once the deletion freed space.

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;
use rill_tests::small_fs::SmallFs;
use rill_tests::Broker;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Each record's value: `producer:number:`, padded to this many bytes.
const VALUE_BYTES: usize = 16 << 10;

/// Records each producer sends at once.
const IN_FLIGHT: u32 = 8;

/// Partitions of the filled topic.
const PARTITIONS: i32 = 3;

/// What a producer saw: acknowledged values' (producer, number), and
/// whether it met a refusal (a KAFKA_STORAGE_ERROR: anything else fails).
async fn fill(producer: FutureProducer, id: u32, topic: String, keyed: bool) -> Vec<(u32, u32)> {
    let mut acknowledged = Vec::new();
    let started = Instant::now();
    for round in 0.. {
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "producer {id}: {} acknowledged and no refusal in 40 s",
            acknowledged.len()
        );
        let numbers = round * IN_FLIGHT..(round + 1) * IN_FLIGHT;
        let records: Vec<(u32, String, Vec<u8>)> = numbers
            .map(|number| (number, format!("{id}:{number}"), value_of(id, number)))
            .collect();
        let mut pending = Vec::new();
        for (number, key, value) in &records {
            let mut record: FutureRecord<'_, String, Vec<u8>> = FutureRecord::to(&topic)
                .payload(value)
                .partition((id + number) as i32 % PARTITIONS);
            if keyed {
                record = record.key(key);
            }
            pending.push((*number, producer.send(record, Duration::from_secs(15))));
        }
        let mut refused = false;
        for (number, delivery) in pending {
            match delivery.await {
                Ok(_) => acknowledged.push((id, number)),
                Err((e, _)) => {
                    assert!(is_storage_error(&e), "producer {id}: refused with {e}");
                    refused = true;
                }
            }
        }
        if refused {
            break;
        }
    }
    acknowledged
}

fn value_of(producer: u32, number: u32) -> Vec<u8> {
    let mut value = format!("{producer}:{number}:").into_bytes();
    value.resize(VALUE_BYTES, b'.');
    value
}

fn id_of(value: &[u8]) -> (u32, u32) {
    let text = String::from_utf8_lossy(&value[..32.min(value.len())]).to_string();
    let mut parts = text.split(':');
    let mut next = || {
        parts
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a numbered value")
    };
    (next(), next())
}

fn is_storage_error(e: &KafkaError) -> bool {
    e.rdkafka_error_code() == Some(RDKafkaErrorCode::KafkaStorageError)
}

/// Reads `topic` back and checks every acknowledged record is there.
fn assert_readable(bootstrap: &str, topic: &str, acknowledged: &[(u32, u32)]) {
    let read: std::collections::HashSet<(u32, u32)> = rill_tests::kafka::consume_all(
        bootstrap,
        topic,
        PARTITIONS,
        acknowledged.len(),
        Duration::from_secs(30),
        &[],
    )
    .into_iter()
    .map(|r| id_of(&r.value.expect("a value")))
    .collect();
    for id in acknowledged {
        assert!(read.contains(id), "acknowledged {id:?} not readable");
    }
}

/// Commits an offset for each partition of `topic` in group `group` and
/// reads it back.
fn commit_offsets(bootstrap: &str, group: &str, topic: &str, offset: i64) {
    let mut config = rill_tests::kafka::client_config(bootstrap);
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().expect("consumer");
    let mut offsets = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        offsets
            .add_partition_offset(topic, p, rdkafka::Offset::Offset(offset))
            .expect("partition");
    }
    consumer
        .commit(&offsets, CommitMode::Sync)
        .expect("offsets commit on a full disk");
    let committed = consumer
        .committed_offsets(offsets.clone(), Duration::from_secs(10))
        .expect("committed offsets");
    for element in committed.elements() {
        assert_eq!(element.offset(), rdkafka::Offset::Offset(offset));
    }
}

/// Fills a `size_mib` MiB data disk with `producers` producers into a
/// topic of `configs`, then checks the rules of the module doc.
fn full_disk(size_mib: u64, producers: u32, configs: &[(&str, &str)]) {
    let fs = match SmallFs::mount(size_mib) {
        Ok(fs) => fs,
        Err(why) => {
            rill_tests::skipped(&format!("no small file system here ({why})"));
            return;
        }
    };
    let log_dir = rill_tests::data_dir();
    let mut broker = Broker::start_logging_to(RILL, &fs.dir("data"), log_dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let keyed = configs.contains(&("cleanup.policy", "compact"));
    // A topic holding a few MiB, deleted later to free space.
    runtime.block_on(rill_tests::kafka::create_topic(&bootstrap, "spare", 1, &[]));
    let spare = rill_tests::kafka::producer_without_retries(&bootstrap);
    let spare_records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..(size_mib as u32 * 4))
        .map(|n| (None, value_of(99, n)))
        .collect();
    runtime.block_on(rill_tests::kafka::produce_all(
        &spare,
        "spare",
        &spare_records,
        Some(0),
    ));
    runtime.block_on(rill_tests::kafka::create_topic(
        &bootstrap, "full", PARTITIONS, configs,
    ));
    commit_offsets(&bootstrap, "readers", "full", 0);

    // Fill: every producer writes until it is refused.
    let tasks: Vec<_> = (0..producers)
        .map(|id| {
            let producer = rill_tests::kafka::producer_without_retries(&bootstrap);
            runtime.spawn(fill(producer, id, "full".to_string(), keyed))
        })
        .collect();
    let mut acknowledged = Vec::new();
    for task in tasks {
        acknowledged.extend(runtime.block_on(task).expect("producer task"));
    }
    assert!(broker.is_running(), "broker stopped:\n{}", broker.log());
    assert!(!acknowledged.is_empty());

    // On the full disk: reads, offset commits, topic creation and deletion.
    assert_readable(&bootstrap, "full", &acknowledged);
    commit_offsets(&bootstrap, "readers", "full", 1);
    runtime.block_on(rill_tests::kafka::create_topic(
        &bootstrap,
        "created",
        1,
        &[],
    ));
    let admin: AdminClient<DefaultClientContext> = rill_tests::kafka::client_config(&bootstrap)
        .create()
        .expect("admin");
    for result in runtime
        .block_on(admin.delete_topics(&["spare"], &AdminOptions::new()))
        .expect("delete_topics")
    {
        result.expect("spare deleted");
    }

    // The deletion freed space: produce resumes by itself.
    let producer = rill_tests::kafka::producer_without_retries(&bootstrap);
    let resumed = Instant::now();
    let mut number = 1_000_000;
    loop {
        let value = value_of(0, number);
        let record: FutureRecord<'_, String, Vec<u8>> =
            FutureRecord::to("full").payload(&value).partition(0);
        let key = format!("0:{number}");
        let record = if keyed { record.key(&key) } else { record };
        match runtime.block_on(producer.send(record, Duration::from_secs(15))) {
            Ok(_) => {
                acknowledged.push((0, number));
                break;
            }
            Err((e, _)) => assert!(is_storage_error(&e), "refused with {e}"),
        }
        number += 1;
        assert!(
            resumed.elapsed() < Duration::from_secs(20),
            "produce did not resume within 20 s of the deletion ({} bytes free):\n{}",
            fs.free_bytes(),
            broker.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_readable(&bootstrap, "full", &acknowledged);
    assert!(broker.is_running(), "broker stopped:\n{}", broker.log());
    let log = broker.log();
    assert!(
        !log.contains("partition taken offline"),
        "a write met ENOSPC:\n{log}"
    );
    broker.stop();
}

#[test]
fn one_producer_fills_a_64_mib_disk() {
    full_disk(64, 1, &[]);
}

#[test]
fn four_producers_fill_a_64_mib_disk() {
    full_disk(64, 4, &[]);
}

#[test]
fn sixteen_producers_fill_a_128_mib_disk() {
    full_disk(128, 16, &[]);
}

#[test]
fn a_segment_larger_than_the_disk_fills_it() {
    full_disk(64, 4, &[("segment.bytes", "1073741824")]);
}

#[test]
fn the_cleaner_runs_while_the_disk_fills() {
    full_disk(
        64,
        4,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "1048576"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
}

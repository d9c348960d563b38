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
//!
//! The same with three brokers whose disks fill together (RF 3,
//! `min.insync.replicas=2`): no broker stops, refusals are
//! KAFKA_STORAGE_ERROR, NOT_ENOUGH_REPLICAS or a timeout (acks=all waiting
//! on followers that cannot write), nothing acknowledged is lost, and
//! produce resumes once the deletion freed space on every disk.

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

/// How long a producer may fill before its first refusal.
const FILL_LIMIT: Duration = Duration::from_secs(120);

/// What a producer saw: acknowledged values' (producer, number), until it
/// met a refusal (a KAFKA_STORAGE_ERROR: anything else fails).
async fn fill(producer: FutureProducer, id: u32, topic: String, keyed: bool) -> Vec<(u32, u32)> {
    fill_until(producer, id, topic, keyed, is_storage_error).await
}

/// [`fill`] with the refusals `refusal` accepts.
async fn fill_until(
    producer: FutureProducer,
    id: u32,
    topic: String,
    keyed: bool,
    refusal: fn(&KafkaError) -> bool,
) -> Vec<(u32, u32)> {
    let mut acknowledged = Vec::new();
    let started = Instant::now();
    for round in 0.. {
        // A bound against a broker that never refuses, not a speed check:
        // three brokers on a loaded 2-core host fill 128 MiB in 30–50 s.
        assert!(
            started.elapsed() < FILL_LIMIT,
            "producer {id}: {} acknowledged and no refusal in {FILL_LIMIT:?}",
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
                    assert!(refusal(&e), "producer {id}: refused with {e}");
                    refused = true;
                }
            }
        }
        if refused {
            break;
        }
    }
    eprintln!(
        "producer {id}: {} acknowledged, refused after {:?}",
        acknowledged.len(),
        started.elapsed()
    );
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

/// Reads `topic` back to its end and checks every acknowledged record is
/// there. To the end, not to a count: a send that timed out may still be
/// written, and a read that stops at the acknowledged count would miss
/// acknowledged records behind it.
fn assert_readable(bootstrap: &str, topic: &str, acknowledged: &[(u32, u32)]) {
    let read: std::collections::HashSet<(u32, u32)> =
        rill_tests::kafka::consume_to_end(bootstrap, topic, PARTITIONS, Duration::from_secs(30))
            .into_iter()
            .map(|r| id_of(&r.value.expect("a value")))
            .collect();
    for id in acknowledged {
        assert!(read.contains(id), "acknowledged {id:?} not readable");
    }
}

/// What must go on with the disk full: reads, offset commits, topic
/// creation, and the deletion of `spare` (which frees space).
fn on_the_full_disk(
    runtime: &tokio::runtime::Runtime,
    bootstrap: &str,
    acknowledged: &[(u32, u32)],
) {
    assert_readable(bootstrap, "full", acknowledged);
    commit_offsets(bootstrap, "readers", "full", 1);
    runtime.block_on(rill_tests::kafka::create_topic(
        bootstrap,
        "created",
        1,
        &[],
    ));
    let admin: AdminClient<DefaultClientContext> = rill_tests::kafka::client_config(bootstrap)
        .create()
        .expect("admin");
    for result in runtime
        .block_on(admin.delete_topics(&["spare"], &AdminOptions::new()))
        .expect("delete_topics")
    {
        result.expect("spare deleted");
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
    with_coordinator("offsets commit on a full disk", || {
        consumer.commit(&offsets, CommitMode::Sync)
    });
    let committed = with_coordinator("committed offsets", || {
        consumer.committed_offsets(offsets.clone(), Duration::from_secs(10))
    });
    for element in committed.elements() {
        assert_eq!(element.offset(), rdkafka::Offset::Offset(offset));
    }
}

/// `request`'s result, asked again while the group's coordinator is moving
/// or still loading its partition (a new cluster elects the leaders of
/// `__consumer_offsets` and loads them on the first FindCoordinator, which
/// takes seconds on a loaded host): what a Kafka application does with
/// these retriable errors. Any other error fails, and so does a coordinator
/// not ready within 30 s.
fn with_coordinator<T>(what: &str, mut request: impl FnMut() -> Result<T, KafkaError>) -> T {
    let started = Instant::now();
    loop {
        let error = match request() {
            Ok(answer) => return answer,
            Err(e) => e,
        };
        let retriable = matches!(
            error.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::CoordinatorLoadInProgress
                    | RDKafkaErrorCode::NotCoordinator
                    | RDKafkaErrorCode::CoordinatorNotAvailable
            )
        );
        assert!(retriable, "{what}: {error}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what}: the coordinator was not ready within 30 s: {error}"
        );
        std::thread::sleep(Duration::from_millis(200));
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
    on_the_full_disk(&runtime, &bootstrap, &acknowledged);

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
fn one_producer_fills_a_128_mib_disk() {
    full_disk(128, 1, &[]);
}

#[test]
fn four_producers_fill_a_128_mib_disk() {
    full_disk(128, 4, &[]);
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

/// A replicated partition on full disks refuses with KAFKA_STORAGE_ERROR
/// (the leader's disk), NOT_ENOUGH_REPLICAS (the followers' disks refused
/// their copies and they left the ISR), or times out (acks=all waiting on
/// followers that cannot write, before they leave the ISR): the broker's
/// REQUEST_TIMED_OUT, or the client's own message timeout for a record
/// queued behind requests that were waiting so.
fn is_full_cluster_refusal(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::KafkaStorageError
                | RDKafkaErrorCode::NotEnoughReplicas
                | RDKafkaErrorCode::NotEnoughReplicasAfterAppend
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::MessageTimedOut
        )
    )
}

/// Three brokers (each a voter) with their data dirs on three small file
/// systems; logs on the main disk.
fn cluster_on(disks: &[SmallFs], log_dirs: &[tempfile::TempDir]) -> Vec<Broker> {
    let voters: Vec<String> = (1..=disks.len())
        .map(|id| format!("{id}@127.0.0.1:{}", rill_tests::free_port()))
        .collect();
    let voters = voters.join(",");
    (disks.iter().zip(log_dirs))
        .enumerate()
        .map(|(i, (fs, log_dir))| {
            let id = (i + 1).to_string();
            let args = [
                "--cores",
                "1",
                "--node-id",
                &id,
                "--controller-quorum-voters",
                &voters,
            ];
            Broker::start_logging_to(RILL, &fs.dir("data"), log_dir.path(), &args)
        })
        .collect()
}

#[test]
fn three_brokers_whose_disks_fill_together_stay_up_and_resume() {
    let mut disks = Vec::new();
    for _ in 0..3 {
        match SmallFs::mount(128) {
            Ok(fs) => disks.push(fs),
            Err(why) => return rill_tests::skipped(&format!("no small file system here ({why})")),
        }
    }
    let log_dirs: Vec<_> = (0..3).map(|_| rill_tests::data_dir()).collect();
    let mut brokers = cluster_on(&disks, &log_dirs);
    for broker in &brokers {
        rill_tests::cluster::wait_for(
            "every broker to list all three",
            Duration::from_secs(60),
            || {
                let (_, ids) = rill_tests::cluster::describe_cluster(broker).ok()?;
                (ids == [1, 2, 3]).then_some(())
            },
        );
    }
    let bootstrap: String = (brokers.iter().map(Broker::bootstrap))
        .collect::<Vec<_>>()
        .join(",");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let replicated = [("min.insync.replicas", "2")];
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "spare",
        1,
        3,
        &replicated,
    ));
    let spare = rill_tests::kafka::producer_without_retries(&bootstrap);
    let spare_records: Vec<(Option<Vec<u8>>, Vec<u8>)> =
        (0..512).map(|n| (None, value_of(99, n))).collect();
    runtime.block_on(rill_tests::kafka::produce_all(
        &spare,
        "spare",
        &spare_records,
        Some(0),
    ));
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "full",
        PARTITIONS,
        3,
        &replicated,
    ));
    commit_offsets(&bootstrap, "readers", "full", 0);
    let tasks: Vec<_> = (0..4)
        .map(|id| {
            let producer = rill_tests::kafka::producer_without_retries(&bootstrap);
            runtime.spawn(fill_until(
                producer,
                id,
                "full".into(),
                false,
                is_full_cluster_refusal,
            ))
        })
        .collect();
    let mut acknowledged = Vec::new();
    for task in tasks {
        acknowledged.extend(runtime.block_on(task).expect("producer task"));
    }
    for broker in brokers.iter_mut() {
        assert!(broker.is_running(), "a broker stopped:\n{}", broker.log());
    }
    assert!(!acknowledged.is_empty());
    on_the_full_disk(&runtime, &bootstrap, &acknowledged);
    let number = resume_after_deletion(&runtime, &bootstrap, &disks);
    acknowledged.push((0, number));
    assert_readable(&bootstrap, "full", &acknowledged);
    for broker in brokers.iter_mut() {
        assert!(broker.is_running(), "a broker stopped:\n{}", broker.log());
    }
}

/// Produces one record at a time to partition 0 of `full` until one is
/// acknowledged (within 60 s: the followers catch up and rejoin the ISR);
/// its number.
fn resume_after_deletion(
    runtime: &tokio::runtime::Runtime,
    bootstrap: &str,
    disks: &[SmallFs],
) -> u32 {
    let producer = rill_tests::kafka::producer_without_retries(bootstrap);
    let resumed = Instant::now();
    for number in 1_000_000.. {
        let value = value_of(0, number);
        let record: FutureRecord<'_, String, Vec<u8>> =
            FutureRecord::to("full").payload(&value).partition(0);
        match runtime.block_on(producer.send(record, Duration::from_secs(15))) {
            Ok(_) => return number,
            Err((e, _)) => assert!(is_full_cluster_refusal(&e), "refused with {e}"),
        }
        let free: Vec<u64> = disks.iter().map(SmallFs::free_bytes).collect();
        assert!(
            resumed.elapsed() < Duration::from_secs(60),
            "produce did not resume within 60 s of the deletion (free bytes {free:?})"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    unreachable!("the loop returns or fails")
}

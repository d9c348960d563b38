//! Disk faults on a real `rill`: a full disk, on a data dir that is a small
//! ext4 file system (a loop mount: root only; skipped with a message
//! elsewhere); a failing disk (EIO or EROFS on one partition's writes,
//! injected); transient errors (EMFILE, ENOMEM, EAGAIN, injected), retried
//! with the partition online (docs/disk-errors.md); log output that cannot
//! be written.
//!
//! What must hold: producers get KAFKA_STORAGE_ERROR promptly (no hang),
//! reads keep working, nothing acknowledged is lost, and produce resumes
//! by itself once space returns — with the free-space reserve
//! (`rill.storage.min.free.bytes`) refusing appends before the disk is
//! full, and without it (the write itself meets ENOSPC).

use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rill_tests::small_fs::SmallFs;
use rill_tests::Broker;
use std::path::Path;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Each record's value: its number, padded to this many bytes.
const VALUE_BYTES: usize = 16 << 10;

/// Records sent at once while filling the disk.
const IN_FLIGHT: u32 = 16;

const MIB: u64 = 1 << 20;

/// A broker whose data dir is on `fs`; its metadata log stays on the
/// main disk (`metadata.log.dir`): a failed metadata write stops a broker
/// (as in Kafka), so a data disk that really fills must not hold it.
fn broker_on(fs: &SmallFs, config_dir: &Path, min_free_bytes: u64) -> Broker {
    let config = config_dir.join("rill.toml");
    std::fs::write(
        &config,
        format!(
            "\"rill.storage.min.free.bytes\" = {min_free_bytes}\n\
             \"rill.preallocate_bytes\" = {}\n\
             \"log.segment.bytes\" = {}\n\
             \"metadata.log.dir\" = {:?}\n",
            MIB,
            2 * MIB,
            config_dir.join("metadata").to_string_lossy()
        ),
    )
    .expect("config");
    let config = config.to_string_lossy().to_string();
    Broker::start_logging_to(RILL, &fs.dir("data"), config_dir, &["--config", &config])
}

use rill_tests::kafka::producer_without_retries as producer;

fn value_of(number: u32) -> Vec<u8> {
    let mut value = format!("{number}:").into_bytes();
    value.resize(VALUE_BYTES, b'.');
    value
}

fn number_of(value: &[u8]) -> u32 {
    let text = String::from_utf8_lossy(value);
    text.split(':')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a numbered value")
}

/// Sends `numbers` at once; (acknowledged, refusals' errors).
async fn send(
    producer: &FutureProducer,
    numbers: std::ops::Range<u32>,
) -> (Vec<u32>, Vec<KafkaError>) {
    send_to(producer, "full", numbers).await
}

/// [`send`] to `topic`.
async fn send_to(
    producer: &FutureProducer,
    topic: &str,
    numbers: std::ops::Range<u32>,
) -> (Vec<u32>, Vec<KafkaError>) {
    let values: Vec<(u32, Vec<u8>)> = numbers.map(|n| (n, value_of(n))).collect();
    let mut pending = Vec::new();
    for (number, value) in &values {
        let record: FutureRecord<'_, (), Vec<u8>> =
            FutureRecord::to(topic).payload(value).partition(0);
        pending.push((*number, producer.send(record, Duration::from_secs(15))));
    }
    let mut acknowledged = Vec::new();
    let mut refused = Vec::new();
    for (number, delivery) in pending {
        match delivery.await {
            Ok(_) => acknowledged.push(number),
            Err((e, _)) => refused.push(e),
        }
    }
    (acknowledged, refused)
}

/// `text` without its ANSI colour sequences (the broker's log colours its
/// field names).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... final byte in '@'..='~'.
            for next in chars.by_ref() {
                if ('@'..='~').contains(&next) && next != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn is_storage_error(e: &KafkaError) -> bool {
    e.rdkafka_error_code() == Some(RDKafkaErrorCode::KafkaStorageError)
}

/// A per-shard metric `name{shard="…"}`, summed over the shards (`None`
/// when no line has it).
fn metric(broker: &Broker, name: &str) -> Option<i64> {
    let text = rill_tests::http_get(broker.admin_addr, "/metrics");
    let prefix = format!("{name}{{shard=\"");
    let values: Vec<i64> = text
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| rest.split_once("} "))
        .filter_map(|(_, v)| v.trim().parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// Fills the disk through the broker, frees it, and checks the rules.
fn fill_refuse_resume(min_free_bytes: u64, leave_bytes: u64) {
    let fs = match SmallFs::mount(64) {
        Ok(fs) => fs,
        Err(why) => {
            rill_tests::skipped(&format!("no small file system here ({why})"));
            return;
        }
    };
    let config_dir = rill_tests::data_dir();
    let broker = broker_on(&fs, config_dir.path(), min_free_bytes);
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(&bootstrap, "full", 1, &[]));
    let producer = producer(&bootstrap);

    // A few records with room to spare, then the ballast.
    let (mut acknowledged, refused) = runtime.block_on(send(&producer, 0..IN_FLIGHT));
    assert!(
        refused.is_empty(),
        "refused with room to spare: {refused:?}"
    );
    let ballast = fs.fill_leaving(leave_bytes);

    // Write until the broker refuses: every refusal is a storage error,
    // answered (not timed out).
    let mut next = IN_FLIGHT;
    let mut refusals = Vec::new();
    let started = Instant::now();
    while refusals.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{} acknowledged and still no refusal with {} bytes free",
            acknowledged.len(),
            fs.free_bytes()
        );
        let (ok, refused) = runtime.block_on(send(&producer, next..next + IN_FLIGHT));
        acknowledged.extend(ok);
        refusals = refused;
        next += IN_FLIGHT;
    }
    for e in &refusals {
        assert!(
            is_storage_error(e),
            "refused with {e}, not KAFKA_STORAGE_ERROR"
        );
    }
    // `rill_disk_low` is not asserted here: appends are now counted
    // against the shard's free-space estimate before they are taken, so
    // the refusal comes before a check of the file system sees the disk
    // below the reserve (it may never: what is refused is never written).

    // Reads go on: everything acknowledged is there, once.
    let read = |expected: usize| -> Vec<u32> {
        rill_tests::kafka::consume_all(
            &bootstrap,
            "full",
            1,
            expected,
            Duration::from_secs(30),
            &[],
        )
        .into_iter()
        .map(|r| number_of(&r.value.expect("a value")))
        .collect()
    };
    let before = read(acknowledged.len());
    for number in &acknowledged {
        assert!(
            before.contains(number),
            "acknowledged {number} not readable on a full disk"
        );
    }

    // Space returns: writes resume by themselves.
    std::fs::remove_file(&ballast).expect("ballast removed");
    let resumed = Instant::now();
    loop {
        let (ok, refused) = runtime.block_on(send(&producer, next..next + 1));
        next += 1;
        if !ok.is_empty() {
            acknowledged.extend(ok);
            break;
        }
        for e in &refused {
            assert!(
                is_storage_error(e),
                "refused with {e}, not KAFKA_STORAGE_ERROR"
            );
        }
        assert!(
            resumed.elapsed() < Duration::from_secs(30),
            "writes did not resume within 30 s of freeing space:\n{}",
            broker.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The first write may have fit in what the shard's estimate still had
    // before a check saw the space come back: let one check pass.
    std::thread::sleep(Duration::from_millis(600));
    let (ok, refused) = runtime.block_on(send(&producer, next..next + IN_FLIGHT));
    assert!(
        refused.is_empty(),
        "refused after space returned: {refused:?}"
    );
    acknowledged.extend(ok);
    assert_eq!(metric(&broker, "rill_disk_low"), Some(0));
    assert_eq!(metric(&broker, "rill_partitions_offline"), Some(0));

    let after = read(acknowledged.len());
    for number in &acknowledged {
        assert!(after.contains(number), "acknowledged {number} was lost");
    }
    if min_free_bytes == 0 {
        // The disk really filled: the write failed, the partition went
        // offline, and it was reopened once space returned.
        let log = without_colours(&broker.log());
        assert!(
            log.contains("partition taken offline") && log.contains("reopened after a disk error"),
            "the failed-write path was not taken:\n{log}"
        );
    }
    let mut sorted = after.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), after.len(), "a record was stored twice");
}

#[test]
fn below_the_reserve_produce_is_refused_and_resumes_when_space_returns() {
    // 16 MiB reserve, 20 MiB left: the guard trips well before ENOSPC.
    fill_refuse_resume(16 * MIB, 20 * MIB);
}

#[test]
fn a_write_that_meets_a_full_disk_is_refused_and_the_partition_comes_back() {
    // No reserve: the disk really fills.
    fill_refuse_resume(0, 3 * MIB);
}

#[test]
fn a_broker_whose_log_output_fails_keeps_serving() {
    // stdout and stderr on /dev/full: every log line fails to be written
    // (before, tracing's fallback report panicked the broker).
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        rill_tests::skipped("no /dev/full here");
        return;
    };
    let dir = rill_tests::data_dir();
    let port = rill_tests::free_port();
    let admin_port = rill_tests::free_port();
    let mut child = std::process::Command::new(RILL)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
        .arg("--data-dir")
        .arg(dir.path())
        .stdout(full.try_clone().expect("/dev/full"))
        .stderr(full)
        .spawn()
        .expect("rill starts");
    let bootstrap = format!("127.0.0.1:{port}");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let started = Instant::now();
    while std::net::TcpStream::connect(&bootstrap).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "rill did not listen"
        );
        assert!(child.try_wait().expect("status").is_none(), "rill exited");
        std::thread::sleep(Duration::from_millis(50));
    }
    runtime.block_on(rill_tests::kafka::create_topic(&bootstrap, "full", 1, &[]));
    let (acknowledged, refused) = runtime.block_on(send(&producer(&bootstrap), 0..IN_FLIGHT));
    assert!(refused.is_empty(), "refused: {refused:?}");
    assert_eq!(acknowledged.len(), IN_FLIGHT as usize);
    assert!(child.try_wait().expect("status").is_none(), "rill exited");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_failing_disk_takes_one_partition_offline_and_the_others_keep_serving() {
    // Every write of `broken-0` fails with EIO (the injected fault), as on
    // a failing disk; `healthy-0` is unaffected.
    let dir = rill_tests::data_dir();
    let mut broker = Broker::start_with_env(
        RILL,
        dir.path(),
        &["--cores", "1"],
        &[(engine::fault::FAULT_EIO_PARTITION, "broken-0")],
    );
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(
        &bootstrap,
        "broken",
        1,
        &[],
    ));
    runtime.block_on(rill_tests::kafka::create_topic(
        &bootstrap,
        "healthy",
        1,
        &[],
    ));
    let producer = producer(&bootstrap);

    let (ok, refused) = runtime.block_on(send_to(&producer, "broken", 0..4));
    assert!(
        ok.is_empty(),
        "a write to the failing disk was acknowledged"
    );
    assert!(!refused.is_empty());
    for e in &refused {
        assert!(
            is_storage_error(e),
            "refused with {e}, not KAFKA_STORAGE_ERROR"
        );
    }
    assert_eq!(metric(&broker, "rill_partitions_offline"), Some(1));
    let log = without_colours(&broker.log());
    assert!(
        log.contains("partition taken offline until the broker restarts")
            && log.contains("partition=broken-0"),
        "no clear log line for the failed partition:\n{log}"
    );

    // The other partition goes on, and stays on.
    let (acknowledged, refused) = runtime.block_on(send_to(&producer, "healthy", 0..IN_FLIGHT));
    assert!(
        refused.is_empty(),
        "the healthy partition refused: {refused:?}"
    );
    std::thread::sleep(Duration::from_secs(1));
    let (ok, refused) = runtime.block_on(send_to(&producer, "broken", 100..101));
    assert!(
        ok.is_empty() && refused.iter().all(is_storage_error),
        "{refused:?}"
    );
    assert_eq!(metric(&broker, "rill_partitions_offline"), Some(1));

    // A restart with the disk "replaced" (the fault gone): both serve, and
    // everything acknowledged is there.
    drop(producer);
    broker.stop();
    broker.clear_env();
    broker.restart();
    let producer = self::producer(&bootstrap);
    let (ok, refused) = runtime.block_on(send_to(&producer, "broken", 200..204));
    assert!(refused.is_empty() && ok.len() == 4, "{refused:?}");
    assert_eq!(metric(&broker, "rill_partitions_offline"), Some(0));
    let read: Vec<u32> = rill_tests::kafka::consume_all(
        &bootstrap,
        "healthy",
        1,
        acknowledged.len(),
        Duration::from_secs(30),
        &[],
    )
    .into_iter()
    .map(|r| number_of(&r.value.expect("a value")))
    .collect();
    assert_eq!(read, acknowledged);
}

#[test]
fn a_damaged_data_dir_recovers_what_is_whole_and_says_what_it_dropped() {
    let dir = rill_tests::data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(&bootstrap, "full", 1, &[]));
    let producer = producer(&bootstrap);
    // One record per batch: 20 batches.
    let mut acknowledged = Vec::new();
    for number in 0..20 {
        let (ok, refused) = runtime.block_on(send(&producer, number..number + 1));
        assert!(refused.is_empty(), "{refused:?}");
        acknowledged.extend(ok);
    }
    drop(producer);
    broker.stop();

    // The damage: the last batch cut in half, garbage checkpoints, index,
    // time index, leader-epoch checkpoint and producer snapshot.
    let partition = dir.path().join("full-0");
    let segment = partition.join("00000000000000000000.log");
    let length = std::fs::metadata(&segment).expect("segment").len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .expect("segment");
    file.set_len(length - (VALUE_BYTES as u64) / 2)
        .expect("cut");
    drop(file);
    for name in [
        "recovery-point",
        "log-start-offset",
        "leader-epoch-checkpoint",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ] {
        std::fs::write(partition.join(name), b"\x07garbage\xff").expect("damage");
    }
    for entry in std::fs::read_dir(&partition).expect("partition dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            std::fs::write(&path, b"\x01\x02").expect("damage");
        }
    }

    broker.restart();
    // Everything but the cut batch is there, in order, and writes go on
    // after it.
    let read: Vec<u32> =
        rill_tests::kafka::consume_all(&bootstrap, "full", 1, 19, Duration::from_secs(30), &[])
            .into_iter()
            .map(|r| number_of(&r.value.expect("a value")))
            .collect();
    assert_eq!(read, acknowledged[..19].to_vec());
    let (ok, refused) = runtime.block_on(send(&self::producer(&bootstrap), 100..101));
    assert!(refused.is_empty() && ok == vec![100], "{refused:?}");
    let log = without_colours(&broker.log());
    for said in [
        "recovery truncates the log at the first invalid batch",
        "recovery-point error=",
        "checkpoint ignored",
        "rebuilt from the batch headers",
    ] {
        assert!(log.contains(said), "the log does not say {said:?}:\n{log}");
    }
}

/// Transient errors (`FaultClass::Transient`): the next `count` writes of
/// `flaky-0` fail with `errno`, the writer retries the round (about 6 s of
/// back-off for 12 failures). Meanwhile the round's producer waits, new
/// produces get KAFKA_STORAGE_ERROR (retriable) and nothing of theirs is
/// stored; the partition never goes offline, and every acknowledged
/// record, only those, is read back.
fn a_transient_error_is_retried_with_the_partition_online(errno: &str) {
    let dir = rill_tests::data_dir();
    let fault = format!("flaky-0:{errno}:12");
    let broker = Broker::start_with_env(
        RILL,
        dir.path(),
        &["--cores", "1"],
        &[(engine::fault::FAULT_ERRNO_PARTITION, fault.as_str())],
    );
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(&bootstrap, "flaky", 1, &[]));
    let producer = producer(&bootstrap);

    // The first write meets the fault; its producer waits for the retry.
    let first = {
        let producer = producer.clone();
        runtime.spawn(async move { send_to(&producer, "flaky", 0..1).await })
    };
    std::thread::sleep(Duration::from_secs(1));
    // A produce during the stall is refused, retriably. (The client holds
    // the records queued behind a refused one for its metadata refresh: those
    // may go, and be acknowledged, once the stall is over.)
    let (during, refused) = runtime.block_on(send_to(&producer, "flaky", 100..104));
    assert!(
        !refused.is_empty(),
        "nothing refused while the writer was stalled"
    );
    for e in &refused {
        assert!(
            is_storage_error(e),
            "refused with {e}, not KAFKA_STORAGE_ERROR"
        );
    }
    assert_eq!(metric(&broker, "rill_partitions_offline"), Some(0));

    let (mut acknowledged, refused) = runtime.block_on(first).expect("first send");
    assert!(
        refused.is_empty() && acknowledged == vec![0],
        "the stalled round was not written once the fault passed: {refused:?}\n{}",
        broker.log()
    );
    acknowledged.extend(during);
    let (ok, refused) = runtime.block_on(send_to(&producer, "flaky", 200..204));
    assert!(refused.is_empty(), "refused after the fault: {refused:?}");
    acknowledged.extend(ok);
    assert_eq!(metric(&broker, "rill_partitions_offline"), Some(0));

    let read: Vec<u32> = rill_tests::kafka::consume_all(
        &bootstrap,
        "flaky",
        1,
        acknowledged.len(),
        Duration::from_secs(30),
        &[],
    )
    .into_iter()
    .map(|r| number_of(&r.value.expect("a value")))
    .collect();
    let mut sorted = read.clone();
    sorted.sort_unstable();
    acknowledged.sort_unstable();
    assert_eq!(
        sorted, acknowledged,
        "the log holds exactly what was acknowledged, once: {read:?}"
    );
    let log = without_colours(&broker.log());
    assert!(
        log.contains("write failed with a transient error")
            && log.contains("round written after transient errors")
            && !log.contains("partition taken offline"),
        "the transient path was not taken:\n{log}"
    );
}

#[test]
fn emfile_is_transient() {
    a_transient_error_is_retried_with_the_partition_online("EMFILE");
}

#[test]
fn enomem_is_transient() {
    a_transient_error_is_retried_with_the_partition_online("ENOMEM");
}

#[test]
fn eagain_is_transient() {
    a_transient_error_is_retried_with_the_partition_online("EAGAIN");
}

/// EROFS is permanent, as EIO (above): the partition goes offline until
/// the broker restarts.
#[test]
fn erofs_takes_the_partition_offline() {
    let dir = rill_tests::data_dir();
    let broker = Broker::start_with_env(
        RILL,
        dir.path(),
        &["--cores", "1"],
        &[(engine::fault::FAULT_ERRNO_PARTITION, "readonly-0:EROFS")],
    );
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(
        &bootstrap,
        "readonly",
        1,
        &[],
    ));
    let producer = producer(&bootstrap);
    let (ok, refused) = runtime.block_on(send_to(&producer, "readonly", 0..4));
    assert!(
        ok.is_empty(),
        "a write to a read-only disk was acknowledged"
    );
    assert!(
        !refused.is_empty() && refused.iter().all(is_storage_error),
        "{refused:?}"
    );
    assert_eq!(metric(&broker, "rill_partitions_offline"), Some(1));
    let log = without_colours(&broker.log());
    assert!(
        log.contains("partition taken offline until the broker restarts")
            && log.contains("partition=readonly-0"),
        "no clear log line for the failed partition:\n{log}"
    );
}

#[test]
fn a_partition_whose_files_cannot_be_opened_stays_offline_alone() {
    // A pending truncation the broker cannot read: that partition cannot
    // be opened safely, and the rest of the broker must not pay for it.
    let dir = rill_tests::data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for topic in ["damaged", "whole"] {
        runtime.block_on(rill_tests::kafka::create_topic(&bootstrap, topic, 1, &[]));
    }
    let producer = producer(&bootstrap);
    let (before, refused) = runtime.block_on(send_to(&producer, "whole", 0..4));
    assert!(refused.is_empty(), "{refused:?}");
    let (_, refused) = runtime.block_on(send_to(&producer, "damaged", 0..4));
    assert!(refused.is_empty(), "{refused:?}");
    drop(producer);
    broker.stop();
    let damaged = dir.path().join("damaged-0");
    assert!(
        damaged.is_dir(),
        "no partition dir at {}",
        damaged.display()
    );
    std::fs::write(damaged.join("pending-truncation"), "cut here\n").expect("damage");

    broker.restart();
    let producer = self::producer(&bootstrap);
    let (after, refused) = runtime.block_on(send_to(&producer, "whole", 4..8));
    assert!(
        refused.is_empty(),
        "the whole partition refused: {refused:?}"
    );
    let (ok, refused) = runtime.block_on(send_to(&producer, "damaged", 10..11));
    assert!(
        ok.is_empty() && !refused.is_empty() && refused.iter().all(is_storage_error),
        "the damaged partition answered {ok:?} / {refused:?}, not KAFKA_STORAGE_ERROR"
    );
    assert_eq!(metric(&broker, "rill_partitions_offline"), Some(1));
    let read: Vec<u32> = rill_tests::kafka::consume_all(
        &bootstrap,
        "whole",
        1,
        before.len() + after.len(),
        Duration::from_secs(30),
        &[],
    )
    .into_iter()
    .map(|r| number_of(&r.value.expect("a value")))
    .collect();
    assert_eq!(read, [before, after].concat());
    assert!(
        damaged.join("pending-truncation").exists(),
        "the damaged partition's files were changed"
    );
}

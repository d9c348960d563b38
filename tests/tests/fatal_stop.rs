//! The fatal stop on a real `rill`: a shard that panics (the debug-build
//! fault point `RILL_FAULT_PANIC_SHARD`) ends the whole process at once
//! with exit code 70, the reason logged once and no second signal; a
//! restart on the same data reads back every acknowledged record; in a
//! three-node cluster the dead broker's partitions fail over and produce
//! goes on. A metadata log that cannot be written (`RILL_FAULT_METADATA_LOG`)
//! takes the same path, once, with exit code 74.

use rill_tests::cluster::{wait_for, Cluster};
use rill_tests::kafka::{consume_all, create_topic, producer};
use rill_tests::replicated::{idempotent_producer, partition_view, produce_numbers, read_numbers};
use rill_tests::{data_dir, Broker};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// `kernel::fatal::FAULT_PANIC_SHARD` and `FAULT_PANIC_TRIGGER`.
const FAULT_PANIC_SHARD: &str = "RILL_FAULT_PANIC_SHARD";
const FAULT_PANIC_TRIGGER: &str = "rill-fault-panic";

/// `kernel::fatal::Reason::Panic.exit_code()`.
const EXIT_PANIC: i32 = 70;

/// The bound on the time from the panic to the exit.
const EXIT_WITHIN: Duration = Duration::from_secs(5);

/// An election, a session expiry and a catch-up on a loaded two-core machine.
const SETTLE: Duration = Duration::from_secs(60);

/// Fires the panic point of `broker` and waits for its exit: (exit code,
/// time from the trigger to the exit).
fn panic_and_wait(broker: &mut Broker) -> (Option<i32>, Duration) {
    let trigger = broker.data_dir.join(FAULT_PANIC_TRIGGER);
    std::fs::write(&trigger, b"").expect("trigger file");
    let fired = Instant::now();
    // Longer than the bound, so that a slow exit fails the assertion below
    // with its time rather than a timeout.
    let code = broker.wait_exit(Duration::from_secs(30));
    let exit_after = fired.elapsed();
    std::fs::remove_file(&trigger).expect("trigger removed");
    eprintln!("exit code {code:?}, {exit_after:?} after the trigger");
    (code, exit_after)
}

/// The fatal stop's marks in the broker's log: the reason once, and none
/// of the old path's self-signals.
fn assert_one_fatal_stop(log: &str) {
    let stops = log.matches("exiting without a clean shutdown").count();
    assert_eq!(stops, 1, "the reason logged once:\n{log}");
    assert!(log.contains("fatal: panic in thread rill-shard-"), "{log}");
    assert!(!log.contains("second signal"), "{log}");
    assert!(
        !log.contains("shutting down: draining"),
        "no clean stop began:\n{log}"
    );
}

/// The records in `partitions` partitions of `topic`: the sum of their high
/// watermarks (a new topic's logs start at offset 0).
fn records_in_log(bootstrap: &str, topic: &str, partitions: i32) -> usize {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rill_tests::kafka::client_config(bootstrap)
        .create()
        .expect("consumer");
    (0..partitions)
        .map(|partition| {
            let (low, high) = consumer
                .fetch_watermarks(topic, partition, Duration::from_secs(10))
                .expect("watermarks");
            assert_eq!(low, 0, "nothing deleted");
            usize::try_from(high).expect("a high watermark")
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_shard_ends_the_broker_and_a_restart_keeps_every_acknowledged_record() {
    let dir = data_dir();
    let mut broker = Broker::start_with_env(
        RILL,
        dir.path(),
        &["--cores", "2", "--flush-policy", "fsync"],
        &[(FAULT_PANIC_SHARD, "1")],
    );
    let bootstrap = broker.bootstrap();
    // Four partitions: some owned by the shard that panics, some by the other.
    create_topic(&bootstrap, "fatal", 4, &[]).await;

    // One record at a time until the broker is gone: the panic lands while
    // produce requests are in flight.
    let p = producer(
        &bootstrap,
        &[
            ("acks", "all"),
            ("enable.idempotence", "false"),
            ("retries", "0"),
            ("linger.ms", "0"),
            ("message.timeout.ms", "5000"),
        ],
    );
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let sender = {
        let (acknowledged, count) = (acknowledged.clone(), count.clone());
        tokio::spawn(async move {
            for i in 0u32.. {
                let value = format!("record-{i}");
                let key = format!("k{}", i % 11);
                let record = rdkafka::producer::FutureRecord::to("fatal")
                    .key(&key)
                    .payload(&value);
                if p.send(record, Duration::from_secs(5)).await.is_err() {
                    return;
                }
                acknowledged.lock().expect("list").push(value.into_bytes());
                count.fetch_add(1, Ordering::AcqRel);
            }
        })
    };
    wait_for("300 acknowledged records", SETTLE, || {
        (count.load(Ordering::Acquire) >= 300).then_some(())
    });

    let (code, exit_after) = panic_and_wait(&mut broker);
    assert_eq!(code, Some(EXIT_PANIC), "{}", broker.log());
    assert!(exit_after < EXIT_WITHIN, "exited after {exit_after:?}");
    assert_one_fatal_stop(&broker.log());
    sender.await.expect("sender");

    broker.clear_env();
    broker.restart();
    let mut want = acknowledged.lock().expect("list").clone();
    // Everything in the log: the acknowledged records and perhaps the one
    // written but not yet acknowledged when the process ended.
    let in_log = records_in_log(&broker.bootstrap(), "fatal", 4);
    assert!(
        in_log >= want.len(),
        "{in_log} records for {} acknowledged",
        want.len()
    );
    let got = consume_all(
        &broker.bootstrap(),
        "fatal",
        4,
        in_log,
        Duration::from_secs(30),
        &[],
    );
    let mut got: Vec<Vec<u8>> = got.into_iter().filter_map(|r| r.value).collect();
    got.retain(|v| want.contains(v));
    got.sort();
    want.sort();
    assert_eq!(got.len(), want.len(), "every acknowledged record read back");
    assert_eq!(got, want);
    assert_eq!(broker.stop(), Some(0), "a clean stop after the restart");
}

#[test]
fn a_panicking_broker_s_partitions_fail_over_and_produce_goes_on() {
    // The fault point armed on every node; only the one whose data dir
    // gets the trigger file panics.
    let mut cluster = Cluster::start_with_env(RILL, 3, &[], &[(FAULT_PANIC_SHARD, "0")]);
    cluster.wait_settled(SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "failover",
        1,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let leader = wait_for("all three in the ISR", SETTLE, || {
        let view = partition_view(&bootstrap, "failover")?;
        (view.isr == vec![1, 2, 3]).then_some(view.leader)
    });
    let producer = idempotent_producer(&bootstrap);
    let mut acknowledged = runtime.block_on(produce_numbers(&producer, "failover", 0..100));
    assert_eq!(
        acknowledged.len(),
        100,
        "all acknowledged with a healthy ISR"
    );

    let (code, exit_after) = panic_and_wait(cluster.node(leader));
    assert_eq!(code, Some(EXIT_PANIC));
    assert!(exit_after < EXIT_WITHIN, "exited after {exit_after:?}");
    assert_one_fatal_stop(&cluster.node(leader).log());

    // Produce goes on: the next records are acknowledged by a new leader.
    let resumed = Instant::now();
    acknowledged.extend(runtime.block_on(produce_numbers(&producer, "failover", 100..200)));
    eprintln!(
        "100 more acknowledged {:?} after the exit",
        resumed.elapsed()
    );
    assert_eq!(
        acknowledged.len(),
        200,
        "produce went on through the failover"
    );
    let survivor = (1..=3).find(|&n| n != leader).expect("a survivor");
    let new_leader = wait_for("a new leader", SETTLE, || {
        let view = partition_view(&cluster.node(survivor).bootstrap(), "failover")?;
        (view.leader > 0 && view.leader != leader && !view.isr.contains(&leader))
            .then_some(view.leader)
    });
    let read = read_numbers(
        &cluster.node(new_leader).bootstrap(),
        "failover",
        acknowledged.len(),
    );
    for value in &acknowledged {
        assert!(read.contains(value), "acknowledged {value} was lost");
    }
}

/// The metadata log failing on every ready cycle (the debug-build point
/// `RILL_FAULT_METADATA_LOG`, armed from the start): the first failure
/// stops the broker with exit code 74, and the ones after it report
/// nothing, signal nothing.
#[test]
fn a_failing_metadata_log_stops_the_broker_once_with_its_code() {
    let dir = data_dir();
    let started = Instant::now();
    let output = std::process::Command::new(RILL)
        .args(["serve", "--cores", "2", "--listen"])
        .arg(format!("127.0.0.1:{}", rill_tests::free_port()))
        .arg("--admin-listen")
        .arg(format!("127.0.0.1:{}", rill_tests::free_port()))
        .arg("--data-dir")
        .arg(dir.path())
        .env("RILL_FAULT_METADATA_LOG", "1")
        .output()
        .expect("rill runs");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "exit {:?} after {:?}",
        output.status.code(),
        started.elapsed()
    );
    assert_eq!(output.status.code(), Some(74), "{log}");
    assert_eq!(
        log.matches("exiting without a clean shutdown").count(),
        1,
        "{log}"
    );
    assert!(log.contains("fatal: metadata quorum failed"), "{log}");
    assert!(!log.contains("second signal"), "{log}");
    assert!(!log.contains("shutting down: draining"), "{log}");
}

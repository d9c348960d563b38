//! A transaction coordinator that lost its `__transaction_state` partition
//! never acts on it again (issue #30).
//!
//! The coordinator of an open transaction is paused (SIGSTOP) past the
//! moment its partition fails over. The producer commits the transaction
//! through the new coordinator. Then the old one resumes with the
//! transaction still open in its memory and long past its
//! `transaction.timeout.ms`: before the fix it timed it out, bumped the
//! producer epoch, wrote PrepareAbort to its own (now follower) log and
//! sent ABORT markers that the data partitions' leaders took, tearing the
//! committed transaction (COMMIT on some partitions, ABORT on others).
//! Now its writes go through the leader's path under the lease it loaded
//! the partition with, so it writes nothing and sends no marker: every
//! value of the committed transaction reads back with read_committed, on
//! every partition, the producer goes on, and every partition's replicas
//! agree batch by batch with leader epochs that never go back.

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rill_tests::agreement::assert_replicas_agree;
use rill_tests::cluster::{find_coordinator, wait_for, Cluster};
use rill_tests::replicated::signal;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const SETTLE: Duration = Duration::from_secs(60);
const TOPIC: &str = "torn";
const PARTITIONS: i32 = 3;
/// Long enough for the failover and the commit through the new
/// coordinator (librdkafka gives up on the paused one after its 10 s
/// socket timeout); short enough that the old one finds it expired when
/// it resumes.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(30);

fn send_values(producer: &BaseProducer, values: std::ops::Range<u32>) {
    for value in values {
        let payload = value.to_string();
        let partition = (value % PARTITIONS as u32) as i32;
        let record: BaseRecord<'_, (), String> =
            BaseRecord::to(TOPIC).payload(&payload).partition(partition);
        producer.send(record).map_err(|(e, _)| e).expect("send");
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

#[test]
fn a_paused_coordinator_that_resumes_after_a_failover_tears_no_transaction() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        TOPIC,
        PARTITIONS,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let producer: BaseProducer = rill_tests::kafka::client_config(&bootstrap)
        .set("transactional.id", "stale-coordinator")
        .set("message.timeout.ms", "25000")
        .set(
            "transaction.timeout.ms",
            TRANSACTION_TIMEOUT.as_millis().to_string(),
        )
        .create()
        .expect("producer");
    let timeout = Duration::from_secs(90);
    producer
        .init_transactions(timeout)
        .expect("init_transactions");
    producer.begin_transaction().expect("begin");
    send_values(&producer, 0..30);
    producer.commit_transaction(timeout).expect("first commit");

    let coordinator = wait_for("the transaction coordinator", SETTLE, || {
        find_coordinator(&bootstrap, "stale-coordinator", 1)
    });
    let survivor = (1..=3).find(|&n| n != coordinator).expect("a survivor");
    let survivor_bootstrap = cluster.node(survivor).bootstrap();

    // An open transaction on every partition, then the coordinator pauses.
    producer.begin_transaction().expect("begin");
    send_values(&producer, 30..60);
    let opened = Instant::now();
    signal(cluster.node(coordinator), libc::SIGSTOP);
    let moved = wait_for("a new transaction coordinator", SETTLE, || {
        find_coordinator(&survivor_bootstrap, "stale-coordinator", 1)
            .filter(|&node| node != coordinator)
    });
    producer
        .commit_transaction(timeout)
        .expect("the commit through the new coordinator");
    assert!(
        opened.elapsed() < TRANSACTION_TIMEOUT,
        "the commit came {:?} after the transaction opened: the test needs a longer timeout",
        opened.elapsed()
    );

    // The old coordinator resumes with the transaction open and expired.
    std::thread::sleep(
        TRANSACTION_TIMEOUT.saturating_sub(opened.elapsed()) + Duration::from_secs(1),
    );
    signal(cluster.node(coordinator), libc::SIGCONT);
    // Several of its timer ticks (500 ms each) and a metadata update.
    std::thread::sleep(Duration::from_secs(5));

    // The producer goes on under the new coordinator.
    producer
        .begin_transaction()
        .expect("begin after the resume");
    send_values(&producer, 60..90);
    producer
        .commit_transaction(timeout)
        .expect("the third commit");

    let read = rill_tests::kafka::consume_all(
        &survivor_bootstrap,
        TOPIC,
        PARTITIONS,
        90,
        SETTLE,
        &[("isolation.level", "read_committed")],
    );
    let values: BTreeSet<u32> = read
        .iter()
        .filter_map(|r| String::from_utf8(r.value.clone()?).ok()?.parse().ok())
        .collect();
    let missing: Vec<u32> = (0..90).filter(|v| !values.contains(v)).collect();
    assert!(
        missing.is_empty(),
        "committed values missing under read_committed (a torn transaction; old coordinator {coordinator}, new {moved}): {missing:?}"
    );
    assert_eq!(read.len(), 90, "each committed value once");
    assert!(
        cluster.node(coordinator).is_running(),
        "the resumed broker is up:\n{}",
        cluster.node(coordinator).log()
    );
    // Every partition's replicas, internal topics included, agree batch by
    // batch, and no replica's leader epochs go back (the stale coordinator's
    // PrepareAbort of issue #30 broke both on `__transaction_state`).
    let compared = assert_replicas_agree(&cluster.data_dirs(&[]), SETTLE);
    // The data topic, and the internal topics' partitions the id used.
    assert!(
        compared > PARTITIONS as usize,
        "{compared} partitions compared"
    );
}

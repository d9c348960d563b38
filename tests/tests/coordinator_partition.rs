//! Coordinators cut off by a network partition (issue #30): three `rill`
//! processes in network namespaces; the broker leading the producer's
//! `__transaction_state` partition, and in other rounds the one leading the
//! group's `__consumer_offsets` partition, is cut off from the other two
//! brokers (not from the clients) for 2–7 s at a time, while transactions
//! commit and abort and a group commits offsets.
//!
//! After healing it checks what a stale coordinator broke before the fix:
//! - no transaction is torn: a committed one reads back whole under
//!   read_committed, an aborted one not at all, one whose outcome the client
//!   never learned either whole or not at all;
//! - every offset commit acknowledged to the consumer is what a new member
//!   of the group fetches (or a later one it attempted);
//! - every partition's replicas, internal topics included, agree batch by
//!   batch, and no replica's leader epochs go backwards.
//!
//! Needs root and network namespaces (`ip netns`); without them the test
//! says so and passes without running.

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use rill_tests::agreement::assert_replicas_agree;
use rill_tests::cluster::{find_coordinator, wait_for};
use rill_tests::data_dir;
use rill_tests::netns::Network;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const SETTLE: Duration = Duration::from_secs(60);
const TOPIC: &str = "jt";
const PARTITIONS: i32 = 3;
const TRANSACTIONAL_ID: &str = "cut-coordinator";
const GROUP: &str = "cut-group";
/// Rounds per coordinator kind.
const ROUNDS: usize = 2;

/// How a transaction ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Committed,
    Aborted,
    /// An error: the client does not know.
    Unknown,
}

/// Transactions by their first value; each writes `VALUES_PER_TXN` values,
/// one per partition.
type Ledger = Arc<Mutex<BTreeMap<u32, Outcome>>>;

const VALUES_PER_TXN: u32 = PARTITIONS as u32;

fn transactional_producer(bootstrap: &str) -> Option<BaseProducer> {
    let producer: BaseProducer = rill_tests::kafka::client_config(bootstrap)
        .set("transactional.id", TRANSACTIONAL_ID)
        .set("message.timeout.ms", "20000")
        .set("transaction.timeout.ms", "20000")
        .create()
        .ok()?;
    if let Err(e) = producer.init_transactions(Duration::from_secs(30)) {
        eprintln!("init_transactions: {e}");
        return None;
    }
    Some(producer)
}

/// One transaction of values `first..first + VALUES_PER_TXN`, committed
/// or (every third) aborted.
fn one_transaction(producer: &BaseProducer, first: u32) -> Outcome {
    let timeout = Duration::from_secs(30);
    let attempt = || -> Result<Outcome, rdkafka::error::KafkaError> {
        producer.begin_transaction()?;
        for value in first..first + VALUES_PER_TXN {
            let payload = value.to_string();
            let partition = (value % VALUES_PER_TXN) as i32;
            let record: BaseRecord<'_, (), String> =
                BaseRecord::to(TOPIC).payload(&payload).partition(partition);
            producer.send(record).map_err(|(e, _)| e)?;
        }
        producer.flush(timeout)?;
        if (first / VALUES_PER_TXN).is_multiple_of(3) {
            producer.abort_transaction(timeout)?;
            Ok(Outcome::Aborted)
        } else {
            producer.commit_transaction(timeout)?;
            Ok(Outcome::Committed)
        }
    };
    attempt().unwrap_or_else(|e| {
        eprintln!("transaction {first}: {e}");
        Outcome::Unknown
    })
}

/// Runs transactions until `stop`; a producer that fails is replaced (its
/// successor's InitProducerId fences it and ends what it left open).
fn run_transactions(bootstrap: String, ledger: Ledger, stop: Arc<AtomicBool>) {
    let mut producer = None;
    let mut first = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let Some(current) = producer
            .take()
            .or_else(|| transactional_producer(&bootstrap))
        else {
            std::thread::sleep(Duration::from_millis(500));
            continue;
        };
        let outcome = one_transaction(&current, first);
        ledger.lock().expect("ledger").insert(first, outcome);
        first += VALUES_PER_TXN;
        if outcome != Outcome::Unknown {
            producer = Some(current);
        }
    }
}

/// (highest acknowledged, highest attempted) committed offset.
type Commits = Arc<Mutex<(i64, i64)>>;

fn group_consumer(bootstrap: &str) -> BaseConsumer {
    rill_tests::kafka::client_config(bootstrap)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer")
}

/// Commits offsets 1, 2, 3... of partition 0 until `stop`.
fn run_commits(bootstrap: String, commits: Commits, stop: Arc<AtomicBool>) {
    let consumer = group_consumer(&bootstrap);
    let mut assigned = TopicPartitionList::new();
    assigned.add_partition(TOPIC, 0);
    consumer.assign(&assigned).expect("assign");
    let mut next = 1i64;
    while !stop.load(Ordering::Relaxed) {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(TOPIC, 0, Offset::Offset(next))
            .expect("offset");
        commits.lock().expect("commits").1 = next;
        // Polling serves the consumer's callbacks, the commit's included.
        let _ = consumer.poll(Duration::from_millis(10));
        match consumer.commit(&list, CommitMode::Sync) {
            Ok(()) => commits.lock().expect("commits").0 = next,
            Err(e) => eprintln!("offset commit {next}: {e}"),
        }
        next += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Cuts `coordinator` off for 2–7 s (from `seed`), heals, lets it settle.
fn cut(network: &Network, coordinator: i32, seed: u64) {
    let cut_for = Duration::from_millis(2_000 + seed.wrapping_mul(2_654_435_761) % 5_000);
    eprintln!("cutting off node {coordinator} for {cut_for:?}");
    network.isolate(coordinator, true);
    std::thread::sleep(cut_for);
    network.isolate(coordinator, false);
    std::thread::sleep(Duration::from_secs(4));
}

#[test]
fn coordinators_cut_off_tear_no_transaction_and_lose_no_offset_commit() {
    let Some(network) = Network::create() else {
        return;
    };
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| data_dir()).collect();
    let (mut brokers, bootstrap) = network.start_brokers(RILL, &dirs, &[]);
    for broker in &brokers {
        wait_for("every broker to list all three", SETTLE, || {
            let (_, ids) = rill_tests::cluster::describe_cluster(broker).ok()?;
            (ids == vec![1, 2, 3]).then_some(())
        });
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        TOPIC,
        PARTITIONS,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let ledger = Ledger::default();
    let commits = Commits::default();
    let workers = [
        std::thread::spawn({
            let (b, l, s) = (bootstrap.clone(), ledger.clone(), stop.clone());
            move || run_transactions(b, l, s)
        }),
        std::thread::spawn({
            let (b, c, s) = (bootstrap.clone(), commits.clone(), stop.clone());
            move || run_commits(b, c, s)
        }),
    ];
    wait_for(
        "a committed transaction and an offset commit",
        SETTLE,
        || {
            let committed = ledger
                .lock()
                .ok()?
                .values()
                .any(|o| *o == Outcome::Committed);
            (committed && commits.lock().ok()?.0 > 0).then_some(())
        },
    );
    let pid = u64::from(std::process::id());
    for round in 0..ROUNDS as u64 {
        for key_type in [1i8, 0] {
            let key = if key_type == 1 {
                TRANSACTIONAL_ID
            } else {
                GROUP
            };
            let coordinator = wait_for("the coordinator", SETTLE, || {
                find_coordinator(&bootstrap, key, key_type)
            });
            cut(&network, coordinator, pid + round * 2 + key_type as u64);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("worker");
    }
    check_transactions(&bootstrap, &ledger.lock().expect("ledger"));
    check_commits(&bootstrap, *commits.lock().expect("commits"));
    let paths: Vec<&Path> = dirs.iter().map(|d| d.path()).collect();
    let compared = assert_replicas_agree(&paths, SETTLE);
    assert!(
        compared > PARTITIONS as usize,
        "{compared} partitions compared"
    );
    for broker in &mut brokers {
        assert!(broker.is_running(), "a broker stopped:\n{}", broker.log());
    }
}

/// No torn transaction: each is read back whole or not at all, as its
/// outcome says.
fn check_transactions(bootstrap: &str, ledger: &BTreeMap<u32, Outcome>) {
    let count = |o: Outcome| ledger.values().filter(|v| **v == o).count();
    eprintln!(
        "transactions: {} committed, {} aborted, {} unknown",
        count(Outcome::Committed),
        count(Outcome::Aborted),
        count(Outcome::Unknown)
    );
    assert!(count(Outcome::Committed) > 0, "no transaction committed");
    // Reading stops at the most there can be (every unknown one committed),
    // or after the wait, when some of them did not.
    let most = (count(Outcome::Committed) + count(Outcome::Unknown)) * VALUES_PER_TXN as usize;
    let read = rill_tests::kafka::consume_all(
        bootstrap,
        TOPIC,
        PARTITIONS,
        most,
        Duration::from_secs(20),
        &[("isolation.level", "read_committed")],
    );
    let values: BTreeSet<u32> = read
        .iter()
        .filter_map(|r| String::from_utf8(r.value.clone()?).ok()?.parse().ok())
        .collect();
    for (&first, &outcome) in ledger {
        let seen = (first..first + VALUES_PER_TXN)
            .filter(|v| values.contains(v))
            .count();
        match outcome {
            Outcome::Committed => assert_eq!(
                seen, VALUES_PER_TXN as usize,
                "committed transaction {first} torn or lost"
            ),
            Outcome::Aborted => assert_eq!(seen, 0, "aborted transaction {first} read"),
            Outcome::Unknown => assert!(
                seen == 0 || seen == VALUES_PER_TXN as usize,
                "transaction {first} torn: {seen} of {VALUES_PER_TXN} values read"
            ),
        }
    }
}

/// What a new member fetches is the last acknowledged commit, or a later
/// one that was attempted (its outcome unknown to the client).
fn check_commits(bootstrap: &str, (acknowledged, attempted): (i64, i64)) {
    eprintln!("offset commits: {acknowledged} acknowledged of {attempted}");
    let consumer = group_consumer(bootstrap);
    let mut list = TopicPartitionList::new();
    list.add_partition(TOPIC, 0);
    let fetched = wait_for("the committed offset", SETTLE, || {
        let committed = consumer
            .committed_offsets(list.clone(), Duration::from_secs(10))
            .ok()?;
        match committed.find_partition(TOPIC, 0)?.offset() {
            Offset::Offset(offset) => Some(offset),
            _ => None,
        }
    });
    assert!(
        (acknowledged..=attempted).contains(&fetched),
        "fetched offset {fetched}; acknowledged {acknowledged}, attempted up to {attempted}"
    );
}

//! Measures the group coordinator with librdkafka against a real broker:
//! rebalance time of a 10-consumer classic group on 100 partitions when an
//! 11th joins, classic or KIP-848 (`group.protocol=consumer`, which turns
//! the group KIP-848: online migration), and when that KIP-848 member
//! leaves again (the group turns classic), medians of runs; synchronous
//! OffsetCommit requests/s with 1 KiB of metadata; and coordinator
//! recovery time for 100k committed offsets.
//!
//! Run: `cargo run --release --example group_measure -- target/release/rill`

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::TopicPartitionList;
use rill_tests::kafka::{client_config, create_topic};
use rill_tests::{data_dir, Broker};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Assignments = Arc<Mutex<Vec<Vec<i32>>>>;

/// Which protocol a member speaks.
#[derive(Clone, Copy, PartialEq)]
enum Protocol {
    Classic,
    Kip848,
}

fn member(
    (bootstrap, group): (String, String),
    slot: usize,
    protocol: Protocol,
    assignments: Assignments,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut config = client_config(&bootstrap);
        config.set("group.id", &group);
        match protocol {
            Protocol::Classic => config
                .set("session.timeout.ms", "10000")
                .set("heartbeat.interval.ms", "300")
                .set("partition.assignment.strategy", "range"),
            // Its heartbeat interval is the broker's (300 ms here).
            Protocol::Kip848 => config.set("group.protocol", "consumer"),
        };
        let consumer: BaseConsumer = config.create().expect("consumer");
        consumer.subscribe(&["measure"]).expect("subscribe");
        while !stop.load(Ordering::Relaxed) {
            let _ = consumer.poll(Duration::from_millis(20));
            let mine: Vec<i32> = consumer
                .assignment()
                .map(|tpl| tpl.elements().iter().map(|e| e.partition()).collect())
                .unwrap_or_default();
            assignments.lock().expect("lock")[slot] = mine;
        }
        consumer.unsubscribe();
    })
}

fn settled(assignments: &Assignments, members: usize) -> bool {
    let a = assignments.lock().expect("lock");
    let mut all: Vec<i32> = a.iter().take(members).flatten().copied().collect();
    all.sort_unstable();
    a.iter().take(members).all(|m| !m.is_empty()) && all == (0..100).collect::<Vec<_>>()
}

fn wait_settled(assignments: &Assignments, members: usize, timeout: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < timeout {
        if settled(assignments, members) {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// One rebalance run on group `group`: 10 classic members settle, an 11th
/// speaking `joiner` joins (timed), then leaves again (timed: for a
/// KIP-848 joiner the group turns classic again).
fn rebalance_run(bootstrap: &str, group: &str, joiner: Protocol) -> (f64, f64) {
    let assignments: Assignments = Arc::new(Mutex::new(vec![Vec::new(); 11]));
    let stop = Arc::new(AtomicBool::new(false));
    let at = (bootstrap.to_string(), group.to_string());
    let mut threads: Vec<_> = (0..10)
        .map(|slot| {
            let (a, s) = (assignments.clone(), stop.clone());
            member(at.clone(), slot, Protocol::Classic, a, s)
        })
        .collect();
    wait_settled(&assignments, 10, Duration::from_secs(60)).expect("10 members settle");
    let leave = Arc::new(AtomicBool::new(false));
    let eleventh = member(at, 10, joiner, assignments.clone(), leave.clone());
    let joined =
        wait_settled(&assignments, 11, Duration::from_secs(60)).expect("11 members settle");
    leave.store(true, Ordering::Relaxed);
    let _ = eleventh.join();
    assignments.lock().expect("lock")[10].clear();
    let left = wait_settled(&assignments, 10, Duration::from_secs(60)).expect("10 again");
    stop.store(true, Ordering::Relaxed);
    for t in threads.drain(..) {
        let _ = t.join();
    }
    (joined.as_secs_f64() * 1000.0, left.as_secs_f64() * 1000.0)
}

/// Median of `runs`, and the runs rounded.
fn median(mut runs: Vec<f64>) -> (f64, Vec<f64>) {
    runs.sort_by(|a, b| a.total_cmp(b));
    (
        runs[runs.len() / 2],
        runs.iter().map(|m| m.round()).collect(),
    )
}

/// 1. Rebalances: 10 classic members settle, then an 11th joins and leaves,
///    classic and KIP-848 runs interleaved.
fn measure_rebalances(bootstrap: &str) {
    let mut classic = (Vec::new(), Vec::new());
    let mut kip848 = (Vec::new(), Vec::new());
    for run in 0..5 {
        let (join, leave) = rebalance_run(bootstrap, &format!("classic-{run}"), Protocol::Classic);
        classic.0.push(join);
        classic.1.push(leave);
        let (join, leave) = rebalance_run(bootstrap, &format!("migrate-{run}"), Protocol::Kip848);
        kip848.0.push(join);
        kip848.1.push(leave);
    }
    for (what, runs) in [
        ("10 -> 11 consumers, the 11th classic", classic.0),
        ("11 -> 10 consumers, classic", classic.1),
        (
            "10 -> 11 consumers, the 11th KIP-848 (the group turns KIP-848)",
            kip848.0,
        ),
        (
            "11 -> 10 consumers, the KIP-848 one leaves (the group turns classic)",
            kip848.1,
        ),
    ] {
        let (median, runs) = median(runs);
        println!("rebalance on 100 partitions, {what}: median {median:.0} ms (runs {runs:?})");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rill = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/rill".to_string());
    let dir = data_dir();
    std::fs::write(
        dir.path().join("rill.toml"),
        "group.initial.rebalance.delay.ms = 0\n\
         group.consumer.min.heartbeat.interval.ms = 300\n\
         group.consumer.heartbeat.interval.ms = 300\n",
    )
    .expect("config");
    let config = dir.path().join("rill.toml");
    let mut broker = Broker::start(
        &rill,
        dir.path(),
        &["--config", config.to_str().expect("utf8")],
    );
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "measure", 100, &[]).await;
    measure_rebalances(&bootstrap);

    // 2. OffsetCommit/s with 1 KiB metadata, one partition per request.
    let consumer: BaseConsumer = {
        let mut c = client_config(&bootstrap);
        c.set("group.id", "committer")
            .set("enable.auto.commit", "false");
        c.create().expect("consumer")
    };
    let metadata = "m".repeat(1024);
    let commits = 2_000;
    let started = Instant::now();
    for i in 0..commits {
        let mut tpl = TopicPartitionList::new();
        let mut elem = tpl.add_partition("measure", i % 100);
        elem.set_offset(rdkafka::Offset::Offset(i as i64))
            .expect("offset");
        elem.set_metadata(metadata.clone());
        consumer.commit(&tpl, CommitMode::Sync).expect("commit");
    }
    println!(
        "OffsetCommit, 1 KiB metadata, sync: {:.0} requests/s",
        commits as f64 / started.elapsed().as_secs_f64()
    );

    // 3. Recovery of 100k committed offsets: 1,000 groups x 100 partitions.
    let started = Instant::now();
    for g in 0..1_000 {
        let consumer: BaseConsumer = {
            let mut c = client_config(&bootstrap);
            c.set("group.id", format!("recover-{g}"))
                .set("enable.auto.commit", "false");
            c.create().expect("consumer")
        };
        let mut tpl = TopicPartitionList::new();
        for p in 0..100 {
            tpl.add_partition_offset("measure", p, rdkafka::Offset::Offset(1_000 + i64::from(p)))
                .expect("tpl");
        }
        consumer.commit(&tpl, CommitMode::Sync).expect("commit");
    }
    println!(
        "committed 100,000 offsets in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(broker.stop(), Some(0));
    let started = Instant::now();
    broker.restart();
    let listening = started.elapsed();
    let consumer: BaseConsumer = {
        let mut c = client_config(&bootstrap);
        c.set("group.id", "recover-999")
            .set("enable.auto.commit", "false");
        c.create().expect("consumer")
    };
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition("measure", 99);
    let committed = consumer
        .committed_offsets(tpl, Duration::from_secs(60))
        .expect("offsets");
    let answered = started.elapsed();
    assert_eq!(
        committed.elements()[0].offset(),
        rdkafka::Offset::Offset(1_099)
    );
    let replay_lines: Vec<String> = broker
        .log()
        .lines()
        .filter(|l| l.contains("groups replayed"))
        .map(|l| l.to_string())
        .collect();
    println!(
        "recovery of 100k offsets: broker listening after {:.0} ms, first OffsetFetch answered after {:.0} ms; replay log: {:?}",
        listening.as_secs_f64() * 1000.0,
        answered.as_secs_f64() * 1000.0,
        replay_lines.iter().rev().take(2).collect::<Vec<_>>()
    );
}

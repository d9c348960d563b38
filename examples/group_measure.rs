//! Measures the group coordinator with librdkafka against a real broker:
//! rebalance time of a 10-consumer group on 100 partitions when an 11th
//! joins (median of runs), synchronous OffsetCommit requests/s with 1 KiB of
//! metadata, and coordinator recovery time for 100k committed offsets.
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

fn member(
    bootstrap: String,
    group: String,
    slot: usize,
    assignments: Assignments,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut config = client_config(&bootstrap);
        config
            .set("group.id", &group)
            .set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", "300")
            .set("partition.assignment.strategy", "range");
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rill = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/rill".to_string());
    let dir = data_dir();
    std::fs::write(
        dir.path().join("rill.toml"),
        "group.initial.rebalance.delay.ms = 0\n",
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

    // 1. Rebalance: 10 members settle, then an 11th joins.
    let mut join_ms = Vec::new();
    for run in 0..5 {
        let group = format!("rebalance-{run}");
        let assignments: Assignments = Arc::new(Mutex::new(vec![Vec::new(); 11]));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads: Vec<_> = (0..10)
            .map(|slot| {
                member(
                    bootstrap.clone(),
                    group.clone(),
                    slot,
                    assignments.clone(),
                    stop.clone(),
                )
            })
            .collect();
        wait_settled(&assignments, 10, Duration::from_secs(60)).expect("10 members settle");
        threads.push(member(
            bootstrap.clone(),
            group.clone(),
            10,
            assignments.clone(),
            stop.clone(),
        ));
        let took =
            wait_settled(&assignments, 11, Duration::from_secs(60)).expect("11 members settle");
        join_ms.push(took.as_secs_f64() * 1000.0);
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
    }
    join_ms.sort_by(|a, b| a.total_cmp(b));
    println!(
        "rebalance, 10 -> 11 consumers on 100 partitions: median {:.0} ms (runs {:?})",
        join_ms[join_ms.len() / 2],
        join_ms.iter().map(|m| m.round()).collect::<Vec<_>>()
    );

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

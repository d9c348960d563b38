//! Consumer groups through librdkafka against a real `rill serve` (two
//! shards on a two-core host, so group calls cross the mesh): classic groups
//! split a topic without overlap and rebalance when members join and leave;
//! two groups each read everything; committed offsets resume a group and
//! survive a restart; the KIP-848 `consumer` protocol works end to end; the
//! lag gauge is exported. A commit from a fenced generation
//! (ILLEGAL_GENERATION) is covered by the coordinator's unit tests
//! (`net/src/group/tests.rs`), not here.

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use rill_tests::kafka::{client_config, create_topic, produce_all, producer};
use rill_tests::{data_dir, http_get, Broker};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// A broker whose groups rebalance without Kafka's initial 3 s delay.
fn start_broker(dir: &Path) -> Broker {
    let config = dir.join("rill.toml");
    std::fs::write(&config, "\"group.initial.rebalance.delay.ms\" = 0\n").expect("config");
    let config = config.to_string_lossy().to_string();
    Broker::start(RILL, dir, &["--config", &config])
}

fn consumer(bootstrap: &str, group: &str, settings: &[(&str, &str)]) -> BaseConsumer {
    let mut c = client_config(bootstrap);
    c.set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("fetch.wait.max.ms", "100");
    for (k, v) in settings {
        c.set(*k, *v);
    }
    c.create().expect("consumer")
}

fn classic(bootstrap: &str, group: &str) -> BaseConsumer {
    consumer(bootstrap, group, &[])
}

fn assigned<C: rdkafka::consumer::ConsumerContext>(c: &BaseConsumer<C>) -> BTreeSet<i32> {
    c.assignment()
        .map(|tpl| tpl.elements().iter().map(|e| e.partition()).collect())
        .unwrap_or_default()
}

/// Polls every consumer until each owns a share of `partitions` with no
/// overlap and full coverage; returns the shares. Panics after `timeout`.
fn settle<C: rdkafka::consumer::ConsumerContext>(
    consumers: &[&BaseConsumer<C>],
    partitions: i32,
    timeout: Duration,
) -> Vec<BTreeSet<i32>> {
    let deadline = Instant::now() + timeout;
    loop {
        for c in consumers {
            let _ = c.poll(Duration::from_millis(20));
        }
        let shares: Vec<BTreeSet<i32>> = consumers.iter().map(|c| assigned(c)).collect();
        let total: usize = shares.iter().map(BTreeSet::len).sum();
        let union: BTreeSet<i32> = shares.iter().flatten().copied().collect();
        let everyone = shares.iter().all(|s| !s.is_empty());
        if total == partitions as usize && union.len() == partitions as usize && everyone {
            return shares;
        }
        assert!(
            Instant::now() < deadline,
            "group did not settle: {shares:?}"
        );
    }
}

/// Polls until `n` messages arrived (or `timeout`), returns (partition, offset, value).
fn read_n(c: &BaseConsumer, n: usize, timeout: Duration) -> Vec<(i32, i64, Vec<u8>)> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            out.push((
                m.partition(),
                m.offset(),
                m.payload().unwrap_or_default().to_vec(),
            ));
        }
    }
    out
}

fn values(n: usize, prefix: &str) -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                Some(format!("k{i}").into_bytes()),
                format!("{prefix}-{i}").into_bytes(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_group_splits_and_rebalances() {
    let dir = data_dir();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "split", 6, &[]).await;

    let a = classic(&bootstrap, "g-split");
    let b = classic(&bootstrap, "g-split");
    a.subscribe(&["split"]).expect("subscribe");
    b.subscribe(&["split"]).expect("subscribe");
    let shares = settle(&[&a, &b], 6, Duration::from_secs(30));
    assert_eq!(
        shares.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        vec![3, 3]
    );

    let c = classic(&bootstrap, "g-split");
    c.subscribe(&["split"]).expect("subscribe");
    let shares = settle(&[&a, &b, &c], 6, Duration::from_secs(30));
    assert!(shares.iter().all(|s| s.len() == 2), "{shares:?}");

    // A 4th member joins a settled group of 3: time to all assignments settled.
    let d = classic(&bootstrap, "g-split");
    let started = Instant::now();
    d.subscribe(&["split"]).expect("subscribe");
    let shares = settle(&[&a, &b, &c, &d], 6, Duration::from_secs(30));
    let rebalance_ms = started.elapsed().as_millis();
    eprintln!("FIGURE rebalance_3_to_4_ms={rebalance_ms} shares={shares:?}");

    // A member that leaves (close sends LeaveGroup) has its partitions moved.
    drop(d);
    let started = Instant::now();
    let shares = settle(&[&a, &b, &c], 6, Duration::from_secs(6));
    eprintln!(
        "FIGURE leave_rebalance_ms={} shares={shares:?}",
        started.elapsed().as_millis()
    );
    drop(c);
    let shares = settle(&[&a, &b], 6, Duration::from_secs(6));
    assert_eq!(shares.iter().map(BTreeSet::len).sum::<usize>(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_each_receive_every_message() {
    let dir = data_dir();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "pubsub", 3, &[]).await;
    let p = producer(&bootstrap, &[]);
    produce_all(&p, "pubsub", &values(60, "m"), None).await;

    for group in ["g-sub-1", "g-sub-2"] {
        let c = classic(&bootstrap, group);
        c.subscribe(&["pubsub"]).expect("subscribe");
        let got = read_n(&c, 60, Duration::from_secs(30));
        let distinct: BTreeSet<Vec<u8>> = got.into_iter().map(|(_, _, v)| v).collect();
        assert_eq!(distinct.len(), 60, "group {group} got every message");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_resume_and_survive_restart() {
    let dir = data_dir();
    let mut broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "resume", 1, &[]).await;
    let p = producer(&bootstrap, &[]);
    produce_all(&p, "resume", &values(100, "r"), Some(0)).await;

    let c = classic(&bootstrap, "g-resume");
    c.subscribe(&["resume"]).expect("subscribe");
    let got = read_n(&c, 30, Duration::from_secs(30));
    assert_eq!(got.len(), 30);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("resume", 0, Offset::Offset(30))
        .expect("tpl");
    c.commit(&tpl, CommitMode::Sync).expect("commit");

    // OffsetCommit throughput: sync commits from one consumer.
    let commits = 300;
    let started = Instant::now();
    for i in 0..commits {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("resume", 0, Offset::Offset(1 + i % 29))
            .expect("tpl");
        c.commit(&tpl, CommitMode::Sync).expect("commit");
    }
    let per_s = commits as f64 / started.elapsed().as_secs_f64();
    eprintln!("FIGURE sync_commits_per_s={per_s:.0}");
    c.commit(&tpl, CommitMode::Sync).expect("commit back at 30");
    drop(c);

    // Same group, new consumer: resumes exactly after the committed offset.
    let c = classic(&bootstrap, "g-resume");
    c.subscribe(&["resume"]).expect("subscribe");
    let got = read_n(&c, 1, Duration::from_secs(30));
    assert_eq!(got.first().map(|r| r.1), Some(30), "resumes at the commit");
    drop(c);

    // The lag gauge: log end 100, committed 30.
    let metrics = http_get(broker.admin_addr, "/metrics");
    assert!(
        metrics.contains(
            "rill_consumer_group_lag{group=\"g-resume\",topic=\"resume\",partition=\"0\"} 70"
        ),
        "lag gauge missing:\n{metrics}"
    );

    broker.stop();
    broker.restart();
    let c = classic(&bootstrap, "g-resume");
    let mut asked = TopicPartitionList::new();
    asked.add_partition("resume", 0);
    let committed = c
        .committed_offsets(asked, Duration::from_secs(10))
        .expect("committed offsets");
    assert_eq!(
        committed.find_partition("resume", 0).map(|e| e.offset()),
        Some(Offset::Offset(30)),
        "commit survived the restart"
    );
    let groups = c
        .fetch_group_list(Some("g-resume"), Duration::from_secs(10))
        .expect("group list");
    assert_eq!(groups.groups().len(), 1, "group survived the restart");
    assert_eq!(groups.groups()[0].name(), "g-resume");
    c.subscribe(&["resume"]).expect("subscribe");
    let got = read_n(&c, 1, Duration::from_secs(30));
    assert_eq!(got.first().map(|r| r.1), Some(30), "resumes after restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_end_to_end() {
    let dir = data_dir();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "kip848", 6, &[]).await;

    let kip = |group: &str| {
        let mut c = client_config(&bootstrap);
        c.set("group.id", group)
            .set("group.protocol", "consumer")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "100");
        let c: BaseConsumer = c.create().expect("consumer");
        c
    };
    let a = kip("g-848");
    let b = kip("g-848");
    a.subscribe(&["kip848"]).expect("subscribe");
    b.subscribe(&["kip848"]).expect("subscribe");
    let shares = settle(&[&a, &b], 6, Duration::from_secs(30));
    assert_eq!(
        shares.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        vec![3, 3]
    );

    // Produced after the group settled: `settle` polls and drops messages.
    let p = producer(&bootstrap, &[]);
    produce_all(&p, "kip848", &values(120, "n"), None).await;

    let mut seen = BTreeSet::new();
    let mut per = std::collections::BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 120 && Instant::now() < deadline {
        for (i, c) in [&a, &b].into_iter().enumerate() {
            match c.poll(Duration::from_millis(50)) {
                Some(Ok(m)) => {
                    *per.entry((i, m.partition())).or_insert(0) += 1;
                    seen.insert(m.payload().unwrap_or_default().to_vec());
                }
                Some(Err(e)) => eprintln!("poll error: {e}"),
                None => {}
            }
        }
    }
    assert_eq!(
        seen.len(),
        120,
        "the group read every message; shares now {:?} {:?} {per:?}",
        assigned(&a),
        assigned(&b)
    );
    let mut tpl = TopicPartitionList::new();
    for p in assigned(&a) {
        tpl.add_partition_offset("kip848", p, Offset::Offset(1))
            .expect("tpl");
    }
    a.commit(&tpl, CommitMode::Sync)
        .expect("commit with member epoch");
}

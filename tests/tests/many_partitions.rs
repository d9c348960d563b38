//! Heartbeats never starve: thousands of partitions created on a 3-node
//! cluster while a producer writes fence no broker, and every acknowledged
//! record is read back.
//!
//! Creating partitions in bulk used to fence live brokers: heartbeats
//! queued behind the topic decisions waiting for their Raft commits, and
//! every applied batch deep-copied the whole metadata image on the
//! controller's shard, each partition's files were made with blocking
//! calls on the shard, and every Raft commit fsynced the hard state twice
//! there. The count is `RILL_TEST_MANY_PARTITIONS` (default
//! 1,500, sized for a debug build on a 2-core CI host). By hand, the
//! issue's 10,000 against a release build:
//!
//! ```sh
//! cargo build --release -p rill
//! RILL_TEST_BINARY=target/release/rill RILL_TEST_MANY_PARTITIONS=10000 \
//!   cargo test --test blackbox many_partitions:: -- --nocapture
//! ```

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rill_tests::cluster::Cluster;
use rill_tests::kafka::{
    assert_delivered_as_consumed, client_config, consume_to_end, create_topic_replicated, producer,
};
use rill_tests::paced::PacedWrites;
use rill_tests::{http_get, Broker};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Topics are created ten at a time, this many partitions each.
const PARTITIONS_PER_TOPIC: usize = 100;

fn partitions_wanted() -> usize {
    std::env::var("RILL_TEST_MANY_PARTITIONS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(1_500)
}

/// Creates `count` partitions (RF 3) as topics of [`PARTITIONS_PER_TOPIC`],
/// ten topics per CreateTopics request, as an admin tool would.
async fn create_partitions(bootstrap: &str, count: usize) {
    // A thousand partitions per request take the broker longer than the
    // tests' usual 10 s socket timeout in a debug build.
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap)
        .set("socket.timeout.ms", "150000")
        .create()
        .expect("admin client");
    let options = AdminOptions::new()
        .operation_timeout(Some(Duration::from_secs(120)))
        .request_timeout(Some(Duration::from_secs(150)));
    let names: Vec<String> = (0..count.div_ceil(PARTITIONS_PER_TOPIC))
        .map(|i| format!("bulk-{i}"))
        .collect();
    let started = Instant::now();
    for (batch, chunk) in names.chunks(10).enumerate() {
        let topics: Vec<NewTopic<'_>> = chunk
            .iter()
            .map(|name| {
                NewTopic::new(
                    name,
                    PARTITIONS_PER_TOPIC as i32,
                    TopicReplication::Fixed(3),
                )
            })
            .collect();
        let results = admin
            .create_topics(&topics, &options)
            .await
            .expect("create_topics request");
        for result in results {
            // INVALID_REPLICATION_FACTOR here means too few live brokers:
            // one was fenced.
            result.expect("topic created");
        }
        eprintln!(
            "{} partitions after {:?}",
            (batch * 10 + chunk.len()) * PARTITIONS_PER_TOPIC,
            started.elapsed()
        );
    }
}

/// `rill_brokers_fenced` on `broker`'s `/metrics` (a gauge without
/// labels); a broker that does not serve it fails the test.
fn fenced_brokers(broker: &Broker) -> i64 {
    let metrics = http_get(broker.admin_addr, "/metrics");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("rill_brokers_fenced "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map(|value| value as i64)
        .unwrap_or_else(|| panic!("no rill_brokers_fenced in /metrics:\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_thousands_of_partitions_while_producing_fences_no_broker() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], Duration::from_secs(60));
    let bootstrap = cluster.bootstrap();
    create_topic_replicated(&bootstrap, "steady", 4, 3, &[("min.insync.replicas", "2")]).await;
    let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..200_000)
        .map(|i| (None, format!("steady {i}").into_bytes()))
        .collect();
    let writer = producer(
        &bootstrap,
        &[("acks", "all"), ("enable.idempotence", "true")],
    );
    let writes = PacedWrites::start(
        writer,
        "steady",
        None,
        records.clone(),
        Duration::from_millis(5),
    );
    writes.wait_acked(50, Duration::from_secs(60));
    create_partitions(&bootstrap, partitions_wanted()).await;
    assert!(
        writes.sent() < records.len(),
        "the producer finished before the partitions were created"
    );
    let acked = writes.finish().await;
    for node in 1..=3 {
        let broker = cluster.node(node);
        let log = broker.log();
        assert!(
            !log.contains("fencing brokers whose session expired"),
            "node {node} fenced a live broker:\n{}",
            log.lines()
                .filter(|line| line.contains("fenc") || line.contains("heartbeat"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert_eq!(
            fenced_brokers(broker),
            0,
            "node {node} lists fenced brokers"
        );
    }
    let sent: Vec<_> = acked.iter().map(|(i, _, _)| records[*i].clone()).collect();
    let delivered: Vec<(i32, i64)> = acked.iter().map(|(_, p, o)| (*p, *o)).collect();
    let consumed = consume_to_end(&bootstrap, "steady", 4, Duration::from_secs(120));
    assert_delivered_as_consumed(&sent, &delivered, &consumed);
}

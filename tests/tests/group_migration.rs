//! Online migration of a live consumer group between the classic protocol
//! and KIP-848 (`group.consumer.migration.policy`, bidirectional by
//! default), through librdkafka against a real `rill serve`: two classic
//! consumers share a topic; a `group.protocol=consumer` consumer joins the
//! same group (which turns KIP-848 and keeps its classic members), all
//! three split the partitions without overlap and read every record; when
//! it leaves, the group turns classic again and the two read on.

use crate::groups::{consumer, settle, values};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rill_tests::kafka::{client_config, create_topic, produce_all, producer};
use rill_tests::{data_dir, raw, Broker};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TOPIC: &str = "migrating";
const GROUP: &str = "migrating-group";

/// A broker whose KIP-848 members heartbeat every 500 ms and whose
/// classic groups start their first rebalance at once.
fn start_broker(dir: &std::path::Path) -> Broker {
    let config = dir.join("rill.toml");
    let settings = [
        "\"group.initial.rebalance.delay.ms\" = 0",
        "\"group.consumer.min.heartbeat.interval.ms\" = 500",
        "\"group.consumer.heartbeat.interval.ms\" = 500",
    ];
    std::fs::write(&config, settings.join("\n") + "\n").expect("config");
    let config = config.to_string_lossy().to_string();
    Broker::start(RILL, dir, &["--config", &config])
}

fn kip848(bootstrap: &str) -> BaseConsumer {
    let mut c = client_config(bootstrap);
    c.set("group.id", GROUP)
        .set("group.protocol", "consumer")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100");
    c.create().expect("KIP-848 consumer")
}

/// Polls `consumers` until the `n` distinct values starting with `prefix`
/// arrived; returns how many of them each one read. Panics after 30 s.
fn read_all(consumers: &[&BaseConsumer], prefix: &str, n: usize) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    let mut per = vec![0; consumers.len()];
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < n {
        assert!(Instant::now() < deadline, "read {} of {n}", seen.len());
        for (i, c) in consumers.iter().enumerate() {
            let Some(Ok(m)) = c.poll(Duration::from_millis(20)) else {
                continue;
            };
            let value = m.payload().unwrap_or_default();
            if value.starts_with(prefix.as_bytes()) {
                per[i] += 1;
                seen.insert(value.to_vec());
            }
        }
    }
    per
}

/// The `member_type` of each member ConsumerGroupDescribe v1 lists
/// (0: classic, 1: consumer), sorted; every member's host is checked.
fn member_types(addr: SocketAddr) -> Vec<i8> {
    let mut request = ConsumerGroupDescribeRequest::default();
    request.group_ids = vec![GroupId(StrBytes::from_static_str(GROUP))];
    let response: ConsumerGroupDescribeResponse =
        raw::request(addr, ApiKey::ConsumerGroupDescribe, 1, &request).expect("described");
    let group = response.groups.into_iter().next().expect("one group");
    assert_eq!(group.error_code, 0, "a KIP-848 group");
    for m in &group.members {
        assert_eq!(
            m.client_host.as_str(),
            "/127.0.0.1",
            "Kafka's form of the address"
        );
    }
    let mut types: Vec<i8> = group.members.iter().map(|m| m.member_type).collect();
    types.sort();
    types
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_group_moves_to_kip848_and_back_without_stopping() {
    let dir = data_dir();
    let broker = start_broker(dir.path());
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, TOPIC, 6, &[]).await;
    let a = consumer(&bootstrap, GROUP, &[]);
    let b = consumer(&bootstrap, GROUP, &[]);
    for c in [&a, &b] {
        c.subscribe(&[TOPIC]).expect("subscribe");
    }
    settle(&[&a, &b], 6, Duration::from_secs(30));

    // A KIP-848 member joins the live classic group: before online
    // migration it was refused with GROUP_ID_NOT_FOUND, fatal to it.
    let c = kip848(&bootstrap);
    c.subscribe(&[TOPIC]).expect("subscribe");
    let shares = settle(&[&a, &b, &c], 6, Duration::from_secs(30));
    assert!(shares.iter().all(|s| !s.is_empty()), "{shares:?}");
    assert_eq!(member_types(broker.addr), vec![0, 0, 1]);
    let p = producer(&bootstrap, &[]);
    produce_all(&p, TOPIC, &values(120, "mixed"), None).await;
    let per = read_all(&[&a, &b, &c], "mixed", 120);
    assert!(
        per.iter().all(|n| *n > 0),
        "each member read its share: {per:?}"
    );

    // The last KIP-848 member leaves: the group turns classic again and
    // its two classic members take every partition between them.
    drop(c);
    settle(&[&a, &b], 6, Duration::from_secs(30));
    produce_all(&p, TOPIC, &values(60, "classic-again"), None).await;
    let per = read_all(&[&a, &b], "classic-again", 60);
    assert!(per.iter().all(|n| *n > 0), "both read on: {per:?}");
}

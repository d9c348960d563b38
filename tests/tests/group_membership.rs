//! KIP-848 consumer groups and KIP-932 share groups keep their membership
//! across a coordinator restart, as in Kafka: the members go on at their
//! epochs with what they own, and no group rebalances.
//!
//! - By hand (raw ConsumerGroupHeartbeat and ShareGroupHeartbeat): a
//!   member's heartbeat at its epoch after the restart is answered at that
//!   epoch with the same assignment (before, UNKNOWN_MEMBER_ID).
//! - With librdkafka (`group.protocol=consumer`): a consumer reading
//!   through a broker restart sees no rebalance and reads every record
//!   produced after it; so does one whose coordinator, one of three
//!   brokers, is SIGKILLed (the coordinator fails over to a replica of its
//!   `__consumer_offsets` partition).

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId,
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rill_tests::cluster::{find_coordinator, wait_for, Cluster};
use rill_tests::kafka::{
    client_config, create_topic, create_topic_replicated, produce_all, producer,
};
use rill_tests::{data_dir, Broker};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Kafka's codes a heartbeat gets while the coordinator is not ready.
const RETRIABLE: [i16; 3] = [14, 15, 16];

/// A member's assignment as (topic id, sorted partitions).
type Assignment = Vec<([u8; 16], Vec<i32>)>;

fn consumer_heartbeat(
    broker: &Broker,
    member: &str,
    epoch: i32,
    owned: &Assignment,
) -> ConsumerGroupHeartbeatResponse {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = GroupId(StrBytes::from_static_str("kip848"));
    r.member_id = StrBytes::from_string(member.into());
    r.member_epoch = epoch;
    r.rebalance_timeout_ms = 30_000;
    r.subscribed_topic_names = Some(vec![TopicName(StrBytes::from_static_str("t"))]);
    r.server_assignor = Some(StrBytes::from_static_str("uniform"));
    r.topic_partitions = Some(
        (owned.iter())
            .map(|(id, partitions)| {
                TopicPartitions::default()
                    .with_topic_id(uuid::Uuid::from_bytes(*id))
                    .with_partitions(partitions.clone())
            })
            .collect(),
    );
    rill_tests::raw::request(broker.addr, ApiKey::ConsumerGroupHeartbeat, 0, &r)
        .expect("ConsumerGroupHeartbeat")
}

fn assignment_of(r: &ConsumerGroupHeartbeatResponse) -> Option<Assignment> {
    let a = r.assignment.as_ref()?;
    let mut out: Assignment = (a.topic_partitions.iter())
        .map(|t| {
            let mut partitions = t.partitions.clone();
            partitions.sort_unstable();
            (*t.topic_id.as_bytes(), partitions)
        })
        .collect();
    out.sort();
    Some(out)
}

fn share_heartbeat(broker: &Broker, member: &str, epoch: i32) -> ShareGroupHeartbeatResponse {
    let mut r = ShareGroupHeartbeatRequest::default();
    r.group_id = GroupId(StrBytes::from_static_str("share"));
    r.member_id = StrBytes::from_string(member.into());
    r.member_epoch = epoch;
    r.subscribed_topic_names = Some(vec![TopicName(StrBytes::from_static_str("t"))]);
    rill_tests::raw::request(broker.addr, ApiKey::ShareGroupHeartbeat, 1, &r)
        .expect("ShareGroupHeartbeat")
}

/// Calls `beat` until the coordinator is ready (it loads its partition
/// after a restart), then returns its answer.
fn when_ready<R>(mut beat: impl FnMut() -> R, code: impl Fn(&R) -> i16) -> R {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = beat();
        if !RETRIABLE.contains(&code(&answer)) || Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_go_on_at_their_epochs_after_a_restart() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &[]);
    create_topic(&broker.bootstrap(), "t", 3, &[]).await;

    // A KIP-848 member joins and takes all three partitions.
    let joined = when_ready(
        || consumer_heartbeat(&broker, "m", 0, &Vec::new()),
        |r| r.error_code,
    );
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let owned = assignment_of(&joined).expect("an assignment");
    let stable = consumer_heartbeat(&broker, "m", joined.member_epoch, &owned);
    assert_eq!(stable.error_code, 0, "{stable:?}");
    let epoch = stable.member_epoch;
    let share = when_ready(|| share_heartbeat(&broker, "s", 0), |r| r.error_code);
    assert_eq!(share.error_code, 0, "{share:?}");

    broker.stop();
    broker.restart();

    let again = when_ready(
        || consumer_heartbeat(&broker, "m", epoch, &owned),
        |r| r.error_code,
    );
    assert_eq!(again.error_code, 0, "the member is known: {again:?}");
    assert_eq!(again.member_epoch, epoch, "no new epoch");
    if let Some(assignment) = assignment_of(&again) {
        assert_eq!(assignment, owned);
    }
    let share_again = when_ready(
        || share_heartbeat(&broker, "s", share.member_epoch),
        |r| r.error_code,
    );
    assert_eq!(share_again.error_code, 0, "{share_again:?}");
    assert_eq!(share_again.member_epoch, share.member_epoch);
    let partitions = |r: &ShareGroupHeartbeatResponse| {
        (r.assignment.iter())
            .flat_map(|a| a.topic_partitions.iter())
            .flat_map(|t| t.partitions.iter().copied())
            .collect::<BTreeSet<i32>>()
    };
    assert_eq!(partitions(&share_again), partitions(&share));
}

/// Counts librdkafka's rebalance callbacks.
struct Counting(Arc<AtomicUsize>);

impl ClientContext for Counting {}

impl ConsumerContext for Counting {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        eprintln!("rebalance: {rebalance:?}");
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `consumer` until it has read `count` records of `prefix`.
fn read(consumer: &BaseConsumer<Counting>, prefix: &str, count: usize) -> BTreeSet<Vec<u8>> {
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < count && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let value = m.payload().unwrap_or_default();
            if value.starts_with(prefix.as_bytes()) {
                seen.insert(value.to_vec());
            }
        }
    }
    seen
}

fn values(n: usize, prefix: &str) -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
    (0..n)
        .map(|i| (None, format!("{prefix}-{i}").into_bytes()))
        .collect()
}

/// A KIP-848 consumer of `topic` in `group` that counts its rebalances.
fn counting_consumer(
    bootstrap: &str,
    group: &str,
    topic: &str,
) -> (BaseConsumer<Counting>, Arc<AtomicUsize>) {
    let rebalances = Arc::new(AtomicUsize::new(0));
    let mut config = client_config(bootstrap);
    config
        .set("group.id", group)
        .set("group.protocol", "consumer")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100");
    let consumer: BaseConsumer<Counting> = config
        .create_with_context(Counting(rebalances.clone()))
        .expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    (consumer, rebalances)
}

/// Reads `after`'s records, then polls a few heartbeats more, and checks
/// that the consumer kept its three partitions without a rebalance since
/// `settled` callbacks.
fn assert_read_on_unrebalanced(
    consumer: &BaseConsumer<Counting>,
    rebalances: &AtomicUsize,
    settled: usize,
) {
    assert_eq!(read(consumer, "after", 60).len(), 60, "read on");
    let quiet_until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < quiet_until {
        let _ = consumer.poll(Duration::from_millis(100));
    }
    let now = rebalances.load(Ordering::SeqCst);
    assert_eq!(now, settled, "the group was rebalanced");
    assert_eq!(consumer.assignment().expect("assignment").count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kip848_consumer_is_not_rebalanced_by_a_broker_restart() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "r", 3, &[]).await;
    let (consumer, rebalances) = counting_consumer(&bootstrap, "kip848-restart", "r");
    produce_all(&producer(&bootstrap, &[]), "r", &values(60, "before"), None).await;
    assert_eq!(read(&consumer, "before", 60).len(), 60);
    assert_eq!(consumer.assignment().expect("assignment").count(), 3);
    let settled = rebalances.load(Ordering::SeqCst);

    broker.stop();
    broker.restart();
    produce_all(&producer(&bootstrap, &[]), "r", &values(60, "after"), None).await;
    assert_read_on_unrebalanced(&consumer, &rebalances, settled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kip848_consumer_is_not_rebalanced_when_its_coordinator_fails_over() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], Duration::from_secs(60));
    let bootstrap = cluster.bootstrap();
    create_topic_replicated(&bootstrap, "f", 3, 3, &[]).await;
    let (consumer, rebalances) = counting_consumer(&bootstrap, "kip848-failover", "f");
    let p = producer(&bootstrap, &[("acks", "all")]);
    produce_all(&p, "f", &values(60, "before"), None).await;
    assert_eq!(read(&consumer, "before", 60).len(), 60);
    assert_eq!(consumer.assignment().expect("assignment").count(), 3);
    let settled = rebalances.load(Ordering::SeqCst);

    let coordinator = wait_for("the group's coordinator", Duration::from_secs(30), || {
        find_coordinator(&bootstrap, "kip848-failover", 0)
    });
    cluster.node(coordinator).kill();
    let survivors: Vec<String> = (cluster.ids.iter().zip(&cluster.brokers))
        .filter(|(id, _)| **id != coordinator)
        .map(|(_, broker)| broker.bootstrap())
        .collect();
    let survivors = survivors.join(",");
    let moved = wait_for("a new coordinator", Duration::from_secs(60), || {
        find_coordinator(&survivors, "kip848-failover", 0).filter(|id| *id != coordinator)
    });
    eprintln!("coordinator {coordinator} killed; {moved} took over");
    produce_all(&p, "f", &values(60, "after"), None).await;
    assert_read_on_unrebalanced(&consumer, &rebalances, settled);
}

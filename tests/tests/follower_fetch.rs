//! Fetch from the closest replica (KIP-392) on three real `rill`
//! processes, node N in rack `rack-N`: with Kafka's
//! `RackAwareReplicaSelector` the leader sends a consumer in a follower's
//! rack to that follower, the follower serves it up to its own high
//! watermark and last stable offset, and librdkafka with `client.rack`
//! reads everything through the follower. Without a selector the leader
//! serves every rack.

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};
use rill_tests::cluster::{wait_for, Cluster};
use rill_tests::kafka::{client_config, create_topic_replicated};
use rill_tests::raw;
use rill_tests::replicated::{idempotent_producer, partition_view, produce_numbers};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// An election, a session expiry and a catch-up on a loaded two-core
/// machine.
const SETTLE: Duration = Duration::from_secs(60);

const TOPIC: &str = "closest";
const RACK_AWARE: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// Three nodes, node N with `broker.rack=rack-N` and, when given,
/// `replica.selector.class`; every node lists all three when it returns.
fn racked_cluster(dir: &Path, selector: Option<&str>) -> Cluster {
    let mut cluster = Cluster::start_each(RILL, 3, &[], |id| {
        let path = dir.join(format!("node-{id}.properties"));
        let mut settings = format!("broker.rack=rack-{id}\n");
        if let Some(class) = selector {
            settings.push_str(&format!("replica.selector.class={class}\n"));
        }
        std::fs::write(&path, settings).expect("settings file written");
        vec!["--config".to_string(), path.display().to_string()]
    });
    cluster.wait_settled(SETTLE);
    cluster
}

/// Creates the RF=3 topic and waits for all three in its ISR.
fn create_topic(runtime: &tokio::runtime::Runtime, bootstrap: &str) {
    runtime.block_on(create_topic_replicated(bootstrap, TOPIC, 1, 3, &[]));
    wait_for("all three in the ISR", SETTLE, || {
        (partition_view(bootstrap, TOPIC)?.isr == vec![1, 2, 3]).then_some(())
    });
}

/// A racked cluster whose RF=3 topic holds `0..count`, and who leads it.
struct Racked {
    cluster: Cluster,
    bootstrap: String,
    runtime: tokio::runtime::Runtime,
    producer: FutureProducer,
    leader: i32,
    /// The leader epoch.
    epoch: i32,
    /// A follower, and its rack.
    follower: i32,
    rack: String,
}

impl Racked {
    fn with_records(dir: &Path, selector: Option<&str>, count: u32) -> Racked {
        let mut cluster = racked_cluster(dir, selector);
        let bootstrap = cluster.bootstrap();
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        create_topic(&runtime, &bootstrap);
        let producer = idempotent_producer(&bootstrap);
        let acknowledged = runtime.block_on(produce_numbers(&producer, TOPIC, 0..count));
        assert_eq!(acknowledged.len(), count as usize, "all acknowledged");
        let first = cluster.node(1).addr;
        let (leader, epoch) = wait_for("a leader", SETTLE, || leader_and_epoch(first));
        let follower = (1..=3).find(|&id| id != leader).expect("a follower");
        Racked {
            cluster,
            bootstrap,
            runtime,
            producer,
            leader,
            epoch,
            follower,
            rack: format!("rack-{follower}"),
        }
    }
}

/// Partition 0's (leader, leader epoch) as `addr` reports it.
fn leader_and_epoch(addr: SocketAddr) -> Option<(i32, i32)> {
    let mut topic = MetadataRequestTopic::default();
    topic.name = Some(TopicName(StrBytes::from_static_str(TOPIC)));
    let mut body = MetadataRequest::default();
    body.topics = Some(vec![topic]);
    let response: MetadataResponse = raw::request(addr, ApiKey::Metadata, 12, &body).ok()?;
    let partition = response.topics.first()?.partitions.first()?;
    (partition.error_code == 0 && partition.leader_id.0 >= 0)
        .then_some((partition.leader_id.0, partition.leader_epoch))
}

/// A consumer's fetch of partition 0.
struct ConsumerFetch<'a> {
    version: i16,
    rack: &'a str,
    current_leader_epoch: i32,
    offset: i64,
    read_committed: bool,
}

impl ConsumerFetch<'_> {
    /// Sends it to `addr` without waiting for data: the partition's answer.
    fn send(&self, addr: SocketAddr) -> PartitionData {
        let mut partition = FetchPartition::default();
        partition.partition = 0;
        partition.fetch_offset = self.offset;
        partition.partition_max_bytes = 1 << 20;
        partition.current_leader_epoch = self.current_leader_epoch;
        let mut topic = FetchTopic::default();
        topic.topic = TopicName(StrBytes::from_static_str(TOPIC));
        topic.partitions = vec![partition];
        let mut body = FetchRequest::default();
        body.replica_id = BrokerId(-1);
        body.max_wait_ms = 0;
        body.min_bytes = 1;
        body.max_bytes = 1 << 20;
        body.isolation_level = i8::from(self.read_committed);
        body.session_epoch = -1;
        body.rack_id = StrBytes::from_string(self.rack.to_string());
        body.topics = vec![topic];
        let response: FetchResponse =
            raw::request(addr, ApiKey::Fetch, self.version, &body).expect("Fetch answered");
        (response.responses.into_iter())
            .flat_map(|t| t.partitions)
            .next()
            .expect("an answer for partition 0")
    }
}

/// A v12 fetch from offset 0 by a consumer in `rack` that knows `epoch`.
fn fetch_v12(rack: &str, epoch: i32) -> ConsumerFetch<'_> {
    ConsumerFetch {
        version: 12,
        rack,
        current_leader_epoch: epoch,
        offset: 0,
        read_committed: false,
    }
}

/// ListOffsets v7 of partition 0's latest offset from `addr`, by a client
/// that knows `epoch`: (error code, offset).
fn list_latest(addr: SocketAddr, epoch: i32) -> (i16, i64) {
    let mut partition = ListOffsetsPartition::default();
    partition.partition_index = 0;
    partition.current_leader_epoch = epoch;
    partition.timestamp = -1;
    let mut topic = ListOffsetsTopic::default();
    topic.name = TopicName(StrBytes::from_static_str(TOPIC));
    topic.partitions = vec![partition];
    let mut body = ListOffsetsRequest::default();
    body.replica_id = BrokerId(-1);
    body.topics = vec![topic];
    let response: ListOffsetsResponse =
        raw::request(addr, ApiKey::ListOffsets, 7, &body).expect("ListOffsets answered");
    let answer = (response.topics.into_iter())
        .flat_map(|t| t.partitions)
        .next()
        .expect("an answer for partition 0");
    (answer.error_code, answer.offset)
}

fn has_records(answer: &PartitionData) -> bool {
    answer.records.as_ref().is_some_and(|r| !r.is_empty())
}

/// Keeps what librdkafka's statistics say of partition 0: (the broker it
/// fetches from, its leader).
#[derive(Clone, Default)]
struct FetchedFrom(Arc<Mutex<Option<(i32, i32)>>>);

impl ClientContext for FetchedFrom {
    fn stats(&self, statistics: Statistics) {
        let seen = (statistics.topics.get(TOPIC))
            .and_then(|topic| topic.partitions.get(&0))
            .map(|p| (p.broker, p.leader));
        if let (Some(seen), Ok(mut kept)) = (seen, self.0.lock()) {
            *kept = Some(seen);
        }
    }
}

impl ConsumerContext for FetchedFrom {}

/// A librdkafka consumer in `rack` on partition 0 from the start.
fn rack_consumer(bootstrap: &str, rack: &str) -> (BaseConsumer<FetchedFrom>, FetchedFrom) {
    let context = FetchedFrom::default();
    let consumer: BaseConsumer<FetchedFrom> = client_config(bootstrap)
        .set("group.id", "closest-readers")
        .set("client.rack", rack)
        .set("enable.auto.commit", "false")
        .set("statistics.interval.ms", "200")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create_with_context(context.clone())
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(TOPIC, 0, Offset::Beginning)
        .expect("partition added");
    consumer.assign(&assignment).expect("assigned");
    (consumer, context)
}

/// The values of the next `count` records, as numbers.
fn read_values(consumer: &BaseConsumer<FetchedFrom>, count: usize) -> Vec<u32> {
    let mut values = Vec::with_capacity(count);
    wait_for("the records", SETTLE, || {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
            let text = std::str::from_utf8(message.payload().unwrap_or_default()).ok()?;
            values.push(text.parse().expect("a number"));
        }
        (values.len() >= count).then_some(())
    });
    values
}

#[test]
fn a_consumer_in_a_followers_rack_reads_from_that_follower() {
    let configs = tempfile::tempdir().expect("settings dir");
    let Racked {
        mut cluster,
        bootstrap,
        runtime,
        producer,
        leader,
        epoch,
        follower,
        rack,
    } = Racked::with_records(configs.path(), Some(RACK_AWARE), 200);
    let (leader_addr, follower_addr) = (cluster.node(leader).addr, cluster.node(follower).addr);

    // The leader names the follower in the consumer's rack, with no records.
    let redirect = wait_for("the leader to send the consumer on", SETTLE, || {
        let answer = fetch_v12(&rack, epoch).send(leader_addr);
        (answer.preferred_read_replica.0 == follower).then_some(answer)
    });
    assert_eq!(redirect.error_code, 0);
    assert!(!has_records(&redirect), "a redirect carries no records");
    assert_eq!(redirect.high_watermark, 200);
    // In the leader's own rack, or in none, the leader serves.
    for own in [format!("rack-{leader}"), String::new()] {
        let served = fetch_v12(&own, epoch).send(leader_addr);
        assert_eq!(
            (served.error_code, served.preferred_read_replica.0),
            (0, -1)
        );
        assert!(has_records(&served), "the leader serves rack {own:?}");
    }

    // The follower serves a v11+ consumer fetch, up to its own HW.
    let served = wait_for("the follower's HW at 200", SETTLE, || {
        let answer = fetch_v12(&rack, epoch).send(follower_addr);
        (answer.high_watermark == 200).then_some(answer)
    });
    assert_eq!(
        (served.error_code, served.preferred_read_replica.0),
        (0, -1)
    );
    assert!(has_records(&served), "the follower serves the records");
    // Not a fetch without client metadata, nor one from a future epoch.
    let old = ConsumerFetch {
        version: 10,
        rack: "",
        ..fetch_v12("", epoch)
    };
    assert_eq!(old.send(follower_addr).error_code, NOT_LEADER_OR_FOLLOWER);
    let ahead = fetch_v12(&rack, epoch + 1);
    assert_eq!(ahead.send(follower_addr).error_code, UNKNOWN_LEADER_EPOCH);
    assert_eq!(ahead.send(leader_addr).error_code, UNKNOWN_LEADER_EPOCH);
    // ListOffsets checks the epoch too (KIP-320), and only the leader
    // answers it.
    assert_eq!(list_latest(leader_addr, epoch), (0, 200));
    assert_eq!(list_latest(leader_addr, epoch + 1).0, UNKNOWN_LEADER_EPOCH);
    assert_eq!(list_latest(follower_addr, epoch).0, NOT_LEADER_OR_FOLLOWER);

    // librdkafka in the follower's rack reads everything from the follower,
    // and what is produced next reaches it through the follower.
    let (consumer, fetched_from) = rack_consumer(&bootstrap, &rack);
    assert_eq!(read_values(&consumer, 200), (0..200).collect::<Vec<_>>());
    wait_for("librdkafka to fetch from the follower", SETTLE, || {
        consumer.poll(Duration::from_millis(100));
        let seen = *fetched_from.0.lock().ok()?;
        (seen == Some((follower, leader))).then_some(())
    });
    // Both sides count it on /metrics.
    let redirects = cluster
        .node(leader)
        .metric_sum("rill_read_replica_redirects_total");
    assert!(redirects >= 2, "the raw fetch and librdkafka: {redirects}");
    let served = cluster
        .node(follower)
        .metric_sum("rill_follower_consumer_reads_total");
    assert!(served >= 2, "the raw fetches and librdkafka: {served}");
    let more = runtime.block_on(produce_numbers(&producer, TOPIC, 200..300));
    assert_eq!(more.len(), 100);
    assert_eq!(read_values(&consumer, 100), (200..300).collect::<Vec<_>>());

    read_committed_stops_at_the_followers_lso(&runtime, &bootstrap, follower_addr, &rack, epoch);

    // The follower dies: librdkafka goes back to the leader, and loses
    // nothing.
    cluster.node(follower).kill();
    let after = runtime.block_on(produce_numbers(&producer, TOPIC, 311..400));
    assert_eq!(after.len(), 89);
    let mut values = read_values(&consumer, 99);
    values.retain(|v| !(300..310).contains(v));
    assert_eq!(values, (311..400).collect::<Vec<_>>());
    cluster.node(follower).restart();
    wait_for("all three in the ISR again", SETTLE, || {
        (partition_view(&bootstrap, TOPIC)?.isr == vec![1, 2, 3]).then_some(())
    });

    // A new leader: a consumer still on the old epoch is fenced off.
    cluster.node(leader).kill();
    let survivors: Vec<i32> = (1..=3).filter(|&id| id != leader).collect();
    for &id in &survivors {
        let addr = cluster.node(id).addr;
        wait_for("the old epoch fenced", SETTLE, || {
            let code = fetch_v12(&rack, epoch).send(addr).error_code;
            (code == FENCED_LEADER_EPOCH).then_some(())
        });
    }
    let survivor = cluster.node(survivors[0]).addr;
    let (new_leader, new_epoch) = wait_for("a new leader", SETTLE, || {
        leader_and_epoch(survivor).filter(|&(id, _)| id != leader)
    });
    assert!(new_epoch > epoch, "{new_epoch} after {epoch}");
    let new_leader_addr = cluster.node(new_leader).addr;
    wait_for("the new leader to list offsets", SETTLE, || {
        (list_latest(new_leader_addr, new_epoch).0 == 0).then_some(())
    });
    assert_eq!(list_latest(new_leader_addr, epoch).0, FENCED_LEADER_EPOCH);
}

/// An open transaction holds the follower's last stable offset at its
/// first record (300) until it commits.
fn read_committed_stops_at_the_followers_lso(
    runtime: &tokio::runtime::Runtime,
    bootstrap: &str,
    follower: SocketAddr,
    rack: &str,
    epoch: i32,
) {
    let transactional: FutureProducer = client_config(bootstrap)
        .set("transactional.id", "closest-writer")
        .create()
        .expect("transactional producer");
    let timeout = Duration::from_secs(30);
    transactional.init_transactions(timeout).expect("init");
    transactional.begin_transaction().expect("begin");
    for value in 300..310u32 {
        let payload = value.to_string();
        let record: FutureRecord<'_, (), String> =
            FutureRecord::to(TOPIC).payload(&payload).partition(0);
        let sent = runtime.block_on(transactional.send(record, timeout));
        assert!(sent.is_ok(), "record {value} written: {sent:?}");
    }
    let committed = ConsumerFetch {
        offset: 300,
        read_committed: true,
        ..fetch_v12(rack, epoch)
    };
    let open = wait_for("the open transaction on the follower", SETTLE, || {
        let answer = committed.send(follower);
        (answer.high_watermark == 310).then_some(answer)
    });
    assert_eq!(open.last_stable_offset, 300);
    assert!(!has_records(&open), "nothing past the LSO");
    transactional.commit_transaction(timeout).expect("commit");
    let settled = wait_for("the commit on the follower", SETTLE, || {
        let answer = committed.send(follower);
        (answer.last_stable_offset == 311).then_some(answer)
    });
    assert!(has_records(&settled), "the committed records");
}

#[test]
fn without_a_selector_the_leader_serves_every_rack() {
    let configs = tempfile::tempdir().expect("settings dir");
    let mut racked = Racked::with_records(configs.path(), None, 50);
    let (leader, follower, epoch) = (racked.leader, racked.follower, racked.epoch);
    let (rack, cluster) = (racked.rack.clone(), &mut racked.cluster);
    // Every follower has fetched the 50 records (acks=all with all three
    // in the ISR): a selector would name one now.
    let served = fetch_v12(&rack, epoch).send(cluster.node(leader).addr);
    assert_eq!(
        (served.error_code, served.preferred_read_replica.0),
        (0, -1)
    );
    assert!(has_records(&served), "the leader serves the records");
    let from_follower = fetch_v12(&rack, epoch).send(cluster.node(follower).addr);
    assert_eq!(from_follower.error_code, 0, "a follower still serves v11+");
    let redirects = cluster
        .node(leader)
        .metric_sum("rill_read_replica_redirects_total");
    assert_eq!(redirects, 0, "no consumer was sent elsewhere");
}

#[test]
fn a_selector_rill_does_not_have_stops_the_start() {
    let dir = tempfile::tempdir().expect("dir");
    rill_tests::assert_settings_refused(
        RILL,
        dir.path(),
        "replica.selector.class=com.example.NearestReplicaSelector\n",
        &["replica.selector.class", "RackAwareReplicaSelector"],
    );
}

//! DescribeTopicPartitions (key 75) and DescribeProducers (key 61), the
//! APIs Kafka 3.8+ admin tools use, asked of a real `rill` over the wire.
//!
//! What must hold: every partition of the asked topics is described with
//! its leader, replicas and ISR; a small `response_partition_limit` pages
//! through them with `next_cursor`, each partition listed exactly once; an
//! unknown topic is UNKNOWN_TOPIC_OR_PARTITION and a cursor outside the
//! asked topics INVALID_REQUEST; in a three-broker cluster a replicated
//! partition lists all three ids. DescribeProducers lists an idempotent
//! producer's epoch and last sequence, a transactional producer's open
//! transaction (its first offset) and no open transaction once committed;
//! every replica of a partition (followers too, as in Kafka) lists its
//! producers; an unknown partition is UNKNOWN_TOPIC_OR_PARTITION and a
//! broker without a replica of the partition answers NOT_LEADER_OR_FOLLOWER.
//! Under ACLs, a topic the caller may not DESCRIBE is refused by name and
//! left out of the every-topic listing, and DescribeProducers needs READ.

use kafka_protocol::messages::describe_producers_request::TopicRequest as ProducersTopic;
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState};
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rill_tests::cluster::{describe_cluster, wait_for, Cluster};
use rill_tests::kafka::{client_config, create_topic, create_topic_replicated, producer};
use rill_tests::{data_dir, Broker};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TIMEOUT: Duration = Duration::from_secs(30);
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const INVALID_REQUEST: i16 = 42;
/// Kafka's bit of DESCRIBE (operation code 8) in `topic_authorized_operations`.
const DESCRIBE_BIT: i32 = 1 << 8;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// DescribeTopicPartitions v0 of `topics` (empty: every topic).
fn describe_topics(
    addr: SocketAddr,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsResponse {
    let mut body = DescribeTopicPartitionsRequest::default();
    body.topics = topics
        .iter()
        .map(|t| {
            let mut topic = TopicRequest::default();
            topic.name = name(t);
            topic
        })
        .collect();
    body.response_partition_limit = limit;
    body.cursor = cursor.map(|(topic, partition)| {
        let mut c = Cursor::default();
        c.topic_name = name(topic);
        c.partition_index = partition;
        c
    });
    rill_tests::raw::request(addr, ApiKey::DescribeTopicPartitions, 0, &body)
        .expect("DescribeTopicPartitions answered")
}

fn topic<'a>(
    response: &'a DescribeTopicPartitionsResponse,
    wanted: &str,
) -> &'a DescribeTopicPartitionsResponseTopic {
    response
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == wanted))
        .unwrap_or_else(|| panic!("{wanted} in {response:?}"))
}

fn ids(brokers: &[kafka_protocol::messages::BrokerId]) -> Vec<i32> {
    let mut ids: Vec<i32> = brokers.iter().map(|b| b.0).collect();
    ids.sort_unstable();
    ids
}

/// DescribeProducers v0 of one partition: its answer.
fn describe_producers(addr: SocketAddr, topic: &str, partition: i32) -> PartitionResponse {
    let mut asked = ProducersTopic::default();
    asked.name = name(topic);
    asked.partition_indexes = vec![partition];
    let mut body = DescribeProducersRequest::default();
    body.topics = vec![asked];
    let response: DescribeProducersResponse =
        rill_tests::raw::request(addr, ApiKey::DescribeProducers, 0, &body)
            .expect("DescribeProducers answered");
    assert_eq!(response.topics.len(), 1, "{response:?}");
    assert_eq!(response.topics[0].name.0.as_str(), topic);
    assert_eq!(response.topics[0].partitions.len(), 1, "{response:?}");
    let answer = response.topics[0].partitions[0].clone();
    assert_eq!(answer.partition_index, partition);
    answer
}

fn only_producer(answer: &PartitionResponse) -> ProducerState {
    assert_eq!(answer.error_code, 0, "{answer:?}");
    assert_eq!(answer.active_producers.len(), 1, "{answer:?}");
    answer.active_producers[0].clone()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[test]
fn describe_topic_partitions_lists_every_partition_page_by_page() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(create_topic(&broker.bootstrap(), "alpha", 5, &[]));
    runtime.block_on(create_topic(&broker.bootstrap(), "beta", 3, &[]));
    let (_, brokers) = describe_cluster(&broker).expect("DescribeCluster");
    assert_eq!(brokers.len(), 1, "{brokers:?}");
    let own = brokers[0];

    // Both topics whole, in one page.
    let whole = describe_topics(broker.addr, &["beta", "alpha"], 2000, None);
    assert!(whole.next_cursor.is_none(), "{whole:?}");
    for (wanted, count) in [("alpha", 5), ("beta", 3)] {
        let t = topic(&whole, wanted);
        assert_eq!(t.error_code, 0, "{t:?}");
        assert!(!t.topic_id.is_nil(), "{wanted} has its id");
        assert!(!t.is_internal);
        assert_ne!(t.topic_authorized_operations & DESCRIBE_BIT, 0, "{t:?}");
        let indexes: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
        assert_eq!(indexes, (0..count).collect::<Vec<_>>(), "{wanted}");
        for p in &t.partitions {
            assert_eq!(p.error_code, 0, "{p:?}");
            assert_eq!(p.leader_id.0, own, "{p:?}");
            assert!(p.leader_epoch >= 0, "{p:?}");
            assert_eq!(ids(&p.replica_nodes), vec![own], "{p:?}");
            assert_eq!(ids(&p.isr_nodes), vec![own], "{p:?}");
            assert_eq!(p.eligible_leader_replicas.as_deref(), Some(&[][..]));
            assert_eq!(p.last_known_elr.as_deref(), Some(&[][..]));
            assert!(p.offline_replicas.is_empty(), "{p:?}");
        }
    }
    // Topics come in name order whatever the request's order.
    let order: Vec<&str> = whole
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.as_str()))
        .collect();
    assert_eq!(order, vec!["alpha", "beta"]);

    // Every topic, three partitions a page: the cursors walk through
    // alpha 0-4 and beta 0-2, each partition once.
    let mut seen: Vec<(String, i32)> = Vec::new();
    let mut cursor: Option<(String, i32)> = None;
    let mut pages = 0;
    loop {
        let page = describe_topics(
            broker.addr,
            &[],
            3,
            cursor.as_ref().map(|(t, p)| (t.as_str(), *p)),
        );
        pages += 1;
        let listed: usize = page.topics.iter().map(|t| t.partitions.len()).sum();
        assert!(listed <= 3, "a page holds at most the limit: {page:?}");
        if pages == 1 {
            let next = page.next_cursor.as_ref().expect("a first page of three");
            assert_eq!(
                (next.topic_name.0.as_str(), next.partition_index),
                ("alpha", 3)
            );
        }
        for t in &page.topics {
            assert_eq!(t.error_code, 0, "{t:?}");
            let topic_name = t.name.as_ref().expect("name").0.to_string();
            seen.extend(
                t.partitions
                    .iter()
                    .map(|p| (topic_name.clone(), p.partition_index)),
            );
        }
        match page.next_cursor {
            Some(next) => cursor = Some((next.topic_name.0.to_string(), next.partition_index)),
            None => break,
        }
        assert!(pages < 100, "the cursors end");
    }
    let unique: BTreeSet<&(String, i32)> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no partition twice: {seen:?}");
    let ours: Vec<(String, i32)> = seen
        .iter()
        .filter(|(t, _)| t == "alpha" || t == "beta")
        .cloned()
        .collect();
    let expected: Vec<(String, i32)> = (0..5)
        .map(|p| ("alpha".to_string(), p))
        .chain((0..3).map(|p| ("beta".to_string(), p)))
        .collect();
    assert_eq!(ours, expected);
    assert!(pages >= 3, "eight partitions take three pages of three");

    // A cursor inside the asked topics starts there.
    let rest = describe_topics(broker.addr, &["alpha", "beta"], 2000, Some(("beta", 1)));
    assert!(rest
        .topics
        .iter()
        .all(|t| t.name.as_ref().unwrap().0.as_str() == "beta"));
    let indexes: Vec<i32> = topic(&rest, "beta")
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(indexes, vec![1, 2]);

    // An unknown topic is answered as such, beside a known one.
    let mixed = describe_topics(broker.addr, &["alpha", "no-such-topic"], 2000, None);
    let unknown = topic(&mixed, "no-such-topic");
    assert_eq!(unknown.error_code, UNKNOWN_TOPIC_OR_PARTITION);
    assert!(unknown.partitions.is_empty());
    assert!(unknown.topic_id.is_nil());
    assert_eq!(topic(&mixed, "alpha").partitions.len(), 5);

    // A cursor naming a topic that was not asked is an invalid request.
    let invalid = describe_topics(broker.addr, &["alpha"], 2000, Some(("beta", 0)));
    assert_eq!(topic(&invalid, "alpha").error_code, INVALID_REQUEST);
}

/// A transactional producer of `transactional_id`, initialized.
fn txn_producer(bootstrap: &str, transactional_id: &str) -> BaseProducer {
    let mut c: ClientConfig = client_config(bootstrap);
    c.set("transactional.id", transactional_id)
        .set("linger.ms", "0");
    let p: BaseProducer = c.create().expect("transactional producer");
    p.init_transactions(TIMEOUT).expect("init_transactions");
    p
}

#[test]
fn describe_producers_shows_sequences_and_open_transactions() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(create_topic(&broker.bootstrap(), "ids", 2, &[]));
    runtime.block_on(create_topic(&broker.bootstrap(), "txn", 1, &[]));

    // An idempotent producer sends five records to partition 0, one at a
    // time: sequences 0..=4 under epoch 0.
    let before_ms = now_ms();
    let idempotent = producer(
        &broker.bootstrap(),
        &[("enable.idempotence", "true"), ("acks", "all")],
    );
    for i in 0..5 {
        let value = format!("v{i}");
        let record = rdkafka::producer::FutureRecord::<(), String>::to("ids")
            .payload(&value)
            .partition(0);
        runtime
            .block_on(idempotent.send(record, Duration::from_secs(10)))
            .expect("delivered");
    }
    let after_ms = now_ms();
    let state = only_producer(&describe_producers(broker.addr, "ids", 0));
    assert!(state.producer_id.0 >= 0, "{state:?}");
    assert_eq!(state.producer_epoch, 0, "{state:?}");
    assert_eq!(state.last_sequence, 4, "{state:?}");
    assert_eq!(state.current_txn_start_offset, -1, "{state:?}");
    assert!(
        (before_ms..=after_ms).contains(&state.last_timestamp),
        "last append between {before_ms} and {after_ms}: {state:?}"
    );
    // Partition 1 saw no producer.
    let empty = describe_producers(broker.addr, "ids", 1);
    assert_eq!(empty.error_code, 0);
    assert!(empty.active_producers.is_empty(), "{empty:?}");

    // A transactional producer mid-transaction: its transaction starts at
    // offset 0 of the new partition.
    let txn = txn_producer(&broker.bootstrap(), "describe-producers");
    txn.begin_transaction().expect("begin");
    for i in 0..3 {
        let value = format!("t{i}");
        txn.send(
            BaseRecord::<(), String>::to("txn")
                .payload(&value)
                .partition(0),
        )
        .expect("queued");
    }
    txn.flush(TIMEOUT).expect("flushed");
    let open = only_producer(&describe_producers(broker.addr, "txn", 0));
    assert_eq!(open.current_txn_start_offset, 0, "{open:?}");
    assert_eq!(open.last_sequence, 2, "{open:?}");
    assert_ne!(open.producer_id, state.producer_id, "another producer id");
    txn.commit_transaction(TIMEOUT).expect("commit");
    let committed = wait_for("the commit marker", TIMEOUT, || {
        let now = only_producer(&describe_producers(broker.addr, "txn", 0));
        (now.current_txn_start_offset == -1).then_some(now)
    });
    assert_eq!(committed.producer_id, open.producer_id);
    assert!(committed.coordinator_epoch >= 0, "{committed:?}");

    // Unknown topic, partition out of range.
    for (topic, partition) in [("no-such-topic", 0), ("ids", 9)] {
        let answer = describe_producers(broker.addr, topic, partition);
        assert_eq!(answer.error_code, UNKNOWN_TOPIC_OR_PARTITION, "{answer:?}");
        assert!(answer.active_producers.is_empty());
    }
}

#[test]
fn three_brokers_describe_replicas_and_refuse_producer_queries_off_replica() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], TIMEOUT);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let bootstrap = cluster.node(1).bootstrap();
    runtime.block_on(create_topic_replicated(&bootstrap, "wide", 2, 3, &[]));
    runtime.block_on(create_topic_replicated(&bootstrap, "narrow", 1, 1, &[]));

    // Every partition of the replicated topic has the three brokers as
    // replicas and, once they caught up, as ISR; the leader is one of them.
    let addr = cluster.node(2).addr;
    let wide = wait_for("the full ISR of every partition", TIMEOUT, || {
        let response = describe_topics(addr, &["wide"], 2000, None);
        let t = topic(&response, "wide").clone();
        let full = t.partitions.len() == 2
            && t.partitions
                .iter()
                .all(|p| ids(&p.isr_nodes) == vec![1, 2, 3]);
        full.then_some(t)
    });
    for p in &wide.partitions {
        assert_eq!(p.error_code, 0, "{p:?}");
        assert_eq!(ids(&p.replica_nodes), vec![1, 2, 3], "{p:?}");
        assert!((1..=3).contains(&p.leader_id.0), "{p:?}");
        assert!(p.offline_replicas.is_empty(), "{p:?}");
    }

    // An idempotent producer writes to `wide` 0: its leader and, once they
    // replicated the batch, both followers list it (any replica answers,
    // as in Kafka).
    let idempotent = producer(
        &bootstrap,
        &[("enable.idempotence", "true"), ("acks", "all")],
    );
    let record = rdkafka::producer::FutureRecord::<(), str>::to("wide")
        .payload("one")
        .partition(0);
    runtime
        .block_on(idempotent.send(record, Duration::from_secs(10)))
        .expect("delivered");
    let on_leader = only_producer(&describe_producers(
        cluster.node(wide.partitions[0].leader_id.0).addr,
        "wide",
        0,
    ));
    assert_eq!(on_leader.last_sequence, 0, "{on_leader:?}");
    // The last timestamp is each replica's own append time; the rest is
    // the leader's.
    let key = |p: &ProducerState| {
        (
            p.producer_id,
            p.producer_epoch,
            p.last_sequence,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
    };
    for node in 1..=3 {
        let addr = cluster.node(node).addr;
        wait_for("every replica to know the producer", TIMEOUT, || {
            let answer = describe_producers(addr, "wide", 0);
            let listed: Vec<_> = answer.active_producers.iter().map(key).collect();
            (answer.error_code == 0 && listed == vec![key(&on_leader)]).then_some(())
        });
    }

    // The single replica of `narrow` answers DescribeProducers; a broker
    // without a replica answers NOT_LEADER_OR_FOLLOWER.
    let narrow = describe_topics(addr, &["narrow"], 2000, None);
    let placed = &topic(&narrow, "narrow").partitions[0];
    assert_eq!(ids(&placed.replica_nodes), vec![placed.leader_id.0]);
    let leader = placed.leader_id.0;
    let other = (1..=3).find(|&n| n != leader).expect("another broker");
    let from_leader = describe_producers(cluster.node(leader).addr, "narrow", 0);
    assert_eq!(from_leader.error_code, 0, "{from_leader:?}");
    let from_other = describe_producers(cluster.node(other).addr, "narrow", 0);
    assert_eq!(
        from_other.error_code, NOT_LEADER_OR_FOLLOWER,
        "{from_other:?}"
    );
}

/// Kafka's codes for the ACLs below.
const TOPIC_RESOURCE: i8 = 2;
const READ: i8 = 3;
const DESCRIBE: i8 = 8;
const DENY: i8 = 2;
const ALLOW: i8 = 3;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// Kafka's bit of READ (operation code 3) in `topic_authorized_operations`.
const READ_BIT: i32 = 1 << 3;

#[test]
fn acls_hide_topics_from_describe_and_refuse_producer_queries_without_read() {
    let dir = data_dir();
    let settings = dir.path().join("acl-server.properties");
    std::fs::write(
        &settings,
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
         allow.everyone.if.no.acl.found=true\n",
    )
    .expect("write server.properties");
    let settings = settings.to_str().expect("utf-8 path");
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2", "--config", settings]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for name in ["open", "hidden", "unread"] {
        runtime.block_on(create_topic(&broker.bootstrap(), name, 1, &[]));
    }
    let codes = rill_tests::acl::create_acls(
        broker.addr,
        vec![
            rill_tests::acl::creation(TOPIC_RESOURCE, "hidden", "User:ANONYMOUS", DESCRIBE, DENY),
            rill_tests::acl::creation(TOPIC_RESOURCE, "unread", "User:ANONYMOUS", READ, DENY),
            // Once an ACL names a topic, allow.everyone.if.no.acl.found no
            // longer applies to it: DESCRIBE must be granted.
            rill_tests::acl::creation(TOPIC_RESOURCE, "unread", "User:ANONYMOUS", DESCRIBE, ALLOW),
        ],
    );
    assert_eq!(codes, [0, 0, 0]);

    // Asked by name, a topic the caller may not describe is refused without
    // its id; the others are described, with the operations allowed.
    let asked = describe_topics(broker.addr, &["hidden", "open", "unread"], 2000, None);
    let hidden = topic(&asked, "hidden");
    assert_eq!(hidden.error_code, TOPIC_AUTHORIZATION_FAILED, "{hidden:?}");
    assert!(hidden.topic_id.is_nil() && hidden.partitions.is_empty());
    let open = topic(&asked, "open");
    assert_eq!(open.error_code, 0);
    assert_eq!(open.partitions.len(), 1);
    assert_ne!(open.topic_authorized_operations & READ_BIT, 0, "{open:?}");
    let unread = topic(&asked, "unread");
    assert_eq!(unread.error_code, 0);
    assert_eq!(
        unread.topic_authorized_operations & READ_BIT,
        0,
        "{unread:?}"
    );
    assert_ne!(unread.topic_authorized_operations & DESCRIBE_BIT, 0);
    // Listing every topic leaves it out.
    let all = describe_topics(broker.addr, &[], 2000, None);
    let names: Vec<&str> = all
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.as_str()))
        .collect();
    assert!(
        names.contains(&"open") && names.contains(&"unread"),
        "{names:?}"
    );
    assert!(!names.contains(&"hidden"), "{names:?}");

    // DescribeProducers needs READ on the topic.
    assert_eq!(
        describe_producers(broker.addr, "unread", 0).error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        describe_producers(broker.addr, "hidden", 0).error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(describe_producers(broker.addr, "open", 0).error_code, 0);
}

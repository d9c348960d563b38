//! ACLs, Kafka's way (`authorizer.class.name`, `super.users`,
//! `allow.everyone.if.no.acl.found`): CreateAcls / DescribeAcls /
//! DeleteAcls on a real broker, their effect on Produce, Fetch, Metadata,
//! groups and CreateTopics without a restart, and their survival across
//! one. Every client here is `User:ANONYMOUS` (PLAINTEXT).

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse,
    ProduceResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::Message;
use rill_tests::acl::{create_acls, creation, LITERAL};
use rill_tests::kafka::{client_config, create_topic};
use rill_tests::{data_dir, raw, Broker};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

const STANDARD: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

// Kafka's codes.
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const ANY: i8 = 1;
const MATCH: i8 = 2;
const ALL: i8 = 2;
const READ: i8 = 3;
const DESCRIBE: i8 = 8;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const INVALID_REQUEST: i16 = 42;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const SECURITY_DISABLED: i16 = 54;

/// A broker with `settings` in its server.properties.
fn broker(dir: &std::path::Path, settings: &str) -> Broker {
    let file = dir.join("acl-server.properties");
    std::fs::write(&file, settings).expect("write server.properties");
    Broker::start(
        RILL,
        dir,
        &[
            "--cores",
            "2",
            "--config",
            file.to_str().expect("utf-8 path"),
        ],
    )
}

/// ElectLeaders v2 PREFERRED of partition 0 of `topic`: (top-level code,
/// the partition's code).
fn elect_leaders(addr: SocketAddr, topic: &str) -> (i16, i16) {
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
    let mut asked = TopicPartitions::default();
    asked.topic = TopicName(StrBytes::from_string(topic.to_owned()));
    asked.partitions = vec![0];
    let mut request = ElectLeadersRequest::default();
    request.topic_partitions = Some(vec![asked]);
    let response: ElectLeadersResponse =
        raw::request(addr, ApiKey::ElectLeaders, 2, &request).expect("ElectLeaders answered");
    let partition = &response.replica_election_results[0].partition_result[0];
    (response.error_code, partition.error_code)
}

/// UnregisterBroker v0 of `broker_id`: (error code, message).
fn unregister_broker(addr: SocketAddr, broker_id: i32) -> (i16, Option<String>) {
    use kafka_protocol::messages::{BrokerId, UnregisterBrokerRequest, UnregisterBrokerResponse};
    let mut request = UnregisterBrokerRequest::default();
    request.broker_id = BrokerId(broker_id);
    let response: UnregisterBrokerResponse =
        raw::request(addr, ApiKey::UnregisterBroker, 0, &request)
            .expect("UnregisterBroker answered");
    let message = response.error_message.map(|m| m.to_string());
    (response.error_code, message)
}

/// An ACL as the tests compare them: (type, name, principal, operation, permission).
type Acl = (i8, String, String, i8, i8);

/// DescribeAcls of every ACL: (error code, ACLs in order).
fn describe_acls(addr: SocketAddr) -> (i16, Vec<Acl>) {
    // The codec's defaults are empty strings, which match nothing: null
    // matches everything.
    let mut request = DescribeAclsRequest::default();
    request.resource_name_filter = None;
    request.principal_filter = None;
    request.host_filter = None;
    request.resource_type_filter = ANY;
    request.pattern_type_filter = ANY;
    request.operation = ANY;
    request.permission_type = ANY;
    let response: DescribeAclsResponse =
        raw::request(addr, ApiKey::DescribeAcls, 3, &request).expect("DescribeAcls answered");
    let mut acls = Vec::new();
    for resource in &response.resources {
        for acl in &resource.acls {
            acls.push((
                resource.resource_type,
                resource.resource_name.to_string(),
                acl.principal.to_string(),
                acl.operation,
                acl.permission_type,
            ));
        }
    }
    acls.sort();
    (response.error_code, acls)
}

/// Metadata: the listed topics with their error codes (`names`: None asks for all).
fn metadata(addr: SocketAddr, names: Option<&[&str]>) -> Vec<(String, i16)> {
    let mut request = MetadataRequest::default();
    request.topics = names.map(|names| {
        names
            .iter()
            .map(|n| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(TopicName(StrBytes::from_string(n.to_string())));
                t
            })
            .collect()
    });
    request.allow_auto_topic_creation = false;
    let response: MetadataResponse =
        raw::request(addr, ApiKey::Metadata, 12, &request).expect("Metadata answered");
    response
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                t.error_code,
            )
        })
        .collect()
}

/// Produce one record to partition 0 of `topic` (acks=-1): the partition's code.
fn produce(addr: SocketAddr, topic: &str) -> i16 {
    let mut data = TopicProduceData::default();
    data.name = TopicName(StrBytes::from_string(topic.to_string()));
    let request = raw::one_record_produce(data, b"v");
    let response: ProduceResponse =
        raw::request(addr, ApiKey::Produce, 9, &request).expect("Produce answered");
    response.responses[0].partition_responses[0].error_code
}

fn fetch_code(addr: SocketAddr, topic: &str) -> i16 {
    let mut partition = FetchPartition::default();
    partition.partition = 0;
    partition.fetch_offset = 0;
    partition.partition_max_bytes = 1 << 20;
    raw::fetch_v12(addr, topic, -1, partition).error_code
}

fn create_topics_code(addr: SocketAddr, name: &str) -> i16 {
    let mut topic = CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_string(name.to_string()));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![topic];
    request.timeout_ms = 10_000;
    let response: CreateTopicsResponse =
        raw::request(addr, ApiKey::CreateTopics, 7, &request).expect("CreateTopics answered");
    response.topics[0].error_code
}

/// Consumes `topic` through group `group` until `expected` records came.
fn consume_through_group(bootstrap: &str, topic: &str, group: &str, expected: usize) -> usize {
    let mut config = client_config(bootstrap);
    config
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = 0;
    while got < expected && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                assert_eq!(message.topic(), topic);
                got += 1;
            }
            Some(Err(e)) => panic!("consuming {topic} through {group}: {e}"),
            None => {}
        }
    }
    consumer
        .commit_consumer_state(rdkafka::consumer::CommitMode::Sync)
        .expect("offsets committed through the group");
    got
}

#[test]
fn acl_apis_answer_security_disabled_without_an_authorizer() {
    let dir = data_dir();
    let broker = broker(dir.path(), "");
    let codes = create_acls(
        broker.addr,
        vec![creation(TOPIC, "t", "User:ANONYMOUS", READ, ALLOW)],
    );
    assert_eq!(codes, [SECURITY_DISABLED]);
    assert_eq!(describe_acls(broker.addr).0, SECURITY_DISABLED);
    // And nothing is enforced.
    assert_eq!(create_topics_code(broker.addr, "free"), 0);
    assert_eq!(produce(broker.addr, "free"), 0);
}

#[test]
fn an_unknown_authorizer_class_stops_the_broker_at_start() {
    let dir = data_dir();
    let file = dir.path().join("bad.properties");
    std::fs::write(&file, "authorizer.class.name=com.example.Custom\n").expect("write");
    let output = std::process::Command::new(RILL)
        .args(["serve", "--data-dir"])
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--config"])
        .arg(&file)
        .output()
        .expect("rill runs");
    assert!(!output.status.success());
    let text = String::from_utf8_lossy(&output.stderr).to_string()
        + &String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("authorizer.class.name"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_grant_deny_take_effect_at_once_and_survive_a_restart() {
    let dir = data_dir();
    let mut broker = broker(
        dir.path(),
        &format!("authorizer.class.name={STANDARD}\nallow.everyone.if.no.acl.found=true\n"),
    );
    let addr = broker.addr;
    // No ACLs yet: everyone may do everything.
    create_topic(&broker.bootstrap(), "acl-a", 1, &[]).await;
    create_topic(&broker.bootstrap(), "acl-b", 1, &[]).await;
    for _ in 0..3 {
        assert_eq!(produce(addr, "acl-a"), 0);
    }
    assert_eq!(produce(addr, "acl-b"), 0);
    assert_eq!(describe_acls(addr), (0, Vec::new()));

    // An ACL Kafka refuses (a MATCH pattern) fails alone.
    let mut bad = creation(TOPIC, "acl-a", "User:ANONYMOUS", READ, ALLOW);
    bad.resource_pattern_type = MATCH;
    let codes = create_acls(
        addr,
        vec![
            creation(TOPIC, "acl-a", "User:ANONYMOUS", READ, ALLOW),
            creation(GROUP, "acl-g", "User:ANONYMOUS", READ, ALLOW),
            creation(TOPIC, "acl-b", "User:ANONYMOUS", DESCRIBE, DENY),
            bad,
        ],
    );
    assert_eq!(codes, [0, 0, 0, INVALID_REQUEST]);
    let expected = vec![
        (
            TOPIC,
            "acl-a".to_string(),
            "User:ANONYMOUS".to_string(),
            READ,
            ALLOW,
        ),
        (
            TOPIC,
            "acl-b".to_string(),
            "User:ANONYMOUS".to_string(),
            DESCRIBE,
            DENY,
        ),
        (
            GROUP,
            "acl-g".to_string(),
            "User:ANONYMOUS".to_string(),
            READ,
            ALLOW,
        ),
    ];
    let mut sorted = expected.clone();
    sorted.sort();
    assert_eq!(describe_acls(addr), (0, sorted.clone()));

    // READ on A and G: consuming A through G works; producing to A does not.
    assert_eq!(produce(addr, "acl-a"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        consume_through_group(&broker.bootstrap(), "acl-a", "acl-g", 3),
        3
    );
    // Another group has no READ ACL, but no ACL at all: allowed by
    // allow.everyone.if.no.acl.found; fetching A needs only READ on A.
    assert_eq!(fetch_code(addr, "acl-a"), 0);

    // DENY DESCRIBE on B: B is hidden from Metadata and fetching it is refused.
    let all: Vec<String> = metadata(addr, None).into_iter().map(|t| t.0).collect();
    assert!(all.contains(&"acl-a".to_string()), "{all:?}");
    assert!(!all.contains(&"acl-b".to_string()), "{all:?}");
    assert_eq!(
        metadata(addr, Some(&["acl-b"])),
        [("acl-b".to_string(), TOPIC_AUTHORIZATION_FAILED)]
    );
    assert_eq!(fetch_code(addr, "acl-b"), TOPIC_AUTHORIZATION_FAILED);

    // Deleting B's ACL takes effect at once.
    let mut filter = DeleteAclsFilter::default();
    filter.resource_type_filter = TOPIC;
    filter.resource_name_filter = Some(StrBytes::from_static_str("acl-b"));
    filter.pattern_type_filter = LITERAL;
    filter.principal_filter = None;
    filter.host_filter = None;
    filter.operation = ANY;
    filter.permission_type = ANY;
    let mut unknown = filter.clone();
    unknown.operation = 0;
    let mut request = DeleteAclsRequest::default();
    request.filters = vec![filter, unknown];
    let response: DeleteAclsResponse =
        raw::request(addr, ApiKey::DeleteAcls, 3, &request).expect("DeleteAcls answered");
    assert_eq!(response.filter_results[0].error_code, 0);
    assert_eq!(response.filter_results[0].matching_acls.len(), 1);
    assert_eq!(
        response.filter_results[0].matching_acls[0].operation,
        DESCRIBE
    );
    assert_eq!(response.filter_results[1].error_code, INVALID_REQUEST);
    assert_eq!(metadata(addr, Some(&["acl-b"])), [("acl-b".to_string(), 0)]);
    assert_eq!(fetch_code(addr, "acl-b"), 0);
    let remaining: Vec<_> = sorted
        .iter()
        .filter(|acl| acl.1 != "acl-b")
        .cloned()
        .collect();
    assert_eq!(describe_acls(addr), (0, remaining.clone()));

    // After a restart the ACLs are back and still enforced.
    broker.stop();
    broker.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    while describe_acls(broker.addr).1 != remaining && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(describe_acls(broker.addr), (0, remaining));
    assert_eq!(produce(broker.addr, "acl-a"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(produce(broker.addr, "acl-b"), 0);
}

#[test]
fn without_acls_and_without_allow_everyone_an_anonymous_client_is_refused() {
    let dir = data_dir();
    let broker = broker(dir.path(), &format!("authorizer.class.name={STANDARD}\n"));
    let addr = broker.addr;
    // Kafka answers CreateTopics without CREATE per topic with
    // TOPIC_AUTHORIZATION_FAILED; the ACL APIs need ALTER / DESCRIBE on
    // the cluster.
    assert_eq!(
        create_topics_code(addr, "refused"),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(produce(addr, "refused"), TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        create_acls(
            addr,
            vec![creation(TOPIC, "t", "User:ANONYMOUS", READ, ALLOW)]
        ),
        [CLUSTER_AUTHORIZATION_FAILED]
    );
    assert_eq!(describe_acls(addr).0, CLUSTER_AUTHORIZATION_FAILED);
    // ElectLeaders needs ALTER on the cluster: the whole answer and every
    // asked partition say so.
    assert_eq!(
        elect_leaders(addr, "refused"),
        (CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED)
    );
    // So does UnregisterBroker, before it looks for the broker.
    assert_eq!(unregister_broker(addr, 7).0, CLUSTER_AUTHORIZATION_FAILED);
    assert!(metadata(addr, None).is_empty());
    // Groups, transactional ids and idempotent producers are refused too.
    let mut find = FindCoordinatorRequest::default();
    find.key = StrBytes::from_static_str("some-group");
    let found: FindCoordinatorResponse =
        raw::request(addr, ApiKey::FindCoordinator, 3, &find).expect("FindCoordinator answered");
    assert_eq!(found.error_code, GROUP_AUTHORIZATION_FAILED);
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(StrBytes::from_static_str("some-txn")));
    init.transaction_timeout_ms = 10_000;
    init.producer_id = ProducerId(-1);
    init.producer_epoch = -1;
    let answer: InitProducerIdResponse =
        raw::request(addr, ApiKey::InitProducerId, 4, &init).expect("InitProducerId answered");
    assert_eq!(answer.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    init.transactional_id = None;
    let answer: InitProducerIdResponse =
        raw::request(addr, ApiKey::InitProducerId, 4, &init).expect("InitProducerId answered");
    assert_eq!(answer.error_code, CLUSTER_AUTHORIZATION_FAILED);
}

#[test]
fn a_super_user_may_do_everything() {
    let dir = data_dir();
    let broker = broker(
        dir.path(),
        &format!("authorizer.class.name={STANDARD}\nsuper.users=User:admin;User:ANONYMOUS\n"),
    );
    let addr = broker.addr;
    // A DENY of everything for everyone does not bind a super user.
    let codes = create_acls(
        addr,
        vec![
            creation(TOPIC, "*", "User:*", ALL, DENY),
            creation(CLUSTER, "kafka-cluster", "User:*", ALL, DENY),
        ],
    );
    assert_eq!(codes, [0, 0]);
    assert_eq!(create_topics_code(addr, "super"), 0);
    assert_eq!(produce(addr, "super"), 0);
    assert_eq!(fetch_code(addr, "super"), 0);
    assert_eq!(metadata(addr, Some(&["super"])), [("super".to_string(), 0)]);
    // Its only replica leads: ELECTION_NOT_NEEDED, not a refusal.
    assert_eq!(elect_leaders(addr, "super"), (0, 84));
    // Allowed, UnregisterBroker of an id never registered is Kafka's
    // BROKER_ID_NOT_REGISTERED (102).
    let (code, message) = unregister_broker(addr, 7);
    assert_eq!(code, 102, "{message:?}");
    assert_eq!(describe_acls(addr).1.len(), 2, "{}", broker.log());
}

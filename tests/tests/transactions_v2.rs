//! Transactions v2 (KIP-890) over raw requests, since no client here
//! speaks it (librdkafka sends EndTxn v1 at most):
//! - part 2: EndTxn v5 ends each transaction under the producer's next
//!   epoch, so a produce of an ended transaction that arrives late is
//!   fenced and never read; Produce v12 and TxnOffsetCommit v5 add their
//!   partitions to the transaction without AddPartitionsToTxn or
//!   AddOffsetsToTxn, also when the coordinator is another broker;
//! - part 1: for older clients the partition leader checks that a
//!   transaction's first batch belongs to an ongoing transaction, so a
//!   delayed produce after an abort cannot leave a hanging transaction.

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, EndTxnRequest, EndTxnResponse,
    InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::Message;
use rill_tests::{data_dir, raw, Broker};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TOPIC: &str = "tv2";
const TXN_ID: &str = "tv2-producer";
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;

fn init_producer_id(addr: SocketAddr) -> (i64, i16) {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = Some(TransactionalId(StrBytes::from_static_str(TXN_ID)));
    request.transaction_timeout_ms = 60_000;
    request.producer_id = ProducerId(-1);
    request.producer_epoch = -1;
    // The transaction topic is created on first use: retry while it loads.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response: InitProducerIdResponse =
            raw::request(addr, ApiKey::InitProducerId, 4, &request).expect("InitProducerId");
        if response.error_code == 0 {
            return (response.producer_id.0, response.producer_epoch);
        }
        assert!(
            Instant::now() < deadline,
            "InitProducerId: {}",
            response.error_code
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// AddPartitionsToTxn v3 (a client's form) of partition 0.
fn add_partition(addr: SocketAddr, (producer_id, epoch): (i64, i16)) -> i16 {
    let mut topic = AddPartitionsToTxnTopic::default();
    topic.name = TopicName(StrBytes::from_static_str(TOPIC));
    topic.partitions = vec![0];
    let mut request = AddPartitionsToTxnRequest::default();
    request.v3_and_below_transactional_id = TransactionalId(StrBytes::from_static_str(TXN_ID));
    request.v3_and_below_producer_id = ProducerId(producer_id);
    request.v3_and_below_producer_epoch = epoch;
    request.v3_and_below_topics = vec![topic];
    let response: AddPartitionsToTxnResponse =
        raw::request(addr, ApiKey::AddPartitionsToTxn, 3, &request).expect("AddPartitionsToTxn");
    response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

/// A transactional batch of one record to partition 0, Produce v9 (a
/// client of transactions v1).
fn produce(addr: SocketAddr, producer: (i64, i16), sequence: i32, value: &str) -> i16 {
    produce_at(addr, (9, 0), producer, sequence, value)
}

/// A transactional batch of one record, at `(version, partition)`.
fn produce_at(
    addr: SocketAddr,
    (version, index): (i16, i32),
    (producer_id, epoch): (i64, i16),
    sequence: i32,
    value: &str,
) -> i16 {
    let mut builder = engine::batch::BatchBuilder::new(0, engine::batch::Compression::None)
        .producer(producer_id, epoch, sequence, true);
    builder.push(0, 0, None, Some(value.as_bytes()), &[]);
    let mut partition = PartitionProduceData::default();
    partition.index = index;
    partition.records = Some(bytes::Bytes::from(builder.build().expect("batch")));
    let mut data = TopicProduceData::default();
    data.name = TopicName(StrBytes::from_static_str(TOPIC));
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.transactional_id = Some(TransactionalId(StrBytes::from_static_str(TXN_ID)));
    request.acks = -1;
    request.timeout_ms = 5_000;
    request.topic_data = vec![data];
    let response: ProduceResponse =
        raw::request(addr, ApiKey::Produce, version, &request).expect("Produce answered");
    response.responses[0].partition_responses[0].error_code
}

/// EndTxn at `version`: (error code, producer id, epoch) of the answer.
fn end_txn(
    addr: SocketAddr,
    version: i16,
    (id, epoch): (i64, i16),
    commit: bool,
) -> (i16, i64, i16) {
    let mut request = EndTxnRequest::default();
    request.transactional_id = TransactionalId(StrBytes::from_static_str(TXN_ID));
    request.producer_id = ProducerId(id);
    request.producer_epoch = epoch;
    request.committed = commit;
    let response: EndTxnResponse =
        raw::request(addr, ApiKey::EndTxn, version, &request).expect("EndTxn answered");
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

/// Every value a read_committed consumer reads from partition 0.
fn read_committed(bootstrap: &str) -> Vec<String> {
    read_committed_at(bootstrap, 0)
}

/// Every value a read_committed consumer reads from `partition`.
fn read_committed_at(bootstrap: &str, partition: i32) -> Vec<String> {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "tv2-reader")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    let mut assignment = rdkafka::TopicPartitionList::new();
    assignment
        .add_partition_offset(TOPIC, partition, rdkafka::Offset::Beginning)
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut values = Vec::new();
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => values
                .push(String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned()),
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => return values,
            _ => {}
        }
    }
    panic!("no end of partition within 30 s; read {values:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_end_gives_a_new_epoch_and_a_late_produce_is_fenced() {
    let (_dir, broker) = broker_with_topic("").await;
    let addr = broker.addr;
    let first = init_producer_id(addr);
    assert_eq!(add_partition(addr, first), 0);
    assert_eq!(produce(addr, first, 0, "a"), 0);
    let (code, id, epoch) = end_txn(addr, 5, first, true);
    assert_eq!(
        (code, id, epoch),
        (0, first.0, first.1 + 1),
        "committed under the next epoch"
    );
    // A retry of that EndTxn (its answer lost) gets the same answer.
    assert_eq!(end_txn(addr, 5, first, true), (0, first.0, first.1 + 1));
    // The ended transaction's produce, late: fenced by the commit marker.
    assert_eq!(produce(addr, first, 1, "late"), INVALID_PRODUCER_EPOCH);
    // The old epoch cannot start another transaction either.
    assert_ne!(add_partition(addr, first), 0);
    let second = (id, epoch);
    assert_eq!(add_partition(addr, second), 0);
    assert_eq!(produce(addr, second, 0, "aborted"), 0);
    let (code, id, epoch) = end_txn(addr, 5, second, false);
    assert_eq!((code, epoch), (0, second.1 + 1));
    let third = (id, epoch);
    assert_eq!(add_partition(addr, third), 0);
    assert_eq!(produce(addr, third, 0, "c"), 0);
    let ended = end_txn(addr, 5, third, true);
    assert_eq!(ended, (0, third.0, third.1 + 1));
    assert_eq!(read_committed(&broker.bootstrap()), ["a", "c"]);
    // The state replayed after a restart still knows the retry (its
    // transactions v2 fields are kept in the log).
    let mut broker = broker;
    assert_eq!(broker.stop_with(libc::SIGTERM), Some(0));
    broker.restart();
    let addr = broker.addr;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut again = end_txn(addr, 5, third, true);
    while again.0 != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        again = end_txn(addr, 5, third, true);
    }
    assert_eq!(again, ended);
}

#[tokio::test(flavor = "multi_thread")]
async fn end_txn_v4_keeps_the_epoch_as_before() {
    let (_dir, broker) = broker_with_topic("").await;
    let addr = broker.addr;
    let producer = init_producer_id(addr);
    assert_eq!(add_partition(addr, producer), 0);
    assert_eq!(produce(addr, producer, 0, "a"), 0);
    assert_eq!(end_txn(addr, 4, producer, true), (0, -1, -1));
    assert_eq!(add_partition(addr, producer), 0, "the same epoch goes on");
    assert_eq!(produce(addr, producer, 1, "b"), 0);
    assert_eq!(end_txn(addr, 4, producer, true).0, 0);
    assert_eq!(read_committed(&broker.bootstrap()), ["a", "b"]);
}

/// TxnOffsetCommit v5 of offset `offset` of partition 0 for group "g".
fn txn_offset_commit_v5(addr: SocketAddr, (id, epoch): (i64, i16), offset: i64) -> i16 {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
    let mut partition = TxnOffsetCommitRequestPartition::default();
    partition.partition_index = 0;
    partition.committed_offset = offset;
    partition.committed_leader_epoch = -1;
    let mut topic = TxnOffsetCommitRequestTopic::default();
    topic.name = TopicName(StrBytes::from_static_str(TOPIC));
    topic.partitions = vec![partition];
    let mut request = TxnOffsetCommitRequest::default();
    request.transactional_id = TransactionalId(StrBytes::from_static_str(TXN_ID));
    request.group_id = GroupId(StrBytes::from_static_str("g"));
    request.producer_id = ProducerId(id);
    request.producer_epoch = epoch;
    request.generation_id = -1;
    request.topics = vec![topic];
    let response: TxnOffsetCommitResponse =
        raw::request(addr, ApiKey::TxnOffsetCommit, 5, &request).expect("TxnOffsetCommit");
    response.topics[0].partitions[0].error_code
}

/// Group "g"'s committed offset of partition 0, -1 without one.
fn committed_offset(bootstrap: &str) -> i64 {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "g")
        .create()
        .expect("consumer");
    let mut asked = rdkafka::TopicPartitionList::new();
    asked.add_partition(TOPIC, 0);
    let committed = consumer
        .committed_offsets(asked, Duration::from_secs(10))
        .expect("committed offsets");
    match committed.elements()[0].offset() {
        rdkafka::Offset::Offset(offset) => offset,
        _ => -1,
    }
}

/// ListOffsets v2 latest of partition 0: (high watermark, last stable offset).
fn hw_and_lso(addr: SocketAddr) -> (i64, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse};
    let latest = |isolation_level: i8| {
        let mut partition = ListOffsetsPartition::default();
        partition.partition_index = 0;
        partition.timestamp = -1;
        let mut topic = ListOffsetsTopic::default();
        topic.name = TopicName(StrBytes::from_static_str(TOPIC));
        topic.partitions = vec![partition];
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(-1);
        request.isolation_level = isolation_level;
        request.topics = vec![topic];
        let response: ListOffsetsResponse =
            raw::request(addr, ApiKey::ListOffsets, 2, &request).expect("ListOffsets");
        response.topics[0].partitions[0].offset
    };
    (latest(0), latest(1))
}

#[tokio::test(flavor = "multi_thread")]
async fn produce_v12_and_txn_offset_commit_v5_add_their_partitions() {
    let (_dir, broker) = broker_with_topic("").await;
    let addr = broker.addr;
    let first = init_producer_id(addr);
    // No AddPartitionsToTxn: the leader adds the partition.
    assert_eq!(produce_at(addr, (12, 0), first, 0, "a"), 0);
    assert_eq!(produce_at(addr, (12, 0), first, 1, "b"), 0);
    // No AddOffsetsToTxn: the group coordinator adds the offsets partition.
    assert_eq!(txn_offset_commit_v5(addr, first, 7), 0);
    assert_eq!(
        committed_offset(&broker.bootstrap()),
        -1,
        "not before the commit"
    );
    let (code, id, epoch) = end_txn(addr, 5, first, true);
    assert_eq!((code, epoch), (0, first.1 + 1));
    assert_eq!(committed_offset(&broker.bootstrap()), 7);
    // Late, in its ended transaction: the coordinator fences the old epoch.
    assert_eq!(
        produce_at(addr, (12, 0), first, 2, "late"),
        INVALID_PRODUCER_EPOCH
    );
    let second = (id, epoch);
    assert_eq!(produce_at(addr, (12, 0), second, 0, "c"), 0);
    assert_eq!(end_txn(addr, 5, second, true).0, 0);
    assert_eq!(read_committed(&broker.bootstrap()), ["a", "b", "c"]);
}

/// One broker, `settings` in its server.properties, and the topic.
async fn broker_with_topic(settings: &str) -> (tempfile::TempDir, Broker) {
    let dir = data_dir();
    let file = dir.path().join("tv2-server.properties");
    std::fs::write(&file, settings).expect("write server.properties");
    let config = file.to_str().expect("utf-8 path").to_string();
    let broker = Broker::start(RILL, dir.path(), &["--config", &config]);
    rill_tests::kafka::create_topic(&broker.bootstrap(), TOPIC, 1, &[]).await;
    (dir, broker)
}

/// KIP-890 part 1 for a client of transactions v1: the delayed produce of
/// an aborted transaction is refused, so it opens no transaction that
/// holds back the last stable offset. With the check off (the setting),
/// the same produce is written and hangs: the test tells the two apart.
#[tokio::test(flavor = "multi_thread")]
async fn a_delayed_produce_after_an_abort_leaves_no_hanging_transaction() {
    for verification in [true, false] {
        let settings = format!("transaction.partition.verification.enable={verification}\n");
        let (_dir, broker) = broker_with_topic(&settings).await;
        let addr = broker.addr;
        let producer = init_producer_id(addr);
        assert_eq!(add_partition(addr, producer), 0);
        assert_eq!(produce(addr, producer, 0, "aborted"), 0);
        assert_eq!(end_txn(addr, 4, producer, false).0, 0);
        // The same transaction's next batch, delayed past the abort.
        let code = produce(addr, producer, 1, "delayed");
        let (hw, lso) = hw_and_lso(addr);
        if verification {
            assert_eq!(code, INVALID_TXN_STATE, "refused at the leader");
            assert_eq!((hw, lso), (2, 2), "the last stable offset is not held back");
        } else {
            assert_eq!(code, 0, "without the check the batch is written");
            assert_eq!((hw, lso), (3, 2), "and its transaction hangs");
        }
        assert!(read_committed(&broker.bootstrap()).is_empty());
    }
}

/// The transaction's coordinator on one broker, the partition's leader on
/// another: Produce v12 adds the partition over AddPartitionsToTxn v4
/// between the brokers, and a late produce is fenced there as well.
#[tokio::test(flavor = "multi_thread")]
async fn produce_v12_adds_the_partition_at_a_coordinator_on_another_broker() {
    use rill_tests::cluster::{find_coordinator, wait_for, Cluster};
    let mut cluster = Cluster::start_settled(RILL, 3, &[], Duration::from_secs(30));
    let bootstrap = cluster.bootstrap();
    rill_tests::kafka::create_topic(&bootstrap, TOPIC, 3, &[]).await;
    // Asking for the coordinator creates the transaction topic.
    let coordinator = wait_for("a transaction coordinator", Duration::from_secs(30), || {
        find_coordinator(&bootstrap, TXN_ID, 1)
    });
    let layout = wait_for(
        "leaders of every partition",
        Duration::from_secs(30),
        || {
            rill_tests::replicated::leaders_and_isrs(&bootstrap, TOPIC)
                .filter(|partitions| partitions.iter().all(|(leader, _)| *leader > 0))
        },
    );
    let (partition, leader) = layout
        .iter()
        .enumerate()
        .map(|(index, (leader, _))| (index as i32, *leader))
        .find(|(_, leader)| *leader != coordinator)
        .expect("a partition led away from the coordinator");
    let coordinator_addr = cluster.node(coordinator).addr;
    let leader_addr = cluster.node(leader).addr;
    let first = init_producer_id(coordinator_addr);
    assert_eq!(produce_at(leader_addr, (12, partition), first, 0, "a"), 0);
    let (code, id, epoch) = end_txn(coordinator_addr, 5, first, true);
    assert_eq!((code, epoch), (0, first.1 + 1));
    let late = produce_at(leader_addr, (12, partition), first, 1, "late");
    assert_eq!(late, INVALID_PRODUCER_EPOCH);
    assert_eq!(
        produce_at(leader_addr, (12, partition), (id, epoch), 0, "b"),
        0
    );
    assert_eq!(end_txn(coordinator_addr, 5, (id, epoch), true).0, 0);
    assert_eq!(read_committed_at(&bootstrap, partition), ["a", "b"]);
}

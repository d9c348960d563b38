//! Transactions v2 (KIP-890 part 2) over raw requests, since no client
//! here speaks it (librdkafka sends EndTxn v1 at most): EndTxn v5 ends
//! each transaction under the producer's next epoch, so a produce of an
//! ended transaction that arrives late is fenced and never read.

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

/// A transactional batch of one record to partition 0.
fn produce(addr: SocketAddr, (producer_id, epoch): (i64, i16), sequence: i32, value: &str) -> i16 {
    let mut builder = engine::batch::BatchBuilder::new(0, engine::batch::Compression::None)
        .producer(producer_id, epoch, sequence, true);
    builder.push(0, 0, None, Some(value.as_bytes()), &[]);
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
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
        raw::request(addr, ApiKey::Produce, 9, &request).expect("Produce answered");
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

/// Every value a read_committed consumer reads from the partition.
fn read_committed(bootstrap: &str) -> Vec<String> {
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
        .add_partition_offset(TOPIC, 0, rdkafka::Offset::Beginning)
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
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    rill_tests::kafka::create_topic(&broker.bootstrap(), TOPIC, 1, &[]).await;
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
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    rill_tests::kafka::create_topic(&broker.bootstrap(), TOPIC, 1, &[]).await;
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

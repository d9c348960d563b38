//! What the replicated-partition tests share: a partition's state as a
//! client sees it in Metadata, an idempotent acks=all producer of numbered
//! records, signals to a broker process, and a topic placed on given
//! brokers and moved by AlterPartitionReassignments.

use crate::Broker;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use std::time::Duration;

/// Partition 0 of a topic as Metadata shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    /// The leader (-1: none).
    pub leader: i32,
    /// The replicas, in assignment order.
    pub replicas: Vec<i32>,
    /// The ISR, sorted.
    pub isr: Vec<i32>,
}

impl PartitionView {
    /// The replicas, sorted.
    pub fn sorted_replicas(&self) -> Vec<i32> {
        let mut replicas = self.replicas.clone();
        replicas.sort_unstable();
        replicas
    }
}

/// Partition 0 of `topic` as `bootstrap` reports it (`None` while the
/// request fails).
pub fn partition_view(bootstrap: &str, topic: &str) -> Option<PartitionView> {
    let consumer: BaseConsumer = crate::kafka::client_config(bootstrap).create().ok()?;
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .ok()?;
    let partition = metadata.topics().first()?.partitions().first()?;
    let mut isr = partition.isr().to_vec();
    isr.sort_unstable();
    Some(PartitionView {
        leader: partition.leader(),
        replicas: partition.replicas().to_vec(),
        isr,
    })
}

/// Every partition's leader and sorted ISR of `topic`, in partition order,
/// as `bootstrap` reports them (`None` while no broker answers).
pub fn leaders_and_isrs(bootstrap: &str, topic: &str) -> Option<Vec<(i32, Vec<i32>)>> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = crate::kafka::client_config(bootstrap).create().ok()?;
    let metadata = (consumer.fetch_metadata(Some(topic), Duration::from_secs(5))).ok()?;
    let mut partitions: Vec<(i32, i32, Vec<i32>)> = (metadata.topics().first()?.partitions())
        .iter()
        .map(|p| {
            let mut isr = p.isr().to_vec();
            isr.sort_unstable();
            (p.id(), p.leader(), isr)
        })
        .collect();
    partitions.sort_unstable();
    Some(
        partitions
            .into_iter()
            .map(|(_, leader, isr)| (leader, isr))
            .collect(),
    )
}

/// Every partition's sorted ISR of `topic`, in partition order.
pub fn all_isrs(bootstrap: &str, topic: &str) -> Option<Vec<Vec<i32>>> {
    let views = leaders_and_isrs(bootstrap, topic)?;
    Some(views.into_iter().map(|(_, isr)| isr).collect())
}

/// An idempotent acks=all producer that rides out failovers: long message
/// timeout, short retry backoff, frequent metadata refresh.
pub fn idempotent_producer(bootstrap: &str) -> FutureProducer {
    crate::kafka::producer(
        bootstrap,
        &[
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("message.timeout.ms", "60000"),
            ("request.timeout.ms", "10000"),
            ("retry.backoff.ms", "100"),
            ("topic.metadata.refresh.interval.ms", "500"),
        ],
    )
}

/// Produces `values` (as decimal strings) to partition 0 one at a time and
/// returns those acknowledged.
pub async fn produce_numbers(
    producer: &FutureProducer,
    topic: &str,
    values: std::ops::Range<u32>,
) -> Vec<u32> {
    let mut acknowledged = Vec::new();
    for value in values {
        let payload = value.to_string();
        let record: FutureRecord<'_, (), String> =
            FutureRecord::to(topic).payload(&payload).partition(0);
        match producer.send(record, Duration::from_secs(60)).await {
            Ok(_) => acknowledged.push(value),
            // Shown in the test's output: why a write was not acknowledged.
            Err((error, _)) => {
                eprintln!("record {value} to {topic} not acknowledged: {error}");
                // A fatal error (idempotence broken) ends the producer: say
                // why once rather than fail every later record the same way.
                if let Some((code, reason)) = producer.client().fatal_error() {
                    eprintln!("the producer stopped on a fatal error: {code:?}: {reason}");
                    break;
                }
            }
        }
    }
    acknowledged
}

/// Every value of partition 0 of `topic`, from the beginning, as numbers.
pub fn read_numbers(bootstrap: &str, topic: &str, expected: usize) -> Vec<u32> {
    crate::kafka::consume_all(bootstrap, topic, 1, expected, Duration::from_secs(60), &[])
        .into_iter()
        .map(|r| {
            String::from_utf8(r.value.expect("a value"))
                .expect("utf-8")
                .parse()
                .expect("a number")
        })
        .collect()
}

/// Sends `signal` (SIGSTOP, SIGCONT) to the broker's process.
pub fn signal(broker: &Broker, signal: i32) {
    let pid = broker.pid().expect("a running broker") as i32;
    // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Creates `topic` with one partition on exactly `replicas`.
pub async fn create_assigned(bootstrap: &str, topic: &str, replicas: &[i32]) {
    let admin: AdminClient<DefaultClientContext> = crate::kafka::client_config(bootstrap)
        .create()
        .expect("admin client");
    let assignment = [replicas];
    let new_topic = NewTopic::new(topic, 1, TopicReplication::Variable(&assignment));
    let results = admin
        .create_topics(
            &[new_topic],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("create_topics request");
    for result in results {
        result.expect("topic created");
    }
}

/// AlterPartitionReassignments v0 of partition 0 to `target` (`None`:
/// cancel); the partition's error code.
pub fn reassign(broker: &Broker, topic: &str, target: Option<&[i32]>) -> i16 {
    let mut partition = ReassignablePartition::default();
    partition.partition_index = 0;
    partition.replicas = target.map(|t| t.iter().map(|&b| BrokerId(b)).collect());
    let mut reassignable = ReassignableTopic::default();
    reassignable.name = TopicName(StrBytes::from_string(topic.to_owned()));
    reassignable.partitions = vec![partition];
    let mut request = AlterPartitionReassignmentsRequest::default();
    request.timeout_ms = 30_000;
    request.topics = vec![reassignable];
    let response: AlterPartitionReassignmentsResponse = crate::raw::request(
        broker.addr,
        ApiKey::AlterPartitionReassignments,
        0,
        &request,
    )
    .expect("AlterPartitionReassignments answered");
    assert_eq!(response.error_code, 0);
    response.responses[0].partitions[0].error_code
}

/// Creates `topic` with one partition on exactly `replicas` and fills it
/// with `count` records of `bytes` bytes each (acks=all).
pub async fn create_filled(
    bootstrap: &str,
    topic: &str,
    replicas: &[i32],
    count: usize,
    bytes: usize,
) {
    create_assigned(bootstrap, topic, replicas).await;
    let p = crate::kafka::producer(bootstrap, &[("acks", "all")]);
    let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..count)
        .map(|i| (None, vec![(i % 251) as u8; bytes]))
        .collect();
    crate::kafka::produce_all(&p, topic, &records, None).await;
}

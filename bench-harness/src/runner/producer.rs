//! One producer: generates messages at its share of the target rate (or as
//! fast as its in-flight window allows), appends them into per-partition
//! batches, and sends all ready batches for a leader in one pipelined
//! Produce request. Acknowledgements are awaited in spawned tasks, so the
//! generator never waits for a round trip unless its window is full.
//! A partition error that means "leadership moved" (NOT_LEADER_OR_FOLLOWER,
//! LEADER_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS, ...) or a closed connection
//! makes the producer ask Metadata again and route later batches to the new
//! leaders; the failed batch itself is counted as an error, not resent (a
//! throughput run measures a steady cluster; `failover` measures the
//! moving one with its own one-record-at-a-time producer).

use crate::distribution::{KeyChooser, SizeChooser};
use crate::error::{BenchError, Result};
use crate::kafka::batch::BatchBuilder;
use crate::kafka::client::{
    connect_any, fetch_metadata, is_retriable_leader_error, topic_name, ConnectionPool,
};
use crate::kafka::connection::Connection;
use crate::stats::Recorder;
use crate::workload::Workload;
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Semaphore;

/// Most messages generated per loop turn, so that linger and stop are
/// checked often even at high rates.
const MESSAGES_PER_TURN_MAX: u64 = 4096;

/// Wall-clock microseconds since the epoch: the send timestamp in records,
/// comparable across processes on one host.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Least time between two metadata refreshes of one producer, so that a
/// burst of failed acknowledgements does not become a burst of Metadata.
const METADATA_REFRESH_MIN_INTERVAL: Duration = Duration::from_millis(200);

pub struct ProducerSpec {
    pub id: u32,
    /// Bootstrap list, asked again when leadership moves.
    pub bootstrap: String,
    pub topic: String,
    /// Leader broker id of each partition.
    pub leaders: Vec<i32>,
    pub pool: ConnectionPool,
    pub workload: Arc<Workload>,
    /// This producer's share of the rate; 0 means unlimited.
    pub rate_msgs_per_s: f64,
    pub recorder: Arc<Recorder>,
    pub stop: Arc<AtomicBool>,
    /// Set by acknowledgement tasks when leadership seems to have moved.
    pub refresh: Arc<AtomicBool>,
    /// Random bytes at least as long as the largest message.
    pub payload: Bytes,
}

/// A finished batch waiting to go out in the next Produce request.
struct ReadyBatch {
    partition: usize,
    batch: Bytes,
    send_times_us: Vec<u64>,
    value_bytes: u64,
}

/// A partition's open batch and the send times of its messages.
struct Pending {
    builder: BatchBuilder,
    send_times_us: Vec<u64>,
    opened: Option<Instant>,
}

pub async fn run_producer(spec: ProducerSpec) -> Result<()> {
    let mut producer = Producer::connect(spec).await?;
    while !producer.spec.stop.load(Ordering::Relaxed) {
        producer.refresh_if_asked().await;
        let budget = producer.budget();
        producer.generate(budget).await?;
        producer.send_expired().await?;
        producer.pace().await;
    }
    producer.finish().await
}

/// A running producer: its connections and in-flight window, the open
/// batch of each partition, and the generator's choosers and position.
struct Producer {
    spec: ProducerSpec,
    workload: Arc<Workload>,
    /// Connection to each partition's leader.
    connections: Vec<Arc<Connection>>,
    window: Arc<Semaphore>,
    pending: Vec<Pending>,
    keys: KeyChooser,
    sizes: SizeChooser,
    linger: Duration,
    sticky_partition: usize,
    started: Instant,
    generated: u64,
    payload_offset: usize,
    last_refresh: Instant,
}

impl Producer {
    /// Connects to every partition's leader and opens an empty batch each.
    async fn connect(mut spec: ProducerSpec) -> Result<Producer> {
        let workload = spec.workload.clone();
        let partitions = spec.leaders.len();
        let mut connections = Vec::with_capacity(partitions);
        for &leader in &spec.leaders {
            connections.push(spec.pool.get(leader).await?);
        }
        let window = Arc::new(Semaphore::new(workload.max_in_flight_per_producer as usize));
        let pending: Vec<Pending> = (0..partitions)
            .map(|_| Pending {
                builder: BatchBuilder::new(workload.batch_size_bytes as usize + 1024),
                send_times_us: Vec::new(),
                opened: None,
            })
            .collect();
        let keys = KeyChooser::new(&workload, u64::from(spec.id) * 7919 + 1)
            .with_partitions(partitions as u32);
        let sizes = SizeChooser::new(workload.message_size.clone(), u64::from(spec.id));
        let linger = Duration::from_millis(workload.linger_ms);
        let sticky_partition = spec.id as usize % partitions;
        Ok(Producer {
            spec,
            workload,
            connections,
            window,
            pending,
            keys,
            sizes,
            linger,
            sticky_partition,
            started: Instant::now(),
            generated: 0,
            payload_offset: 0,
            last_refresh: Instant::now(),
        })
    }

    /// Asks Metadata again when an acknowledgement task asked for it, at
    /// most once per [`METADATA_REFRESH_MIN_INTERVAL`].
    async fn refresh_if_asked(&mut self) {
        if !self.spec.refresh.load(Ordering::Relaxed)
            || self.last_refresh.elapsed() < METADATA_REFRESH_MIN_INTERVAL
        {
            return;
        }
        self.last_refresh = Instant::now();
        self.spec.refresh.store(false, Ordering::Relaxed);
        if let Err(error) = refresh_leaders(&mut self.spec, &mut self.connections).await {
            // Keep the old routes; the next failure asks again.
            self.spec
                .recorder
                .record_error(format!("metadata refresh: {error}"));
            self.spec.refresh.store(true, Ordering::Relaxed);
        }
    }

    /// Messages to generate this turn: those due at the rate (all the turn
    /// allows when unlimited), at most [`MESSAGES_PER_TURN_MAX`].
    fn budget(&self) -> u64 {
        if self.spec.rate_msgs_per_s > 0.0 {
            let due = (self.started.elapsed().as_secs_f64() * self.spec.rate_msgs_per_s) as u64;
            due.saturating_sub(self.generated)
                .min(MESSAGES_PER_TURN_MAX)
        } else {
            MESSAGES_PER_TURN_MAX
        }
    }

    /// How late the next `budget` messages are against the rate schedule
    /// (message `n` is due `n / rate` seconds after the start), in µs;
    /// recorded as OMB's publish delay. Without a rate there is no
    /// schedule and no delay.
    fn record_publish_delay(&self, budget: u64) {
        let rate = self.spec.rate_msgs_per_s;
        if rate <= 0.0 {
            self.spec
                .recorder
                .record_publish_delay(std::iter::repeat_n(0, budget as usize));
            return;
        }
        let now_s = self.started.elapsed().as_secs_f64();
        let delays_us = (self.generated..self.generated + budget)
            .map(move |index| ((now_s - (index + 1) as f64 / rate).max(0.0) * 1e6) as u64);
        self.spec.recorder.record_publish_delay(delays_us);
    }

    /// Generates `budget` messages, sending each batch that fills up.
    async fn generate(&mut self, budget: u64) -> Result<()> {
        self.record_publish_delay(budget);
        for _ in 0..budget {
            let choice = self.keys.next_choice();
            let partition = choice
                .partition
                .map_or(self.sticky_partition, |p| p as usize);
            self.append_message(partition, choice.key);
            let full = self.pending[partition].builder.size_bytes()
                >= self.workload.batch_size_bytes as usize;
            if full {
                self.send_ready(|p, _| p == partition).await?;
                if choice.partition.is_none() {
                    self.advance_sticky_partition();
                }
            }
        }
        self.generated += budget;
        Ok(())
    }

    /// Appends one message of the next size to `partition`'s open batch:
    /// the send timestamp, then a slice of the random payload.
    fn append_message(&mut self, partition: usize, key: Option<u64>) {
        let size = self.sizes.next_size_bytes();
        // Slide through the random payload so consecutive values differ.
        let body_len = size - 8;
        if self.payload_offset + body_len > self.spec.payload.len() {
            self.payload_offset = 0;
        }
        let body = &self.spec.payload[self.payload_offset..self.payload_offset + body_len];
        self.payload_offset += 61;
        let sent_us = now_us();
        let key_bytes = key.map(u64::to_be_bytes);
        let slot = &mut self.pending[partition];
        slot.builder.append(
            (sent_us / 1000) as i64,
            key_bytes.as_ref().map(|k| &k[..]),
            &sent_us.to_be_bytes(),
            body,
        );
        slot.send_times_us.push(sent_us);
        slot.opened.get_or_insert_with(Instant::now);
    }

    /// Linger expired: sends everything that waited long enough.
    async fn send_expired(&mut self) -> Result<()> {
        let now = Instant::now();
        let linger = self.linger;
        let expired = move |_: usize, slot: &Pending| {
            slot.opened
                .is_some_and(|opened| now.duration_since(opened) >= linger)
        };
        if !self
            .pending
            .iter()
            .enumerate()
            .any(|(p, slot)| expired(p, slot))
        {
            return Ok(());
        }
        let before = self
            .pending
            .iter()
            .filter(|s| !s.builder.is_empty())
            .count();
        self.send_ready(expired).await?;
        if self.workload.key_distribution == crate::workload::KeyDistribution::None && before > 0 {
            self.advance_sticky_partition();
        }
        Ok(())
    }

    /// Moves the sticky partitioner on to the next partition.
    fn advance_sticky_partition(&mut self) {
        self.sticky_partition = (self.sticky_partition + 1) % self.pending.len();
    }

    /// Waits until the next message is due (at most the linger, at least a
    /// millisecond of it), or just yields when the rate is unlimited.
    async fn pace(&self) {
        if self.spec.rate_msgs_per_s > 0.0 {
            let next_due_s = (self.generated + 1) as f64 / self.spec.rate_msgs_per_s;
            let wait_s = (next_due_s - self.started.elapsed().as_secs_f64())
                .min(self.linger.as_secs_f64().max(0.001));
            if wait_s > 0.0 {
                tokio::time::sleep(Duration::from_secs_f64(wait_s)).await;
            }
        } else {
            tokio::task::yield_now().await;
        }
    }

    /// Sends every non-empty batch that `ready` selects.
    async fn send_ready(&mut self, ready: impl Fn(usize, &Pending) -> bool) -> Result<()> {
        send_ready(
            &self.spec,
            &self.workload,
            &self.connections,
            &mut self.pending,
            &self.window,
            ready,
        )
        .await
    }

    /// Sends what is left and waits for every outstanding acknowledgement.
    async fn finish(mut self) -> Result<()> {
        self.send_ready(|_, _| true).await?;
        // Wait for every outstanding acknowledgement: take the whole window.
        let _all = self
            .window
            .acquire_many(self.workload.max_in_flight_per_producer)
            .await
            .map_err(|_| BenchError::Other("producer window closed".into()))?;
        Ok(())
    }
}

/// Asks Metadata (through any bootstrap broker) for the topic's current
/// leaders and reconnects the partitions whose leader changed.
async fn refresh_leaders(
    spec: &mut ProducerSpec,
    connections: &mut [Arc<Connection>],
) -> Result<()> {
    let client_id = format!("rill-bench-producer-{}-metadata", spec.id);
    let bootstrap = connect_any(&spec.bootstrap, &client_id, Duration::from_secs(2)).await?;
    let metadata = fetch_metadata(&bootstrap, std::slice::from_ref(&spec.topic)).await?;
    let layout = metadata
        .topics
        .iter()
        .find(|t| t.name == spec.topic)
        .ok_or_else(|| BenchError::Protocol(format!("topic {} not in metadata", spec.topic)))?;
    if layout.leaders.len() != connections.len() {
        return Err(BenchError::Protocol(format!(
            "topic {} now has {} partitions, not {}",
            spec.topic,
            layout.leaders.len(),
            connections.len()
        )));
    }
    spec.pool.update_brokers(metadata.brokers.clone());
    for (partition, &leader) in layout.leaders.iter().enumerate() {
        if leader < 0 {
            continue;
        }
        if leader != spec.leaders[partition] || connections[partition].is_closed() {
            connections[partition] = spec.pool.get(leader).await?;
            spec.leaders[partition] = leader;
        }
    }
    Ok(())
}

/// Sends, per leader connection, one Produce request with every non-empty
/// batch that `ready` selects.
async fn send_ready(
    spec: &ProducerSpec,
    workload: &Workload,
    connections: &[Arc<Connection>],
    pending: &mut [Pending],
    window: &Arc<Semaphore>,
    ready: impl Fn(usize, &Pending) -> bool,
) -> Result<()> {
    let mut by_connection: Vec<(Arc<Connection>, Vec<ReadyBatch>)> = Vec::new();
    for (partition, slot) in pending.iter_mut().enumerate() {
        if slot.builder.is_empty() || !ready(partition, slot) {
            continue;
        }
        let ready_batch = ReadyBatch {
            partition,
            value_bytes: slot.builder.value_bytes() as u64,
            batch: slot.builder.finish(workload.compression)?,
            send_times_us: std::mem::take(&mut slot.send_times_us),
        };
        slot.opened = None;
        let connection = &connections[partition];
        match by_connection
            .iter_mut()
            .find(|(c, _)| Arc::ptr_eq(c, connection))
        {
            Some((_, batches)) => batches.push(ready_batch),
            None => by_connection.push((connection.clone(), vec![ready_batch])),
        }
    }
    for (connection, batches) in by_connection {
        send_request(spec, workload, connection, batches, window).await?;
    }
    Ok(())
}

/// Sends one Produce request with `batches` through `connection`, holding a
/// window permit until it is acknowledged (in a spawned task, unless acks=0).
async fn send_request(
    spec: &ProducerSpec,
    workload: &Workload,
    connection: Arc<Connection>,
    batches: Vec<ReadyBatch>,
    window: &Arc<Semaphore>,
) -> Result<()> {
    let permit = window
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| BenchError::Other("producer window closed".into()))?;
    let (request, in_flight) = produce_request(spec, workload, batches);
    if workload.acks == 0 {
        // No response will come: "acknowledged" when handed to the socket queue.
        connection.send_without_response(&request).await?;
        in_flight.record_acked(now_us());
        drop(permit);
        return Ok(());
    }
    let response = match connection.send(&request).await {
        Ok(response) => response,
        Err(error) => {
            in_flight
                .recorder
                .record_error(format!("produce send: {error}"));
            in_flight.refresh.store(true, Ordering::Relaxed);
            return Ok(());
        }
    };
    tokio::spawn(async move {
        let result = response.wait().await;
        let acked_us = now_us();
        in_flight.record_response(result, acked_us);
        drop(permit);
    });
    Ok(())
}

/// The Produce request carrying `batches`, and what its acknowledgement
/// must record.
fn produce_request(
    spec: &ProducerSpec,
    workload: &Workload,
    batches: Vec<ReadyBatch>,
) -> (ProduceRequest, InFlight) {
    let messages: u64 = batches.iter().map(|b| b.send_times_us.len() as u64).sum();
    let bytes: u64 = batches.iter().map(|b| b.value_bytes).sum();
    let mut send_times = Vec::with_capacity(messages as usize);
    let mut partition_data = Vec::with_capacity(batches.len());
    for ReadyBatch {
        partition,
        batch,
        send_times_us: times,
        ..
    } in batches
    {
        send_times.extend_from_slice(&times);
        partition_data.push(
            PartitionProduceData::default()
                .with_index(partition as i32)
                .with_records(Some(batch)),
        );
    }
    let request = ProduceRequest::default()
        .with_acks(workload.acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(&spec.topic))
            .with_partition_data(partition_data)]);
    let in_flight = InFlight {
        messages,
        bytes,
        send_times_us: send_times,
        recorder: spec.recorder.clone(),
        refresh: spec.refresh.clone(),
    };
    (request, in_flight)
}

/// A Produce request awaiting its acknowledgement: its messages, their
/// send times, and where to record the outcome.
struct InFlight {
    messages: u64,
    bytes: u64,
    send_times_us: Vec<u64>,
    recorder: Arc<Recorder>,
    /// Set when leadership seems to have moved.
    refresh: Arc<AtomicBool>,
}

impl InFlight {
    /// Records every message as produced, acknowledged at `acked_us`.
    fn record_acked(&self, acked_us: u64) {
        self.recorder.record_produced(
            self.messages,
            self.bytes,
            self.send_times_us
                .iter()
                .map(|t| acked_us.saturating_sub(*t)),
        );
    }

    /// Records the broker's answer: produced if no partition failed, else
    /// each partition's error (asking for new leaders where they moved).
    fn record_response(&self, result: Result<ProduceResponse>, acked_us: u64) {
        match result {
            Ok(response) => {
                let failed: Vec<String> = response
                    .responses
                    .iter()
                    .flat_map(|topic| topic.partition_responses.iter())
                    .filter(|p| p.error_code != 0)
                    .map(|p| {
                        if is_retriable_leader_error(p.error_code) {
                            self.refresh.store(true, Ordering::Relaxed);
                        }
                        format!("produce partition {}: error {}", p.index, p.error_code)
                    })
                    .collect();
                if failed.is_empty() {
                    self.record_acked(acked_us);
                } else {
                    for failure in failed {
                        self.recorder.record_error(failure);
                    }
                }
            }
            Err(error) => {
                self.refresh.store(true, Ordering::Relaxed);
                self.recorder.record_error(format!("produce: {error}"));
            }
        }
    }
}

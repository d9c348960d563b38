//! `txn-cost`: what one committed transaction costs under transactions v1
//! and v2 (KIP-890) on the same broker, interleaved v1, v2, v1, v2 so the
//! host's drift lands on both. A transaction is one batch of N records to
//! one partition, committed (or, with `--abort-every N`, every Nth one
//! aborted):
//! - v1: AddPartitionsToTxn v3, Produce (≤ v11), EndTxn v4; the producer
//!   keeps its epoch and its sequence runs on across transactions;
//! - v2: Produce v12 (the partition leader adds the partition), EndTxn v5,
//!   whose answer is the producer's next epoch; the sequence starts again.
//!
//! Reported per version and size: transactions per second, the commit
//! latency (first request to EndTxn's answer) and, with `--broker-pid` or
//! `--broker-metrics`, the broker's CPU milliseconds per transaction. Any
//! error code fails the run: a benchmark that skips failures measures
//! nothing.

use crate::broker_cpu::CpuSource;
use crate::error::{BenchError, Result};
use crate::kafka::batch::{BatchBuilder, ProducerStamp};
use crate::kafka::client::{create_topics, parse_bootstrap, topic_name, wait_for_leaders};
use crate::kafka::connection::Connection;
use crate::stats::{new_histogram, Percentiles};
use crate::workload::Compression;
use hdrhistogram::Histogram;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ProduceRequest, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENT_ID: &str = "rill-bench-txn-cost";

/// The APIs this client speaks: a transactional producer's.
const TXN_RANGES: [(i16, i16, i16); 8] = [
    (0, 3, 12), // Produce (v12: transactions v2)
    (3, 1, 12), // Metadata
    (10, 1, 4), // FindCoordinator
    (18, 0, 3), // ApiVersions
    (19, 2, 5), // CreateTopics
    (22, 1, 4), // InitProducerId
    (24, 1, 3), // AddPartitionsToTxn (the client form)
    (26, 1, 5), // EndTxn (v5: transactions v2)
];

/// Error codes a transactional client waits out at the start: the
/// transaction topic being created or loaded.
const RETRIED_AT_START: [i16; 4] = [14, 15, 16, 51];

#[derive(Debug, Clone, clap::Args)]
pub struct TxnCostArgs {
    /// The broker (or any broker of the cluster).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// A one-partition topic, created if missing.
    #[arg(long, default_value = "rill-bench-txn-cost")]
    pub topic: String,
    /// Records per transaction, each size measured on its own.
    #[arg(long, value_delimiter = ',', default_value = "10,1000")]
    pub records_per_txn: Vec<u32>,
    /// Transactions per version, size and round.
    #[arg(long, default_value_t = 200)]
    pub transactions: u32,
    /// Rounds of v1 then v2.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 100)]
    pub record_bytes: usize,
    /// Abort every Nth transaction instead of committing it (0: never).
    #[arg(long, default_value_t = 0)]
    pub abort_every: u32,
    /// The broker's process id, for its CPU time (a local broker).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Or the broker's Prometheus address, `host:port`.
    #[arg(long)]
    pub broker_metrics: Option<String>,
    #[arg(long, default_value = "rill-bench-txn-cost.json")]
    pub out: PathBuf,
}

/// One version at one size, over every round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TxnCostRow {
    /// The transaction version, 1 or 2.
    pub version: u8,
    pub records_per_txn: u32,
    pub transactions: u64,
    pub elapsed_s: f64,
    pub transactions_per_s: f64,
    /// First request of a transaction to EndTxn's answer.
    pub commit_latency_us: Percentiles,
    /// The broker's CPU per committed transaction, when measured.
    pub broker_cpu_ms_per_txn: Option<f64>,
}

/// What one `txn-cost` run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TxnCostReport {
    pub bootstrap: String,
    pub record_bytes: usize,
    pub rounds: u32,
    pub rows: Vec<TxnCostRow>,
}

impl fmt::Display for TxnCostReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "version  records/txn  txn/s     p50 ms   p99 ms   broker CPU ms/txn"
        )?;
        for row in &self.rows {
            let cpu = row
                .broker_cpu_ms_per_txn
                .map_or_else(|| String::from("-"), |ms| format!("{ms:.3}"));
            writeln!(
                f,
                "v{}       {:<11}  {:<8.0}  {:<7.2}  {:<7.2}  {cpu}",
                row.version,
                row.records_per_txn,
                row.transactions_per_s,
                row.commit_latency_us.p50_us as f64 / 1000.0,
                row.commit_latency_us.p99_us as f64 / 1000.0,
            )?;
        }
        Ok(())
    }
}

/// A transactional producer of one version, with its connections.
struct TxnProducer {
    version: u8,
    transactional_id: String,
    coordinator: Arc<Connection>,
    leader: Arc<Connection>,
    producer: (i64, i16),
    sequence: i32,
}

/// What one version at one size has measured so far.
struct Tally {
    latencies: Histogram<u64>,
    transactions: u64,
    elapsed: Duration,
    cpu_s: f64,
}

/// Runs the comparison and writes the report to `args.out`.
pub async fn run(args: &TxnCostArgs) -> Result<TxnCostReport> {
    if args.transactions == 0 || args.rounds == 0 || args.records_per_txn.contains(&0) {
        return Err(BenchError::Other(String::from(
            "--transactions, --rounds and every --records-per-txn must be at least 1",
        )));
    }
    let cpu = cpu_source(args);
    let (bootstrap, leader) = connect(args).await?;
    let mut producers = Vec::new();
    for version in [1u8, 2] {
        let id = format!("{CLIENT_ID}-{}-v{version}", std::process::id());
        let coordinator = find_coordinator(&bootstrap, &id).await?;
        producers.push(TxnProducer::init(version, id, coordinator, leader.clone()).await?);
    }
    let payload = vec![b'x'; args.record_bytes];
    let mut rows = Vec::new();
    for &records in &args.records_per_txn {
        let mut tallies = [Tally::new(), Tally::new()];
        for _ in 0..args.rounds {
            for (producer, tally) in producers.iter_mut().zip(tallies.iter_mut()) {
                let before = cpu_now(&cpu).await?;
                let started = Instant::now();
                for n in 1..=args.transactions {
                    let commit = args.abort_every == 0 || n % args.abort_every != 0;
                    let latency = producer.end_one(&args.topic, (records, commit), &payload);
                    tally.record(latency.await?);
                }
                tally.elapsed += started.elapsed();
                tally.cpu_s += cpu_now(&cpu).await? - before;
            }
        }
        for (version, tally) in [1u8, 2].into_iter().zip(tallies) {
            rows.push(tally.row(version, records, cpu.is_some()));
        }
    }
    let report = TxnCostReport {
        bootstrap: args.bootstrap.clone(),
        record_bytes: args.record_bytes,
        rounds: args.rounds,
        rows,
    };
    std::fs::write(&args.out, serde_json::to_vec_pretty(&report)?)?;
    Ok(report)
}

fn cpu_source(args: &TxnCostArgs) -> Option<CpuSource> {
    match (&args.broker_pid, &args.broker_metrics) {
        (Some(pid), _) => Some(CpuSource::Pid(*pid)),
        (None, Some(address)) => Some(CpuSource::Metrics(address.clone())),
        (None, None) => None,
    }
}

async fn cpu_now(cpu: &Option<CpuSource>) -> Result<f64> {
    match cpu {
        Some(source) => source.cpu_s().await,
        None => Ok(0.0),
    }
}

/// The topic made ready: connections to the bootstrap broker and to the
/// topic's leader.
async fn connect(args: &TxnCostArgs) -> Result<(Arc<Connection>, Arc<Connection>)> {
    let first = parse_bootstrap(&args.bootstrap)?
        .into_iter()
        .next()
        .ok_or_else(|| BenchError::Other(String::from("empty --bootstrap")))?;
    let bootstrap = Connection::connect_with_ranges(&first, CLIENT_ID, &TXN_RANGES).await?;
    let topics = [args.topic.clone()];
    create_topics(&bootstrap, CLIENT_ID, &topics, 1, 1).await?;
    let metadata = wait_for_leaders(&bootstrap, &topics, Duration::from_secs(30)).await?;
    let leader_id = metadata
        .topics
        .first()
        .and_then(|t| t.leaders.first().copied())
        .ok_or_else(|| BenchError::Other(format!("no leader for {}", args.topic)))?;
    let address = metadata
        .brokers
        .get(&leader_id)
        .ok_or_else(|| BenchError::Other(format!("no address for broker {leader_id}")))?;
    let leader = Connection::connect_with_ranges(address, CLIENT_ID, &TXN_RANGES).await?;
    Ok((bootstrap, leader))
}

/// FindCoordinator (transaction) of `id`, waited out while the
/// transaction topic is created, then a connection to it.
async fn find_coordinator(bootstrap: &Connection, id: &str) -> Result<Arc<Connection>> {
    let key = StrBytes::from_string(id.to_string());
    let request = if bootstrap.version_of::<FindCoordinatorRequest>()? >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
    } else {
        FindCoordinatorRequest::default().with_key(key)
    }
    .with_key_type(1);
    for _ in 0..300 {
        let response = bootstrap.call(&request).await?;
        let (code, host, port) = match response.coordinators.first() {
            Some(c) => (c.error_code, c.host.to_string(), c.port),
            None => (
                response.error_code,
                response.host.to_string(),
                response.port,
            ),
        };
        if code == 0 {
            let address = format!("{host}:{port}");
            return Connection::connect_with_ranges(&address, CLIENT_ID, &TXN_RANGES).await;
        }
        if !RETRIED_AT_START.contains(&code) {
            return Err(broker_error(code, "FindCoordinator"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(BenchError::Timeout(format!("a coordinator for {id}")))
}

/// The first error code among a response's partitions, 0 when none failed.
fn first_error(mut codes: impl Iterator<Item = i16>) -> i16 {
    codes.find(|&code| code != 0).unwrap_or(0)
}

fn broker_error(error_code: i16, context: &str) -> BenchError {
    BenchError::Broker {
        error_code,
        context: context.to_string(),
    }
}

impl TxnProducer {
    /// InitProducerId at the coordinator (waited out while it loads).
    async fn init(
        version: u8,
        transactional_id: String,
        coordinator: Arc<Connection>,
        leader: Arc<Connection>,
    ) -> Result<TxnProducer> {
        if version == 2 {
            let produce = leader.version_of::<ProduceRequest>()?;
            let end = coordinator.version_of::<EndTxnRequest>()?;
            if produce < 12 || end < 5 {
                return Err(BenchError::Other(format!(
                    "the broker does not serve transactions v2 (Produce v{produce}, EndTxn v{end})"
                )));
            }
        }
        let mut request = InitProducerIdRequest::default();
        request.transactional_id = Some(TransactionalId(StrBytes::from_string(
            transactional_id.clone(),
        )));
        request.transaction_timeout_ms = 60_000;
        request.producer_id = ProducerId(-1);
        request.producer_epoch = -1;
        for _ in 0..300 {
            let response = coordinator.call(&request).await?;
            if response.error_code == 0 {
                return Ok(TxnProducer {
                    version,
                    transactional_id,
                    coordinator,
                    leader,
                    producer: (response.producer_id.0, response.producer_epoch),
                    sequence: 0,
                });
            }
            if !RETRIED_AT_START.contains(&response.error_code) {
                return Err(broker_error(response.error_code, "InitProducerId"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(BenchError::Timeout(String::from("InitProducerId")))
    }

    fn id(&self) -> TransactionalId {
        TransactionalId(StrBytes::from_string(self.transactional_id.clone()))
    }

    /// One transaction of `records` records, committed or aborted: how
    /// long it took.
    async fn end_one(
        &mut self,
        topic: &str,
        (records, commit): (u32, bool),
        payload: &[u8],
    ) -> Result<Duration> {
        let started = Instant::now();
        if self.version == 1 {
            self.add_partition(topic).await?;
        }
        self.produce(topic, records, payload).await?;
        self.end_txn(commit).await?;
        Ok(started.elapsed())
    }

    /// AddPartitionsToTxn v3 of partition 0 (transactions v1 only).
    async fn add_partition(&self, topic: &str) -> Result<()> {
        let mut asked = AddPartitionsToTxnTopic::default();
        asked.name = topic_name(topic);
        asked.partitions = vec![0];
        let mut request = AddPartitionsToTxnRequest::default();
        request.v3_and_below_transactional_id = self.id();
        request.v3_and_below_producer_id = ProducerId(self.producer.0);
        request.v3_and_below_producer_epoch = self.producer.1;
        request.v3_and_below_topics = vec![asked];
        let response = self.coordinator.call(&request).await?;
        let code = first_error(
            (response.results_by_topic_v3_and_below.iter())
                .flat_map(|t| &t.results_by_partition)
                .map(|p| p.partition_error_code),
        );
        match code {
            0 => Ok(()),
            code => Err(broker_error(code, "AddPartitionsToTxn")),
        }
    }

    /// One transactional batch of `records` records to partition 0.
    async fn produce(&mut self, topic: &str, records: u32, payload: &[u8]) -> Result<()> {
        let mut builder = BatchBuilder::new(records as usize * (payload.len() + 16) + 64);
        for _ in 0..records {
            builder.append(0, None, &[], payload);
        }
        let stamp = ProducerStamp {
            producer_id: self.producer.0,
            producer_epoch: self.producer.1,
            base_sequence: self.sequence,
            transactional: true,
        };
        let batch = builder.finish_as(Compression::None, Some(stamp))?;
        let mut partition = PartitionProduceData::default();
        partition.index = 0;
        partition.records = Some(batch);
        let mut data = TopicProduceData::default();
        data.name = topic_name(topic);
        data.partition_data = vec![partition];
        let mut request = ProduceRequest::default();
        request.transactional_id = Some(self.id());
        request.acks = -1;
        request.timeout_ms = 30_000;
        request.topic_data = vec![data];
        let negotiated = self.leader.version_of::<ProduceRequest>()?;
        let version = if self.version == 2 {
            12
        } else {
            negotiated.min(11)
        };
        let response = self.leader.call_at(&request, version).await?;
        let code = first_error(
            (response.responses.iter())
                .flat_map(|t| &t.partition_responses)
                .map(|p| p.error_code),
        );
        if code != 0 {
            return Err(broker_error(code, "Produce"));
        }
        self.sequence = self.sequence.wrapping_add(records as i32);
        Ok(())
    }

    /// EndTxn: v4 keeps the epoch, v5 answers the next one.
    async fn end_txn(&mut self, commit: bool) -> Result<()> {
        let mut request = EndTxnRequest::default();
        request.transactional_id = self.id();
        request.producer_id = ProducerId(self.producer.0);
        request.producer_epoch = self.producer.1;
        request.committed = commit;
        let version = if self.version == 2 { 5 } else { 4 };
        let response = self.coordinator.call_at(&request, version).await?;
        if response.error_code != 0 {
            return Err(broker_error(response.error_code, "EndTxn"));
        }
        if self.version == 2 {
            self.producer = (response.producer_id.0, response.producer_epoch);
            self.sequence = 0;
        }
        Ok(())
    }
}

impl Tally {
    fn new() -> Tally {
        Tally {
            latencies: new_histogram(),
            transactions: 0,
            elapsed: Duration::ZERO,
            cpu_s: 0.0,
        }
    }

    fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let _ = self.latencies.record(us);
        self.transactions += 1;
    }

    fn row(self, version: u8, records_per_txn: u32, cpu_measured: bool) -> TxnCostRow {
        let elapsed_s = self.elapsed.as_secs_f64();
        let per_txn = |total: f64| total / self.transactions.max(1) as f64;
        TxnCostRow {
            version,
            records_per_txn,
            transactions: self.transactions,
            elapsed_s,
            transactions_per_s: self.transactions as f64 / elapsed_s.max(f64::EPSILON),
            commit_latency_us: Percentiles::of(&self.latencies),
            broker_cpu_ms_per_txn: cpu_measured.then(|| per_txn(self.cpu_s * 1000.0)),
        }
    }
}

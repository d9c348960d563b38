//! The transactional queue's producer (`--transactional`): each
//! transaction sends 1 to 3 unique values to random partitions, then
//! commits, or aborts at random (one in four) or after a failed send. Its
//! sends are recorded with the transaction's id and its end as a `TxnEnd`,
//! so the checker can require committed values to be read and aborted ones
//! never to be (the consumers read `read_committed`).

use super::clients::{Target, MESSAGE_TIMEOUT_MS};
use super::history::{Op, SendOutcome, TxnOutcome};
use super::recorder::Recorder;
use crate::error::{BenchError, Result};
use rand::rngs::SmallRng;
use rand::Rng;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long `init_transactions`, a commit or an abort may block: a
/// coordinator failover (a session timeout plus an election) and more.
const TXN_CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Share of transactions aborted on purpose.
const ABORT_PROBABILITY: f64 = 0.25;
/// Pause after a failure, so a dead cluster is not a busy loop.
const FAILURE_PAUSE: Duration = Duration::from_millis(200);

/// A transactional producer, initialised (which fences any earlier one
/// with the same id and aborts its open transaction).
fn txn_producer(target: &Target, transactional_id: &str) -> Result<FutureProducer> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &target.bootstrap)
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", "20000")
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("message.timeout.ms", MESSAGE_TIMEOUT_MS.to_string())
        .set("request.timeout.ms", "3000")
        .create()
        .map_err(|e| BenchError::Other(format!("rdkafka producer: {e}")))?;
    // The rdkafka transaction calls block: keep them off the async workers.
    tokio::task::block_in_place(|| producer.init_transactions(TXN_CALL_TIMEOUT))
        .map_err(|e| BenchError::Other(format!("init_transactions: {e}")))?;
    Ok(producer)
}

/// A producer once one can be initialised, or `None` once `stop` is set.
async fn producer_until_stop(
    target: &Target,
    transactional_id: &str,
    stop: &AtomicBool,
) -> Option<FutureProducer> {
    while !stop.load(Ordering::SeqCst) {
        if let Ok(producer) = txn_producer(target, transactional_id) {
            return Some(producer);
        }
        tokio::time::sleep(FAILURE_PAUSE).await;
    }
    None
}

/// Commits (when `commit`) or aborts; an abortable commit failure aborts.
fn finish(producer: &FutureProducer, commit: bool) -> TxnOutcome {
    tokio::task::block_in_place(|| {
        if commit {
            match producer.commit_transaction(TXN_CALL_TIMEOUT) {
                Ok(()) => return TxnOutcome::Committed,
                Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => {}
                Err(error) => {
                    return TxnOutcome::Info {
                        error: error.to_string(),
                    }
                }
            }
        }
        match producer.abort_transaction(TXN_CALL_TIMEOUT) {
            Ok(()) => TxnOutcome::Aborted,
            Err(error) => TxnOutcome::Info {
                error: error.to_string(),
            },
        }
    })
}

/// One transaction's 1 to 3 sends, each recorded; `false` after the first
/// that failed (the transaction must then abort).
async fn send_values(
    producer: &FutureProducer,
    target: &Target,
    txn: &str,
    seq: &mut u64,
    rng: &mut SmallRng,
    recorder: &Recorder,
) -> bool {
    let process = txn.split('/').next().unwrap_or(txn).to_string();
    for _ in 0..rng.gen_range(1..=3) {
        let partition = rng.gen_range(0..target.partitions);
        let value = format!("{process}/{seq}");
        *seq += 1;
        let start_ms = recorder.now_ms();
        let record = FutureRecord::<(), str>::to(&target.topic)
            .partition(partition)
            .payload(&value);
        let outcome = match producer.send(record, Duration::ZERO).await {
            Ok(delivery) => SendOutcome::Ok {
                offset: delivery.offset,
            },
            Err((error, _)) => SendOutcome::Info {
                error: error.to_string(),
            },
        };
        let sent = matches!(outcome, SendOutcome::Ok { .. });
        recorder.push(Op::Send {
            process: process.clone(),
            partition,
            value,
            start_ms,
            end_ms: recorder.now_ms(),
            outcome,
            txn: Some(txn.to_string()),
        });
        if !sent {
            return false;
        }
    }
    true
}

/// Transactional producer `index` until `stop`.
pub async fn produce(
    target: Target,
    index: usize,
    seed: u64,
    recorder: Arc<Recorder>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let process = format!("p{index}");
    let transactional_id = format!("{}-{process}", target.topic);
    let mut rng: SmallRng = rand::SeedableRng::seed_from_u64(seed ^ index as u64);
    let mut seq: u64 = 0;
    let mut txn_seq: u64 = 0;
    let Some(mut producer) = producer_until_stop(&target, &transactional_id, &stop).await else {
        return Ok(());
    };
    while !stop.load(Ordering::SeqCst) {
        let txn = format!("{process}/t{txn_seq}");
        txn_seq += 1;
        if tokio::task::block_in_place(|| producer.begin_transaction()).is_err() {
            tokio::time::sleep(FAILURE_PAUSE).await;
            let Some(fresh) = producer_until_stop(&target, &transactional_id, &stop).await else {
                return Ok(());
            };
            producer = fresh;
            continue;
        }
        let sends_ok = send_values(&producer, &target, &txn, &mut seq, &mut rng, &recorder).await;
        let commit = sends_ok && !rng.gen_bool(ABORT_PROBABILITY);
        let start_ms = recorder.now_ms();
        let outcome = finish(&producer, commit);
        let unknown = matches!(outcome, TxnOutcome::Info { .. });
        recorder.push(Op::TxnEnd {
            process: process.clone(),
            txn,
            start_ms,
            end_ms: recorder.now_ms(),
            outcome,
        });
        if unknown {
            // A fresh producer fences this one and settles the open
            // transaction, so the next begins clean.
            tokio::time::sleep(FAILURE_PAUSE).await;
            let Some(fresh) = producer_until_stop(&target, &transactional_id, &stop).await else {
                return Ok(());
            };
            producer = fresh;
        }
    }
    Ok(())
}

//! The transaction coordinator at run time: one [`TxnCoordinator`] per
//! shard, serving the transactional ids whose `__transaction_state`
//! partition the shard owns. **Shard-local**: the [`TxnRuntime`] is a
//! field of the shard's runtimes (`shard.runtime().txns`), reached from other
//! shards only through the owner call ([`Shard::call`]; a [`TxnRequest`] is
//! an [`OwnerCall`]).
//!
//! A step runs under the transactional id's lock: ask the pure core, append
//! the new state to `__transaction_state` as the partition's leader (under
//! the lease the partition was loaded with, acks=all: the write counts once
//! the high watermark passed it), then apply it to the core. A coordinator
//! acts for a partition only while it leads it in the epoch it loaded it
//! in (`replay.rs`): one that lost the partition unloads it, stops its
//! timers for it and fails its steps with NOT_COORDINATOR, and its markers
//! carry that epoch as the coordinator epoch, which data partitions fence. Ending a transaction is three such steps around the
//! markers: persist PrepareCommit/PrepareAbort; write a marker on every
//! partition of the transaction (on their owner shards, each waited durable);
//! persist CompleteCommit/CompleteAbort. Once the Prepare state is durable
//! the outcome is decided: if a marker cannot be written, the periodic task
//! retries, and after a restart the replay finds the Prepare state and the
//! task finishes it (a marker written twice is harmless: the second one ends
//! nothing).
//!
//! The offsets of a transaction (TxnOffsetCommit) are persisted on the same
//! partition as its state, as a rill record ([`records::encode_offsets_key`])
//! holding the transaction's whole set, before TxnOffsetCommit is answered;
//! the tombstone of that record goes in the same batch as the Complete
//! state. So a transaction found in PrepareCommit after a crash still has
//! its offsets, and finishing it forwards them to the group coordinator
//! before the Complete state is written. Forwarding is idempotent (the same
//! offsets committed again), so a crash after forwarding and before Complete
//! only forwards them once more. Kafka's own design writes them to
//! `__consumer_offsets` at TxnOffsetCommit and applies them at the COMMIT
//! marker; this one keeps transactions out of the group core, which only
//! gains a check at TxnOffsetCommit and an unchecked apply at commit.
//!
//! The periodic task ([`run_timer`], every [`TIMER_INTERVAL_MS`]) also aborts
//! transactions open longer than their `transaction.timeout.ms`, with the
//! producer epoch bumped, so the zombie producer is fenced.
//!
//! Files: `execute.rs` (one function per request), `persist.rs` (appending
//! state durably), `finish.rs` (ending a decided transaction: offsets,
//! markers, Complete), `replay.rs` (loading and unloading a partition's state with its leadership), `timer.rs`,
//! and `join.rs`: a partition joining a transaction at its coordinator, as
//! a partition leader asks before a transaction's first batch there
//! (KIP-890, `routing::txn_join`).

mod execute;
mod finish;
pub mod join;
mod persist;
mod replay;
pub use replay::reload_on_leadership;
mod timer;

pub use timer::run_timer;

use crate::admin_changes;
use crate::replication_runtime::LeaseTable;
use crate::Shard;
use coordinators::txn::{
    txn_partition_for, PendingOffset, TxnCoordinator, TxnMetadata, TXN_STATE_PARTITIONS,
    TXN_STATE_TOPIC,
};
use engine::ErrorCode;
use engine::TopicPartition;
use glommio::sync::Semaphore;
use kernel::call::OwnerCall;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// How often timed-out transactions are aborted and unfinished ones retried
/// (Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`
/// is 10 s; a shorter tick makes a timeout take effect close to its value).
pub const TIMER_INTERVAL_MS: u64 = 500;
/// Attempts at writing the markers of a transaction within one step.
const MARKER_ATTEMPTS: u32 = 5;
/// Fault-injection point for crash tests: when this environment variable is
/// `1`, the process aborts right after a PrepareCommit state is durable,
/// before the transaction's offsets are forwarded and its markers written —
/// the window the recovery after a restart has to close.
pub const FAULT_CRASH_AFTER_PREPARE: &str = "RILL_FAULT_TXN_CRASH_AFTER_PREPARE";

/// A coordinator request, sent to the owner shard of the transactional id.
#[derive(Debug, Clone)]
pub enum TxnRequest {
    /// InitProducerId with a transactional id.
    InitProducerId {
        /// The transactional id.
        transactional_id: String,
        /// `transaction.timeout.ms`.
        timeout_ms: i32,
        /// KIP-360: the producer's current `(id, epoch)`, to bump it.
        expected: Option<(i64, i16)>,
    },
    /// AddPartitionsToTxn (or AddOffsetsToTxn with the offsets partition).
    AddPartitions {
        /// The transactional id.
        transactional_id: String,
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
        /// The partitions.
        partitions: Vec<(String, i32)>,
        /// v4+ `verify_only`: check, do not add.
        verify_only: bool,
        /// The client's transaction version: 2 when its partition leader
        /// adds for a client of transactions v2.
        client_version: i16,
    },
    /// TxnOffsetCommit.
    OffsetCommit {
        /// The transactional id.
        transactional_id: String,
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
        /// The group.
        group_id: String,
        /// Generation, member id and instance id the consumer sent.
        member: GroupMember,
        /// The offsets.
        offsets: Vec<PendingOffset>,
    },
    /// EndTxn.
    EndTxn {
        /// The transactional id.
        transactional_id: String,
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
        /// Commit (true) or abort.
        commit: bool,
        /// The client's transaction version: 2 (EndTxn v5) ends the
        /// transaction under the next epoch (KIP-890 part 2).
        client_version: i16,
    },
    /// DescribeTransactions of one id.
    Describe {
        /// The transactional id.
        transactional_id: String,
    },
    /// ListTransactions: every id of the receiving shard.
    List,
}

impl TxnRequest {
    /// The transactional id (none for List).
    fn transactional_id(&self) -> Option<&str> {
        match self {
            TxnRequest::InitProducerId {
                transactional_id, ..
            }
            | TxnRequest::AddPartitions {
                transactional_id, ..
            }
            | TxnRequest::OffsetCommit {
                transactional_id, ..
            }
            | TxnRequest::EndTxn {
                transactional_id, ..
            }
            | TxnRequest::Describe { transactional_id } => Some(transactional_id),
            TxnRequest::List => None,
        }
    }

    /// The answer refusing this request with `code`, in its reply's shape.
    fn refused(&self, code: ErrorCode) -> TxnReply {
        match self {
            TxnRequest::InitProducerId { .. } => TxnReply::Init(Err(code)),
            TxnRequest::AddPartitions {
                verify_only: true, ..
            } => TxnReply::Verified(Err(code)),
            TxnRequest::Describe { .. } | TxnRequest::List => TxnReply::Code(code),
            TxnRequest::EndTxn { .. } => TxnReply::Ended(Err(code)),
            TxnRequest::AddPartitions { .. } | TxnRequest::OffsetCommit { .. } => {
                TxnReply::Code(code)
            }
        }
    }
}

/// The coordinator's answer.
#[derive(Debug, Clone)]
pub enum TxnReply {
    /// InitProducerId: `(producer_id, epoch)`.
    Init(Result<(i64, i16), ErrorCode>),
    /// A bare error code (0 on success).
    Code(ErrorCode),
    /// EndTxn: the producer's `(producer_id, epoch)` from now on (new ones
    /// under transactions v2).
    Ended(Result<(i64, i16), ErrorCode>),
    /// `verify_only`: whether each partition is in the transaction.
    Verified(Result<Vec<bool>, ErrorCode>),
    /// Describe: the state, if the id is known.
    Described(Option<TxnMetadata>),
    /// List: every id with its state.
    Listed(Vec<(String, TxnMetadata)>),
}

impl TxnReply {
    /// The error code of a reply that failed to arrive.
    fn unavailable() -> TxnReply {
        TxnReply::Code(ErrorCode::CoordinatorNotAvailable)
    }
}

/// Generation, member id and instance id a consumer sent with TxnOffsetCommit.
pub type GroupMember = (i32, String, Option<String>);

/// One shard's coordinator with its locks.
pub struct TxnRuntime {
    core: RefCell<TxnCoordinator>,
    /// One lock per transactional id: its steps never interleave.
    locks: RefCell<HashMap<String, Rc<Semaphore>>>,
    /// The `__transaction_state` partitions loaded into `core`, each with
    /// the leadership it was loaded under (see [`replay`]).
    leases: LeaseTable,
}

impl Default for TxnRuntime {
    fn default() -> Self {
        TxnRuntime {
            core: RefCell::new(TxnCoordinator::new()),
            locks: RefCell::new(HashMap::new()),
            leases: LeaseTable::new(TXN_STATE_TOPIC),
        }
    }
}

impl TxnRuntime {
    fn lock_for(&self, transactional_id: &str) -> Rc<Semaphore> {
        self.locks
            .borrow_mut()
            .entry(transactional_id.to_string())
            .or_insert_with(|| Rc::new(Semaphore::new(1)))
            .clone()
    }
}

/// The shard coordinating `transactional_id`.
pub fn coordinator_shard(shard: &Shard, transactional_id: &str) -> usize {
    shard.owner(&TopicPartition::new(
        TXN_STATE_TOPIC,
        txn_partition_for(transactional_id),
    ))
}

/// Runs `request` on the coordinator shard of its transactional id.
pub async fn call(shard: &Rc<Shard>, request: TxnRequest) -> TxnReply {
    let owner = match request.transactional_id() {
        Some(id) => {
            if !crate::cluster_runtime::leads(shard, TXN_STATE_TOPIC, txn_partition_for(id)) {
                // Another broker leads this id's partition: the client finds it.
                return TxnReply::Code(ErrorCode::NotCoordinator);
            }
            coordinator_shard(shard, id)
        }
        None => shard.id,
    };
    call_on(shard, owner, request).await
}

/// Runs `request` on shard `owner`.
pub async fn call_on(shard: &Rc<Shard>, owner: usize, request: TxnRequest) -> TxnReply {
    match shard.call(owner, request).await {
        Ok(reply) => reply,
        Err(e) => {
            tracing::warn!(owner, error = %e, "transaction request not delivered");
            TxnReply::unavailable()
        }
    }
}

impl OwnerCall<crate::ShardRuntime> for TxnRequest {
    type Reply = TxnReply;

    async fn run(self, shard: Rc<Shard>) -> TxnReply {
        execute::execute(&shard, self).await
    }
}

/// Creates `__transaction_state` (compacted, 50 partitions) if it does not exist.
pub async fn ensure_txn_topic(shard: &Rc<Shard>) -> Result<(), ErrorCode> {
    let configs = vec![
        (String::from("cleanup.policy"), String::from("compact")),
        (
            String::from("segment.bytes"),
            // `transaction.state.log.segment.bytes`.
            shard.config.txn_state_segment_bytes.to_string(),
        ),
    ];
    admin_changes::ensure_internal_topic(shard, TXN_STATE_TOPIC, TXN_STATE_PARTITIONS, configs)
        .await
        .map(drop)
}

/// ListTransactions across every shard.
pub async fn list_all(shard: &Rc<Shard>) -> Vec<(String, TxnMetadata)> {
    let mut all = Vec::new();
    for owner in 0..shard.count {
        if let TxnReply::Listed(rows) = call_on(shard, owner, TxnRequest::List).await {
            all.extend(rows);
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

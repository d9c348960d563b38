//! The transaction coordinator's core: a pure state machine with no I/O.
//!
//! One [`TxnCoordinator`] lives on each shard and serves the transactional
//! ids whose `__transaction_state` partition ([`txn_partition_for`], Kafka's
//! `abs(hashCode) % 50`) that shard owns. Every step takes the request and
//! the current time and answers with either an error code or the new
//! [`TxnMetadata`] to persist; the runtime (`runtimes::txn_runtime`) appends
//! that record, waits until it is durable, and only then calls
//! [`TxnCoordinator::apply`] — the same call that replays the log after a
//! restart, so the state after a restart is the state before it.
//!
//! The runtime serializes the steps of one transactional id, so the core
//! never sees two steps of one id interleaved.
//!
//! Map of the modules:
//! - [`records`]: the `__transaction_state` key and value formats.
//! - [`coordinator`]: the per-shard coordinator and its transitions.

pub mod coordinator;
pub mod records;
#[cfg(test)]
mod tv2_tests;

pub use coordinator::{EndStep, InitStep, PendingOffset, PendingOffsets, TxnCoordinator};

/// The transaction version of transactions v2 (KIP-890 part 2).
pub const TRANSACTION_VERSION_2: i16 = 2;

use std::collections::BTreeSet;

/// Name of the transaction log topic.
pub const TXN_STATE_TOPIC: &str = "__transaction_state";
/// `transaction.state.log.num.partitions` (Kafka's default).
pub const TXN_STATE_PARTITIONS: i32 = 50;
/// `transaction.max.timeout.ms` (Kafka's default, 15 minutes).
pub const TXN_MAX_TIMEOUT_MS: i32 = 900_000;

/// `transaction.state.log` partition of a transactional id: Kafka's
/// `Utils.abs(transactionalId.hashCode) % partitions`, the same placement as
/// a group's `__consumer_offsets` partition.
pub fn txn_partition_for(transactional_id: &str) -> i32 {
    crate::group::offsets_partition_for(transactional_id, TXN_STATE_PARTITIONS)
}

/// Kafka's `TransactionState`, with its ids as stored in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction in progress (after InitProducerId).
    Empty,
    /// Partitions have been added; records may be written.
    Ongoing,
    /// EndTxn(commit) accepted; markers being written.
    PrepareCommit,
    /// EndTxn(abort) or a timeout; markers being written.
    PrepareAbort,
    /// Markers written: committed.
    CompleteCommit,
    /// Markers written: aborted.
    CompleteAbort,
    /// The transactional id expired.
    Dead,
    /// Kafka 2.x's state while fencing an ongoing transaction.
    PrepareEpochFence,
}

impl TxnState {
    /// The id Kafka stores.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state of a stored id.
    pub fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The name DescribeTransactions and ListTransactions use.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state of a name (ListTransactions' filter).
    pub fn from_name(name: &str) -> Option<TxnState> {
        (0..=7)
            .filter_map(TxnState::from_id)
            .find(|s| s.name() == name)
    }

    /// Markers are being written: the transaction is decided, not finished.
    pub fn is_prepare(self) -> bool {
        matches!(
            self,
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence
        )
    }
}

/// One transactional id's state, as stored in `__transaction_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    /// The producer id (kept across re-inits while the epoch can grow).
    pub producer_id: i64,
    /// The current epoch; older epochs are fenced.
    pub producer_epoch: i16,
    /// `transaction.timeout.ms` asked at InitProducerId.
    pub timeout_ms: i32,
    /// Where the transaction stands.
    pub state: TxnState,
    /// Partitions written in the current transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// Time of the last change.
    pub last_update_ms: i64,
    /// Time the current transaction began (its first AddPartitions), -1 if none.
    pub start_ms: i64,
    /// Transactions v2 (KIP-890), the fields Kafka keeps tagged in the
    /// value's version 1.
    pub tv2: Tv2Fields,
}

/// What transactions v2 (KIP-890 part 2) adds to a transactional id's
/// state: every EndTxn gives the producer a new epoch, and when the epochs
/// run out, a new producer id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tv2Fields {
    /// The producer id before the last move to a new one, -1 if none (so a
    /// retried EndTxn of the old id is recognized).
    pub previous_producer_id: i64,
    /// The id the producer moves to when the transaction being ended
    /// completes (its epoch reached the limit), -1 if none.
    pub next_producer_id: i64,
    /// The transaction version the client ended its last transaction with
    /// (2: an epoch per transaction), 0 before any.
    pub client_version: i16,
}

impl Default for Tv2Fields {
    fn default() -> Self {
        Tv2Fields {
            previous_producer_id: -1,
            next_producer_id: -1,
            client_version: 0,
        }
    }
}

impl Tv2Fields {
    /// Whether these are all Kafka's defaults (the value needs no version 1).
    pub fn is_default(&self) -> bool {
        *self == Tv2Fields::default()
    }
}

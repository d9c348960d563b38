//! The recorded history of a verify run: every operation a client made,
//! with its outcome and its start and end in milliseconds since the run
//! began. The checker ([`super::checker`]) reads only this, so a history
//! can be written by hand in a test, or saved and checked again later.

use serde::{Deserialize, Serialize};

/// How a consumer got its partitions: `assign` (fixed, from offset 0, so
/// its successive offsets per partition must be contiguous) or `subscribe`
/// (a consumer group, whose assignment moves on every rebalance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsumerMode {
    Assign,
    Subscribe,
}

/// What became of one send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "type")]
pub enum SendOutcome {
    /// Acknowledged (acks=all) at this offset.
    Ok { offset: i64 },
    /// Failed or timed out: the record may or may not have been written
    /// (Jepsen's `:info`), so the checker neither expects nor forbids it.
    Info { error: String },
}

/// What became of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "type")]
pub enum TxnOutcome {
    Committed,
    /// Aborted, by choice or after a failed send: none of its values may
    /// ever be read by a `read_committed` consumer.
    Aborted,
    /// The commit or abort failed: either may have happened.
    Info {
        error: String,
    },
}

/// One record a poll returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolledRecord {
    pub partition: i32,
    pub offset: i64,
    pub value: String,
}

/// One operation of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "op")]
pub enum Op {
    /// One producer sent one unique value to one partition.
    Send {
        process: String,
        partition: i32,
        value: String,
        start_ms: u64,
        end_ms: u64,
        outcome: SendOutcome,
        /// The transaction the send belongs to (transactional runs only):
        /// it counts as acknowledged only if that transaction committed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        txn: Option<String>,
    },
    /// The end of a transaction: its commit or abort, and what came of it.
    TxnEnd {
        process: String,
        txn: String,
        start_ms: u64,
        end_ms: u64,
        outcome: TxnOutcome,
    },
    /// One consumer's poll, with the records it returned (in order).
    Poll {
        process: String,
        mode: ConsumerMode,
        start_ms: u64,
        end_ms: u64,
        records: Vec<PolledRecord>,
    },
    /// A group offset commit: `(partition, next offset)` pairs; `ok` when
    /// the broker acknowledged it.
    Commit {
        process: String,
        start_ms: u64,
        end_ms: u64,
        offsets: Vec<(i32, i64)>,
        ok: bool,
    },
    /// The group's committed offsets read back (OffsetFetch).
    CommittedRead {
        process: String,
        start_ms: u64,
        end_ms: u64,
        offsets: Vec<(i32, i64)>,
    },
}

impl Op {
    /// The short kind name, for counts in the result.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Send {
                outcome: SendOutcome::Ok { .. },
                ..
            } => "send-ok",
            Op::Send { .. } => "send-info",
            Op::Poll { .. } => "poll",
            Op::Commit { ok: true, .. } => "commit-ok",
            Op::Commit { .. } => "commit-fail",
            Op::CommittedRead { .. } => "committed-read",
            Op::TxnEnd {
                outcome: TxnOutcome::Committed,
                ..
            } => "txn-commit",
            Op::TxnEnd {
                outcome: TxnOutcome::Aborted,
                ..
            } => "txn-abort",
            Op::TxnEnd { .. } => "txn-info",
        }
    }
}

/// A fault the nemesis injected, from its start to its heal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// `kill` (SIGKILL, then restart) or `pause` (SIGSTOP, then SIGCONT).
    pub kind: String,
    /// `random` or `leader` (of the partition named in `partition`).
    pub target: String,
    pub node_id: i32,
    pub partition: Option<i32>,
    pub start_ms: u64,
    pub end_ms: u64,
}

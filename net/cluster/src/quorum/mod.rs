//! The metadata quorum (issue #18, KIP-500/KIP-595's role): cluster metadata
//! is a replicated log kept by raft-rs (TiKV's `raft` crate), not by
//! home-made consensus. raft-rs is sans-IO: it is stepped with messages and
//! ticks and hands back a `Ready` of what to persist, send and apply — which
//! fits a thread-per-core broker, where the quorum runs on one shard.
//!
//! Map of the module:
//! - [`node`]: [`QuorumNode`], one member of the quorum: propose, step, tick,
//!   and `advance`, which handles raft-rs's `Ready` in its required order and
//!   applies committed records to a [`StateMachine`].
//! - [`storage`]: the [`LogStore`] contract the node persists through and
//!   [`FileStorage`], the durable one (files in a directory, fsynced).
//! - [`log_cache`]: the in-memory view of the log both stores serve raft-rs's
//!   reads from (entries since the last snapshot, hard state, conf state).
//! - [`codec`]: the on-disk encoding of entries, hard state, conf state and
//!   snapshots, and the length + CRC32C frames they travel in.
//! - [`sim_storage`]: [`SimStorage`], an in-memory store for the simulation,
//!   with a fault switch that makes it lie about fsync.
//! - [`sim`]: a seeded simulation of 3 or 5 nodes over a faulty network with
//!   crash-restarts; [`auditor`]: what it checks after every step.
//! - [`wire`]: a Raft message as bytes between controllers.
//! - [`logger`]: raft-rs logs through `slog`; this bridges it to `tracing`.
//! - [`rng`]: the seeded generator that replaces raft-rs's `thread_rng` for
//!   election timeouts, so a run is a function of its seed.
//!
//! Membership changes (KIP-853) are raft-rs's ConfChangeV2 entries, one
//! change at a time; [`node::QuorumNode::propose_conf_change`] says why a
//! snapshot follows each. The transport and the wiring onto the metadata
//! shard are `rill-runtimes`'s `cluster_runtime`.

/// Implements `raft::Storage` for a store whose `cache` field (a
/// [`log_cache::LogCache`]) holds what raft-rs reads: the durable stores
/// differ in how they write, never in how they are read.
macro_rules! storage_served_by_cache {
    ($store:ty) => {
        impl raft::Storage for $store {
            fn initial_state(&self) -> raft::Result<raft::RaftState> {
                raft::Storage::initial_state(&self.cache)
            }

            fn entries(
                &self,
                low: u64,
                high: u64,
                max_size: impl Into<Option<u64>>,
                context: raft::GetEntriesContext,
            ) -> raft::Result<Vec<raft::eraftpb::Entry>> {
                raft::Storage::entries(&self.cache, low, high, max_size, context)
            }

            fn term(&self, index: u64) -> raft::Result<u64> {
                raft::Storage::term(&self.cache, index)
            }

            fn first_index(&self) -> raft::Result<u64> {
                Ok(self.cache.first_index())
            }

            fn last_index(&self) -> raft::Result<u64> {
                Ok(self.cache.last_index())
            }

            fn snapshot(
                &self,
                request_index: u64,
                to: u64,
            ) -> raft::Result<raft::eraftpb::Snapshot> {
                raft::Storage::snapshot(&self.cache, request_index, to)
            }
        }
    };
}

pub mod auditor;
pub mod codec;
pub mod log_cache;
pub mod logger;
pub mod node;
pub mod rng;
pub mod sim;
pub mod sim_storage;
pub mod storage;
pub mod wire;

use std::path::PathBuf;

pub use auditor::ViolationKind;
pub use node::{Outgoing, QuorumConfig, QuorumNode, StateMachine};
pub use raft::eraftpb::Message;
pub use sim::{simulate, simulate_with, RecordingMachine, SimConfig, SimStats, Violation};
pub use sim_storage::{DiskFault, SimStorage};
pub use storage::{FileStorage, LogStore};

/// What can go wrong in the quorum: an operating error of the disk, a store
/// whose bytes are not what was written, or an error raft-rs reports.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    /// A file operation failed (disk full, permissions, the directory gone).
    #[error("quorum storage: {op} {path:?}: {source}")]
    Io {
        /// What was being done, e.g. "fsync".
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Stored bytes fail their checksum or do not decode, somewhere a torn
    /// write cannot explain (not the tail of the log).
    #[error("quorum storage corrupt: {path:?} at byte {offset_bytes}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where in the file.
        offset_bytes: u64,
        /// What was wrong.
        reason: String,
    },
    /// raft-rs refused a call (e.g. a proposal with no leader known).
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// A committed entry this node cannot read.
    #[error("entry {index} has type {entry_type}, which this quorum cannot apply")]
    UnsupportedEntry {
        /// The entry's index.
        index: u64,
        /// Its raft-rs entry type.
        entry_type: String,
    },
    /// An empty record was proposed; empty entries are raft-rs's own.
    #[error("an empty record cannot be proposed")]
    EmptyProposal,
    /// The state machine could not restore a snapshot.
    #[error("state machine restore: {0}")]
    Restore(String),
}

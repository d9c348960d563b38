//! [`SimStorage`]: a [`LogStore`] in memory for the simulation, where
//! thousands of fsyncs per run would cost seconds. It keeps
//! [`LogStore`]'s contract the way a correct disk does: a write is durable
//! when the call returns, so a crash-restart (which happens between the
//! simulation's steps) keeps every write and loses the node's volatile
//! state — raft-rs's unstable log, unsent messages, the state machine.
//!
//! Its faults, for the tests that the auditor catches a broken disk, make
//! it lie about fsync: a restart finds the last log entry gone, as a disk
//! that acknowledged a flush it never did would (see [`DiskFault`]).

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};

use super::log_cache::LogCache;
use super::storage::LogStore;
use super::QuorumError;

/// How a [`SimStorage`] lies about fsync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFault {
    /// An honest disk.
    None,
    /// A restart loses the last log entry, and the commit index is pulled
    /// back with it (the node forgets it ever committed it).
    ForgetLastEntry,
    /// A restart loses the last log entry when it is above the commit
    /// index: the node acknowledged it to the leader but never learnt it
    /// was committed, so nothing local gives the loss away.
    ForgetUncommittedLastEntry,
}

/// An in-memory [`LogStore`] (see the module doc).
#[derive(Debug, Clone)]
pub struct SimStorage {
    cache: LogCache,
    fault: DiskFault,
}

impl SimStorage {
    /// A fresh member's store with the given voters.
    pub fn new(voters: &[u64]) -> Self {
        SimStorage {
            cache: LogCache::new(voters),
            fault: DiskFault::None,
        }
    }

    /// Makes the store lie about fsync (see [`DiskFault`]).
    pub fn with_fault(mut self, fault: DiskFault) -> Self {
        self.fault = fault;
        self
    }

    /// What a restart finds: everything written, unless a fault is on.
    pub fn restart(self) -> Self {
        let last_index = self.cache.last_index();
        let forget = match self.fault {
            DiskFault::None => false,
            DiskFault::ForgetLastEntry => last_index > self.cache.snapshot_index(),
            DiskFault::ForgetUncommittedLastEntry => last_index > self.cache.hard_state().commit,
        };
        if !forget {
            return self;
        }
        let mut entries = self.cache.entries_slice().to_vec();
        entries.pop();
        let last_index = entries
            .last()
            .map_or(self.cache.snapshot_index(), |entry| entry.index);
        let mut hard_state = self.cache.hard_state().clone();
        hard_state.commit = hard_state.commit.min(last_index);
        let cache = LogCache::from_parts(
            hard_state,
            self.cache.conf_state().clone(),
            self.cache.snapshot().clone(),
            entries,
        )
        .unwrap_or_else(|reason| panic!("dropping the last entry keeps the log whole: {reason}"));
        SimStorage {
            cache,
            fault: self.fault,
        }
    }
}

impl LogStore for SimStorage {
    fn append(&mut self, entries: &[Entry]) -> Result<(), QuorumError> {
        self.cache.append(entries);
        Ok(())
    }

    fn set_hard_state(&mut self, hard_state: &HardState) -> Result<(), QuorumError> {
        self.cache.set_hard_state(hard_state.clone());
        Ok(())
    }

    fn set_conf_state(&mut self, conf_state: &ConfState) -> Result<(), QuorumError> {
        self.cache.set_conf_state(conf_state.clone());
        Ok(())
    }

    fn apply_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), QuorumError> {
        self.cache.apply_snapshot(snapshot);
        Ok(())
    }

    fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<(), QuorumError> {
        self.cache.compact(index, data);
        Ok(())
    }

    fn cache(&self) -> &LogCache {
        &self.cache
    }
}

// raft-rs reads the log through `raft::Storage`; every store serves those
// reads from its in-memory `LogCache`.
storage_served_by_cache!(SimStorage);

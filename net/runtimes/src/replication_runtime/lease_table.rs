//! The leases a coordinator loaded its partitions under: one table for the
//! group coordinator (`__consumer_offsets`) and one for the transaction
//! coordinator (`__transaction_state`), the same rules for both.
//!
//! A coordinator acts for a partition only while the lease it loaded the
//! partition under is the partition's current one ([`super::leader_lease`]).
//! Loads run one at a time (the table's load lock), each after unloading
//! the partition, so a partition is recorded under one lease at a time.

use super::leader::{leader_lease, LeaderLease};
use crate::Shard;
use engine::{ErrorCode, TopicPartition};
use glommio::sync::Semaphore;
use std::cell::RefCell;
use std::collections::HashMap;

/// The partitions of one internal topic a coordinator has loaded, by the
/// lease each was loaded under.
#[derive(Debug)]
pub struct LeaseTable {
    topic: &'static str,
    leases: RefCell<HashMap<i32, LeaderLease>>,
    load_lock: Semaphore,
}

impl LeaseTable {
    /// An empty table for the partitions of `topic`.
    pub fn new(topic: &'static str) -> LeaseTable {
        LeaseTable {
            topic,
            leases: RefCell::new(HashMap::new()),
            load_lock: Semaphore::new(1),
        }
    }

    /// The lease `partition` was loaded under, current or not: a write
    /// stamps it, and a write that finds it changed after its wait was
    /// overtaken by an unload.
    pub fn recorded(&self, partition: i32) -> Option<LeaderLease> {
        self.leases.borrow().get(&partition).copied()
    }

    /// The loaded lease, if it is still the partition's current one.
    pub fn current(&self, shard: &Shard, partition: i32) -> Option<LeaderLease> {
        let loaded = self.recorded(partition)?;
        let tp = TopicPartition::new(self.topic, partition);
        (leader_lease(shard, &tp) == Some(loaded)).then_some(loaded)
    }

    /// The lease `partition` is loaded under, running `unload` then `load`
    /// first (one load at a time) when this broker leads it under a lease
    /// it was not loaded with. NOT_COORDINATOR when it does not lead the
    /// partition; `load`'s error when the load fails.
    pub async fn loaded(
        &self,
        shard: &Shard,
        partition: i32,
        unload: impl Fn(i32),
        load: impl AsyncFnOnce(LeaderLease) -> Result<(), ErrorCode>,
    ) -> Result<LeaderLease, ErrorCode> {
        if let Some(lease) = self.current(shard, partition) {
            return Ok(lease);
        }
        let _permit = (self.load_lock.acquire_permit(1).await)
            .map_err(|_| ErrorCode::CoordinatorNotAvailable)?;
        if let Some(lease) = self.current(shard, partition) {
            return Ok(lease);
        }
        unload(partition);
        let tp = TopicPartition::new(self.topic, partition);
        let lease = leader_lease(shard, &tp).ok_or_else(|| no_lease(shard, &tp))?;
        load(lease).await?;
        Ok(lease)
    }

    /// Records `partition` as loaded under `lease`, at the end of a load.
    ///
    /// # Panics
    /// When another lease is recorded for it: loads run one at a time,
    /// each after unloading the partition, so that is a bug.
    pub fn record(&self, partition: i32, lease: LeaderLease) {
        let previous = self.leases.borrow_mut().insert(partition, lease);
        assert!(
            previous.is_none(),
            "a partition is loaded under one lease at a time: {}-{partition} loaded under \
             {lease:?} while {previous:?} was recorded",
            self.topic
        );
    }

    /// Forgets `partition`'s lease (the caller unloads its state).
    pub fn forget(&self, partition: i32) {
        self.leases.borrow_mut().remove(&partition);
    }

    /// The loaded partitions whose lease is no longer current, with the
    /// lease each was loaded under.
    pub fn lost(&self, shard: &Shard) -> Vec<(i32, LeaderLease)> {
        let loaded: Vec<(i32, LeaderLease)> =
            self.leases.borrow().iter().map(|(p, l)| (*p, *l)).collect();
        (loaded.into_iter())
            .filter(|(partition, lease)| {
                leader_lease(shard, &TopicPartition::new(self.topic, *partition)) != Some(*lease)
            })
            .collect()
    }
}
/// Why there is no lease on `tp`: where the committed metadata says this
/// broker leads it, its replica is still being made or given its role
/// (just after the topic's creation or a leader change), and the client
/// retries (COORDINATOR_LOAD_IN_PROGRESS, Kafka's answer while it loads);
/// elsewhere NOT_COORDINATOR, and the client looks for the coordinator.
fn no_lease(shard: &Shard, tp: &TopicPartition) -> ErrorCode {
    if crate::cluster_runtime::leads(shard, &tp.topic, tp.partition) {
        ErrorCode::CoordinatorLoadInProgress
    } else {
        ErrorCode::NotCoordinator
    }
}

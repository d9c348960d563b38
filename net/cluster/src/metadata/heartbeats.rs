//! [`BrokerHeartbeats`]: when the active controller last heard from each
//! broker.
//!
//! Not part of the replicated state, as in Kafka (`BrokerHeartbeatManager`):
//! heartbeat times are facts about one controller's clock and network, and
//! replicating every heartbeat would write to the log every few hundred
//! milliseconds per broker. Only the *decision* they lead to (a
//! [`super::MetadataRecord::FenceBroker`]) is replicated. A controller that
//! becomes active starts every broker's session afresh (see
//! [`BrokerHeartbeats::start_sessions`]), so a failover never fences a
//! broker for the time the old controller was silent.

use std::collections::{BTreeMap, BTreeSet};

use crate::placement::BrokerId;

use super::image::MetadataImage;

/// Kafka's default `broker.session.timeout.ms`.
pub const DEFAULT_BROKER_SESSION_TIMEOUT_MS: i64 = 9_000;

/// Last heartbeat time of each broker, on the active controller only. The
/// times are the controller process's monotonic milliseconds (the
/// runtime's `Shard::monotonic_ms`), so that a jump of its wall clock
/// neither fences live brokers nor keeps dead ones, as KRaft's heartbeat
/// manager runs on `nanoTime`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerHeartbeats {
    last_heartbeat_ms: BTreeMap<BrokerId, i64>,
    /// The partitions each broker said, at its last heartbeat, it cannot
    /// append to (a full data dir, an offline partition): `(topic id,
    /// partition)`.
    unwritable: BTreeMap<BrokerId, BTreeSet<([u8; 16], i32)>>,
}

impl BrokerHeartbeats {
    /// No broker heard from yet.
    pub fn new() -> Self {
        BrokerHeartbeats::default()
    }

    /// Records a heartbeat (or a registration) of `broker_id` at `now_ms`.
    /// Time never goes back for a broker: a late, reordered heartbeat does
    /// not shorten its session.
    pub fn touch(&mut self, broker_id: BrokerId, now_ms: i64) {
        let last = self.last_heartbeat_ms.entry(broker_id).or_insert(now_ms);
        *last = (*last).max(now_ms);
        assert!(self.last_heartbeat_ms.get(&broker_id) >= Some(&now_ms));
    }

    /// Forgets a broker (unregistered).
    pub fn forget(&mut self, broker_id: BrokerId) {
        self.last_heartbeat_ms.remove(&broker_id);
        self.unwritable.remove(&broker_id);
    }

    /// Sets what `broker_id` cannot append to, as its heartbeat says.
    pub fn set_unwritable(&mut self, broker_id: BrokerId, partitions: BTreeSet<([u8; 16], i32)>) {
        if partitions.is_empty() {
            self.unwritable.remove(&broker_id);
        } else {
            self.unwritable.insert(broker_id, partitions);
        }
    }

    /// The partitions `broker_id` said it cannot append to.
    pub fn unwritable_of(&self, broker_id: BrokerId) -> Vec<([u8; 16], i32)> {
        (self.unwritable.get(&broker_id))
            .map(|set| set.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The brokers that said they cannot append to the partition.
    pub fn unwritable_at(&self, topic_id: [u8; 16], partition: i32) -> BTreeSet<BrokerId> {
        (self.unwritable.iter())
            .filter(|(_, set)| set.contains(&(topic_id, partition)))
            .map(|(&broker_id, _)| broker_id)
            .collect()
    }

    /// When the broker was last heard from.
    pub fn last_heartbeat_ms(&self, broker_id: BrokerId) -> Option<i64> {
        self.last_heartbeat_ms.get(&broker_id).copied()
    }

    /// Whether the broker's session is still alive at `now_ms`: heard from
    /// less than `session_timeout_ms` ago. A broker never heard from has no
    /// session.
    pub fn has_valid_session(
        &self,
        broker_id: BrokerId,
        now_ms: i64,
        session_timeout_ms: i64,
    ) -> bool {
        self.last_heartbeat_ms(broker_id)
            .is_some_and(|last_ms| now_ms.saturating_sub(last_ms) < session_timeout_ms)
    }

    /// On becoming the active controller: every registered broker gets a
    /// full session from `now_ms` (it may have heartbeated to the previous
    /// controller a moment ago), and brokers no longer registered are
    /// forgotten.
    pub fn start_sessions(&mut self, image: &MetadataImage, now_ms: i64) {
        self.last_heartbeat_ms
            .retain(|broker_id, _| image.broker(*broker_id).is_some());
        self.unwritable
            .retain(|broker_id, _| image.broker(*broker_id).is_some());
        for &broker_id in image.brokers().keys() {
            self.touch(broker_id, now_ms);
        }
        assert_eq!(self.last_heartbeat_ms.len(), image.brokers().len());
    }

    /// Unfenced brokers whose session has expired at `now_ms`, in id order.
    /// A registered broker never heard from starts its session now (as
    /// [`BrokerHeartbeats::start_sessions`] would have).
    pub fn expired(
        &mut self,
        image: &MetadataImage,
        now_ms: i64,
        session_timeout_ms: i64,
    ) -> Vec<BrokerId> {
        let mut expired = Vec::new();
        for (&broker_id, broker) in image.brokers() {
            if self.last_heartbeat_ms(broker_id).is_none() {
                self.touch(broker_id, now_ms);
            }
            if !broker.fenced && !self.has_valid_session(broker_id, now_ms, session_timeout_ms) {
                expired.push(broker_id);
            }
        }
        expired
    }
}

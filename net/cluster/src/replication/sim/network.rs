//! The simulated network: messages in flight between the replicas and the
//! controller, and which links are cut.
//!
//! Delay and reordering come from the scheduler delivering any message in
//! flight, not the oldest; loss and duplication are scheduler steps of their
//! own; a cut link drops what is sent over it and what arrives over it. The
//! number of messages in flight is bounded, and a send to a full network is
//! lost, as a real one loses packets under load.

use std::collections::BTreeSet;

use engine::types::{LeaderEpoch, Offset};

use super::txn::TxnRecord;
use crate::replication::{AlterPartition, EpochEndOffset, ReplicaId};

/// A replica id, [`CONTROLLER`], or a data partition's leader
/// ([`data_partition_endpoint`]).
pub(super) type Endpoint = ReplicaId;

/// The controller's endpoint (no broker has a negative id).
pub(super) const CONTROLLER: Endpoint = -1;

/// The endpoint of data partition `partition`'s leader (past any broker
/// id the simulation uses): only its links matter, for the markers.
pub(super) fn data_partition_endpoint(partition: usize) -> Endpoint {
    1_000 + partition as Endpoint
}

/// One record of the simulated log: the epoch it was written in, a unique
/// id, so two records at one offset can always be told apart, and the
/// transaction-log record it carries, if a coordinator wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    /// The leader epoch of the batch.
    pub(super) epoch: LeaderEpoch,
    /// Unique over the whole run.
    pub(super) id: u64,
    /// `None` for a plain produce.
    pub(super) txn: Option<TxnRecord>,
}

/// What travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Payload {
    /// Follower → leader: Fetch v12+ with the replica id.
    Fetch {
        current_leader_epoch: LeaderEpoch,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
    },
    /// Leader → follower: records from `fetch_offset`, and the leader's HW.
    FetchData {
        leader_epoch: LeaderEpoch,
        fetch_offset: Offset,
        entries: Vec<Entry>,
        high_watermark: Offset,
    },
    /// Leader → follower: the fetch diverges (`diverging_epoch` set).
    Diverging {
        leader_epoch: LeaderEpoch,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        answer: EpochEndOffset,
    },
    /// Leader → follower: an error the follower answers by waiting for
    /// metadata (not leader, fenced or unknown epoch, out of range).
    FetchRefused,
    /// Leader → controller.
    AlterPartition(AlterPartition),
    /// Controller → leader: the committed state after an accepted change.
    AlterPartitionCommitted {
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
        isr: BTreeSet<ReplicaId>,
    },
    /// Controller → leader: refused (stale leader or partition epoch).
    AlterPartitionRefused { proposal_id: u64 },
}

/// A message in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Envelope {
    pub(super) from: Endpoint,
    pub(super) to: Endpoint,
    pub(super) payload: Payload,
}

/// Messages in flight and cut links.
#[derive(Debug)]
pub(super) struct Network {
    in_flight: Vec<Envelope>,
    max_in_flight: usize,
    /// Cut links, each as (smaller endpoint, larger endpoint).
    cut: BTreeSet<(Endpoint, Endpoint)>,
}

fn link(a: Endpoint, b: Endpoint) -> (Endpoint, Endpoint) {
    (a.min(b), a.max(b))
}

impl Network {
    pub(super) fn new(max_in_flight: usize) -> Self {
        assert!(max_in_flight > 0);
        Network {
            in_flight: Vec::with_capacity(max_in_flight),
            max_in_flight,
            cut: BTreeSet::new(),
        }
    }

    /// Queues a message; returns false when it is lost at once (cut link or
    /// full network).
    pub(super) fn send(&mut self, envelope: Envelope) -> bool {
        if !self.connected(envelope.from, envelope.to) || self.in_flight.len() >= self.max_in_flight
        {
            return false;
        }
        self.in_flight.push(envelope);
        assert!(self.in_flight.len() <= self.max_in_flight);
        true
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Removes and returns message `index` (delivery or loss).
    pub(super) fn take(&mut self, index: usize) -> Envelope {
        self.in_flight.swap_remove(index)
    }

    /// Sends a copy of message `index` again; false when the network is full.
    pub(super) fn duplicate(&mut self, index: usize) -> bool {
        let copy = self.in_flight[index].clone();
        self.send(copy)
    }

    pub(super) fn connected(&self, a: Endpoint, b: Endpoint) -> bool {
        !self.cut.contains(&link(a, b))
    }

    pub(super) fn cut(&mut self, a: Endpoint, b: Endpoint) {
        assert_ne!(a, b);
        self.cut.insert(link(a, b));
    }

    pub(super) fn heal(&mut self, a: Endpoint, b: Endpoint) {
        self.cut.remove(&link(a, b));
    }

    /// The cut links.
    pub(super) fn cut_links(&self) -> Vec<(Endpoint, Endpoint)> {
        self.cut.iter().copied().collect()
    }
}

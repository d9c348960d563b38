//! A transaction coordinator on one simulated broker: the part of rill's
//! `txn_runtime` that the torn-transaction bug of issue #30 lived in,
//! reduced to its contract with the replicated log.
//!
//! Correct behaviour (the fix): the coordinator acts only while its broker
//! leads the transaction-log partition, under a lease — the leader epoch it
//! loaded in. It loads only once every record of earlier epochs is
//! committed (so it knows every committed decision), replaying the
//! committed log and completing any transaction it finds prepared. It
//! writes through the leader's append path with acks=all, and acts — sends
//! markers stamped with the lease epoch, answers the client — only once the
//! HW passed the record. It drops its state as soon as its broker stops
//! leading the lease epoch.
//!
//! `writes_locally` (broken on purpose) is the code before the fix: it
//! loads as soon as its broker leads, from whatever log it has, keeps its
//! role after losing leadership (until a crash or its next load), appends
//! to its own log — as a follower too, with the epoch it loaded in — and
//! acts at once. `loads_early` (broken on purpose) reverts one part of
//! the fix: the coordinator loads as soon as its broker leads, from the
//! part of the log its HW covers, which may miss a decision an earlier
//! coordinator acted on.

use std::collections::BTreeMap;

use engine::types::{LeaderEpoch, Offset};

use super::network::Entry;
use super::node::Node;
use super::txn::{Decision, Marker, ProducerId, TxnRecord, TxnState, DATA_PARTITIONS};
use crate::replication::ReplicationError;

/// What a coordinator asks the world to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Send `marker` to data partition `partition`.
    SendMarker { partition: usize, marker: Marker },
    /// Answer the producer: its transaction `txn` is open on `partitions`.
    Begun {
        producer: ProducerId,
        txn: u64,
        producer_epoch: u32,
        partitions: u8,
    },
    /// Answer the producer: its transaction `txn` is decided.
    Decided {
        producer: ProducerId,
        txn: u64,
        decision: Decision,
    },
}

/// The world's side of a coordinator call: the clock, record ids, the
/// rules, and where actions go.
#[derive(Debug)]
pub(super) struct TxnIo {
    pub(super) now_ms: i64,
    /// The next unique record id (shared with the plain produces).
    pub(super) next_id: u64,
    /// The code before the fix (see the module doc).
    pub(super) writes_locally: bool,
    /// Part of the fix reverted on purpose: load as soon as the broker
    /// leads, before the records of earlier epochs are committed.
    pub(super) loads_early: bool,
    /// A new producer epoch for every transaction (KIP-890; not rill's
    /// code today).
    pub(super) epoch_per_transaction: bool,
    /// `transaction.timeout.ms`.
    pub(super) txn_timeout_ms: i64,
    pub(super) actions: Vec<Action>,
}

/// What a coordinator did (kept across loads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct CoordinatorCounts {
    pub(super) loads: u64,
    pub(super) committed: u64,
    pub(super) aborted: u64,
    pub(super) timed_out: u64,
    /// Writes dropped unacted on when the lease was lost (a stale
    /// coordinator's writes: the HW never passed them under its lease).
    pub(super) writes_abandoned: u64,
}

/// A producer's latest transaction, as this coordinator knows it.
#[derive(Debug, Clone, Copy)]
struct View {
    record: TxnRecord,
    /// A write of `record` is waiting for the HW (Kafka's pending state:
    /// the producer gets `CONCURRENT_TRANSACTIONS` meanwhile).
    busy: bool,
    /// Partitions that accepted this lease's marker (Prepare states).
    acked: u8,
}

#[derive(Debug, Clone, Copy)]
struct PendingWrite {
    offset: Offset,
    record: TxnRecord,
    timeout: bool,
}

#[derive(Debug, Default)]
pub(super) struct Coordinator {
    /// The leader epoch this coordinator loaded in.
    lease: Option<LeaderEpoch>,
    txns: BTreeMap<ProducerId, View>,
    /// In offset order (the HW passes them in that order).
    pending: Vec<PendingWrite>,
    pub(super) counts: CoordinatorCounts,
}

fn leading_epoch(node: &Node) -> Option<LeaderEpoch> {
    node.leader.as_ref().map(|state| state.leader_epoch())
}

impl Coordinator {
    /// The lease it acts under; `None` when it is no coordinator.
    pub(super) fn lease(&self) -> Option<LeaderEpoch> {
        self.lease
    }

    /// Forgets everything (lost leadership, or a crash).
    pub(super) fn unload(&mut self) {
        self.counts.writes_abandoned += self.pending.len() as u64;
        self.lease = None;
        self.txns.clear();
        self.pending.clear();
    }

    /// Run after every step: unloads when the lease is gone, loads when
    /// its broker leads a new epoch, and acts on writes the HW passed.
    pub(super) fn settle(&mut self, node: &Node, io: &mut TxnIo) {
        let leading = leading_epoch(node);
        if !io.writes_locally && self.lease.is_some() && leading != self.lease {
            self.unload();
        }
        if let Some(state) = node.leader.as_ref() {
            let epoch = state.leader_epoch();
            // Everything from earlier epochs is committed: the replay below
            // sees every decision any earlier coordinator acted on. (rill
            // waits for HW = LEO; here the plain produces keep appending to
            // this partition in the new epoch, so the simulation waits for
            // what that wait guarantees: no coordinator wrote in this epoch
            // before it loaded.)
            let caught_up = node.high_watermark >= state.epoch_start_offset();
            let may_load = caught_up || io.writes_locally || io.loads_early;
            if self.lease != Some(epoch) && may_load {
                self.load(node, epoch, io);
            }
        }
        while let Some(first) = self.pending.first().copied() {
            let passed = node
                .leader
                .as_ref()
                .filter(|state| Some(state.leader_epoch()) == self.lease)
                .is_some_and(|state| state.acks_all_complete(first.offset));
            if !passed {
                break;
            }
            self.pending.remove(0);
            self.on_written(first.record, first.timeout, io);
        }
    }

    /// Replays the log (the committed part; all of it under the old
    /// code) and completes what it finds prepared.
    fn load(&mut self, node: &Node, epoch: LeaderEpoch, io: &mut TxnIo) {
        self.unload();
        self.lease = Some(epoch);
        self.counts.loads += 1;
        let end = if io.writes_locally {
            node.log.len()
        } else {
            (node.high_watermark.max(0) as usize).min(node.log.len())
        };
        for record in node.log[..end].iter().filter_map(|entry| entry.txn) {
            let view = View {
                record,
                busy: false,
                acked: 0,
            };
            self.txns.insert(record.producer, view);
        }
        let prepared: Vec<TxnRecord> = self
            .txns
            .values()
            .map(|view| view.record)
            .filter(|record| is_prepare(record.state))
            .collect();
        for record in prepared {
            self.send_markers(record, io);
        }
    }

    /// The client's begin (InitProducerId and AddPartitionsToTxn in one):
    /// opens the producer's next transaction on `partitions`, unless its
    /// last one is still unfinished.
    pub(super) fn begin(
        &mut self,
        node: &mut Node,
        producer: ProducerId,
        partitions: u8,
        io: &mut TxnIo,
    ) -> Result<(), String> {
        let view = self.txns.get(&producer);
        if view.is_some_and(|v| v.busy || !is_complete(v.record.state)) {
            return Ok(());
        }
        let bump = u32::from(io.epoch_per_transaction);
        let record = TxnRecord {
            producer,
            txn: view.map_or(1, |v| v.record.txn + 1),
            producer_epoch: view.map_or(0, |v| v.record.producer_epoch + bump),
            state: TxnState::Ongoing,
            partitions,
            started_ms: io.now_ms,
        };
        self.write(node, record, false, io)
    }

    /// The client's EndTxn: prepares the decision for an open transaction,
    /// or answers again with one already taken (a timeout's abort).
    pub(super) fn end(
        &mut self,
        node: &mut Node,
        producer: ProducerId,
        txn: u64,
        decision: Decision,
        io: &mut TxnIo,
    ) -> Result<(), String> {
        let Some(view) = self.txns.get(&producer).copied() else {
            return Ok(());
        };
        if view.busy || view.record.txn != txn {
            return Ok(());
        }
        if view.record.state == TxnState::Ongoing {
            let state = match decision {
                Decision::Commit => TxnState::PrepareCommit,
                Decision::Abort => TxnState::PrepareAbort,
            };
            return self.write(
                node,
                TxnRecord {
                    state,
                    ..view.record
                },
                false,
                io,
            );
        }
        if let Some(decision) = view.record.state.decision() {
            io.actions.push(Action::Decided {
                producer,
                txn,
                decision,
            });
        }
        Ok(())
    }

    /// The coordinator's timer: aborts the open transactions older than
    /// the transaction timeout, and retries Complete writes. (Markers are
    /// not sent again under one lease: Kafka resends only a failed one, and
    /// markers here are not lost but late.)
    pub(super) fn tick(&mut self, node: &mut Node, io: &mut TxnIo) -> Result<(), String> {
        let producers: Vec<ProducerId> = self.txns.keys().copied().collect();
        for producer in producers {
            self.complete_if_acked(node, producer, io)?;
        }
        let expired: Vec<TxnRecord> = self
            .txns
            .values()
            .filter(|v| !v.busy && v.record.state == TxnState::Ongoing)
            .filter(|v| io.now_ms - v.record.started_ms > io.txn_timeout_ms)
            .map(|v| v.record)
            .collect();
        for record in expired {
            // As rill does: the timed-out producer is fenced by a bump.
            let abort = TxnRecord {
                state: TxnState::PrepareAbort,
                producer_epoch: record.producer_epoch + 1,
                ..record
            };
            self.write(node, abort, true, io)?;
        }
        Ok(())
    }

    /// A data partition's answer to this coordinator's marker: once every
    /// partition accepted this lease's marker, the transaction completes.
    pub(super) fn on_marker_answer(
        &mut self,
        node: &mut Node,
        partition: usize,
        marker: Marker,
        accepted: bool,
        io: &mut TxnIo,
    ) -> Result<(), String> {
        if !accepted || self.lease != Some(marker.coordinator_epoch) {
            return Ok(());
        }
        let Some(view) = self.txns.get_mut(&marker.producer) else {
            return Ok(());
        };
        if view.busy || view.record.txn != marker.txn || !is_prepare(view.record.state) {
            return Ok(());
        }
        view.acked |= 1 << partition;
        self.complete_if_acked(node, marker.producer, io)
    }

    /// Writes the Complete state of the producer's prepared transaction
    /// once every partition accepted this lease's marker (again from the
    /// timer, when the write was refused: `NOT_ENOUGH_REPLICAS`).
    fn complete_if_acked(
        &mut self,
        node: &mut Node,
        producer: ProducerId,
        io: &mut TxnIo,
    ) -> Result<(), String> {
        let Some(view) = self.txns.get(&producer).copied() else {
            return Ok(());
        };
        if view.busy || !is_prepare(view.record.state) || view.acked != view.record.partitions {
            return Ok(());
        }
        let state = match view.record.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            _ => TxnState::CompleteAbort,
        };
        let complete = TxnRecord {
            state,
            ..view.record
        };
        self.write(node, complete, false, io)
    }

    /// Appends `record` and acts on it once the HW passed it; under the
    /// old code, appends wherever it can and acts at once.
    fn write(
        &mut self,
        node: &mut Node,
        record: TxnRecord,
        timeout: bool,
        io: &mut TxnIo,
    ) -> Result<(), String> {
        let Some(lease) = self.lease else {
            return Ok(());
        };
        let id = io.next_id;
        let offset = match leading_epoch(node) {
            // The old code's write: the local log, with the epoch it loaded
            // in, whatever this broker's role is now.
            None if io.writes_locally => {
                let offset = node.log_end_offset();
                if node.cache.latest_epoch() < Some(lease) {
                    node.cache
                        .assign(lease, offset)
                        .map_err(|e| e.to_string())?;
                }
                node.log.push(Entry {
                    epoch: lease,
                    id,
                    txn: Some(record),
                });
                offset
            }
            Some(epoch) if epoch == lease => match node.produce(id, Some(record)) {
                Ok(Some((_, offset))) => offset,
                Ok(None) | Err(ReplicationError::NotEnoughReplicas { .. }) => return Ok(()),
                Err(other) => return Err(other.to_string()),
            },
            _ => return Ok(()),
        };
        io.next_id += 1;
        let view = View {
            record,
            busy: true,
            acked: 0,
        };
        self.txns.insert(record.producer, view);
        if io.writes_locally {
            self.on_written(record, timeout, io);
        } else {
            self.pending.push(PendingWrite {
                offset,
                record,
                timeout,
            });
        }
        Ok(())
    }

    /// Acts on a written record: answers the client, sends markers.
    fn on_written(&mut self, record: TxnRecord, timeout: bool, io: &mut TxnIo) {
        if let Some(view) = self.txns.get_mut(&record.producer) {
            if view.record == record {
                view.busy = false;
            }
        }
        match record.state {
            TxnState::Ongoing => io.actions.push(Action::Begun {
                producer: record.producer,
                txn: record.txn,
                producer_epoch: record.producer_epoch,
                partitions: record.partitions,
            }),
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                match record.state {
                    TxnState::PrepareCommit => self.counts.committed += 1,
                    _ => self.counts.aborted += 1,
                }
                self.counts.timed_out += u64::from(timeout);
                if let Some(decision) = record.state.decision() {
                    io.actions.push(Action::Decided {
                        producer: record.producer,
                        txn: record.txn,
                        decision,
                    });
                }
                self.send_markers(record, io);
            }
            TxnState::CompleteCommit | TxnState::CompleteAbort => {}
        }
    }

    /// WriteTxnMarkers to every partition of a prepared transaction,
    /// stamped with the lease epoch.
    fn send_markers(&mut self, record: TxnRecord, io: &mut TxnIo) {
        let (Some(epoch), Some(decision)) = (self.lease, record.state.decision()) else {
            return;
        };
        if let Some(view) = self.txns.get_mut(&record.producer) {
            view.acked = 0;
        }
        for partition in (0..DATA_PARTITIONS).filter(|p| record.partitions & (1 << p) != 0) {
            let marker = Marker {
                producer: record.producer,
                txn: record.txn,
                producer_epoch: record.producer_epoch,
                decision,
                coordinator_epoch: epoch,
            };
            io.actions.push(Action::SendMarker { partition, marker });
        }
    }
}

fn is_prepare(state: TxnState) -> bool {
    matches!(state, TxnState::PrepareCommit | TxnState::PrepareAbort)
}

fn is_complete(state: TxnState) -> bool {
    matches!(state, TxnState::CompleteCommit | TxnState::CompleteAbort)
}

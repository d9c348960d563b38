//! Transactions in the simulation: the records a coordinator writes to the
//! replicated partition (which the simulation treats as a
//! `__transaction_state` partition), the markers it sends, and the data
//! partitions that receive them.
//!
//! A data partition is not replicated here: what matters to a transaction
//! is which marker ends each producer's ongoing transaction on it, and
//! whether it refuses a marker from an older coordinator epoch (Kafka's
//! `TRANSACTION_COORDINATOR_FENCED`). As in Kafka, a marker names a
//! producer, not a transaction: it ends whatever transaction that producer
//! has open on the partition, which is why a late marker from an old
//! coordinator can end the next transaction. Two checks stop some of those,
//! as in rill's `ProducerStateManager::marker`: a marker of an older
//! producer epoch is refused (`INVALID_PRODUCER_EPOCH`), and so is one of
//! an older coordinator epoch than one accepted before (the fence).

use std::collections::BTreeMap;

use engine::types::LeaderEpoch;

/// A transactional producer (one per simulated client).
pub(super) type ProducerId = u32;

/// Data partitions of the simulation (a transaction's partitions are a bit
/// mask over them, so at most 8).
pub(super) const DATA_PARTITIONS: usize = 3;

/// A transaction's state in the transaction log, as Kafka's
/// `TransactionState` (the states a coordinator writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TxnState {
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    /// The decision a Prepare or Complete state records.
    pub(super) fn decision(self) -> Option<Decision> {
        match self {
            TxnState::Ongoing => None,
            TxnState::PrepareCommit | TxnState::CompleteCommit => Some(Decision::Commit),
            TxnState::PrepareAbort | TxnState::CompleteAbort => Some(Decision::Abort),
        }
    }
}

/// How a transaction ends: the marker's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    Commit,
    Abort,
}

/// One transaction-log record: the producer's transaction `txn` (numbered
/// per producer, for the auditor) is in `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TxnRecord {
    pub(super) producer: ProducerId,
    pub(super) txn: u64,
    /// As in rill: bumped when the coordinator aborts a transaction on
    /// timeout (the producer is fenced and starts again with it), and, only
    /// under `SimConfig::producer_epoch_per_transaction`, for every
    /// transaction (KIP-890).
    pub(super) producer_epoch: u32,
    pub(super) state: TxnState,
    /// The transaction's data partitions, a bit per partition.
    pub(super) partitions: u8,
    /// When the transaction began (its timeout runs from here).
    pub(super) started_ms: i64,
}

/// A WriteTxnMarkers entry for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Marker {
    pub(super) producer: ProducerId,
    /// The transaction the coordinator meant (for the auditor: the data
    /// partition does not look at it, as Kafka's does not).
    pub(super) txn: u64,
    pub(super) producer_epoch: u32,
    pub(super) decision: Decision,
    /// The lease epoch of the coordinator that sent it.
    pub(super) coordinator_epoch: LeaderEpoch,
}

/// A transaction a marker ended on a data partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ended {
    pub(super) producer: ProducerId,
    /// The transaction that was open (its data is what the marker ended).
    pub(super) txn: u64,
    pub(super) marker: Marker,
}

/// What a producer has on one data partition.
#[derive(Debug, Clone, Copy, Default)]
struct ProducerOnPartition {
    /// The producer epoch of the latest data or marker.
    producer_epoch: u32,
    /// The highest coordinator epoch of a marker accepted (`None`: none).
    coordinator_epoch: Option<LeaderEpoch>,
    /// The transaction with data written and no marker yet.
    ongoing: Option<u64>,
}

/// One data partition: per producer its open transaction and the highest
/// coordinator epoch seen, and the history of ended transactions.
#[derive(Debug, Default)]
pub(super) struct DataPartition {
    producers: BTreeMap<ProducerId, ProducerOnPartition>,
    /// Every transaction a marker ended here, in order.
    pub(super) ended: Vec<Ended>,
}

impl DataPartition {
    /// A transactional produce of `txn`'s data in `producer_epoch` (of an
    /// older epoch: refused, a fenced producer). Data of a producer that
    /// already has a transaction open joins it, as in Kafka (the open one
    /// is what a marker ends).
    pub(super) fn write(&mut self, producer: ProducerId, txn: u64, producer_epoch: u32) {
        let view = self.producers.entry(producer).or_default();
        if producer_epoch < view.producer_epoch {
            return;
        }
        view.producer_epoch = producer_epoch;
        view.ongoing.get_or_insert(txn);
    }

    /// The transaction `producer` has open here.
    pub(super) fn ongoing(&self, producer: ProducerId) -> Option<u64> {
        self.producers.get(&producer).and_then(|v| v.ongoing)
    }

    /// WriteTxnMarkers for this partition: refused for an older producer
    /// epoch, and when an accepted marker came from a newer coordinator
    /// epoch unless `fenced` is false (the broken variant); otherwise it
    /// ends the open transaction, if any.
    /// Returns whether it was accepted.
    pub(super) fn apply_marker(&mut self, marker: Marker, fenced: bool) -> bool {
        let view = self.producers.entry(marker.producer).or_default();
        if marker.producer_epoch < view.producer_epoch {
            return false;
        }
        if fenced && view.coordinator_epoch > Some(marker.coordinator_epoch) {
            return false;
        }
        view.producer_epoch = marker.producer_epoch;
        view.coordinator_epoch = view.coordinator_epoch.max(Some(marker.coordinator_epoch));
        if let Some(txn) = view.ongoing.take() {
            self.ended.push(Ended {
                producer: marker.producer,
                txn,
                marker,
            });
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(txn: u64, decision: Decision, coordinator_epoch: LeaderEpoch) -> Marker {
        Marker {
            producer: 7,
            txn,
            producer_epoch: 0,
            decision,
            coordinator_epoch,
        }
    }

    #[test]
    fn a_marker_ends_the_open_transaction_and_an_older_epoch_is_fenced() {
        let mut partition = DataPartition::default();
        partition.write(7, 1, 0);
        assert!(partition.apply_marker(marker(1, Decision::Commit, 4), true));
        assert_eq!(partition.ended.len(), 1);
        assert_eq!(partition.ongoing(7), None);
        partition.write(7, 2, 0);
        // A late marker of transaction 1 from epoch 3: refused.
        assert!(!partition.apply_marker(marker(1, Decision::Abort, 3), true));
        assert_eq!(partition.ongoing(7), Some(2));
        // Unfenced, it ends transaction 2 with transaction 1's marker.
        assert!(partition.apply_marker(marker(1, Decision::Abort, 3), false));
        assert_eq!(partition.ended[1].txn, 2);
        assert_eq!(partition.ended[1].marker.txn, 1);
    }
}

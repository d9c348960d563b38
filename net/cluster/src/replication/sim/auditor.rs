//! The auditor: Kafka's replication safety rules, checked after every step
//! of the simulation against the replicas' logs and the controller's state.
//!
//! The rules:
//! 1. at most one leader per leader epoch, ever;
//! 2. a leader's HW never moves back (per epoch);
//! 3. everything any leader ever declared committed (below its HW) forms
//!    one log — the committed prefix — that only grows;
//! 4. every replica agrees with that prefix below its own HW;
//! 5. every acks=all-acknowledged record is in the committed prefix, and on
//!    every member of the controller's ISR — so on whichever replica is
//!    elected next;
//! 6. a replica's log never has a record of a lower leader epoch after one
//!    of a higher epoch;
//! 7. no transaction is torn: every data partition ends it with the same
//!    marker, which is the decision the committed transaction log holds
//!    (one decision per transaction), and once its completion is committed
//!    no partition still has it open.
//!
//! The committed prefix makes the checks cheap: each replica's length of
//! agreement with it is kept between steps and only rescanned past the
//! point where the replica's log last changed, so a step costs about the
//! records it touched, not the length of the logs.

use std::collections::{BTreeMap, BTreeSet};

use engine::types::{LeaderEpoch, Offset};

use super::network::Entry;
use super::node::Node;
use super::report::Rule;
use super::txn::{
    DataPartition, Decision, Ended, ProducerId, TxnRecord, TxnState, DATA_PARTITIONS,
};
use crate::replication::ReplicaId;

/// A record a producer got acks=all for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Acked {
    pub(super) offset: Offset,
    pub(super) entry: Entry,
}

/// A failed rule and what the auditor saw.
pub(super) type Finding = (Rule, String);

#[derive(Debug, Default)]
pub(super) struct Auditor {
    leader_by_epoch: BTreeMap<LeaderEpoch, ReplicaId>,
    high_watermark_by_epoch: BTreeMap<LeaderEpoch, Offset>,
    committed: Vec<Entry>,
    /// Per replica: how long a prefix of its log equals `committed`.
    agree_len: Vec<usize>,
    /// Per replica: how long a prefix of its log rule 6 checked.
    epochs_checked_len: Vec<usize>,
    acked_seen: usize,
    /// One past the highest acknowledged offset.
    acked_end: usize,
    /// How much of the committed prefix rule 7 has read.
    txn_log_seen: usize,
    /// Per data partition: how many of its ended transactions rule 7 read.
    ended_seen: Vec<usize>,
    /// The decision the committed transaction log holds per transaction.
    decisions: BTreeMap<(ProducerId, u64), Decision>,
    /// Per transaction, the first data partition that ended it, and how.
    endings: BTreeMap<(ProducerId, u64), (usize, Decision)>,
}

impl Auditor {
    pub(super) fn new(replicas: usize) -> Self {
        Auditor {
            agree_len: vec![0; replicas],
            epochs_checked_len: vec![0; replicas],
            ..Auditor::default()
        }
    }

    /// The committed prefix's length (the highest HW any leader reached).
    pub(super) fn committed_len(&self) -> usize {
        self.committed.len()
    }

    /// Checks every rule; `isr` is the controller's committed ISR.
    pub(super) fn check(
        &mut self,
        nodes: &mut [Node],
        isr: &BTreeSet<ReplicaId>,
        acked: &[Acked],
    ) -> Result<(), Finding> {
        assert_eq!(nodes.len(), self.agree_len.len());
        for (i, node) in nodes.iter_mut().enumerate() {
            // What changed in the log since the last audit is unverified.
            let changed_from = node.min_len_since_audit.min(node.log.len());
            self.agree_len[i] = self.agree_len[i].min(changed_from);
            let checked = self.epochs_checked_len[i].min(changed_from);
            check_epochs_monotonic(node, checked)?;
            self.epochs_checked_len[i] = node.log.len();
            node.min_len_since_audit = node.log.len();
        }
        for (i, node) in nodes.iter().enumerate() {
            if let Some(state) = &node.leader {
                self.check_leader(i, node, state.leader_epoch(), state.high_watermark())?;
            }
        }
        for (i, node) in nodes.iter().enumerate() {
            self.extend_agreement(i, node);
            let must_agree = (node.high_watermark.max(0) as usize).min(node.log.len());
            if self.agree_len[i] < must_agree {
                return Err((
                    Rule::ReplicaDisagreesBelowHighWatermark,
                    format!(
                        "replica {} (HW {}) differs from the committed log at offset {}",
                        node.id, node.high_watermark, self.agree_len[i]
                    ),
                ));
            }
        }
        self.check_acked(acked)?;
        for (i, node) in nodes.iter().enumerate() {
            if isr.contains(&node.id)
                && (node.log.len() < self.acked_end || self.agree_len[i] < self.acked_end)
            {
                return Err((
                    Rule::AckedRecordMissingFromIsr,
                    format!(
                        "ISR member {} (up: {}, log end {}) lacks acknowledged records below {}: agrees up to {}",
                        node.id,
                        node.up,
                        node.log.len(),
                        self.acked_end,
                        self.agree_len[i]
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Rules 1–3 for replica `i`, which believes it leads `epoch`.
    fn check_leader(
        &mut self,
        i: usize,
        node: &Node,
        epoch: LeaderEpoch,
        high_watermark: Offset,
    ) -> Result<(), Finding> {
        let leader = *self.leader_by_epoch.entry(epoch).or_insert(node.id);
        if leader != node.id {
            return Err((
                Rule::TwoLeadersInOneEpoch,
                format!("replicas {leader} and {} both led epoch {epoch}", node.id),
            ));
        }
        let previous = *self
            .high_watermark_by_epoch
            .entry(epoch)
            .or_insert(high_watermark);
        if high_watermark < previous {
            return Err((
                Rule::HighWatermarkBackwards,
                format!(
                    "leader {} of epoch {epoch}: HW {high_watermark} after {previous}",
                    node.id
                ),
            ));
        }
        self.high_watermark_by_epoch.insert(epoch, high_watermark);
        self.extend_agreement(i, node);
        let hw = high_watermark.max(0) as usize;
        assert!(hw <= node.log.len());
        if hw > self.committed.len() {
            if self.agree_len[i] < self.committed.len() {
                return Err((
                    Rule::CommittedPrefixDiverged,
                    format!(
                        "leader {} of epoch {epoch} (HW {hw}) differs from the committed log at offset {}",
                        node.id, self.agree_len[i]
                    ),
                ));
            }
            let from = self.committed.len();
            self.committed.extend_from_slice(&node.log[from..hw]);
            self.agree_len[i] = hw;
        } else if self.agree_len[i] < hw {
            return Err((
                Rule::CommittedPrefixDiverged,
                format!(
                    "leader {} of epoch {epoch} (HW {hw}) differs from the committed log at offset {}",
                    node.id, self.agree_len[i]
                ),
            ));
        }
        Ok(())
    }

    /// Rule 5's first half, for records acknowledged since the last audit.
    fn check_acked(&mut self, acked: &[Acked]) -> Result<(), Finding> {
        for record in &acked[self.acked_seen..] {
            let offset = record.offset as usize;
            if self.committed.get(offset) != Some(&record.entry) {
                return Err((
                    Rule::AckedRecordNotCommitted,
                    format!(
                        "acknowledged {:?} at offset {offset} is not in the committed log (length {})",
                        record.entry,
                        self.committed.len()
                    ),
                ));
            }
            self.acked_end = self.acked_end.max(offset + 1);
        }
        self.acked_seen = acked.len();
        Ok(())
    }

    fn extend_agreement(&mut self, i: usize, node: &Node) {
        let limit = node.log.len().min(self.committed.len());
        let mut len = self.agree_len[i];
        while len < limit && node.log[len] == self.committed[len] {
            len += 1;
        }
        self.agree_len[i] = len;
    }

    /// Rule 7, for what the data partitions and the committed prefix
    /// gained since the last audit.
    pub(super) fn check_transactions(
        &mut self,
        partitions: &[DataPartition],
    ) -> Result<(), Finding> {
        self.ended_seen.resize(partitions.len(), 0);
        for (i, partition) in partitions.iter().enumerate() {
            for ended in &partition.ended[self.ended_seen[i]..] {
                self.check_ended(i, ended)?;
            }
            self.ended_seen[i] = partition.ended.len();
        }
        let from = self.txn_log_seen;
        self.txn_log_seen = self.committed.len();
        for offset in from..self.committed.len() {
            if let Some(record) = self.committed[offset].txn {
                self.check_decision(offset, record, partitions)?;
            }
        }
        Ok(())
    }

    /// A marker ended a transaction on data partition `i`.
    fn check_ended(&mut self, i: usize, ended: &Ended) -> Result<(), Finding> {
        let key = (ended.producer, ended.txn);
        let decision = ended.marker.decision;
        let (first, first_decision) = *self.endings.entry(key).or_insert((i, decision));
        if first_decision != decision {
            return Err((
                Rule::TornTransaction,
                format!(
                    "transaction {key:?} ended with {first_decision:?} on partition {first} and with {decision:?} on partition {i} (by {:?})",
                    ended.marker
                ),
            ));
        }
        match self.decisions.get(&key) {
            Some(&logged) if logged != decision => Err((
                Rule::TornTransaction,
                format!(
                    "transaction {key:?} ended with {decision:?} on partition {i} (by {:?}), the committed log decided {logged:?}",
                    ended.marker
                ),
            )),
            _ => Ok(()),
        }
    }

    /// A transaction-log record joined the committed prefix at `offset`.
    fn check_decision(
        &mut self,
        offset: usize,
        record: TxnRecord,
        partitions: &[DataPartition],
    ) -> Result<(), Finding> {
        let Some(decision) = record.state.decision() else {
            return Ok(());
        };
        let key = (record.producer, record.txn);
        let logged = *self.decisions.entry(key).or_insert(decision);
        let torn = |detail: String| Err((Rule::TornTransaction, detail));
        if logged != decision {
            return torn(format!(
                "the committed log decided transaction {key:?} both {logged:?} and {decision:?} (offset {offset})"
            ));
        }
        if let Some(&(i, ended)) = self.endings.get(&key) {
            if ended != decision {
                return torn(format!(
                    "the committed log decided transaction {key:?} {decision:?} (offset {offset}), partition {i} ended it with {ended:?}"
                ));
            }
        }
        if matches!(
            record.state,
            TxnState::CompleteCommit | TxnState::CompleteAbort
        ) {
            let mask = record.partitions;
            for i in (0..DATA_PARTITIONS).filter(|i| mask & (1 << i) != 0) {
                if partitions[i].ongoing(record.producer) == Some(record.txn) {
                    return torn(format!(
                        "transaction {key:?} completed (offset {offset}) but partition {i} still has it open"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Rule 6 for `node`'s records from `checked` on (the one before them
/// included: the step from checked to new records counts too).
fn check_epochs_monotonic(node: &Node, checked: usize) -> Result<(), Finding> {
    let start = checked.saturating_sub(1);
    for (offset, pair) in node.log[start..].windows(2).enumerate() {
        if pair[1].epoch < pair[0].epoch {
            return Err((
                Rule::LeaderEpochBackwards,
                format!(
                    "replica {}: record of epoch {} at offset {} after epoch {}",
                    node.id,
                    pair[1].epoch,
                    start + offset + 1,
                    pair[0].epoch
                ),
            ));
        }
    }
    Ok(())
}

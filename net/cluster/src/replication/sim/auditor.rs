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
//!    elected next.
//!
//! The committed prefix makes the checks cheap: each replica's length of
//! agreement with it is kept between steps and only rescanned past the
//! point where the replica's log last changed, so a step costs about the
//! records it touched, not the length of the logs.

use std::collections::{BTreeMap, BTreeSet};

use engine::types::{LeaderEpoch, Offset};

use super::network::Entry;
use super::node::Node;
use super::Rule;
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
    acked_seen: usize,
    /// One past the highest acknowledged offset.
    acked_end: usize,
}

impl Auditor {
    pub(super) fn new(replicas: usize) -> Self {
        Auditor {
            agree_len: vec![0; replicas],
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
            self.agree_len[i] = self.agree_len[i]
                .min(node.min_len_since_audit)
                .min(node.log.len());
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
}

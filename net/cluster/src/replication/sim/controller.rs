//! The simulation's controller: the committed partition state (leader,
//! leader epoch, partition epoch, ISR) and the decisions KRaft's
//! `ReplicationControlManager` makes about it — fencing, elections and
//! AlterPartition. It stands in for the Raft quorum, which is simulated on
//! its own (`crate::quorum`): here its log is one authoritative state that
//! replicas read with a delay (a metadata sync step).
//!
//! It keeps the eligible leader replicas as rill's controller does
//! (KIP-966, `metadata::controller::elr`): an ISR that shrinks below the
//! minimum puts the members it loses in the ELR; an ELR member leads,
//! cleanly, when no ISR member can; an unclean leader or an ISR back at
//! the minimum empties it. Replicas read only the ISR, so the ELR stays
//! here.

use std::collections::BTreeSet;

use engine::types::LeaderEpoch;

use super::rng::SplitMix64;
use crate::replication::{AlterPartition, IsrChangeKind, ReplicaId};

/// Who may be elected leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionRule {
    /// Kafka's default: only an unfenced ISR member.
    Clean,
    /// `unclean.leader.election.enable=true`: when no ISR member is
    /// available, any unfenced replica (which may lose acknowledged data).
    Unclean,
    /// A deliberately broken controller that prefers an out-of-sync replica
    /// even when an ISR member is available: exists so a test can show the
    /// auditor catches the loss it causes.
    OutOfSyncFirst,
}

/// The committed state of the partition, as every replica reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Published {
    pub(super) leader: Option<ReplicaId>,
    pub(super) leader_epoch: LeaderEpoch,
    pub(super) partition_epoch: i32,
    pub(super) isr: BTreeSet<ReplicaId>,
}

/// What the controller counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ControllerCounts {
    pub(super) elections: u64,
    pub(super) elections_from_elr: u64,
    pub(super) isr_shrinks: u64,
    pub(super) isr_expands: u64,
}

#[derive(Debug)]
pub(super) struct Controller {
    replicas: Vec<ReplicaId>,
    rule: ElectionRule,
    state: Published,
    fenced: BTreeSet<ReplicaId>,
    /// The minimum ISR the ELR is kept for (capped at the replica count);
    /// `None`: no ELR.
    elr_min_isr: Option<usize>,
    /// Eligible leader replicas: out of the ISR, holding every committed
    /// record.
    elr: BTreeSet<ReplicaId>,
    pub(super) counts: ControllerCounts,
}

impl Controller {
    /// A new partition: the first replica leads epoch 0, every replica in
    /// the ISR (nothing written yet).
    pub(super) fn new(
        replicas: Vec<ReplicaId>,
        rule: ElectionRule,
        elr_min_isr: Option<usize>,
    ) -> Self {
        assert!(!replicas.is_empty());
        let state = Published {
            leader: Some(replicas[0]),
            leader_epoch: 0,
            partition_epoch: 0,
            isr: replicas.iter().copied().collect(),
        };
        let elr_min_isr = elr_min_isr.map(|m| m.clamp(1, replicas.len()));
        Controller {
            replicas,
            rule,
            state,
            fenced: BTreeSet::new(),
            elr_min_isr,
            elr: BTreeSet::new(),
            counts: ControllerCounts::default(),
        }
    }

    /// The ISR becomes `isr`, the ELR following it (see the module doc):
    /// an unclean change, or an ISR at the minimum, empties the ELR; below
    /// the minimum the members the ISR loses join it.
    fn set_isr(&mut self, isr: BTreeSet<ReplicaId>, unclean: bool) {
        match self.elr_min_isr {
            Some(min_isr) if !unclean && isr.len() < min_isr => {
                let old_isr = std::mem::take(&mut self.state.isr);
                self.elr.extend(old_isr);
                self.elr.retain(|r| !isr.contains(r));
            }
            _ => self.elr.clear(),
        }
        self.state.isr = isr;
    }

    pub(super) fn published(&self) -> &Published {
        &self.state
    }

    pub(super) fn is_fenced(&self, replica: ReplicaId) -> bool {
        self.fenced.contains(&replica)
    }

    /// A broker stopped heartbeating or restarted (a new incarnation): it
    /// leaves the ISR (unless it is the last member, which KRaft keeps so
    /// that only it can be elected cleanly) and loses its leadership.
    pub(super) fn fence(&mut self, replica: ReplicaId, rng: &mut SplitMix64) {
        if !self.fenced.insert(replica) {
            return;
        }
        if self.state.leader == Some(replica) {
            self.elect(rng);
        } else if self.state.isr.contains(&replica) && self.state.isr.len() > 1 {
            let mut isr = self.state.isr.clone();
            isr.remove(&replica);
            self.set_isr(isr, false);
            self.state.partition_epoch += 1;
        }
        self.assert_invariants();
    }

    /// A broker registered again and is caught up with metadata.
    pub(super) fn unfence(&mut self, replica: ReplicaId, rng: &mut SplitMix64) {
        if !self.fenced.remove(&replica) {
            return;
        }
        if self.state.leader.is_none() {
            self.elect(rng);
        }
        self.assert_invariants();
    }

    /// Elects a new leader by the rule, bumping the leader epoch (also
    /// when no one can lead: the partition goes offline under a new epoch).
    fn elect(&mut self, rng: &mut SplitMix64) {
        let old_leader = self.state.leader;
        let mut isr = self.state.isr.clone();
        if let Some(old) = old_leader {
            if isr.len() > 1 && self.fenced.contains(&old) {
                isr.remove(&old);
            }
        }
        let unfenced = |r: &ReplicaId| !self.fenced.contains(r) && Some(*r) != old_leader;
        let mut in_sync: Vec<ReplicaId> = isr.iter().copied().filter(unfenced).collect();
        // No ISR member can lead: an eligible leader replica can, cleanly,
        // with an ISR of itself.
        let from_elr = in_sync.is_empty() && self.rule != ElectionRule::OutOfSyncFirst;
        if from_elr {
            in_sync = self.elr.iter().copied().filter(unfenced).collect();
        }
        let out_of_sync: Vec<ReplicaId> = self
            .replicas
            .iter()
            .copied()
            .filter(|r| !isr.contains(r) && !self.elr.contains(r))
            .filter(unfenced)
            .collect();
        let chosen = match self.rule {
            ElectionRule::Clean => rng.pick(&in_sync).map(|r| (r, false)),
            ElectionRule::Unclean => rng
                .pick(&in_sync)
                .map(|r| (r, false))
                .or_else(|| rng.pick(&out_of_sync).map(|r| (r, true))),
            ElectionRule::OutOfSyncFirst => rng
                .pick(&out_of_sync)
                .map(|r| (r, true))
                .or_else(|| rng.pick(&in_sync).map(|r| (r, false))),
        };
        if chosen.is_none() && old_leader.is_none() {
            // Still offline: nothing changes, no new epoch.
            return;
        }
        self.state.leader = chosen.map(|(r, _)| r);
        match chosen {
            // An unclean leader starts a new history: the ISR is itself.
            Some((r, true)) => self.set_isr(std::iter::once(r).collect(), true),
            Some((r, false)) if from_elr => self.set_isr(std::iter::once(r).collect(), false),
            _ => self.set_isr(isr, false),
        }
        self.state.leader_epoch += 1;
        self.state.partition_epoch += 1;
        if chosen.is_some() {
            self.counts.elections += 1;
        }
        if matches!(chosen, Some((_, false))) && from_elr {
            self.counts.elections_from_elr += 1;
        }
        self.assert_invariants();
    }

    /// AlterPartition from `from`: accepted only from the current leader,
    /// for the current leader and partition epochs, with an ISR that keeps
    /// the leader. (KRaft also refuses to add a fenced broker with
    /// `INELIGIBLE_REPLICA`, KIP-903; this controller accepts it, which is
    /// safe — the leader only proposes caught-up followers — and keeps every
    /// refusal of the kind after which the leader waits for metadata.)
    pub(super) fn alter_partition(
        &mut self,
        from: ReplicaId,
        request: &AlterPartition,
    ) -> Result<&Published, ()> {
        let valid = self.state.leader == Some(from)
            && request.leader_epoch == self.state.leader_epoch
            && request.partition_epoch == self.state.partition_epoch
            && request.new_isr.contains(&from)
            && request.new_isr.iter().all(|r| self.replicas.contains(r));
        if !valid {
            return Err(());
        }
        match request.kind {
            IsrChangeKind::Shrink => self.counts.isr_shrinks += 1,
            IsrChangeKind::Expand => self.counts.isr_expands += 1,
        }
        self.set_isr(request.new_isr.clone(), false);
        self.state.partition_epoch += 1;
        self.assert_invariants();
        Ok(&self.state)
    }

    fn assert_invariants(&self) {
        assert!(!self.state.isr.is_empty());
        assert!(self.elr.iter().all(|r| !self.state.isr.contains(r)));
        assert!(self.elr_min_isr.is_some() || self.elr.is_empty());
        assert!(self.state.isr.iter().all(|r| self.replicas.contains(r)));
        if let Some(leader) = self.state.leader {
            assert!(self.state.isr.contains(&leader), "the leader is in the ISR");
            assert!(
                !self.fenced.contains(&leader),
                "a fenced broker does not lead"
            );
        }
    }
}

//! [`LeaderState`]: one partition's leader view of replication — each
//! follower's log end offset and catch-up time, the ISR with its pending
//! AlterPartition, the high watermark, and the acks=all rules.
//!
//! Kafka's semantics (`kafka.cluster.Partition`, `Replica`), with one rill
//! rule added: under the fsync policy the HW counts only durable data, so
//! the leader's own term in the minimum is its durable offset, not its log
//! end. A follower's term is the offset it fetches at (a fetch at X means it
//! has everything below X); the follower runtime must make its log durable
//! before it reports an offset, so that a follower crash cannot take back
//! what the HW already counted (the simulation shows the loss when it does
//! not). Under the `os` and `interval` flush policies the runtime calls
//! [`LeaderState::on_local_durable`] with the log end right after each
//! append, and the rule becomes Kafka's own.
//!
//! The strict minimum ISR (Kafka's since 3.9, KIP-966): the HW advances only
//! while the committed ISR has at least `min.insync.replicas` members
//! (capped at the replica count, Kafka's "effective" minimum). That is what
//! makes the members an ISR loses when it shrinks below the minimum safe to
//! elect later (the controller's eligible leader replicas): nothing is
//! committed without them. A leader alone under the minimum still appends
//! (acks=0 and acks=1 writes), but no consumer sees those records until
//! enough followers are back in the ISR.
//!
//! ISR changes are proposals: the leader sends AlterPartition to the
//! controller and applies the ISR only once the controller commits it.
//! Until then the HW is computed over the *maximal* ISR (Kafka's
//! `maximalIsr`, since AlterIsr, KIP-497): the committed ISR plus any member
//! being added. During a pending shrink the removed follower still holds
//! the HW back (the controller may yet refuse the shrink and elect that
//! follower); during a pending expand the new member already counts (the
//! controller may commit it and elect it).
//!
//! A new leader epoch means a new `LeaderState`: the runtime drops the old
//! one and builds another with [`LeaderState::new`], as Kafka's `makeLeader`
//! resets every follower's state.

use std::collections::{BTreeMap, BTreeSet};

use engine::types::{LeaderEpoch, Offset};

use super::{Acks, ReplicaId, ReplicationError};

/// The partition's replication settings (topic or broker configs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderConfig {
    /// `min.insync.replicas`: acks=all is refused below this ISR size.
    pub min_insync_replicas: usize,
    /// `replica.lag.time.max.ms`: a follower that has not been caught up for
    /// longer leaves the ISR.
    pub replica_lag_time_max_ms: i64,
}

impl Default for LeaderConfig {
    /// Kafka's defaults: `min.insync.replicas=1`,
    /// `replica.lag.time.max.ms=30000`.
    fn default() -> Self {
        LeaderConfig {
            min_insync_replicas: 1,
            replica_lag_time_max_ms: 30_000,
        }
    }
}

/// What the leader knows of one follower (Kafka's `ReplicaState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerView {
    /// The follower's log end offset: the offset of its latest fetch; `-1`
    /// until it fetches from this leader.
    pub log_end_offset: Offset,
    /// The last time the follower was caught up (fetched up to the leader's
    /// log end as it was then); `None`: never, for this leader.
    pub last_caught_up_ms: Option<i64>,
    /// When the previous fetch came, and the leader's log end then (Kafka's
    /// `lastFetchTimeMs`, `lastFetchLeaderLogEndOffset`).
    pub last_fetch_ms: Option<i64>,
    /// The leader's log end offset at the previous fetch.
    pub last_fetch_leader_log_end_offset: Option<Offset>,
    /// The follower's log start offset, as its latest fetch said (Fetch
    /// v5+); `-1` until then. A consumer is sent to read from it only at
    /// offsets it still holds (see [`super::read_replica`]).
    pub log_start_offset: Offset,
}

impl FollowerView {
    fn new(in_sync: bool, now_ms: i64) -> Self {
        // Kafka's `resetReplicaState`: an ISR member starts caught up "now"
        // so a new leader does not shrink it at once; others start never.
        FollowerView {
            log_end_offset: -1,
            last_caught_up_ms: in_sync.then_some(now_ms),
            last_fetch_ms: None,
            last_fetch_leader_log_end_offset: None,
            log_start_offset: -1,
        }
    }

    /// Kafka's `isCaughtUp`: at the leader's log end, or caught up within
    /// the lag time.
    fn is_caught_up(&self, leader_log_end_offset: Offset, now_ms: i64, lag_max_ms: i64) -> bool {
        self.log_end_offset >= leader_log_end_offset
            || self
                .last_caught_up_ms
                .is_some_and(|t| now_ms - t <= lag_max_ms)
    }
}

/// Whether an AlterPartition removes or adds ISR members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsrChangeKind {
    /// Followers that fell behind for `replica.lag.time.max.ms` leave.
    Shrink,
    /// Followers that caught up join.
    Expand,
}

/// An ISR change the leader proposes to the controller (Kafka's
/// AlterPartition request for one partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartition {
    /// Pairs the controller's answer with this proposal (a leader keeps one
    /// in flight; retries of it carry the same id).
    pub proposal_id: u64,
    /// The leader's epoch: a controller with a newer one refuses
    /// (`FENCED_LEADER_EPOCH`).
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch this change is based on: a controller with
    /// another one refuses (`INVALID_UPDATE_VERSION`).
    pub partition_epoch: i32,
    /// Shrink or expand.
    pub kind: IsrChangeKind,
    /// The whole proposed ISR.
    pub new_isr: BTreeSet<ReplicaId>,
}

/// How the controller refused an AlterPartition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterPartitionRejection {
    /// The controller guarantees it did not apply the change
    /// (`OPERATION_NOT_ATTEMPTED`, `INELIGIBLE_REPLICA`): the leader falls
    /// back to the committed ISR and may propose again.
    NotApplied,
    /// Anything else (`INVALID_UPDATE_VERSION`, `FENCED_LEADER_EPOCH`, a
    /// lost answer): the change may or may not have been applied, so the
    /// proposal stays pending — and keeps counting in the maximal ISR —
    /// until committed metadata says which (Kafka's
    /// `handleAlterPartitionError` does the same).
    Unknown,
}

/// How a leader starts (its log and what the controller committed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderInit {
    /// This broker.
    pub leader: ReplicaId,
    /// The leader epoch the controller assigned.
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch of the committed state.
    pub partition_epoch: i32,
    /// All replicas, in assignment order.
    pub replicas: Vec<ReplicaId>,
    /// The committed ISR (contains the leader).
    pub isr: BTreeSet<ReplicaId>,
    /// The local log end offset.
    pub log_end_offset: Offset,
    /// The local durable offset (everything below it is fsynced).
    pub durable_offset: Offset,
    /// The high watermark this replica knew as a follower (lowered to the
    /// durable offset if above it: the HW only counts durable data).
    pub high_watermark: Offset,
}

/// One partition's leader: the HW, the ISR and the followers' progress.
/// Shard-local: lives on the shard that owns the partition.
#[derive(Debug, Clone)]
pub struct LeaderState {
    config: LeaderConfig,
    leader: ReplicaId,
    leader_epoch: LeaderEpoch,
    partition_epoch: i32,
    replicas: Vec<ReplicaId>,
    isr: BTreeSet<ReplicaId>,
    pending: Option<AlterPartition>,
    next_proposal_id: u64,
    followers: BTreeMap<ReplicaId, FollowerView>,
    log_end_offset: Offset,
    durable_offset: Offset,
    high_watermark: Offset,
    /// The log end when this epoch began (Kafka's
    /// `leaderEpochStartOffsetOpt`): a follower joins the ISR only once it
    /// has reached it, i.e. holds everything of the previous epochs.
    epoch_start_offset: Offset,
}

impl LeaderState {
    /// A leader for `init.leader_epoch`. Followers in the ISR count as
    /// caught up now; every follower's log end is unknown until it fetches.
    pub fn new(
        config: LeaderConfig,
        init: LeaderInit,
        now_ms: i64,
    ) -> Result<LeaderState, ReplicationError> {
        assert!(config.min_insync_replicas >= 1);
        assert!(config.replica_lag_time_max_ms >= 0);
        assert!(init.leader_epoch >= 0);
        assert!(0 <= init.durable_offset && init.durable_offset <= init.log_end_offset);
        assert!(init.high_watermark >= 0);
        check_isr(init.leader, &init.replicas, &init.isr)?;
        let followers = init
            .replicas
            .iter()
            .filter(|&&r| r != init.leader)
            .map(|&r| (r, FollowerView::new(init.isr.contains(&r), now_ms)))
            .collect();
        let state = LeaderState {
            config,
            leader: init.leader,
            leader_epoch: init.leader_epoch,
            partition_epoch: init.partition_epoch,
            replicas: init.replicas,
            isr: init.isr,
            pending: None,
            next_proposal_id: 1,
            followers,
            log_end_offset: init.log_end_offset,
            durable_offset: init.durable_offset,
            high_watermark: init.high_watermark.min(init.durable_offset),
            epoch_start_offset: init.log_end_offset,
        };
        state.assert_invariants();
        Ok(state)
    }

    /// This leader's epoch.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }

    /// The committed partition epoch this leader knows.
    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    /// This broker's id.
    pub fn leader(&self) -> ReplicaId {
        self.leader
    }

    /// The replicas, in assignment order.
    pub fn replicas(&self) -> &[ReplicaId] {
        &self.replicas
    }

    /// The committed ISR.
    pub fn isr(&self) -> &BTreeSet<ReplicaId> {
        &self.isr
    }

    /// The ISR the HW is computed over: the committed ISR plus the members a
    /// pending AlterPartition would add.
    pub fn maximal_isr(&self) -> BTreeSet<ReplicaId> {
        let mut isr = self.isr.clone();
        if let Some(pending) = &self.pending {
            isr.extend(pending.new_isr.iter().copied());
        }
        isr
    }

    /// The AlterPartition in flight, for the runtime to send again when its
    /// answer is lost.
    pub fn pending_alter_partition(&self) -> Option<&AlterPartition> {
        self.pending.as_ref()
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// The local log end offset.
    pub fn log_end_offset(&self) -> Offset {
        self.log_end_offset
    }

    /// The local durable offset.
    pub fn durable_offset(&self) -> Offset {
        self.durable_offset
    }

    /// The first offset of this leader's epoch.
    pub fn epoch_start_offset(&self) -> Offset {
        self.epoch_start_offset
    }

    /// What this leader knows of `replica`.
    pub fn follower(&self, replica: ReplicaId) -> Option<&FollowerView> {
        self.followers.get(&replica)
    }

    /// Whether the committed ISR is smaller than the effective
    /// `min.insync.replicas` (capped at the replica count): the HW holds
    /// still until it grows back (see the module doc).
    pub fn is_under_min_isr(&self) -> bool {
        self.isr.len() < self.config.min_insync_replicas.min(self.replicas.len())
    }

    /// The topic's `min.insync.replicas` changed while this leader leads.
    /// Returns the new HW if it moved (a lower minimum can release it).
    pub fn set_min_insync_replicas(&mut self, min_insync_replicas: usize) -> Option<Offset> {
        self.config.min_insync_replicas = min_insync_replicas.max(1);
        self.maybe_advance_high_watermark()
    }

    /// Kafka's under-replicated partition: the ISR is smaller than the
    /// replica set.
    pub fn is_under_replicated(&self) -> bool {
        self.isr.len() < self.replicas.len()
    }

    /// Checks a request's `current_leader_epoch` against this leader's
    /// (KIP-320): older → `FENCED_LEADER_EPOCH`, newer →
    /// `UNKNOWN_LEADER_EPOCH`. `-1` (no epoch sent) passes.
    pub fn check_leader_epoch(&self, request_epoch: LeaderEpoch) -> Result<(), ReplicationError> {
        if request_epoch == -1 || request_epoch == self.leader_epoch {
            Ok(())
        } else if request_epoch < self.leader_epoch {
            Err(ReplicationError::FencedLeaderEpoch {
                leader_epoch: self.leader_epoch,
                request_epoch,
            })
        } else {
            Err(ReplicationError::UnknownLeaderEpoch {
                leader_epoch: self.leader_epoch,
                request_epoch,
            })
        }
    }

    /// Whether a produce with `acks` may be appended: acks=all needs
    /// `min.insync.replicas` in the committed ISR (`NOT_ENOUGH_REPLICAS`).
    pub fn produce_check(&self, acks: Acks) -> Result<(), ReplicationError> {
        if acks == Acks::All && self.isr.len() < self.config.min_insync_replicas {
            return Err(ReplicationError::NotEnoughReplicas {
                isr_size: self.isr.len(),
                min_insync_replicas: self.config.min_insync_replicas,
            });
        }
        Ok(())
    }

    /// Whether an acks=all produce whose last record is at `offset` is
    /// complete: the HW has passed it. (Kafka also answers
    /// `NOT_ENOUGH_REPLICAS_AFTER_APPEND` when the ISR shrank below
    /// `min.insync.replicas` meanwhile: [`produce_check`](Self::produce_check)
    /// tells the runtime that.)
    pub fn acks_all_complete(&self, offset: Offset) -> bool {
        self.high_watermark > offset
    }

    /// The leader appended records: its log now ends at `log_end_offset`.
    pub fn on_local_append(&mut self, log_end_offset: Offset) {
        assert!(
            log_end_offset >= self.log_end_offset,
            "a leader's log only grows"
        );
        self.log_end_offset = log_end_offset;
        self.assert_invariants();
    }

    /// The leader's log is durable below `durable_offset`. Returns the new HW
    /// if it moved (a leader alone in its ISR advances on its own fsync).
    pub fn on_local_durable(&mut self, durable_offset: Offset) -> Option<Offset> {
        assert!(
            durable_offset >= self.durable_offset,
            "durability only grows while leading"
        );
        assert!(durable_offset <= self.log_end_offset);
        self.durable_offset = durable_offset;
        self.maybe_advance_high_watermark()
    }

    /// A follower fetched at `fetch_offset` (after the runtime checked its
    /// leader epoch and that its log does not diverge). Updates its log end
    /// and catch-up time as Kafka's `updateFetchState` does, and returns the
    /// new HW if it moved.
    pub fn on_follower_fetch(
        &mut self,
        replica: ReplicaId,
        fetch_offset: Offset,
        now_ms: i64,
    ) -> Result<Option<Offset>, ReplicationError> {
        let leader_log_end_offset = self.log_end_offset;
        let Some(view) = self.followers.get_mut(&replica) else {
            return Err(ReplicationError::NotAFollower { replica });
        };
        if fetch_offset < 0 || fetch_offset > leader_log_end_offset {
            return Err(ReplicationError::FetchOffsetOutOfRange {
                replica,
                fetch_offset,
                log_end_offset: leader_log_end_offset,
            });
        }
        let caught_up_ms = if fetch_offset >= leader_log_end_offset {
            Some(now_ms)
        } else if view
            .last_fetch_leader_log_end_offset
            .is_some_and(|previous_end| fetch_offset >= previous_end)
        {
            // It now has what the leader had at the previous fetch: it was
            // caught up as of that fetch.
            view.last_fetch_ms
        } else {
            None
        };
        if let Some(t) = caught_up_ms {
            view.last_caught_up_ms = Some(view.last_caught_up_ms.map_or(t, |old| old.max(t)));
        }
        view.last_fetch_ms = Some(now_ms);
        view.last_fetch_leader_log_end_offset = Some(leader_log_end_offset);
        view.log_end_offset = fetch_offset;
        Ok(self.maybe_advance_high_watermark())
    }

    /// A follower's fetch named its log start offset (Kafka's
    /// `updateFetchState` keeps it beside the log end).
    pub fn on_follower_log_start(&mut self, replica: ReplicaId, log_start_offset: Offset) {
        if let Some(view) = self.followers.get_mut(&replica) {
            view.log_start_offset = log_start_offset;
        }
    }

    /// The followers a consumer fetching at `fetch_offset` may be sent to
    /// (KIP-392, Kafka's `findPreferredReadReplica`): committed ISR members
    /// whose log holds the offset, as `(id, log end, ms since last caught
    /// up)`. Whether each is alive is the caller's to check.
    pub fn read_replica_candidates(
        &self,
        fetch_offset: Offset,
        now_ms: i64,
    ) -> Vec<(ReplicaId, Offset, i64)> {
        self.followers
            .iter()
            .filter(|(id, _)| self.isr.contains(id))
            .filter(|(_, view)| {
                view.log_end_offset >= fetch_offset && view.log_start_offset <= fetch_offset
            })
            .map(|(&id, view)| {
                let since_ms = view.last_caught_up_ms.map_or(i64::MAX, |t| now_ms - t);
                (id, view.log_end_offset, since_ms.max(0))
            })
            .collect()
    }

    /// Periodic check (Kafka's `maybeShrinkIsr`, plus the expansion Kafka
    /// does on fetch): proposes an AlterPartition when none is pending.
    /// Shrinks first: followers in the ISR not caught up within
    /// `replica.lag.time.max.ms`. Otherwise expands: followers out of the ISR
    /// that have reached the HW and this epoch's start and are caught up.
    pub fn tick(&mut self, now_ms: i64) -> Option<AlterPartition> {
        self.tick_with(now_ms, |_| true)
    }

    /// [`LeaderState::tick`], where only replicas `eligible` says may join
    /// the ISR are proposed (Kafka's `isReplicaIsrEligible`, KIP-841: not
    /// fenced, not shutting down). A fenced replica of an idle partition
    /// still looks caught up (its log end is the leader's), and proposing it
    /// would be refused every time, keeping a live one out too: a
    /// reassignment away from a stopped broker then never finished.
    pub fn tick_with(
        &mut self,
        now_ms: i64,
        eligible: impl Fn(ReplicaId) -> bool,
    ) -> Option<AlterPartition> {
        if self.pending.is_some() {
            return None;
        }
        let lag_max_ms = self.config.replica_lag_time_max_ms;
        let out_of_sync: BTreeSet<ReplicaId> = self
            .isr
            .iter()
            .copied()
            .filter(|r| *r != self.leader)
            .filter(|r| {
                self.followers
                    .get(r)
                    .is_some_and(|v| !v.is_caught_up(self.log_end_offset, now_ms, lag_max_ms))
            })
            .collect();
        let (kind, new_isr) = if !out_of_sync.is_empty() {
            (
                IsrChangeKind::Shrink,
                self.isr.difference(&out_of_sync).copied().collect(),
            )
        } else {
            let joining: Vec<ReplicaId> = self
                .followers
                .iter()
                .filter(|(r, _)| !self.isr.contains(*r) && eligible(**r))
                .filter(|(_, v)| {
                    v.log_end_offset >= self.high_watermark
                        && v.log_end_offset >= self.epoch_start_offset
                        && v.is_caught_up(self.log_end_offset, now_ms, lag_max_ms)
                })
                .map(|(r, _)| *r)
                .collect();
            if joining.is_empty() {
                return None;
            }
            let mut new_isr = self.isr.clone();
            new_isr.extend(joining);
            (IsrChangeKind::Expand, new_isr)
        };
        assert!(new_isr.contains(&self.leader));
        assert!(new_isr != self.isr);
        let proposal = AlterPartition {
            proposal_id: self.next_proposal_id,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            kind,
            new_isr,
        };
        self.next_proposal_id += 1;
        self.pending = Some(proposal.clone());
        // A pending expand counts at once (maximal ISR); recompute.
        self.maybe_advance_high_watermark();
        self.assert_invariants();
        Some(proposal)
    }

    /// Committed partition state for this leader epoch (the AlterPartition
    /// answer, or the metadata log): the ISR and the partition epoch.
    /// Ignored (`Ok(None)`) unless newer than what this leader has; clears
    /// the pending proposal, whatever the controller decided. Returns the
    /// new HW if it moved (a committed shrink can release it).
    pub fn on_isr_committed(
        &mut self,
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
        isr: BTreeSet<ReplicaId>,
    ) -> Result<Option<Offset>, ReplicationError> {
        let replicas = self.replicas.clone();
        self.on_partition_committed(leader_epoch, partition_epoch, &replicas, isr, 0)
    }

    /// [`Self::on_isr_committed`] with the replicas too (a reassignment
    /// adds or removes some under the same leader): an added follower
    /// starts out of sync with an unknown log end, a removed one is
    /// forgotten. `now_ms` starts the added ones' lag clocks.
    pub fn on_partition_committed(
        &mut self,
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
        replicas: &[ReplicaId],
        isr: BTreeSet<ReplicaId>,
        now_ms: i64,
    ) -> Result<Option<Offset>, ReplicationError> {
        if leader_epoch != self.leader_epoch {
            return Err(ReplicationError::WrongLeaderEpoch {
                current: self.leader_epoch,
                got: leader_epoch,
            });
        }
        if partition_epoch <= self.partition_epoch {
            return Ok(None);
        }
        check_isr(self.leader, replicas, &isr)?;
        let high_watermark_before = self.high_watermark;
        if replicas != self.replicas.as_slice() {
            self.followers
                .retain(|replica, _| replicas.contains(replica));
            for &replica in replicas.iter().filter(|&&r| r != self.leader) {
                self.followers
                    .entry(replica)
                    .or_insert_with(|| FollowerView::new(false, now_ms));
            }
            self.replicas = replicas.to_vec();
        }
        self.isr = isr;
        self.partition_epoch = partition_epoch;
        self.pending = None;
        let moved = self.maybe_advance_high_watermark();
        assert!(self.high_watermark >= high_watermark_before);
        Ok(moved)
    }

    /// The controller refused proposal `proposal_id`. Only a refusal that
    /// guarantees nothing was applied reverts the pending state; a stale
    /// answer (another proposal's id) is ignored.
    pub fn on_alter_partition_rejected(
        &mut self,
        proposal_id: u64,
        rejection: AlterPartitionRejection,
    ) {
        let matches = self
            .pending
            .as_ref()
            .is_some_and(|p| p.proposal_id == proposal_id);
        if matches && rejection == AlterPartitionRejection::NotApplied {
            self.pending = None;
        }
        self.assert_invariants();
    }

    /// HW = min(durable offset, log end of every follower in the maximal
    /// ISR); it only moves forward, and not at all while the committed ISR
    /// is under the minimum (see the module doc).
    fn maybe_advance_high_watermark(&mut self) -> Option<Offset> {
        let before = self.high_watermark;
        if self.is_under_min_isr() {
            self.assert_invariants();
            return None;
        }
        let candidate = self
            .maximal_isr()
            .iter()
            .filter(|r| **r != self.leader)
            .map(|r| self.followers.get(r).map_or(-1, |v| v.log_end_offset))
            .fold(self.durable_offset, Offset::min);
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
        }
        assert!(self.high_watermark >= before, "the HW never moves back");
        self.assert_invariants();
        (self.high_watermark > before).then_some(self.high_watermark)
    }

    fn assert_invariants(&self) {
        assert!(self.high_watermark <= self.durable_offset);
        assert!(self.durable_offset <= self.log_end_offset);
        assert!(self.epoch_start_offset <= self.log_end_offset);
        assert!(self.isr.contains(&self.leader));
        assert!(self.isr.iter().all(|r| self.replicas.contains(r)));
        if let Some(pending) = &self.pending {
            assert!(pending.new_isr.contains(&self.leader));
            assert_eq!(pending.leader_epoch, self.leader_epoch);
        }
        for view in self.followers.values() {
            assert!(view.log_end_offset <= self.log_end_offset);
        }
    }
}

fn check_isr(
    leader: ReplicaId,
    replicas: &[ReplicaId],
    isr: &BTreeSet<ReplicaId>,
) -> Result<(), ReplicationError> {
    if isr.contains(&leader)
        && replicas.contains(&leader)
        && isr.iter().all(|r| replicas.contains(r))
    {
        return Ok(());
    }
    Err(ReplicationError::InvalidIsr {
        isr: isr.iter().copied().collect(),
        leader,
        replicas: replicas.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG_MS: i64 = 100;

    fn config(min_insync_replicas: usize) -> LeaderConfig {
        LeaderConfig {
            min_insync_replicas,
            replica_lag_time_max_ms: LAG_MS,
        }
    }

    fn set(ids: &[ReplicaId]) -> BTreeSet<ReplicaId> {
        ids.iter().copied().collect()
    }

    /// Leader 1 of replicas 1, 2, 3, all in sync, epoch 5, log end 10,
    /// durable 10, HW 10.
    fn leader(min_insync_replicas: usize) -> LeaderState {
        LeaderState::new(
            config(min_insync_replicas),
            LeaderInit {
                leader: 1,
                leader_epoch: 5,
                partition_epoch: 7,
                replicas: vec![1, 2, 3],
                isr: set(&[1, 2, 3]),
                log_end_offset: 10,
                durable_offset: 10,
                high_watermark: 10,
            },
            0,
        )
        .unwrap()
    }

    #[test]
    fn hw_is_the_minimum_over_the_isr_and_counts_only_durable_data() {
        let mut l = leader(2);
        l.on_local_append(20);
        assert_eq!(l.on_follower_fetch(2, 20, 1), Ok(None), "3 has not fetched");
        assert_eq!(
            l.on_follower_fetch(3, 15, 1),
            Ok(None),
            "the leader's 10..20 is not durable"
        );
        assert_eq!(l.on_local_durable(18), Some(15), "min(18, 20, 15)");
        assert_eq!(l.on_follower_fetch(3, 20, 2), Ok(Some(18)));
        assert_eq!(l.on_local_durable(20), Some(20));
        assert!(l.acks_all_complete(19));
        assert!(!l.acks_all_complete(20));
        // A follower that truncated fetches lower: the HW stays.
        assert_eq!(l.on_follower_fetch(2, 12, 3), Ok(None));
        assert_eq!(l.high_watermark(), 20);
    }

    #[test]
    fn read_replicas_are_isr_members_holding_the_offset() {
        let mut l = LeaderState::new(
            config(1),
            LeaderInit {
                leader: 1,
                leader_epoch: 5,
                partition_epoch: 7,
                replicas: vec![1, 2, 3, 4],
                isr: set(&[1, 2, 3]),
                log_end_offset: 30,
                durable_offset: 30,
                high_watermark: 10,
            },
            0,
        )
        .unwrap();
        assert!(
            l.read_replica_candidates(0, 5).is_empty(),
            "no follower has fetched yet: their log ends are unknown"
        );
        l.on_follower_fetch(2, 30, 10).unwrap();
        l.on_follower_log_start(2, 5);
        l.on_follower_fetch(3, 20, 10).unwrap();
        l.on_follower_fetch(4, 30, 10).unwrap();
        assert_eq!(
            l.read_replica_candidates(20, 50),
            vec![(2, 30, 40), (3, 20, 50)],
            "4 is out of the ISR; 3 was caught up at the start, 50 ms ago"
        );
        assert_eq!(l.read_replica_candidates(25, 50), vec![(2, 30, 40)]);
        assert_eq!(
            l.read_replica_candidates(3, 50),
            vec![(3, 20, 50)],
            "2's log starts at 5"
        );
    }

    #[test]
    fn fetch_errors() {
        let mut l = leader(1);
        assert_eq!(
            l.on_follower_fetch(9, 0, 0),
            Err(ReplicationError::NotAFollower { replica: 9 })
        );
        assert_eq!(
            l.on_follower_fetch(1, 0, 0),
            Err(ReplicationError::NotAFollower { replica: 1 }),
            "the leader does not fetch from itself"
        );
        assert!(matches!(
            l.on_follower_fetch(2, 11, 0),
            Err(ReplicationError::FetchOffsetOutOfRange { .. })
        ));
        assert!(l.check_leader_epoch(5).is_ok());
        assert!(l.check_leader_epoch(-1).is_ok());
        assert!(matches!(
            l.check_leader_epoch(4),
            Err(ReplicationError::FencedLeaderEpoch { .. })
        ));
        assert!(matches!(
            l.check_leader_epoch(6),
            Err(ReplicationError::UnknownLeaderEpoch { .. })
        ));
    }

    #[test]
    fn lagging_follower_is_proposed_out_and_the_shrink_releases_the_hw() {
        let mut l = leader(2);
        l.on_local_append(30);
        l.on_local_durable(30);
        l.on_follower_fetch(2, 30, 50).unwrap();
        l.on_follower_fetch(3, 12, 50).unwrap();
        assert_eq!(l.high_watermark(), 12);
        assert_eq!(l.tick(LAG_MS), None, "3 is within the lag time");
        let proposal = l.tick(LAG_MS + 1).unwrap();
        assert_eq!(proposal.kind, IsrChangeKind::Shrink);
        assert_eq!(proposal.new_isr, set(&[1, 2]));
        assert_eq!(proposal.partition_epoch, 7);
        // Pending shrink: 3 still holds the HW back.
        l.on_follower_fetch(2, 30, LAG_MS + 2).unwrap();
        assert_eq!(l.high_watermark(), 12);
        assert_eq!(l.tick(LAG_MS + 500), None, "one proposal at a time");
        assert_eq!(l.maximal_isr(), set(&[1, 2, 3]));
        // Committed: the HW moves to min(30, 30).
        assert_eq!(l.on_isr_committed(5, 8, set(&[1, 2])), Ok(Some(30)));
        assert_eq!(l.isr(), &set(&[1, 2]));
        assert!(l.pending_alter_partition().is_none());
        assert!(l.is_under_replicated());
        // A stale commit is ignored; another epoch's is an error.
        assert_eq!(l.on_isr_committed(5, 8, set(&[1, 2, 3])), Ok(None));
        assert!(l.on_isr_committed(6, 9, set(&[1])).is_err());
    }

    #[test]
    fn the_hw_holds_still_while_the_isr_is_under_the_minimum() {
        let mut l = leader(2);
        l.on_local_append(30);
        l.on_local_durable(30);
        l.on_follower_fetch(2, 20, 1).unwrap();
        l.on_follower_fetch(3, 20, 1).unwrap();
        assert_eq!(l.high_watermark(), 20);
        // Both followers leave: the leader alone is under the minimum, and
        // what it appends now is not committed (the followers that left
        // have everything below 20: they may lead cleanly later).
        assert_eq!(l.on_isr_committed(5, 8, set(&[1])), Ok(None));
        assert!(l.is_under_min_isr());
        l.on_local_append(40);
        assert_eq!(l.on_local_durable(40), None);
        assert_eq!(l.high_watermark(), 20);
        // One follower back in the ISR: the minimum holds, the HW moves.
        l.on_follower_fetch(2, 40, 2).unwrap();
        assert_eq!(l.on_isr_committed(5, 9, set(&[1, 2])), Ok(Some(40)));
        assert!(!l.is_under_min_isr());
        // A minimum above the replica count is capped at it (Kafka's
        // effective minimum): 5 means all three here.
        assert_eq!(l.set_min_insync_replicas(5), None);
        assert!(l.is_under_min_isr());
        // Lowered to 1: a lone leader commits on its own again.
        l.on_isr_committed(5, 10, set(&[1])).unwrap();
        l.on_local_append(50);
        l.on_local_durable(50);
        assert_eq!(l.high_watermark(), 40);
        assert_eq!(l.set_min_insync_replicas(1), Some(50));
    }

    #[test]
    fn an_idle_follower_at_the_log_end_stays_in_sync() {
        let mut l = leader(1);
        l.on_follower_fetch(2, 10, 0).unwrap();
        l.on_follower_fetch(3, 10, 0).unwrap();
        // No appends and no fetches for a long time: still caught up.
        assert_eq!(l.tick(10 * LAG_MS), None);
    }

    /// Kafka's second rule: a follower that reaches what the leader had at
    /// its previous fetch was caught up as of that fetch.
    #[test]
    fn catch_up_time_counts_the_previous_fetch() {
        let mut l = leader(1);
        l.on_local_append(20);
        l.on_follower_fetch(2, 10, 40).unwrap(); // leader end was 20
        l.on_local_append(30);
        l.on_follower_fetch(2, 20, 90).unwrap(); // has what the leader had at 40
        assert_eq!(l.follower(2).unwrap().last_caught_up_ms, Some(40));
        l.on_follower_fetch(3, 30, 90).unwrap();
        assert_eq!(l.tick(40 + LAG_MS), None);
        let proposal = l.tick(41 + LAG_MS).unwrap();
        assert_eq!(proposal.new_isr, set(&[1, 3]));
    }

    #[test]
    fn caught_up_follower_is_proposed_in_and_counts_while_pending() {
        let mut l = LeaderState::new(
            config(2),
            LeaderInit {
                leader: 1,
                leader_epoch: 5,
                partition_epoch: 7,
                replicas: vec![1, 2, 3],
                isr: set(&[1, 2]),
                log_end_offset: 10,
                durable_offset: 10,
                high_watermark: 4,
            },
            0,
        )
        .unwrap();
        // 3 fetched below this epoch's start (10): not eligible yet.
        l.on_follower_fetch(2, 10, 1).unwrap();
        assert_eq!(l.high_watermark(), 10);
        l.on_follower_fetch(3, 8, 1).unwrap();
        assert_eq!(l.tick(2), None);
        l.on_local_append(12);
        l.on_local_durable(12);
        l.on_follower_fetch(3, 12, 3).unwrap();
        let proposal = l.tick(4).unwrap();
        assert_eq!(proposal.kind, IsrChangeKind::Expand);
        assert_eq!(proposal.new_isr, set(&[1, 2, 3]));
        // Pending expand: 3 already counts, 2 (at 10) holds the HW.
        assert_eq!(l.maximal_isr(), set(&[1, 2, 3]));
        l.on_local_append(20);
        l.on_local_durable(20);
        l.on_follower_fetch(2, 20, 5).unwrap();
        assert_eq!(l.high_watermark(), 12, "3 is at 12");
        // A refusal that may have been applied keeps the proposal counting.
        l.on_alter_partition_rejected(proposal.proposal_id, AlterPartitionRejection::Unknown);
        assert!(l.pending_alter_partition().is_some());
        // A refusal for another proposal is ignored.
        l.on_alter_partition_rejected(
            proposal.proposal_id + 1,
            AlterPartitionRejection::NotApplied,
        );
        assert!(l.pending_alter_partition().is_some());
        // A refusal that guarantees nothing was applied reverts.
        l.on_alter_partition_rejected(proposal.proposal_id, AlterPartitionRejection::NotApplied);
        assert!(l.pending_alter_partition().is_none());
        assert_eq!(l.maximal_isr(), set(&[1, 2]));
        assert_eq!(l.on_follower_fetch(2, 20, 6), Ok(Some(20)));
    }

    #[test]
    fn min_insync_replicas_guards_acks_all_only() {
        let mut l = leader(3);
        assert_eq!(l.produce_check(Acks::All), Ok(()));
        l.on_local_append(20);
        l.on_local_durable(20);
        l.on_follower_fetch(2, 20, 0).unwrap();
        l.tick(LAG_MS + 1).unwrap();
        l.on_isr_committed(5, 8, set(&[1, 2])).unwrap();
        assert_eq!(
            l.produce_check(Acks::All),
            Err(ReplicationError::NotEnoughReplicas {
                isr_size: 2,
                min_insync_replicas: 3
            })
        );
        let refused = l.produce_check(Acks::All).unwrap_err();
        assert_eq!(refused.error_code(), engine::ErrorCode::NotEnoughReplicas);
        assert_eq!(refused.error_code().code(), 19);
        assert_eq!(l.produce_check(Acks::Leader), Ok(()));
        assert_eq!(l.produce_check(Acks::None), Ok(()));
        assert_eq!(Acks::from_wire(-1), Ok(Acks::All));
        assert!(Acks::from_wire(2).is_err());
    }

    #[test]
    fn a_new_leader_lowers_its_hw_to_its_durable_offset_and_checks_its_isr() {
        let init = LeaderInit {
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![1, 2],
            isr: set(&[1, 2]),
            log_end_offset: 10,
            durable_offset: 6,
            high_watermark: 8,
        };
        let l = LeaderState::new(config(1), init.clone(), 0).unwrap();
        assert_eq!(l.high_watermark(), 6);
        assert_eq!(l.follower(2).unwrap().log_end_offset, -1);
        let without_leader = LeaderInit {
            isr: set(&[2]),
            ..init.clone()
        };
        assert!(LeaderState::new(config(1), without_leader, 0).is_err());
        let stranger = LeaderInit {
            isr: set(&[1, 4]),
            ..init
        };
        assert!(LeaderState::new(config(1), stranger, 0).is_err());
    }

    /// Random operations: the HW never moves back, never passes the durable
    /// offset, and never passes any maximal-ISR follower's log end.
    #[test]
    fn reassigned_replicas_join_as_out_of_sync_followers_and_removed_ones_are_forgotten() {
        let mut l = leader(1);
        assert_eq!(
            l.on_follower_fetch(4, 10, 1),
            Err(ReplicationError::NotAFollower { replica: 4 })
        );
        // Replica 4 is added under the same leader epoch.
        let added = l.on_partition_committed(5, 8, &[4, 1, 2, 3], set(&[1, 2, 3]), 1);
        assert_eq!(added, Ok(None));
        assert_eq!(l.replicas(), &[4, 1, 2, 3]);
        l.on_local_append(12);
        assert_eq!(
            l.on_follower_fetch(4, 12, 2),
            Ok(None),
            "not in the ISR: no say in the HW"
        );
        assert!(l.follower(4).is_some());
        // 4 caught up: the leader proposes it for the ISR.
        l.on_follower_fetch(2, 12, 2).unwrap();
        l.on_follower_fetch(3, 12, 2).unwrap();
        let proposal = l.tick(3).unwrap();
        assert_eq!(proposal.new_isr, set(&[1, 2, 3, 4]));
        // The reassignment completes: 3 removed.
        let done = l.on_partition_committed(5, 10, &[4, 1, 2], set(&[1, 2, 4]), 4);
        assert_eq!(done, Ok(None));
        assert!(l.follower(3).is_none());
        assert_eq!(l.isr(), &set(&[1, 2, 4]));
        // An ISR outside the replicas is still refused.
        assert!(l
            .on_partition_committed(5, 11, &[4, 1], set(&[1, 2]), 5)
            .is_err());
    }

    #[test]
    fn a_fenced_replica_that_looks_caught_up_does_not_keep_a_live_one_out() {
        // Leader 1 of an idle partition (log end 10): 3 was stopped, left
        // the ISR, and still looks caught up; 4 is added and catches up.
        let mut l = leader(1);
        l.on_partition_committed(5, 8, &[1, 2, 3], set(&[1, 2]), 1)
            .unwrap();
        l.on_partition_committed(5, 9, &[1, 2, 4, 3], set(&[1, 2]), 2)
            .unwrap();
        l.on_follower_fetch(2, 10, 3).unwrap();
        l.on_follower_fetch(3, 10, 3).unwrap();
        l.on_follower_fetch(4, 10, 3).unwrap();
        let proposal = l.tick_with(4, |replica| replica != 3).unwrap();
        assert_eq!(proposal.new_isr, set(&[1, 2, 4]));
        // Without the eligibility check, 3 would ride along.
        let mut l2 = leader(1);
        l2.on_partition_committed(5, 8, &[1, 2, 3], set(&[1, 2]), 1)
            .unwrap();
        l2.on_follower_fetch(3, 10, 3).unwrap();
        assert_eq!(l2.tick(4).unwrap().new_isr, set(&[1, 2, 3]));
    }

    #[test]
    fn random_operations_keep_the_hw_rules() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        for _ in 0..200 {
            let mut l = leader(2);
            let mut now_ms = 0;
            let mut partition_epoch = 7;
            for _ in 0..200 {
                now_ms += rng.gen_range(0..40);
                let before = l.high_watermark();
                match rng.gen_range(0..5) {
                    0 => l.on_local_append(l.log_end_offset() + rng.gen_range(0..5)),
                    1 => {
                        let durable = rng.gen_range(l.durable_offset()..=l.log_end_offset());
                        l.on_local_durable(durable);
                    }
                    2 | 3 => {
                        let replica = rng.gen_range(2..=3);
                        let offset = rng.gen_range(0..=l.log_end_offset());
                        l.on_follower_fetch(replica, offset, now_ms).unwrap();
                    }
                    _ => {
                        if let Some(p) = l.tick(now_ms) {
                            if rng.gen_bool(0.7) {
                                partition_epoch += 1;
                                l.on_isr_committed(5, partition_epoch, p.new_isr).unwrap();
                            }
                        }
                    }
                }
                let hw = l.high_watermark();
                assert!(hw >= before);
                assert!(hw <= l.durable_offset());
                if hw > before {
                    assert!(!l.is_under_min_isr(), "the HW moved under the minimum");
                    for r in l.maximal_isr().iter().filter(|r| **r != 1) {
                        assert!(l.follower(*r).unwrap().log_end_offset >= hw);
                    }
                }
            }
        }
    }
}

//! Partition reassignment (AlterPartitionReassignments, KIP-455), as KRaft
//! runs it:
//!
//! 1. Start: the replicas become target ∪ current (target first, so the
//!    target's first replica is preferred), `adding` = target − current,
//!    `removing` = current − target. The added replicas start as followers
//!    outside the ISR and catch up from the leader.
//! 2. Complete: once every adding replica is in the ISR (the leader's
//!    AlterPartition put it there), one `PartitionChange` sets the replicas
//!    to the target, the ISR to its part of the target, and a new leader
//!    from the target when the old one is being removed. The removed
//!    brokers then drop their replica and its files.
//! 3. Cancel: the replicas go back to the original set (the current ones
//!    minus the adding), the adding ones leave the ISR, and a leader among
//!    them is replaced.
//!
//! Nothing acknowledged can be lost on the way: the ISR only ever loses
//! members that are not in the target (complete) or that joined with the
//! reassignment (cancel), and the new leader is taken from the ISR.

use std::collections::BTreeSet;

use engine::types::TopicId;

use crate::placement::BrokerId;

use super::super::error::MetadataError;
use super::super::image::{MetadataImage, PartitionState};
use super::super::record::{MetadataRecord, PartitionChangeRecord, NO_LEADER};
use super::Controller;

/// A partition's reassignment in progress (ListPartitionReassignments).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OngoingReassignment {
    /// Topic name.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// All current replicas (target ∪ original).
    pub replicas: Vec<BrokerId>,
    /// Being added.
    pub adding: Vec<BrokerId>,
    /// To be removed.
    pub removing: Vec<BrokerId>,
}

impl Controller<'_> {
    /// AlterPartitionReassignments for one partition: `Some(target)` starts
    /// (or replaces) a reassignment, `None` cancels the one in progress.
    pub fn alter_reassignment(
        &self,
        topic: &str,
        partition: i32,
        target: Option<&[BrokerId]>,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let topic_image =
            self.image
                .topic_by_name(topic)
                .ok_or_else(|| MetadataError::UnknownTopic {
                    name: topic.to_owned(),
                })?;
        let topic_id = topic_image.topic_id;
        let state =
            topic_image
                .partitions
                .get(&partition)
                .ok_or(MetadataError::UnknownPartition {
                    topic_id,
                    partition,
                })?;
        match target {
            None => self.cancel_reassignment(topic, partition, &topic_id, state),
            Some(target) => self.start_reassignment(topic, partition, &topic_id, state, target),
        }
    }

    /// Cancels the reassignment in progress: back to the original replicas.
    fn cancel_reassignment(
        &self,
        topic: &str,
        partition: i32,
        topic_id: &TopicId,
        state: &PartitionState,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        if !state.is_reassigning() {
            return Err(MetadataError::NoReassignmentInProgress {
                topic: topic.to_owned(),
                partition,
            });
        }
        let mut proposal = self.proposal();
        let original = original_replicas(state);
        let change = self.shrink_to(topic_id, partition, state, &original)?;
        proposal.push(MetadataRecord::PartitionChange(change));
        Ok(proposal.into_records())
    }

    /// Starts (or replaces) a reassignment to `target`.
    fn start_reassignment(
        &self,
        topic: &str,
        partition: i32,
        topic_id: &TopicId,
        state: &PartitionState,
        target: &[BrokerId],
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        self.check_target(target)?;
        let mut proposal = self.proposal();
        let original = original_replicas(state);
        let mut merged: Vec<BrokerId> = target.to_vec();
        merged.extend(original.iter().filter(|r| !target.contains(r)));
        let adding: Vec<BrokerId> = target
            .iter()
            .copied()
            .filter(|r| !original.contains(r))
            .collect();
        let removing: Vec<BrokerId> = original
            .iter()
            .copied()
            .filter(|r| !target.contains(r))
            .collect();
        // Replicas a replaced reassignment was adding and the new
        // target drops leave the ISR with it.
        let isr: Vec<BrokerId> = state
            .isr
            .iter()
            .copied()
            .filter(|r| merged.contains(r))
            .collect();
        if merged != state.replicas || isr != state.isr {
            if isr.is_empty() || (state.leader != NO_LEADER && !isr.contains(&state.leader)) {
                return Err(MetadataError::InvalidReplicaAssignment {
                    reason: format!(
                        "replacing the reassignment of {topic}-{partition} would leave \
                         its ISR {:?} or leader {} out",
                        state.isr, state.leader
                    ),
                });
            }
            proposal.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                topic_id: *topic_id,
                partition,
                leader: None,
                isr: (isr != state.isr).then_some(isr),
                replicas: Some(merged),
                eligible_leader_replicas: None,
                last_known_elr: None,
            }));
        }
        if !adding.is_empty() || !removing.is_empty() {
            proposal.push(MetadataRecord::Reassignment {
                topic_id: *topic_id,
                partition,
                adding,
                removing,
            });
        }
        // A target already in sync (only removals) completes now.
        if let Some(done) = completion(proposal.image(), topic_id, partition) {
            proposal.push(MetadataRecord::PartitionChange(done));
        }
        Ok(proposal.into_records())
    }

    /// Completes every reassignment whose added replicas are all in sync;
    /// the controller runs it after each AlterPartition and on its timer.
    pub fn complete_reassignments(&self) -> Vec<MetadataRecord> {
        let mut proposal = self.proposal();
        let ready: Vec<(TopicId, i32)> = self
            .image
            .partitions()
            .filter(|(_, _, state)| state.is_reassigning())
            .map(|(topic, partition, _)| (topic.topic_id, partition))
            .collect();
        for (topic_id, partition) in ready {
            if let Some(done) = completion(proposal.image(), &topic_id, partition) {
                proposal.push(MetadataRecord::PartitionChange(done));
            }
        }
        proposal.into_records()
    }

    /// Every reassignment in progress, optionally of the named topics only.
    pub fn ongoing_reassignments(&self) -> Vec<OngoingReassignment> {
        ongoing_reassignments(self.image)
    }

    fn check_target(&self, target: &[BrokerId]) -> Result<(), MetadataError> {
        let distinct: BTreeSet<BrokerId> = target.iter().copied().collect();
        if target.is_empty() || distinct.len() != target.len() {
            return Err(MetadataError::InvalidReplicaAssignment {
                reason: format!("target replicas {target:?} empty or repeated"),
            });
        }
        if let Some(unknown) = target.iter().find(|&&b| self.image.broker(b).is_none()) {
            return Err(MetadataError::InvalidReplicaAssignment {
                reason: format!("broker {unknown} is not registered"),
            });
        }
        Ok(())
    }

    /// The change that cuts a reassigning partition down to `keep`: ISR
    /// within `keep`, a new leader from it when the old one is cut.
    fn shrink_to(
        &self,
        topic_id: &TopicId,
        partition: i32,
        state: &PartitionState,
        keep: &[BrokerId],
    ) -> Result<PartitionChangeRecord, MetadataError> {
        shrink_to(self.image, topic_id, partition, state, keep).ok_or_else(|| {
            MetadataError::InvalidReplicaAssignment {
                reason: format!(
                    "no in-sync replica of {:?} would remain to lead (ISR {:?})",
                    keep, state.isr
                ),
            }
        })
    }
}

/// The replicas as they were before the reassignment in progress (all of
/// them when none is), in their current order.
fn original_replicas(state: &PartitionState) -> Vec<BrokerId> {
    state
        .replicas
        .iter()
        .copied()
        .filter(|r| !state.adding_replicas.contains(r))
        .collect()
}

/// Every reassignment in progress in `image`.
pub fn ongoing_reassignments(image: &MetadataImage) -> Vec<OngoingReassignment> {
    image
        .partitions()
        .filter(|(_, _, state)| state.is_reassigning())
        .map(|(topic, partition, state)| OngoingReassignment {
            topic: topic.name.clone(),
            partition,
            replicas: state.replicas.clone(),
            adding: state.adding_replicas.clone(),
            removing: state.removing_replicas.clone(),
        })
        .collect()
}

/// The completing change of a reassignment whose adding replicas are all in
/// the ISR and whose target keeps a live in-sync leader; `None` otherwise.
pub(super) fn completion(
    image: &MetadataImage,
    topic_id: &TopicId,
    partition: i32,
) -> Option<PartitionChangeRecord> {
    let state = image.partition(topic_id, partition)?;
    if !state.is_reassigning() {
        return None;
    }
    if !state.adding_replicas.iter().all(|r| state.isr.contains(r)) {
        return None;
    }
    shrink_to(image, topic_id, partition, state, &state.target_replicas())
}

/// The change setting the replicas to `keep` (in that order), the ISR to
/// its part of `keep`, and the leader to the first live in-sync member of
/// `keep` when the current one is not kept. `None` when no in-sync member
/// of `keep` is left to lead (or, leaderless, to stay in the ISR).
fn shrink_to(
    image: &MetadataImage,
    topic_id: &TopicId,
    partition: i32,
    state: &PartitionState,
    keep: &[BrokerId],
) -> Option<PartitionChangeRecord> {
    let isr: Vec<BrokerId> = state
        .isr
        .iter()
        .copied()
        .filter(|r| keep.contains(r))
        .collect();
    if isr.is_empty() {
        return None;
    }
    let leader = if state.leader == NO_LEADER || keep.contains(&state.leader) {
        None
    } else {
        Some(
            keep.iter()
                .copied()
                .find(|r| isr.contains(r) && image.is_live(*r))?,
        )
    };
    Some(PartitionChangeRecord {
        topic_id: *topic_id,
        partition,
        leader,
        isr: Some(isr),
        replicas: Some(keep.to_vec()),
        eligible_leader_replicas: None,
        last_known_elr: None,
    })
}

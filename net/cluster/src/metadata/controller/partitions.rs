//! Partition decisions: AlterPartition (a leader shrinks or expands its ISR;
//! the proposal keeps the partition's eligible leader replicas in step, see
//! [`super::elr`]).
//!
//! AlterPartition carries the leader epoch and partition epoch the leader
//! last saw. A mismatch means the leader acts on stale state — deposed
//! (`FENCED_LEADER_EPOCH`), or racing another change (`INVALID_UPDATE_VERSION`)
//! — and its request is refused rather than merged: it will learn the new
//! state from the metadata log and retry. This is what keeps an old leader
//! from re-adding a replica the controller just removed.

use std::collections::BTreeSet;

use engine::types::TopicId;

use crate::placement::BrokerId;

use super::super::error::MetadataError;
use super::super::image::PartitionState;
use super::super::record::{MetadataRecord, PartitionChangeRecord};
use super::Controller;

/// An AlterPartition entry, from the partition's leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    /// The leader sending it.
    pub broker_id: BrokerId,
    /// Its broker epoch.
    pub broker_epoch: i64,
    /// The topic.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// The leader epoch the leader has.
    pub leader_epoch: i32,
    /// The partition epoch the leader has.
    pub partition_epoch: i32,
    /// The ISR the leader proposes.
    pub new_isr: Vec<BrokerId>,
}

/// The answer to AlterPartition: the partition as it will be once
/// `records` are applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartitionOutcome {
    /// Records to propose (none if the ISR is unchanged).
    pub records: Vec<MetadataRecord>,
    /// Leader.
    pub leader: BrokerId,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Partition epoch.
    pub partition_epoch: i32,
    /// ISR.
    pub isr: Vec<BrokerId>,
}

impl Controller<'_> {
    /// AlterPartition: checks the leader's epochs and the new ISR, in
    /// KRaft's order, and proposes the ISR change.
    pub fn alter_partition(
        &self,
        request: &AlterPartitionRequest,
    ) -> Result<AlterPartitionOutcome, MetadataError> {
        let state = self.check_alter_partition(request)?;
        let (topic_id, partition) = (request.topic_id, request.partition);
        let new_isr = &request.new_isr;
        let distinct: BTreeSet<BrokerId> = new_isr.iter().copied().collect();
        let current: BTreeSet<BrokerId> = state.isr.iter().copied().collect();
        if distinct == current {
            return Ok(AlterPartitionOutcome {
                records: Vec::new(),
                leader: state.leader,
                leader_epoch: state.leader_epoch,
                partition_epoch: state.partition_epoch,
                isr: state.isr.clone(),
            });
        }
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id,
            partition,
            leader: None,
            isr: Some(new_isr.clone()),
            replicas: None,
            eligible_leader_replicas: None,
            last_known_elr: None,
        }));
        let after = proposal.image().partition(&topic_id, partition).cloned();
        let Some(after) = after else {
            unreachable!("the partition was there before the change")
        };
        assert_eq!(after.partition_epoch, state.partition_epoch + 1);
        assert_eq!(after.leader_epoch, state.leader_epoch);
        // The replica this ISR takes in may be the last a reassignment
        // waited for: complete it in the same decision.
        let done = super::reassignments::completion(proposal.image(), &topic_id, partition);
        let after = match done {
            Some(done) => {
                proposal.push(MetadataRecord::PartitionChange(done));
                let after = proposal.image().partition(&topic_id, partition).cloned();
                let Some(after) = after else {
                    unreachable!("the partition was there before the change")
                };
                after
            }
            None => after,
        };
        Ok(AlterPartitionOutcome {
            records: proposal.into_records(),
            leader: after.leader,
            leader_epoch: after.leader_epoch,
            partition_epoch: after.partition_epoch,
            isr: after.isr,
        })
    }

    /// AlterPartition's checks, in KRaft's order; the partition if they pass.
    fn check_alter_partition(
        &self,
        request: &AlterPartitionRequest,
    ) -> Result<&PartitionState, MetadataError> {
        let broker =
            self.image
                .broker(request.broker_id)
                .ok_or(MetadataError::BrokerNotRegistered {
                    broker_id: request.broker_id,
                })?;
        if broker.broker_epoch != request.broker_epoch {
            return Err(MetadataError::StaleBrokerEpoch {
                broker_id: request.broker_id,
                broker_epoch: request.broker_epoch,
                current_epoch: broker.broker_epoch,
            });
        }
        let (topic_id, partition) = (request.topic_id, request.partition);
        if self.image.topic(&topic_id).is_none() {
            return Err(MetadataError::UnknownTopicId { topic_id });
        }
        let state =
            self.image
                .partition(&topic_id, partition)
                .ok_or(MetadataError::UnknownPartition {
                    topic_id,
                    partition,
                })?;
        if request.leader_epoch != state.leader_epoch {
            return Err(MetadataError::FencedLeaderEpoch {
                topic_id,
                partition,
                leader_epoch: request.leader_epoch,
                current_leader_epoch: state.leader_epoch,
            });
        }
        if request.broker_id != state.leader {
            return Err(MetadataError::InvalidRequest {
                reason: format!(
                    "broker {} is not the leader ({}) of partition {partition}",
                    request.broker_id, state.leader
                ),
            });
        }
        if request.partition_epoch != state.partition_epoch {
            return Err(MetadataError::InvalidUpdateVersion {
                topic_id,
                partition,
                partition_epoch: request.partition_epoch,
                current_partition_epoch: state.partition_epoch,
            });
        }
        let new_isr = &request.new_isr;
        let distinct: BTreeSet<BrokerId> = new_isr.iter().copied().collect();
        if distinct.len() != new_isr.len() || !distinct.contains(&state.leader) {
            return Err(MetadataError::InvalidRequest {
                reason: format!(
                    "ISR {new_isr:?} repeats a broker or lacks the leader {}",
                    state.leader
                ),
            });
        }
        if let Some(&ineligible) = new_isr
            .iter()
            .find(|&&broker| !state.replicas.contains(&broker) || !self.image.is_live(broker))
        {
            return Err(MetadataError::IneligibleReplica {
                topic_id,
                partition,
                broker_id: ineligible,
            });
        }
        Ok(state)
    }
}

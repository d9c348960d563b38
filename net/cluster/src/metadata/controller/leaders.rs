//! Moving leaderships on purpose: ElectLeaders (key 43, KIP-460), an
//! operator's preferred or unclean election, and the automatic rebalance
//! of `auto.leader.rebalance.enable`.
//!
//! ElectLeaders answers each partition as KRaft's
//! `ReplicationControlManager.electLeader` does:
//! - `UNKNOWN_TOPIC_OR_PARTITION`: no such topic or partition;
//! - `ELECTION_NOT_NEEDED`: PREFERRED and the first replica leads already,
//!   or UNCLEAN and the partition has a leader;
//! - PREFERRED: the first replica leads if it is a clean candidate (live,
//!   in the ISR — or in the ELR when no ISR member is live); a leaderless
//!   partition gets any clean leader; otherwise
//!   `PREFERRED_LEADER_NOT_AVAILABLE`;
//! - UNCLEAN: a clean leader if there is one, else the first live replica,
//!   whatever `unclean.leader.election.enable` says (that is what the
//!   request is for: the operator accepts losing what only the dead
//!   replicas had); nobody live: `ELIGIBLE_LEADERS_NOT_AVAILABLE`.
//!
//! Asked for every partition (`topic_partitions` null), the answer leaves
//! out the partitions whose election was not needed, as Kafka's does.
//!
//! The automatic rebalance follows Kafka's `checkAndTriggerAutoLeaderRebalance`:
//! per broker, the share of the partitions that prefer it (it is their
//! first replica) that another broker leads; above
//! `leader.imbalance.per.broker.percentage` percent, those of its
//! partitions where it may lead cleanly get a preferred election. A broker
//! under the threshold keeps its imbalance: moving a leadership costs every
//! client of the partition a metadata refresh and a retry.

use std::collections::{BTreeMap, BTreeSet};

use engine::types::TopicId;
use engine::ErrorCode;

use crate::placement::BrokerId;

use super::super::image::PartitionState;
use super::super::record::{MetadataRecord, NO_LEADER};
use super::election::{elect, Election};
use super::{Controller, Proposal};

/// Kafka's `ElectionType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionType {
    /// 0: the preferred replica.
    Preferred,
    /// 1: any live replica when no clean one is left.
    Unclean,
}

impl ElectionType {
    /// From the request's code; `None` for a code Kafka does not define.
    pub fn from_code(code: i8) -> Option<ElectionType> {
        match code {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// One partition's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionElection {
    /// The partition.
    pub partition: i32,
    /// `None` on success.
    pub error_code: ErrorCode,
    /// Kafka's message for the code (`None` on success).
    pub message: Option<String>,
}

/// What ElectLeaders decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectLeadersOutcome {
    /// Records to propose.
    pub records: Vec<MetadataRecord>,
    /// Per topic, in the order asked (name order for every partition), each
    /// partition's answer.
    pub results: Vec<(String, Vec<PartitionElection>)>,
}

impl Controller<'_> {
    /// ElectLeaders of `partitions` (topic name and partition numbers;
    /// `None`: every partition of every topic).
    pub fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<&[(String, Vec<i32>)]>,
    ) -> ElectLeadersOutcome {
        let mut proposal = self.proposal();
        let mut results = Vec::new();
        match partitions {
            Some(asked) => {
                for (topic, numbers) in asked {
                    let answers = numbers
                        .iter()
                        .map(|&p| elect_one(&mut proposal, election, topic, p))
                        .collect();
                    results.push((topic.clone(), answers));
                }
            }
            None => {
                let all: Vec<(String, Vec<i32>)> = self
                    .image
                    .topics()
                    .values()
                    .map(|t| (t.name.clone(), t.partitions.keys().copied().collect()))
                    .collect::<BTreeMap<_, _>>()
                    .into_iter()
                    .collect();
                for (topic, numbers) in all {
                    let answers = numbers
                        .into_iter()
                        .map(|p| elect_one(&mut proposal, election, &topic, p))
                        .filter(|answer| answer.error_code != ErrorCode::ElectionNotNeeded)
                        .collect();
                    results.push((topic, answers));
                }
            }
        }
        ElectLeadersOutcome {
            records: proposal.into_records(),
            results,
        }
    }

    /// The automatic preferred-leader rebalance: for each broker whose
    /// preferred partitions are led elsewhere above
    /// `leader.imbalance.per.broker.percentage` percent, a preferred
    /// election of those where it may lead cleanly (see the module doc).
    pub fn auto_leader_rebalance(&self) -> Vec<MetadataRecord> {
        let mut proposal = self.proposal();
        let threshold = self.config.leader_imbalance_per_broker_percentage;
        for (broker, partitions) in self.preferred_by_broker() {
            let elsewhere: Vec<&(TopicId, i32, bool)> = partitions
                .iter()
                .filter(|(_, _, led_by_it)| !led_by_it)
                .collect();
            if !over_threshold(elsewhere.len(), partitions.len(), threshold) {
                continue;
            }
            for &&(topic_id, partition, _) in &elsewhere {
                let change = proposal.image().topic(&topic_id).and_then(|topic| {
                    elect(
                        proposal.image(),
                        topic,
                        partition,
                        &BTreeSet::new(),
                        Election::Preferred,
                    )
                });
                // Only the move to this broker: a preferred election of a
                // partition it cannot lead would elect someone else.
                if let Some(change) = change.filter(|c| c.leader == Some(broker)) {
                    proposal.push(MetadataRecord::PartitionChange(change));
                }
            }
        }
        proposal.into_records()
    }

    /// Every partition by its preferred (first) replica, each with whether
    /// that replica leads it. Partitions being reassigned are left out: the
    /// reassignment moves their leader itself.
    fn preferred_by_broker(&self) -> BTreeMap<BrokerId, Vec<(TopicId, i32, bool)>> {
        let mut by_broker: BTreeMap<BrokerId, Vec<(TopicId, i32, bool)>> = BTreeMap::new();
        for (topic, partition, state) in self.image.partitions() {
            let Some(&preferred) = state.replicas.first() else {
                continue;
            };
            if state.is_reassigning() {
                continue;
            }
            by_broker.entry(preferred).or_default().push((
                topic.topic_id,
                partition,
                state.leader == preferred,
            ));
        }
        by_broker
    }
}

/// Whether `elsewhere` of `total` preferred partitions exceeds `percentage`
/// percent (Kafka compares the ratio with `percentage / 100`; integers here
/// so that the boundary is exact: 1 of 10 is not above 10 %).
pub fn over_threshold(elsewhere: usize, total: usize, percentage: u32) -> bool {
    total > 0 && elsewhere.saturating_mul(100) > total.saturating_mul(percentage as usize)
}

/// One partition of ElectLeaders, its change (if any) added to `proposal`.
fn elect_one(
    proposal: &mut Proposal,
    election: ElectionType,
    topic_name: &str,
    partition: i32,
) -> PartitionElection {
    let outcome = decide_one(proposal, election, topic_name, partition);
    let (error_code, message) = match outcome {
        Ok(()) => (ErrorCode::None, None),
        Err((code, message)) => (code, Some(message)),
    };
    PartitionElection {
        partition,
        error_code,
        message,
    }
}

fn decide_one(
    proposal: &mut Proposal,
    election: ElectionType,
    topic_name: &str,
    partition: i32,
) -> Result<(), (ErrorCode, String)> {
    let image = proposal.image();
    let topic = image.topic_by_name(topic_name).ok_or_else(|| {
        (
            ErrorCode::UnknownTopicOrPartition,
            format!("No such topic as {topic_name}"),
        )
    })?;
    let state = topic.partitions.get(&partition).ok_or_else(|| {
        (
            ErrorCode::UnknownTopicOrPartition,
            format!("No such partition as {topic_name}-{partition}"),
        )
    })?;
    if election_not_needed(state, election) {
        return Err((
            ErrorCode::ElectionNotNeeded,
            String::from("Leader election not needed for topic partition."),
        ));
    }
    let (kind, refusal) = match election {
        ElectionType::Preferred => (
            Election::Preferred,
            (
                ErrorCode::PreferredLeaderNotAvailable,
                "The preferred leader was not available.",
            ),
        ),
        ElectionType::Unclean => (
            Election::Unclean,
            (
                ErrorCode::EligibleLeadersNotAvailable,
                "Eligible topic partition leaders are not available.",
            ),
        ),
    };
    // A change that elects nobody (no live replica) is no election.
    let change = elect(image, topic, partition, &BTreeSet::new(), kind)
        .filter(|change| change.leader.is_some_and(|leader| leader != NO_LEADER));
    let Some(change) = change else {
        return Err((refusal.0, refusal.1.to_owned()));
    };
    proposal.push(MetadataRecord::PartitionChange(change));
    Ok(())
}

/// Kafka's `ELECTION_NOT_NEEDED` cases: the preferred replica leads
/// already (PREFERRED), or the partition has a leader (UNCLEAN).
fn election_not_needed(state: &PartitionState, election: ElectionType) -> bool {
    match election {
        ElectionType::Preferred => state.replicas.first() == Some(&state.leader),
        ElectionType::Unclean => state.leader != NO_LEADER,
    }
}

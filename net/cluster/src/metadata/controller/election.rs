//! Leader election: a partition's leader and ISR once some brokers can no
//! longer serve it.
//!
//! Kafka's rules (`PartitionLeaderElectionAlgorithms`, KRaft's
//! `PartitionChangeBuilder`):
//! - the leaving brokers leave the ISR;
//! - a leader that is not leaving stays leader;
//! - otherwise the new leader is the first replica, in replica order, that
//!   is in the (shrunk) ISR and alive (clean election), and the ISR keeps
//!   only its live members;
//! - when no ISR member is alive, an out-of-sync live replica may lead only
//!   if `unclean.leader.election.enable` is true for the topic; its ISR is
//!   then itself alone (what only the old ISR had is lost);
//! - otherwise the partition has no leader, and its ISR is not emptied: the
//!   last members stay, so that the first of them to come back leads without
//!   losing anything.
//!
//! A leader change bumps the leader epoch (applying the record does it), so
//! a deposed leader's requests are fenced.

use std::collections::BTreeSet;

use crate::placement::BrokerId;

use super::super::image::{MetadataImage, PartitionState, TopicImage};
use super::super::record::{PartitionChangeRecord, NO_LEADER};
use super::ControllerConfig;

/// Whether the topic allows unclean leader election (its own config, else
/// the cluster default).
pub fn unclean_allowed(topic: &TopicImage, config: &ControllerConfig) -> bool {
    topic
        .unclean_leader_election()
        .unwrap_or(config.unclean_leader_election_enable)
}

/// The change to partition `partition` of `topic` once the `leaving`
/// brokers can no longer serve it (fenced, shutting down, re-registering,
/// unregistered), with a leader elected if it has none; `None` if nothing
/// changes. With `leaving` empty this elects a leader for a leaderless
/// partition whose replicas came back.
pub fn elect_without(
    image: &MetadataImage,
    config: &ControllerConfig,
    topic: &TopicImage,
    partition: i32,
    leaving: &BTreeSet<BrokerId>,
) -> Option<PartitionChangeRecord> {
    let state = topic.partitions.get(&partition)?;
    let usable = |broker: BrokerId| image.is_live(broker) && !leaving.contains(&broker);
    let shrunk_isr: Vec<BrokerId> = state
        .isr
        .iter()
        .copied()
        .filter(|broker| !leaving.contains(broker))
        .collect();
    let (leader, isr) = if state.leader != NO_LEADER && usable(state.leader) {
        (state.leader, shrunk_isr)
    } else if let Some(clean) = first_in_replica_order(state, |broker| {
        shrunk_isr.contains(&broker) && usable(broker)
    }) {
        // Kafka's OfflinePartitionLeaderElection: the new ISR is the live
        // part of the old one (members kept while the partition had no
        // leader may still be fenced).
        let live_isr = shrunk_isr
            .iter()
            .copied()
            .filter(|&broker| usable(broker))
            .collect();
        (clean, live_isr)
    } else if let Some(unclean) =
        first_in_replica_order(state, usable).filter(|_| unclean_allowed(topic, config))
    {
        (unclean, vec![unclean])
    } else if shrunk_isr.is_empty() {
        (NO_LEADER, state.isr.clone())
    } else {
        (NO_LEADER, shrunk_isr)
    };
    assert!(!isr.is_empty(), "an election emptied the ISR");
    assert!(leader == NO_LEADER || (isr.contains(&leader) && usable(leader)));
    let change = PartitionChangeRecord {
        topic_id: topic.topic_id,
        partition,
        leader: (leader != state.leader).then_some(leader),
        isr: (isr != state.isr).then_some(isr),
        replicas: None,
    };
    (change.leader.is_some() || change.isr.is_some()).then_some(change)
}

fn first_in_replica_order(
    state: &PartitionState,
    accept: impl Fn(BrokerId) -> bool,
) -> Option<BrokerId> {
    state
        .replicas
        .iter()
        .copied()
        .find(|&broker| accept(broker))
}

/// Every partition that names one of `brokers` as leader or ISR member, in
/// (topic id, partition) order.
pub fn partitions_touching(
    image: &MetadataImage,
    brokers: &BTreeSet<BrokerId>,
) -> Vec<([u8; 16], i32)> {
    image
        .partitions()
        .filter(|(_, _, state)| {
            brokers.contains(&state.leader)
                || state.isr.iter().any(|broker| brokers.contains(broker))
        })
        .map(|(topic, partition, _)| (topic.topic_id, partition))
        .collect()
}

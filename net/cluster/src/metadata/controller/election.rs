//! Leader election: a partition's leader and ISR once some brokers can no
//! longer serve it, or when an operator asks (ElectLeaders).
//!
//! Kafka's rules (KRaft's `PartitionChangeBuilder.electLeader`):
//! - the leaving brokers leave the ISR;
//! - a clean candidate is a live member of the (shrunk) ISR, or, when no
//!   ISR member is live, a live eligible leader replica (KIP-966, see
//!   [`super::elr`]): either holds every committed record;
//! - [`Election::Online`]: a leader that is still a clean candidate stays
//!   leader; otherwise the new leader is the first clean candidate in
//!   replica order, and the ISR keeps only its live members (or is the new
//!   leader alone when it came from the ELR);
//! - [`Election::Unclean`]: as online, and when nobody may lead cleanly, the
//!   first live replica leads with an ISR of itself alone (what only the
//!   others had is lost). Automatic elections are unclean only when
//!   `unclean.leader.election.enable` is true for the topic; ElectLeaders
//!   UNCLEAN asks for it whatever the topic says;
//! - [`Election::Preferred`]: the first replica if it is a clean candidate;
//!   else a leader that is one stays; else the first clean candidate (a
//!   leaderless partition comes back online); never unclean;
//! - nobody: the partition has no leader, and its ISR is not emptied: the
//!   last members stay, so that the first of them to come back leads
//!   without losing anything.
//!
//! A leader change bumps the leader epoch (applying the record does it), so
//! a deposed leader's requests are fenced.

use std::collections::BTreeSet;

use crate::placement::BrokerId;

use super::super::image::{MetadataImage, PartitionState, TopicImage};
use super::super::record::{PartitionChangeRecord, NO_LEADER};
use super::elr::is_clean_candidate;
use super::ControllerConfig;

pub use super::elr::unclean_allowed;

/// Kafka's election types (`PartitionChangeBuilder.Election`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    /// The preferred (first) replica when it may lead cleanly.
    Preferred,
    /// Keep the partition online, cleanly.
    Online,
    /// Keep it online, uncleanly if nobody may lead cleanly.
    Unclean,
}

/// Who leads after an election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick {
    /// The current leader stays.
    Keep,
    /// A clean candidate (an ISR member, or an ELR member).
    Clean(BrokerId),
    /// A live replica out of the ISR and the ELR.
    Unclean(BrokerId),
    /// Nobody may lead.
    Nobody,
}

/// The change to partition `partition` of `topic` once the `leaving`
/// brokers can no longer serve it (fenced, shutting down, re-registering,
/// unregistered), with a leader elected if it has none, unclean only if the
/// topic allows it; `None` if nothing changes. With `leaving` empty this
/// elects a leader for a leaderless partition whose replicas came back.
pub fn elect_without(
    image: &MetadataImage,
    config: &ControllerConfig,
    topic: &TopicImage,
    partition: i32,
    leaving: &BTreeSet<BrokerId>,
) -> Option<PartitionChangeRecord> {
    let election = if unclean_allowed(image, topic, config) {
        Election::Unclean
    } else {
        Election::Online
    };
    elect(image, topic, partition, leaving, election)
}

/// The change an `election` of partition `partition` of `topic` makes once
/// the `leaving` brokers can no longer serve it; `None` if nothing changes.
/// The ELR fields are left to the proposal (see [`super::elr`]).
pub fn elect(
    image: &MetadataImage,
    topic: &TopicImage,
    partition: i32,
    leaving: &BTreeSet<BrokerId>,
    election: Election,
) -> Option<PartitionChangeRecord> {
    let state = topic.partitions.get(&partition)?;
    let usable = |broker: BrokerId| image.is_live(broker) && !leaving.contains(&broker);
    let shrunk_isr: Vec<BrokerId> = state
        .isr
        .iter()
        .copied()
        .filter(|broker| !leaving.contains(broker))
        .collect();
    let live_isr: Vec<BrokerId> = shrunk_isr
        .iter()
        .copied()
        .filter(|&broker| usable(broker))
        .collect();
    let clean = |broker: BrokerId| is_clean_candidate(state, &live_isr, broker, usable);
    let (leader, isr) = match pick(state, election, clean, usable) {
        Pick::Keep => (state.leader, shrunk_isr),
        // Kafka's OfflinePartitionLeaderElection: the new ISR is the live
        // part of the old one (members kept while the partition had no
        // leader may still be fenced).
        Pick::Clean(leader) if live_isr.contains(&leader) => (leader, live_isr),
        // From the ELR, or unclean: the ISR is the new leader alone.
        Pick::Clean(leader) | Pick::Unclean(leader) => (leader, vec![leader]),
        Pick::Nobody if shrunk_isr.is_empty() => (NO_LEADER, state.isr.clone()),
        Pick::Nobody => (NO_LEADER, shrunk_isr),
    };
    assert!(!isr.is_empty(), "an election emptied the ISR");
    assert!(leader == NO_LEADER || (isr.contains(&leader) && usable(leader)));
    let change = PartitionChangeRecord {
        topic_id: topic.topic_id,
        partition,
        leader: (leader != state.leader).then_some(leader),
        isr: (isr != state.isr).then_some(isr),
        replicas: None,
        eligible_leader_replicas: None,
        last_known_elr: None,
    };
    (change.leader.is_some() || change.isr.is_some()).then_some(change)
}

/// Who an `election` picks, by Kafka's order (see the module doc).
fn pick(
    state: &PartitionState,
    election: Election,
    clean: impl Fn(BrokerId) -> bool,
    usable: impl Fn(BrokerId) -> bool,
) -> Pick {
    let keep = state.leader != NO_LEADER && clean(state.leader);
    let first_clean = || first_in_replica_order(state, &clean).map(Pick::Clean);
    match election {
        Election::Preferred => {
            let preferred = state.replicas.first().copied().filter(|&b| clean(b));
            match preferred {
                Some(preferred) if preferred != state.leader => Pick::Clean(preferred),
                _ if keep => Pick::Keep,
                _ => first_clean().unwrap_or(Pick::Nobody),
            }
        }
        _ if keep => Pick::Keep,
        Election::Online => first_clean().unwrap_or(Pick::Nobody),
        Election::Unclean => first_clean()
            .or_else(|| first_in_replica_order(state, &usable).map(Pick::Unclean))
            .unwrap_or(Pick::Nobody),
    }
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

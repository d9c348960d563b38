//! Eligible leader replicas (KIP-966, on by default since Kafka 4.1), and
//! the topic settings the elections read.
//!
//! The guarantee: a leader's high watermark advances only while its ISR has
//! at least `min.insync.replicas` members (capped at the replica count:
//! `replication::LeaderState`'s strict rule, Kafka's since 3.9). So when an
//! ISR shrinks below that size, the members it loses held every record the
//! high watermark had counted — every acknowledged acks=all record — and
//! nothing is committed after them until the ISR grows back. Those members
//! become the partition's eligible leader replicas: when no ISR member can
//! lead, one of them may, cleanly. KRaft's rules
//! (`PartitionChangeBuilder.maybePopulateTargetElr`,
//! `maybeUpdateRecordElr`), applied to every partition change:
//!
//! - ISR at or above the (effective) minimum: the ELR is empty (the high
//!   watermark moves again, so an old ELR would fall behind it);
//! - below it: ELR = (ELR ∪ previous ISR) − new ISR;
//! - a member that rejoins the ISR (it caught up) leaves the ELR;
//! - an unclean election (a leader from neither the ISR nor the ELR)
//!   empties the ELR: the new leader's log is the history now;
//! - a change of `min.insync.replicas` empties the ELR (and the last known
//!   ELR) of the partitions it governs: a lower minimum lets the high
//!   watermark pass the ELR.
//!
//! The last known ELR is Kafka 4.1's (`useLastKnownLeaderInBalancedRecovery`,
//! `maybeUpdateLastKnownLeader`): the last leader of a partition that lost
//! every leader, kept until a leader is elected again — who to bring back
//! first, and what an operator weighs before an unclean election.
//!
//! Where rill differs from Kafka: Kafka empties the ISR into the ELR when
//! its last member fails, while rill keeps the last members of a leaderless
//! partition in its ISR (see [`super::election`]). Both say the same —
//! those replicas may lead cleanly — and ELR members are candidates only
//! when no ISR member can lead, as in Kafka. Kafka also drops a replica from
//! the ELR when its broker comes back from an unclean shutdown, because
//! Kafka does not fsync and the replica may have lost its tail. rill's
//! followers report only durable offsets under `flush.policy=fsync` (the
//! default), so a crash takes back nothing the high watermark counted; under
//! the `os` and `interval` policies a crash may, for an ELR member as for an
//! ISR member (rill's rule for both predates the ELR).

use crate::placement::BrokerId;

use super::super::image::{MetadataImage, PartitionState, TopicImage};
use super::super::record::{PartitionChangeRecord, NO_LEADER};
use super::ControllerConfig;

/// The topic config whose minimum governs the ELR (Kafka's name).
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

/// The topic config that lets an out-of-sync replica lead (Kafka's name).
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str =
    super::super::image::UNCLEAN_LEADER_ELECTION_ENABLE;

/// The value of topic config `key` in force: the topic's own, else the
/// cluster-wide dynamic default (`""` broker resource). `None`: neither
/// sets it (the controller's config file decides).
fn topic_setting<'a>(
    image: &'a MetadataImage,
    topic: &'a TopicImage,
    key: &str,
) -> Option<&'a str> {
    topic
        .configs
        .get(key)
        .or_else(|| image.broker_configs().get("")?.get(key))
        .map(String::as_str)
}

/// Whether `topic` allows unclean leader election: its own config, else
/// the cluster-wide dynamic default, else the config file's. Read at every
/// election, so a change takes effect at once.
pub fn unclean_allowed(
    image: &MetadataImage,
    topic: &TopicImage,
    config: &ControllerConfig,
) -> bool {
    match topic_setting(image, topic, UNCLEAN_LEADER_ELECTION_ENABLE) {
        Some(value) => value.trim().eq_ignore_ascii_case("true"),
        None => config.unclean_leader_election_enable,
    }
}

/// `min.insync.replicas` in force for `topic` (its own, else the
/// cluster-wide dynamic default, else the config file's), capped at
/// `replica_count` as Kafka's effective minimum is: a topic with fewer
/// replicas than the minimum would otherwise never advance.
pub fn effective_min_insync_replicas(
    image: &MetadataImage,
    config: &ControllerConfig,
    topic: &TopicImage,
    replica_count: usize,
) -> usize {
    let configured = topic_setting(image, topic, MIN_INSYNC_REPLICAS)
        .and_then(|value| value.trim().parse::<usize>().ok())
        .unwrap_or(config.min_insync_replicas);
    configured.clamp(1, replica_count.max(1))
}

/// `change` with its ELR fields set by KIP-966's rules (see the module
/// doc), unless the decision set them itself. A change to a partition the
/// image lacks is returned as it is: applying it fails where it is made.
pub fn complete_elr(
    image: &MetadataImage,
    config: &ControllerConfig,
    mut change: PartitionChangeRecord,
) -> PartitionChangeRecord {
    if change.eligible_leader_replicas.is_some() || change.last_known_elr.is_some() {
        return change;
    }
    let Some(topic) = image.topic(&change.topic_id) else {
        return change;
    };
    let Some(state) = topic.partitions.get(&change.partition) else {
        return change;
    };
    let replicas = change.replicas.as_deref().unwrap_or(&state.replicas);
    let isr = change.isr.as_deref().unwrap_or(&state.isr);
    let min_isr = effective_min_insync_replicas(image, config, topic, replicas.len());
    let elr = next_elr(state, replicas, isr, change.leader, min_isr);
    let last_known = next_last_known(state, replicas, &elr, change.leader);
    change.eligible_leader_replicas = (elr != state.eligible_leader_replicas).then_some(elr);
    change.last_known_elr = (last_known != state.last_known_elr).then_some(last_known);
    change
}

/// The ELR of a partition now `state` once its replicas are `replicas`,
/// its ISR `isr` and its leader `new_leader` (`None`: unchanged), with an
/// effective minimum ISR of `min_isr`; in replica order.
pub fn next_elr(
    state: &PartitionState,
    replicas: &[BrokerId],
    isr: &[BrokerId],
    new_leader: Option<BrokerId>,
    min_isr: usize,
) -> Vec<BrokerId> {
    let unclean = new_leader.is_some_and(|leader| {
        leader != NO_LEADER
            && !state.isr.contains(&leader)
            && !state.eligible_leader_replicas.contains(&leader)
    });
    if unclean || isr.len() >= min_isr {
        return Vec::new();
    }
    replicas
        .iter()
        .copied()
        .filter(|b| !isr.contains(b))
        .filter(|b| state.eligible_leader_replicas.contains(b) || state.isr.contains(b))
        .collect()
}

/// The last known ELR once the leader is `new_leader` (`None`: unchanged):
/// the leader a partition had when it lost every leader, until it has one
/// again (see the module doc); never one of `replicas`' ELR members.
fn next_last_known(
    state: &PartitionState,
    replicas: &[BrokerId],
    elr: &[BrokerId],
    new_leader: Option<BrokerId>,
) -> Vec<BrokerId> {
    let last_known = match new_leader.unwrap_or(state.leader) {
        NO_LEADER if state.leader != NO_LEADER => vec![state.leader],
        NO_LEADER => state.last_known_elr.clone(),
        _ => Vec::new(),
    };
    last_known
        .into_iter()
        .filter(|b| replicas.contains(b) && !elr.contains(b))
        .collect()
}

/// Whether `broker` may lead the partition cleanly once the `live_isr`
/// (its ISR members that can still serve) is known: an ISR member, or an
/// ELR member when no ISR member can lead (Kafka's `isValidNewLeader`).
/// `usable` says whether the broker can serve at all.
pub fn is_clean_candidate(
    state: &PartitionState,
    live_isr: &[BrokerId],
    broker: BrokerId,
    usable: impl Fn(BrokerId) -> bool,
) -> bool {
    usable(broker)
        && (live_isr.contains(&broker)
            || (live_isr.is_empty() && state.eligible_leader_replicas.contains(&broker)))
}

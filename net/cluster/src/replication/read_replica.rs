//! Fetch from the closest replica (KIP-392): which replica a consumer
//! should read a partition from, as the partition's leader decides it.
//!
//! A consumer that names its rack (`client.rack`, Fetch v11's `rack_id`)
//! and fetches from the leader is told, in `preferred_read_replica`, to
//! read from another replica when the broker's `replica.selector.class`
//! picks one; it then fetches there (a follower serves a v11+ consumer
//! fetch up to its own high watermark) until an error sends it back.
//!
//! Kafka's selectors, by their class names:
//! - none (the default) and `LeaderSelector`: always the leader;
//! - `RackAwareReplicaSelector`: the leader when it is in the client's
//!   rack or no replica is; otherwise, of the replicas in that rack, the
//!   one furthest ahead (largest log end), the most recently caught up
//!   first among equals. rill breaks a last tie by the lower broker id, so
//!   the answer does not depend on iteration order.
//!
//! Which replicas may be picked is the leader's part (Kafka's
//! `ReplicaManager.findPreferredReadReplica`): followers in the committed
//! ISR, alive, whose log holds the fetch offset (log start ≤ offset ≤ log
//! end). An ISR member is required since KAFKA-14379: a lagging follower
//! would be picked again after every metadata refresh and keep its
//! consumer behind for good.

use engine::types::Offset;

use super::ReplicaId;

/// Kafka's rack-aware selector's class name.
pub const RACK_AWARE_SELECTOR_CLASS: &str =
    "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// Kafka's leader-only selector's class name.
pub const LEADER_SELECTOR_CLASS: &str = "org.apache.kafka.common.replica.LeaderSelector";

/// `replica.selector.class`: how a leader picks a consumer's read replica.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReplicaSelector {
    /// No selector (Kafka's default) or `LeaderSelector`: consumers read
    /// from the leader, and are never redirected.
    #[default]
    Leader,
    /// `RackAwareReplicaSelector`: a replica in the consumer's rack.
    RackAware,
}

impl ReplicaSelector {
    /// The selector a `replica.selector.class` value names: a Kafka class
    /// name (or its simple name), or empty for none; `None` for a class
    /// rill does not have.
    pub fn from_class(class: &str) -> Option<ReplicaSelector> {
        let class = class.trim();
        let simple = class.rsplit('.').next().unwrap_or(class);
        match (class, simple) {
            ("", _) | ("null", _) => Some(ReplicaSelector::Leader),
            (_, "LeaderSelector") if is_kafka_class(class) => Some(ReplicaSelector::Leader),
            (_, "RackAwareReplicaSelector") if is_kafka_class(class) => {
                Some(ReplicaSelector::RackAware)
            }
            _ => None,
        }
    }
}

impl ReplicaSelector {
    /// The class name DescribeConfigs shows (`None`: Kafka's default, no
    /// selector).
    pub fn class_name(self) -> Option<&'static str> {
        match self {
            ReplicaSelector::Leader => None,
            ReplicaSelector::RackAware => Some(RACK_AWARE_SELECTOR_CLASS),
        }
    }
}

/// Whether `class` is a bare simple name or lives in Kafka's package.
fn is_kafka_class(class: &str) -> bool {
    !class.contains('.') || class.starts_with("org.apache.kafka.common.replica.")
}

/// A replica as the selector weighs it (Kafka's `ReplicaView`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadReplica {
    /// Broker id.
    pub id: ReplicaId,
    /// Its `broker.rack`.
    pub rack: Option<String>,
    /// Its log end offset as the leader knows it.
    pub log_end_offset: Offset,
    /// How long since it was last caught up (0 for the leader).
    pub since_caught_up_ms: i64,
}

/// The replica a consumer in `client_rack` should read from: `leader`, or
/// one of `followers` (the candidates the leader allows; see the module
/// doc).
pub fn select_read_replica(
    selector: ReplicaSelector,
    client_rack: &str,
    leader: &ReadReplica,
    followers: &[ReadReplica],
) -> ReplicaId {
    if selector == ReplicaSelector::Leader || client_rack.is_empty() {
        return leader.id;
    }
    let in_rack = |replica: &&ReadReplica| replica.rack.as_deref() == Some(client_rack);
    if in_rack(&leader) {
        return leader.id;
    }
    followers
        .iter()
        .filter(in_rack)
        .max_by(|a, b| {
            (a.log_end_offset.cmp(&b.log_end_offset))
                .then(b.since_caught_up_ms.cmp(&a.since_caught_up_ms))
                .then(b.id.cmp(&a.id))
        })
        .map_or(leader.id, |replica| replica.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(id: ReplicaId, rack: &str, log_end_offset: Offset, since: i64) -> ReadReplica {
        ReadReplica {
            id,
            rack: (!rack.is_empty()).then(|| rack.to_string()),
            log_end_offset,
            since_caught_up_ms: since,
        }
    }

    #[test]
    fn class_names_are_kafkas() {
        assert_eq!(
            ReplicaSelector::from_class(RACK_AWARE_SELECTOR_CLASS),
            Some(ReplicaSelector::RackAware)
        );
        assert_eq!(
            ReplicaSelector::from_class("RackAwareReplicaSelector"),
            Some(ReplicaSelector::RackAware)
        );
        assert_eq!(
            ReplicaSelector::from_class(LEADER_SELECTOR_CLASS),
            Some(ReplicaSelector::Leader)
        );
        assert_eq!(
            ReplicaSelector::from_class(""),
            Some(ReplicaSelector::Leader)
        );
        assert_eq!(ReplicaSelector::from_class("com.example.MySelector"), None);
        assert_eq!(
            ReplicaSelector::from_class("com.example.RackAwareReplicaSelector"),
            None,
            "a class of the same simple name elsewhere is not Kafka's"
        );
    }

    #[test]
    fn the_leader_serves_without_a_rack_or_a_selector() {
        let leader = replica(1, "a", 100, 0);
        let followers = [replica(2, "b", 100, 0)];
        let rack_aware = ReplicaSelector::RackAware;
        assert_eq!(select_read_replica(rack_aware, "", &leader, &followers), 1);
        let leader_only = ReplicaSelector::Leader;
        assert_eq!(
            select_read_replica(leader_only, "b", &leader, &followers),
            1
        );
    }

    #[test]
    fn a_replica_in_the_clients_rack_is_chosen_the_leader_first() {
        let selector = ReplicaSelector::RackAware;
        let leader = replica(1, "a", 100, 0);
        let followers = [replica(2, "b", 100, 0), replica(3, "a", 100, 0)];
        assert_eq!(select_read_replica(selector, "b", &leader, &followers), 2);
        assert_eq!(
            select_read_replica(selector, "a", &leader, &followers),
            1,
            "the leader is in the rack: it stays"
        );
        assert_eq!(
            select_read_replica(selector, "c", &leader, &followers),
            1,
            "no replica in the rack: the leader"
        );
        let rackless = replica(1, "", 100, 0);
        assert_eq!(select_read_replica(selector, "a", &rackless, &followers), 3);
    }

    #[test]
    fn the_furthest_ahead_then_the_latest_caught_up_wins() {
        let selector = ReplicaSelector::RackAware;
        let leader = replica(1, "a", 100, 0);
        let ahead = [replica(2, "b", 90, 0), replica(3, "b", 95, 500)];
        assert_eq!(select_read_replica(selector, "b", &leader, &ahead), 3);
        let even = [replica(2, "b", 95, 800), replica(3, "b", 95, 100)];
        assert_eq!(select_read_replica(selector, "b", &leader, &even), 3);
        let tied = [replica(3, "b", 95, 100), replica(2, "b", 95, 100)];
        assert_eq!(
            select_read_replica(selector, "b", &leader, &tied),
            2,
            "a full tie goes to the lower id"
        );
    }
}

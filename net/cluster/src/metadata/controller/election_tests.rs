//! Unit tests of the elections an operator or a config asks for:
//! ElectLeaders (preferred, unclean), the automatic rebalance's imbalance
//! threshold, `unclean.leader.election.enable` changed at runtime, and the
//! eligible leader replicas (KIP-966) entering, leaving and being elected.

use engine::ErrorCode;

use super::super::image::UNCLEAN_LEADER_ELECTION_ENABLE;
use super::super::record::{MetadataRecord, NO_LEADER};
use super::election::{elect, Election};
use super::elr::MIN_INSYNC_REPLICAS;
use super::leaders::over_threshold;
use super::tests::{three_brokers, Cluster};
use super::*;

/// ElectLeaders of `partitions` of topic `t`, committed; each partition's
/// error code.
fn elect_leaders(
    cluster: &mut Cluster,
    election: ElectionType,
    partitions: &[i32],
) -> Vec<ErrorCode> {
    let asked = [("t".to_owned(), partitions.to_vec())];
    let outcome = cluster.controller().elect_leaders(election, Some(&asked));
    cluster.commit(&outcome.records);
    assert_eq!(outcome.results.len(), 1);
    outcome.results[0].1.iter().map(|a| a.error_code).collect()
}

fn set_topic_config(cluster: &mut Cluster, key: &str, value: Option<&str>) -> Vec<MetadataRecord> {
    let records = cluster
        .controller()
        .alter_topic_config("t", key, value)
        .unwrap();
    cluster.commit(&records);
    records
}

/// A cluster whose topic `t` (one partition, replicas [0, 1], RF 2) has no
/// leader: the leader 0 dropped 1 from the ISR, then every broker but 1
/// was fenced, so only the out-of-sync 1 is alive.
fn leaderless_with_an_out_of_sync_survivor() -> Cluster {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 1, 2);
    cluster.alter(1, 0, vec![0]).unwrap();
    cluster.beat(1, 5_000).unwrap();
    cluster.fence_stale(9_000);
    let state = cluster.state(1, 0);
    assert_eq!((state.leader, state.isr.clone()), (NO_LEADER, vec![0]));
    assert!(cluster.image.is_live(1));
    cluster
}

#[test]
fn preferred_election_moves_leadership_back_and_answers_as_kafka() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 3);
    // Broker 0 restarts: it loses its leadership (partition 0 prefers it)
    // and every ISR place.
    cluster.start_broker(0, None, 100);
    let moved = cluster.state(1, 0);
    assert_eq!(moved.replicas[0], 0);
    assert_ne!(moved.leader, 0);
    let asked = [0, 1, 2, 7];
    // Not in the ISR yet: it cannot lead; the others lead already.
    assert_eq!(
        elect_leaders(&mut cluster, ElectionType::Preferred, &asked),
        [
            ErrorCode::PreferredLeaderNotAvailable,
            ErrorCode::ElectionNotNeeded,
            ErrorCode::ElectionNotNeeded,
            ErrorCode::UnknownTopicOrPartition
        ]
    );
    assert_eq!(cluster.state(1, 0), moved, "a refusal changes nothing");
    // The leader takes it back into the ISR: now it may lead.
    let mut isr = moved.isr.clone();
    isr.push(0);
    cluster.alter(1, 0, isr).unwrap();
    let before = cluster.state(1, 0);
    assert_eq!(
        elect_leaders(&mut cluster, ElectionType::Preferred, &asked[..3]),
        [
            ErrorCode::None,
            ErrorCode::ElectionNotNeeded,
            ErrorCode::ElectionNotNeeded
        ]
    );
    let after = cluster.state(1, 0);
    assert_eq!(after.leader, 0);
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    assert_eq!(after.isr, before.isr, "a preferred election keeps the ISR");
    // An unknown topic, and every partition (nothing left to elect: each
    // topic listed without partitions, as Kafka's controller answers).
    let unknown = [("nope".to_owned(), vec![0])];
    let outcome = cluster
        .controller()
        .elect_leaders(ElectionType::Preferred, Some(&unknown));
    assert_eq!(
        outcome.results[0].1[0].error_code,
        ErrorCode::UnknownTopicOrPartition
    );
    let all = cluster
        .controller()
        .elect_leaders(ElectionType::Preferred, None);
    assert!(all.records.is_empty());
    assert_eq!(all.results, vec![("t".to_owned(), Vec::new())]);
}

#[test]
fn every_partition_at_once_lists_only_those_that_needed_an_election() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 3, 3);
    cluster.start_broker(0, None, 100);
    let mut isr = cluster.state(1, 0).isr;
    isr.push(0);
    cluster.alter(1, 0, isr).unwrap();
    let outcome = cluster
        .controller()
        .elect_leaders(ElectionType::Preferred, None);
    cluster.commit(&outcome.records);
    let listed: Vec<(i32, ErrorCode)> = outcome.results[0]
        .1
        .iter()
        .map(|a| (a.partition, a.error_code))
        .collect();
    assert_eq!(listed, vec![(0, ErrorCode::None)]);
    assert_eq!(cluster.state(1, 0).leader, 0);
}

#[test]
fn unclean_election_elects_an_out_of_sync_replica_whatever_the_topic_says() {
    let mut cluster = leaderless_with_an_out_of_sync_survivor();
    set_topic_config(&mut cluster, UNCLEAN_LEADER_ELECTION_ENABLE, Some("false"));
    let before = cluster.state(1, 0);
    // A preferred election never goes unclean.
    assert_eq!(
        elect_leaders(&mut cluster, ElectionType::Preferred, &[0]),
        [ErrorCode::PreferredLeaderNotAvailable]
    );
    assert_eq!(
        elect_leaders(&mut cluster, ElectionType::Unclean, &[0]),
        [ErrorCode::None]
    );
    let state = cluster.state(1, 0);
    assert_eq!((state.leader, state.isr.clone()), (1, vec![1]));
    assert_eq!(state.leader_epoch, before.leader_epoch + 1);
    assert!(state.last_known_elr.is_empty(), "it has a leader again");
    // The topic's flag is untouched, and a partition with a leader needs
    // no election.
    let topic = cluster.image.topic_by_name("t").unwrap();
    assert_eq!(topic.unclean_leader_election(), Some(false));
    assert_eq!(
        elect_leaders(&mut cluster, ElectionType::Unclean, &[0]),
        [ErrorCode::ElectionNotNeeded]
    );
}

#[test]
fn unclean_election_with_nobody_alive_finds_no_eligible_leader() {
    let mut cluster = leaderless_with_an_out_of_sync_survivor();
    cluster.fence_stale(20_000);
    assert!(!cluster.image.is_live(1));
    assert_eq!(
        elect_leaders(&mut cluster, ElectionType::Unclean, &[0]),
        [ErrorCode::EligibleLeadersNotAvailable]
    );
    assert_eq!(cluster.state(1, 0).leader, NO_LEADER);
}

#[test]
fn turning_unclean_election_on_elects_leaderless_partitions_at_once() {
    let mut cluster = leaderless_with_an_out_of_sync_survivor();
    let state = cluster.state(1, 0);
    assert_eq!(state.last_known_elr, vec![0], "the last leader");
    // Turned off, or on elsewhere: nothing to elect.
    let off = set_topic_config(&mut cluster, UNCLEAN_LEADER_ELECTION_ENABLE, Some("false"));
    assert_eq!(off.len(), 1, "the config record alone");
    assert_eq!(cluster.state(1, 0).leader, NO_LEADER);
    let on = set_topic_config(&mut cluster, UNCLEAN_LEADER_ELECTION_ENABLE, Some("true"));
    assert_eq!(on.len(), 2, "the config and the election, in one decision");
    let state = cluster.state(1, 0);
    assert_eq!((state.leader, state.isr), (1, vec![1]));
}

#[test]
fn the_cluster_wide_unclean_default_elects_where_the_topic_does_not_override_it() {
    for (topic_value, expected_leader) in [(None, 1), (Some("false"), NO_LEADER)] {
        let mut cluster = leaderless_with_an_out_of_sync_survivor();
        if let Some(value) = topic_value {
            set_topic_config(&mut cluster, UNCLEAN_LEADER_ELECTION_ENABLE, Some(value));
        }
        let records = cluster
            .controller()
            .alter_broker_config("", UNCLEAN_LEADER_ELECTION_ENABLE, Some("true"))
            .unwrap();
        cluster.commit(&records);
        assert_eq!(
            cluster.state(1, 0).leader,
            expected_leader,
            "{topic_value:?}"
        );
    }
    // One broker's value would be obeyed by nobody: refused.
    let cluster = leaderless_with_an_out_of_sync_survivor();
    for key in [UNCLEAN_LEADER_ELECTION_ENABLE, MIN_INSYNC_REPLICAS] {
        let refused = cluster
            .controller()
            .alter_broker_config("1", key, Some("true"));
        assert_eq!(
            refused.unwrap_err().error_code(),
            ErrorCode::InvalidConfig,
            "{key}"
        );
    }
}

#[test]
fn the_imbalance_threshold_is_kafkas_ratio_strictly_above_the_percentage() {
    assert!(!over_threshold(1, 10, 10), "exactly 10 % is not above 10 %");
    assert!(over_threshold(2, 10, 10));
    assert!(!over_threshold(0, 0, 0), "a broker preferred by nothing");
    assert!(over_threshold(1, 1000, 0), "0: any imbalance");
    assert!(!over_threshold(1000, 1000, 100), "100: never");
}

#[test]
fn the_rebalance_moves_a_brokers_partitions_only_above_its_threshold() {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 9, 3);
    let prefers_0: Vec<i32> = (0..9)
        .filter(|&p| cluster.state(1, p).replicas[0] == 0)
        .collect();
    assert_eq!(prefers_0.len(), 3);
    // Broker 0 restarts (its leaderships move away) and rejoins every ISR.
    cluster.start_broker(0, None, 100);
    for partition in 0..9 {
        let mut isr = cluster.state(1, partition).isr;
        if !isr.contains(&0) {
            isr.push(0);
            cluster.alter(1, partition, isr).unwrap();
        }
    }
    // One of its three moved back by hand: 2 of 3 (67 %) led elsewhere.
    elect_leaders(&mut cluster, ElectionType::Preferred, &prefers_0[..1]);
    cluster.config.leader_imbalance_per_broker_percentage = 70;
    assert!(cluster.controller().auto_leader_rebalance().is_empty());
    cluster.config.leader_imbalance_per_broker_percentage = 60;
    let moves = cluster.controller().auto_leader_rebalance();
    assert_eq!(moves.len(), 2);
    cluster.commit(&moves);
    for &partition in &prefers_0 {
        assert_eq!(cluster.state(1, partition).leader, 0);
    }
    for partition in 0..9 {
        let state = cluster.state(1, partition);
        assert_eq!(state.leader, state.replicas[0], "{partition}");
    }
}

/// Topic `t` with one partition on [0, 1, 2] (led by 0) and
/// `min.insync.replicas=2`.
fn guarded_partition() -> Cluster {
    let mut cluster = three_brokers();
    cluster.create("t", 1, 1, 3);
    set_topic_config(&mut cluster, MIN_INSYNC_REPLICAS, Some("2"));
    assert_eq!(cluster.state(1, 0).replicas, vec![0, 1, 2]);
    cluster
}

#[test]
fn replicas_leaving_an_isr_under_the_minimum_become_eligible_leaders() {
    let mut cluster = guarded_partition();
    // Down to the minimum: 2 had better not lead (the HW may pass it).
    cluster.alter(1, 0, vec![0, 1]).unwrap();
    assert!(cluster.state(1, 0).eligible_leader_replicas.is_empty());
    // Under it: 1 holds everything committed, since the HW stops now.
    cluster.alter(1, 0, vec![0]).unwrap();
    let state = cluster.state(1, 0);
    assert_eq!(state.eligible_leader_replicas, vec![1]);
    assert!(state.last_known_elr.is_empty());
    // 2 catches up and rejoins: the minimum holds again, the ELR empties.
    cluster.alter(1, 0, vec![0, 2]).unwrap();
    assert!(cluster.state(1, 0).eligible_leader_replicas.is_empty());
    // 2 leaves again: only it was in the ISR with the leader.
    cluster.alter(1, 0, vec![0]).unwrap();
    assert_eq!(cluster.state(1, 0).eligible_leader_replicas, vec![2]);
    // A new minimum empties the ELR (a lower one lets the HW pass it).
    let records = set_topic_config(&mut cluster, MIN_INSYNC_REPLICAS, Some("3"));
    assert_eq!(records.len(), 2);
    assert!(cluster.state(1, 0).eligible_leader_replicas.is_empty());
}

#[test]
fn the_cluster_minimum_is_written_once_and_keeps_the_elr() {
    let mut cluster = guarded_partition();
    cluster.alter(1, 0, vec![0, 1]).unwrap();
    cluster.alter(1, 0, vec![0]).unwrap();
    assert_eq!(cluster.state(1, 0).eligible_leader_replicas, vec![1]);
    let records = cluster.controller().cluster_min_insync_replicas();
    let configured = cluster.controller().config.min_insync_replicas.to_string();
    assert_eq!(
        records,
        vec![MetadataRecord::BrokerConfigChange {
            broker: String::new(),
            key: MIN_INSYNC_REPLICAS.to_owned(),
            value: Some(configured.clone()),
        }]
    );
    cluster.commit(&records);
    let cluster_wide = cluster.image.broker_configs()[""][MIN_INSYNC_REPLICAS].clone();
    assert_eq!(cluster_wide, configured);
    // The minimum in force did not change: the ELR stays.
    assert_eq!(cluster.state(1, 0).eligible_leader_replicas, vec![1]);
    assert!(cluster
        .controller()
        .cluster_min_insync_replicas()
        .is_empty());
}

/// A guarded partition whose ISR shrank to the leader 0 with 1 eligible,
/// then 1 and 2 and finally 0 fenced: leaderless, the last leader kept in
/// the ISR, 1 in the ELR.
fn leaderless_with_an_eligible_replica() -> Cluster {
    let mut cluster = guarded_partition();
    cluster.alter(1, 0, vec![0, 1]).unwrap();
    cluster.alter(1, 0, vec![0]).unwrap();
    cluster.beat(0, 5_000).unwrap();
    cluster.fence_stale(9_000);
    cluster.fence_stale(20_000);
    assert!((0..3).all(|b| !cluster.image.is_live(b)));
    let state = cluster.state(1, 0);
    assert_eq!(state.leader, NO_LEADER);
    assert_eq!(state.isr, vec![0]);
    assert_eq!(state.eligible_leader_replicas, vec![1]);
    assert_eq!(state.last_known_elr, vec![0]);
    cluster
}

#[test]
fn an_eligible_replica_leads_cleanly_when_no_isr_member_can() {
    let mut cluster = leaderless_with_an_eligible_replica();
    // 2 comes back first: out of the ISR and the ELR, it may not lead.
    cluster.start_broker(2, None, 21_000);
    assert_eq!(cluster.state(1, 0).leader, NO_LEADER);
    // 1 comes back: elected from the ELR, no unclean election needed.
    cluster.start_broker(1, None, 21_100);
    let state = cluster.state(1, 0);
    assert_eq!(state.leader, 1);
    assert_eq!(state.isr, vec![1]);
    assert_eq!(
        state.eligible_leader_replicas,
        vec![0],
        "the old ISR member"
    );
    assert!(state.last_known_elr.is_empty());
    // 0 returns and catches up: back in the ISR, out of the ELR.
    cluster.start_broker(0, None, 21_200);
    cluster.alter(1, 0, vec![1, 0]).unwrap();
    let state = cluster.state(1, 0);
    assert!(state.eligible_leader_replicas.is_empty());
    assert_eq!(state.isr, vec![1, 0]);
}

#[test]
fn unclean_election_comes_only_after_the_isr_and_the_elr_and_empties_the_elr() {
    let mut cluster = leaderless_with_an_eligible_replica();
    set_topic_config(&mut cluster, UNCLEAN_LEADER_ELECTION_ENABLE, Some("true"));
    // 2 alone alive: nobody clean, so unclean.
    cluster.start_broker(2, None, 21_000);
    let state = cluster.state(1, 0);
    assert_eq!((state.leader, state.isr.clone()), (2, vec![2]));
    assert!(state.eligible_leader_replicas.is_empty());
    assert!(state.last_known_elr.is_empty());
}

#[test]
fn every_election_type_takes_an_eligible_replica_before_anyone_unclean() {
    let mut cluster = leaderless_with_an_eligible_replica();
    // 1 (eligible) and 2 (out of sync) alive at once, with no election
    // between: unfenced by records, as a controller restart could leave it.
    for broker in [1, 2] {
        let broker_epoch = cluster.image.broker(broker).unwrap().broker_epoch;
        cluster.commit(&[MetadataRecord::UnfenceBroker {
            broker_id: broker,
            broker_epoch,
        }]);
    }
    let topic = cluster.image.topic_by_name("t").unwrap();
    let none = std::collections::BTreeSet::new();
    for kind in [Election::Online, Election::Unclean, Election::Preferred] {
        let change = elect(&cluster.image, topic, 0, &none, kind).unwrap();
        assert_eq!(change.leader, Some(1), "{kind:?}");
        assert_eq!(change.isr, Some(vec![1]), "{kind:?}");
    }
    // Proposed: a clean election, so the old ISR member becomes eligible.
    let outcome = cluster
        .controller()
        .elect_leaders(ElectionType::Unclean, Some(&[("t".to_owned(), vec![0])]));
    cluster.commit(&outcome.records);
    let state = cluster.state(1, 0);
    assert_eq!(state.leader, 1);
    assert_eq!(state.eligible_leader_replicas, vec![0]);
}

//! The simulation in CI: many seeds under the correct rules must pass, and
//! the same simulation with a rule broken on purpose must fail — otherwise
//! the auditor could be checking nothing.
//!
//! Longer runs: `RILL_REPLICATION_SIM_SEEDS=5000 RILL_REPLICATION_SIM_STEPS=10000
//! cargo test -p rill-cluster --release many_seeds` (a failure prints its seed;
//! `simulate(seed, steps)` replays it).

use super::*;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn many_seeds_keep_every_rule() {
    let seeds = env_or("RILL_REPLICATION_SIM_SEEDS", 200);
    let steps = env_or("RILL_REPLICATION_SIM_STEPS", 2_000);
    let mut total = SimStats::default();
    for seed in 0..seeds {
        let stats = match simulate(seed, steps) {
            Ok(stats) => stats,
            Err(violation) => panic!("{violation} (replay: simulate({seed}, {steps}))"),
        };
        assert_eq!(stats.steps, steps);
        total.steps += stats.steps;
        total.records_produced += stats.records_produced;
        total.produces_abandoned += stats.produces_abandoned;
        total.messages_delivered += stats.messages_delivered;
        total.messages_dropped += stats.messages_dropped;
        total.records_acked += stats.records_acked;
        total.produces_refused += stats.produces_refused;
        total.elections += stats.elections;
        total.isr_shrinks += stats.isr_shrinks;
        total.isr_expands += stats.isr_expands;
        total.crashes += stats.crashes;
        total.truncations += stats.truncations;
        total.messages_duplicated += stats.messages_duplicated;
        total.committed_records += stats.committed_records;
    }
    // The runs must have exercised what the rules are about.
    println!("{total:?}");
    assert!(total.records_acked > seeds * 10, "{total:?}");
    assert!(total.elections > seeds, "{total:?}");
    assert!(total.isr_shrinks > seeds, "{total:?}");
    assert!(total.isr_expands > seeds, "{total:?}");
    assert!(total.truncations > seeds, "{total:?}");
    assert!(total.produces_refused > 0, "{total:?}");
    assert!(total.messages_duplicated > 0, "{total:?}");
}

#[test]
fn a_seed_replays_exactly() {
    assert_eq!(simulate(42, 1_500), simulate(42, 1_500));
    assert_ne!(simulate(42, 1_500), simulate(43, 1_500));
}

/// The first violation among `seeds` seeds of `config`.
fn first_violation(config: &SimConfig, seeds: u64) -> Option<Violation> {
    (0..seeds).find_map(|seed| simulate_with(config, seed, 2_000).err())
}

fn is_data_loss(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::AckedRecordMissingFromIsr
            | Rule::AckedRecordNotCommitted
            | Rule::CommittedPrefixDiverged
            | Rule::ReplicaDisagreesBelowHighWatermark
    )
}

#[test]
fn auditor_catches_a_controller_that_elects_out_of_sync_replicas() {
    let config = SimConfig {
        election: ElectionRule::OutOfSyncFirst,
        ..SimConfig::default()
    };
    let violation = first_violation(&config, 200).expect("the broken controller must be caught");
    println!("caught as expected: {violation}");
    assert!(is_data_loss(violation.rule), "{violation}");
    // It reproduces from its seed.
    assert_eq!(
        simulate_with(&config, violation.seed, 2_000).err(),
        Some(violation)
    );
}

#[test]
fn auditor_catches_followers_that_report_unsynced_offsets() {
    let config = SimConfig {
        follower_fsync_before_fetch: false,
        ..SimConfig::default()
    };
    let violation =
        first_violation(&config, 200).expect("unsynced follower offsets must be caught");
    println!("caught as expected: {violation}");
    assert!(is_data_loss(violation.rule), "{violation}");
}

#[test]
fn unclean_election_can_lose_acknowledged_records() {
    let config = SimConfig {
        election: ElectionRule::Unclean,
        ..SimConfig::default()
    };
    let violation = first_violation(&config, 200).expect("unclean election loses data somewhere");
    println!("caught as expected: {violation}");
    assert!(is_data_loss(violation.rule), "{violation}");
}

//! [`SimConfig`]: the simulated cluster's settings, including the switches
//! that break a rule on purpose so the tests can see the auditor fail.

use super::controller::ElectionRule;
use crate::replication::LeaderConfig;

/// The simulated cluster's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Replicas of the partition (brokers 0..replicas).
    pub replicas: usize,
    /// `min.insync.replicas` and `replica.lag.time.max.ms`.
    pub leader: LeaderConfig,
    /// Who the controller may elect.
    pub election: ElectionRule,
    /// The minimum ISR the controller keeps eligible leader replicas for
    /// (KIP-966); `None`: no ELR. rill's controller uses the topic's
    /// `min.insync.replicas`, the leaders' `leader.min_insync_replicas`; a
    /// larger value breaks the rule on purpose: leaders then commit with
    /// fewer in-sync members than the ELR counts on.
    pub eligible_leader_replicas: Option<usize>,
    /// Followers fsync before they report a fetch offset (the rule the HW's
    /// durability depends on); `false` breaks it on purpose.
    pub follower_fsync_before_fetch: bool,
    /// Leaders wait for the controller to commit an ISR change (the HW uses
    /// the maximal ISR meanwhile); `true` breaks that on purpose: a leader
    /// applies its own proposal at once.
    pub leader_applies_isr_before_commit: bool,
    /// Bound on messages in flight.
    pub max_in_flight: usize,
    /// Records per fetch answer.
    pub max_entries_per_fetch: usize,
    /// Largest time step, in milliseconds.
    pub max_time_step_ms: u64,
    /// Transactional clients (producers).
    pub producers: usize,
    /// `transaction.timeout.ms`: a coordinator aborts a transaction open
    /// longer than this.
    pub txn_timeout_ms: i64,
    /// `true` brings back the coordinator before issue #30's fix on
    /// purpose: it appends to its local log (as a follower too, with the
    /// epoch it loaded in) and acts at once, and keeps its role after
    /// losing leadership.
    pub coordinator_writes_locally: bool,
    /// `true` reverts one part of that fix on purpose: a coordinator loads
    /// as soon as its broker leads, before the records of earlier epochs
    /// are committed (it replays what its HW covers).
    pub coordinator_loads_early: bool,
    /// A new producer epoch for every transaction (KIP-890), so a late
    /// marker of a producer's previous transaction is refused by the data
    /// partition's producer-epoch check. `false` is rill today, where the
    /// epoch moves only when a transaction times out: then a marker that
    /// an old coordinator re-sent for a transaction completed meanwhile can
    /// end the next one (see the test
    /// `todays_code_lets_a_late_marker_end_the_next_transaction`).
    pub producer_epoch_per_transaction: bool,
    /// `true` breaks the data partitions' fence on purpose: they accept a
    /// marker from an older coordinator epoch than one they have seen.
    pub markers_unfenced: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            replicas: 3,
            leader: LeaderConfig {
                min_insync_replicas: 2,
                replica_lag_time_max_ms: 300,
            },
            election: ElectionRule::Clean,
            eligible_leader_replicas: Some(2),
            follower_fsync_before_fetch: true,
            leader_applies_isr_before_commit: false,
            max_in_flight: 64,
            max_entries_per_fetch: 4,
            max_time_step_ms: 10,
            producers: 3,
            txn_timeout_ms: 1_000,
            coordinator_writes_locally: false,
            coordinator_loads_early: false,
            producer_epoch_per_transaction: false,
            markers_unfenced: false,
        }
    }
}

//! A seeded simulation of one partition replicated on three brokers, with an
//! auditor of Kafka's safety rules (issue #18's replication half of the
//! simulation; TigerBeetle's VOPR is the model).
//!
//! Each step the scheduler, driven only by the seed, does one thing:
//! delivers a message in flight (any one: delay and reordering), drops or
//! duplicates one, has a follower fetch, a client produce with acks=all, a
//! replica fsync, a leader run its ISR check, a replica read the committed
//! metadata, a replica crash (losing its unsynced tail) or restart, a link
//! between two endpoints be cut or healed, or the controller fence an
//! unreachable broker or unfence a reachable one. Time advances by a random
//! few milliseconds per step, and now and then jumps ahead, so followers
//! fall out of the ISR and rejoin.
//!
//! The partition is also a `__transaction_state` partition (issue #30).
//! Each broker runs a transaction coordinator; transactional clients begin
//! transactions, write to three data partitions and ask to commit or abort;
//! coordinators time transactions out and send markers. So the steps also
//! include a client request, a coordinator's timer, a marker delivered (any
//! one in flight) and a link between a broker and a data partition cut or
//! healed — a marker waits while its link is cut, which is how one arrives
//! after its coordinator lost its lease. Coordinators load, act on what the
//! HW passed and unload after every step. A stale coordinator (its broker
//! has not yet learned it lost leadership) keeps writing: the model shows
//! its writes never count.
//!
//! After every step the auditor checks the rules; the first violation stops
//! the run and names the seed and the step, so `simulate(seed, steps)`
//! reproduces it. The replication logic under test is the real one
//! ([`LeaderState`](crate::replication::LeaderState),
//! [`LeaderEpochCache`](crate::replication::LeaderEpochCache),
//! [`truncation_offset`](crate::replication::truncation_offset),
//! [`diverging_epoch`](crate::replication::diverging_epoch)).
//!
//! Map of the modules: `world` (the scheduler), `node` (a replica: a thin
//! runtime around the cores), `controller` (a minimal KRaft controller:
//! fencing, elections, AlterPartition), `network` (messages and cut links),
//! `coordinator` (a transaction coordinator under a leadership lease),
//! `txn` (transaction records, markers, data partitions), `auditor` (the
//! rules, transactions' included: none torn, leader epochs monotonic per
//! replica), `rng` (SplitMix64).
//!
//! Faults a correct cluster survives are always on. Rules a correct cluster
//! keeps can be broken through [`SimConfig`] (`election`,
//! `follower_fsync_before_fetch`, `leader_applies_isr_before_commit`,
//! `coordinator_writes_locally` — the coordinator before issue #30's fix —
//! `coordinator_loads_early` and `markers_unfenced`); the tests break each and check the auditor
//! reports it, so the auditor is known to be able to fail.

mod auditor;
mod controller;
mod coordinator;
mod network;
mod node;
mod rng;
#[cfg(test)]
mod tests;
mod txn;
mod world;

pub use controller::ElectionRule;

use self::world::World;
use super::LeaderConfig;

/// The simulated cluster's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Replicas of the partition (brokers 0..replicas).
    pub replicas: usize,
    /// `min.insync.replicas` and `replica.lag.time.max.ms`.
    pub leader: LeaderConfig,
    /// Who the controller may elect.
    pub election: ElectionRule,
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

/// What a run did (to see that a run exercised something).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Steps run.
    pub steps: u64,
    /// Records appended by a leader.
    pub records_produced: u64,
    /// Records acknowledged under acks=all.
    pub records_acked: u64,
    /// Produces refused with `NOT_ENOUGH_REPLICAS`.
    pub produces_refused: u64,
    /// Produces whose leader lost its leadership before acknowledging.
    pub produces_abandoned: u64,
    /// Leaders elected after the first.
    pub elections: u64,
    /// ISR shrinks the controller committed.
    pub isr_shrinks: u64,
    /// ISR expansions the controller committed.
    pub isr_expands: u64,
    /// Crashes.
    pub crashes: u64,
    /// Truncations that removed records (reconciliation and crashes).
    pub truncations: u64,
    /// Messages delivered, dropped (including by cut links and crashes)
    /// and duplicated.
    pub messages_delivered: u64,
    /// See `messages_delivered`.
    pub messages_dropped: u64,
    /// See `messages_delivered`.
    pub messages_duplicated: u64,
    /// The committed log's final length (the highest HW reached).
    pub committed_records: u64,
    /// Transactions opened (the client was answered).
    pub transactions_begun: u64,
    /// Commit decisions a coordinator acted on (PrepareCommit passed by
    /// the HW; a coordinator that completes one after a move does not
    /// count it again).
    pub transactions_committed: u64,
    /// Abort decisions a coordinator acted on, timeouts included.
    pub transactions_aborted: u64,
    /// Of `transactions_aborted`, those the coordinator's timer took.
    pub transactions_timed_out: u64,
    /// Coordinator loads (the first, and one per leadership move).
    pub coordinator_loads: u64,
    /// Coordinator writes dropped when the lease was lost before the HW
    /// passed them: a stale coordinator wrote and did not act.
    pub coordinator_writes_abandoned: u64,
    /// Markers a data partition accepted.
    pub markers_accepted: u64,
    /// Markers a data partition refused: an older coordinator epoch.
    pub markers_refused: u64,
    /// Markers lost to a full network (the transaction waits for the next
    /// coordinator).
    pub markers_dropped: u64,
}

/// Which safety rule broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Two replicas led the same leader epoch.
    TwoLeadersInOneEpoch,
    /// A leader's HW moved back.
    HighWatermarkBackwards,
    /// A leader's log below its HW differs from what was committed before.
    CommittedPrefixDiverged,
    /// A replica's log below its own HW differs from the committed log.
    ReplicaDisagreesBelowHighWatermark,
    /// An acknowledged record is not in the committed log.
    AckedRecordNotCommitted,
    /// An ISR member lacks an acknowledged record.
    AckedRecordMissingFromIsr,
    /// A replication core refused an input a correct cluster never sends.
    CoreRefused,
    /// A transaction's data partitions ended it with different markers, a
    /// marker contradicts the decision in the committed transaction log,
    /// the log holds two decisions for it, or a partition still has it
    /// open after its completion was committed.
    TornTransaction,
    /// A replica's log holds a record of a lower leader epoch after one of
    /// a higher epoch.
    LeaderEpochBackwards,
}

/// A broken rule: the seed and step reproduce it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("replication simulation seed {seed}, step {step}: {rule:?}: {detail}")]
pub struct Violation {
    /// The seed of the run.
    pub seed: u64,
    /// The step after which the auditor found it (0-based).
    pub step: u64,
    /// The rule.
    pub rule: Rule,
    /// What the auditor saw.
    pub detail: String,
}

/// Runs `steps` steps of the default simulation from `seed`.
pub fn simulate(seed: u64, steps: u64) -> Result<SimStats, Violation> {
    simulate_with(&SimConfig::default(), seed, steps)
}

/// Runs `steps` steps of the simulation with `config` from `seed`.
pub fn simulate_with(config: &SimConfig, seed: u64, steps: u64) -> Result<SimStats, Violation> {
    let mut world = World::new(*config, seed);
    for step in 0..steps {
        let outcome = world.step().and_then(|()| world.audit());
        if let Err((rule, detail)) = outcome {
            return Err(Violation {
                seed,
                step,
                rule,
                detail,
            });
        }
        world.count_step();
    }
    Ok(world.final_stats())
}

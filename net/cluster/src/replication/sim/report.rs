//! What a run reports: [`SimStats`] when it passes, a [`Violation`] of a
//! [`Rule`] when the auditor stops it.

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
    /// Of those, leaders taken from the eligible leader replicas (KIP-966).
    pub elections_from_elr: u64,
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

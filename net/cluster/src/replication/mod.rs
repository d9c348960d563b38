//! The replication core (issue #18, items 4 and 5): what a partition's
//! leader and its followers decide, as pure code with no I/O.
//!
//! Kafka's data replication is pull-based: followers send Fetch requests with
//! their replica id, the leader learns each follower's log end offset (LEO)
//! from the offset it fetches at, and the high watermark (HW) is the smallest
//! LEO of the in-sync replicas (ISR). This module holds the decisions of that
//! protocol so that a runtime (the shard that owns the partition) only does
//! the I/O, and so that [`sim`] can drive three replicas through crashes and a
//! faulty network and check that nothing acknowledged is lost.
//!
//! Map of the modules:
//! - [`leader`]: [`LeaderState`], one partition's leader view: follower
//!   LEOs, ISR with its pending AlterPartition, the HW (held still under
//!   `min.insync.replicas`, which makes the controller's eligible leader
//!   replicas safe) and the acks=all completion test.
//! - [`epoch_cache`]: [`LeaderEpochCache`], Kafka's `leader-epoch-checkpoint`
//!   (epoch → start offset), the OffsetForLeaderEpoch answer, and the
//!   checkpoint's text format.
//! - [`read_replica`]: which replica a consumer reads from (KIP-392's
//!   `replica.selector.class`).
//! - [`truncation`]: where a follower truncates (KIP-101, KIP-279) and the
//!   leader's Fetch v12+ diverging-epoch check (KIP-595's `diverging_epoch`).
//! - [`sim`]: a seeded simulation of one partition on three replicas with an
//!   auditor of Kafka's safety rules.
//!
//! Where this runs: a [`LeaderState`] and a [`LeaderEpochCache`] are
//! shard-local, owned by the shard that owns the partition; nothing here is
//! shared across threads.

pub mod epoch_cache;
pub mod leader;
pub mod read_replica;
pub mod sim;
pub mod truncation;

pub use epoch_cache::{
    CheckpointError, EpochEndOffset, EpochEntry, LeaderEpochCache, UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
};
pub use leader::{
    AlterPartition, AlterPartitionRejection, FollowerView, IsrChangeKind, LeaderConfig, LeaderInit,
    LeaderState,
};
pub use read_replica::{select_read_replica, ReadReplica, ReplicaSelector};
pub use sim::{simulate, simulate_with, ElectionRule, Rule, SimConfig, SimStats, Violation};
pub use truncation::{
    diverging_epoch, diverging_epoch_from_wire, diverging_epoch_of_answer,
    last_fetched_epoch_from_wire, truncation_offset, TruncationPoint,
};

use engine::types::{LeaderEpoch, Offset};
use engine::ErrorCode;

/// A broker id as a partition's replica list names it (Kafka's `int32`
/// broker ids).
pub type ReplicaId = i32;

/// The `acks` of a Produce request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: the producer waits for nothing.
    None,
    /// `acks=1`: the leader's own append is enough.
    Leader,
    /// `acks=all` (`-1`): the ISR must have the record (the HW passes it).
    All,
}

impl Acks {
    /// Kafka's wire value: `0`, `1` or `-1`; anything else is
    /// `INVALID_REQUIRED_ACKS`.
    pub fn from_wire(acks: i16) -> Result<Acks, ReplicationError> {
        match acks {
            0 => Ok(Acks::None),
            1 => Ok(Acks::Leader),
            -1 => Ok(Acks::All),
            other => Err(ReplicationError::InvalidRequiredAcks { acks: other }),
        }
    }
}

/// What the replication core refuses. These are operating errors (a client
/// or a peer sent something this state cannot accept); broken invariants are
/// assertions instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicationError {
    /// acks=all with fewer in-sync replicas than `min.insync.replicas`:
    /// Kafka's `NOT_ENOUGH_REPLICAS` (code 19).
    #[error("NOT_ENOUGH_REPLICAS: the ISR has {isr_size} replicas, min.insync.replicas is {min_insync_replicas}")]
    NotEnoughReplicas {
        /// The size of the committed ISR.
        isr_size: usize,
        /// The partition's `min.insync.replicas`.
        min_insync_replicas: usize,
    },
    /// An `acks` value other than 0, 1 and -1 (`INVALID_REQUIRED_ACKS`).
    #[error("INVALID_REQUIRED_ACKS: acks={acks}")]
    InvalidRequiredAcks {
        /// The value the request carried.
        acks: i16,
    },
    /// A fetch with a replica id that is not one of the partition's
    /// followers (Kafka's `followerReplicaOrThrow` answers
    /// `NOT_LEADER_OR_FOLLOWER`).
    #[error("replica {replica} is not a follower of this partition")]
    NotAFollower {
        /// The replica id of the fetch.
        replica: ReplicaId,
    },
    /// A follower fetched past the leader's log end (`OFFSET_OUT_OF_RANGE`).
    #[error("OFFSET_OUT_OF_RANGE: replica {replica} fetched at {fetch_offset}, the log ends at {log_end_offset}")]
    FetchOffsetOutOfRange {
        /// The follower.
        replica: ReplicaId,
        /// The offset it fetched at.
        fetch_offset: Offset,
        /// The leader's log end offset.
        log_end_offset: Offset,
    },
    /// An AlterPartition answer or a partition change for another leader
    /// epoch than this leader's: the caller rebuilds the state instead.
    #[error("leader epoch {got} is not this leader's epoch {current}")]
    WrongLeaderEpoch {
        /// This leader's epoch.
        current: LeaderEpoch,
        /// The epoch the message carried.
        got: LeaderEpoch,
    },
    /// A Fetch v12+ whose `last_fetched_epoch` the leader cannot place (it
    /// is above every epoch the leader knows): `OFFSET_OUT_OF_RANGE`.
    #[error("OFFSET_OUT_OF_RANGE: cannot find the end of last fetched epoch {last_fetched_epoch}")]
    UnknownLastFetchedEpoch {
        /// The epoch the fetch carried.
        last_fetched_epoch: LeaderEpoch,
    },
    /// A request carrying an older leader epoch than this leader's
    /// (`FENCED_LEADER_EPOCH`, code 74, KIP-320): the sender is behind.
    #[error("FENCED_LEADER_EPOCH: request epoch {request_epoch}, leader epoch {leader_epoch}")]
    FencedLeaderEpoch {
        /// This leader's epoch.
        leader_epoch: LeaderEpoch,
        /// The epoch the request carried.
        request_epoch: LeaderEpoch,
    },
    /// A request carrying a newer leader epoch than this leader's
    /// (`UNKNOWN_LEADER_EPOCH`, code 75, KIP-320): this broker is behind.
    #[error("UNKNOWN_LEADER_EPOCH: request epoch {request_epoch}, leader epoch {leader_epoch}")]
    UnknownLeaderEpoch {
        /// This leader's epoch.
        leader_epoch: LeaderEpoch,
        /// The epoch the request carried.
        request_epoch: LeaderEpoch,
    },
    /// A committed ISR that is not a subset of the replicas or leaves out
    /// the leader (the controller moves leadership with a new leader epoch,
    /// never by dropping the leader from the ISR).
    #[error("invalid ISR {isr:?} for leader {leader} and replicas {replicas:?}")]
    InvalidIsr {
        /// The ISR received.
        isr: Vec<ReplicaId>,
        /// This leader.
        leader: ReplicaId,
        /// The partition's replicas.
        replicas: Vec<ReplicaId>,
    },
    /// A leader-epoch entry with a negative epoch or start offset (Kafka
    /// throws `IllegalArgumentException`).
    #[error("invalid leader epoch entry: epoch {epoch}, start offset {start_offset}")]
    InvalidEpochEntry {
        /// The epoch.
        epoch: LeaderEpoch,
        /// The start offset.
        start_offset: Offset,
    },
}

impl ReplicationError {
    /// The Kafka error code a client or follower is answered with. Errors
    /// that only the runtime sees (a stale AlterPartition answer, a bad
    /// ISR or epoch entry from the controller) are broker-side failures.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ReplicationError::NotEnoughReplicas { .. } => ErrorCode::NotEnoughReplicas,
            ReplicationError::InvalidRequiredAcks { .. } => ErrorCode::InvalidRequiredAcks,
            ReplicationError::NotAFollower { .. } => ErrorCode::NotLeaderOrFollower,
            ReplicationError::FetchOffsetOutOfRange { .. }
            | ReplicationError::UnknownLastFetchedEpoch { .. } => ErrorCode::OffsetOutOfRange,
            ReplicationError::FencedLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
            ReplicationError::UnknownLeaderEpoch { .. } => ErrorCode::UnknownLeaderEpoch,
            ReplicationError::WrongLeaderEpoch { .. }
            | ReplicationError::InvalidIsr { .. }
            | ReplicationError::InvalidEpochEntry { .. } => ErrorCode::UnknownServerError,
        }
    }
}

//! Share groups (KIP-932) at the partition: the delivery state a partition
//! leader keeps for each share group that consumes the partition.
//!
//! The group's membership and assignment are the group coordinator's
//! ([`crate::group::share`]); which records are delivered, to whom and
//! how often is decided here, by the leader of each partition, so that
//! the records of one partition are split between the group's members
//! with no coordination beyond the partition's own owner.
//!
//! - [`partition`]: one share-partition's window of record states.
//! - [`state`]: its durable part, as `__share_group_state` keeps it.
//! - [`reset`]: where a share-partition without state starts
//!   (`share.auto.offset.reset`).

pub mod partition;
pub mod reset;
pub mod state;

pub use partition::{AckType, AcquiredRange, BatchSpan, SharePartition, ShareSettings};
pub use reset::ShareAutoOffsetReset;
pub use state::{ShareKey, ShareSnapshot, StateError};

#[cfg(test)]
mod tests;

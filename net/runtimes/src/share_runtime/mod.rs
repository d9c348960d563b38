//! Share groups (KIP-932) on the shards: the delivery state each partition
//! owner keeps per share group, and the share sessions of the connections.
//!
//! - The **owner** of a partition (its leader's owning shard) keeps one
//!   [`SharePartition`] per share group that reads it, and alone acquires,
//!   acknowledges and releases its records ([`owner`]). Its durable part
//!   (start offset, states, delivery counts) is read from the share
//!   coordinator when the owner starts serving it under a new role, and
//!   written there after every acknowledgement, before the answer
//!   (`durable.rs`, [`persister`], `crate::share_coordinator`): after a
//!   failover nothing accepted is delivered again, and records that were
//!   only acquired come back with their delivery counts.
//! - The **connection's shard** keeps the member's share session
//!   ([`sessions`]): which partitions its fetches name, and the epoch the
//!   next request must carry.
//! - [`admin`]: AlterShareGroupOffsets and DeleteShareGroupOffsets reset
//!   share-partitions, through their share coordinators.
//! - [`fetch`]: a ShareFetch's rounds over the owners: acknowledge and
//!   acquire on every owner at once, and while nothing was acquired wait on
//!   them all (cancellable: a wait changes nothing) until one has records
//!   to give, or the deadline.

pub mod admin;
mod durable;
pub mod fetch;
pub mod owner;
pub mod persister;
pub mod sessions;
pub mod state_wire;

use coordinators::share::SharePartition;
use engine::TopicPartition;
use std::cell::RefCell;
use std::collections::HashMap;

pub use fetch::{acknowledge, connection_closed, release, share_fetch, FetchRound};
pub use owner::{AckBatch, PartitionAcks, ShareParams, ShareReadOutcome};
pub use sessions::{SessionCheck, ShareSessionCache, TopicId};

/// One share group's state of one partition, under the role generation it
/// was built in (a new leadership starts it again) and of the topic it was
/// built for (a topic deleted and made again under the same name is
/// another).
#[derive(Debug)]
pub struct OwnedSharePartition {
    /// The role generation of the partition here when the state was made.
    pub generation: u64,
    /// The topic's id.
    pub topic_id: [u8; 16],
    /// The records' states.
    pub state: SharePartition,
    /// The partition's leader epoch here, stamped on each state write.
    pub leader_epoch: i32,
    /// The sequence of the next state write.
    pub next_sequence: i32,
    /// The state epoch the state was read at (raised by an admin reset).
    pub state_epoch: i32,
    /// State writes sent and not yet answered.
    pub writes_in_flight: u32,
}

impl OwnedSharePartition {
    /// Whether it holds nothing the share coordinator lacks: no record
    /// acquired and no state write on its way, so that it can be read
    /// again without losing anything.
    pub fn is_idle(&self) -> bool {
        self.writes_in_flight == 0 && self.state.next_deadline_ms().is_none()
    }
}

/// One shard's share-group state.
#[derive(Debug, Default)]
pub struct ShareRuntime {
    /// Share-partitions of the partitions this shard owns, by group.
    pub partitions: RefCell<HashMap<(String, TopicPartition), OwnedSharePartition>>,
    /// The share sessions of this shard's connections.
    pub sessions: RefCell<ShareSessionCache>,
}

impl ShareRuntime {
    /// A runtime whose session cache holds this shard's part of
    /// `max_sessions` (the broker's cap).
    pub fn new(max_sessions: usize, shard_id: usize, shards: usize) -> Self {
        let shards = shards.max(1);
        let mut share = max_sessions / shards;
        if shard_id < max_sessions % shards {
            share += 1;
        }
        Self {
            partitions: RefCell::default(),
            sessions: RefCell::new(ShareSessionCache::new(share)),
        }
    }
}

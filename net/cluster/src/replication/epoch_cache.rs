//! [`LeaderEpochCache`]: Kafka's `leader-epoch-checkpoint`, one partition's
//! list of (leader epoch, first offset written in it).
//!
//! The pure cache moved down into the engine (`engine::log::epoch_cache`),
//! because the partition log must persist it beside its segments and cut it
//! with them (truncation, recovery). It is re-exported here so that the
//! replication core and its simulation name it as before.

pub use engine::log::epoch_cache::{
    encode_checkpoint, parse_checkpoint, CheckpointError, EpochCacheError, EpochEndOffset,
    EpochEntry, LeaderEpochCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET,
};

//! The replication runtime: each shard's view of the replicated partitions
//! it owns, as leader or follower, driven by the committed metadata and by
//! the followers' fetches. The decisions (ISR, high watermark, when to
//! shrink or expand) are `rill-cluster`'s pure `LeaderState`; this module
//! does the I/O around it, on the shard that owns the partition.
//!
//! - [`ReplicaManager`]: the roles of this shard's replicated partitions
//!   (a partition with one replica has none: it behaves as on a single
//!   node), changed by [`ApplyPartitionState`] from the reconciler.
//! - [`leader`]: serving a follower's fetch (its offset is its log end; the
//!   HW moves; acks=all produces and consumers' long polls wake), the
//!   acks=all wait, and the leader's timer that proposes ISR changes.
//! - [`follower`]: the fetcher a follower runs against its leader: fetch
//!   with its last fetched epoch, append as-is, fsync, and report by
//!   fetching again; truncate where the leader says the logs diverge.
//! - [`truncation`]: the follower's truncation I/O (on a fetch answer's
//!   `diverging_epoch`, or after OffsetForLeaderEpoch), deciding with
//!   `rill-cluster`'s pure truncation rule.
//! - [`out_of_range`] and [`remote_aux`]: a follower whose log ends below
//!   its leader's log start starts over there, on a tiered topic after the
//!   remote log, with its epochs and producers.
//! - [`read_replica`]: a consumer's read of a replicated partition: the
//!   leader epoch check, a follower serving it, and the leader sending it
//!   to a follower in its rack (KIP-392).
//! - [`leader_session`]: the follower's side of its fetch session with
//!   the leader (KIP-227).
//! - [`client`]: a Kafka request over a plain connection (the follower is
//!   a client of the leader's Kafka listener).
//!
//! The HW a reader sees is the log's replication limit
//! (`PartitionLog::set_replication_limit`): the leader's HW on the leader,
//! min(leader's HW, own log end) on a follower.

pub mod apply;
pub mod client;
pub mod follower;
pub mod leader;
pub mod leader_session;
pub mod lease_table;
pub mod out_of_range;
pub mod read_replica;
pub mod remote_aux;
pub mod roles;
pub mod truncation;

pub use apply::ApplyPartitionState;
pub use leader::{
    append_as_leader, coordinator_error, leader_lease, leadership, serves_clients, wait_acks_all,
    wait_committed_to_end, FollowerFetchReply, LeaderLease, Leadership, ServeFollowerFetch,
};
pub use lease_table::LeaseTable;
pub use roles::{LeadershipHook, ReplicaManager, Role, REPLICA_LAG_TIME_MAX_MS};

//! rill's per-shard runtimes: the services a shard runs, each a thin layer of
//! I/O around a pure core.
//!
//! A runtime persists what its core decides (through the replicated log),
//! then replies; it runs on the shard that owns the partition or the
//! coordinator it serves, and reaches other shards only by the kernel's owner
//! call. The Kafka API layer above calls these; none of them knows a frame
//! or a handler.
//!
//! ```text
//! routing ─────────────┐            split a request's partitions by owner shard
//! admin_changes ───────┤            topics, configs, ACLs, quotas, on shard 0
//! group_runtime ───────┤            coordinators (cores: rill-coordinators)
//! txn_runtime ─────────┤
//! producer_id_pool ────┤            producer-id blocks for InitProducerId
//! quotas ──────────────┤            client byte-rate quotas, throttling
//!                      ↓
//! replication_runtime               leaders serve followers, hold the HW;
//!                      ↓            followers fetch
//! cluster_runtime                   the metadata quorum member, broker
//!                                   registration, every shard's view
//!                                   (and topic table derived from it)
//! ```
//!
//! - [`shard_runtime`]: the struct of one shard's runtimes, built in one
//!   constructor and installed in the kernel's shard; [`Shard`] is the
//!   kernel's shard with it.
//! - [`routing`]: split a request's partitions by owner, run, join.
//! - [`admin_changes`]: the metadata changes this broker asks of the
//!   cluster (topics, configs, ACLs, quotas, SCRAM credentials), serialized
//!   on shard 0, and the reconciler that applies committed metadata to the
//!   broker's partition logs (each shard's topic table is derived from its
//!   image by [`cluster_runtime`]).
//! - [`group_runtime`]: the group coordinator on shards: placement by
//!   `__consumer_offsets` partition, leases, persistence, timers, loading.
//! - [`txn_runtime`]: the transaction coordinator on shards: placement by
//!   `__transaction_state` partition, persistence, markers, timeouts.
//! - [`producer_id_pool`]: producer ids for InitProducerId, from persisted blocks
//!   of 1000 (KIP-730) that shard 0 allocates and every shard draws from.
//! - [`quotas`]: client quotas (produce/fetch byte rates per user and client
//!   id): the windowed rates shared by the shards, and throttling.
//! - [`replication_runtime`]: replicated partitions — the leader serving
//!   followers and holding the HW, the followers' fetchers.
//! - [`cluster_runtime`]: the metadata quorum member on shard 0, its
//!   transport, broker registration and heartbeats, every shard's view.

pub mod admin_changes;
pub mod cluster_runtime;
pub mod group_runtime;
pub mod producer_id_pool;
pub mod quotas;
pub mod replication_runtime;
pub mod routing;
pub mod shard_runtime;
pub mod txn_runtime;

pub use shard_runtime::{Shard, ShardMessage, ShardRuntime};

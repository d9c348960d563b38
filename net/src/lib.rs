//! rill networking: the Kafka wire protocol on a thread-per-core broker.
//!
//! Every shard is one glommio executor pinned to a core. Each shard accepts
//! connections on the shared port (`SO_REUSEPORT`), serves them itself, and
//! routes the partition work of a request to the shard that owns the partition
//! over glommio's channel mesh.
//!
//! Map of the modules:
//! - [`config`]: the `rill serve` flags and the broker TOML file (Kafka's names).
//! - [`error`]: errors of this crate. Kafka error codes are
//!   [`engine::ErrorCode`] everywhere, across the mesh too; the number appears
//!   only where a response is encoded.
//! - [`frame`]: length-prefixed frames and request headers (pure decoders).
//! - [`topics`]: the per-shard copy of the topic table.
//! - [`mesh`]: the typed messages shards exchange, and the partition operations
//!   an owner shard executes.
//! - [`routing`]: split a request's partitions by owner shard, send, join.
//! - [`shard`]: one shard's state (logs, topic table, mesh, metrics).
//! - [`controller`]: topic create/delete/alter, serialized on shard 0 and
//!   broadcast to every shard.
//! - [`connection`]: one client connection: pipelined requests, ordered responses.
//! - [`handlers`]: one file per Kafka API, and the registry that drives both
//!   dispatch and the ApiVersions answer.
//! - [`metrics`], [`admin`]: Prometheus counters and histograms, and the HTTP
//!   `/metrics` responder.
//! - [`group_runtime`]: one group coordinator per shard: placement by
//!   `__consumer_offsets` partition, persistence, timers, replay.
//! - [`txn`], [`txn_runtime`]: the transaction coordinator — a pure core and
//!   its per-shard runtime (placement by `__transaction_state` partition,
//!   persistence, markers, timeouts, replay).
//! - [`serve`]: `rill serve` — start the shards, handle signals, shut down.
//! - [`fetch_response`], [`sendpath`]: the hand-written Fetch response encoder
//!   and the copy / sendfile / splice send paths.

pub mod admin;
pub mod config;
pub mod connection;
pub mod controller;
pub mod error;
#[cfg(test)]
mod error_codes_check;
pub mod fetch_response;
pub mod frame;
pub mod group;
pub mod group_runtime;
pub mod handlers;
pub mod mesh;
pub mod metrics;
pub mod routing;
pub mod sendpath;
pub mod serve;
pub mod shard;
pub mod topics;
pub mod txn;
pub mod txn_runtime;

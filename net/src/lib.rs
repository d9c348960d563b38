//! rill networking: the Kafka wire protocol on a thread-per-core broker.
//!
//! Every shard is one glommio executor pinned to a core. Each shard accepts
//! connections on the shared port (`SO_REUSEPORT`), serves them itself, and
//! has the partition work of a request run by the shard that owns the
//! partition.
//!
//! Layers, one way (the `layering` test fails on any import cycle):
//!
//! ```text
//! serve, connection, admin        start the shards, read frames, /metrics
//!   ↓
//! handlers/                        one file per Kafka API: decode, call a service, encode
//!   ↓
//! services                         routing (partition work), controller (topics),
//!                                  group_runtime, txn_runtime (coordinators),
//!                                  producer ids; each a pure core + a thin runtime
//!   ↓
//! shard runtime                    shard (state, service table), call (the owner
//!                                  call), mesh (envelopes), services, topics,
//!                                  metrics, sendpath, config
//!   ↓
//! engine
//! ```
//!
//! Map of the modules:
//! - [`config`]: the `rill serve` flags and the broker file (`server.properties` or TOML, Kafka's names);
//!   [`cluster_config`]: its cluster part (quorum voters, roles, sessions).
//! - [`error`]: errors of this crate. Kafka error codes are
//!   [`engine::ErrorCode`] everywhere, across the mesh too; the number appears
//!   only where a response is encoded.
//! - [`frame`]: length-prefixed frames and request headers (pure decoders).
//! - [`fuzzing`]: the request path up to each handler's decoded body, as
//!   never-panicking entry points for the fuzz targets (`fuzz/`) and the
//!   corpus replay test.
//! - [`topics`]: the per-shard copy of the topic table.
//! - [`shard`]: one shard's state, and the [`shard::ShardService`] trait by
//!   which every per-shard runtime is built and found.
//! - [`services`]: the shard's table of services, by type.
//! - [`mesh`]: the envelope that carries a job to another shard; it names no
//!   service.
//! - [`call`]: the one owner-call primitive, `shard.call(owner, request)`,
//!   for every request type that implements [`call::OwnerCall`].
//! - [`routing`]: split a request's partitions by owner shard, run, join.
//! - [`controller`]: topic create/delete/alter, serialized on shard 0 and
//!   broadcast to every shard.
//! - [`group`], [`group_runtime`]: the group coordinator — a pure core and
//!   its per-shard runtime (placement by `__consumer_offsets` partition,
//!   persistence, timers, replay).
//! - [`cluster_runtime`]: the metadata quorum member on shard 0, its
//!   transport, broker registration and heartbeats, every shard's view.
//! - [`replication_runtime`]: replicated partitions — the leader serving
//!   followers and holding the HW, the followers' fetchers.
//! - [`producer_ids`]: producer ids for InitProducerId, from persisted blocks
//!   of 1000 (KIP-730) that shard 0 allocates and every shard draws from.
//! - [`txn`], [`txn_runtime`]: the transaction coordinator — a pure core and
//!   its per-shard runtime (placement by `__transaction_state` partition,
//!   persistence, markers, timeouts, replay).
//! - [`quotas`]: client quotas (produce/fetch byte rates per user and
//!   client id): the windowed rates shared by the shards, and throttling.
//! - [`security`]: security protocols, each connection's session
//!   (listener, peer, authenticated principal), TLS with rustls.
//! - [`connection`]: one client connection: pipelined requests, ordered
//!   responses, over plain TCP or TLS (`connection::transport`).
//! - [`handlers`]: one file per Kafka API, and the registry that drives both
//!   dispatch and the ApiVersions answer.
//! - [`metrics`], [`admin`]: Prometheus counters and histograms, and the HTTP
//!   `/metrics` responder; [`process_stats`]: the process's CPU and RSS
//!   under Prometheus's standard names.
//! - [`io_setup`]: the engine's I/O sizes from the io-properties file
//!   `rill iotune` wrote (found by the binary), and their start log line.
//! - [`serve`]: `rill serve` — start the shards, handle signals, shut down.
//! - [`fatal`]: the one fatal stop (a panic in any thread, the metadata log
//!   failing, a second signal): logged once, a distinct exit code, bounded.
//! - [`fetch_response`], [`sendpath`]: the hand-written Fetch response encoder
//!   and the copy / sendfile / splice send paths.

pub mod admin;
pub mod call;
pub mod cluster_config;
pub mod cluster_runtime;
pub mod config;
pub mod conn_limits;
pub mod connection;
pub mod controller;
pub mod error;
#[cfg(test)]
mod error_codes_check;
pub mod fatal;
pub mod fetch_response;
pub mod frame;
pub mod fuzzing;
pub mod group;
pub mod group_runtime;
pub mod handlers;
pub mod io_setup;
pub mod listen;
pub mod mesh;
pub mod metrics;
pub mod process_stats;
pub mod producer_ids;
pub mod quotas;
pub mod replication_runtime;
pub mod routing;
pub mod security;
pub mod sendpath;
pub mod serve;
pub mod services;
pub mod shard;
pub mod topics;
pub mod txn;
pub mod txn_runtime;

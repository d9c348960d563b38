//! rill's shard kernel: what every per-shard runtime stands on.
//!
//! Every shard is one glommio executor pinned to a core. The kernel gives a
//! shard its state, the one way to run work on another shard, and the
//! broker's settings; it names no service, no coordinator and no Kafka API.
//!
//! ```text
//! shard<R> ── runtime R (the layers above: one struct, built once)
//!   │
//!   └── call ── mesh      the owner call: pack a request, run it on the
//!                          owning shard, carry the reply back
//! config, cluster_config, conn_limits, io_setup    the broker's settings
//! topics, metrics, sendpath, listen, fatal, error  per-shard state and tools
//! broker_state                                    the process's state
//! ```
//!
//! - [`shard`]: one shard's state, generic over the struct of runtimes the
//!   layers above install in it (no lookup by type: a runtime is a field).
//! - [`mesh`]: the envelope that carries a job to another shard; it names no
//!   service.
//! - [`call`]: the one owner-call primitive, `shard.call(owner, request)`,
//!   for every request type that implements [`call::OwnerCall`].
//! - [`config`]: the `rill serve` flags and the broker file
//!   (`server.properties` or TOML, Kafka's names); [`cluster_config`]: its
//!   cluster part (quorum voters, roles, sessions); [`conn_limits`]: the
//!   connection limits; [`io_setup`]: the engine's I/O sizes from the
//!   io-properties file `rill iotune` wrote.
//! - [`cordon`]: which data dirs are cordoned (KIP-1066), from the file
//!   or a dynamic broker config.
//! - [`topic_defaults`]: the broker's topic defaults under the dynamic
//!   broker configs of an image (file, then cluster-wide, then its own).
//! - [`topics`]: the per-shard topic table, derived from the metadata
//!   image the shard holds and versioned by its offset.
//! - [`metrics`]: Prometheus counters and histograms.
//! - [`sendpath`]: the copy / sendfile / splice send paths, one ring per
//!   shard, and [`sendpath::OutChunk`], the piece of a response they write.
//! - [`listen`]: the shared (`SO_REUSEPORT`) listening sockets.
//! - [`broker_state`]: the broker's state in Kafka's numbers (starting,
//!   running, shutting down), for `/metrics`.
//! - [`fatal`]: the one fatal stop (a panic in any thread, the metadata log
//!   failing, a second signal): logged once, a distinct exit code, bounded.
//! - [`error`]: errors of the kernel and the crates above it. Kafka error
//!   codes are [`engine::ErrorCode`] everywhere, across the mesh too; the
//!   number appears only where a response is encoded.

pub mod broker_state;
pub mod call;
pub mod cluster_config;
pub mod config;
pub mod conn_limits;
pub mod cordon;
pub mod error;
pub mod fatal;
pub mod fault_clock;
pub mod io_setup;
pub mod listen;
pub mod mesh;
pub mod metrics;
pub mod sendpath;
pub mod shard;
pub mod topic_defaults;
pub mod topics;

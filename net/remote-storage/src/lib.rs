//! rill's object-store side of tiered storage (KIP-405, issue #35): it
//! uploads sealed segments and their indexes to S3, GCS, Azure Blob or a
//! local directory, and reads them back, by byte range, through a chunk
//! cache. Which segments go up, and when, is the broker's business; this
//! crate only moves bytes.
//!
//! # Why a thread of its own
//!
//! The `object_store` crate runs on tokio: its HTTP client, its timers and
//! its local-file I/O all need a tokio runtime. rill's shards run glommio,
//! one per core, and must never block nor run a second runtime on their
//! core. So the store lives on one dedicated thread (`rill-remote`) with
//! its own small current-thread tokio runtime, fed over a bounded channel.
//! A shard holds a [`RemoteStore`] handle (`Send + Sync + Clone`); each
//! call sends a job and awaits the answer on a oneshot channel, a future
//! that needs no runtime, so glommio awaits it as any other. This is
//! DESIGN.md's "Later capabilities: tiered storage".
//!
//! Per node: one thread and one cache for all shards.
//!
//! # Failure contract
//!
//! Every operation ends within about one `op_timeout_ms` (30 s by default;
//! an upload's parts each have it): a store that is down or hangs fails
//! with [`RemoteError::Unavailable`], which the broker answers with a
//! retriable error. An upload is all or nothing under its key: a single
//! PUT, or a multipart upload that is invisible until completed and
//! aborted on error. Uploads and deletes drop the cached chunks of the keys
//! they touch.
//!
//! # Modules
//!
//! - [`config`]: [`RemoteStorageConfig`], its defaults and their reasons.
//! - `location`: the store URL parsed (scheme, bucket, key prefix).
//! - `backend`: builds the `object_store` client a URL names.
//! - [`store`]: [`RemoteStore`], the handle.
//! - `job`, `worker`: the jobs, and the thread that runs them.
//! - `context`: what the jobs share on the thread, and the timeout helper.
//! - `upload`, `read`, `listing`: the operations.
//! - `cache`, `chunks`: the chunk cache (a bounded LRU) and its arithmetic,
//!   both pure.
//! - [`stats`]: the counters for `/metrics`.
//! - [`error`]: [`RemoteError`], and how `object_store`'s errors map to it.

#![deny(missing_docs)]

mod backend;
mod cache;
mod chunks;
pub mod config;
mod context;
pub mod error;
mod job;
mod listing;
mod location;
mod read;
pub mod stats;
pub mod store;
mod upload;
mod worker;

pub use config::RemoteStorageConfig;
pub use error::RemoteError;
pub use stats::StatsSnapshot;
pub use store::RemoteStore;

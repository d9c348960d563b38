//! A small asynchronous Kafka client, just enough to drive load: framing,
//! version negotiation, a pipelined connection, cluster metadata and record
//! batches.
//!
//! - [`framing`]: length-prefixed request/response frames (pure).
//! - [`versions`]: our API ranges and ApiVersions negotiation (pure).
//! - [`batch`]: record batch v2 encoder and in-place decoder (pure).
//! - [`connection`]: pipelined tokio connection, responses by correlation id.
//! - [`client`]: Metadata, CreateTopics, ListOffsets, a per-client pool.
//! - [`tls`]: `--security-protocol SSL`: every connection over rustls.

pub mod batch;
pub mod client;
pub mod connection;
pub mod framing;
pub mod tls;
pub mod versions;

//! A small asynchronous Kafka client, just enough to drive load: framing,
//! version negotiation, a pipelined connection, cluster metadata and record
//! batches.
//!
//! - [`framing`]: length-prefixed request/response frames (pure).
//! - [`versions`]: our API ranges and ApiVersions negotiation (pure).
//! - [`batch`]: record batch v2 encoder and in-place decoder (pure).
//! - [`connection`]: pipelined tokio connection, responses by correlation id.
//! - [`client`]: Metadata, CreateTopics, ListOffsets, a per-client pool.
//! - [`security`]: `--security-protocol` and its flags, process-wide.
//! - [`tls`]: SSL / SASL_SSL: every connection over rustls.
//! - [`sasl`]: SASL_PLAINTEXT / SASL_SSL: PLAIN or SCRAM after ApiVersions.

pub mod batch;
pub mod client;
pub mod connection;
pub mod framing;
pub mod sasl;
pub mod security;
pub mod tls;
pub mod versions;

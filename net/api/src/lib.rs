//! rill's Kafka API layer: the wire protocol from the socket to the services.
//!
//! A connection reads length-prefixed frames, decodes each request's header,
//! finds the handler for its API key and version, and writes the answers back
//! in request order (pipelined). A handler decodes a body, calls a runtime
//! (`rill-runtimes`), and encodes the reply; Fetch answers go out through the
//! kernel's send paths, zero-copy where the path allows.
//!
//! ```text
//! connection ── frame            read frames, order answers, TLS or plain
//!     │
//!     ↓
//! handlers (one file per Kafka API; the registry drives dispatch and
//!     │     the ApiVersions answer)
//!     ↓
//! fetch_response                 the hand-written Fetch response encoder
//! ```
//!
//! - [`frame`]: length-prefixed frames and request headers (pure decoders).
//! - [`connection`]: one client connection: pipelined requests, ordered
//!   responses, over plain TCP or TLS (`connection::transport`).
//! - [`handlers`]: one file per Kafka API, and the registry.
//! - [`fetch_response`]: the Fetch response encoder (`Bytes` clones or file
//!   ranges, never a copy of the records).
//! - [`produce_scan`]: a Produce request's envelope scanned as it arrives,
//!   so a large one is read apart (each partition's records placed where
//!   the disk write takes them without a copy).
//! - [`fuzzing`]: the request path up to each handler's decoded body, as
//!   never-panicking entry points for the fuzz targets (`fuzz/`) and the
//!   corpus replay test.

pub mod connection;
#[cfg(test)]
mod error_codes_check;
pub mod fetch_response;
pub mod frame;
pub mod fuzzing;
pub mod handlers;
pub mod produce_scan;

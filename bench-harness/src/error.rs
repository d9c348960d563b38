//! Error types of the harness. Operating errors (a broker that refuses a
//! request, a malformed workload file, a disk that rejects `O_DIRECT`) are
//! values of [`BenchError`]; a failed assertion is a bug and panics.

use std::io;

/// Everything that can go wrong while configuring or running a benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("workload: {0}")]
    Workload(String),
    #[error("workload file {path}: {message}")]
    WorkloadFile { path: String, message: String },
    #[error("io: {0}")]
    Io(#[from] io::Error),
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("connect to {addr}: {source}")]
    Connect { addr: String, source: io::Error },
    #[error("connection to {addr} closed")]
    ConnectionClosed { addr: String },
    #[error("broker at {addr} supports no version of api {api_key} in our range {ours_min}..={ours_max}")]
    UnsupportedApi {
        addr: String,
        api_key: i16,
        ours_min: i16,
        ours_max: i16,
    },
    #[error("broker error {error_code} ({context})")]
    Broker { error_code: i16, context: String },
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("disk benchmark: {0}")]
    Disk(String),
    #[error("broker CPU: {0}")]
    BrokerCpu(String),
    #[error("{0}")]
    Other(String),
}

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, BenchError>;

//! Errors of the tuning crate.
//!
//! Reading the host never errors (a missing file is a "skip" status); errors are
//! for the things the operator asked for and did not get: a write that failed,
//! a backup that cannot be read, a disk that cannot be measured.

use std::path::PathBuf;

/// Everything that can go wrong in `rill tune apply/revert`, `rill iotune` and
/// the io-properties file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file under the host root could not be written.
    #[error("cannot write {value:?} to {path}: {source}")]
    Write {
        /// Full path that was written.
        path: PathBuf,
        /// The value that was being written.
        value: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Any other I/O failure, with the path it concerned.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done ("reading", "creating test file", ...).
        what: &'static str,
        /// Path concerned.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The backup file exists but is not valid JSON of the expected shape.
    #[error("backup file {path} is not valid: {source}")]
    Backup {
        /// Backup path.
        path: PathBuf,
        /// The decode error.
        source: serde_json::Error,
    },
    /// The io-properties file does not follow the expected format.
    #[error("{path}:{line}: {message}")]
    IoPropertiesFormat {
        /// File path.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// Changing the host needs root.
    #[error("`rill tune apply/revert` must run as root (or use --dry-run)")]
    NotRoot,
    /// io_uring could not be set up or an operation failed.
    #[error("io_uring: {0}")]
    Uring(std::io::Error),
    /// A measurement produced a result that makes no sense (zero operations).
    #[error("measurement failed: {0}")]
    Measurement(String),
}

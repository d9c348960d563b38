//! The errors of decoding `__consumer_offsets` records.
//!
//! The coordinator answers clients with [`engine::ErrorCode`], the one table
//! of Kafka error codes; nothing here is a Kafka code.

use thiserror::Error;

/// Why a `__consumer_offsets` record could not be decoded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RecordError {
    /// The buffer ended before the field did.
    #[error("record truncated while reading {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// A string was not UTF-8.
    #[error("field {field} is not UTF-8")]
    NotUtf8 {
        /// The field being read.
        field: &'static str,
    },
    /// A length prefix was negative where null is not allowed.
    #[error("field {field} has invalid length {length}")]
    BadLength {
        /// The field being read.
        field: &'static str,
        /// The length read.
        length: i32,
    },
    /// The key or value version is not one this broker reads.
    #[error("unsupported {what} version {version}")]
    UnsupportedVersion {
        /// Which schema.
        what: &'static str,
        /// The version read.
        version: i16,
    },
}

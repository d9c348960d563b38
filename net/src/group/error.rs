//! Error codes the group coordinator answers with, and the errors of decoding
//! `__consumer_offsets` records.
//!
//! The core answers with Kafka's numeric error codes (the handlers copy them
//! into the wire responses unchanged), so they are plain `i16` constants here
//! rather than an enum the handlers would have to map back.

use thiserror::Error;

/// No error.
pub const NONE: i16 = 0;
/// The topic or partition does not exist.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// The coordinator is not available (the group is being removed).
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// The generation id of the request is not the group's current one.
pub const ILLEGAL_GENERATION: i16 = 22;
/// No protocol is supported by every member, or the protocol type differs.
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
/// The group id is empty.
pub const INVALID_GROUP_ID: i16 = 24;
/// The member id is not a member of the group.
pub const UNKNOWN_MEMBER_ID: i16 = 25;
/// The session timeout is outside the broker's bounds.
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
/// The group is rebalancing; the member must rejoin.
pub const REBALANCE_IN_PROGRESS: i16 = 27;
/// The request is malformed.
pub const INVALID_REQUEST: i16 = 42;
/// The group still has members.
pub const NON_EMPTY_GROUP: i16 = 68;
/// The group does not exist.
pub const GROUP_ID_NOT_FOUND: i16 = 69;
/// The first JoinGroup carried no member id: retry with the one returned.
pub const MEMBER_ID_REQUIRED: i16 = 79;
/// The group already has `group.max.size` members.
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
/// Another member with the same `group.instance.id` replaced this one.
pub const FENCED_INSTANCE_ID: i16 = 82;
/// The group still subscribes to the topic whose offsets are to be deleted.
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
/// The member epoch is ahead of, or unrelated to, the broker's.
pub const FENCED_MEMBER_EPOCH: i16 = 110;
/// The static member's previous incarnation has not left yet.
pub const UNRELEASED_INSTANCE_ID: i16 = 111;
/// The server assignor named by the member is unknown.
pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
/// The member epoch is behind the broker's (commit with an old epoch).
pub const STALE_MEMBER_EPOCH: i16 = 113;

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

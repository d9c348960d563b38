//! Kafka protocol error codes the handlers answer with (Kafka's `Errors` enum).

/// No error.
pub const NONE: i16 = 0;
/// The offset asked for is outside the log.
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
/// A record batch failed validation.
pub const CORRUPT_MESSAGE: i16 = 2;
/// The topic or partition does not exist.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// This broker does not lead the partition (or the log closed under us).
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// A request timed out.
pub const REQUEST_TIMED_OUT: i16 = 7;
/// A batch is larger than `max.message.bytes`.
pub const MESSAGE_TOO_LARGE: i16 = 10;
/// A topic name is not legal.
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// `acks` is not -1, 0 or 1.
pub const INVALID_REQUIRED_ACKS: i16 = 21;
/// The API version is not supported.
pub const UNSUPPORTED_VERSION: i16 = 35;
/// The topic already exists.
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
/// Partition count not acceptable.
pub const INVALID_PARTITIONS: i16 = 37;
/// Replication factor not acceptable.
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
/// Replica assignment not acceptable.
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
/// A config name or value was refused.
pub const INVALID_CONFIG: i16 = 40;
/// A request was malformed.
pub const INVALID_REQUEST: i16 = 42;
/// An unexpected broker-side error.
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
/// The broker has no such log dir.
pub const KAFKA_STORAGE_ERROR: i16 = 56;
/// Topic deletion is disabled (`delete.topic.enable=false`).
pub const TOPIC_DELETION_DISABLED: i16 = 73;
/// DeleteRecords asked for an offset beyond the high watermark.
pub const OFFSET_NOT_AVAILABLE: i16 = 78;
/// A fetch named a topic id this broker does not know.
pub const UNKNOWN_TOPIC_ID: i16 = 100;
/// The partition exists but the operation cannot run on it right now.
pub const INVALID_UPDATE_VERSION: i16 = 95;

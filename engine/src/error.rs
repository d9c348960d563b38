//! Errors of the storage engine, each mapped to the Kafka error code a client expects.

use crate::batch::BatchError;
use crate::error_code::ErrorCode;

/// An operating error of the engine. Bugs are assertions, not variants.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A produced batch failed validation.
    #[error("invalid batch: {0}")]
    Batch(#[from] BatchError),
    /// A read or lookup asked for an offset outside `[log_start, log_end]`.
    #[error("offset {offset} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// First offset still in the log.
        log_start_offset: i64,
        /// Next offset to be written.
        log_end_offset: i64,
    },
    /// A read below the local log that the remote (tiered) log holds: the
    /// caller reads it from the object store (a follower is told
    /// OFFSET_MOVED_TO_TIERED_STORAGE).
    #[error("offset {offset} is in tiered storage (local log starts at {local_log_start_offset})")]
    OffsetInRemoteStorage {
        /// The offset asked for.
        offset: i64,
        /// First offset of the local log.
        local_log_start_offset: i64,
    },
    /// The partition does not exist on this shard.
    #[error("unknown topic or partition {topic}-{partition}")]
    UnknownPartition {
        /// Topic name.
        topic: String,
        /// Partition number.
        partition: i32,
    },
    /// The partition already exists.
    #[error("partition {topic}-{partition} already exists")]
    PartitionExists {
        /// Topic name.
        topic: String,
        /// Partition number.
        partition: i32,
    },
    /// A topic config name or value was not acceptable.
    #[error("invalid config {name}={value}: {reason}")]
    InvalidConfig {
        /// Kafka config name.
        name: String,
        /// Offered value.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// The disk failed under us; the partition is taken offline.
    #[error("storage I/O error on {path}: {source}")]
    Io {
        /// File or directory concerned.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The log was closed (topic deleted or broker shutting down).
    #[error("log closed")]
    Closed,
    /// A request that names an older leader epoch than the partition's
    /// (KIP-320): the sender's metadata is behind.
    #[error("leader epoch {request_epoch} is older than the partition's {leader_epoch}")]
    FencedLeaderEpoch {
        /// The partition's leader epoch.
        leader_epoch: i32,
        /// The epoch the request named.
        request_epoch: i32,
    },
    /// A request that names a newer leader epoch than the partition's
    /// (KIP-320): this broker's metadata is behind.
    #[error("leader epoch {request_epoch} is newer than the partition's {leader_epoch}")]
    UnknownLeaderEpoch {
        /// The partition's leader epoch.
        leader_epoch: i32,
        /// The epoch the request named.
        request_epoch: i32,
    },
    /// A follower's copy of its leader's batches that starts below its
    /// log end or overlaps itself. Nothing was appended; the follower
    /// fetches again from its log end (or truncates).
    #[error("replicated batch at offset {got} where at least {expected} was expected")]
    ReplicaOffsetMismatch {
        /// The lowest offset the batch could start at.
        expected: i64,
        /// The base offset it had.
        got: i64,
    },
    /// The log is being truncated (a follower cutting back to its
    /// leader): appends and other truncations are refused until it ends.
    #[error("log is being truncated")]
    Truncating,
    /// An append other than the fetcher's to a partition this broker does
    /// not lead (it follows, or is offline): a follower's log is written
    /// only by its fetcher.
    #[error("not the partition's leader: only its fetcher appends")]
    NotLeader,
    /// An append stamped with a leader epoch older than the log's latest:
    /// epochs never go backwards in a log (a stale leader's write).
    #[error("leader epoch {stamped} is older than the log's latest epoch {latest}")]
    StaleLeaderEpoch {
        /// The epoch the append would have stamped.
        stamped: i32,
        /// The log's latest epoch.
        latest: i32,
    },
    /// A batch or marker of a producer epoch older than the partition knows:
    /// a newer instance of the producer has fenced this one.
    #[error(
        "producer {producer_id} epoch {epoch} is older than the current epoch {current_epoch}"
    )]
    InvalidProducerEpoch {
        /// Producer id.
        producer_id: i64,
        /// Epoch of the batch.
        epoch: i16,
        /// Epoch the partition knows.
        current_epoch: i16,
    },
    /// The data dir's file system is below its free-space reserve.
    #[error("disk almost full: {free_bytes} bytes free, below the {min_free_bytes}-byte reserve")]
    DiskFull {
        /// Free bytes at the last check.
        free_bytes: u64,
        /// The reserve.
        min_free_bytes: u64,
    },
    /// A partition found in two data dirs at start (which copy is right
    /// cannot be known: the broker does not start, as Kafka's).
    #[error("partition {partition} is in two data dirs, {first} and {second}: remove one copy")]
    DuplicatePartition {
        /// The partition.
        partition: String,
        /// One copy.
        first: String,
        /// The other.
        second: String,
    },
    /// A batch whose first sequence does not follow the producer's last one.
    #[error("producer {producer_id}: sequence {received} where {expected} was expected")]
    OutOfOrderSequence {
        /// Producer id.
        producer_id: i64,
        /// The sequence the partition expected.
        expected: i32,
        /// The batch's first sequence.
        received: i32,
    },
    /// A batch that does not fit the producer's transaction state.
    #[error("producer {producer_id}: invalid transaction state: {reason}")]
    InvalidTxnState {
        /// Producer id.
        producer_id: i64,
        /// What did not fit.
        reason: &'static str,
    },
    /// A transaction marker from a coordinator older than the last one seen.
    #[error("producer {producer_id}: coordinator epoch {coordinator_epoch} is older than {current_coordinator_epoch}")]
    TransactionCoordinatorFenced {
        /// Producer id.
        producer_id: i64,
        /// Coordinator epoch of the marker.
        coordinator_epoch: i32,
        /// Coordinator epoch the partition knows.
        current_coordinator_epoch: i32,
    },
}

impl EngineError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        EngineError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }

    /// Whether this is a write that found no space (ENOSPC, or EDQUOT: a
    /// quota): the disk is fine and the data may be written once space
    /// is freed.
    pub fn is_out_of_space(&self) -> bool {
        // glommio's I/O errors reach us as `io::Error`s that keep the
        // kind but not the OS error code.
        matches!(
            self,
            EngineError::Io { source, .. }
                if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
                    || matches!(
                        source.kind(),
                        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
                    )
        )
    }

    /// How the disk fault behind this error is handled: the one place that
    /// decides whether a failed write keeps its partition online
    /// (docs/disk-errors.md has the table).
    ///
    /// The OS error code decides where it is known; glommio turns its
    /// enhanced I/O errors into `io::Error::new(kind, message)`, which keeps
    /// the kind but drops the code, so the kind is looked at next, and for
    /// codes std has no stable kind for (EMFILE, ENFILE: `Uncategorized`)
    /// the `(os error N)` that glommio's message carries.
    pub fn fault_class(&self) -> FaultClass {
        let EngineError::Io { source, .. } = self else {
            return FaultClass::NotIo;
        };
        // Kept as it was: the full-disk rules are `is_out_of_space`'s.
        if self.is_out_of_space() {
            return FaultClass::OutOfSpace;
        }
        if let Some(errno) = source.raw_os_error().or_else(|| errno_in_message(source)) {
            return FaultClass::of_errno(errno);
        }
        match source.kind() {
            std::io::ErrorKind::OutOfMemory | std::io::ErrorKind::WouldBlock => {
                FaultClass::Transient
            }
            _ => FaultClass::Permanent,
        }
    }

    /// The Kafka protocol error code for this error.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            EngineError::Batch(e) => e.error_code(),
            EngineError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
            EngineError::OffsetInRemoteStorage { .. } => ErrorCode::OffsetMovedToTieredStorage,
            // Seen only by the follower's own fetcher, which, as after an
            // out-of-range fetch, re-checks its position against the leader.
            EngineError::ReplicaOffsetMismatch { .. } => ErrorCode::OffsetOutOfRange,
            EngineError::UnknownPartition { .. } => ErrorCode::UnknownTopicOrPartition,
            EngineError::PartitionExists { .. } => ErrorCode::TopicAlreadyExists,
            EngineError::InvalidConfig { .. } => ErrorCode::InvalidConfig,
            EngineError::Io { .. }
            | EngineError::DiskFull { .. }
            | EngineError::DuplicatePartition { .. } => ErrorCode::KafkaStorageError,
            // The client refreshes its metadata and finds the new owner.
            EngineError::Closed => ErrorCode::NotLeaderOrFollower,
            EngineError::FencedLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
            EngineError::UnknownLeaderEpoch { .. } => ErrorCode::UnknownLeaderEpoch,
            // Only a follower truncates: the client is at the wrong broker.
            EngineError::Truncating => ErrorCode::NotLeaderOrFollower,
            EngineError::NotLeader => ErrorCode::NotLeaderOrFollower,
            EngineError::StaleLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
            EngineError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequenceNumber,
            EngineError::InvalidProducerEpoch { .. } => ErrorCode::InvalidProducerEpoch,
            EngineError::InvalidTxnState { .. } => ErrorCode::InvalidTxnState,
            EngineError::TransactionCoordinatorFenced { .. } => {
                ErrorCode::TransactionCoordinatorFenced
            }
        }
    }
}

/// What a failed disk operation means for its partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultClass {
    /// The OS ran short of something that comes back by itself (file
    /// descriptors, memory, a non-blocking retry): the write is retried,
    /// new appends get a retriable error meanwhile, and the partition stays
    /// online.
    Transient,
    /// No space (ENOSPC, EDQUOT): the full-disk rules
    /// ([`EngineError::is_out_of_space`]).
    OutOfSpace,
    /// The disk failed (EIO, EROFS and anything not known to be
    /// transient): the partition goes offline until the broker restarts.
    Permanent,
    /// Not an I/O error.
    NotIo,
}

impl FaultClass {
    /// The class of an OS error code. Unknown codes are permanent: taking
    /// a partition offline is safe, retrying a write on a disk that is
    /// failing is not.
    pub fn of_errno(errno: i32) -> FaultClass {
        match errno {
            libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN | libc::EINTR => {
                FaultClass::Transient
            }
            libc::ENOSPC | libc::EDQUOT => FaultClass::OutOfSpace,
            _ => FaultClass::Permanent,
        }
    }
}

/// The `N` of a trailing `(os error N)` in `error`'s message: std's
/// `Display` of an OS error, which glommio's enhanced errors carry in
/// their message once converted to `io::Error`.
fn errno_in_message(error: &std::io::Error) -> Option<i32> {
    let message = error.to_string();
    let (_, after) = message.rsplit_once("(os error ")?;
    let (number, _) = after.split_once(')')?;
    number.parse().ok()
}

impl From<glommio::GlommioError<()>> for EngineError {
    /// Keeps the OS error of an I/O failure (a full disk is told from a
    /// failing one by it) and names the file and operation in the path.
    fn from(e: glommio::GlommioError<()>) -> Self {
        match e {
            glommio::GlommioError::IoError(source) => EngineError::Io {
                path: String::from("<glommio>"),
                source,
            },
            glommio::GlommioError::EnhancedIoError {
                source, op, path, ..
            } => EngineError::Io {
                path: match path {
                    Some(path) => format!("{} ({op})", path.display()),
                    None => format!("<glommio> ({op})"),
                },
                source,
            },
            other => EngineError::Io {
                path: String::from("<glommio>"),
                source: std::io::Error::other(other.to_string()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    fn io(source: Error) -> EngineError {
        EngineError::io("/data/t-0", source)
    }

    /// What glommio's `From<GlommioError> for io::Error` makes of an
    /// enhanced I/O error: the kind and the message, without the code.
    fn through_glommio(errno: i32) -> Error {
        let enhanced = glommio::GlommioError::<()>::EnhancedIoError {
            source: Error::from_raw_os_error(errno),
            op: "write",
            path: Some("/data/t-0/00000000000000000000.log".into()),
            fd: Some(7),
        };
        Error::from(enhanced)
    }

    #[test]
    fn every_errno_of_the_table_has_its_class() {
        let table = [
            (libc::EMFILE, FaultClass::Transient),
            (libc::ENFILE, FaultClass::Transient),
            (libc::ENOMEM, FaultClass::Transient),
            (libc::EAGAIN, FaultClass::Transient),
            (libc::EINTR, FaultClass::Transient),
            (libc::ENOSPC, FaultClass::OutOfSpace),
            (libc::EDQUOT, FaultClass::OutOfSpace),
            (libc::EIO, FaultClass::Permanent),
            (libc::EROFS, FaultClass::Permanent),
            (libc::EBADF, FaultClass::Permanent),
            (libc::ENODEV, FaultClass::Permanent),
        ];
        for (errno, class) in table {
            assert_eq!(FaultClass::of_errno(errno), class, "errno {errno}");
            let raw = io(Error::from_raw_os_error(errno));
            assert_eq!(raw.fault_class(), class, "raw errno {errno}");
            let glommio = through_glommio(errno);
            assert_eq!(glommio.raw_os_error(), None, "glommio drops the code");
            assert_eq!(
                io(glommio).fault_class(),
                class,
                "errno {errno} via glommio"
            );
        }
    }

    #[test]
    fn out_of_space_is_still_told_by_is_out_of_space() {
        for errno in [libc::ENOSPC, libc::EDQUOT] {
            let e = io(Error::from_raw_os_error(errno));
            assert!(e.is_out_of_space());
            assert_eq!(e.fault_class(), FaultClass::OutOfSpace);
        }
        let e = io(Error::new(ErrorKind::StorageFull, "no room"));
        assert_eq!(e.fault_class(), FaultClass::OutOfSpace);
    }

    #[test]
    fn errors_without_a_code_are_classed_by_kind() {
        let transient = [ErrorKind::OutOfMemory, ErrorKind::WouldBlock];
        for kind in transient {
            let e = io(Error::new(kind, "no code"));
            assert_eq!(e.fault_class(), FaultClass::Transient, "{kind:?}");
        }
        for kind in [
            ErrorKind::Other,
            ErrorKind::WriteZero,
            ErrorKind::UnexpectedEof,
            ErrorKind::ReadOnlyFilesystem,
        ] {
            let e = io(Error::new(kind, "no code"));
            assert_eq!(e.fault_class(), FaultClass::Permanent, "{kind:?}");
        }
        assert_eq!(
            io(Error::other("partition offline after a disk error")).fault_class(),
            FaultClass::Permanent
        );
    }

    #[test]
    fn errors_that_are_not_io_are_not_faults() {
        assert_eq!(EngineError::Closed.fault_class(), FaultClass::NotIo);
        let full = EngineError::DiskFull {
            free_bytes: 1,
            min_free_bytes: 2,
        };
        assert_eq!(full.fault_class(), FaultClass::NotIo);
    }
}

//! Retention by time and size.
//!
//! The work is done by `PartitionLog::apply_retention` (in `log/cleanup.rs`),
//! called by the log manager's background task every
//! `log.retention.check.interval.ms`: it deletes whole sealed segments whose
//! newest record is older than `retention.ms`, or that bring the partition
//! over `retention.bytes`, oldest first, and moves the log start offset. It
//! never touches the active segment, so it never blocks appends.
pub use crate::manager::LogManager;

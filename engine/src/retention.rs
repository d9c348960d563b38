//! Retention by time and size: which sealed segments are past
//! `retention.ms` or `retention.bytes`.
//!
//! The deletion itself is `PartitionLog::apply_retention` (in
//! `log/cleanup.rs`), called by the log manager's background task every
//! `log.retention.check.interval.ms`: it asks [`expired_prefix`] how many of
//! the oldest sealed segments to delete, deletes them, and moves the log
//! start offset. It never touches the active segment, so it never blocks
//! appends. The decision is kept here, pure, so the policy reads (and is
//! tested) apart from the file and transaction bookkeeping of a deletion.

use crate::types::{Offset, TimestampMs};

/// What retention needs to know of one sealed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSpan {
    /// One past the segment's last offset.
    pub next_offset: Offset,
    /// Newest record timestamp in the segment (-1: none).
    pub max_timestamp_ms: TimestampMs,
    /// Bytes of the segment.
    pub size_bytes: u64,
}

/// The retention settings of a topic (Kafka's; -1 turns one off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionLimits {
    /// `retention.ms`.
    pub retention_ms: i64,
    /// `retention.bytes`.
    pub retention_bytes: i64,
}

/// How many of the oldest `sealed` segments (oldest first) retention
/// deletes: each must lie wholly below `high_watermark`, and be strictly
/// older than `retention.ms` by its newest record, or leave the partition
/// (`total_bytes`, active segment included) at or over `retention.bytes`
/// even without it. The first segment kept stops the count: retention only
/// ever deletes a prefix of the log.
pub fn expired_prefix(
    sealed: impl IntoIterator<Item = SegmentSpan>,
    total_bytes: i64,
    limits: RetentionLimits,
    now_ms: TimestampMs,
    high_watermark: Offset,
) -> usize {
    let mut total = total_bytes;
    let mut count = 0usize;
    for segment in sealed {
        if segment.next_offset > high_watermark {
            break;
        }
        let expired_by_time = limits.retention_ms >= 0
            && segment.max_timestamp_ms >= 0
            && now_ms - segment.max_timestamp_ms > limits.retention_ms;
        let expired_by_size = limits.retention_bytes >= 0
            && total - segment.size_bytes as i64 >= limits.retention_bytes;
        if !(expired_by_time || expired_by_size) {
            break;
        }
        total -= segment.size_bytes as i64;
        count += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(next_offset: Offset, max_timestamp_ms: TimestampMs) -> SegmentSpan {
        SegmentSpan {
            next_offset,
            max_timestamp_ms,
            size_bytes: 100,
        }
    }

    const OFF: RetentionLimits = RetentionLimits {
        retention_ms: -1,
        retention_bytes: -1,
    };

    #[test]
    fn time_limit_deletes_the_strictly_older_prefix() {
        let limits = RetentionLimits {
            retention_ms: 1_000,
            ..OFF
        };
        let sealed = [span(10, 0), span(20, 500), span(30, 0)];
        // 1 000 ms after the first segment's newest record: not yet.
        assert_eq!(expired_prefix(sealed, 400, limits, 1_000, 100), 0);
        // The third is old enough but the second stops the count.
        assert_eq!(expired_prefix(sealed, 400, limits, 1_001, 100), 1);
        assert_eq!(expired_prefix(sealed, 400, limits, 1_501, 100), 3);
        // No timestamp: never expired by time.
        assert_eq!(expired_prefix([span(10, -1)], 200, limits, 1 << 40, 100), 0);
    }

    #[test]
    fn size_limit_deletes_until_the_rest_fits() {
        let limits = RetentionLimits {
            retention_bytes: 250,
            ..OFF
        };
        let sealed = [span(10, 0), span(20, 0), span(30, 0)];
        // 400 bytes (three sealed + the active): dropping the first leaves
        // 300, still at or over 250; dropping the second would not be.
        assert_eq!(expired_prefix(sealed, 400, limits, 0, 100), 1);
        let limits = RetentionLimits {
            retention_bytes: 200,
            ..OFF
        };
        assert_eq!(expired_prefix(sealed, 400, limits, 0, 100), 2);
        assert_eq!(expired_prefix(sealed, 400, OFF, 0, 100), 0);
    }

    #[test]
    fn nothing_at_or_above_the_high_watermark_goes() {
        let limits = RetentionLimits {
            retention_ms: 0,
            retention_bytes: 0,
        };
        let sealed = [span(10, 0), span(20, 0)];
        assert_eq!(expired_prefix(sealed, 300, limits, 1_000, 10), 1);
        assert_eq!(expired_prefix(sealed, 300, limits, 1_000, 9), 0);
    }
}

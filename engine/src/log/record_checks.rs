//! The rules a client's records must each keep (Kafka's `LogValidator`
//! record checks): a key on a compacted topic, and a CreateTime within
//! `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms` of
//! now. A batch with a record that breaks one is refused whole, and the
//! refusal names every bad record by its index in the batch (KIP-467,
//! [`BatchError::Records`]), so that a client fails those records with the
//! error and the rest of the batch as refused for their company.
//!
//! Why the records are decoded only when needed: the checks read each
//! record, which for a compressed batch means decompressing it. Keys are
//! checked on compacted topics only. Timestamps are checked through the
//! batch header's range first: with the default `before.max.ms` (no lower
//! bound), a batch whose `max_timestamp` lies within `after.max.ms` of now
//! needs no decoding. A client that writes a header `max_timestamp` below
//! its records' timestamps gets past this check, as its batch's
//! `max_timestamp` misleads every time index anyway.

use crate::batch::{self, BatchError, BatchHeader, RecordError, RecordErrors};
use std::ops::Range;

/// Kafka's `RecordBatch.NO_TIMESTAMP`: a record without a timestamp, which
/// no bound applies to.
const NO_TIMESTAMP: i64 = -1;

/// The bounds a CreateTime record's timestamp must keep, around one clock
/// reading.
#[derive(Debug, Clone, Copy)]
pub(super) struct TimestampBounds {
    /// The append's clock reading.
    pub now_ms: i64,
    /// `message.timestamp.before.max.ms`.
    pub before_max_ms: i64,
    /// `message.timestamp.after.max.ms`.
    pub after_max_ms: i64,
}

impl TimestampBounds {
    /// The earliest timestamp allowed.
    fn lowest_ms(&self) -> i64 {
        self.now_ms.saturating_sub(self.before_max_ms)
    }

    /// The latest timestamp allowed.
    fn highest_ms(&self) -> i64 {
        self.now_ms.saturating_add(self.after_max_ms)
    }

    /// Whether every record of a batch with this header surely keeps the
    /// bounds, without decoding it.
    fn header_suffices(&self, header: &BatchHeader) -> bool {
        header.max_timestamp <= self.highest_ms()
            && (self.before_max_ms == i64::MAX
                || header.base_timestamp.min(header.max_timestamp) >= self.lowest_ms())
    }

    fn admits(&self, timestamp_ms: i64) -> bool {
        timestamp_ms == NO_TIMESTAMP
            || (self.lowest_ms()..=self.highest_ms()).contains(&timestamp_ms)
    }
}

/// One data batch of a payload: its bytes' range and its header.
pub(super) type BatchAt<'a> = (&'a Range<usize>, &'a BatchHeader);

/// Refuses the first batch of `batches` (control batches skipped) with a
/// record that lacks a key, naming every such record: a compacted topic
/// keeps the newest record per key, so a record without one could never be
/// cleaned (Kafka's `LogValidator.validateKey`).
pub(super) fn require_keys<'a>(
    payload: &[u8],
    batches: impl Iterator<Item = BatchAt<'a>>,
) -> Result<(), BatchError> {
    for (range, _) in batches.filter(|(_, h)| !h.is_control()) {
        let records = batch::records(&payload[range.clone()])?;
        let bad: Vec<RecordError> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.key.is_none())
            .map(|(index, _)| RecordError {
                batch_index: index as i32,
                message: format!(
                    "Compacted topic cannot accept message without key (offset delta {})",
                    index
                ),
            })
            .collect();
        refuse_if_any(bad, false)?;
    }
    Ok(())
}

/// Refuses the first batch of `batches` (control batches skipped) with a
/// record whose CreateTime is out of `bounds`, naming every such record
/// (Kafka's `LogValidator.validateTimestamp`).
pub(super) fn check_timestamps<'a>(
    payload: &[u8],
    batches: impl Iterator<Item = BatchAt<'a>>,
    bounds: TimestampBounds,
) -> Result<(), BatchError> {
    for (range, header) in batches.filter(|(_, h)| !h.is_control()) {
        if bounds.header_suffices(header) {
            continue;
        }
        let records = batch::records(&payload[range.clone()])?;
        let bad: Vec<RecordError> = records
            .iter()
            .enumerate()
            .filter_map(|(index, r)| {
                let timestamp_ms = header.base_timestamp.saturating_add(r.timestamp_delta);
                (!bounds.admits(timestamp_ms)).then(|| RecordError {
                    batch_index: index as i32,
                    message: format!(
                        "Timestamp {timestamp_ms} of message with offset delta {index} is out \
                         of range. The timestamp should be within [{}, {}]",
                        bounds.lowest_ms(),
                        bounds.highest_ms()
                    ),
                })
            })
            .collect();
        refuse_if_any(bad, true)?;
    }
    Ok(())
}

fn refuse_if_any(bad: Vec<RecordError>, timestamps: bool) -> Result<(), BatchError> {
    if bad.is_empty() {
        Ok(())
    } else {
        Err(BatchError::Records(Box::new(RecordErrors::new(
            bad, timestamps,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchBuilder, Compression};
    use crate::error_code::ErrorCode;

    const NOW_MS: i64 = 1_700_000_000_000;
    const HOUR_MS: i64 = 3_600_000;

    /// One batch of `records` (timestamp, key), and its header.
    fn batch_of(records: &[(i64, Option<&[u8]>)], codec: Compression) -> (Vec<u8>, BatchHeader) {
        let mut builder = BatchBuilder::new(0, codec);
        for (i, (timestamp_ms, key)) in records.iter().enumerate() {
            builder.push(i as i32, *timestamp_ms, *key, Some(b"v"), &[]);
        }
        let bytes = builder.build().unwrap();
        let header = BatchHeader::parse(&bytes).unwrap();
        (bytes, header)
    }

    fn refused(result: Result<(), BatchError>) -> RecordErrors {
        match result {
            Err(BatchError::Records(errors)) => *errors,
            other => panic!("expected record errors, got {other:?}"),
        }
    }

    fn bounds(before_max_ms: i64, after_max_ms: i64) -> TimestampBounds {
        TimestampBounds {
            now_ms: NOW_MS,
            before_max_ms,
            after_max_ms,
        }
    }

    #[test]
    fn every_keyless_record_is_named_with_its_index_in_the_batch() {
        for codec in [Compression::None, Compression::Zstd] {
            let records: Vec<(i64, Option<&[u8]>)> = (0..20)
                .map(|i| (NOW_MS, (i % 10 != 0).then_some(&b"k"[..])))
                .collect();
            let (bytes, header) = batch_of(&records, codec);
            let range = 0..bytes.len();
            let errors = refused(require_keys(&bytes, [(&range, &header)].into_iter()));
            assert_eq!(errors.code, ErrorCode::InvalidRecord);
            let indexes: Vec<i32> = errors.records.iter().map(|r| r.batch_index).collect();
            assert_eq!(indexes, vec![0, 10], "{codec:?}");
            assert!(
                errors.message.contains("2 record errors"),
                "{}",
                errors.message
            );
        }
        let (bytes, header) = batch_of(&[(NOW_MS, Some(b"k"))], Compression::None);
        let range = 0..bytes.len();
        assert_eq!(
            require_keys(&bytes, [(&range, &header)].into_iter()),
            Ok(())
        );
    }

    #[test]
    fn timestamps_past_either_bound_are_named_and_no_timestamp_passes() {
        let records = [
            (NOW_MS, None),
            (NOW_MS + HOUR_MS + 1, None),
            (NOW_MS - 2 * HOUR_MS, None),
            (NO_TIMESTAMP, None),
            (NOW_MS + HOUR_MS, None),
        ];
        let (bytes, header) = batch_of(&records, Compression::Lz4);
        let range = 0..bytes.len();
        let check = |b| check_timestamps(&bytes, [(&range, &header)].into_iter(), b);
        // Kafka 4's defaults: no lower bound, one hour ahead.
        let errors = refused(check(bounds(i64::MAX, HOUR_MS)));
        assert_eq!(errors.code, ErrorCode::InvalidTimestamp);
        let indexes: Vec<i32> = errors.records.iter().map(|r| r.batch_index).collect();
        assert_eq!(indexes, vec![1]);
        // A lower bound of one hour also names the record two hours old.
        let errors = refused(check(bounds(HOUR_MS, HOUR_MS)));
        let indexes: Vec<i32> = errors.records.iter().map(|r| r.batch_index).collect();
        assert_eq!(indexes, vec![1, 2]);
        assert_eq!(check(bounds(i64::MAX, i64::MAX)), Ok(()));
        assert_eq!(check(bounds(3 * HOUR_MS, 2 * HOUR_MS)), Ok(()));
    }

    #[test]
    fn a_header_within_the_bounds_spares_the_decoding() {
        let (mut bytes, header) = batch_of(&[(NOW_MS, None)], Compression::None);
        // Records that cannot be decoded: only the header is read.
        let len = bytes.len();
        bytes[len - 3..].fill(0xff);
        let range = 0..bytes.len();
        let batches = || [(&range, &header)].into_iter();
        assert_eq!(
            check_timestamps(&bytes, batches(), bounds(i64::MAX, HOUR_MS)),
            Ok(())
        );
        assert!(check_timestamps(&bytes, batches(), bounds(HOUR_MS, HOUR_MS)).is_ok());
        // A bound the header's range breaks decodes the records.
        let err = check_timestamps(&bytes, batches(), bounds(i64::MAX, -HOUR_MS));
        assert!(err.is_err());
    }
}

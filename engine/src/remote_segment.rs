//! Reading a segment that lives in object storage (tiered storage,
//! KIP-405), as pure functions over the bytes fetched: the broker fetches
//! ranges of a remote segment's files, and this module says which range
//! and what of it to serve. It sits here because the file layouts (Kafka's
//! `.index`, `.txnindex` and RecordBatch v2) are the engine's; the broker
//! above knows none of them.
//!
//! A remote read is two fetches at most: the offset index (cached by the
//! broker), then the log from the indexed position. The index is sparse,
//! so the fetched range starts up to `index.interval.bytes` before the
//! batch wanted; [`serve_from`] skips to it and keeps whole batches only.

use crate::batch::batches;
use crate::index::{OffsetIndex, TimeIndex};
use crate::txn_index::decode_entries;
use crate::types::Offset;
use std::ops::Range;

/// The byte position in the segment's log to read from for `offset`: the
/// index entry at or before it (0 for an index that does not parse, which
/// only costs a longer scan).
pub fn position_for(
    index_bytes: &[u8],
    log_size_bytes: u64,
    base_offset: Offset,
    offset: Offset,
) -> u64 {
    let relative = (offset - base_offset).clamp(0, i64::from(u32::MAX)) as u32;
    OffsetIndex::from_bytes(index_bytes, log_size_bytes)
        .map_or(0, |index| u64::from(index.lookup(relative).1))
}

/// What a fetched range of a remote log gives a read of `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteServe {
    /// Serve this range of the fetched bytes: whole batches, the first
    /// holding `offset`, at most `max_bytes` unless the first alone is
    /// larger (as a local read, so a consumer always makes progress).
    Batches(Range<usize>),
    /// The batch holding `offset` starts at `start` in the fetched bytes
    /// but ends past them: fetch again from there, this many bytes.
    NeedBytes {
        /// Where the batch starts in the fetched bytes.
        start: usize,
        /// Its size.
        total_bytes: usize,
    },
    /// No batch in the bytes holds `offset` or anything after it; the
    /// whole batches end at `scanned` (read on from there, if the segment
    /// goes on).
    Nothing {
        /// Bytes of whole batches skipped.
        scanned: usize,
    },
}

/// Which bytes of `fetched` (a range of a remote segment's log that starts
/// at a batch boundary) serve a read of `offset` with `max_bytes`.
pub fn serve_from(fetched: &[u8], offset: Offset, max_bytes: usize) -> RemoteServe {
    let mut iter = batches(fetched);
    let mut first: Option<usize> = None;
    let mut end = 0;
    for item in iter.by_ref() {
        let Ok((header, range)) = item else {
            break;
        };
        if header.last_offset() < offset {
            continue;
        }
        match first {
            None => first = Some(range.start),
            Some(start) if range.end - start > max_bytes => break,
            Some(_) => {}
        }
        end = range.end;
    }
    match first {
        Some(start) => RemoteServe::Batches(start..end),
        None => match whole_size_at(fetched, iter.consumed_bytes()) {
            Some(total_bytes) => RemoteServe::NeedBytes {
                start: iter.consumed_bytes(),
                total_bytes,
            },
            None => RemoteServe::Nothing {
                scanned: iter.consumed_bytes(),
            },
        },
    }
}

/// The size of the batch that starts at `at` but is not whole in
/// `fetched`: Kafka's `baseOffset` (8 bytes) and `batchLength` (4) are
/// enough to know it.
fn whole_size_at(fetched: &[u8], at: usize) -> Option<usize> {
    let length: [u8; 4] = fetched.get(at + 8..at + 12)?.try_into().ok()?;
    let total = 12 + usize::try_from(i32::from_be_bytes(length)).ok()?;
    (at + total > fetched.len()).then_some(total)
}

/// The aborted transactions of a remote segment's `.txnindex` that overlap
/// `[from, to]`, as `(producer_id, first_offset)`, what a `read_committed`
/// fetch lists.
pub fn aborted_in(txn_index: &[u8], from: Offset, to: Offset) -> Vec<(i64, i64)> {
    decode_entries(txn_index)
        .0
        .into_iter()
        .filter(|txn| txn.first_offset <= to && txn.last_offset >= from)
        .map(|txn| (txn.producer_id, txn.first_offset))
        .collect()
}

/// Where a scan of a remote segment for `timestamp_ms` starts: the time
/// index's entry below it (Kafka's `.timeindex`, as a local lookup uses);
/// the segment's base for an index that does not parse, which only costs
/// a longer scan.
pub fn scan_start_for_timestamp(
    time_index: &[u8],
    base_offset: Offset,
    timestamp_ms: i64,
) -> Offset {
    TimeIndex::from_bytes(time_index).map_or(base_offset, |index| {
        base_offset + i64::from(index.lookup(timestamp_ms))
    })
}

/// The first record of the whole batches in `bytes` at or after
/// `min_offset` whose timestamp reaches `timestamp_ms`, as
/// `(offset, timestamp)`: a ListOffsets by timestamp, as the local log
/// answers it (a log-append-time batch's records all carry its max).
pub fn first_at_timestamp(
    bytes: &[u8],
    timestamp_ms: i64,
    min_offset: Offset,
) -> Option<(Offset, i64)> {
    for (header, range) in batches(bytes).map_while(Result::ok) {
        if header.max_timestamp < timestamp_ms || header.last_offset() < min_offset {
            continue;
        }
        let Ok(records) = crate::batch::records(&bytes[range]) else {
            return None;
        };
        for record in records {
            let offset = header.base_offset + i64::from(record.offset_delta);
            let ts = if header.timestamp_type_log_append() {
                header.max_timestamp
            } else {
                header.base_timestamp + record.timestamp_delta
            };
            if ts >= timestamp_ms && offset >= min_offset {
                return Some((offset, ts));
            }
        }
    }
    None
}

/// The last offset of the whole batches in `bytes`.
pub fn last_offset_in(bytes: &[u8]) -> Option<Offset> {
    batches(bytes)
        .map_while(Result::ok)
        .last()
        .map(|(header, _)| header.last_offset())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchBuilder, Compression};
    use crate::txn_index::{encode_entries, AbortedTxn};

    /// Batches of `count` records each at `base`, `base + count`, ...
    fn log_of(bases: &[i64], count: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for &base in bases {
            let mut builder = BatchBuilder::new(0, Compression::None);
            for i in 0..count {
                builder.push(i as i32, 0, None, Some(b"value".as_slice()), &[]);
            }
            let mut batch = builder.build().unwrap();
            batch[..8].copy_from_slice(&base.to_be_bytes());
            out.extend_from_slice(&batch);
        }
        out
    }

    #[test]
    fn serves_whole_batches_from_the_one_holding_the_offset() {
        let log = log_of(&[0, 10, 20, 30], 10);
        let one = log.len() / 4;
        assert_eq!(
            serve_from(&log, 15, 1 << 20),
            RemoteServe::Batches(one..log.len())
        );
        assert_eq!(
            serve_from(&log, 15, 2 * one),
            RemoteServe::Batches(one..3 * one)
        );
        // The first batch is served whole even past max_bytes.
        assert_eq!(serve_from(&log, 0, 1), RemoteServe::Batches(0..one));
        assert_eq!(
            serve_from(&log, 40, 1 << 20),
            RemoteServe::Nothing { scanned: log.len() }
        );
        // Cut inside the second batch: fetch it whole from its start.
        assert_eq!(
            serve_from(&log[..one + 20], 12, 1 << 20),
            RemoteServe::NeedBytes {
                start: one,
                total_bytes: one
            }
        );
        assert_eq!(last_offset_in(&log[..2 * one + 3]), Some(19));
    }

    #[test]
    fn the_index_gives_the_position_at_or_before_the_offset() {
        let mut index = OffsetIndex::new();
        index.append(10, 700);
        index.append(20, 1400);
        let bytes = index.to_bytes();
        assert_eq!(position_for(&bytes, 5000, 100, 105), 0);
        assert_eq!(position_for(&bytes, 5000, 100, 115), 700);
        assert_eq!(position_for(&bytes, 5000, 100, 500), 1400);
        // A torn index only costs a scan from the start.
        assert_eq!(position_for(&bytes[..5], 5000, 100, 500), 0);
    }

    #[test]
    fn aborted_transactions_overlapping_the_range_are_listed() {
        let txn = |producer_id, first_offset, last_offset| AbortedTxn {
            producer_id,
            first_offset,
            last_offset,
            last_stable_offset: 0,
        };
        let bytes = encode_entries(&[txn(1, 0, 5), txn(2, 10, 20), txn(3, 30, 40)]);
        assert_eq!(aborted_in(&bytes, 6, 25), vec![(2, 10)]);
        assert_eq!(aborted_in(&bytes, 0, 100).len(), 3);
        assert!(aborted_in(&[], 0, 100).is_empty());
    }

    #[test]
    fn a_timestamp_is_found_at_its_first_record_at_or_after_the_start() {
        let mut bytes = Vec::new();
        for (base, first_ts) in [(100i64, 1_000i64), (110, 2_000)] {
            let mut builder = BatchBuilder::new(base, Compression::None);
            for i in 0..10 {
                builder.push(i, first_ts + i64::from(i), None, Some(b"v".as_slice()), &[]);
            }
            bytes.extend_from_slice(&builder.build().unwrap());
        }
        assert_eq!(first_at_timestamp(&bytes, 1_005, 0), Some((105, 1_005)));
        assert_eq!(first_at_timestamp(&bytes, 1_500, 0), Some((110, 2_000)));
        assert_eq!(first_at_timestamp(&bytes, 0, 112), Some((112, 2_002)));
        assert_eq!(first_at_timestamp(&bytes, 9_999, 0), None);

        let mut index = TimeIndex::new();
        index.maybe_append(1_009, 0);
        index.maybe_append(2_009, 10);
        let index = index.to_bytes();
        assert_eq!(scan_start_for_timestamp(&index, 100, 2_000), 100);
        assert_eq!(scan_start_for_timestamp(&index, 100, 2_010), 110);
        // A torn index only costs a scan from the segment's base.
        assert_eq!(scan_start_for_timestamp(&index[..5], 100, 2_010), 100);
    }
}

//! The aborted-transaction index: Kafka's `.txnindex`, one per segment.
//!
//! When an ABORT marker is appended, the aborted transaction — producer id,
//! first offset, last offset (the marker's) and the last stable offset at
//! that time — is recorded in the index of the segment that holds the marker.
//! A `read_committed` fetch lists the aborted transactions that overlap the
//! range it returns, so the consumer can drop their records.
//!
//! File format (Kafka's): a sequence of 34-byte entries, each `version i16 =
//! 0, producer_id i64, first_offset i64, last_offset i64, last_stable_offset
//! i64`, big-endian. The file exists only for segments with an abort. The
//! whole index is kept in memory, per segment (aborts are rare: a few bytes
//! per abort), and a segment's file is rewritten when it changes state on
//! disk (roll, close, truncation).
//! Shard-local.

use crate::error::EngineError;
use crate::segment::write_file_synced;
use std::collections::BTreeMap;
use std::path::Path;

/// Bytes of one entry on disk.
pub const ENTRY_BYTES: usize = 34;

/// One aborted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// Producer id.
    pub producer_id: i64,
    /// First offset of the transaction's data.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// Last stable offset when the marker was appended (used by cleaners).
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&0i16.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.first_offset.to_be_bytes());
        out.extend_from_slice(&self.last_offset.to_be_bytes());
        out.extend_from_slice(&self.last_stable_offset.to_be_bytes());
    }

    fn decode(entry: &[u8]) -> Option<AbortedTxn> {
        let field = |at: usize| -> Option<i64> {
            let bytes: [u8; 8] = entry.get(at..at + 8)?.try_into().ok()?;
            Some(i64::from_be_bytes(bytes))
        };
        let version: [u8; 2] = entry.get(..2)?.try_into().ok()?;
        if i16::from_be_bytes(version) != 0 {
            return None;
        }
        Some(AbortedTxn {
            producer_id: field(2)?,
            first_offset: field(10)?,
            last_offset: field(18)?,
            last_stable_offset: field(26)?,
        })
    }
}

/// Kafka's bytes of a list of entries.
pub fn encode_entries(entries: &[AbortedTxn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for entry in entries {
        entry.encode(&mut out);
    }
    out
}

/// Parses a `.txnindex` file. A torn last entry (crash while writing) or an
/// entry of an unknown version ends the list; the caller logs it.
pub fn decode_entries(bytes: &[u8]) -> (Vec<AbortedTxn>, bool) {
    let mut out = Vec::with_capacity(bytes.len() / ENTRY_BYTES);
    for chunk in bytes.chunks(ENTRY_BYTES) {
        match AbortedTxn::decode(chunk).filter(|_| chunk.len() == ENTRY_BYTES) {
            Some(entry) => out.push(entry),
            None => return (out, false),
        }
    }
    (out, true)
}

/// The aborted transactions of a partition, by segment base offset.
/// Shard-local.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnIndex {
    by_segment: BTreeMap<i64, Vec<AbortedTxn>>,
}

impl TxnIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an abort whose marker lies in the segment based at `segment_base`.
    pub fn add(&mut self, segment_base: i64, entry: AbortedTxn) {
        let entries = self.by_segment.entry(segment_base).or_default();
        assert!(
            !matches!(entries.last(), Some(last) if last.last_offset >= entry.last_offset),
            "aborted transactions are recorded in marker order"
        );
        entries.push(entry);
    }

    /// Replaces the entries of one segment (loaded from its file).
    pub fn set_segment(&mut self, segment_base: i64, entries: Vec<AbortedTxn>) {
        if entries.is_empty() {
            self.by_segment.remove(&segment_base);
        } else {
            self.by_segment.insert(segment_base, entries);
        }
    }

    /// The entries of one segment.
    pub fn segment_entries(&self, segment_base: i64) -> &[AbortedTxn] {
        self.by_segment
            .get(&segment_base)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Keeps only the segments whose base offsets `keep` says.
    pub fn retain_segments(&mut self, keep: impl Fn(i64) -> bool) {
        self.by_segment.retain(|&base, _| keep(base));
    }

    /// Drops the entries whose marker is at or after `offset`; returns the
    /// bases of the segments that changed.
    pub fn truncate_from(&mut self, offset: i64) -> Vec<i64> {
        let mut changed = Vec::new();
        for (&base, entries) in self.by_segment.iter_mut() {
            let before = entries.len();
            entries.retain(|e| e.last_offset < offset);
            if entries.len() != before {
                changed.push(base);
            }
        }
        self.by_segment.retain(|_, entries| !entries.is_empty());
        changed
    }

    /// The aborted transactions that overlap `[fetch_offset, upper_offset]`:
    /// `first_offset <= upper_offset` and `last_offset >= fetch_offset`, as
    /// `(producer_id, first_offset)`, in marker order. Kafka's fetch answer.
    pub fn overlapping(&self, fetch_offset: i64, upper_offset: i64) -> Vec<(i64, i64)> {
        // A marker at or after `fetch_offset` lies in the segment holding
        // `fetch_offset` or a later one.
        let from = self
            .by_segment
            .range(..=fetch_offset)
            .next_back()
            .map(|(&base, _)| base)
            .unwrap_or(i64::MIN);
        self.by_segment
            .range(from..)
            .flat_map(|(_, entries)| entries.iter())
            .filter(|e| e.first_offset <= upper_offset && e.last_offset >= fetch_offset)
            .map(|e| (e.producer_id, e.first_offset))
            .collect()
    }

    /// Every entry, in marker order.
    pub fn all(&self) -> Vec<AbortedTxn> {
        self.by_segment.values().flatten().copied().collect()
    }
}

/// Loads a segment's `.txnindex`; an absent file is an empty index.
pub fn load_file(path: &Path) -> Result<Vec<AbortedTxn>, EngineError> {
    let bytes = match crate::disk::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(EngineError::io(path, e)),
    };
    let (entries, whole) = decode_entries(&bytes);
    if !whole {
        tracing::warn!(path = %path.display(), kept = entries.len(),
            "transaction index ends with a torn or unknown entry; keeping the entries before it");
    }
    Ok(entries)
}

/// Writes a segment's `.txnindex` (removing it when there is no entry).
pub fn write_file(path: &Path, entries: &[AbortedTxn]) -> Result<(), EngineError> {
    if entries.is_empty() {
        return match crate::disk::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(EngineError::io(path, e)),
        };
    }
    write_file_synced(path, &encode_entries(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(producer_id: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
        }
    }

    #[test]
    fn entries_round_trip_in_kafkas_layout() {
        let entries = vec![entry(7, 10, 20), entry(8, 15, 30)];
        let bytes = encode_entries(&entries);
        assert_eq!(bytes.len(), 2 * ENTRY_BYTES);
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &7i64.to_be_bytes());
        assert_eq!(decode_entries(&bytes), (entries.clone(), true));
        assert_eq!(decode_entries(&bytes[..50]), (entries[..1].to_vec(), false));
    }

    #[test]
    fn overlap_and_truncation() {
        let mut index = TxnIndex::new();
        index.add(0, entry(1, 0, 5));
        index.add(0, entry(2, 3, 9));
        index.add(100, entry(3, 50, 120));
        assert_eq!(index.overlapping(6, 60), vec![(2, 3), (3, 50)]);
        assert_eq!(index.overlapping(0, 2), vec![(1, 0)]);
        assert_eq!(index.overlapping(121, 200), vec![]);
        assert_eq!(index.overlapping(110, 200), vec![(3, 50)]);
        assert_eq!(index.truncate_from(9), vec![0, 100]);
        assert_eq!(index.all(), vec![entry(1, 0, 5)]);
    }
}

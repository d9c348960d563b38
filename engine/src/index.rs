//! The sparse offset index and the time index of one segment.
//!
//! Both follow Kafka's file formats so that operators' tools read them:
//! `.index` holds 8-byte entries (relative offset u32, file position u32),
//! `.timeindex` 12-byte entries (timestamp i64, relative offset u32), all
//! big-endian. As in Kafka, both get an entry only once `index.interval.bytes`
//! of log data were appended since the last one (the time index's entry is
//! the largest timestamp so far and the batch that first reached it), plus a
//! last time entry when the segment is sealed, so lookups are a binary search
//! here and a short forward scan of the log.
//! The active segment's indexes live in memory (see `segment`); a sealed
//! segment's are written out and read back on demand through the shard's
//! bounded [`crate::index_cache`]. A missing or inconsistent file is rebuilt
//! from the log (see `recovery` at open, `index_cache` on demand).

/// Bytes of one `.index` entry.
pub const OFFSET_ENTRY_BYTES: usize = 8;
/// Bytes of one `.timeindex` entry.
pub const TIME_ENTRY_BYTES: usize = 12;

/// Sparse map from relative offset to the file position of the batch that starts there.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<(u32, u32)>,
}

impl OffsetIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes the index takes on disk.
    pub fn size_bytes(&self) -> u64 {
        (self.entries.len() * OFFSET_ENTRY_BYTES) as u64
    }

    /// Bytes the entries take in memory.
    pub fn heap_bytes(&self) -> u64 {
        (self.entries.capacity() * std::mem::size_of::<(u32, u32)>()) as u64
    }

    /// The newest entry.
    pub fn last(&self) -> Option<(u32, u32)> {
        self.entries.last().copied()
    }

    /// Adds an entry; entries must grow in both offset and position.
    pub fn append(&mut self, relative_offset: u32, position: u32) {
        if let Some(&(last_offset, last_position)) = self.entries.last() {
            assert!(
                relative_offset > last_offset && position > last_position,
                "index entries must increase: ({last_offset},{last_position}) then ({relative_offset},{position})"
            );
        }
        self.entries.push((relative_offset, position));
    }

    /// The entry with the largest relative offset `<= relative_offset`, or `(0, 0)`.
    pub fn lookup(&self, relative_offset: u32) -> (u32, u32) {
        let idx = self.entries.partition_point(|&(o, _)| o <= relative_offset);
        if idx == 0 {
            (0, 0)
        } else {
            self.entries[idx - 1]
        }
    }

    /// The batch-start positions known to the index, in `(lo, hi]`.
    pub fn largest_position_at_most(&self, position: u32) -> Option<u32> {
        let idx = self.entries.partition_point(|&(_, p)| p <= position);
        (idx > 0).then(|| self.entries[idx - 1].1)
    }

    /// Drops every entry at or after `relative_offset` (truncation).
    pub fn truncate_to_offset(&mut self, relative_offset: u32) {
        let idx = self.entries.partition_point(|&(o, _)| o < relative_offset);
        self.entries.truncate(idx);
    }

    /// Serialises in Kafka's `.index` format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * OFFSET_ENTRY_BYTES);
        for &(o, p) in &self.entries {
            out.extend_from_slice(&o.to_be_bytes());
            out.extend_from_slice(&p.to_be_bytes());
        }
        out
    }

    /// Parses a `.index` file; `None` when it is corrupt (length, order, or a
    /// position past `log_size_bytes`), in which case the caller rebuilds it.
    pub fn from_bytes(bytes: &[u8], log_size_bytes: u64) -> Option<Self> {
        if !bytes.len().is_multiple_of(OFFSET_ENTRY_BYTES) {
            return None;
        }
        let mut index = OffsetIndex::new();
        for chunk in bytes.chunks_exact(OFFSET_ENTRY_BYTES) {
            let o = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let p = u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
            if let Some(&(lo, lp)) = index.entries.last() {
                if o <= lo || p <= lp {
                    return None;
                }
            }
            if u64::from(p) >= log_size_bytes {
                return None;
            }
            index.entries.push((o, p));
        }
        Some(index)
    }
}

/// Sparse map from a timestamp to the first relative offset of a batch whose
/// max timestamp reaches it. Entries grow strictly in timestamp, as Kafka's do.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<(i64, u32)>,
}

impl TimeIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes the index takes on disk.
    pub fn size_bytes(&self) -> u64 {
        (self.entries.len() * TIME_ENTRY_BYTES) as u64
    }

    /// Bytes the entries take in memory.
    pub fn heap_bytes(&self) -> u64 {
        (self.entries.capacity() * std::mem::size_of::<(i64, u32)>()) as u64
    }

    /// Adds an entry when `timestamp_ms` is larger than the last one.
    pub fn maybe_append(&mut self, timestamp_ms: i64, relative_offset: u32) {
        match self.entries.last() {
            Some(&(t, o)) if timestamp_ms <= t || relative_offset <= o => {}
            _ => self.entries.push((timestamp_ms, relative_offset)),
        }
    }

    /// The relative offset from which to scan for the first batch with a
    /// timestamp `>= timestamp_ms`: the offset of the last entry whose
    /// timestamp is below it (or 0). Sound for a sparse index: an entry
    /// `(t, o)` says batch `o` is the first whose max timestamp reached `t`,
    /// so every batch before `o` stays below `t < timestamp_ms`.
    pub fn lookup(&self, timestamp_ms: i64) -> u32 {
        let idx = self.entries.partition_point(|&(t, _)| t < timestamp_ms);
        if idx == 0 {
            0
        } else {
            self.entries[idx - 1].1
        }
    }

    /// Drops every entry at or after `relative_offset`.
    pub fn truncate_to_offset(&mut self, relative_offset: u32) {
        let idx = self.entries.partition_point(|&(_, o)| o < relative_offset);
        self.entries.truncate(idx);
    }

    /// The newest entry: the segment's largest timestamp and its batch.
    pub fn last(&self) -> Option<(i64, u32)> {
        self.entries.last().copied()
    }

    /// Serialises in Kafka's `.timeindex` format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * TIME_ENTRY_BYTES);
        for &(t, o) in &self.entries {
            out.extend_from_slice(&t.to_be_bytes());
            out.extend_from_slice(&o.to_be_bytes());
        }
        out
    }

    /// Parses a `.timeindex` file; `None` when it is corrupt.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if !bytes.len().is_multiple_of(TIME_ENTRY_BYTES) {
            return None;
        }
        let mut index = TimeIndex::new();
        for chunk in bytes.chunks_exact(TIME_ENTRY_BYTES) {
            let mut t = [0u8; 8];
            t.copy_from_slice(&chunk[..8]);
            let t = i64::from_be_bytes(t);
            let o = u32::from_be_bytes([chunk[8], chunk[9], chunk[10], chunk[11]]);
            if let Some(&(lt, lo)) = index.entries.last() {
                if t <= lt || o <= lo {
                    return None;
                }
            }
            index.entries.push((t, o));
        }
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_lookup_finds_floor_entry() {
        let mut index = OffsetIndex::new();
        assert_eq!(index.lookup(5), (0, 0));
        index.append(10, 4096);
        index.append(20, 8192);
        assert_eq!(index.lookup(9), (0, 0));
        assert_eq!(index.lookup(10), (10, 4096));
        assert_eq!(index.lookup(19), (10, 4096));
        assert_eq!(index.lookup(1000), (20, 8192));
        assert_eq!(index.largest_position_at_most(8191), Some(4096));
        assert_eq!(index.largest_position_at_most(100), None);
    }

    #[test]
    fn offset_index_round_trips_and_rejects_garbage() {
        let mut index = OffsetIndex::new();
        index.append(1, 100);
        index.append(7, 900);
        let bytes = index.to_bytes();
        assert_eq!(OffsetIndex::from_bytes(&bytes, 1000), Some(index.clone()));
        assert_eq!(
            OffsetIndex::from_bytes(&bytes, 900),
            None,
            "position past log end"
        );
        assert_eq!(OffsetIndex::from_bytes(&bytes[..5], 1000), None);
        let mut swapped = bytes[8..].to_vec();
        swapped.extend_from_slice(&bytes[..8]);
        assert_eq!(OffsetIndex::from_bytes(&swapped, 1000), None);
    }

    #[test]
    fn truncation_drops_entries_at_and_after() {
        let mut index = OffsetIndex::new();
        index.append(1, 100);
        index.append(7, 900);
        index.truncate_to_offset(7);
        assert_eq!(index.len(), 1);
        let mut time = TimeIndex::new();
        time.maybe_append(10, 1);
        time.maybe_append(10, 2);
        time.maybe_append(20, 7);
        assert_eq!(time.len(), 2);
        assert_eq!(time.lookup(15), 1);
        assert_eq!(time.lookup(10), 0);
        assert_eq!(time.lookup(21), 7);
        time.truncate_to_offset(7);
        assert_eq!(time.len(), 1);
        assert_eq!(TimeIndex::from_bytes(&time.to_bytes()), Some(time));
    }
}

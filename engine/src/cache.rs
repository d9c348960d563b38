//! The per-shard cache of recent batches.
//!
//! Tailing consumers ask for what was just written; serving them from memory
//! keeps the copy path off the disk (the log is written with O_DIRECT, so
//! the page cache does not hold it). Each partition keeps its recently
//! readable write chunks in order; the shard keeps one FIFO over all of them
//! and evicts the oldest when the byte budget is exceeded. Chunks are whole
//! batches, contiguous in offsets, so a read can be cut from them directly.

use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

/// A run of whole batches of one partition, `[first_offset, next_offset)`.
#[derive(Debug, Clone)]
pub struct CachedChunk {
    /// Cache-wide id, to match FIFO entries with partition entries.
    pub id: u64,
    /// Base offset of the first batch.
    pub first_offset: i64,
    /// One past the last offset.
    pub next_offset: i64,
    /// The batches, as written.
    pub bytes: Bytes,
}

/// The chunks of one partition, oldest first.
pub type PartitionChunks = Rc<RefCell<VecDeque<CachedChunk>>>;

/// One FIFO entry: the partition's chunks, the chunk id, its length.
type EvictionEntry = (Weak<RefCell<VecDeque<CachedChunk>>>, u64, usize);

/// Shard-wide cache budget and eviction order. Shard-local.
pub struct BatchCache {
    capacity_bytes: usize,
    used_bytes: Cell<usize>,
    next_id: Cell<u64>,
    order: RefCell<VecDeque<EvictionEntry>>,
}

impl BatchCache {
    /// A cache holding at most `capacity_bytes`.
    pub fn new(capacity_bytes: usize) -> Self {
        BatchCache {
            capacity_bytes,
            used_bytes: Cell::new(0),
            next_id: Cell::new(0),
            order: RefCell::new(VecDeque::new()),
        }
    }

    /// The budget, in bytes.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// Bytes held now.
    pub fn used_bytes(&self) -> usize {
        self.used_bytes.get()
    }

    /// Adds a chunk for a partition, evicting the oldest chunks over budget.
    pub fn insert(
        &self,
        partition: &PartitionChunks,
        first_offset: i64,
        next_offset: i64,
        bytes: Bytes,
    ) {
        let len = bytes.len();
        if len == 0 || len > self.capacity_bytes {
            return;
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        partition.borrow_mut().push_back(CachedChunk {
            id,
            first_offset,
            next_offset,
            bytes,
        });
        self.order
            .borrow_mut()
            .push_back((Rc::downgrade(partition), id, len));
        self.used_bytes.set(self.used_bytes.get() + len);
        while self.used_bytes.get() > self.capacity_bytes {
            let Some((weak, id, len)) = self.order.borrow_mut().pop_front() else {
                break;
            };
            self.used_bytes.set(self.used_bytes.get() - len);
            if let Some(chunks) = weak.upgrade() {
                let mut chunks = chunks.borrow_mut();
                if chunks.front().map(|c| c.id) == Some(id) {
                    chunks.pop_front();
                }
            }
        }
    }

    /// Forgets a partition's chunks (truncation, deletion); their budget is
    /// returned as their FIFO entries come up.
    pub fn clear(partition: &PartitionChunks) {
        partition.borrow_mut().clear();
    }
}

/// Cuts whole batches starting at the batch that holds `offset` from the
/// chunks, up to `max_bytes` (at least one batch), never past `limit_offset`.
/// The batches come as slices of the cached chunks, one per chunk touched
/// (its batches are contiguous), not joined: a send path gathers them into
/// one `sendmsg`. `None` when the chunks do not hold `offset`.
pub fn read_from_chunks(
    chunks: &VecDeque<CachedChunk>,
    offset: i64,
    max_bytes: usize,
    limit_offset: i64,
) -> Option<Vec<Bytes>> {
    // Chunks are in offset order (appended in order, evicted from the
    // front, cleared on truncation): a binary search finds the one holding
    // `offset`, where a scan would walk every cached chunk of the partition
    // (tens of thousands of small batches) on each tailing fetch.
    let start_idx = chunks
        .partition_point(|c| c.first_offset <= offset)
        .checked_sub(1)?;
    if offset >= chunks[start_idx].next_offset {
        return None;
    }
    let mut out: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    let mut expected_first = chunks[start_idx].first_offset;
    'chunks: for chunk in chunks.iter().skip(start_idx) {
        if chunk.first_offset != expected_first || chunk.next_offset > limit_offset {
            break;
        }
        expected_first = chunk.next_offset;
        // The byte range of this chunk's batches taken so far.
        let mut taken: Option<std::ops::Range<usize>> = None;
        for item in crate::batch::batches(&chunk.bytes) {
            let Ok((header, range)) = item else { break };
            if header.last_offset() < offset {
                continue;
            }
            let len = range.len();
            if total > 0 && total + len > max_bytes {
                if let Some(taken) = taken {
                    out.push(chunk.bytes.slice(taken));
                }
                break 'chunks;
            }
            total += len;
            taken = Some(match taken {
                Some(t) => t.start..range.end,
                None => range,
            });
        }
        if let Some(taken) = taken {
            out.push(chunk.bytes.slice(taken));
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The pieces joined into one buffer (no copy for a single piece).
pub fn concat(parts: Vec<Bytes>) -> Bytes {
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap_or_default();
    }
    let mut all = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
    for p in parts {
        all.extend_from_slice(&p);
    }
    Bytes::from(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchBuilder, Compression};

    /// A chunk of `batches` batches of `records` records each, from `first`.
    fn chunk(id: u64, first: i64, batches: usize, records: i32) -> CachedChunk {
        let mut bytes = Vec::new();
        let mut base = first;
        for _ in 0..batches {
            let mut builder = BatchBuilder::new(base, Compression::None);
            for delta in 0..records {
                builder.push(delta, 1_700_000_000_000, None, Some(b"value"), &[]);
            }
            bytes.extend(builder.build().expect("batch"));
            base += i64::from(records);
        }
        CachedChunk {
            id,
            first_offset: first,
            next_offset: base,
            bytes: Bytes::from(bytes),
        }
    }

    /// Base offsets of the batches in `parts`.
    fn bases(parts: &[Bytes]) -> Vec<i64> {
        parts
            .iter()
            .flat_map(|p| crate::batch::batches(p).map(|b| b.expect("batch").0.base_offset))
            .collect()
    }

    /// Chunks [0,6) [6,12) [12,18): two batches of three records each.
    fn three_chunks() -> VecDeque<CachedChunk> {
        (0..3).map(|i| chunk(i, i as i64 * 6, 2, 3)).collect()
    }

    #[test]
    fn reads_from_the_chunk_holding_the_offset_to_the_end() {
        let chunks = three_chunks();
        let all = usize::MAX;
        let read = |offset| read_from_chunks(&chunks, offset, all, i64::MAX).map(|p| bases(&p));
        assert_eq!(read(0), Some(vec![0, 3, 6, 9, 12, 15]));
        // Within a batch: that whole batch comes first.
        assert_eq!(read(4), Some(vec![3, 6, 9, 12, 15]));
        assert_eq!(read(6), Some(vec![6, 9, 12, 15]));
        assert_eq!(read(13), Some(vec![12, 15]));
        assert_eq!(read(17), Some(vec![15]));
        assert_eq!(read(18), None, "past the last chunk");
        assert_eq!(read(-1), None, "before the first chunk");
    }

    #[test]
    fn offsets_below_an_evicted_front_are_misses() {
        let mut chunks = three_chunks();
        chunks.pop_front();
        assert_eq!(read_from_chunks(&chunks, 5, usize::MAX, i64::MAX), None);
        let read = read_from_chunks(&chunks, 6, usize::MAX, i64::MAX).expect("hit");
        assert_eq!(bases(&read), vec![6, 9, 12, 15]);
    }

    #[test]
    fn a_gap_between_chunks_ends_the_read() {
        let mut chunks = three_chunks();
        chunks.remove(1);
        let read = read_from_chunks(&chunks, 0, usize::MAX, i64::MAX).expect("hit");
        assert_eq!(bases(&read), vec![0, 3]);
        assert_eq!(read_from_chunks(&chunks, 7, usize::MAX, i64::MAX), None);
        let read = read_from_chunks(&chunks, 12, usize::MAX, i64::MAX).expect("hit");
        assert_eq!(bases(&read), vec![12, 15]);
    }

    #[test]
    fn max_bytes_and_limit_offset_bound_the_read() {
        let chunks = three_chunks();
        let batch_bytes = {
            let first = &chunks[0].bytes;
            first.len() / 2
        };
        // At least one batch, however small max_bytes is.
        let read = read_from_chunks(&chunks, 0, 1, i64::MAX).expect("hit");
        assert_eq!(bases(&read), vec![0]);
        let read = read_from_chunks(&chunks, 0, 3 * batch_bytes, i64::MAX).expect("hit");
        assert_eq!(bases(&read), vec![0, 3, 6]);
        // Whole chunks below the limit only.
        let read = read_from_chunks(&chunks, 0, usize::MAX, 12).expect("hit");
        assert_eq!(bases(&read), vec![0, 3, 6, 9]);
        assert_eq!(read_from_chunks(&chunks, 12, usize::MAX, 12), None);
    }

    #[test]
    fn eviction_keeps_the_budget_and_drops_the_oldest_first() {
        let chunk_bytes = chunk(0, 0, 1, 1).bytes.len();
        let cache = BatchCache::new(chunk_bytes * 2);
        let partition: PartitionChunks = Rc::new(RefCell::new(VecDeque::new()));
        for i in 0..3 {
            let c = chunk(0, i, 1, 1);
            cache.insert(&partition, c.first_offset, c.next_offset, c.bytes);
        }
        assert_eq!(cache.used_bytes(), chunk_bytes * 2);
        let firsts: Vec<i64> = partition.borrow().iter().map(|c| c.first_offset).collect();
        assert_eq!(firsts, vec![1, 2]);
    }
}

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
    let start_idx = chunks
        .iter()
        .position(|c| c.first_offset <= offset && offset < c.next_offset)?;
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

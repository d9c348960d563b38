//! Where each partition's next append will start in its segment file, for
//! the connection that receives the append.
//!
//! An O_DIRECT write needs its memory aligned like its file position. A
//! connection that knows a partition's next file position can receive that
//! partition's records at the same offset within a memory block, and the
//! appender then writes their whole blocks from where they lie, without
//! the copy into DMA buffers (`appender::plan`). The position is a hint:
//! another producer's append in between, a segment roll or a rewritten
//! batch make it wrong, and a wrong hint only costs that copy.
//!
//! Shared by all shards: a log publishes on its owner shard, any shard's
//! connections read. One lock per topic lookup, one atomic store per append.

use crate::types::TopicPartition;
use bytes::{Buf, BytesMut};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

/// The memory block appends are placed in: the page, the largest alignment
/// a segment file asks for on common filesystems.
pub const PLACEMENT_BLOCK_BYTES: usize = 4096;

/// An empty buffer with room for `capacity` bytes whose first byte lies at
/// the offset within a [`PLACEMENT_BLOCK_BYTES`] block of memory that
/// `position` has within a block of the file.
pub fn placed_buffer(capacity: usize, position: u64) -> BytesMut {
    let offset = (position % PLACEMENT_BLOCK_BYTES as u64) as usize;
    let mut buf = BytesMut::with_capacity(capacity + PLACEMENT_BLOCK_BYTES);
    let at = buf.as_ptr() as usize % PLACEMENT_BLOCK_BYTES;
    let pad = (offset + PLACEMENT_BLOCK_BYTES - at) % PLACEMENT_BLOCK_BYTES;
    buf.resize(pad, 0);
    buf.advance(pad);
    buf
}

/// A copy of `bytes` placed for file position `position` (see
/// [`placed_buffer`]): where a copy is made anyway, placing it lets the
/// appender write it without a second one.
/// A copy too small to hold a run of whole blocks worth writing on its own
/// (`appender::plan` writes 32 KiB or more) is made as it comes, without
/// the block of room placement takes.
pub fn placed_copy(bytes: &[u8], position: u64) -> BytesMut {
    if bytes.len() < PLACED_COPY_MIN_BYTES {
        return BytesMut::from(bytes);
    }
    let mut buf = placed_buffer(bytes.len(), position);
    buf.extend_from_slice(bytes);
    buf
}

/// Smallest copy [`placed_copy`] places.
const PLACED_COPY_MIN_BYTES: usize = 32 << 10;

/// Topic → partition → next append's file position.
type Hints = HashMap<String, HashMap<i32, Arc<AtomicU64>>>;

static HINTS: LazyLock<RwLock<Hints>> = LazyLock::new(|| RwLock::new(HashMap::new()));

/// The file position where `topic`'s `partition` expects its next append,
/// if a log on this process published one.
pub fn next_position(topic: &str, partition: i32) -> Option<u64> {
    let hints = HINTS.read().ok()?;
    let next = hints.get(topic)?.get(&partition)?;
    Some(next.load(Ordering::Relaxed))
}

/// One log's published position; unpublished when the log goes.
#[derive(Debug)]
pub(crate) struct PlacementHint {
    tp: TopicPartition,
    next: Arc<AtomicU64>,
}

impl PlacementHint {
    /// Registers `tp` (replacing an earlier log's hint for it).
    pub(crate) fn register(tp: &TopicPartition) -> PlacementHint {
        let next = Arc::new(AtomicU64::new(0));
        if let Ok(mut hints) = HINTS.write() {
            hints
                .entry(tp.topic.clone())
                .or_default()
                .insert(tp.partition, next.clone());
        }
        PlacementHint {
            tp: tp.clone(),
            next,
        }
    }

    /// The next append will start at `position`.
    pub(crate) fn publish(&self, position: u64) {
        self.next.store(position, Ordering::Relaxed);
    }
}

impl Drop for PlacementHint {
    fn drop(&mut self) {
        let Ok(mut hints) = HINTS.write() else {
            return;
        };
        let Some(partitions) = hints.get_mut(&self.tp.topic) else {
            return;
        };
        // A newer log of the same partition may have replaced this one.
        if partitions
            .get(&self.tp.partition)
            .is_some_and(|next| Arc::ptr_eq(next, &self.next))
        {
            partitions.remove(&self.tp.partition);
            if partitions.is_empty() {
                hints.remove(&self.tp.topic);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{next_position, placed_buffer, placed_copy, PlacementHint, PLACEMENT_BLOCK_BYTES};
    use crate::types::TopicPartition;

    #[test]
    fn a_placed_buffer_starts_where_its_position_lies_in_a_block() {
        for position in [0u64, 1, 17, 4095, 4096, 4097, 1_000_003] {
            let buf = placed_buffer(300_000, position);
            assert!(buf.is_empty());
            assert!(buf.capacity() >= 300_000);
            let offset = buf.as_ptr() as usize % PLACEMENT_BLOCK_BYTES;
            assert_eq!(offset as u64, position % PLACEMENT_BLOCK_BYTES as u64);
            let records = vec![7u8; 40 << 10];
            let copy = placed_copy(&records, position);
            assert_eq!(&copy[..], &records[..]);
            let offset = copy.as_ptr() as usize % PLACEMENT_BLOCK_BYTES;
            assert_eq!(offset as u64, position % PLACEMENT_BLOCK_BYTES as u64);
            assert_eq!(&placed_copy(b"small", position)[..], b"small");
        }
    }

    #[test]
    fn a_published_position_is_read_until_its_log_goes() {
        let tp = TopicPartition::new("placement-test", 3);
        assert_eq!(next_position("placement-test", 3), None);
        let first = PlacementHint::register(&tp);
        first.publish(4_096 + 17);
        assert_eq!(next_position("placement-test", 3), Some(4_113));
        assert_eq!(next_position("placement-test", 4), None);
        // A reopened log replaces the hint; the old one's drop leaves it.
        let second = PlacementHint::register(&tp);
        second.publish(5);
        drop(first);
        assert_eq!(next_position("placement-test", 3), Some(5));
        drop(second);
        assert_eq!(next_position("placement-test", 3), None);
    }
}

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
//! Requests are pipelined: a producer has several in flight for the same
//! partition, read one after the other before the first is appended. So a
//! connection *reserves* its records' place ([`receive_buffer`]): the log's
//! published end plus what its shard placed before and the log has not
//! appended yet, which the log takes off as it appends them
//! ([`PlacementHint::appended`], by the records' address). Only the same
//! shard's reservations count: its connections' records reach the log in
//! the order they were read, while two shards' race, and counting another
//! shard's records ahead would misplace both when they arrive the other
//! way round. A reservation that is never appended (a refused or
//! duplicate batch, a dropped connection) is forgotten after
//! [`RESERVATION_LIFETIME`], so a miscount costs copies for that long at
//! most.
//!
//! Shared by all shards: a log publishes on its owner shard, any shard's
//! connections read. One lock per topic lookup, one per partition for a
//! reservation and for an append.

use crate::types::TopicPartition;
use bytes::{Buf, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};
use std::time::{Duration, Instant};

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

/// How long a reservation waits to be appended before it is forgotten:
/// longer than a request takes from its records' first byte to its append
/// on a live connection, short enough that a lost one soon stops costing.
pub const RESERVATION_LIFETIME: Duration = Duration::from_secs(1);

/// Most reservations a partition keeps; past it the oldest is forgotten
/// (a bound on memory, not a limit a producer meets).
const RESERVATIONS_MAX: usize = 1024;

/// Records placed for a partition and not yet appended.
#[derive(Debug)]
struct Reservation {
    /// Where the records' first byte lies in memory.
    address: usize,
    length_bytes: u64,
    /// The shard that placed them.
    source: usize,
    made: Instant,
}

/// The reservations of one partition, oldest first.
#[derive(Debug, Default)]
struct Ahead {
    reservations: VecDeque<Reservation>,
}

impl Ahead {
    /// Forgets reservations made before `now - RESERVATION_LIFETIME`, and
    /// the oldest past `RESERVATIONS_MAX`.
    fn expire(&mut self, now: Instant) {
        while let Some(oldest) = self.reservations.front() {
            let expired = now.saturating_duration_since(oldest.made) >= RESERVATION_LIFETIME;
            if !expired && self.reservations.len() <= RESERVATIONS_MAX {
                break;
            }
            self.reservations.pop_front();
        }
    }

    /// The bytes `source` placed that are not appended yet.
    fn bytes_of(&self, source: usize) -> u64 {
        self.reservations
            .iter()
            .filter(|r| r.source == source)
            .map(|r| r.length_bytes)
            .sum()
    }

    /// Takes off the reservation of the records at `address`, if any.
    fn take(&mut self, address: usize) {
        if let Some(at) = self.reservations.iter().position(|r| r.address == address) {
            self.reservations.remove(at);
        }
    }
}

/// One partition's hint: where its log's next append starts, and what
/// connections placed after it.
#[derive(Debug, Default)]
struct Slot {
    next: AtomicU64,
    ahead: Mutex<Ahead>,
}

/// Topic → partition → hint.
type Hints = HashMap<String, HashMap<i32, Arc<Slot>>>;

static HINTS: LazyLock<RwLock<Hints>> = LazyLock::new(|| RwLock::new(HashMap::new()));

fn slot(topic: &str, partition: i32) -> Option<Arc<Slot>> {
    let hints = HINTS.read().ok()?;
    hints.get(topic)?.get(&partition).cloned()
}

/// The file position where `topic`'s `partition` expects its next append,
/// if a log on this process published one.
pub fn next_position(topic: &str, partition: i32) -> Option<u64> {
    Some(slot(topic, partition)?.next.load(Ordering::Relaxed))
}

/// An empty buffer for `length` bytes of `topic`'s `partition`'s records,
/// received on shard `source`, placed (see [`placed_buffer`]) where they
/// will start in its segment file if they are appended after the shard's
/// reservations before them, and reserved until the log appends them.
/// Placed for position 0 when no log on this process published a hint for
/// the partition.
pub fn receive_buffer(topic: &str, partition: i32, length: usize, source: usize) -> BytesMut {
    let Some(slot) = slot(topic, partition) else {
        return placed_buffer(length, 0);
    };
    let Ok(mut ahead) = slot.ahead.lock() else {
        return placed_buffer(length, slot.next.load(Ordering::Relaxed));
    };
    let now = Instant::now();
    ahead.expire(now);
    let position = slot.next.load(Ordering::Relaxed) + ahead.bytes_of(source);
    let buffer = placed_buffer(length, position);
    ahead.reservations.push_back(Reservation {
        address: buffer.as_ptr() as usize,
        length_bytes: length as u64,
        source,
        made: now,
    });
    buffer
}

/// One log's published position; unpublished when the log goes.
#[derive(Debug)]
pub(crate) struct PlacementHint {
    tp: TopicPartition,
    slot: Arc<Slot>,
}

impl PlacementHint {
    /// Registers `tp` (replacing an earlier log's hint for it).
    pub(crate) fn register(tp: &TopicPartition) -> PlacementHint {
        let slot = Arc::new(Slot::default());
        if let Ok(mut hints) = HINTS.write() {
            hints
                .entry(tp.topic.clone())
                .or_default()
                .insert(tp.partition, slot.clone());
        }
        PlacementHint {
            tp: tp.clone(),
            slot,
        }
    }

    /// The records at `address` will not be appended (refused, or a
    /// duplicate): their reservation, if they had one, is taken off.
    pub(crate) fn release(&self, address: usize) {
        if let Ok(mut ahead) = self.slot.ahead.lock() {
            ahead.take(address);
        }
    }

    /// An append of the records at `address` ended at `end`: the next
    /// starts there, and the records' reservation, if they had one, is
    /// taken off (published in one step, so that a connection never counts
    /// the records both in the end and as reserved).
    pub(crate) fn appended(&self, end: u64, address: usize) {
        let Ok(mut ahead) = self.slot.ahead.lock() else {
            self.slot.next.store(end, Ordering::Relaxed);
            return;
        };
        ahead.take(address);
        self.slot.next.store(end, Ordering::Relaxed);
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
            .is_some_and(|slot| Arc::ptr_eq(slot, &self.slot))
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
    use super::{
        next_position, placed_buffer, placed_copy, receive_buffer, Ahead, PlacementHint,
        Reservation, PLACEMENT_BLOCK_BYTES, RESERVATIONS_MAX, RESERVATION_LIFETIME,
    };
    use crate::types::TopicPartition;
    use std::time::{Duration, Instant};

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
        first.appended(4_096 + 17, 0);
        assert_eq!(next_position("placement-test", 3), Some(4_113));
        assert_eq!(next_position("placement-test", 4), None);
        // A reopened log replaces the hint; the old one's drop leaves it.
        let second = PlacementHint::register(&tp);
        second.appended(5, 0);
        drop(first);
        assert_eq!(next_position("placement-test", 3), Some(5));
        drop(second);
        assert_eq!(next_position("placement-test", 3), None);
    }

    /// Where a buffer's first byte lies within its block.
    fn block_offset(buffer: &bytes::BytesMut) -> u64 {
        (buffer.as_ptr() as usize % PLACEMENT_BLOCK_BYTES) as u64
    }

    #[test]
    fn pipelined_records_are_placed_one_after_another_until_appended() {
        let tp = TopicPartition::new("placement-reserve", 0);
        let hint = PlacementHint::register(&tp);
        hint.appended(1_000, 0);
        let place = |length| receive_buffer("placement-reserve", 0, length, 0);
        let first = place(5_000);
        let second = place(3_000);
        assert_eq!(block_offset(&first), 1_000);
        assert_eq!(block_offset(&second), 6_000 % 4_096);
        // Another shard's records are placed after its own only.
        let other = receive_buffer("placement-reserve", 0, 700, 1);
        assert_eq!(block_offset(&other), 1_000);
        // The first appended where it was placed: the next reservation
        // counts the second, still in flight, after the new end.
        hint.appended(6_000, first.as_ptr() as usize);
        let third = place(100);
        assert_eq!(block_offset(&third), 9_000 % 4_096);
        // The second refused: only the third is ahead of the end.
        hint.release(second.as_ptr() as usize);
        let fourth = place(10);
        assert_eq!(block_offset(&fourth), 6_100 % 4_096);
        // Releasing twice, or records that were never reserved, changes
        // nothing.
        hint.release(second.as_ptr() as usize);
        hint.appended(6_100, 12_345);
        let fifth = place(10);
        assert_eq!(block_offset(&fifth), 6_210 % 4_096);
        // No hint, no reservation: placed for position 0.
        assert_eq!(
            block_offset(&receive_buffer("placement-reserve", 1, 10, 0)),
            0
        );
    }

    #[test]
    fn a_reservation_never_appended_is_forgotten_after_its_lifetime() {
        let now = Instant::now();
        let made = |address, age: Duration| Reservation {
            address,
            length_bytes: 100,
            source: 0,
            made: now - age,
        };
        let mut ahead = Ahead::default();
        ahead.reservations.push_back(made(1, RESERVATION_LIFETIME));
        ahead.reservations.push_back(made(2, Duration::ZERO));
        ahead.expire(now);
        assert_eq!(ahead.bytes_of(0), 100);
        ahead.take(2);
        assert_eq!((ahead.bytes_of(0), ahead.reservations.len()), (0, 0));
        // A bound on how many are kept, whatever their age.
        for address in 0..RESERVATIONS_MAX + 5 {
            ahead.reservations.push_back(made(address, Duration::ZERO));
        }
        ahead.expire(now);
        assert_eq!(ahead.reservations.len(), RESERVATIONS_MAX);
        assert_eq!(ahead.bytes_of(0), 100 * RESERVATIONS_MAX as u64);
    }
}

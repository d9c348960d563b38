//! The cleaner's key → newest-offset map in a fixed buffer (Kafka's
//! `SkimpyOffsetMap`): each slot holds a 16-byte hash of the key and the
//! offset, so memory is `log.cleaner.dedupe.buffer.size` whatever the keys'
//! sizes. Open addressing with linear probing; the map counts as full at
//! Kafka's load factor (0.9) so probes stay short. Two keys with the same
//! 128-bit hash would be taken for one (as in Kafka, with MD5): the chance is
//! negligible.

use std::hash::{Hash, Hasher};

/// Bytes of one slot: the key hash and the offset.
pub const SLOT_BYTES: usize = 16 + 8;
/// Kafka's `log.cleaner.io.buffer.load.factor`.
const LOAD_FACTOR: f64 = 0.9;

/// A bounded map from key hash to the newest offset seen for it.
pub struct OffsetMap {
    hashes: Vec<[u8; 16]>,
    offsets: Vec<i64>,
    entries: usize,
    max_entries: usize,
    /// Newest offset put into the map (-1 when empty).
    latest_offset: i64,
}

/// An empty slot: an all-zero hash with offset -1 (a real key whose hash is
/// all zeros is told apart by its offset, never negative).
const EMPTY_OFFSET: i64 = -1;

impl OffsetMap {
    /// A map in `buffer_bytes` (at least one slot).
    pub fn new(buffer_bytes: usize) -> OffsetMap {
        let slots = (buffer_bytes / SLOT_BYTES).max(2);
        OffsetMap {
            hashes: vec![[0; 16]; slots],
            offsets: vec![EMPTY_OFFSET; slots],
            entries: 0,
            max_entries: ((slots as f64 * LOAD_FACTOR) as usize).max(1),
            latest_offset: -1,
        }
    }

    /// Keys in the map.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// No key yet.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// How many more distinct keys fit before the map counts as full.
    pub fn room(&self) -> usize {
        self.max_entries - self.entries
    }

    /// Newest offset put (-1 when none).
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Records `offset` as the newest for `key`. Returns false (and changes
    /// nothing) when the key is new and the map is full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let hash = key_hash(key);
        let slot = self.probe(&hash);
        if self.offsets[slot] == EMPTY_OFFSET {
            if self.entries >= self.max_entries {
                return false;
            }
            self.entries += 1;
            self.hashes[slot] = hash;
        }
        self.offsets[slot] = offset;
        self.latest_offset = self.latest_offset.max(offset);
        true
    }

    /// The newest offset recorded for `key`.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        let slot = self.probe(&key_hash(key));
        let offset = self.offsets[slot];
        (offset != EMPTY_OFFSET).then_some(offset)
    }

    /// The slot that holds `hash`, or the empty slot where it would go (the
    /// map is never full, so an empty slot is always found).
    fn probe(&self, hash: &[u8; 16]) -> usize {
        let slots = self.hashes.len();
        let start = u64::from_le_bytes(hash[..8].try_into().unwrap_or([0; 8])) as usize % slots;
        let mut slot = start;
        loop {
            if self.offsets[slot] == EMPTY_OFFSET || &self.hashes[slot] == hash {
                return slot;
            }
            slot = (slot + 1) % slots;
        }
    }
}

/// 128 bits of key hash: two SipHash-1-3 runs with different prefixes
/// (std's, keyed the same in every process, so the hash needs no state).
fn key_hash(key: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, half) in out.chunks_exact_mut(8).enumerate() {
        let mut hasher = std::hash::DefaultHasher::new();
        (i as u8).hash(&mut hasher);
        key.hash(&mut hasher);
        half.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_offset_per_key() {
        let mut map = OffsetMap::new(1 << 12);
        assert!(map.put(b"a", 1));
        assert!(map.put(b"b", 2));
        assert!(map.put(b"a", 3));
        assert_eq!(map.get(b"a"), Some(3));
        assert_eq!(map.get(b"b"), Some(2));
        assert_eq!(map.get(b"c"), None);
        assert_eq!(map.len(), 2);
        assert_eq!(map.latest_offset(), 3);
    }

    #[test]
    fn a_full_map_refuses_new_keys_but_updates_known_ones() {
        // 10 slots: full at 9 keys.
        let mut map = OffsetMap::new(10 * SLOT_BYTES);
        for i in 0..9 {
            assert!(map.put(format!("k{i}").as_bytes(), i));
        }
        assert_eq!(map.room(), 0);
        assert!(!map.put(b"new", 100));
        assert_eq!(map.get(b"new"), None);
        assert!(map.put(b"k3", 50));
        assert_eq!(map.get(b"k3"), Some(50));
        // Memory is the buffer's, whatever the key sizes.
        assert_eq!(map.hashes.len(), 10);
    }
}

//! The chunk cache: a bounded LRU of (key, chunk index) → bytes, for the
//! remote reads of `get_range`. Pure: no I/O, no clock, no locks. It lives
//! on the remote thread only (in a `RefCell` there), so nothing else can
//! see it half-changed.
//!
//! The byte cap is a hard one: an insert first evicts the least recently
//! used chunks until the new one fits, and a chunk larger than the whole
//! cache is not kept. Lookups and inserts cost O(log n): entries sit in a
//! `BTreeMap` by key (so one key's chunks, or a prefix's, are one range to
//! drop) and a second `BTreeMap` orders them by last use.
//!
//! Uploads and deletes invalidate what they touch, and bump a generation:
//! a fetch that began before the change must not put its (old) bytes back
//! after it, so `insert` takes the generation read when the fetch began and
//! drops the chunk if it has moved since.

use bytes::Bytes;
use std::collections::BTreeMap;

/// One chunk of one object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ChunkId {
    pub key: String,
    pub index: u64,
}

#[derive(Debug)]
struct Entry {
    bytes: Bytes,
    last_used: u64,
}

/// The cache.
#[derive(Debug)]
pub(crate) struct ChunkCache {
    capacity_bytes: u64,
    used_bytes: u64,
    /// A counter of uses; the smallest `last_used` is evicted first.
    clock: u64,
    generation: u64,
    entries: BTreeMap<ChunkId, Entry>,
    by_last_use: BTreeMap<u64, ChunkId>,
}

impl ChunkCache {
    /// A cache holding at most `capacity_bytes`; 0 keeps nothing.
    pub fn new(capacity_bytes: u64) -> Self {
        ChunkCache {
            capacity_bytes,
            used_bytes: 0,
            clock: 0,
            generation: 0,
            entries: BTreeMap::new(),
            by_last_use: BTreeMap::new(),
        }
    }

    /// Whether the cache can hold anything at all.
    pub fn is_enabled(&self) -> bool {
        self.capacity_bytes > 0
    }

    /// The bytes held now.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// The generation to hand back to `insert` for a fetch starting now.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The chunk, if held; it becomes the most recently used.
    pub fn get(&mut self, id: &ChunkId) -> Option<Bytes> {
        self.clock += 1;
        let entry = self.entries.get_mut(id)?;
        let previous = self.by_last_use.remove(&entry.last_used);
        assert_eq!(previous.as_ref(), Some(id), "recency order lost an entry");
        entry.last_used = self.clock;
        self.by_last_use.insert(self.clock, id.clone());
        Some(entry.bytes.clone())
    }

    /// Keeps a chunk fetched when the generation was `generation`, evicting
    /// the least recently used until it fits. Returns whether it was kept.
    pub fn insert(&mut self, id: ChunkId, bytes: Bytes, generation: u64) -> bool {
        let length = bytes.len() as u64;
        if generation != self.generation || length > self.capacity_bytes {
            return false;
        }
        self.remove(&id);
        // Bounded: each turn removes one entry, and there are finitely many.
        while self.used_bytes + length > self.capacity_bytes {
            let Some((_, oldest)) = self.by_last_use.pop_first() else {
                break;
            };
            let evicted = self.entries.remove(&oldest);
            let evicted = evicted.map_or(0, |entry| entry.bytes.len() as u64);
            self.used_bytes -= evicted;
        }
        self.clock += 1;
        self.by_last_use.insert(self.clock, id.clone());
        let last_used = self.clock;
        self.entries.insert(id, Entry { bytes, last_used });
        self.used_bytes += length;
        self.check_invariants();
        true
    }

    /// Drops every chunk of `key`.
    pub fn invalidate_key(&mut self, key: &str) {
        self.invalidate_where(key, |candidate| candidate == key);
    }

    /// Drops every chunk of every key that starts with `prefix`.
    pub fn invalidate_prefix(&mut self, prefix: &str) {
        self.invalidate_where(prefix, |candidate| candidate.starts_with(prefix));
    }

    /// Drops the chunks of the keys from `first` on that `matches` accepts
    /// (the matching keys are contiguous in key order), and moves the
    /// generation on.
    fn invalidate_where(&mut self, first: &str, matches: impl Fn(&str) -> bool) {
        self.generation += 1;
        let start = ChunkId {
            key: first.to_string(),
            index: 0,
        };
        let doomed: Vec<ChunkId> = self
            .entries
            .range(start..)
            .take_while(|(id, _)| matches(&id.key))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &doomed {
            self.remove(id);
        }
        self.check_invariants();
    }

    fn remove(&mut self, id: &ChunkId) {
        if let Some(entry) = self.entries.remove(id) {
            self.by_last_use.remove(&entry.last_used);
            self.used_bytes -= entry.bytes.len() as u64;
        }
    }

    /// The cap holds and both orders name the same entries. The full sum
    /// is checked in debug builds only: it walks every entry.
    fn check_invariants(&self) {
        assert!(self.used_bytes <= self.capacity_bytes, "cache over its cap");
        assert_eq!(self.entries.len(), self.by_last_use.len());
        debug_assert_eq!(
            self.used_bytes,
            self.entries
                .values()
                .map(|entry| entry.bytes.len() as u64)
                .sum::<u64>()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(key: &str, index: u64) -> ChunkId {
        ChunkId {
            key: key.to_string(),
            index,
        }
    }

    fn chunk(length: usize) -> Bytes {
        Bytes::from(vec![7u8; length])
    }

    #[test]
    fn the_least_recently_used_goes_first() {
        let mut cache = ChunkCache::new(30);
        let generation = cache.generation();
        for index in 0..3 {
            assert!(cache.insert(id("a", index), chunk(10), generation));
        }
        // Touch chunk 0: chunk 1 is now the oldest.
        assert!(cache.get(&id("a", 0)).is_some());
        assert!(cache.insert(id("b", 0), chunk(10), generation));
        assert!(cache.get(&id("a", 1)).is_none(), "the oldest was evicted");
        assert!(cache.get(&id("a", 0)).is_some());
        assert!(cache.get(&id("a", 2)).is_some());
        assert!(cache.get(&id("b", 0)).is_some());
        assert_eq!(cache.used_bytes(), 30);
    }

    #[test]
    fn the_byte_cap_is_never_exceeded() {
        let mut cache = ChunkCache::new(100);
        let generation = cache.generation();
        // Sizes that do not divide the cap, inserted in a scrambled order.
        for step in 0..500u64 {
            let length = 1 + (step * 37 % 45) as usize;
            cache.insert(
                id(&format!("k{}", step % 13), step % 7),
                chunk(length),
                generation,
            );
            assert!(cache.used_bytes() <= 100, "step {step}");
        }
        assert!(!cache.insert(id("huge", 0), chunk(101), generation));
        assert!(cache.get(&id("huge", 0)).is_none());
    }

    #[test]
    fn replacing_a_chunk_counts_its_bytes_once() {
        let mut cache = ChunkCache::new(100);
        let generation = cache.generation();
        cache.insert(id("a", 0), chunk(40), generation);
        cache.insert(id("a", 0), chunk(30), generation);
        assert_eq!(cache.used_bytes(), 30);
    }

    #[test]
    fn invalidation_drops_a_key_or_a_prefix_and_stale_fetches() {
        let mut cache = ChunkCache::new(1000);
        let before = cache.generation();
        for key in ["t/0/a", "t/0/b", "t/1/a", "u"] {
            for index in 0..2 {
                cache.insert(id(key, index), chunk(10), before);
            }
        }
        cache.invalidate_key("t/0/a");
        assert!(cache.get(&id("t/0/a", 1)).is_none());
        assert!(cache.get(&id("t/0/b", 1)).is_some());
        cache.invalidate_prefix("t/");
        assert_eq!(cache.used_bytes(), 20, "only u's chunks are left");
        assert!(cache.get(&id("u", 0)).is_some());
        // A fetch that began before the invalidation is not kept.
        assert!(!cache.insert(id("t/0/a", 0), chunk(10), before));
        assert!(cache.insert(id("t/0/a", 0), chunk(10), cache.generation()));
    }

    #[test]
    fn a_zero_cache_keeps_nothing() {
        let mut cache = ChunkCache::new(0);
        assert!(!cache.is_enabled());
        assert!(!cache.insert(id("a", 0), chunk(1), cache.generation()));
        assert_eq!(cache.used_bytes(), 0);
    }
}

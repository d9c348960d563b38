//! The shard's cache of sealed segments' indexes, bounded in bytes, LRU.
//!
//! A sealed segment's offset and time indexes are not kept in memory (see
//! [`crate::segment::Segment::release_indexes`]): a lookup reads its
//! `.index` / `.timeindex` files on a miss and keeps them here, evicting the
//! least recently used segments' indexes to stay within the cap
//! (`rill.cache.index.max.bytes`, split across the shards). Indexes larger
//! than the whole cap are used for the lookup and not kept, so the bytes
//! held never exceed it. The active segment's indexes stay in its meta and
//! never come here.
//!
//! The files are read through glommio's DMA file API (io_uring), so a miss
//! never blocks the shard's thread. A file that is missing or does not parse
//! (or points past the segment) is not trusted: the indexes are rebuilt by
//! scanning the segment with the same async reads, as recovery would — a
//! lookup never panics and never uses a wrong entry. The rebuilt indexes are
//! cached like loaded ones (the files are fixed by the next open's recovery).

use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::error::EngineError;
use crate::index::{OffsetIndex, TimeIndex};
use crate::segment::Segment;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;

/// Bookkeeping bytes charged per cached segment besides its entries (the
/// map slots, the `Rc`, the two `Vec` headers), so that many tiny indexes
/// still count.
const ENTRY_OVERHEAD_BYTES: u64 = 128;

/// Read window of a rebuild scan.
const REBUILD_WINDOW_BYTES: usize = 1 << 20;

/// One sealed segment's indexes, as loaded.
#[derive(Debug, Default)]
pub struct LoadedIndexes {
    /// The offset index.
    pub offset: OffsetIndex,
    /// The time index.
    pub time: TimeIndex,
}

impl LoadedIndexes {
    /// Bytes charged to the cache for these indexes.
    pub fn charged_bytes(&self) -> u64 {
        self.offset.heap_bytes() + self.time.heap_bytes() + ENTRY_OVERHEAD_BYTES
    }
}

/// What the cache did, for metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IndexCacheStats {
    /// Bytes held now.
    pub bytes: u64,
    /// The cap.
    pub max_bytes: u64,
    /// Segments whose indexes are held now.
    pub entries: u64,
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that read (or rebuilt) the indexes.
    pub misses: u64,
    /// Segments' indexes dropped to make room.
    pub evictions: u64,
    /// Index files found missing or corrupt on demand, and rebuilt.
    pub rebuilds: u64,
}

#[derive(Default)]
struct Inner {
    /// Segment key → indexes and their last-use tick.
    entries: HashMap<u64, (Rc<LoadedIndexes>, u64)>,
    /// Last-use tick → segment key: the oldest first.
    order: BTreeMap<u64, u64>,
    tick: u64,
    stats: IndexCacheStats,
}

/// The shard's index cache. Shard-local.
pub struct IndexCache {
    inner: RefCell<Inner>,
}

impl IndexCache {
    /// A cache that holds at most `max_bytes`.
    pub fn new(max_bytes: u64) -> Self {
        let inner = Inner {
            stats: IndexCacheStats {
                max_bytes,
                ..Default::default()
            },
            ..Default::default()
        };
        IndexCache {
            inner: RefCell::new(inner),
        }
    }

    /// The counters and gauges.
    pub fn stats(&self) -> IndexCacheStats {
        self.inner.borrow().stats
    }

    /// Calls `f` with the segment's indexes: its own while it is active
    /// (they are in its meta), otherwise from the cache, read from the
    /// files (or rebuilt) on a miss. `index_interval_bytes` is only used by
    /// a rebuild.
    pub async fn with_indexes<R>(
        &self,
        segment: &Segment,
        index_interval_bytes: u64,
        f: impl FnOnce(&OffsetIndex, &TimeIndex) -> R,
    ) -> R {
        if !segment.indexes_on_disk() {
            let meta = segment.meta.borrow();
            return f(&meta.index, &meta.time_index);
        }
        let indexes = self.get_or_load(segment, index_interval_bytes).await;
        f(&indexes.offset, &indexes.time)
    }

    /// The segment's indexes (see [`IndexCache::with_indexes`]), for a
    /// truncation that puts them back in the segment's meta.
    pub async fn take_for_restore(
        &self,
        segment: &Segment,
        index_interval_bytes: u64,
    ) -> (OffsetIndex, TimeIndex) {
        let indexes = self.get_or_load(segment, index_interval_bytes).await;
        self.remove(segment.index_key());
        (indexes.offset.clone(), indexes.time.clone())
    }

    async fn get_or_load(&self, segment: &Segment, index_interval_bytes: u64) -> Rc<LoadedIndexes> {
        let key = segment.index_key();
        if let Some(found) = self.touch(key) {
            return found;
        }
        self.inner.borrow_mut().stats.misses += 1;
        let loaded = Rc::new(match load(segment).await {
            Some(loaded) => loaded,
            // Deleted meanwhile (retention): nothing to rebuild or keep;
            // empty indexes make any read go on scanning, and fail over.
            None if segment.deleted.get() => return Rc::new(LoadedIndexes::default()),
            None => {
                self.inner.borrow_mut().stats.rebuilds += 1;
                tracing::warn!(segment = %segment.log_path().display(),
                    "index files missing or corrupt: rebuilding them from the segment");
                rebuild(segment, index_interval_bytes).await
            }
        });
        if segment.index_key() == key && segment.indexes_on_disk() {
            self.insert(key, loaded.clone());
        }
        loaded
    }

    /// A hit: the entry becomes the most recently used.
    fn touch(&self, key: u64) -> Option<Rc<LoadedIndexes>> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        inner.tick += 1;
        let tick = inner.tick;
        let (indexes, last_used) = inner.entries.get_mut(&key)?;
        inner.order.remove(&*last_used);
        *last_used = tick;
        inner.order.insert(tick, key);
        inner.stats.hits += 1;
        Some(indexes.clone())
    }

    fn insert(&self, key: u64, indexes: Rc<LoadedIndexes>) {
        self.remove(key);
        let mut inner = self.inner.borrow_mut();
        let charged = indexes.charged_bytes();
        if charged > inner.stats.max_bytes {
            // Larger than the whole cap: used for this lookup, not kept.
            return;
        }
        while inner.stats.bytes + charged > inner.stats.max_bytes {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some((evicted, _)) = inner.entries.remove(&oldest) {
                inner.stats.bytes -= evicted.charged_bytes();
                inner.stats.entries -= 1;
                inner.stats.evictions += 1;
            }
        }
        inner.tick += 1;
        let tick = inner.tick;
        inner.order.insert(tick, key);
        inner.entries.insert(key, (indexes, tick));
        inner.stats.bytes += charged;
        inner.stats.entries += 1;
    }

    /// Forgets a segment's indexes (it was reopened or deleted).
    pub fn remove(&self, key: u64) {
        let mut inner = self.inner.borrow_mut();
        if let Some((indexes, tick)) = inner.entries.remove(&key) {
            inner.order.remove(&tick);
            inner.stats.bytes -= indexes.charged_bytes();
            inner.stats.entries -= 1;
        }
    }
}

/// Reads the two index files of a sealed segment; `None` when either is
/// missing, unreadable, or inconsistent with the segment.
async fn load(segment: &Segment) -> Option<LoadedIndexes> {
    let (size_bytes, relative_end) = {
        let meta = segment.meta.borrow();
        (meta.size_bytes, meta.next_offset - segment.base_offset)
    };
    let offset_bytes = read_file(&segment.path("index")).await.ok()?;
    let time_bytes = read_file(&segment.path("timeindex")).await.ok()?;
    let offset = OffsetIndex::from_bytes(&offset_bytes, size_bytes)?;
    let time = TimeIndex::from_bytes(&time_bytes)?;
    // Entries must name offsets inside the segment.
    let inside = |relative: u32| i64::from(relative) < relative_end.max(1);
    if !offset.last().is_none_or(|(o, _)| inside(o)) || !time.last().is_none_or(|(_, o)| inside(o))
    {
        return None;
    }
    Some(LoadedIndexes { offset, time })
}

/// A whole small file through glommio's DMA API (io_uring: the shard's
/// thread does not block on the disk).
async fn read_file(path: &Path) -> Result<Vec<u8>, EngineError> {
    let file = crate::disk::open_data(path, false)
        .await
        .map_err(|e| EngineError::io(path, e))?;
    let size = file
        .file_size()
        .await
        .map_err(|e| EngineError::io(path, e))?;
    let bytes = if size == 0 {
        Vec::new()
    } else {
        file.read_at(0, size as usize)
            .await
            .map_err(|e| EngineError::io(path, e))?
            .to_vec()
    };
    let _ = std::rc::Rc::new(file).close_rc().await;
    Ok(bytes)
}

/// Rebuilds a sealed segment's indexes by reading its batch headers (async
/// DMA reads). A read error or an unparsable header ends the scan: the
/// entries so far are still right, and lookups past them scan forward.
async fn rebuild(segment: &Segment, index_interval_bytes: u64) -> LoadedIndexes {
    let end = segment.readable_bytes.get();
    let scratch = Segment::new(
        Path::new("."),
        segment.base_offset,
        Segment::empty_meta(segment.base_offset, 0),
        0,
    );
    let mut position = 0u64;
    'scan: while position < end {
        let want = REBUILD_WINDOW_BYTES.min((end - position) as usize);
        let Ok(window) = segment.read_bytes(position, want).await else {
            break;
        };
        let mut cursor = 0usize;
        while cursor + HEADER_BYTES <= window.len() {
            let Ok(header) = BatchHeader::parse(&window[cursor..]) else {
                break 'scan;
            };
            let at = position + cursor as u64;
            let total = header.total_bytes() as u64;
            let next_offset = scratch.meta.borrow().next_offset;
            // What `record_append` relies on; anything else ends the scan.
            if header.base_offset < next_offset
                || header.last_offset() < header.base_offset
                || header.last_offset() - segment.base_offset > i64::from(u32::MAX)
                || at + total > end
            {
                break 'scan;
            }
            scratch.record_append(
                at,
                header.base_offset,
                header.last_offset(),
                header.max_timestamp,
                total,
                index_interval_bytes,
            );
            cursor += total as usize;
        }
        if cursor == 0 {
            break;
        }
        position += cursor as u64;
    }
    let mut meta = scratch.meta.into_inner();
    if meta.max_timestamp_ms >= 0 {
        let (max_ts, relative) = meta.max_timestamp_entry(segment.base_offset);
        meta.time_index.maybe_append(max_ts, relative);
    }
    LoadedIndexes {
        offset: meta.index,
        time: meta.time_index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indexes(entries: u32) -> Rc<LoadedIndexes> {
        let mut loaded = LoadedIndexes::default();
        for i in 1..=entries {
            loaded.offset.append(i, i * 100);
            loaded.time.maybe_append(i64::from(i), i);
        }
        Rc::new(loaded)
    }

    #[test]
    fn evicts_the_least_recently_used_and_stays_under_the_cap() {
        let one = indexes(10).charged_bytes();
        let cache = IndexCache::new(one * 3);
        for key in 1..=3 {
            cache.insert(key, indexes(10));
        }
        assert_eq!(cache.stats().bytes, one * 3);
        // 1 becomes the most recent: 2 goes first, then 3.
        assert!(cache.touch(1).is_some());
        cache.insert(4, indexes(10));
        assert!(cache.touch(2).is_none());
        cache.insert(5, indexes(10));
        assert!(cache.touch(3).is_none());
        assert!(cache.touch(1).is_some() && cache.touch(4).is_some());
        let stats = cache.stats();
        assert_eq!(
            (stats.evictions, stats.entries, stats.bytes),
            (2, 3, one * 3)
        );
        // Larger than the whole cap: not kept, nothing evicted for it.
        cache.insert(6, indexes(1000));
        assert!(cache.touch(6).is_none());
        assert_eq!(cache.stats().entries, 3);
        cache.remove(1);
        assert_eq!(cache.stats().bytes, one * 2);
    }
}

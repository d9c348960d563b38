//! One segment: a `.log` file named by its base offset, with its two indexes.
//!
//! The in-memory view (`SegmentMeta`) is updated synchronously at append
//! time, so positions and index entries are known before the bytes reach the
//! disk; `readable_bytes` marks how far readers may go (data below the high
//! watermark, always already written to the file). Readers use two handles:
//! a DMA file for the copy path (async reads through io_uring) and a plain
//! file descriptor whose byte ranges the zero-copy send paths splice out.
//!
//! Only the active segment keeps its indexes in `SegmentMeta`. Once a
//! segment is sealed and its index files written, [`Segment::release_indexes`]
//! empties them and later lookups go through the shard's bounded
//! [`crate::index_cache`], so memory does not grow with retained data. An
//! empty index is never wrong, only slower (lookups scan from the start of
//! the segment): code that reads `meta.index` directly stays correct.

use crate::appender::Appender;
use crate::disk::{self, DataFile};
use crate::error::EngineError;
use crate::index::{OffsetIndex, TimeIndex};
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A segment's read handles: the DMA file for copies, and the plain
/// descriptor file slices are sent from (none on a simulated disk).
pub type Readers = (Rc<DataFile>, Option<Arc<std::fs::File>>);

/// Source of [`Segment::index_key`]s: unique in the process, so a cache
/// entry can never be taken for another segment (or another sealing of the
/// same one, after a truncation reopened it).
static NEXT_INDEX_KEY: AtomicU64 = AtomicU64::new(1);

fn next_index_key() -> u64 {
    NEXT_INDEX_KEY.fetch_add(1, Ordering::Relaxed)
}

/// `00000000000000170410.log`: the base offset in 20 digits, as Kafka names files.
pub fn file_name(base_offset: i64, extension: &str) -> String {
    format!("{base_offset:020}.{extension}")
}

/// Parses a segment file name back to its base offset.
pub fn parse_file_name(name: &str, extension: &str) -> Option<i64> {
    let stem = name.strip_suffix(extension)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The base offsets of the `.log` files in `dir`, ascending.
pub fn segment_bases(dir: &Path) -> Result<Vec<i64>, EngineError> {
    let mut bases: Vec<i64> = disk::read_dir(dir)
        .map_err(|e| EngineError::io(dir, e))?
        .iter()
        .filter_map(|name| parse_file_name(name, "log"))
        .collect();
    bases.sort_unstable();
    Ok(bases)
}

/// Mutable bookkeeping of a segment.
#[derive(Debug, Clone)]
pub struct SegmentMeta {
    /// Logical size, including appends not yet written.
    pub size_bytes: u64,
    /// One past the last offset appended to this segment.
    pub next_offset: i64,
    /// Sparse offset index.
    pub index: OffsetIndex,
    /// Time index.
    pub time_index: TimeIndex,
    /// Largest batch max-timestamp in the segment (-1 when empty).
    pub max_timestamp_ms: i64,
    /// Base offset of the batch that holds `max_timestamp_ms`.
    pub max_timestamp_batch_offset: i64,
    /// Log bytes appended since the last index entry.
    pub bytes_since_index_entry: u64,
    /// When the segment was created, for `segment.ms`.
    pub created_ms: i64,
}

impl SegmentMeta {
    /// The time-index entry of the largest timestamp so far: `(timestamp,
    /// relative offset of the batch that first reached it)`.
    pub fn max_timestamp_entry(&self, segment_base: i64) -> (i64, u32) {
        let relative =
            (self.max_timestamp_batch_offset - segment_base).clamp(0, i64::from(u32::MAX));
        (self.max_timestamp_ms, relative as u32)
    }
}

/// One segment of a partition log. Shard-local.
pub struct Segment {
    /// First offset the segment may hold.
    pub base_offset: i64,
    dir: PathBuf,
    /// Bookkeeping, updated at append time.
    pub meta: RefCell<SegmentMeta>,
    /// Bytes readers may see (written and below the high watermark).
    pub readable_bytes: Cell<u64>,
    /// The writer, present while the segment is active.
    pub appender: RefCell<Option<Appender>>,
    readers: RefCell<Option<Readers>>,
    /// Set once the files are removed; reads then fail over to the next segment.
    pub deleted: Cell<bool>,
    /// The indexes are in the `.index`/`.timeindex` files only (the meta's
    /// are empty): lookups go through the index cache.
    indexes_on_disk: Cell<bool>,
    /// This segment's key in the index cache; a new one at every release.
    index_key: Cell<u64>,
}

impl Segment {
    /// A segment object for `base_offset` in `dir` with the given bookkeeping.
    pub fn new(dir: &Path, base_offset: i64, meta: SegmentMeta, readable_bytes: u64) -> Segment {
        Segment {
            base_offset,
            dir: dir.to_path_buf(),
            meta: RefCell::new(meta),
            readable_bytes: Cell::new(readable_bytes),
            appender: RefCell::new(None),
            readers: RefCell::new(None),
            deleted: Cell::new(false),
            indexes_on_disk: Cell::new(false),
            index_key: Cell::new(next_index_key()),
        }
    }

    /// Whether the indexes are on disk only (see [`Segment::release_indexes`]).
    pub fn indexes_on_disk(&self) -> bool {
        self.indexes_on_disk.get()
    }

    /// The segment's key in the index cache.
    pub fn index_key(&self) -> u64 {
        self.index_key.get()
    }

    /// Drops the in-memory indexes of a sealed segment whose index files
    /// are written: lookups then read them through the index cache.
    pub fn release_indexes(&self) {
        let mut meta = self.meta.borrow_mut();
        meta.index = OffsetIndex::new();
        meta.time_index = TimeIndex::new();
        self.indexes_on_disk.set(true);
        self.index_key.set(next_index_key());
    }

    /// Puts indexes back in memory (a truncation reopens a sealed segment).
    pub fn restore_indexes(&self, index: OffsetIndex, time_index: TimeIndex) {
        let mut meta = self.meta.borrow_mut();
        meta.index = index;
        meta.time_index = time_index;
        self.indexes_on_disk.set(false);
        self.index_key.set(next_index_key());
    }

    /// Empty bookkeeping for a new segment.
    pub fn empty_meta(base_offset: i64, now_ms: i64) -> SegmentMeta {
        SegmentMeta {
            size_bytes: 0,
            next_offset: base_offset,
            index: OffsetIndex::new(),
            time_index: TimeIndex::new(),
            max_timestamp_ms: -1,
            max_timestamp_batch_offset: base_offset,
            bytes_since_index_entry: 0,
            created_ms: now_ms,
        }
    }

    /// Path of one of the segment's files.
    pub fn path(&self, extension: &str) -> PathBuf {
        self.dir.join(file_name(self.base_offset, extension))
    }

    /// Path of the `.log` file.
    pub fn log_path(&self) -> PathBuf {
        self.path("log")
    }

    /// Records an appended batch in the bookkeeping (sync, before it is written).
    pub fn record_append(
        &self,
        position: u64,
        base_offset: i64,
        last_offset: i64,
        max_timestamp_ms: i64,
        size_bytes: u64,
        index_interval_bytes: u64,
    ) {
        let mut meta = self.meta.borrow_mut();
        assert_eq!(meta.size_bytes, position, "appends are contiguous");
        assert!(base_offset >= meta.next_offset, "offsets only grow");
        let relative = (base_offset - self.base_offset) as u32;
        if max_timestamp_ms > meta.max_timestamp_ms {
            meta.max_timestamp_ms = max_timestamp_ms;
            meta.max_timestamp_batch_offset = base_offset;
        }
        // Kafka's sparse indexes: both get an entry only every
        // `index.interval.bytes`; the time entry is the largest timestamp so
        // far and the first batch that reached it.
        if meta.bytes_since_index_entry >= index_interval_bytes && position > 0 {
            meta.index.append(relative, position as u32);
            let (max_ts, max_ts_relative) = meta.max_timestamp_entry(self.base_offset);
            meta.time_index.maybe_append(max_ts, max_ts_relative);
            meta.bytes_since_index_entry = 0;
        }
        meta.bytes_since_index_entry += size_bytes;
        meta.size_bytes += size_bytes;
        meta.next_offset = last_offset + 1;
    }

    /// The read handles, opened on first use.
    pub async fn readers(&self) -> Result<Readers, EngineError> {
        if let Some(readers) = self.readers.borrow().as_ref() {
            return Ok(readers.clone());
        }
        let path = self.log_path();
        let dma = disk::open_data(&path, false)
            .await
            .map_err(|e| EngineError::io(&path, e))?;
        // A simulated disk has no descriptor to send from.
        let file = if disk::is_simulated() {
            None
        } else {
            let file = std::fs::File::open(&path).map_err(|e| EngineError::io(&path, e))?;
            Some(Arc::new(file))
        };
        let readers = (Rc::new(dma), file);
        *self.readers.borrow_mut() = Some(readers.clone());
        Ok(readers)
    }

    /// Reads `length` bytes at `position` through the DMA handle.
    pub async fn read_bytes(&self, position: u64, length: usize) -> Result<Vec<u8>, EngineError> {
        let (dma, _) = self.readers().await?;
        let result = dma
            .read_at(position, length)
            .await
            .map_err(|e| EngineError::io(self.log_path(), e))?;
        Ok(result.to_vec())
    }

    /// Writes the index files (segment sealed or broker stopping), with a
    /// last time entry for the segment's largest timestamp, as Kafka adds
    /// when a segment stops being active: the file's last entry is then the
    /// segment's max timestamp, which the next open reads from it.
    pub fn write_indexes(&self) -> Result<(), EngineError> {
        if self.indexes_on_disk.get() {
            // The files already hold them; the meta's are empty.
            return Ok(());
        }
        let mut meta = self.meta.borrow_mut();
        if meta.max_timestamp_ms >= 0 {
            let (max_ts, max_ts_relative) = meta.max_timestamp_entry(self.base_offset);
            meta.time_index.maybe_append(max_ts, max_ts_relative);
        }
        write_file_synced(&self.path("index"), &meta.index.to_bytes())?;
        write_file_synced(&self.path("timeindex"), &meta.time_index.to_bytes())
    }

    /// Removes the segment's files.
    pub fn delete_files(&self) -> Result<(), EngineError> {
        self.deleted.set(true);
        self.readers.borrow_mut().take();
        self.remove_files(&["log", "index", "timeindex", "txnindex"])
    }

    /// Removes the segment's files, the `.log` off the shard's thread:
    /// unlinking a large file frees its blocks, which took 3 ms for 16 MiB
    /// on ext4 here, and the shard would wait for it (retention deletes
    /// many at a tick). The `.log` is first renamed `<base>.log.deleted`,
    /// as Kafka does, so a crash before the unlink leaves a file that the
    /// next open deletes ([`remove_deleted_leftovers`]), never a segment.
    pub fn delete_files_in_background(&self) -> Result<(), EngineError> {
        self.deleted.set(true);
        self.readers.borrow_mut().take();
        let from = self.log_path();
        let doomed = from.with_extension(DELETED_EXTENSION);
        match disk::rename(&from, &doomed) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(EngineError::io(&from, e)),
        }
        self.remove_files(&["index", "timeindex", "txnindex"])?;
        glommio::spawn_local(async move {
            let path = doomed.clone();
            if let Err(e) = disk::off_thread(move || disk::remove_file(&path)).await {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %doomed.display(), error = %e, "a deleted segment's file was not unlinked; the next open removes it");
                }
            }
        })
        .detach();
        Ok(())
    }

    /// Moves the `.log` file to `to` (a spare for a later segment: see
    /// `recycle.rs`) and removes the indexes. Returns the read handles
    /// the segment held: reads in flight may still hold clones, and the
    /// file must not be written again before they are gone.
    pub fn recycle_files(&self, to: &Path) -> Result<Option<Readers>, EngineError> {
        self.deleted.set(true);
        let readers = self.readers.borrow_mut().take();
        let from = self.log_path();
        disk::rename(&from, to).map_err(|e| EngineError::io(&from, e))?;
        self.remove_files(&["index", "timeindex", "txnindex"])?;
        Ok(readers)
    }

    fn remove_files(&self, extensions: &[&str]) -> Result<(), EngineError> {
        for &extension in extensions {
            remove_if_present(&self.path(extension))?;
        }
        Ok(())
    }
}

/// The extension a deleted segment's `.log` is renamed to until it is
/// unlinked ([`Segment::delete_files_in_background`]).
pub const DELETED_EXTENSION: &str = "log.deleted";

/// Unlinks the `.deleted` files a crash left in the partition dir `dir`
/// (Kafka's too, from a dir it wrote).
pub fn remove_deleted_leftovers(dir: &Path) -> Result<(), EngineError> {
    for name in disk::read_dir(dir).map_err(|e| EngineError::io(dir, e))? {
        let path = dir.join(&name);
        if is_being_deleted(&path) {
            remove_if_present(&path)?;
        }
    }
    Ok(())
}

/// Whether `path` is a deleted segment's file waiting for its unlink
/// (`<base>.log.deleted`, or Kafka's `.deleted` files).
pub fn is_being_deleted(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "deleted")
}

/// Deletes the file at `path`; one already gone is no error.
pub fn remove_if_present(path: &Path) -> Result<(), EngineError> {
    match disk::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(EngineError::io(path, e)),
    }
}

/// Writes a small file through a temporary name and renames it, so a crash
/// leaves the old or the new content, never a mix.
///
/// Inside a [`DeferredSyncs`] scope the file is not synced here: the scope's
/// [`DeferredSyncs::finish`] syncs the whole file system once instead.
pub fn write_file_synced(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    let tmp = path.with_extension("tmp");
    let sync = !SYNCS_DEFERRED.with(Cell::get);
    disk::write(&tmp, bytes, sync).map_err(|e| EngineError::io(&tmp, e))?;
    disk::rename(&tmp, path).map_err(|e| EngineError::io(path, e))
}

thread_local! {
    /// Set on a shard's thread while a [`DeferredSyncs`] scope is open.
    static SYNCS_DEFERRED: Cell<bool> = const { Cell::new(false) };
}

/// A scope in which [`write_file_synced`] skips its `fdatasync`, closed by
/// one `syncfs(2)` per file system.
///
/// Why: closing a partition writes four small files (both indexes, the
/// recovery point, the producer snapshot), each synced on the shard's
/// thread. At shutdown with 10,000 partitions that was 40,000 fsyncs in a
/// row, 10 s on this machine's disk; one `syncfs` after writing them all
/// costs about one. Crash safety holds: these files are checkpoints that
/// recovery checks and rebuilds (a missing or garbled index, recovery point
/// or snapshot only makes the next open scan more), the data they describe
/// was synced before them (the seal's sync is not deferred), and a rename
/// leaves the old or the new file.
///
/// Only the shard's own thread is affected; the scope must end with
/// [`DeferredSyncs::finish`] (dropping it unfinished restores per-file syncs
/// but leaves what was written unsynced, which is as safe as a crash).
pub struct DeferredSyncs {
    _not_send: std::marker::PhantomData<Rc<()>>,
}

impl DeferredSyncs {
    /// Opens the scope on this thread.
    pub fn begin() -> Self {
        SYNCS_DEFERRED.with(|d| d.set(true));
        DeferredSyncs {
            _not_send: std::marker::PhantomData,
        }
    }

    /// Ends the scope: `syncfs` on the file system of each of `dirs`.
    pub fn finish<'a>(self, dirs: impl IntoIterator<Item = &'a Path>) -> Result<(), EngineError> {
        drop(self);
        let mut synced: Vec<u64> = Vec::new();
        for dir in dirs {
            use std::os::unix::fs::MetadataExt;
            let device = match std::fs::metadata(dir) {
                Ok(metadata) => metadata.dev(),
                // A simulated disk's dirs are not on a real file system.
                Err(_) if disk::is_simulated() => 0,
                Err(e) => return Err(EngineError::io(dir, e)),
            };
            if synced.contains(&device) {
                continue;
            }
            synced.push(device);
            disk::sync_filesystem(dir).map_err(|e| EngineError::io(dir, e))?;
        }
        Ok(())
    }
}

impl Drop for DeferredSyncs {
    fn drop(&mut self) {
        SYNCS_DEFERRED.with(|d| d.set(false));
    }
}

/// `fsync` of a directory, so that a created or renamed file survives a crash.
pub fn sync_dir(dir: &Path) -> Result<(), EngineError> {
    disk::sync_dir(dir).map_err(|e| EngineError::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_indexes_are_sparse_and_time_lookups_land_before_the_answer() {
        let segment = Segment::new(Path::new("."), 1000, Segment::empty_meta(1000, 0), 0);
        // 100-byte batches of 2 offsets; timestamps rise but dip every 5th.
        let mut batches = Vec::new();
        for k in 0..200i64 {
            let ts = if k % 5 == 4 { 10 } else { 1_000 + k * 10 };
            batches.push((1000 + 2 * k, ts));
            segment.record_append(k as u64 * 100, 1000 + 2 * k, 1001 + 2 * k, ts, 100, 1000);
        }
        let meta = segment.meta.borrow().clone();
        // An entry every 1000 bytes (10 batches), the time index no denser.
        assert_eq!(meta.index.len(), 19);
        assert!(meta.time_index.len() <= meta.index.len());
        assert!(meta.time_index.len() >= 10);
        assert_eq!(meta.max_timestamp_ms, 1_000 + 198 * 10);
        for target in [
            0, 10, 11, 999, 1_000, 1_001, 1_045, 1_500, 2_970, 2_980, 2_981,
        ] {
            let from = 1000 + i64::from(meta.time_index.lookup(target));
            let first = batches
                .iter()
                .find(|&&(_, ts)| ts >= target)
                .map(|&(o, _)| o);
            match first {
                Some(first) => assert!(from <= first, "target {target}: {from} > {first}"),
                None => assert!(target > meta.max_timestamp_ms),
            }
        }
        // Sealing adds the largest timestamp as the last entry.
        drop(meta);
        let dir = tempfile::tempdir().unwrap();
        let sealed = Segment::new(dir.path(), 1000, segment.meta.borrow().clone(), 0);
        sealed.write_indexes().unwrap();
        let last = sealed.meta.borrow().time_index.last();
        assert_eq!(last, Some((2_980, 2 * 198)));
        let bytes = std::fs::read(sealed.path("timeindex")).unwrap();
        assert_eq!(TimeIndex::from_bytes(&bytes).and_then(|t| t.last()), last);
        sealed.release_indexes();
        assert!(sealed.indexes_on_disk() && sealed.meta.borrow().index.is_empty());
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(file_name(170410, "log"), "00000000000000170410.log");
        assert_eq!(
            parse_file_name("00000000000000170410.log", "log"),
            Some(170410)
        );
        assert_eq!(parse_file_name("00000000000000170410.index", "log"), None);
        assert_eq!(parse_file_name("0170410.log", "log"), None);
        assert_eq!(parse_file_name("0000000000000017041x.log", "log"), None);
    }
}

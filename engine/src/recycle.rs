//! Recycling: a segment that retention deletes keeps its file as a spare,
//! and a later segment of the same partition takes it over instead of a
//! new, preallocated file (ScyllaDB's commitlog does the same).
//!
//! Why: `fallocate` leaves *unwritten* extents, and the first write into
//! each one converts it, a metadata change that the next `fdatasync` must
//! commit to the file system's journal. A spare's blocks are all written
//! already, so appends over them change no metadata, and the group
//! commit's `fdatasync` is a cache flush alone
//! (`docs/benchmarks/durable-writes.md`: in the broker, 15–50 % less time
//! per fdatasync and a fifth to a quarter of the journal commits).
//!
//! What makes it safe: a spare still holds the old segment's batches,
//! whole and CRC-valid, past the new segment's logical end. A spare is
//! named by its *bound*, one past the last offset it holds
//! (`00000000000000004711.recycled`), and only becomes a segment based at
//! or above it, so every stale batch lies wholly below the segment's base.
//! Recovery stops there as at preallocated zeros (`recovery::next_batch`),
//! and a sealed segment is trimmed to its logical size, so no stale batch
//! ever lies inside the log. A spare is only taken once no read of the old
//! segment is still in flight (a file slice being sent would otherwise read
//! the new bytes), and only by the partition whose offsets it holds.
//!
//! When: retention's tick makes spares of what it deletes, and a roll that
//! finds no spare runs retention by size first (`apply_size_retention`),
//! so a busy partition recycles at every roll, not only at the tick.
//!
//! What it costs: up to `rill.segment.recycle.max` spares per partition
//! on disk past what retention keeps. A partition keeps none while its
//! data dir is low on space, and retention then deletes the spares it has.

use crate::disk::{self, DataFile};
use crate::error::EngineError;
use crate::segment::{file_name, parse_file_name, remove_if_present, Readers, Segment};
use crate::types::Offset;
use std::path::{Path, PathBuf};
use std::rc::Weak;

/// The extension of a spare's file name.
pub const EXTENSION: &str = "recycled";

/// The read handles a retired segment had: reads in flight may hold them.
type ReaderRefs = (Weak<DataFile>, Option<std::sync::Weak<std::fs::File>>);

/// A retired segment's file, waiting for a later segment.
#[derive(Debug)]
struct Spare {
    /// One past the last offset the file holds.
    bound: Offset,
    path: PathBuf,
    readers: Option<ReaderRefs>,
}

impl Spare {
    /// No read of the old segment is in flight.
    fn idle(&self) -> bool {
        self.readers.as_ref().is_none_or(|(dma, file)| {
            dma.strong_count() == 0 && file.as_ref().is_none_or(|f| f.strong_count() == 0)
        })
    }
}

/// One partition's spares. Shard-local.
#[derive(Debug, Default)]
pub struct RecyclePool {
    spares: Vec<Spare>,
    /// Spares new segments took since the pool was loaded.
    adopted: u64,
}

impl RecyclePool {
    /// The spares in `dir`: the `max` with the highest bounds are kept,
    /// the rest deleted (the setting was lowered, or turned off).
    pub fn load(dir: &Path, max: usize) -> Result<RecyclePool, EngineError> {
        let mut bounds: Vec<Offset> = disk::read_dir(dir)
            .map_err(|e| EngineError::io(dir, e))?
            .iter()
            .filter_map(|name| parse_file_name(name, EXTENSION))
            .collect();
        bounds.sort_unstable_by(|a, b| b.cmp(a));
        let mut pool = RecyclePool::default();
        for (i, bound) in bounds.into_iter().enumerate() {
            let path = dir.join(file_name(bound, EXTENSION));
            if i < max {
                pool.spares.push(Spare {
                    bound,
                    path,
                    readers: None,
                });
            } else {
                remove_if_present(&path)?;
            }
        }
        Ok(pool)
    }

    /// Spares held.
    pub fn len(&self) -> usize {
        self.spares.len()
    }

    /// Spares new segments took since the pool was loaded.
    pub fn adopted(&self) -> u64 {
        self.adopted
    }

    /// Whether no spare is held.
    pub fn is_empty(&self) -> bool {
        self.spares.is_empty()
    }

    /// Keeps `segment`'s file as a spare, bounded by its next offset. The
    /// caller has checked that the pool has room and the segment takes no
    /// more writes (sealed: trimmed to its logical size, no appender).
    pub fn retire(&mut self, dir: &Path, segment: &Segment) -> Result<(), EngineError> {
        let bound = segment.meta.borrow().next_offset;
        let path = dir.join(file_name(bound, EXTENSION));
        let readers = segment.recycle_files(&path)?;
        self.spares.push(Spare {
            bound,
            path,
            readers: readers.as_ref().map(weak_refs),
        });
        Ok(())
    }

    /// Renames a spare to `to`, the file of a new segment based at `base`,
    /// if one may become it: bounded at or below `base`, and read by no one
    /// (the newest such).
    /// The caller syncs the directory before anything is written to it.
    pub fn adopt(&mut self, base: Offset, to: &Path) -> Result<bool, EngineError> {
        let Some((i, _)) = self
            .spares
            .iter()
            .enumerate()
            .filter(|(_, s)| s.bound <= base && s.idle())
            .max_by_key(|(_, s)| s.bound)
        else {
            return Ok(false);
        };
        let spare = self.spares.swap_remove(i);
        disk::rename(&spare.path, to).map_err(|e| EngineError::io(&spare.path, e))?;
        self.adopted += 1;
        Ok(true)
    }

    /// Deletes every spare (the data dir runs low on space).
    pub fn clear(&mut self) -> Result<(), EngineError> {
        for spare in std::mem::take(&mut self.spares) {
            remove_if_present(&spare.path)?;
        }
        Ok(())
    }
}

fn weak_refs(readers: &Readers) -> ReaderRefs {
    let (dma, file) = readers;
    (
        std::rc::Rc::downgrade(dma),
        file.as_ref().map(std::sync::Arc::downgrade),
    )
}

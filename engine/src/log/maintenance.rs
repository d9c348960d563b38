//! What the background cleaners may see and do of a partition log.
//!
//! Compaction (`crate::compaction`) runs outside `log/` and must not reach
//! into the log's state: it gets a [`Maintenance`] view from
//! [`PartitionLog::maintenance`], and this file is the whole of what it
//! can read (the topic config, the clock, the high watermark, the segments)
//! and change (swap a sealed segment for its rewritten copy). Retention's
//! deletions stay inside the log (`cleanup.rs`), because they move the log
//! start offset and the transaction state with them; which segments it
//! deletes is decided by the pure policy in `crate::retention`.
//!
//! The rules the view keeps for its callers:
//! - the active (last) segment is never handed out as sealed, so a cleaner
//!   never races the appends;
//! - a replacement keeps the base offset and offset range of the segment it
//!   replaces, and the batch cache is dropped so no reader sees the old
//!   bytes from memory once the new file is in place.

use super::PartitionLog;
use crate::config::TopicConfig;
use crate::segment::Segment;
use crate::txn_index::AbortedTxn;
use crate::types::{Offset, TimestampMs};
use std::path::Path;
use std::rc::Rc;

/// The cleaners' view of one partition log. Borrowed for one pass.
pub struct Maintenance<'a> {
    log: &'a PartitionLog,
}

impl PartitionLog {
    /// The narrow view the background cleaners work through.
    pub(crate) fn maintenance(&self) -> Maintenance<'_> {
        Maintenance { log: self }
    }

    /// The counters of this shard's log cleaner (shared by its partitions).
    pub fn cleaner_stats(&self) -> std::cell::Ref<'_, super::CleanerStats> {
        self.ctx.cleaner.borrow()
    }
}

impl Maintenance<'_> {
    /// The topic config in force.
    pub fn topic_config(&self) -> TopicConfig {
        self.log.config()
    }

    /// Wall-clock milliseconds from the engine's clock.
    pub fn now_ms(&self) -> TimestampMs {
        self.log.now_ms()
    }

    /// What readers may see: a cleaner only touches segments wholly below it.
    pub fn high_watermark(&self) -> Offset {
        self.log.high_watermark()
    }

    /// The cleaner stops below this: transactions below it are complete, so
    /// their fate (commit or abort) is known.
    pub fn last_stable_offset(&self) -> Offset {
        self.log.last_stable_offset()
    }

    /// The first offset of the log.
    pub fn log_start_offset(&self) -> Offset {
        self.log.log_start_offset()
    }

    /// The aborted transactions of the log, in marker order.
    pub fn aborted_transactions(&self) -> Vec<AbortedTxn> {
        self.log.txn.borrow().aborted.all()
    }

    /// The shard's cleaner counters and the engine's settings.
    pub fn context(&self) -> &super::LogContext {
        &self.log.ctx
    }

    /// Whether `segment` is still a sealed segment of the log with the
    /// offset range it had (not deleted by retention, not cut by a
    /// truncation, none of which a cleaner pass holds off).
    pub fn holds_sealed(&self, segment: &Rc<Segment>, next_offset: Offset) -> bool {
        if self.log.truncating.get() || segment.deleted.get() {
            return false;
        }
        let state = self.log.state.borrow();
        let sealed = state.segments.len().saturating_sub(1);
        state.segments[..sealed]
            .iter()
            .any(|s| Rc::ptr_eq(s, segment))
            && segment.meta.borrow().next_offset == next_offset
    }

    /// The partition directory (for the cleaner's temporary files).
    pub fn dir(&self) -> &Path {
        self.log.dir()
    }

    /// The sealed segments (all but the active one), oldest first.
    pub fn sealed_segments(&self) -> Vec<Rc<Segment>> {
        let state = self.log.state.borrow();
        let sealed = state.segments.len().saturating_sub(1);
        state.segments[..sealed].to_vec()
    }

    /// Swaps the sealed segment `old` for its rewritten `new` (same base
    /// offset and offset range), and drops the partition's cached batches,
    /// which may hold the old bytes. Does nothing when `old` is no longer in
    /// the log (deleted by retention meanwhile).
    pub fn replace_segment(&self, old: &Rc<Segment>, new: Rc<Segment>) {
        assert_eq!(
            old.base_offset, new.base_offset,
            "a replacement segment keeps its base offset"
        );
        let mut state = self.log.state.borrow_mut();
        let sealed = state.segments.len().saturating_sub(1);
        if let Some(slot) = state.segments[..sealed]
            .iter_mut()
            .find(|s| Rc::ptr_eq(s, old))
        {
            // Sealed: its indexes go through the index cache like every
            // sealed segment's, once files that match it are written here
            // (whatever the compaction wrote before; unwritten, they stay
            // resident, which is only memory).
            match new.write_indexes() {
                Ok(()) => new.release_indexes(),
                Err(e) => {
                    tracing::warn!(error = %e, "index files of a compacted segment not written; its indexes stay in memory")
                }
            }
            *slot = new;
            // The old segment's cached indexes describe bytes that are gone.
            self.log.ctx.index_cache.remove(old.index_key());
        }
        crate::cache::BatchCache::clear(&self.log.chunks);
    }
}

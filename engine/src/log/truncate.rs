//! Cutting the log's tail for replication: Kafka's `Log.truncateTo` (a
//! follower drops what its leader never had) and `truncateFullyAndStartAt`
//! (a follower whose whole log is out of the leader's range starts over).
//!
//! Why a pending-truncation file: a truncation touches several files — the
//! later segments are deleted, the segment holding the cut is shortened, the
//! checkpoints are rewritten — and a crash between two of those steps must
//! not leave a log that ends past the cut (its later segments would pass
//! recovery as valid data). So the cut is first made durable as
//! `pending-truncation` (`to <offset>` or `fully <offset>`); the steps
//! follow, newest segment first; the file is removed last. When a log is
//! opened with the file still there, [`finish_pending`] performs the whole
//! cut again from the files alone (every step is idempotent) before
//! recovery runs. After a crash at any point the log therefore ends at or
//! before the cut, and holds only whole batches that were there before.
//!
//! Kafka truncates at batch boundaries: an offset inside a batch drops the
//! whole batch, and the log then ends at that batch's base offset.
//!
//! In memory the truncation also resets what follows the log end: the
//! segments' indexes, the batch cache, the written / durable / high
//! watermark offsets, the producer state (rebuilt from a snapshot at or
//! below the cut plus a replay, as at open), and the leader-epoch cache
//! (`truncate_from_end`). Appends are refused while it runs
//! ([`crate::EngineError::Truncating`]): only a follower truncates, and a
//! follower takes no produce requests.

use super::PartitionLog;
use crate::appender::Appender;
use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::cache::BatchCache;
use crate::error::EngineError;
use crate::segment::{
    file_name, remove_if_present, segment_bases, sync_dir, write_file_synced, Segment,
};
use crate::types::{Offset, TopicPartition};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;

/// The file that records a truncation under way.
const PENDING_FILE_NAME: &str = "pending-truncation";

/// A truncation as recorded in [`PENDING_FILE_NAME`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Keep the batches that end before the offset (`truncate_to`).
    To(Offset),
    /// Drop every segment; the log restarts empty at the offset.
    Fully(Offset),
}

impl Pending {
    fn encode(self) -> String {
        match self {
            Pending::To(offset) => format!("to {offset}\n"),
            Pending::Fully(offset) => format!("fully {offset}\n"),
        }
    }

    fn parse(text: &str) -> Option<Pending> {
        let mut fields = text.split_whitespace();
        let kind = fields.next()?;
        let offset: Offset = fields.next()?.parse().ok()?;
        if fields.next().is_some() || offset < 0 {
            return None;
        }
        match kind {
            "to" => Some(Pending::To(offset)),
            "fully" => Some(Pending::Fully(offset)),
            _ => None,
        }
    }
}

/// Records `pending` durably before the first destructive step.
fn write_pending(dir: &Path, pending: Pending) -> Result<(), EngineError> {
    write_file_synced(&dir.join(PENDING_FILE_NAME), pending.encode().as_bytes())?;
    sync_dir(dir)
}

/// Removes the record of a finished truncation, durably.
fn clear_pending(dir: &Path) -> Result<(), EngineError> {
    remove_if_present(&dir.join(PENDING_FILE_NAME))?;
    sync_dir(dir)
}

fn read_offset_file(path: &Path) -> Option<Offset> {
    crate::disk::read_to_string(path).ok()?.trim().parse().ok()
}

/// Lowers the offset stored in `path` to `offset` when it is above it.
fn lower_offset_file(path: &Path, offset: Offset) -> Result<(), EngineError> {
    if read_offset_file(path).is_some_and(|stored| stored > offset) {
        write_file_synced(path, format!("{offset}\n").as_bytes())?;
    }
    Ok(())
}

/// Removes every file of the segment based at `base`.
fn delete_segment_files(dir: &Path, base: Offset) -> Result<(), EngineError> {
    for extension in ["log", "index", "timeindex", "txnindex"] {
        remove_if_present(&dir.join(file_name(base, extension)))?;
    }
    Ok(())
}

/// At open: finishes a truncation a crash interrupted, from the files
/// alone, and removes its record. Nothing to do without one.
///
/// A record that does not parse is refused, not guessed at: it was written
/// whole through a rename, so an unreadable one means a damaged disk. The
/// partition's open then fails, and the log manager keeps that partition
/// offline, its files as they are, while the shard's others open.
pub(crate) fn finish_pending(dir: &Path, tp: &TopicPartition) -> Result<(), EngineError> {
    let path = dir.join(PENDING_FILE_NAME);
    let text = match crate::disk::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(EngineError::io(&path, e)),
    };
    let Some(pending) = Pending::parse(&text) else {
        return Err(EngineError::io(
            &path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("unreadable pending truncation {text:?}"),
            ),
        ));
    };
    tracing::warn!(partition = %tp, ?pending, "finishing a truncation interrupted by a crash");
    let bases = segment_bases(dir)?;
    match pending {
        Pending::To(offset) => {
            // As the live truncation does: the segment holding the cut
            // stays (possibly emptied), the ones after it go.
            for &base in bases.iter().rev().filter(|&&base| base > offset) {
                delete_segment_files(dir, base)?;
            }
            if let Some(&base) = bases.iter().rev().find(|&&base| base <= offset) {
                cut_segment_file(dir, base, offset)?;
            }
        }
        Pending::Fully(offset) => {
            for &base in bases.iter().rev() {
                delete_segment_files(dir, base)?;
            }
            super::txn::remove_all_snapshots(dir)?;
            write_file_synced(
                &dir.join("log-start-offset"),
                format!("{offset}\n").as_bytes(),
            )?;
            write_file_synced(
                &dir.join("recovery-point"),
                format!("{offset}\n").as_bytes(),
            )?;
            super::epochs::write_checkpoint(dir, &Default::default())?;
        }
    }
    let offset = match pending {
        Pending::To(offset) | Pending::Fully(offset) => offset,
    };
    lower_offset_file(&dir.join("recovery-point"), offset)?;
    lower_offset_file(&dir.join("log-start-offset"), offset)?;
    lower_offset_file(&dir.join(super::tiering::DELETED_BELOW_FILE), offset)?;
    clear_pending(dir)
}

/// Cuts the `.log` file of the segment based at `base` before its first
/// batch that reaches `offset` (or before the first batch that does not
/// parse or is torn: recovery would cut there anyway), syncs it, and
/// removes its offset and time indexes, which may point past the cut
/// (recovery rebuilds them: the segment is now the last one).
fn cut_segment_file(dir: &Path, base: Offset, offset: Offset) -> Result<(), EngineError> {
    let path = dir.join(file_name(base, "log"));
    let file = crate::disk::open_reader(&path).map_err(|e| EngineError::io(&path, e))?;
    let file_bytes = crate::disk::len(&path).map_err(|e| EngineError::io(&path, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    reader
        .seek(SeekFrom::Start(0))
        .map_err(|e| EngineError::io(&path, e))?;
    let mut keep_bytes = 0u64;
    while keep_bytes + HEADER_BYTES as u64 <= file_bytes {
        let mut head = [0u8; HEADER_BYTES];
        reader
            .read_exact(&mut head)
            .map_err(|e| EngineError::io(&path, e))?;
        let Ok(header) = BatchHeader::parse(&head) else {
            break;
        };
        let total = header.total_bytes() as u64;
        if header.last_offset() >= offset || keep_bytes + total > file_bytes {
            break;
        }
        keep_bytes += total;
        reader
            .seek_relative(total as i64 - HEADER_BYTES as i64)
            .map_err(|e| EngineError::io(&path, e))?;
    }
    drop(reader);
    if keep_bytes < file_bytes {
        crate::disk::set_len_synced(&path, keep_bytes).map_err(|e| EngineError::io(&path, e))?;
    }
    remove_if_present(&dir.join(file_name(base, "index")))?;
    remove_if_present(&dir.join(file_name(base, "timeindex")))
}

/// Clears [`PartitionLog::truncating`] when the truncation ends, however
/// it ends.
struct TruncatingGuard<'a>(&'a PartitionLog);

impl Drop for TruncatingGuard<'_> {
    fn drop(&mut self) {
        self.0.truncating.set(false);
    }
}

impl PartitionLog {
    /// Kafka's `truncateTo`: removes every record at or after `offset`,
    /// and returns whether anything was removed. An offset inside a batch
    /// removes that whole batch (the log then ends at its base offset); an
    /// offset at or past the log end changes nothing; an offset before the
    /// first segment empties the log and restarts it there
    /// ([`PartitionLog::truncate_fully_and_start_at`]). Waits for the
    /// pending writes first; appends are refused until it returns.
    ///
    /// Crash safe: reopening after a crash at any point yields a log that
    /// ends at or before `offset` (see the module doc). Run it to its end:
    /// a future dropped midway leaves the cut for the next open to finish.
    pub async fn truncate_to(&self, offset: Offset) -> Result<bool, EngineError> {
        let _guard = self.begin_truncation(offset)?;
        self.flush().await?;
        let (end, first_base) = {
            let state = self.state.borrow();
            let first_base = state.segments.first().map_or(0, |s| s.base_offset);
            (state.log_end_offset, first_base)
        };
        if offset >= end {
            return Ok(false);
        }
        if offset < first_base {
            self.truncate_fully_inner(offset).await?;
            return Ok(true);
        }
        let Some((segment, position, cut)) = self.locate_any(offset).await? else {
            return Ok(false);
        };
        write_pending(&self.dir, Pending::To(cut))?;
        self.drop_segments_after(&segment).await?;
        self.cut_segment(&segment, position, cut).await?;
        self.reset_after_cut(cut)?;
        clear_pending(&self.dir)?;
        self.check_offsets();
        Ok(true)
    }

    /// Kafka's `truncateFullyAndStartAt`: deletes every segment and restarts
    /// the log, empty, at `offset` (log start, log end and high watermark
    /// all there), with no producer state and an empty epoch cache. For a
    /// follower whose log lies wholly outside its leader's. Crash safe like
    /// [`PartitionLog::truncate_to`].
    pub async fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<(), EngineError> {
        let _guard = self.begin_truncation(offset)?;
        self.flush().await?;
        self.truncate_fully_inner(offset).await
    }

    /// Whether a truncation is running: the log end it reports is the old
    /// one until the truncation returns, so a leader state must not be
    /// built from it meanwhile.
    pub fn is_truncating(&self) -> bool {
        self.truncating.get()
    }

    /// Refuses a truncation of a closed, failed or already truncating log,
    /// or to a negative offset; otherwise marks the log as truncating until
    /// the guard drops.
    fn begin_truncation(&self, offset: Offset) -> Result<TruncatingGuard<'_>, EngineError> {
        if offset < 0 {
            let state = self.state.borrow();
            return Err(EngineError::OffsetOutOfRange {
                offset,
                log_start_offset: state.log_start_offset,
                log_end_offset: state.log_end_offset,
            });
        }
        self.check_appendable()?;
        self.truncating.set(true);
        self.mutated.set(true);
        Ok(TruncatingGuard(self))
    }

    async fn truncate_fully_inner(&self, offset: Offset) -> Result<(), EngineError> {
        write_pending(&self.dir, Pending::Fully(offset))?;
        let doomed: Vec<Rc<Segment>> = self.state.borrow_mut().segments.drain(..).collect();
        for segment in doomed.iter().rev() {
            close_appender(segment).await?;
            segment.delete_files()?;
        }
        super::txn::remove_all_snapshots(&self.dir)?;
        *self.txn.borrow_mut() = Default::default();
        self.clear_epochs()?;
        write_file_synced(
            &self.dir.join("log-start-offset"),
            format!("{offset}\n").as_bytes(),
        )?;
        self.write_recovery_point(offset)?;
        self.lower_deleted_below(offset)?;
        BatchCache::clear(&self.chunks);
        {
            let mut state = self.state.borrow_mut();
            assert!(state.pending.is_empty(), "nothing is pending after a flush");
            let now_ms = self.now_ms();
            state.segments.push(Rc::new(Segment::new(
                &self.dir,
                offset,
                Segment::empty_meta(offset, now_ms),
                0,
            )));
            state.log_start_offset = offset;
            state.log_end_offset = offset;
        }
        // The order keeps `hw ≤ written ≤ end` whichever way they move.
        self.high_watermark
            .set(offset.min(self.high_watermark.get()));
        self.durable.set(offset);
        self.written.set(offset);
        self.high_watermark.set(offset);
        self.commit.borrow_mut().truncated();
        clear_pending(&self.dir)?;
        self.check_offsets();
        Ok(())
    }

    /// Deletes the segments after `keep`, newest first (a crash then leaves
    /// a prefix of the log, and the pending record finishes the cut).
    async fn drop_segments_after(&self, keep: &Rc<Segment>) -> Result<(), EngineError> {
        let doomed: Vec<Rc<Segment>> = {
            let mut state = self.state.borrow_mut();
            let index = state
                .segments
                .iter()
                .position(|s| Rc::ptr_eq(s, keep))
                .unwrap_or(state.segments.len());
            state.segments.drain(index + 1..).collect()
        };
        for segment in doomed.iter().rev() {
            close_appender(segment).await?;
            segment.delete_files()?;
        }
        Ok(())
    }

    /// Cuts `segment` at `position`, where the batch that ends the log at
    /// `cut` starts: the file (zeroed after the cut and synced by its
    /// appender, which the segment keeps: it is the active one now), its
    /// indexes and its bookkeeping.
    async fn cut_segment(
        &self,
        segment: &Rc<Segment>,
        position: u64,
        cut: Offset,
    ) -> Result<(), EngineError> {
        if segment.indexes_on_disk() {
            // A sealed segment becomes the active one again: its indexes
            // come back into its meta (from the index cache or the files).
            let interval = self.config.borrow().index_interval_bytes;
            let (index, time_index) = self
                .ctx
                .index_cache
                .take_for_restore(segment, interval)
                .await;
            segment.restore_indexes(index, time_index);
        }
        if segment.appender.borrow().is_none() {
            let size_bytes = segment.meta.borrow().size_bytes;
            let appender = Appender::open(
                &segment.log_path(),
                size_bytes,
                self.ctx.config.preallocate_bytes,
            )
            .await?;
            *segment.appender.borrow_mut() = Some(appender);
        }
        let appender = segment.appender.borrow_mut().take();
        if let Some(mut appender) = appender {
            let result = appender.truncate(position).await;
            *segment.appender.borrow_mut() = Some(appender);
            result?;
        }
        let (max_cut_off, last_entry_position) = {
            let mut meta = segment.meta.borrow_mut();
            let relative = (cut - segment.base_offset).clamp(0, i64::from(u32::MAX)) as u32;
            meta.index.truncate_to_offset(relative);
            meta.time_index.truncate_to_offset(relative);
            meta.size_bytes = position;
            meta.next_offset = cut;
            let last_entry_position = meta.index.last().map_or(0, |(_, p)| u64::from(p));
            meta.bytes_since_index_entry = position.saturating_sub(last_entry_position);
            let max_cut_off = meta.max_timestamp_batch_offset >= cut;
            if max_cut_off {
                // The sparse time index's last entry is the largest timestamp up
                // to the last offset-index entry (or later); the batches from
                // there to the cut are read for theirs.
                let (max_timestamp_ms, batch_offset) = match meta.time_index.last() {
                    Some((t, o)) => (t, segment.base_offset + i64::from(o)),
                    None => (-1, segment.base_offset),
                };
                meta.max_timestamp_ms = max_timestamp_ms;
                meta.max_timestamp_batch_offset = batch_offset;
            }
            (max_cut_off, last_entry_position)
        };
        if max_cut_off && position > last_entry_position {
            let length = (position - last_entry_position) as usize;
            let bytes = segment.read_bytes(last_entry_position, length).await?;
            let mut meta = segment.meta.borrow_mut();
            for item in crate::batch::batches(&bytes) {
                let Ok((header, _)) = item else { break };
                if header.max_timestamp > meta.max_timestamp_ms {
                    meta.max_timestamp_ms = header.max_timestamp;
                    meta.max_timestamp_batch_offset = header.base_offset;
                }
            }
        }
        segment
            .readable_bytes
            .set(position.min(segment.readable_bytes.get()));
        Ok(())
    }

    /// After the files were cut at `cut`: the offsets, the batch cache, the
    /// checkpoints, the leader-epoch cache and the producer state follow.
    fn reset_after_cut(&self, cut: Offset) -> Result<(), EngineError> {
        BatchCache::clear(&self.chunks);
        let start_moved_back = {
            let mut state = self.state.borrow_mut();
            assert!(state.pending.is_empty(), "nothing is pending after a flush");
            state.log_end_offset = cut;
            // Kafka's truncateTo: a start inside the cut batch moves back with it.
            let moved = state.log_start_offset > cut;
            state.log_start_offset = state.log_start_offset.min(cut);
            moved
        };
        if start_moved_back {
            write_file_synced(
                &self.dir.join("log-start-offset"),
                format!("{cut}\n").as_bytes(),
            )?;
        }
        self.lower_deleted_below(cut)?;
        self.high_watermark.set(self.high_watermark.get().min(cut));
        self.durable.set(self.durable.get().min(cut));
        self.written.set(self.written.get().min(cut));
        self.commit.borrow_mut().truncated();
        self.write_recovery_point(cut.min(self.durable.get()))?;
        self.truncate_epochs_from_end(cut)?;
        // Producer state, open transactions and aborts follow the cut.
        self.truncate_transactions(cut)
    }

    /// The segment and position of the first batch whose last offset is
    /// `>= offset`, ignoring the high watermark (truncation sees everything
    /// written), and the offset the log will end at: Kafka truncates at batch
    /// boundaries, so an offset inside a batch drops that whole batch.
    async fn locate_any(
        &self,
        offset: Offset,
    ) -> Result<Option<(Rc<Segment>, u64, Offset)>, EngineError> {
        let segments = self.segments_from(offset);
        let saved: Vec<u64> = segments.iter().map(|s| s.readable_bytes.get()).collect();
        for s in &segments {
            s.readable_bytes.set(s.meta.borrow().size_bytes);
        }
        let found = self.locate(offset).await;
        for (s, r) in segments.iter().zip(saved) {
            s.readable_bytes.set(r);
        }
        Ok(found?.map(|(s, p, h)| (s, p, offset.min(h.base_offset))))
    }
}

/// Waits for a segment's writes and drops its appender before its files go.
async fn close_appender(segment: &Segment) -> Result<(), EngineError> {
    let appender = segment.appender.borrow_mut().take();
    match appender {
        // Cutting to nothing first waits for any streamed write, which
        // could otherwise land after the file is gone from the directory.
        Some(mut appender) => appender.truncate(0).await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::Pending;

    #[test]
    fn pending_records_round_trip_and_refuse_garbage() {
        for pending in [Pending::To(0), Pending::To(170_410), Pending::Fully(42)] {
            assert_eq!(Pending::parse(&pending.encode()), Some(pending));
        }
        for text in ["", "to", "to x", "to -1", "fully 1 2", "cut 5"] {
            assert_eq!(Pending::parse(text), None, "{text:?}");
        }
    }
}

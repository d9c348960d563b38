//! The partition's leader-epoch checkpoint: Kafka's `leader-epoch-checkpoint`
//! file beside the segments, kept in step with the log.
//!
//! Why: a replica that comes back must cut exactly the records that were
//! never committed (KIP-101), which needs, on every replica, the offset at
//! which each leader epoch began. The pure cache is [`LeaderEpochCache`];
//! this file loads it at open, extends it on append, cuts it with the log
//! and writes it out.
//!
//! When the file is written (temporary file, fsync, rename, fsync of the
//! directory, as `write_file_synced` and `sync_dir` do it): only when the
//! cache changes — the first batch of a new epoch, a truncation — and not
//! when only the log start moved (open cuts the entries below it again). An append in the same epoch as the last one costs one
//! comparison. The write is blocking I/O on the shard, like the producer
//! snapshot at a roll: a new epoch comes with a leader election (seconds
//! apart at the very least), so a few milliseconds of fsync there are
//! nothing next to the election itself.
//!
//! Order against the log: the entry for a new epoch is made durable before
//! the batch that starts the epoch is appended. A crash can therefore leave
//! an entry past the log end, never a batch whose epoch the file lacks; at
//! open the cache is cut back to the recovered log end (Kafka's
//! `truncateFromEnd` after recovery), which also covers recovery's own
//! truncation of a torn tail.
//!
//! A missing or unreadable file (a log written before rill kept one, a
//! corrupt disk) is rebuilt from the batch headers on disk: each batch
//! carries its `partition_leader_epoch`, and the first batch of each newer
//! epoch is an entry. That reads every header of every segment once, and
//! only then.

use super::epoch_cache::{EpochEndOffset, LeaderEpochCache};
use super::PartitionLog;
use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::error::EngineError;
use crate::segment::{sync_dir, write_file_synced, Segment};
use crate::types::{LeaderEpoch, Offset};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;

/// Kafka's name for the file, in the partition directory.
pub const CHECKPOINT_FILE_NAME: &str = "leader-epoch-checkpoint";

/// Writes `cache` as the partition's checkpoint, durably.
pub(crate) fn write_checkpoint(dir: &Path, cache: &LeaderEpochCache) -> Result<(), EngineError> {
    write_file_synced(
        &dir.join(CHECKPOINT_FILE_NAME),
        cache.encode_checkpoint().as_bytes(),
    )?;
    sync_dir(dir)
}

/// The cache of a log being opened, whose recovered segments span
/// `[log_start_offset, log_end_offset)`: the checkpoint file, or a rebuild
/// from the batch headers when it is missing or unusable; then cut to the
/// log. The file is rewritten when what was loaded changed.
pub(crate) fn load_at_open(
    dir: &Path,
    segments: &[Rc<Segment>],
    log_start_offset: Offset,
    log_end_offset: Offset,
) -> Result<LeaderEpochCache, EngineError> {
    let path = dir.join(CHECKPOINT_FILE_NAME);
    let (mut cache, mut changed) = match crate::disk::read_to_string(&path) {
        Ok(text) => match LeaderEpochCache::from_checkpoint(&text) {
            Ok(cache) => (cache, false),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e,
                    "unusable leader-epoch checkpoint; rebuilt from the batch headers");
                (rebuild_from_segments(segments)?, true)
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let cache = rebuild_from_segments(segments)?;
            let changed = !cache.entries().is_empty();
            (cache, changed)
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            tracing::warn!(path = %path.display(), error = %e,
                "leader-epoch checkpoint is not text; rebuilt from the batch headers");
            (rebuild_from_segments(segments)?, true)
        }
        Err(e) => return Err(EngineError::io(&path, e)),
    };
    changed |= cache.truncate_from_end(log_end_offset);
    changed |= cut_from_start(&mut cache, log_start_offset);
    if changed {
        write_checkpoint(dir, &cache)?;
    }
    Ok(cache)
}

/// Kafka's `truncateFromStart`, reporting a change only when the entries
/// really differ (moving an entry to where it already starts is none).
fn cut_from_start(cache: &mut LeaderEpochCache, log_start_offset: Offset) -> bool {
    let before = cache.entries().to_vec();
    cache.truncate_from_start(log_start_offset);
    before != cache.entries()
}

/// The cache the batches of `segments` describe: the first batch of each
/// epoch newer than the last one seen starts an entry (Kafka's follower
/// rule; batches without an epoch, `-1`, start none).
pub(crate) fn rebuild_from_segments(
    segments: &[Rc<Segment>],
) -> Result<LeaderEpochCache, EngineError> {
    let mut cache = LeaderEpochCache::new();
    for segment in segments {
        for_each_header(segment, |header| {
            let epoch = header.partition_leader_epoch;
            if epoch >= 0 && cache.latest_epoch().is_none_or(|latest| epoch > latest) {
                // Offsets grow through a recovered log, so the entry is valid.
                let _ = cache.assign(epoch, header.base_offset);
            }
        })?;
    }
    Ok(cache)
}

/// Calls `visit` with each batch header of `segment`'s valid bytes, in
/// order, through plain buffered reads (open runs before the partition
/// serves anything; the page cache is coherent with the O_DIRECT writes).
fn for_each_header(
    segment: &Segment,
    mut visit: impl FnMut(&BatchHeader),
) -> Result<(), EngineError> {
    let size_bytes = segment.meta.borrow().size_bytes;
    if size_bytes == 0 {
        return Ok(());
    }
    let path = segment.log_path();
    let file = crate::disk::open_reader(&path).map_err(|e| EngineError::io(&path, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    reader
        .seek(SeekFrom::Start(0))
        .map_err(|e| EngineError::io(&path, e))?;
    let mut position = 0u64;
    while position + HEADER_BYTES as u64 <= size_bytes {
        let mut head = [0u8; HEADER_BYTES];
        reader
            .read_exact(&mut head)
            .map_err(|e| EngineError::io(&path, e))?;
        let header = BatchHeader::parse(&head)?;
        let total = header.total_bytes() as u64;
        if position + total > size_bytes {
            break;
        }
        visit(&header);
        position += total;
        reader
            .seek_relative(total as i64 - HEADER_BYTES as i64)
            .map_err(|e| EngineError::io(&path, e))?;
    }
    Ok(())
}

impl PartitionLog {
    /// A copy of the partition's leader-epoch cache (what its
    /// `leader-epoch-checkpoint` says).
    pub fn leader_epoch_cache(&self) -> LeaderEpochCache {
        self.epochs.borrow().clone()
    }

    /// Kafka's `endOffsetForEpoch`, as a leader answers OffsetForLeaderEpoch:
    /// the largest epoch ≤ `requested` this log knows and where it ends.
    ///
    /// The log's current leader epoch counts as starting at the log end when
    /// no batch carries it yet: Kafka's leader assigns its epoch when it
    /// becomes leader, rill's log records it with the epoch's first batch,
    /// and the answers must be the same either way.
    pub fn end_offset_for_epoch(&self, requested: LeaderEpoch) -> EpochEndOffset {
        let log_end_offset = self.log_end_offset();
        let current = self.leader_epoch();
        let cache = self.epochs.borrow();
        if current >= 0 && cache.latest_epoch().is_none_or(|latest| latest < current) {
            let mut with_current = cache.clone();
            // Valid: a non-negative epoch above the latest, at the log end.
            let _ = with_current.assign(current, log_end_offset);
            return with_current.end_offset_for(requested, log_end_offset);
        }
        cache.end_offset_for(requested, log_end_offset)
    }

    /// OffsetForLeaderEpoch for one partition: checks the requester's
    /// `current_leader_epoch` (`-1`: no check) against the log's leader
    /// epoch as Kafka does — older is `FencedLeaderEpoch`, newer
    /// `UnknownLeaderEpoch` — then answers
    /// [`PartitionLog::end_offset_for_epoch`] of `requested`.
    pub fn end_offset_for_epoch_checked(
        &self,
        current_leader_epoch: LeaderEpoch,
        requested: LeaderEpoch,
    ) -> Result<EpochEndOffset, EngineError> {
        let leader_epoch = self.leader_epoch();
        if current_leader_epoch >= 0 && current_leader_epoch < leader_epoch {
            return Err(EngineError::FencedLeaderEpoch {
                leader_epoch,
                request_epoch: current_leader_epoch,
            });
        }
        if current_leader_epoch > leader_epoch {
            return Err(EngineError::UnknownLeaderEpoch {
                leader_epoch,
                request_epoch: current_leader_epoch,
            });
        }
        Ok(self.end_offset_for_epoch(requested))
    }

    /// Before an append whose batches carry `epoch` and start at
    /// `base_offset`: a newer epoch than the cache's latest starts an entry,
    /// made durable before the batches are appended. Nothing changes when
    /// writing the file fails (the append is then refused).
    /// Refuses to stamp `epoch` when the log already holds a later one:
    /// leader epochs never go backwards in a log. Only a broker acting on a
    /// leadership it has lost would try (the stale coordinator of issue
    /// #30 appended with epoch 2 after its log had epoch 3 from its new
    /// leader); the refusal is logged loudly, as an invariant that held
    /// only because something else stopped that broker.
    pub(crate) fn check_epoch_not_older(&self, epoch: LeaderEpoch) -> Result<(), EngineError> {
        let Some(latest) = self.epochs.borrow().latest_epoch() else {
            return Ok(());
        };
        if epoch >= latest {
            return Ok(());
        }
        tracing::error!(
            dir = %self.dir.display(),
            stamped = epoch,
            latest,
            "refused an append stamped with an older leader epoch than the log's"
        );
        Err(EngineError::StaleLeaderEpoch {
            stamped: epoch,
            latest,
        })
    }

    pub(crate) fn note_append_epoch(
        &self,
        epoch: LeaderEpoch,
        base_offset: Offset,
    ) -> Result<(), EngineError> {
        let newer = epoch >= 0
            && self
                .epochs
                .borrow()
                .latest_epoch()
                .is_none_or(|latest| epoch > latest);
        if !newer {
            return Ok(());
        }
        let mut next = self.epochs.borrow().clone();
        if let Err(e) = next.assign(epoch, base_offset) {
            // Unreachable with a checked epoch and a log offset; refuse, not panic.
            return Err(EngineError::io(
                self.dir.join(CHECKPOINT_FILE_NAME),
                std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()),
            ));
        }
        write_checkpoint(&self.dir, &next)?;
        *self.epochs.borrow_mut() = next;
        Ok(())
    }

    /// After the log was cut to end at `end_offset`: drops the entries that
    /// start at or after it, and rewrites the file if any was dropped.
    pub(crate) fn truncate_epochs_from_end(&self, end_offset: Offset) -> Result<(), EngineError> {
        let changed = self.epochs.borrow_mut().truncate_from_end(end_offset);
        if changed {
            write_checkpoint(&self.dir, &self.epochs.borrow())?;
        }
        Ok(())
    }

    /// After the log start moved to `start_offset` (retention,
    /// DeleteRecords): Kafka's `truncateFromStart`, in memory only. The
    /// file is not rewritten: an entry below the log start says nothing
    /// wrong, [`load_at_open`] cuts it again from the recovered log start,
    /// and the next write (a new epoch, a truncation) carries the cut.
    /// Rewriting it cost two fsyncs on the shard at every deletion from
    /// the front, which a segment roll runs when it recycles a file
    /// (`recycle.rs`); Kafka too stopped flushing it there (KAFKA-15046).
    pub(crate) fn truncate_epochs_from_start(&self, start_offset: Offset) {
        cut_from_start(&mut self.epochs.borrow_mut(), start_offset);
    }

    /// After the whole log was dropped: an empty cache (Kafka's
    /// `clearAndFlush`).
    pub(crate) fn clear_epochs(&self) -> Result<(), EngineError> {
        *self.epochs.borrow_mut() = LeaderEpochCache::new();
        write_checkpoint(&self.dir, &self.epochs.borrow())
    }
}

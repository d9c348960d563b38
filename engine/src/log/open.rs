//! Opening a partition log: find the segments, recover the tail, restore offsets.
//!
//! Segments at or past the recovery point (the active one, and any sealed
//! after the last checkpoint) are scanned batch by batch (header, CRC32C,
//! offsets that only grow) and their indexes rebuilt from that scan. Sealed
//! segments below the recovery point were synced, and their indexes
//! written, when they were sealed: their indexes are loaded and only the
//! batches after the last index entry are read, so opening a large log does
//! not read it all. An index that is missing, corrupt, older than its log,
//! or that does not lead to valid batches ending at the end of the file is
//! not trusted: that segment is scanned whole. The first invalid batch ends
//! the log: its segment is cut there and later segments are deleted, each
//! with a log line saying why. Nothing half-written is ever served. The producer state and the
//! transaction indexes are then rebuilt from the newest usable snapshot and
//! a replay of the batches after it (see [`super::txn`]).

use super::epoch_cache::LeaderEpochCache;
use super::txn::TxnState;
use super::watch::OffsetWatch;
use super::{LogContext, LogState, PartitionLog};
use crate::config::TopicConfig;
use crate::error::EngineError;
use crate::recovery::recover_segment;
use crate::segment::{segment_bases, sync_dir, Segment};
use crate::types::{LeaderEpoch, TopicId, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// An offset checkpoint (`recovery-point`, `log-start-offset`); a file
/// that is there but unreadable is reported and taken as absent (recovery
/// then checks more of the log, and the start comes from the segments).
fn read_offset_file(path: &Path) -> Option<i64> {
    let text = match crate::disk::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "unreadable checkpoint ignored");
            return None;
        }
    };
    match text.trim().parse() {
        Ok(offset) => Some(offset),
        Err(_) => {
            tracing::warn!(path = %path.display(), content = %text.trim(), "malformed checkpoint ignored");
            None
        }
    }
}

/// What recovering the segment files found.
struct Recovered {
    /// The valid segments, oldest first (possibly none).
    segments: Vec<Rc<Segment>>,
    /// Log bytes read and checked batch by batch.
    scanned_bytes: u64,
}

/// The state of a log as recovery leaves its files, before the log is built.
struct Reopened {
    /// The segments, oldest first (never empty).
    segments: Vec<Rc<Segment>>,
    log_start_offset: i64,
    log_end_offset: i64,
    txn: TxnState,
    epochs: LeaderEpochCache,
    /// The epoch appends go on in until the leader sets its own.
    leader_epoch: LeaderEpoch,
    /// The checkpoints on disk do not describe the recovered log.
    checkpoints_behind: bool,
    /// Log bytes read and checked batch by batch.
    scanned_bytes: u64,
    /// The clock read of the open.
    now_ms: i64,
}

impl PartitionLog {
    /// Opens (creating when absent) the log in `dir`, recovering after a crash.
    pub async fn open(
        ctx: Rc<LogContext>,
        dir: PathBuf,
        tp: TopicPartition,
        topic_id: TopicId,
        config: TopicConfig,
    ) -> Result<Rc<PartitionLog>, EngineError> {
        crate::disk::create_dir_all(&dir).map_err(|e| EngineError::io(&dir, e))?;
        // A truncation that a crash interrupted is finished first, so that
        // recovery sees the log it left, never a half-cut one.
        super::truncate::finish_pending(&dir, &tp)?;
        // Likewise a log cleaner's swap: the old or the new segments, whole.
        crate::segment_swap::recover(&dir)?;
        crate::segment::remove_deleted_leftovers(&dir)?;
        let reopened = recover_log(&ctx, &dir, &tp, config.index_interval_bytes)?;
        let recycled = crate::recycle::RecyclePool::load(&dir, ctx.config.segment_recycle_max)?;
        let dir_index = crate::log_dirs::dir_index_of(&ctx.config.data_dirs(), &dir);
        let deleted_below =
            read_offset_file(&dir.join(super::tiering::DELETED_BELOW_FILE)).unwrap_or(0);
        let log = Rc::new_cyclic(|me| PartitionLog {
            me: me.clone(),
            tp,
            dir,
            topic_id,
            config: RefCell::new(config),
            ctx,
            state: RefCell::new(LogState {
                segments: reopened.segments,
                log_start_offset: reopened.log_start_offset,
                log_end_offset: reopened.log_end_offset,
                pending: VecDeque::new(),
                leader_epoch: reopened.leader_epoch,
                messages_since_sync: 0,
                last_sync_ms: reopened.now_ms,
                stream_due_bytes: 0,
            }),
            written: OffsetWatch::new(reopened.log_end_offset),
            durable: OffsetWatch::new(reopened.log_end_offset),
            high_watermark: OffsetWatch::new(reopened.log_end_offset),
            flusher_running: Cell::new(false),
            commit: RefCell::new(Default::default()),
            failed: Cell::new(false),
            failed_for_space: Cell::new(false),
            stalled: Cell::new(false),
            closed: Cell::new(false),
            chunks: Rc::new(RefCell::new(VecDeque::new())),
            txn: RefCell::new(reopened.txn),
            epochs: RefCell::new(reopened.epochs),
            truncating: Cell::new(false),
            leading: Cell::new(true),
            mutated: Cell::new(reopened.checkpoints_behind),
            scanned_at_open_bytes: reopened.scanned_bytes,
            dir_index,
            remote: Cell::new(super::RemoteSpan::default()),
            deleted_below: Cell::new(deleted_below),
            recycled: RefCell::new(recycled),
            placement: std::cell::OnceCell::new(),
        });
        log.check_offsets();
        Ok(log)
    }

    pub(crate) fn self_rc(&self) -> Option<Rc<PartitionLog>> {
        self.me.upgrade()
    }
}

/// Recovers the log in `dir`: its segments trimmed to their valid
/// batches (one empty segment when none is left), its offsets, producer
/// state and leader epochs, the directory synced.
fn recover_log(
    ctx: &LogContext,
    dir: &Path,
    tp: &TopicPartition,
    index_interval_bytes: u64,
) -> Result<Reopened, EngineError> {
    let bases = segment_bases(dir)?;
    let recovery_point = read_offset_file(&dir.join("recovery-point")).unwrap_or(0);
    let stored_start = read_offset_file(&dir.join("log-start-offset")).unwrap_or(0);
    let now = ctx.config.clock.now_ms();

    let Recovered {
        mut segments,
        scanned_bytes,
    } = recover_segments(dir, tp, &bases, recovery_point, index_interval_bytes, now)?;
    drop_empty_trailing_segments(&mut segments)?;
    let log_end_offset = match segments.last() {
        Some(s) => s.meta.borrow().next_offset,
        None => recovery_point.max(stored_start),
    };
    if segments.is_empty() {
        segments.push(Rc::new(Segment::new(
            dir,
            log_end_offset,
            Segment::empty_meta(log_end_offset, now),
            0,
        )));
    }
    let first_base = segments.first().map(|s| s.base_offset).unwrap_or(0);
    let log_start_offset = stored_start.max(first_base).min(log_end_offset);
    let txn = super::txn::rebuild_at_open(dir, &segments, log_end_offset, now)?;
    let epochs = super::epochs::load_at_open(dir, &segments, log_start_offset, log_end_offset)?;
    // Appends go on in the newest epoch the log holds until the leader
    // sets its own: a batch must never carry an older epoch than one
    // before it.
    let leader_epoch = epochs.latest_epoch().unwrap_or(0);
    sync_dir(dir)?;
    // The checkpoints the last close wrote still describe the log: the
    // recovery point is its end, and the producer state of that end is
    // in a snapshot (an empty log needs none).
    let checkpoints_behind = recovery_point != log_end_offset
        || (log_end_offset > 0
            && crate::disk::len(&dir.join(crate::segment::file_name(log_end_offset, "snapshot")))
                .is_err());
    // Sealed segments' indexes are on disk (written above when they
    // were not read from there): lookups go through the index cache
    // (after the replays above, which use them).
    if let Some((_, sealed)) = segments.split_last() {
        for segment in sealed {
            segment.release_indexes();
        }
    }
    Ok(Reopened {
        segments,
        log_start_offset,
        log_end_offset,
        txn,
        epochs,
        leader_epoch,
        checkpoints_behind,
        scanned_bytes,
        now_ms: now,
    })
}

/// Recovers the segments based at `bases` in order, each trimmed to its
/// valid prefix. The first invalid batch ends the log: the segments after
/// the one it is in are deleted.
fn recover_segments(
    dir: &Path,
    tp: &TopicPartition,
    bases: &[i64],
    recovery_point: i64,
    index_interval_bytes: u64,
    now_ms: i64,
) -> Result<Recovered, EngineError> {
    let mut segments: Vec<Rc<Segment>> = Vec::new();
    let mut min_offset = 0i64;
    let mut cut_from: Option<usize> = None;
    let mut scanned_bytes = 0u64;
    for (i, &base) in bases.iter().enumerate() {
        let path = dir.join(crate::segment::file_name(base, "log"));
        let is_last = i + 1 == bases.len();
        let sealed_below_checkpoint = bases.get(i + 1).is_some_and(|&next| next <= recovery_point);
        let outcome = recover_segment(
            &path,
            base,
            min_offset,
            sealed_below_checkpoint,
            index_interval_bytes,
            now_ms,
        )?;
        scanned_bytes += outcome.scanned_bytes;
        let valid = outcome.meta.size_bytes;
        if let Some(reason) = &outcome.stopped_because {
            tracing::warn!(partition = %tp, segment = base, valid_bytes = valid, %reason,
                "recovery truncates the log at the first invalid batch");
            if !is_last {
                cut_from = Some(i + 1);
            }
        }
        if outcome.file_bytes > valid {
            trim_file(&path, valid)?;
        }
        let meta = outcome.meta;
        min_offset = meta.next_offset;
        let size = meta.size_bytes;
        let segment = Rc::new(Segment::new(dir, base, meta, size));
        if !is_last && cut_from.is_none() && !outcome.indexes_from_files {
            // A sealed segment rebuilt by a scan: its files may be missing
            // or stale, and its indexes will be read from them.
            segment.write_indexes()?;
        }
        segments.push(segment);
        if cut_from.is_some() {
            break;
        }
    }
    if let Some(from) = cut_from {
        for &base in &bases[from..] {
            tracing::warn!(partition = %tp, segment = base, "recovery deletes a segment after the corruption point");
            let doomed = Segment::new(dir, base, Segment::empty_meta(base, now_ms), 0);
            doomed.delete_files()?;
        }
    }
    Ok(Recovered {
        segments,
        scanned_bytes,
    })
}

/// Cuts the file at `path` to `valid_bytes` and syncs it: preallocated
/// zeros or a torn tail must not survive to be read as stale bytes.
fn trim_file(path: &Path, valid_bytes: u64) -> Result<(), EngineError> {
    crate::disk::set_len_synced(path, valid_bytes).map_err(|e| EngineError::io(path, e))
}

/// Deletes empty trailing segments other than the first (a roll that never
/// got data).
fn drop_empty_trailing_segments(segments: &mut Vec<Rc<Segment>>) -> Result<(), EngineError> {
    while segments.len() > 1
        && segments
            .last()
            .is_some_and(|s| s.meta.borrow().size_bytes == 0)
    {
        if let Some(s) = segments.pop() {
            s.delete_files()?;
        }
    }
    Ok(())
}

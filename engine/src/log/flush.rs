//! The pipelined group commit.
//!
//! Two tasks per partition run while there is something to do:
//! - the *writer* takes everything appended since its previous round and
//!   writes it with one O_DIRECT write per segment touched (the appends go
//!   straight from their buffers into the DMA pieces, never joined first);
//! - the *syncer* covers whatever the writer has completed with one
//!   fdatasync per dirty file, then makes those rounds durable and, under
//!   `fsync`, visible to readers.
//!
//! They overlap: while one round's fdatasync is in flight the writer is
//! already writing the next, and appends keep accumulating for the round
//! after. A slow fdatasync (bimodal here: ≈0.1 ms or 4–8 ms) therefore makes
//! the next sync cover more instead of stopping the disk writes. Writes stay
//! strictly one round after another, because each round rewrites the last,
//! partial block of the one before.
//!
//! While a round's fdatasync is in flight the writer also joins the round's
//! small appends into one buffer for the batch cache ([`coalesce`]).
//!
//! Before the writer runs at all, the appends themselves stream their whole
//! blocks ([`PartitionLog::stream_pending`], every `stream_min_bytes` of
//! small appends): 256 producers woken by one sync all append before the
//! writer's turn comes, and without this the round's write would only start
//! after the last of them. The writer skips what was streamed.

use super::{LogState, PartitionLog, PendingChunk};
use crate::appender::{Appender, SyncHandle};
use crate::config::FlushPolicy;
use crate::error::{EngineError, FaultClass};
use crate::segment::{sync_dir, write_file_synced, Segment};
use crate::types::Offset;
use bytes::Bytes;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

/// A chunk's offsets `[first, next)`, end position and bytes.
type WrittenPart = (i64, i64, u64, Bytes);
/// A round's parts in one segment, with the file position of the first.
type SegmentParts = (Rc<Segment>, u64, Vec<WrittenPart>);

/// A round's write that fails with a transient error (EMFILE, ENOMEM, ...;
/// see [`FaultClass`]) is retried after this long, doubling per retry up
/// to [`TRANSIENT_RETRY_DELAY_MAX_MS`]...
const TRANSIENT_RETRY_DELAY_MIN_MS: u64 = 10;
const TRANSIENT_RETRY_DELAY_MAX_MS: u64 = 1_000;
/// ... at most this many times (about 2.5 minutes): a fault that lasts
/// longer is not transient, and the partition goes offline as on a failing
/// disk. The producers of the round wait meanwhile (their own request
/// timeout answers them first); new appends are refused at once.
const TRANSIENT_RETRIES_MAX: u32 = 150;

/// Appends below this size are joined with their neighbours for the batch
/// cache; bigger ones are cached as they came. The join pays off where a
/// buffer's fixed costs dominate (a cold allocation, a FIFO entry, a wake-up
/// per chunk), not per byte: joining the ~80 KiB appends of a broker at
/// 650 MB/s cost it 8% of its throughput (an extra copy of every byte).
const COALESCE_PART_MAX_BYTES: usize = 4 << 10;
/// Largest cache chunk made by joining: a read cut from a chunk walks its
/// batch headers from the chunk's start.
const COALESCED_CHUNK_MAX_BYTES: usize = 1 << 20;

/// Joins runs of small, offset-contiguous parts of one segment into one
/// part, so the batch cache holds one buffer per round instead of one per
/// produce request.
///
/// Why: a cached produce buffer lives until 64 MiB of newer data evicts it,
/// so with one buffer per request every request buffer the allocator hands
/// out is memory last touched that long ago, cold in every CPU cache, and
/// the producer's copy into it and the validation reading it wait on DRAM
/// (measured: 256 producers of 1 KiB appends ran at 322-371 k/s with a
/// 64 MiB cache against 461-483 k/s with a 1 MiB one). Joined, the request
/// buffers are freed right after their write and come back warm; the copy
/// is one sequential pass over the round.
fn coalesce(parts: Vec<WrittenPart>) -> Vec<WrittenPart> {
    if parts.len() < 2 {
        return parts;
    }
    let mut out = Vec::new();
    let mut run: Vec<WrittenPart> = Vec::new();
    let mut run_bytes = 0usize;
    for part in parts {
        let len = part.3.len();
        let follows_run = run.last().is_none_or(|last| last.1 == part.0);
        if len >= COALESCE_PART_MAX_BYTES
            || run_bytes + len > COALESCED_CHUNK_MAX_BYTES
            || !follows_run
        {
            out.extend(join(std::mem::take(&mut run), run_bytes));
            run_bytes = 0;
        }
        if len >= COALESCE_PART_MAX_BYTES {
            out.push(part);
        } else {
            run_bytes += len;
            run.push(part);
        }
    }
    out.extend(join(run, run_bytes));
    out
}

/// One part holding the parts of `run` (adjacent, in order), if any.
fn join(run: Vec<WrittenPart>, total_bytes: usize) -> Option<WrittenPart> {
    if run.len() < 2 {
        return run.into_iter().next();
    }
    let (first, _, _, _) = run[0];
    let (_, next, end, _) = *run.last()?;
    let mut bytes: Vec<u8> = Vec::with_capacity(total_bytes);
    for (_, _, _, part) in &run {
        bytes.extend_from_slice(part);
    }
    Some((first, next, end, Bytes::from(bytes)))
}

/// A round's chunks grouped by segment, in order, each group with the file
/// position of its first chunk; and the number of batches in the round.
fn group_by_segment(round: Vec<PendingChunk>) -> (Vec<SegmentParts>, u64) {
    let mut groups: Vec<SegmentParts> = Vec::new();
    let mut batches_in_round = 0u64;
    for chunk in round {
        batches_in_round += chunk.batch_count;
        let bytes = chunk.bytes.freeze();
        let end = chunk.position + bytes.len() as u64;
        let part = (chunk.first_offset, chunk.next_offset, end, bytes);
        match groups.last_mut() {
            Some((segment, _, parts)) if Rc::ptr_eq(segment, &chunk.segment) => {
                parts.push(part);
            }
            _ => groups.push((chunk.segment, chunk.position, vec![part])),
        }
    }
    (groups, batches_in_round)
}

/// A round the writer completed, waiting to be published to readers.
pub(crate) struct WrittenRound {
    /// One past the last offset of the round.
    next_offset: i64,
    /// The round's chunks per segment, in order.
    groups: Vec<(Rc<Segment>, Vec<WrittenPart>)>,
}

impl WrittenRound {
    /// Whether [`WrittenRound::coalesce`] has anything to join.
    fn joinable(&self) -> bool {
        self.groups.iter().any(|(_, parts)| {
            parts
                .iter()
                .filter(|p| p.3.len() < COALESCE_PART_MAX_BYTES)
                .nth(1)
                .is_some()
        })
    }

    /// Joins the round's small parts for the batch cache (see [`coalesce`]).
    fn coalesce(&mut self) {
        for (_, parts) in &mut self.groups {
            *parts = coalesce(std::mem::take(parts));
        }
    }
}

/// Hand-over between the writer and the syncer.
#[derive(Default)]
pub(crate) struct CommitState {
    /// Rounds written but not yet synced (`fsync` policy), oldest first.
    unsynced: VecDeque<WrittenRound>,
    /// Files written since the last sync started.
    dirty: Vec<SyncHandle>,
    /// Batches written since the last sync started, for the metrics.
    batches_unsynced: u64,
    /// `interval` policy: the writer found a sync due.
    sync_requested: bool,
    syncer_running: bool,
    /// Truncations so far: a sync that started before one must not move
    /// `durable` afterwards (the offsets it covered may be new data now).
    truncations: u64,
    /// The replication cap on the high watermark (`replica.rs`): `None` on
    /// a single replica, where readers see whatever is published.
    pub(crate) replication_limit: Option<Offset>,
}

impl CommitState {
    /// After a truncation: rounds not yet published are past the cut (a
    /// flush precedes every truncation, so there are none to lose), and an
    /// fdatasync in flight covers bytes that are gone.
    pub(crate) fn truncated(&mut self) {
        self.unsynced.clear();
        self.truncations += 1;
    }
}

/// The slices after the first `skip` bytes of `parts`.
fn skip_bytes<'a>(parts: impl Iterator<Item = &'a Bytes>, mut skip: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    for part in parts {
        if skip >= part.len() {
            skip -= part.len();
        } else {
            out.push(part.slice(skip..));
            skip = 0;
        }
    }
    assert_eq!(skip, 0, "nothing is streamed past the round");
    out
}

impl PartitionLog {
    /// Streams the whole blocks the pending appends of the active segment
    /// have filled (see [`crate::stream_writer`]), if its appender is idle
    /// and they follow straight on from what it has written.
    pub(crate) fn stream_pending(&self, state: &LogState) {
        let Some(segment) = state.segments.last() else {
            return;
        };
        let Ok(mut slot) = segment.appender.try_borrow_mut() else {
            return;
        };
        // None: the writer holds it for a round, or it is not open yet.
        let Some(appender) = slot.as_mut() else {
            return;
        };
        let from = appender.written_bytes();
        // The pending bytes of this segment from `from` on, newest first.
        let mut parts: Vec<&[u8]> = Vec::new();
        let mut reaches_from = false;
        for chunk in state.pending.iter().rev() {
            let end = chunk.position + chunk.bytes.len() as u64;
            if !Rc::ptr_eq(&chunk.segment, segment) || end <= from {
                break;
            }
            let skip = from.saturating_sub(chunk.position) as usize;
            parts.push(&chunk.bytes[skip..]);
            if chunk.position <= from {
                reaches_from = true;
                break;
            }
        }
        // Bytes between `from` and the oldest chunk are with the writer.
        if !reaches_from {
            return;
        }
        // On a simulated disk streamed writes need no writer thread.
        let writer = self.ctx.stream_writer();
        if writer.is_none() && !crate::disk::is_simulated() {
            return;
        }
        parts.reverse();
        let taken = appender.stream(writer, &parts, self.ctx.config.stream_min_bytes);
        if taken > 0 {
            let mut stats = self.ctx.fsync_stats.borrow_mut();
            stats.streamed_writes += 1;
            stats.streamed_bytes += taken as u64;
            stats.bytes_written += taken as u64;
        }
    }

    /// Starts the writer task if it is not running.
    pub(crate) fn kick_flusher(&self) {
        if self.flusher_running.get() {
            return;
        }
        let Some(this) = self.self_rc() else { return };
        self.flusher_running.set(true);
        glommio::spawn_local(async move {
            this.flush_loop().await;
        })
        .detach();
    }

    fn kick_syncer(&self) {
        if self.commit.borrow().syncer_running {
            return;
        }
        let Some(this) = self.self_rc() else { return };
        self.commit.borrow_mut().syncer_running = true;
        glommio::spawn_local(async move {
            this.sync_loop().await;
        })
        .detach();
    }

    /// Whether a failed disk write took this partition offline (appends
    /// are refused until it is reopened).
    pub fn is_offline(&self) -> bool {
        self.failed.get()
    }

    /// Whether it went offline because its disk had no space (not because
    /// the disk failed): reopening it can then succeed.
    pub fn is_offline_for_space(&self) -> bool {
        self.failed.get() && self.failed_for_space.get()
    }

    /// Closes an offline partition without writing anything: its files are
    /// left as a crash would leave them (what was taken but not written is
    /// not in them, and the open that follows recovers as after a crash).
    /// [`Self::close`] would write the in-memory indexes and producer state,
    /// which may name batches the failed write never put on disk.
    pub(crate) fn abandon(&self) {
        self.closed.set(true);
        self.active_segment().appender.borrow_mut().take();
        self.written.close();
        self.durable.close();
        self.high_watermark.close();
    }

    fn fail_commit(&self, what: &str, error: &EngineError) {
        self.stalled.set(false);
        if error.fault_class() == FaultClass::OutOfSpace {
            tracing::error!(partition = %self.tp, error = %error, "{what} failed; partition taken offline until space is freed");
            self.failed_for_space.set(true);
        } else {
            tracing::error!(partition = %self.tp, error = %error, "{what} failed; partition taken offline until the broker restarts");
        }
        self.failed.set(true);
        self.written.fail();
        self.durable.fail();
    }

    async fn flush_loop(self: Rc<Self>) {
        loop {
            // Let the tasks woken by the previous round (or by the append that
            // started us) run first: their appends then join this round
            // instead of each starting a round of its own.
            futures_lite::future::yield_now().await;
            let round: Vec<PendingChunk> = self.state.borrow_mut().pending.drain(..).collect();
            if round.is_empty() || self.failed.get() {
                self.flusher_running.set(false);
                return;
            }
            if let Err(e) = self.write_round(round).await {
                self.fail_commit("write", &e);
                self.flusher_running.set(false);
                return;
            }
        }
    }

    /// Writes one round: one write per segment touched, then hands the
    /// round on as the flush policy says (to the syncer under `fsync`,
    /// straight to readers otherwise).
    async fn write_round(&self, round: Vec<PendingChunk>) -> Result<(), EngineError> {
        if crate::fault::eio_armed_for(&self.tp.dir_name()) {
            return Err(EngineError::io(
                &self.dir,
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        let (groups, batches_in_round) = group_by_segment(round);
        let mut retries = 0u32;
        for (segment, position, parts) in &groups {
            while let Err(error) = self.write_segment_parts(segment, *position, parts).await {
                self.wait_out_transient(error, segment, *position, &mut retries)
                    .await?;
            }
        }
        if retries > 0 {
            self.stalled.set(false);
            tracing::warn!(partition = %self.tp, retries, "round written after transient errors; appends resume");
        }
        let next_written = groups
            .last()
            .and_then(|g| g.2.last())
            .map(|p| p.1)
            .unwrap_or_else(|| self.written.get());
        self.written.set(next_written);
        let written = WrittenRound {
            next_offset: next_written,
            groups: groups.into_iter().map(|(s, _, parts)| (s, parts)).collect(),
        };
        match self.ctx.config.flush_policy {
            FlushPolicy::Fsync => self.queue_for_sync(written, batches_in_round).await,
            FlushPolicy::Interval => self.publish_then_sync_when_due(written, batches_in_round),
            FlushPolicy::Os => {
                self.commit.borrow_mut().dirty.clear();
                let mut written = written;
                written.coalesce();
                self.publish(written);
            }
        }
        Ok(())
    }

    /// After a round's write in `segment` from `position` failed: a
    /// transient error is waited out (new appends refused meanwhile) and
    /// the appender reopened at `position`, for the caller to write again;
    /// anything else, or a transient error past the retry budget, is
    /// returned (the partition goes offline).
    ///
    /// Why reopen: a failed write may leave the appender's end past bytes
    /// that never reached the disk (a streamed block that failed) and its
    /// tail block unknown. Everything before `position` is on disk (rounds
    /// are written one after another, and the previous one completed), so
    /// the reopened appender reads its tail block back from there and the
    /// retry writes the round's bytes again at the same places. Nothing of
    /// the round is published before that write succeeds, so a reader never
    /// sees a half-written round; a streamed block of the first try that
    /// lands late writes the same bytes as the retry.
    async fn wait_out_transient(
        &self,
        mut error: EngineError,
        segment: &Rc<Segment>,
        position: u64,
        retries: &mut u32,
    ) -> Result<(), EngineError> {
        loop {
            if error.fault_class() != FaultClass::Transient || *retries >= TRANSIENT_RETRIES_MAX {
                return Err(error);
            }
            if *retries == 0 {
                tracing::warn!(partition = %self.tp, error = %error, "write failed with a transient error; retrying, appends refused meanwhile");
            }
            self.stalled.set(true);
            let delay_ms = TRANSIENT_RETRY_DELAY_MIN_MS
                .saturating_mul(1 << (*retries).min(16))
                .min(TRANSIENT_RETRY_DELAY_MAX_MS);
            *retries += 1;
            drop(segment.appender.borrow_mut().take());
            glommio::timer::sleep(std::time::Duration::from_millis(delay_ms)).await;
            let reopened = Appender::open(
                &segment.log_path(),
                position,
                self.ctx.config.preallocate_bytes,
            )
            .await;
            match reopened.and_then(|appender| sync_dir(&self.dir).map(|()| appender)) {
                Ok(appender) => {
                    *segment.appender.borrow_mut() = Some(appender);
                    return Ok(());
                }
                Err(e) => error = e,
            }
        }
    }

    /// Writes a round's `parts` of `segment`, which start at `position`,
    /// skipping the blocks already streamed, and marks the file dirty for
    /// the syncer.
    async fn write_segment_parts(
        &self,
        segment: &Rc<Segment>,
        position: u64,
        parts: &[WrittenPart],
    ) -> Result<(), EngineError> {
        self.ensure_appender(segment).await?;
        let mut appender = match segment.appender.borrow_mut().take() {
            Some(a) => a,
            None => unreachable!("ensure_appender installed one"),
        };
        // Blocks streamed during the round are already on their way.
        let streamed = appender.written_bytes().checked_sub(position);
        let Some(streamed) = streamed else {
            panic!("writes are contiguous: the file ends before the round");
        };
        let slices = skip_bytes(parts.iter().map(|p| &p.3), streamed as usize);
        let write_started = Instant::now();
        let space = self.ctx.space_of(self.log_dir_index());
        let result = match crate::fault::errno_armed_for(&self.tp.dir_name()) {
            Some(errno) => Err(EngineError::io(
                segment.log_path(),
                std::io::Error::from_raw_os_error(errno),
            )),
            None => {
                appender
                    .write(
                        &slices,
                        &self.ctx.write_budget,
                        space,
                        self.space_allowance(),
                    )
                    .await
            }
        };
        let write_us = write_started.elapsed().as_micros() as u64;
        let handle = appender.sync_handle();
        *segment.appender.borrow_mut() = Some(appender);
        let uncopied_bytes = result?;
        {
            let mut stats = self.ctx.fsync_stats.borrow_mut();
            stats.uncopied_bytes += uncopied_bytes;
            stats.writes += 1;
            stats.write_us_total += write_us;
            stats.write_latency_us.record(write_us);
            stats.bytes_written += slices.iter().map(|s| s.len() as u64).sum::<u64>();
        }
        let mut commit = self.commit.borrow_mut();
        if !commit.dirty.iter().any(|h| h.same_file(&handle)) {
            commit.dirty.push(handle);
        }
        Ok(())
    }

    /// `fsync`: the round waits for the syncer before readers see it; its
    /// small parts are joined for the cache while the fdatasync is in flight.
    async fn queue_for_sync(&self, written: WrittenRound, batches_in_round: u64) {
        let next_written = written.next_offset;
        let joinable = written.joinable();
        {
            let mut commit = self.commit.borrow_mut();
            commit.batches_unsynced += batches_in_round;
            commit.unsynced.push_back(written);
        }
        self.kick_syncer();
        if !joinable {
            return;
        }
        // Join the round's parts for the cache while its fdatasync is
        // in flight, not before it: the timer lets the executor submit
        // the sync first. Should the sync complete before that, the
        // round is published as it is.
        glommio::timer::sleep(std::time::Duration::from_micros(1)).await;
        let mut commit = self.commit.borrow_mut();
        if let Some(round) = commit
            .unsynced
            .iter_mut()
            .find(|r| r.next_offset == next_written)
        {
            round.coalesce();
        }
    }

    /// `interval`: readers see written data at once; the sync only bounds
    /// the loss, and runs once `flush.messages` or `flush.ms` is reached.
    fn publish_then_sync_when_due(&self, mut written: WrittenRound, batches_in_round: u64) {
        written.coalesce();
        self.publish(written);
        let config = self.config.borrow().clone();
        let due = {
            let mut state = self.state.borrow_mut();
            state.messages_since_sync += batches_in_round;
            state.messages_since_sync >= config.flush_messages
                || self.now_ms() - state.last_sync_ms >= config.flush_ms as i64
        };
        let mut commit = self.commit.borrow_mut();
        commit.batches_unsynced += batches_in_round;
        if due {
            commit.sync_requested = true;
            drop(commit);
            self.kick_syncer();
        }
    }

    async fn sync_loop(self: Rc<Self>) {
        let policy = self.ctx.config.flush_policy;
        loop {
            // Everything the writer has completed when the sync starts is
            // covered by it; taken in one step with the dirty files.
            let (target, files, batches, truncations) = {
                let mut commit = self.commit.borrow_mut();
                let target = self.written.get();
                let needed = !self.failed.get()
                    && match policy {
                        FlushPolicy::Fsync => target > self.durable.get(),
                        FlushPolicy::Interval => commit.sync_requested,
                        FlushPolicy::Os => false,
                    };
                if !needed {
                    commit.syncer_running = false;
                    return;
                }
                commit.sync_requested = false;
                (
                    target,
                    std::mem::take(&mut commit.dirty),
                    std::mem::take(&mut commit.batches_unsynced),
                    commit.truncations,
                )
            };
            if let Err(e) = self.sync_files(&files, batches).await {
                // Never retried, whatever its class: after a failed
                // fdatasync Linux may have marked the dirty state clean, so
                // a second one can succeed for data that is not on disk.
                self.fail_commit("fdatasync", &e);
                self.commit.borrow_mut().syncer_running = false;
                return;
            }
            drop(files);
            if self.commit.borrow().truncations != truncations {
                // The log was cut while this sync ran: what it covered is
                // gone or rewritten; the next round syncs what is there now.
                continue;
            }
            if target > self.durable.get() {
                self.durable.set(target);
            }

            // Under `fsync` the synced rounds become visible now.
            loop {
                let round = {
                    let mut commit = self.commit.borrow_mut();
                    match commit.unsynced.front() {
                        Some(r) if r.next_offset <= target => commit.unsynced.pop_front(),
                        _ => None,
                    }
                };
                match round {
                    Some(round) => self.publish(round),
                    None => break,
                }
            }
        }
    }

    /// Makes a written round visible to readers: segment positions, the
    /// batch cache and the high watermark.
    fn publish(&self, round: WrittenRound) {
        for (segment, parts) in round.groups {
            for (first, next, end, bytes) in parts {
                segment.readable_bytes.set(end);
                self.ctx.cache.insert(&self.chunks, first, next, bytes);
            }
        }
        self.raise_high_watermark(round.next_offset);
        self.check_offsets();
    }

    /// Moves the high watermark up to `published_offset` (everything below
    /// it is readable here), or to the replication limit when that is
    /// lower. It never moves back: only a truncation lowers it.
    pub(crate) fn raise_high_watermark(&self, published_offset: Offset) {
        let limit = self.commit.borrow().replication_limit;
        let visible = limit.map_or(published_offset, |limit| published_offset.min(limit));
        if visible > self.high_watermark.get() {
            self.high_watermark.set(visible);
        }
    }

    async fn sync_files(&self, files: &[SyncHandle], batches: u64) -> Result<(), EngineError> {
        let started = Instant::now();
        let skip = crate::disk::sim::bug() == crate::disk::sim::Bug::AckBeforeSync;
        for file in files.iter().filter(|_| !skip) {
            file.sync().await?;
        }
        let elapsed_us = started.elapsed().as_micros() as u64;
        let mut stats = self.ctx.fsync_stats.borrow_mut();
        stats.syncs += 1;
        stats.sync_us_total += elapsed_us;
        stats.sync_us_max = stats.sync_us_max.max(elapsed_us);
        stats.sync_latency_us.record(elapsed_us);
        stats.appends_covered += batches;
        let mut state = self.state.borrow_mut();
        state.messages_since_sync = 0;
        state.last_sync_ms = self.now_ms();
        Ok(())
    }

    /// Opens the appender of `segment`, sealing older segments that still
    /// hold one (their last bytes were written in an earlier round).
    async fn ensure_appender(&self, segment: &Rc<Segment>) -> Result<(), EngineError> {
        if segment.appender.borrow().is_some() {
            return Ok(());
        }
        let older: Vec<Rc<Segment>> = self
            .state
            .borrow()
            .segments
            .iter()
            .filter(|s| s.base_offset < segment.base_offset && s.appender.borrow().is_some())
            .cloned()
            .collect();
        for old in older {
            self.seal_segment(&old).await?;
        }
        let size_bytes = segment.meta.borrow().size_bytes;
        let written = segment.readable_bytes.get().min(size_bytes);
        if written == 0 {
            self.adopt_spare(segment)?;
        }
        let appender = Appender::open(
            &segment.log_path(),
            written,
            self.ctx.config.preallocate_bytes,
        )
        .await?;
        if crate::disk::sim::bug() != crate::disk::sim::Bug::NoDirSyncOnRoll {
            sync_dir(&self.dir)?;
        }
        *segment.appender.borrow_mut() = Some(appender);
        Ok(())
    }

    /// Gives a new segment, whose file does not exist yet, a deleted
    /// segment's file (`recycle.rs`); the directory sync after the
    /// appender's open makes the rename durable before any write.
    ///
    /// With no spare at hand, retention by size runs first: a segment
    /// already past `retention.bytes` becomes the spare now rather than at
    /// the next retention tick (every 5 minutes by default, while a busy
    /// partition rolls many times between two).
    fn adopt_spare(&self, segment: &Segment) -> Result<(), EngineError> {
        let path = segment.log_path();
        if self.ctx.config.segment_recycle_max == 0 || crate::disk::len(&path).is_ok() {
            return Ok(());
        }
        let base = segment.base_offset;
        let mut adopted = self.recycled.borrow_mut().adopt(base, &path)?;
        if !adopted && self.apply_size_retention()? > 0 {
            adopted = self.recycled.borrow_mut().adopt(base, &path)?;
        }
        if adopted {
            let counter = &self.ctx.segments_recycled;
            counter.set(counter.get() + 1);
            tracing::debug!(partition = %self.tp, base_offset = segment.base_offset, "new segment takes a recycled file");
        }
        Ok(())
    }

    /// Seals a segment that no longer takes appends: trim the preallocated
    /// space, sync, write its indexes, move the recovery point past it.
    pub(crate) async fn seal_segment(&self, segment: &Rc<Segment>) -> Result<(), EngineError> {
        let appender = segment.appender.borrow_mut().take();
        if let Some(appender) = appender {
            appender.seal().await?;
        }
        segment.write_indexes()?;
        // Its indexes are on disk now: lookups read them through the
        // shard's bounded index cache instead of keeping them resident.
        segment.release_indexes();
        let next = segment.meta.borrow().next_offset;
        self.write_recovery_point(next)?;
        Ok(())
    }

    pub(crate) fn write_recovery_point(&self, offset: i64) -> Result<(), EngineError> {
        write_file_synced(
            &self.dir.join("recovery-point"),
            format!("{offset}\n").as_bytes(),
        )
    }

    /// Waits until everything appended so far is written (and synced under
    /// `fsync`).
    pub async fn flush(&self) -> Result<(), EngineError> {
        let end = self.log_end_offset();
        if end == 0 || self.written.get() >= end {
            return Ok(());
        }
        self.wait_durable(end - 1).await
    }

    /// Stops taking appends, writes what is pending, syncs, trims the active
    /// segment and writes the checkpoints. Called at shutdown and before deletion.
    pub async fn close(&self) -> Result<(), EngineError> {
        if self.closed.get() {
            return Ok(());
        }
        let flushed = if self.failed.get() {
            Ok(())
        } else {
            self.flush().await
        };
        // Under `os`/`interval` the data is written but maybe not synced.
        self.closed.set(true);
        let active = self.active_segment();
        let appender = active.appender.borrow_mut().take();
        let txn_dirty = !self.txn.borrow().dirty_segments.is_empty();
        if appender.is_none() && !self.mutated.get() && !txn_dirty {
            // Nothing written since the open: its checkpoints stand.
            self.written.close();
            self.durable.close();
            self.high_watermark.close();
            return flushed;
        }
        if let Some(appender) = appender {
            appender.seal().await?;
        }
        active.write_indexes()?;
        self.write_recovery_point(self.written.get())?;
        // A snapshot at the end spares the next open a replay of producer state.
        self.checkpoint_producer_state()?;
        self.written.close();
        self.durable.close();
        self.high_watermark.close();
        flushed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part of `len` bytes holding offsets `[first, next)`, ending at `end`;
    /// its bytes are `first` repeated, to check the order after joining.
    fn part(first: i64, next: i64, end: u64, len: usize) -> WrittenPart {
        (first, next, end, Bytes::from(vec![first as u8; len]))
    }

    fn summary(parts: &[WrittenPart]) -> Vec<(i64, i64, u64, usize)> {
        parts.iter().map(|p| (p.0, p.1, p.2, p.3.len())).collect()
    }

    #[test]
    fn small_contiguous_parts_become_one() {
        let parts = vec![
            part(0, 1, 100, 100),
            part(1, 3, 250, 150),
            part(3, 4, 260, 10),
        ];
        let joined = coalesce(parts);
        assert_eq!(summary(&joined), vec![(0, 4, 260, 260)]);
        let bytes = &joined[0].3;
        assert!(bytes[..100].iter().all(|&b| b == 0));
        assert!(bytes[100..250].iter().all(|&b| b == 1));
        assert!(bytes[250..].iter().all(|&b| b == 3));
    }

    #[test]
    fn a_large_part_stays_whole_and_splits_the_runs() {
        let big = COALESCE_PART_MAX_BYTES;
        let parts = vec![
            part(0, 1, 10, 10),
            part(1, 2, 20, 10),
            part(2, 3, 20 + big as u64, big),
            part(3, 4, 30 + big as u64, 10),
        ];
        assert_eq!(
            summary(&coalesce(parts)),
            vec![
                (0, 2, 20, 20),
                (2, 3, 20 + big as u64, big),
                (3, 4, 30 + big as u64, 10)
            ]
        );
    }

    #[test]
    fn joined_chunks_stay_under_the_cap() {
        let len = COALESCE_PART_MAX_BYTES - 1;
        let count = 2 * COALESCED_CHUNK_MAX_BYTES / len + 1;
        let parts: Vec<WrittenPart> = (0..count)
            .map(|i| part(i as i64, i as i64 + 1, ((i + 1) * len) as u64, len))
            .collect();
        let joined = coalesce(parts);
        assert!(joined.len() >= 3, "{} chunks", joined.len());
        assert!(joined
            .iter()
            .all(|p| p.3.len() <= COALESCED_CHUNK_MAX_BYTES));
        let total: usize = joined.iter().map(|p| p.3.len()).sum();
        assert_eq!(total, count * len);
        for pair in joined.windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "offsets stay contiguous");
        }
    }

    #[test]
    fn a_gap_in_offsets_is_not_joined_over() {
        let parts = vec![part(0, 1, 10, 10), part(5, 6, 20, 10), part(6, 7, 30, 10)];
        assert_eq!(
            summary(&coalesce(parts)),
            vec![(0, 1, 10, 10), (5, 7, 30, 20)]
        );
    }

    #[test]
    fn skipping_streamed_bytes_keeps_the_rest_in_order() {
        let data: Vec<u8> = (0..=255u8).collect();
        let data = Bytes::from(data);
        let parts = [data.slice(..100), data.slice(100..101), data.slice(101..)];
        for skip in [0usize, 1, 99, 100, 101, 200, 256] {
            let rest: Vec<u8> = skip_bytes(parts.iter(), skip).concat();
            assert_eq!(rest, &data[skip..], "skip {skip}");
        }
    }

    #[test]
    #[should_panic(expected = "nothing is streamed past the round")]
    fn skipping_past_the_round_is_an_invariant_failure() {
        let data = Bytes::from_static(&[0u8; 10]);
        skip_bytes([&data].into_iter(), 11);
    }
}

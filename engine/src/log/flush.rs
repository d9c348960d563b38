//! The pipelined group commit.
//!
//! One flusher task per partition runs while there is something to write.
//! Each round takes *everything* appended since the previous round, writes
//! it with one O_DIRECT write per segment touched, and — under the `fsync`
//! policy — covers it with one fdatasync. While a round is in flight, new
//! appends accumulate for the next one, so a slow fdatasync (bimodal here:
//! ≈0.1 ms or 4–8 ms) makes the next group larger instead of making every
//! producer wait for its own sync.

use super::{now_ms, PartitionLog, PendingChunk};
use crate::appender::Appender;
use crate::config::FlushPolicy;
use crate::error::EngineError;
use crate::segment::{sync_dir, write_file_synced, Segment};
use bytes::Bytes;
use std::rc::Rc;
use std::time::Instant;

/// A chunk's offsets `[first, next)`, end position and bytes.
type WrittenPart = (i64, i64, u64, Bytes);
/// The chunks of one round that go to one segment: segment, start position,
/// the bytes of the second and later parts joined (empty while there is one
/// part, so the common single-append round is written without a copy), and
/// the parts.
type SegmentGroup = (Rc<Segment>, u64, Vec<u8>, Vec<WrittenPart>);

impl PartitionLog {
    /// Starts the flusher task if it is not running.
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

    async fn flush_loop(self: Rc<Self>) {
        loop {
            // Let the tasks woken by the previous round (or by the append that
            // started us) run first: their appends then join this round
            // instead of each starting a round of its own.
            futures_lite::future::yield_now().await;
            let round: Vec<PendingChunk> = self.state.borrow_mut().pending.drain(..).collect();
            if round.is_empty() {
                self.flusher_running.set(false);
                return;
            }
            if let Err(e) = self.flush_round(round).await {
                tracing::error!(partition = %self.tp, error = %e, "flush failed; partition taken offline");
                self.failed.set(true);
                self.written.fail();
                self.durable.fail();
                self.flusher_running.set(false);
                return;
            }
        }
    }

    async fn flush_round(&self, round: Vec<PendingChunk>) -> Result<(), EngineError> {
        let policy = self.ctx.config.flush_policy;
        // Group the round's chunks by segment, in order.
        let mut groups: Vec<SegmentGroup> = Vec::new();
        let mut batches_in_round = 0u64;
        for chunk in round {
            batches_in_round += chunk.batch_count;
            let bytes = Bytes::from(chunk.bytes);
            let end = chunk.position + bytes.len() as u64;
            match groups.last_mut() {
                Some((segment, _, joined, parts)) if Rc::ptr_eq(segment, &chunk.segment) => {
                    if joined.is_empty() {
                        joined.extend_from_slice(&parts[0].3);
                    }
                    joined.extend_from_slice(&bytes);
                    parts.push((chunk.first_offset, chunk.next_offset, end, bytes));
                }
                _ => {
                    let joined = Vec::new();
                    groups.push((
                        chunk.segment,
                        chunk.position,
                        joined,
                        vec![(chunk.first_offset, chunk.next_offset, end, bytes)],
                    ));
                }
            }
        }
        let mut touched: Vec<Rc<Segment>> = Vec::new();
        for (segment, position, joined, parts) in &groups {
            let joined: &[u8] = if joined.is_empty() {
                &parts[0].3
            } else {
                joined
            };
            self.ensure_appender(segment).await?;
            let mut appender = match segment.appender.borrow_mut().take() {
                Some(a) => a,
                None => unreachable!("ensure_appender installed one"),
            };
            assert_eq!(appender.written_bytes(), *position, "writes are contiguous");
            let result = appender.write(joined).await;
            *segment.appender.borrow_mut() = Some(appender);
            result?;
            {
                let mut stats = self.ctx.fsync_stats.borrow_mut();
                stats.writes += 1;
                stats.bytes_written += joined.len() as u64;
            }
            touched.push(segment.clone());
        }
        let next_written = groups
            .last()
            .and_then(|g| g.3.last())
            .map(|p| p.1)
            .unwrap_or_else(|| self.written.get());
        self.written.set(next_written);

        let mut synced = false;
        match policy {
            FlushPolicy::Fsync => {
                self.sync_segments(&touched, batches_in_round).await?;
                synced = true;
            }
            FlushPolicy::Interval => {
                let config = self.config.borrow().clone();
                let due = {
                    let mut state = self.state.borrow_mut();
                    state.messages_since_sync += batches_in_round;
                    state.messages_since_sync >= config.flush_messages
                        || now_ms() - state.last_sync_ms >= config.flush_ms as i64
                };
                if due {
                    self.sync_segments(&touched, batches_in_round).await?;
                    synced = true;
                }
            }
            FlushPolicy::Os => {}
        }
        if synced {
            self.durable.set(next_written);
        }
        // Readers may now see the round: under fsync only once synced.
        for (segment, _, _, parts) in groups {
            for (first, next, end, bytes) in parts {
                segment.readable_bytes.set(end);
                self.ctx.cache.insert(&self.chunks, first, next, bytes);
            }
        }
        self.high_watermark.set(next_written);
        self.check_offsets();
        Ok(())
    }

    async fn sync_segments(
        &self,
        touched: &[Rc<Segment>],
        batches: u64,
    ) -> Result<(), EngineError> {
        let started = Instant::now();
        for segment in touched {
            let appender = segment.appender.borrow_mut().take();
            if let Some(appender) = appender {
                let result = appender.sync().await;
                *segment.appender.borrow_mut() = Some(appender);
                result?;
            }
        }
        let elapsed_us = started.elapsed().as_micros() as u64;
        let mut stats = self.ctx.fsync_stats.borrow_mut();
        stats.syncs += 1;
        stats.sync_us_total += elapsed_us;
        stats.sync_us_max = stats.sync_us_max.max(elapsed_us);
        stats.appends_covered += batches;
        let mut state = self.state.borrow_mut();
        state.messages_since_sync = 0;
        state.last_sync_ms = now_ms();
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
        let appender = Appender::open(
            &segment.log_path(),
            written,
            self.ctx.config.preallocate_bytes,
        )
        .await?;
        sync_dir(&self.dir)?;
        *segment.appender.borrow_mut() = Some(appender);
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

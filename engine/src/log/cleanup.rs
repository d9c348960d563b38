//! Removing data from the front: DeleteRecords and retention by time and
//! size (truncation of the tail is `truncate.rs`). Whole segments are
//! deleted; the log start offset moves inside a segment only through
//! DeleteRecords, as in Kafka. Each keeps the transaction state and the
//! leader-epoch cache in step: deleted segments take their aborted
//! transactions along, the epoch cache is cut at the new log start
//! (Kafka's `truncateFromStart`), and the retention tick expires idle
//! producers. A deleted segment's file may be kept for a later segment
//! (`recycle.rs`).

use super::PartitionLog;
use crate::config::TopicConfig;
use crate::error::EngineError;
use crate::retention::{expired_prefix, RetentionLimits, SegmentSpan};
use crate::segment::{sync_dir, write_file_synced, Segment};
use crate::types::Offset;

impl PartitionLog {
    /// DeleteRecords: makes `before_offset` the log start offset (it may not
    /// pass the high watermark; `-1` means the high watermark) and deletes the
    /// segments wholly below it. Returns the new low watermark.
    pub async fn delete_records(&self, before_offset: i64) -> Result<i64, EngineError> {
        let hw = self.high_watermark.get();
        let target = if before_offset == -1 {
            hw
        } else {
            before_offset
        };
        let start = self.log_start_offset();
        if target < 0 || target > hw {
            return Err(EngineError::OffsetOutOfRange {
                offset: before_offset,
                log_start_offset: self.earliest_offset(),
                log_end_offset: hw,
            });
        }
        if target <= self.earliest_offset() {
            return Ok(self.earliest_offset());
        }
        // A tiered log's remote part is hidden below the target too (and
        // its segments there are deleted by the remote log manager).
        self.record_deleted_below(target)?;
        if target <= start {
            return Ok(target);
        }
        self.state.borrow_mut().log_start_offset = target;
        // The answer promises the new low watermark: the file's rename
        // must be durable too, not only its bytes.
        write_file_synced(
            &self.dir.join("log-start-offset"),
            format!("{target}\n").as_bytes(),
        )?;
        sync_dir(&self.dir)?;
        self.truncate_epochs_from_start(target);
        self.delete_segments_below(target)?;
        self.forget_deleted_segments();
        Ok(target)
    }

    /// Deletes sealed segments whose every offset is below `offset`.
    fn delete_segments_below(&self, offset: i64) -> Result<usize, EngineError> {
        let doomed: Vec<_> = {
            let mut state = self.state.borrow_mut();
            let keep_from = state
                .segments
                .iter()
                .take(state.segments.len().saturating_sub(1))
                .take_while(|s| s.meta.borrow().next_offset <= offset)
                .count();
            state.segments.drain(..keep_from).collect()
        };
        for segment in &doomed {
            self.retire_segment(segment)?;
        }
        Ok(doomed.len())
    }

    /// Deletes a segment removed from the front of the log (its `.log`
    /// unlinked off the shard's thread), or keeps its file as a spare for
    /// a later segment (`recycle.rs`): when the pool
    /// has room, the data dir has plenty, the segment takes no more writes
    /// (sealed, so trimmed to its batches) and no cleaner rewrites the
    /// partition's segments.
    fn retire_segment(&self, segment: &Segment) -> Result<(), EngineError> {
        self.ctx.index_cache.remove(segment.index_key());
        let space = self.ctx.space_of(self.log_dir_index());
        let size_bytes = segment.meta.borrow().size_bytes;
        let mut pool = self.recycled.borrow_mut();
        let keep = pool.len() < self.ctx.config.segment_recycle_max
            && segment.appender.borrow().is_none()
            && !self.config.borrow().cleanup_policy.compact
            && !space.is_low()
            && space.room_bytes(self.space_allowance()) / 4 >= size_bytes;
        if keep {
            pool.retire(&self.dir, segment)
        } else {
            segment.delete_files_in_background()
        }
    }

    /// Deletes the spare files while the data dir is low on space: they
    /// are the first bytes a full disk can do without.
    fn release_spares_when_low(&self) -> Result<(), EngineError> {
        let space = self.ctx.space_of(self.log_dir_index());
        let mut pool = self.recycled.borrow_mut();
        if space.is_low() && !pool.is_empty() {
            tracing::info!(partition = %self.tp, spares = pool.len(), "low on space: recycled segment files deleted");
            pool.clear()?;
        }
        Ok(())
    }

    /// The limits the local log keeps, and the offset below which whole
    /// segments may go: `retention.*` below the high watermark, or on a
    /// tiered topic `local.retention.*` (-2: `retention.*`) below what is
    /// safely uploaded too, so that a store that is down never costs data.
    /// With `remote.log.copy.disable` the local log goes by `retention.*`
    /// again, as Kafka's does (KIP-950).
    fn local_retention(&self, config: &TopicConfig, hw: Offset) -> (RetentionLimits, Offset) {
        let total = RetentionLimits {
            retention_ms: config.retention_ms,
            retention_bytes: config.retention_bytes,
        };
        let remote = &config.remote;
        if !remote.storage_enable || remote.copy_disable {
            return (total, hw);
        }
        let or_total = |local: i64, total: i64| if local == -2 { total } else { local };
        let local = RetentionLimits {
            retention_ms: or_total(remote.local_retention_ms, total.retention_ms),
            retention_bytes: or_total(remote.local_retention_bytes, total.retention_bytes),
        };
        let uploaded_below = self.remote.get().end_offset.map_or(0, |end| end + 1);
        (local, hw.min(uploaded_below))
    }

    /// Applies `retention.ms` and `retention.bytes` (on a tiered topic the
    /// local ones, see `local_retention`): deletes the oldest sealed
    /// segments that are past either, moving the log start offset.
    /// Sealed segments wholly below the log start offset (left by a
    /// DeleteRecords that ended in the then active segment) go first, as
    /// Kafka's log-start-offset breach does. Returns how many segments were
    /// deleted.
    pub fn apply_retention(&self) -> Result<usize, EngineError> {
        // Producer expiry rides on the retention tick, as in Kafka.
        let expired = self.expire_producers(self.now_ms());
        if expired > 0 {
            tracing::debug!(partition = %self.tp, expired, "idle producers expired");
        }
        self.release_spares_when_low()?;
        self.delete_expired(false)
    }

    /// Retention by `retention.bytes` alone, which a roll with no recycled
    /// file at hand runs first (`recycle.rs`). Not by time: records
    /// stamped long ago (a backfill) stay until the tick, as in Kafka,
    /// where retention runs only there.
    pub(crate) fn apply_size_retention(&self) -> Result<usize, EngineError> {
        self.delete_expired(true)
    }

    /// Deletes what retention (by size alone when `size_only`) is past.
    fn delete_expired(&self, size_only: bool) -> Result<usize, EngineError> {
        if self.truncating.get() {
            // The truncation holds segments across its awaits; the next
            // tick deletes what is due.
            return Ok(0);
        }
        let below_start = self.delete_segments_below(self.log_start_offset())?;
        if below_start > 0 {
            self.forget_deleted_segments();
        }
        let config = self.config();
        if !config.cleanup_policy.delete {
            return Ok(below_start);
        }
        let now = self.now_ms();
        let hw = self.high_watermark.get();
        let (mut limits, deletable_below) = self.local_retention(&config, hw);
        if size_only {
            limits.retention_ms = -1;
        }
        let delete_count = {
            let state = self.state.borrow();
            let sealed = state.segments.len().saturating_sub(1);
            let total_bytes: i64 = state
                .segments
                .iter()
                .map(|s| s.meta.borrow().size_bytes as i64)
                .sum();
            let spans = state.segments[..sealed].iter().map(|s| {
                let meta = s.meta.borrow();
                SegmentSpan {
                    next_offset: meta.next_offset,
                    max_timestamp_ms: meta.max_timestamp_ms,
                    size_bytes: meta.size_bytes,
                }
            });
            expired_prefix(spans, total_bytes, limits, now, deletable_below)
        };
        if delete_count == 0 {
            return Ok(below_start);
        }
        let doomed: Vec<_> = self
            .state
            .borrow_mut()
            .segments
            .drain(..delete_count)
            .collect();
        let new_start = self
            .state
            .borrow()
            .segments
            .first()
            .map(|s| s.base_offset)
            .unwrap_or(hw);
        let log_start_offset = {
            let mut state = self.state.borrow_mut();
            state.log_start_offset = state.log_start_offset.max(new_start);
            state.log_start_offset
        };
        self.truncate_epochs_from_start(log_start_offset);
        self.forget_deleted_segments();
        for segment in &doomed {
            tracing::info!(partition = %self.tp, base_offset = segment.base_offset, "retention deletes segment");
            self.retire_segment(segment)?;
        }
        Ok(below_start + doomed.len())
    }
}

//! Removing data: DeleteRecords, retention by time and size, and truncation
//! for replication. Whole segments are deleted; the log start offset moves
//! inside a segment only through DeleteRecords, as in Kafka. Each keeps the
//! transaction state in step: deleted segments take their aborted
//! transactions along, a truncation rebuilds the producer state below the
//! cut, and the retention tick expires idle producers.

use super::PartitionLog;
use crate::cache::BatchCache;
use crate::error::EngineError;
use crate::retention::{expired_prefix, RetentionLimits, SegmentSpan};
use crate::segment::write_file_synced;
use std::rc::Rc;

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
                log_start_offset: start,
                log_end_offset: hw,
            });
        }
        if target <= start {
            return Ok(start);
        }
        self.state.borrow_mut().log_start_offset = target;
        write_file_synced(
            &self.dir.join("log-start-offset"),
            format!("{target}\n").as_bytes(),
        )?;
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
            segment.delete_files()?;
        }
        Ok(doomed.len())
    }

    /// Applies `retention.ms` and `retention.bytes`: deletes the oldest
    /// sealed segments that are past either, moving the log start offset.
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
            let limits = RetentionLimits {
                retention_ms: config.retention_ms,
                retention_bytes: config.retention_bytes,
            };
            expired_prefix(spans, total_bytes, limits, now, hw)
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
        {
            let mut state = self.state.borrow_mut();
            state.log_start_offset = state.log_start_offset.max(new_start);
        }
        self.forget_deleted_segments();
        for segment in &doomed {
            tracing::info!(partition = %self.tp, base_offset = segment.base_offset, "retention deletes segment");
            segment.delete_files()?;
        }
        Ok(below_start + doomed.len())
    }

    /// Truncates the log to end just before `offset` (replication: a follower
    /// cuts back to the leader's log). Waits for pending writes first.
    pub async fn truncate_to(&self, offset: i64) -> Result<(), EngineError> {
        self.flush().await?;
        let (start, end) = {
            let s = self.state.borrow();
            (s.log_start_offset, s.log_end_offset)
        };
        if offset >= end {
            return Ok(());
        }
        if offset < start {
            return Err(EngineError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        // Find the position of the first batch at or after `offset`.
        let located = self.locate_any(offset).await?;
        let (segment, position, offset) = match located {
            Some(found) => found,
            None => return Ok(()),
        };
        // Drop whole later segments.
        let doomed: Vec<_> = {
            let mut state = self.state.borrow_mut();
            let idx = state
                .segments
                .iter()
                .position(|s| Rc::ptr_eq(s, &segment))
                .unwrap_or(state.segments.len());
            state.segments.drain(idx + 1..).collect()
        };
        for s in &doomed {
            s.appender.borrow_mut().take();
            s.delete_files()?;
        }
        // Cut the segment.
        if segment.appender.borrow().is_none() {
            let size_bytes = segment.meta.borrow().size_bytes;
            let appender = crate::appender::Appender::open(
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
        {
            let mut meta = segment.meta.borrow_mut();
            let relative = (offset - segment.base_offset).max(0) as u32;
            meta.index.truncate_to_offset(relative);
            meta.time_index.truncate_to_offset(relative);
            meta.size_bytes = position;
            meta.next_offset = offset;
            meta.bytes_since_index_entry = 0;
        }
        segment
            .readable_bytes
            .set(position.min(segment.readable_bytes.get()));
        BatchCache::clear(&self.chunks);
        let start_moved_back = {
            let mut state = self.state.borrow_mut();
            state.log_end_offset = offset;
            // Kafka's truncateTo: a start inside the cut batch moves back with it.
            if state.log_start_offset > offset {
                state.log_start_offset = offset;
                true
            } else {
                false
            }
        };
        if start_moved_back {
            write_file_synced(
                &self.dir.join("log-start-offset"),
                format!("{offset}\n").as_bytes(),
            )?;
        }
        let new_written = self.written.get().min(offset);
        self.written.set(new_written);
        self.durable.set(self.durable.get().min(offset));
        self.high_watermark
            .set(self.high_watermark.get().min(offset));
        self.write_recovery_point(offset.min(self.durable.get()))?;
        // Producer state, open transactions and aborts follow the cut.
        self.truncate_transactions(offset)?;
        self.check_offsets();
        Ok(())
    }

    /// The segment and position of the first batch whose last offset is
    /// `>= offset`, ignoring the high watermark (truncation sees everything
    /// written), and the offset the log will end at: Kafka truncates at batch
    /// boundaries, so an offset inside a batch drops that whole batch.
    async fn locate_any(
        &self,
        offset: i64,
    ) -> Result<Option<(Rc<crate::segment::Segment>, u64, i64)>, EngineError> {
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

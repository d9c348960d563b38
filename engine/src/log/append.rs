//! Appends: validate every batch, assign offsets in place, roll, queue for the flusher.

use super::{now_ms, AppendResult, PartitionLog, PendingChunk};
use crate::batch::{self, BatchError};
use crate::error::EngineError;
use crate::segment::Segment;
use std::rc::Rc;

/// One validated batch of a produce payload.
struct Validated {
    range: std::ops::Range<usize>,
    record_count: i64,
    last_offset_delta: i64,
    max_timestamp_ms: i64,
}

impl PartitionLog {
    /// Validates the batches of a produce payload (one or more RecordBatch v2)
    /// and appends them, writing base offsets and `leader_epoch` into their
    /// headers. The bytes are queued for the flusher when this returns; use
    /// [`PartitionLog::wait_durable`] / [`PartitionLog::wait_written`] to wait.
    /// Either every batch is appended or none is.
    pub fn append(&self, records: &mut [u8], leader_epoch: i32) -> Result<AppendResult, EngineError> {
        if self.closed.get() {
            return Err(EngineError::Closed);
        }
        if self.failed.get() {
            return Err(EngineError::io(
                &self.dir,
                std::io::Error::other("partition offline after a disk error"),
            ));
        }
        let config = self.config.borrow().clone();
        let validated = validate_payload(records, config.max_message_bytes as usize)?;
        let log_append_time_ms = if config.log_append_time { now_ms() } else { -1 };

        let mut state = self.state.borrow_mut();
        let base_offset = state.log_end_offset;
        let mut next_offset = base_offset;
        for v in &validated {
            let bytes = &mut records[v.range.clone()];
            batch::set_base_offset(bytes, next_offset);
            batch::set_partition_leader_epoch(bytes, leader_epoch.max(state.leader_epoch));
            if log_append_time_ms >= 0 {
                batch::set_log_append_time(bytes, log_append_time_ms);
            }
            next_offset += v.last_offset_delta + 1;
        }
        let total_bytes = validated.last().map(|v| v.range.end).unwrap_or(0);
        let payload = &records[..total_bytes];

        // Roll before the payload when it would not fit, the segment is old, or its index is full.
        let needs_roll = {
            let active = state.segments.last().map(|s| s.meta.borrow().clone());
            match active {
                None => true,
                Some(meta) => {
                    meta.size_bytes > 0
                        && (meta.size_bytes + total_bytes as u64 > config.segment_bytes
                            || now_ms() - meta.created_ms >= config.segment_ms
                            || meta.index.size_bytes() + 8 > config.segment_index_bytes
                            || next_offset - 1 - segment_base(&state.segments) > i64::from(u32::MAX))
                }
            }
        };
        if needs_roll {
            let segment = Rc::new(Segment::new(
                &self.dir,
                base_offset,
                Segment::empty_meta(base_offset, now_ms()),
                0,
            ));
            state.segments.push(segment);
        }
        let segment = match state.segments.last() {
            Some(s) => s.clone(),
            None => unreachable!("a segment was just ensured"),
        };
        let position = segment.meta.borrow().size_bytes;
        let mut batch_position = position;
        let mut batch_base = base_offset;
        for v in &validated {
            let max_ts = if log_append_time_ms >= 0 {
                log_append_time_ms
            } else {
                v.max_timestamp_ms
            };
            segment.record_append(
                batch_position,
                batch_base,
                batch_base + v.last_offset_delta,
                max_ts,
                v.range.len() as u64,
                config.index_interval_bytes,
            );
            batch_position += v.range.len() as u64;
            batch_base += v.last_offset_delta + 1;
        }
        state.pending.push_back(PendingChunk {
            segment,
            position,
            first_offset: base_offset,
            next_offset,
            batch_count: validated.len() as u64,
            bytes: payload.to_vec(),
        });
        state.log_end_offset = next_offset;
        let log_start_offset = state.log_start_offset;
        drop(state);
        self.kick_flusher();
        Ok(AppendResult {
            base_offset,
            last_offset: next_offset - 1,
            log_append_time_ms,
            log_start_offset,
            record_count: validated.iter().map(|v| v.record_count).sum(),
            size_bytes: total_bytes,
        })
    }
}

fn segment_base(segments: &[Rc<Segment>]) -> i64 {
    segments.last().map(|s| s.base_offset).unwrap_or(0)
}

fn validate_payload(records: &[u8], max_message_bytes: usize) -> Result<Vec<Validated>, EngineError> {
    let mut validated = Vec::new();
    let mut iter = batch::batches(records);
    for item in iter.by_ref() {
        let (_, range) = item?;
        let header = batch::validate_batch(&records[range.clone()], max_message_bytes)?;
        validated.push(Validated {
            range,
            record_count: i64::from(header.records_count),
            last_offset_delta: i64::from(header.last_offset_delta),
            max_timestamp_ms: header.max_timestamp,
        });
    }
    if iter.remainder_bytes() > 0 {
        return Err(BatchError::Corrupt {
            reason: "produce payload ends with a partial batch",
        }
        .into());
    }
    if validated.is_empty() {
        return Err(BatchError::Corrupt {
            reason: "produce payload holds no record batch",
        }
        .into());
    }
    Ok(validated)
}

//! Reads: whole batches by offset, as owned bytes (copy path) or as a byte
//! range of a segment file (zero-copy paths); and lookups by timestamp.
//!
//! A read finds the segment by binary search on base offsets, the start
//! position by the sparse index, then scans batch headers forward from there
//! (one small DMA read per index interval). The end of the range is a batch
//! boundary that the bookkeeping already knows — an index entry, or the end
//! of what is readable — so no further I/O is needed to cut whole batches.

use super::PartitionLog;
use crate::batch::{self, BatchHeader, HEADER_BYTES};
use crate::cache::read_from_chunks;
use crate::error::EngineError;
use crate::segment::Segment;
use bytes::Bytes;
use std::rc::Rc;

/// How the caller wants the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// Owned bytes (from the batch cache or read into memory).
    Copy,
    /// A file range for sendfile/splice.
    FileSlice,
}

/// A byte range of a segment file, whole batches.
#[derive(Debug, Clone)]
pub struct FileSlice {
    /// The segment file, opened for reading (not O_DIRECT).
    pub file: Rc<std::fs::File>,
    /// Start of the range.
    pub position: u64,
    /// Length of the range.
    pub length: usize,
}

/// The records of a read.
#[derive(Debug, Clone)]
pub enum ReadData {
    /// Nothing to return.
    Empty,
    /// Owned bytes.
    Bytes(Bytes),
    /// A file range.
    File(FileSlice),
}

impl ReadData {
    /// Bytes of record data.
    pub fn len(&self) -> usize {
        match self {
            ReadData::Empty => 0,
            ReadData::Bytes(b) => b.len(),
            ReadData::File(f) => f.length,
        }
    }

    /// Whether there is no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A read and the partition's offsets at the time.
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// High watermark.
    pub high_watermark: i64,
    /// Last stable offset.
    pub last_stable_offset: i64,
    /// Log start offset.
    pub log_start_offset: i64,
    /// The batches.
    pub data: ReadData,
}

/// Most bytes scanned forward from an index entry per DMA read.
const SCAN_READ_BYTES: usize = 64 << 10;

impl PartitionLog {
    /// Reads whole batches from the batch holding `offset`: at most
    /// `max_bytes`, unless the first batch alone is larger (then exactly that
    /// batch, as Kafka does so that a consumer always makes progress), never
    /// past the high watermark.
    pub async fn read(&self, offset: i64, max_bytes: usize, mode: ReadMode) -> Result<ReadResult, EngineError> {
        let (start, end, hw) = {
            let state = self.state.borrow();
            (state.log_start_offset, state.log_end_offset, self.high_watermark.get())
        };
        let mut result = ReadResult {
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: start,
            data: ReadData::Empty,
        };
        if offset < start || offset > end {
            return Err(EngineError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        if offset >= hw {
            return Ok(result);
        }
        if mode == ReadMode::Copy {
            if let Some(bytes) = read_from_chunks(&self.chunks.borrow(), offset, max_bytes, hw) {
                result.data = ReadData::Bytes(bytes);
                return Ok(result);
            }
        }
        let Some((segment, position, header)) = self.locate(offset).await? else {
            return Ok(result);
        };
        let readable = segment.readable_bytes.get();
        let end_position = self
            .range_end(&segment, position, header.total_bytes() as u64, max_bytes as u64)
            .min(readable);
        assert!(end_position > position, "a located batch lies below the readable end");
        let length = (end_position - position) as usize;
        result.data = match mode {
            ReadMode::Copy => ReadData::Bytes(Bytes::from(segment.read_bytes(position, length).await?)),
            ReadMode::FileSlice => {
                let (_, file) = segment.readers().await?;
                ReadData::File(FileSlice {
                    file,
                    position,
                    length,
                })
            }
        };
        Ok(result)
    }

    /// The segments in order, from the one that may hold `offset`.
    pub(crate) fn segments_from(&self, offset: i64) -> Vec<Rc<Segment>> {
        let state = self.state.borrow();
        let idx = state.segments.partition_point(|s| s.base_offset <= offset);
        state.segments[idx.saturating_sub(1)..].to_vec()
    }

    /// The first readable batch whose last offset is `>= offset`: its segment,
    /// position and header.
    pub(crate) async fn locate(&self, offset: i64) -> Result<Option<(Rc<Segment>, u64, BatchHeader)>, EngineError> {
        for segment in self.segments_from(offset) {
            let readable = segment.readable_bytes.get();
            let mut position = if offset > segment.base_offset {
                let relative = (offset - segment.base_offset).min(i64::from(u32::MAX)) as u32;
                u64::from(segment.meta.borrow().index.lookup(relative).1)
            } else {
                0
            };
            while position < readable {
                let want = SCAN_READ_BYTES.min((readable - position) as usize);
                let window = segment.read_bytes(position, want).await?;
                let mut cursor = 0usize;
                let mut advanced = false;
                while cursor + HEADER_BYTES <= window.len() {
                    let header = BatchHeader::parse(&window[cursor..]).map_err(EngineError::from)?;
                    if header.last_offset() >= offset {
                        return Ok(Some((segment, position + cursor as u64, header)));
                    }
                    cursor += header.total_bytes();
                    advanced = true;
                }
                if !advanced {
                    // A header straddles the window end or the window is shorter than a header.
                    if window.len() < HEADER_BYTES {
                        break;
                    }
                }
                position += cursor as u64;
            }
        }
        Ok(None)
    }

    /// End of a whole-batch range from `position` of about `max_bytes`.
    fn range_end(&self, segment: &Segment, position: u64, first_batch_bytes: u64, max_bytes: u64) -> u64 {
        let readable = segment.readable_bytes.get();
        let limit = position.saturating_add(max_bytes);
        let first_end = position + first_batch_bytes;
        if readable <= limit {
            return readable.max(first_end);
        }
        let known = segment
            .meta
            .borrow()
            .index
            .largest_position_at_most(limit.min(u64::from(u32::MAX)) as u32)
            .map(u64::from)
            .unwrap_or(0);
        known.max(first_end)
    }

    /// ListOffsets by time: `-1` latest (the high watermark), `-2` earliest,
    /// `-3` the record with the largest timestamp, otherwise the first record
    /// whose timestamp is `>= timestamp_ms`. Returns `(offset, timestamp)`.
    pub async fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<(i64, i64)>, EngineError> {
        let hw = self.high_watermark.get();
        match timestamp_ms {
            -1 => return Ok(Some((hw, -1))),
            -2 => return Ok(Some((self.log_start_offset(), -1))),
            -3 => return self.max_timestamp_offset(hw).await,
            _ => {}
        }
        let start = self.log_start_offset();
        let segments = self.segments_from(start);
        for segment in segments {
            let (max_ts, from_relative) = {
                let meta = segment.meta.borrow();
                (meta.max_timestamp_ms, meta.time_index.lookup(timestamp_ms))
            };
            if max_ts < timestamp_ms {
                continue;
            }
            let from = (segment.base_offset + i64::from(from_relative)).max(start);
            let mut cursor = from;
            while cursor < hw {
                let Some((seg, position, header)) = self.locate(cursor).await? else {
                    break;
                };
                if header.max_timestamp >= timestamp_ms {
                    let bytes = seg.read_bytes(position, header.total_bytes()).await?;
                    for record in batch::records(&bytes).map_err(EngineError::from)? {
                        let offset = header.base_offset + i64::from(record.offset_delta);
                        let ts = if header.timestamp_type_log_append() {
                            header.max_timestamp
                        } else {
                            header.base_timestamp + record.timestamp_delta
                        };
                        if ts >= timestamp_ms && offset >= start && offset < hw {
                            return Ok(Some((offset, ts)));
                        }
                    }
                }
                cursor = header.last_offset() + 1;
            }
        }
        Ok(None)
    }

    async fn max_timestamp_offset(&self, hw: i64) -> Result<Option<(i64, i64)>, EngineError> {
        let best = {
            let state = self.state.borrow();
            state
                .segments
                .iter()
                .map(|s| {
                    let m = s.meta.borrow();
                    (m.max_timestamp_ms, m.max_timestamp_batch_offset)
                })
                .filter(|&(ts, off)| ts >= 0 && off < hw)
                .fold(None, |best: Option<(i64, i64)>, cur| match best {
                    Some(b) if b.0 >= cur.0 => Some(b),
                    _ => Some(cur),
                })
        };
        let Some((ts, batch_offset)) = best else {
            return Ok(None);
        };
        let Some((segment, position, header)) = self.locate(batch_offset).await? else {
            return Ok(None);
        };
        let bytes = segment.read_bytes(position, header.total_bytes()).await?;
        let mut found = header.last_offset();
        for record in batch::records(&bytes).map_err(EngineError::from)? {
            if header.base_timestamp + record.timestamp_delta == ts {
                found = header.base_offset + i64::from(record.offset_delta);
                break;
            }
        }
        Ok(Some((found, ts)))
    }
}

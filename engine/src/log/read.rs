//! Reads: whole batches by offset, as owned bytes (copy path) or as a byte
//! range of a segment file (zero-copy paths); and lookups by timestamp.
//!
//! A read finds the segment by binary search on base offsets, the start
//! position by the sparse index, then scans batch headers forward from there
//! (one small DMA read per index interval). The end of the range is a batch
//! boundary that the bookkeeping already knows — an index entry, or the end
//! of what is readable — so no further I/O is needed to cut whole batches.
//! A sealed segment's indexes come from the shard's index cache
//! ([`crate::index_cache`]), the active segment's from its meta.

use super::PartitionLog;
use crate::batch::{self, BatchHeader, HEADER_BYTES};
use crate::cache::{concat, read_from_chunks};
use crate::error::EngineError;
use crate::segment::Segment;
use bytes::Bytes;
use std::rc::Rc;
use std::sync::Arc;

/// How the caller wants the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// Owned, contiguous bytes (from the batch cache or read into memory):
    /// for readers that parse what they read.
    Copy,
    /// Owned bytes, with batch-cache hits left in pieces
    /// ([`ReadData::Pieces`]): the copy send path's mode, which gathers the
    /// pieces into one `sendmsg` instead of joining them first.
    CachedPiecesOrCopy,
    /// A file range for sendfile/splice.
    FileSlice,
    /// Bytes from the batch cache when the batches are there, a file range
    /// otherwise: the zero-copy paths' mode. Recent batches were written with
    /// O_DIRECT and are not in the page cache, so a file slice of the tail
    /// would make splice read the disk (and read ahead into preallocated,
    /// unwritten space) for data that is already in memory.
    CachedOrFileSlice,
}

/// A byte range of a segment file, whole batches. The one type a read's
/// file range has from the engine to the socket: its descriptor is shared
/// (`Arc`), so a read made on the partition's owner shard reaches the
/// connection's shard as it is — not duplicated, not converted.
#[derive(Debug, Clone)]
pub struct FileSlice {
    /// The segment file, opened for reading (not O_DIRECT); the segment
    /// keeps it open, and so does every slice still being sent.
    pub file: Arc<std::fs::File>,
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
    /// Whole batches from the batch cache, in order, as slices of the cached
    /// chunks (never in [`ReadMode::Copy`]).
    Pieces(Vec<Bytes>),
    /// A file range.
    File(FileSlice),
}

impl ReadData {
    /// Bytes of record data.
    pub fn len(&self) -> usize {
        match self {
            ReadData::Empty => 0,
            ReadData::Bytes(b) => b.len(),
            ReadData::Pieces(pieces) => pieces.iter().map(Bytes::len).sum(),
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
    /// `read_committed` only: the aborted transactions overlapping the
    /// returned range, as `(producer_id, first_offset)`; `None` for
    /// `read_uncommitted`.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
}

/// Last offset of the last whole batch in `bytes`.
fn last_offset_of(bytes: &[u8]) -> Option<i64> {
    batch::batches(bytes)
        .filter_map(|item| item.ok())
        .last()
        .map(|(header, _)| header.last_offset())
}

/// `length` bytes of `segment` from `position`, copied or as a file slice
/// as `mode` asks.
async fn segment_data(
    segment: &Segment,
    position: u64,
    length: usize,
    mode: ReadMode,
) -> Result<ReadData, EngineError> {
    Ok(match mode {
        ReadMode::Copy | ReadMode::CachedPiecesOrCopy => {
            ReadData::Bytes(Bytes::from(segment.read_bytes(position, length).await?))
        }
        ReadMode::FileSlice | ReadMode::CachedOrFileSlice => {
            let (_, file) = segment.readers().await?;
            let file = file.ok_or_else(|| {
                let why = std::io::Error::other("no file slices on a simulated disk");
                EngineError::io(segment.log_path(), why)
            })?;
            ReadData::File(FileSlice {
                file,
                position,
                length,
            })
        }
    })
}

impl PartitionLog {
    /// Reads whole batches from the batch holding `offset`: at most
    /// `max_bytes`, unless the first batch alone is larger (then exactly that
    /// batch, as Kafka does so that a consumer always makes progress), never
    /// past the high watermark. This is `read_uncommitted`:
    /// `aborted_transactions` is `None`.
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        mode: ReadMode,
    ) -> Result<ReadResult, EngineError> {
        let hw = self.high_watermark.get();
        Ok(self.read_bounded(offset, max_bytes, mode, hw).await?.0)
    }

    /// The `read_committed` read: like [`PartitionLog::read`] but never at
    /// or past the last stable offset, and with `aborted_transactions` set
    /// to the aborted transactions that overlap the returned range
    /// (`first_offset <=` the last offset returned, marker `>= offset`), as
    /// `(producer_id, first_offset)` — what Kafka's fetch answers, so the
    /// consumer can drop their records.
    pub async fn read_committed(
        &self,
        offset: i64,
        max_bytes: usize,
        mode: ReadMode,
    ) -> Result<ReadResult, EngineError> {
        let lso = self.last_stable_offset();
        let (mut result, range) = self.read_bounded(offset, max_bytes, mode, lso).await?;
        let candidates = self.aborted_transactions_in(offset, lso - 1);
        let aborted = if candidates.is_empty() || result.data.is_empty() {
            Vec::new()
        } else {
            // Only when an abort may overlap: find the last offset returned.
            let last_offset = match (&result.data, range) {
                (ReadData::Bytes(bytes), _) => last_offset_of(bytes),
                (ReadData::Pieces(pieces), _) => pieces.last().and_then(|p| last_offset_of(p)),
                (ReadData::File(_), Some((segment, position, length))) => {
                    self.last_offset_in_range(&segment, position, position + length as u64)
                        .await?
                }
                _ => None,
            };
            match last_offset {
                Some(last) => candidates
                    .into_iter()
                    .filter(|&(_, first)| first <= last)
                    .collect(),
                None => Vec::new(),
            }
        };
        result.aborted_transactions = Some(aborted);
        Ok(result)
    }

    /// A read that stops before `limit_offset` (the high watermark, the
    /// last stable offset, or for a follower's fetch what is published: all
    /// batch boundaries). Also returns the segment range of a file read.
    pub(super) async fn read_bounded(
        &self,
        offset: i64,
        max_bytes: usize,
        mode: ReadMode,
        limit_offset: i64,
    ) -> Result<(ReadResult, Option<(Rc<Segment>, u64, usize)>), EngineError> {
        let (start, end, hw) = {
            let state = self.state.borrow();
            (
                state.log_start_offset,
                state.log_end_offset,
                self.high_watermark.get(),
            )
        };
        // The segments are readable up to here; a replication cap may hold
        // the high watermark below it.
        let published = self.published_offset();
        assert!(
            limit_offset <= published,
            "reads stop at or below what is published"
        );
        let mut result = ReadResult {
            high_watermark: hw,
            last_stable_offset: self.last_stable_offset(),
            log_start_offset: self.earliest_offset(),
            data: ReadData::Empty,
            aborted_transactions: None,
        };
        if offset < start {
            return Err(self.below_local_start(offset, end));
        }
        if offset > end {
            return Err(EngineError::OffsetOutOfRange {
                offset,
                log_start_offset: self.earliest_offset(),
                log_end_offset: end,
            });
        }
        if offset >= limit_offset {
            return Ok((result, None));
        }
        if mode != ReadMode::FileSlice {
            if let Some(pieces) =
                read_from_chunks(&self.chunks.borrow(), offset, max_bytes, limit_offset)
            {
                result.data = match mode {
                    ReadMode::Copy => ReadData::Bytes(concat(pieces)),
                    _ => ReadData::Pieces(pieces),
                };
                return Ok((result, None));
            }
        }
        let Some((segment, position, header)) = self.locate(offset).await? else {
            return Ok((result, None));
        };
        let cut_at = (limit_offset < published).then_some(limit_offset);
        let end_position = self
            .read_end_position(&segment, position, &header, max_bytes, cut_at)
            .await?;
        if end_position <= position {
            return Ok((result, None));
        }
        let length = (end_position - position) as usize;
        result.data = segment_data(&segment, position, length, mode).await?;
        Ok((result, Some((segment, position, length))))
    }

    /// Where a read of `segment` from the batch at `position` (whose header
    /// is `first`) ends: at most `max_bytes` of whole batches (or the first
    /// alone), within the readable bytes, and before the batch at `cut_at`
    /// when that offset is given and lies in this segment.
    async fn read_end_position(
        &self,
        segment: &Rc<Segment>,
        position: u64,
        first: &BatchHeader,
        max_bytes: usize,
        cut_at: Option<i64>,
    ) -> Result<u64, EngineError> {
        let readable = segment.readable_bytes.get();
        let mut end_position = self
            .range_end(
                segment,
                position,
                first.total_bytes() as u64,
                max_bytes as u64,
            )
            .await
            .min(readable);
        if let Some(limit_offset) = cut_at {
            // The limit is the first offset of a batch: cut before it when it
            // lies in this segment.
            if let Some((limit_segment, limit_position, _)) = self.locate(limit_offset).await? {
                if Rc::ptr_eq(&limit_segment, segment) {
                    end_position = end_position.min(limit_position);
                }
            }
        }
        Ok(end_position)
    }

    /// Last offset of the whole batches of `segment` in `[position, end)`,
    /// read from their headers alone: the scan starts at the last index
    /// entry inside the range (a batch start; the range's start when there
    /// is none) and reads a window of headers at a time, stepping over each
    /// batch's records — so about one `read_ahead_bytes` DMA read (an index
    /// interval, 4 KiB by default, plus the last header), not the range,
    /// which may be megabytes that a file send never brings into memory.
    async fn last_offset_in_range(
        &self,
        segment: &Rc<Segment>,
        position: u64,
        end: u64,
    ) -> Result<Option<i64>, EngineError> {
        let last_entry = u32::try_from(end.saturating_sub(1)).unwrap_or(u32::MAX);
        let mut cursor = self
            .with_indexes(segment, |index, _| {
                index.largest_position_at_most(last_entry)
            })
            .await
            .map(u64::from)
            .filter(|&entry| entry >= position && entry < end)
            .unwrap_or(position);
        let read_ahead = self.ctx.config.io.read_ahead_bytes.max(HEADER_BYTES);
        let mut last_offset = None;
        while cursor < end {
            let want = read_ahead.min((end - cursor) as usize);
            let window = segment.read_bytes(cursor, want).await?;
            let mut at = 0usize;
            while at + HEADER_BYTES <= window.len() {
                let header = BatchHeader::parse(&window[at..]).map_err(EngineError::from)?;
                last_offset = Some(header.last_offset());
                at += header.total_bytes();
            }
            if at == 0 {
                // A short read: no header to step over (never loop on it).
                break;
            }
            cursor += at as u64;
        }
        Ok(last_offset)
    }

    /// The segments in order, from the one that may hold `offset`.
    pub(crate) fn segments_from(&self, offset: i64) -> Vec<Rc<Segment>> {
        let state = self.state.borrow();
        let idx = state.segments.partition_point(|s| s.base_offset <= offset);
        state.segments[idx.saturating_sub(1)..].to_vec()
    }

    /// The first readable batch whose last offset is `>= offset`: its segment,
    /// position and header.
    pub(crate) async fn locate(
        &self,
        offset: i64,
    ) -> Result<Option<(Rc<Segment>, u64, BatchHeader)>, EngineError> {
        for segment in self.segments_from(offset) {
            let readable = segment.readable_bytes.get();
            let mut position = if offset > segment.base_offset {
                let relative = (offset - segment.base_offset).min(i64::from(u32::MAX)) as u32;
                let found = self
                    .with_indexes(&segment, |index, _| index.lookup(relative).1)
                    .await;
                u64::from(found)
            } else {
                0
            };
            // Most bytes scanned forward from an index entry per DMA read
            // (see `io_sizing`: a multiple of the disk's knee).
            let read_ahead = self.ctx.config.io.read_ahead_bytes.max(HEADER_BYTES);
            while position < readable {
                let want = read_ahead.min((readable - position) as usize);
                let window = segment.read_bytes(position, want).await?;
                let mut cursor = 0usize;
                let mut advanced = false;
                while cursor + HEADER_BYTES <= window.len() {
                    let header =
                        BatchHeader::parse(&window[cursor..]).map_err(EngineError::from)?;
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

    /// Calls `f` with the segment's offset and time indexes (its own while
    /// active, the index cache's once sealed).
    pub(crate) async fn with_indexes<R>(
        &self,
        segment: &Segment,
        f: impl FnOnce(&crate::index::OffsetIndex, &crate::index::TimeIndex) -> R,
    ) -> R {
        let interval = self.config.borrow().index_interval_bytes;
        self.ctx
            .index_cache
            .with_indexes(segment, interval, f)
            .await
    }

    /// End of a whole-batch range from `position` of about `max_bytes`.
    async fn range_end(
        &self,
        segment: &Segment,
        position: u64,
        first_batch_bytes: u64,
        max_bytes: u64,
    ) -> u64 {
        let readable = segment.readable_bytes.get();
        let limit = position.saturating_add(max_bytes);
        let first_end = position + first_batch_bytes;
        if readable <= limit {
            return readable.max(first_end);
        }
        let limit = limit.min(u64::from(u32::MAX)) as u32;
        let known = self
            .with_indexes(segment, |index, _| index.largest_position_at_most(limit))
            .await
            .map(u64::from)
            .unwrap_or(0);
        known.max(first_end)
    }

    /// ListOffsets by time: `-1` latest (the high watermark), `-2` earliest,
    /// `-3` the record with the largest timestamp, otherwise the first record
    /// whose timestamp is `>= timestamp_ms`. Returns `(offset, timestamp)`.
    pub async fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, EngineError> {
        let hw = self.high_watermark.get();
        match timestamp_ms {
            -1 => return Ok(Some((hw, -1))),
            -2 => return Ok(Some((self.earliest_offset(), -1))),
            // KIP-1005: earliest-local and earliest-pending-upload.
            -4 => return Ok(Some((self.log_start_offset(), -1))),
            -5 => return Ok(self.earliest_pending_upload().map(|offset| (offset, -1))),
            -3 => return self.max_timestamp_offset(hw).await,
            _ => {}
        }
        let start = self.log_start_offset();
        let segments = self.segments_from(start);
        for segment in segments {
            let max_ts = segment.meta.borrow().max_timestamp_ms;
            if max_ts < timestamp_ms {
                continue;
            }
            // The sparse time index lands at or before the first batch whose
            // max timestamp reaches the target; the scan below goes on from there.
            let from_relative = self
                .with_indexes(&segment, |_, time| time.lookup(timestamp_ms))
                .await;
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

    /// ListOffsets with an isolation level: under `read_committed`, `-1`
    /// is the last stable offset and a lookup never answers an offset at or
    /// past it (Kafka's `lastFetchableOffset`).
    pub async fn offset_for_timestamp_isolated(
        &self,
        timestamp_ms: i64,
        read_committed: bool,
    ) -> Result<Option<(i64, i64)>, EngineError> {
        if !read_committed {
            return self.offset_for_timestamp(timestamp_ms).await;
        }
        let lso = self.last_stable_offset();
        if timestamp_ms == -1 {
            return Ok(Some((lso, -1)));
        }
        let found = self.offset_for_timestamp(timestamp_ms).await?;
        Ok(found.filter(|&(offset, _)| timestamp_ms == -2 || offset < lso))
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

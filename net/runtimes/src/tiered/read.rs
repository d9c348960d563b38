//! A consumer's fetch below the local log: served from the object store,
//! as one more read source behind the engine's (DESIGN.md, "Later
//! capabilities"). The committed remote metadata names the segment; its
//! offset index (kept in this shard's small cache) gives the position; one
//! ranged read of its log, through the store's chunk cache, gives the
//! batches; the engine's `remote_segment` says which bytes to serve. A
//! store that is down or slow answers the fetch with a retriable error
//! (KAFKA_STORAGE_ERROR, as Kafka's remote fetch failures), never a hang:
//! each store call has its own time limit.

use super::TieredRuntime;
use crate::remote_keys::SegmentKeys;
use crate::Shard;
use bytes::Bytes;
use cluster::metadata::{RemoteSegment, RemoteSegmentState};
use engine::remote_segment::{
    aborted_in, first_at_timestamp, last_offset_in, position_for, scan_start_for_timestamp,
    serve_from, RemoteServe,
};
use engine::{ErrorCode, PartitionLog};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Bytes read past `max_bytes` so that the batch wanted is in the first
/// range although the sparse index points up to `index.interval.bytes`
/// before it.
const SLACK_BYTES: u64 = 64 << 10;

/// The segment a remote read reads.
struct Located {
    keys: SegmentKeys,
    segment_id: [u8; 16],
    base_offset: i64,
    size_bytes: u64,
}

/// What a remote read gives: the batches, and for `read_committed` the
/// aborted transactions overlapping them.
pub struct RemoteRead {
    /// Whole batches from the one holding the offset asked for.
    pub data: Bytes,
    /// `read_committed` only: `(producer_id, first_offset)`.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
}

/// Reads `offset` of `log` from its remote copy; OFFSET_OUT_OF_RANGE when
/// no committed remote segment holds it. Within `remote.fetch.max.wait.ms`
/// and the fetch quota (see [`within_fetch_limits`]): past either, the
/// read answers no batches this time, and the consumer fetches again.
pub async fn read_remote(
    shard: &Rc<Shard>,
    log: &PartitionLog,
    offset: i64,
    max_bytes: usize,
    read_committed: bool,
) -> Result<RemoteRead, ErrorCode> {
    let tiered = shard.runtime().tiered.clone();
    let located = locate(shard, log, offset).ok_or(ErrorCode::OffsetOutOfRange)?;
    let max_wait = Duration::from_millis(shard.config.tiered.fetch_max_wait_ms);
    let started = Instant::now();
    let read = within_fetch_limits(
        &tiered,
        max_wait,
        read_batches(&tiered, &located, offset, max_bytes),
    );
    let data = match read.await {
        Some(Ok(data)) => data,
        Some(Err(code)) => {
            tiered.record_read_error();
            return Err(code);
        }
        None => {
            tiered.record_fetch_throttled();
            return Ok(RemoteRead {
                data: Bytes::new(),
                aborted_transactions: read_committed.then(Vec::new),
            });
        }
    };
    tiered.record_read(data.len(), started.elapsed());
    let aborted_transactions = if read_committed {
        let last = last_offset_in(&data).unwrap_or(offset);
        Some(aborted_txns(&tiered, &located, offset, last).await?)
    } else {
        None
    };
    Ok(RemoteRead {
        data,
        aborted_transactions,
    })
}

/// Runs `read` within the fetch limits, Kafka's: it starts once the
/// broker's remote fetch rate is under `remote.log.manager.fetch.max.
/// bytes.per.second`, and ends within `max_wait` of the call
/// (`remote.fetch.max.wait.ms`); `None` when either holds it back. A read
/// cut short is dropped here, but the store finishes its call, which fills
/// the chunk cache for the consumer's next fetch.
async fn within_fetch_limits(
    tiered: &TieredRuntime,
    max_wait: Duration,
    read: impl std::future::Future<Output = Result<Bytes, ErrorCode>>,
) -> Option<Result<Bytes, ErrorCode>> {
    let deadline = Instant::now() + max_wait;
    loop {
        let wait = Duration::from_millis(tiered.quotas.fetch_wait_ms());
        if wait.is_zero() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        glommio::timer::sleep(wait.min(left)).await;
    }
    let left = deadline.saturating_duration_since(Instant::now());
    glommio::timer::timeout(left, async { Ok(read.await) })
        .await
        .ok()
}

/// The committed remote segment holding `offset`.
fn locate(shard: &Shard, log: &PartitionLog, offset: i64) -> Option<Located> {
    let image = shard.runtime().view.image();
    let tp = log.topic_partition();
    let segment = image.remote_segment_for_offset(&log.topic_id(), tp.partition, offset)?;
    Some(Located::of(log, segment))
}

impl Located {
    fn of(log: &PartitionLog, segment: &RemoteSegment) -> Located {
        let tp = log.topic_partition();
        Located {
            keys: SegmentKeys::new(
                &tp.topic,
                &log.topic_id(),
                tp.partition,
                segment.base_offset,
                &segment.segment_id,
            ),
            segment_id: segment.segment_id,
            base_offset: segment.base_offset,
            size_bytes: u64::try_from(segment.size_bytes).unwrap_or(0),
        }
    }
}

/// How much of a remote segment one round of a timestamp scan reads.
const TIMESTAMP_SCAN_BYTES: usize = 1 << 20;

/// ListOffsets by timestamp in the remote part of `log` (Kafka's
/// `RemoteLogManager.findOffsetByTimestamp`): the first record at or
/// after the log start whose timestamp reaches `timestamp_ms`, in the
/// first committed remote segment (by offset) whose max timestamp reaches
/// it; `None` when no remote segment has one, and the local log answers.
/// The segment's time index says where to start; its batches are scanned
/// from there.
pub async fn offset_for_timestamp(
    shard: &Rc<Shard>,
    log: &PartitionLog,
    timestamp_ms: i64,
) -> Result<Option<(i64, i64)>, ErrorCode> {
    let start = log.earliest_offset();
    let candidates: Vec<(Located, i64)> = {
        let image = shard.runtime().view.image();
        image
            .remote_segments(&log.topic_id(), log.topic_partition().partition)
            .filter(|segment| {
                segment.state == RemoteSegmentState::CopySegmentFinished
                    && segment.end_offset >= start
                    && segment.max_timestamp_ms >= timestamp_ms
            })
            .map(|segment| (Located::of(log, segment), segment.end_offset))
            .collect()
    };
    let tiered = shard.runtime().tiered.clone();
    for (located, end_offset) in candidates {
        let time_index = tiered.get_whole(&located.keys.time_index()).await?;
        let mut from = scan_start_for_timestamp(&time_index, located.base_offset, timestamp_ms);
        from = from.max(start);
        while from <= end_offset {
            let data = read_batches(&tiered, &located, from, TIMESTAMP_SCAN_BYTES).await?;
            if let Some(found) = first_at_timestamp(&data, timestamp_ms, start) {
                return Ok(Some(found));
            }
            match last_offset_in(&data) {
                Some(last) if last >= from => from = last + 1,
                _ => break,
            }
        }
    }
    Ok(None)
}

/// Whole batches from the one holding `offset`, at most `max_bytes` (the
/// first whole whatever its size).
async fn read_batches(
    tiered: &TieredRuntime,
    located: &Located,
    offset: i64,
    max_bytes: usize,
) -> Result<Bytes, ErrorCode> {
    let index = tiered
        .offset_index(&located.segment_id, &located.keys)
        .await?;
    let mut from = position_for(&index, located.size_bytes, located.base_offset, offset);
    // At most a few rounds: a batch cut by the first range is read whole by
    // the second; a range of skipped batches moves on.
    for _ in 0..4 {
        if from >= located.size_bytes {
            break;
        }
        let want = (max_bytes as u64).saturating_add(SLACK_BYTES);
        let to = from.saturating_add(want).min(located.size_bytes);
        let fetched = tiered.get_range(&located.keys.log(), from..to).await?;
        match serve_from(&fetched, offset, max_bytes) {
            RemoteServe::Batches(range) => return Ok(fetched.slice(range)),
            RemoteServe::NeedBytes { start, total_bytes } => {
                let start = from + start as u64;
                let end = start.saturating_add(total_bytes as u64);
                if end > located.size_bytes {
                    return Err(ErrorCode::CorruptMessage);
                }
                let whole = tiered.get_range(&located.keys.log(), start..end).await?;
                return Ok(whole);
            }
            RemoteServe::Nothing { scanned } => {
                if scanned == 0 {
                    return Err(ErrorCode::CorruptMessage);
                }
                from += scanned as u64;
            }
        }
    }
    Ok(Bytes::new())
}

/// The aborted transactions of the segment overlapping `[from, to]`.
async fn aborted_txns(
    tiered: &TieredRuntime,
    located: &Located,
    from: i64,
    to: i64,
) -> Result<Vec<(i64, i64)>, ErrorCode> {
    let bytes = tiered.get_whole(&located.keys.txn_index()).await?;
    Ok(aborted_in(&bytes, from, to))
}

//! One cleaning pass over files, run on a cleaner thread (see `mod.rs` for
//! why a thread): build the key map over the dirty section, then rewrite
//! each segment below the map's end into `<base>.log.cleaned` (synced), and
//! hand back what was written. Files are read batch by batch through a
//! 1 MiB buffered reader and written through a buffered writer, so a pass
//! holds one batch and its survivors in memory, never a segment.
//!
//! Nothing here touches the live log: the shard swaps the `.cleaned` files
//! in (`swap.rs`) once it has checked that the segments are still the ones
//! that were read.

use super::offset_map::OffsetMap;
use crate::batch::{self, BatchBuilder, BatchHeader, HEADER_BYTES};
use crate::disk::{self, FileReader, FileWriter};
use crate::error::EngineError;
use crate::recovery::scan_segment;
use crate::segment::SegmentMeta;
use crate::txn_index::AbortedTxn;
use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// Read and write buffer of the pass.
const IO_BUFFER_BYTES: usize = 1 << 20;

/// One sealed segment of the cleanable section, as the thread sees it.
#[derive(Debug, Clone)]
pub struct SegmentFile {
    pub base_offset: i64,
    pub path: PathBuf,
    /// Valid bytes (the file may be longer: preallocation).
    pub size_bytes: u64,
    pub next_offset: i64,
    pub max_timestamp_ms: i64,
}

/// What one pass gets.
#[derive(Debug)]
pub struct Job {
    /// The cleanable section, oldest first (contiguous sealed segments).
    pub segments: Vec<SegmentFile>,
    /// First offset not yet taken into a key map (the checkpoint).
    pub first_dirty: i64,
    /// `log.cleaner.dedupe.buffer.size` for this pass.
    pub map_bytes: usize,
    /// Aborted transactions of the log (from the transaction index).
    pub aborted: Vec<AbortedTxn>,
    pub now_ms: i64,
    pub delete_retention_ms: i64,
    pub index_interval_bytes: u64,
    /// `log.cleaner.io.max.bytes.per.second` over the whole pass.
    pub throttle: Throttle,
}

/// Kafka's cleaner throttle: the pass's reads and writes, counted from its
/// start, never run ahead of `max_bytes_per_second` (the thread sleeps
/// instead).
///
/// Why both, as Kafka's `log.cleaner.io.max.bytes.per.second` counts them:
/// a pass reads its section twice (key map, then rewrite) and writes what
/// survives, and both crowd the disk under the shards' appends and their
/// fdatasyncs (with one shard, produce p99 on other partitions rose 9x
/// during an unthrottled 2.4 GB pass). Counting reads only let a pass whose
/// records mostly survive run at up to 1.5x the configured rate. The
/// rewritten segment's small index files are not counted (nor are they in
/// Kafka).
#[derive(Debug)]
pub struct Throttle {
    max_bytes_per_second: Option<f64>,
    started: std::time::Instant,
    bytes: std::cell::Cell<u64>,
}

impl Throttle {
    /// A throttle at `max_bytes_per_second`, or none.
    pub fn new(max_bytes_per_second: Option<f64>) -> Self {
        Throttle {
            max_bytes_per_second,
            started: std::time::Instant::now(),
            bytes: std::cell::Cell::new(0),
        }
    }

    /// Bytes read and written so far, as charged against the rate.
    pub fn bytes_charged(&self) -> u64 {
        self.bytes.get()
    }

    /// Counts `bytes` read or written and sleeps until the pass is back
    /// under the rate.
    fn account(&self, bytes: u64) {
        if let Some(pause) = self.pause_after(bytes, self.started.elapsed()) {
            std::thread::sleep(pause);
        }
    }

    /// Counts `bytes` read or written; the sleep that brings the pass back
    /// under the rate `elapsed` after its start, if it is ahead of it.
    fn pause_after(&self, bytes: u64, elapsed: std::time::Duration) -> Option<std::time::Duration> {
        let total = self.bytes.get() + bytes;
        self.bytes.set(total);
        let rate = self.max_bytes_per_second?;
        let due = std::time::Duration::from_secs_f64(total as f64 / rate);
        (due > elapsed).then(|| due - elapsed)
    }
}

/// A rewritten segment waiting to be swapped in: `<base>.log.cleaned` and
/// its `.index.cleaned` / `.timeindex.cleaned` next to `log_path`.
#[derive(Debug)]
pub struct Cleaned {
    pub base_offset: i64,
    pub log_path: PathBuf,
    pub meta: SegmentMeta,
}

/// What one pass did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The new first dirty offset: everything below was in the key map.
    pub end_offset: i64,
    pub cleaned: Vec<Cleaned>,
    /// Bytes read (map building and rewriting).
    pub bytes_read: u64,
    /// Bytes of the segments rewritten, before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: usize,
}

/// Runs one pass. Any error leaves no `.cleaned` file behind.
pub fn run(job: &Job) -> Result<Outcome, EngineError> {
    let aborted = AbortedSet::new(&job.aborted);
    let mut outcome = Outcome::default();
    let mut map = OffsetMap::new(job.map_bytes);
    outcome.end_offset = build_map(job, &aborted, &mut map, &mut outcome.bytes_read)?;
    let mut txn_data: HashMap<i64, bool> = HashMap::new();
    for segment in &job.segments {
        if segment.base_offset >= outcome.end_offset {
            break;
        }
        let cleaned_path = super::swap::cleaned_path(&segment.path);
        let result = clean_segment(
            job,
            segment,
            &map,
            &aborted,
            &mut txn_data,
            &cleaned_path,
            &mut outcome,
        );
        match result {
            Ok(Some(meta)) => outcome.cleaned.push(Cleaned {
                base_offset: segment.base_offset,
                log_path: segment.path.clone(),
                meta,
            }),
            Ok(None) => {}
            Err(e) => {
                super::swap::discard(&segment.path);
                for c in &outcome.cleaned {
                    super::swap::discard(&c.log_path);
                }
                return Err(e);
            }
        }
    }
    Ok(outcome)
}

/// Puts the keys of the dirty section into `map`, oldest first, and returns
/// the offset the map covers up to (exclusive): the section's end, or the
/// first record whose key did not fit (Kafka cleans up to there and leaves
/// the rest dirty for the next pass).
fn build_map(
    job: &Job,
    aborted: &AbortedSet,
    map: &mut OffsetMap,
    bytes_read: &mut u64,
) -> Result<i64, EngineError> {
    let end = job
        .segments
        .last()
        .map_or(job.first_dirty, |s| s.next_offset);
    for segment in job
        .segments
        .iter()
        .filter(|s| s.next_offset > job.first_dirty)
    {
        let mut reader = BatchReader::open(segment, &job.throttle)?;
        while let Some((header, bytes)) = reader.next_batch()? {
            if header.last_offset() < job.first_dirty
                || header.is_control()
                || aborted.contains(&header)
            {
                continue;
            }
            for record in batch::records(bytes)? {
                let offset = header.base_offset + i64::from(record.offset_delta);
                if offset < job.first_dirty {
                    continue;
                }
                if let Some(key) = &record.key {
                    if !map.put(key, offset) {
                        *bytes_read += reader.read_bytes;
                        return Ok(offset);
                    }
                }
            }
        }
        *bytes_read += reader.read_bytes;
    }
    Ok(end)
}

/// Rewrites one segment into `cleaned_path`; `None` (and no file) when
/// nothing in it goes.
fn clean_segment(
    job: &Job,
    segment: &SegmentFile,
    map: &OffsetMap,
    aborted: &AbortedSet,
    txn_data: &mut HashMap<i64, bool>,
    cleaned_path: &Path,
    outcome: &mut Outcome,
) -> Result<Option<SegmentMeta>, EngineError> {
    // Tombstones and transaction markers outlive one pass: they go only from
    // the clean section (a previous pass saw them, so every reader that
    // started within `delete.retention.ms` had its chance to see them) and
    // once the segment is older than `delete.retention.ms`.
    let in_clean_section = segment.next_offset <= job.first_dirty;
    let survival = Survival {
        map,
        aborted,
        expire_deletes: in_clean_section
            && job.now_ms.saturating_sub(segment.max_timestamp_ms.max(0)) > job.delete_retention_ms,
    };
    let mut out =
        disk::create_writer(cleaned_path).map_err(|e| EngineError::io(cleaned_path, e))?;
    let mut reader = BatchReader::open(segment, &job.throttle)?;
    let mut removed = 0usize;
    let mut written = 0u64;
    while let Some((header, bytes)) = reader.next_batch()? {
        let kept = survival.kept_batch(&header, bytes, txn_data, &mut removed)?;
        if let Some(b) = kept {
            out.write_all(&b)
                .map_err(|e| EngineError::io(cleaned_path, e))?;
            written += b.len() as u64;
            job.throttle.account(b.len() as u64);
        }
    }
    outcome.bytes_read += reader.read_bytes;
    if removed == 0 {
        drop(out);
        let _ = disk::remove_file(cleaned_path);
        return Ok(None);
    }
    let meta = finish_cleaned(job, segment, cleaned_path, out)?;
    outcome.bytes_before += segment.size_bytes;
    outcome.bytes_after += written;
    outcome.records_removed += removed;
    Ok(Some(meta))
}

/// What decides which records of one segment survive its rewrite.
struct Survival<'a> {
    /// The newest offset of each key of the dirty section.
    map: &'a OffsetMap,
    aborted: &'a AbortedSet,
    /// Tombstones and transaction markers may go (see [`clean_segment`]).
    expire_deletes: bool,
}

impl Survival<'_> {
    /// What of one batch survives: the batch as it was, a rebuilt batch of
    /// its surviving records, or nothing. Adds the records that go to
    /// `removed`; `txn_data` tracks which producers' transactions still
    /// have data before their marker.
    fn kept_batch(
        &self,
        header: &BatchHeader,
        bytes: &[u8],
        txn_data: &mut HashMap<i64, bool>,
        removed: &mut usize,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        if header.is_control() {
            // A marker goes once no data of its transaction is left before
            // it (Kafka's rule): a reader could otherwise meet data whose
            // transaction never ends.
            let has_data = txn_data.remove(&header.producer_id).unwrap_or(false);
            if self.expire_deletes && !has_data {
                *removed += header.records_count.max(0) as usize;
                Ok(None)
            } else {
                Ok(Some(bytes.to_vec()))
            }
        } else if self.aborted.contains(header) {
            // Aborted data is never read by read_committed consumers and
            // skipped by the rest: it goes in the first pass that sees it.
            *removed += header.records_count.max(0) as usize;
            Ok(None)
        } else {
            self.kept_records(header, bytes, txn_data, removed)
        }
    }

    /// [`Survival::kept_batch`] of a data batch: a record goes when a newer
    /// one has its key, or when it is a tombstone due to expire.
    fn kept_records(
        &self,
        header: &BatchHeader,
        bytes: &[u8],
        txn_data: &mut HashMap<i64, bool>,
        removed: &mut usize,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        let records = batch::records(bytes)?;
        let keep: Vec<&batch::Record> = records
            .iter()
            .filter(|r| {
                let offset = header.base_offset + i64::from(r.offset_delta);
                match &r.key {
                    None => true,
                    Some(key) => {
                        self.map.get(key).is_none_or(|newest| offset >= newest)
                            && !(r.value.is_none() && self.expire_deletes)
                    }
                }
            })
            .collect();
        *removed += records.len() - keep.len();
        if header.is_transactional() && !keep.is_empty() {
            txn_data.insert(header.producer_id, true);
        }
        if keep.len() == records.len() {
            Ok(Some(bytes.to_vec()))
        } else if keep.is_empty() {
            Ok(None)
        } else {
            Ok(Some(rebuild(header, &keep)?))
        }
    }
}

/// Flushes and syncs the rewritten segment, then builds its bookkeeping
/// and writes its `.cleaned` indexes beside it.
fn finish_cleaned(
    job: &Job,
    segment: &SegmentFile,
    cleaned_path: &Path,
    out: FileWriter,
) -> Result<SegmentMeta, EngineError> {
    // Synced before the swap renames it in: a crash after the rename must
    // find the whole rewrite (`Bug::UnsyncedCleanedSegment` breaks this on
    // purpose, for the simulation to catch).
    let sync = disk::sim::bug() != disk::sim::Bug::UnsyncedCleanedSegment;
    out.finish(sync)
        .map_err(|e| EngineError::io(cleaned_path, e))?;
    // The rewritten file's bookkeeping and indexes, from the file itself.
    let scan = scan_segment(
        cleaned_path,
        segment.base_offset,
        segment.base_offset,
        job.index_interval_bytes,
        job.now_ms,
    )?;
    if let Some(reason) = scan.stopped_because {
        return Err(EngineError::io(
            cleaned_path,
            std::io::Error::other(format!("cleaned segment invalid: {reason}")),
        ));
    }
    let mut meta = scan.meta;
    // The segment keeps its offset range even when its last records went.
    meta.next_offset = segment.next_offset;
    // Its indexes too, written beside it now so that the shard only renames
    // them in with the log (`swap.rs`).
    for (extension, bytes) in [
        ("index", meta.index.to_bytes()),
        ("timeindex", meta.time_index.to_bytes()),
    ] {
        let path = super::swap::cleaned_path_of(&segment.path, extension);
        disk::write(&path, &bytes, true).map_err(|e| EngineError::io(&path, e))?;
    }
    Ok(meta)
}

/// Rebuilds a batch with the records kept, keeping the batch's base offset,
/// producer fields and each record's offset and timestamp, as Kafka does.
fn rebuild(header: &BatchHeader, keep: &[&batch::Record]) -> Result<Vec<u8>, EngineError> {
    let mut builder = BatchBuilder::new(header.base_offset, header.compression()?)
        .producer(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.is_transactional(),
        )
        .partition_leader_epoch(header.partition_leader_epoch);
    for r in keep {
        let headers: Vec<(&[u8], Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_ref(), v.as_deref()))
            .collect();
        builder.push(
            r.offset_delta,
            header.base_timestamp + r.timestamp_delta,
            r.key.as_deref(),
            r.value.as_deref(),
            &headers,
        );
    }
    let mut built = builder.build()?;
    // Keep LogAppendTime batches' timestamps as they were.
    if header.timestamp_type_log_append() {
        batch::set_log_append_time(&mut built, header.max_timestamp);
    }
    Ok(built)
}

/// The aborted transactions by producer, as offset ranges (first data
/// offset to marker offset).
struct AbortedSet {
    by_producer: HashMap<i64, Vec<(i64, i64)>>,
}

impl AbortedSet {
    fn new(entries: &[AbortedTxn]) -> AbortedSet {
        let mut by_producer: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for e in entries {
            by_producer
                .entry(e.producer_id)
                .or_default()
                .push((e.first_offset, e.last_offset));
        }
        AbortedSet { by_producer }
    }

    /// A transactional data batch of an aborted transaction.
    fn contains(&self, header: &BatchHeader) -> bool {
        header.is_transactional()
            && !header.is_control()
            && self.by_producer.get(&header.producer_id).is_some_and(|r| {
                r.iter()
                    .any(|&(first, last)| first <= header.base_offset && header.base_offset <= last)
            })
    }
}

/// Reads a segment batch by batch through a bounded buffer.
struct BatchReader<'a> {
    reader: BufReader<FileReader>,
    path: PathBuf,
    remaining: u64,
    buf: Vec<u8>,
    read_bytes: u64,
    throttle: &'a Throttle,
}

impl<'a> BatchReader<'a> {
    fn open(segment: &SegmentFile, throttle: &'a Throttle) -> Result<BatchReader<'a>, EngineError> {
        let file =
            disk::open_reader(&segment.path).map_err(|e| EngineError::io(&segment.path, e))?;
        Ok(BatchReader {
            reader: BufReader::with_capacity(IO_BUFFER_BYTES, file),
            path: segment.path.clone(),
            remaining: segment.size_bytes,
            buf: Vec::new(),
            read_bytes: 0,
            throttle,
        })
    }

    /// The next whole batch, or `None` at the segment's valid end.
    fn next_batch(&mut self) -> Result<Option<(BatchHeader, &[u8])>, EngineError> {
        // Base offset (8) and batch length (4) give the batch's size.
        const PREFIX: usize = 12;
        if self.remaining < HEADER_BYTES as u64 {
            return Ok(None);
        }
        self.buf.resize(PREFIX, 0);
        self.reader
            .read_exact(&mut self.buf)
            .map_err(|e| EngineError::io(&self.path, e))?;
        let length = i32::from_be_bytes([self.buf[8], self.buf[9], self.buf[10], self.buf[11]]);
        let total = PREFIX as u64 + u64::try_from(length).unwrap_or(0);
        if total < HEADER_BYTES as u64 || total > self.remaining {
            return Err(EngineError::io(
                &self.path,
                std::io::Error::other("segment holds a batch the cleaner cannot frame"),
            ));
        }
        self.buf.resize(total as usize, 0);
        self.reader
            .read_exact(&mut self.buf[PREFIX..])
            .map_err(|e| EngineError::io(&self.path, e))?;
        self.remaining -= total;
        self.read_bytes += total;
        self.throttle.account(total);
        let header = BatchHeader::parse(&self.buf)?;
        Ok(Some((header, &self.buf)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads counted against a 1 MB/s throttle are held to that rate: the
    /// pause is what the bytes are ahead of it (the clock passed in, so the
    /// check is exact on a loaded host too).
    #[test]
    fn the_throttle_holds_reads_to_its_rate() {
        use std::time::Duration;
        let throttle = Throttle::new(Some(1_000_000.0));
        let ms = Duration::from_millis;
        // 100 kB due at 100 ms: 40 ms in, 60 ms ahead.
        assert_eq!(throttle.pause_after(100_000, ms(40)), Some(ms(60)));
        // 400 kB in all, due at 400 ms.
        for _ in 0..3 {
            throttle.pause_after(100_000, ms(100));
        }
        assert_eq!(throttle.pause_after(0, ms(150)), Some(ms(250)));
        // Behind the rate (a slow disk): no pause.
        assert_eq!(throttle.pause_after(0, ms(400)), None);
        assert_eq!(throttle.pause_after(0, ms(900)), None);
        // No throttle: never a pause, whatever was read.
        let unthrottled = Throttle::new(None);
        assert_eq!(unthrottled.pause_after(u64::MAX / 2, ms(0)), None);
    }

    /// A segment file of `keys` keys updated `rounds` times, one record per
    /// batch, offsets from 0; its size in bytes.
    fn write_updates(path: &Path, keys: usize, rounds: usize) -> u64 {
        let mut bytes = Vec::new();
        for offset in 0..keys * rounds {
            let mut builder = BatchBuilder::new(offset as i64, batch::Compression::None);
            let key = format!("k{}", offset % keys);
            let value = format!("v{}", offset / keys);
            builder.push(0, 1_000, Some(key.as_bytes()), Some(value.as_bytes()), &[]);
            bytes.extend(builder.build().unwrap());
        }
        std::fs::write(path, &bytes).unwrap();
        bytes.len() as u64
    }

    /// A throttled pass is charged its reads (the section twice: the key
    /// map, then the rewrite) and its writes (the rewritten segment), and is
    /// held to the time those bytes take at the rate, as Kafka's
    /// `log.cleaner.io.max.bytes.per.second` counts them.
    #[test]
    fn a_pass_is_charged_its_reads_and_its_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::segment::file_name(0, "log"));
        let (keys, rounds) = (10, 3);
        let size_bytes = write_updates(&path, keys, rounds);
        // Fast enough that the test does not wait; the accounting is what is checked.
        let rate = 1e9;
        let job = Job {
            segments: vec![SegmentFile {
                base_offset: 0,
                path: path.clone(),
                size_bytes,
                next_offset: (keys * rounds) as i64,
                max_timestamp_ms: 1_000,
            }],
            first_dirty: 0,
            map_bytes: 1 << 20,
            aborted: Vec::new(),
            now_ms: 2_000,
            delete_retention_ms: 86_400_000,
            index_interval_bytes: 4096,
            throttle: Throttle::new(Some(rate)),
        };
        let outcome = run(&job).unwrap();
        assert_eq!(outcome.records_removed, keys * (rounds - 1));
        let written_bytes = std::fs::metadata(crate::segment_swap::cleaned_path(&path))
            .unwrap()
            .len();
        assert!(written_bytes > 0 && written_bytes < size_bytes);
        assert_eq!(outcome.bytes_read, 2 * size_bytes);
        let charged = 2 * size_bytes + written_bytes;
        assert_eq!(job.throttle.bytes_charged(), charged);
        // Due at charged / rate from its start: ahead of it at time zero by
        // exactly that.
        let due = std::time::Duration::from_secs_f64(charged as f64 / rate);
        assert_eq!(
            job.throttle.pause_after(0, std::time::Duration::ZERO),
            Some(due)
        );
    }
}

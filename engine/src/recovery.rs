//! Recovery: finding the valid prefix of a segment after a crash.
//!
//! A segment is scanned batch by batch: header sanity, CRC32C, and offsets
//! that only grow. The first batch that fails — torn by a crash, zeroed by
//! preallocation, left over in a recycled file (a whole, valid batch wholly
//! below the segment's base: `recycle.rs`), or corrupted on disk — ends the
//! valid prefix; the caller
//! truncates the file there (and drops later segments), logging why. The
//! scan rebuilds the segment's indexes on the way, which is also how a
//! missing or corrupt `.index` / `.timeindex` is replaced.
//!
//! Sealed segments below the recovery point are not read whole: their
//! indexes are loaded and only the batches after the last index entry are
//! checked ([`recover_segment`]), as Kafka recovers only past its
//! recovery point.
//!
//! The scan uses plain buffered reads: it runs before the partition serves
//! anything, so blocking its shard briefly at start is harmless, and it keeps
//! recovery testable without an executor.

use crate::batch::{self, BatchHeader, HEADER_BYTES};
use crate::disk::{self, FileReader};
use crate::error::EngineError;
use crate::segment::{Segment, SegmentMeta};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Read window of the scan.
const SCAN_WINDOW_BYTES: usize = 1 << 20;

/// What a scan found.
#[derive(Debug)]
pub struct ScanOutcome {
    /// Bookkeeping of the valid prefix (indexes rebuilt).
    pub meta: SegmentMeta,
    /// Why the scan stopped before the end of the file, if it did.
    pub stopped_because: Option<String>,
    /// Bytes in the file (including preallocated zeros).
    pub file_bytes: u64,
    /// Bytes read and checked batch by batch.
    pub scanned_bytes: u64,
    /// The indexes came from the segment's index files (which therefore
    /// exist and agree with it), not from a whole scan.
    pub indexes_from_files: bool,
}

/// Scans the `.log` file at `path` (base offset `base_offset`) from the start.
/// `min_offset` is the smallest offset the first batch may have.
pub fn scan_segment(
    path: &Path,
    base_offset: i64,
    min_offset: i64,
    index_interval_bytes: u64,
    now_ms: i64,
) -> Result<ScanOutcome, EngineError> {
    scan_from(
        path,
        Segment::empty_meta(base_offset, now_ms),
        base_offset,
        min_offset.max(base_offset),
        index_interval_bytes,
    )
}

/// Recovers one segment at open: from its indexes when `trust_indexes` (a
/// sealed segment below the recovery point) and they hold up, otherwise by
/// scanning it whole.
pub fn recover_segment(
    path: &Path,
    base_offset: i64,
    min_offset: i64,
    trust_indexes: bool,
    index_interval_bytes: u64,
    now_ms: i64,
) -> Result<ScanOutcome, EngineError> {
    if trust_indexes {
        if let Some(outcome) =
            open_sealed_segment(path, base_offset, min_offset, index_interval_bytes, now_ms)?
        {
            return Ok(outcome);
        }
    }
    scan_segment(path, base_offset, min_offset, index_interval_bytes, now_ms)
}

/// Opens a sealed segment below the recovery point without reading all of
/// it: it was synced, and its indexes written, when it was sealed. The
/// indexes are loaded and only the batches from the last offset-index entry
/// to the end are read and checked (they give the segment's end offset).
///
/// `None` when the shortcut cannot be trusted — an index file missing,
/// unparsable, older than the `.log` (a compaction that crashed between its
/// rename and its new indexes), or not pointing at a run of valid batches
/// that ends exactly at the end of the file: the caller scans the whole
/// segment then, which finds and reports whatever is wrong.
fn open_sealed_segment(
    path: &Path,
    base_offset: i64,
    min_offset: i64,
    index_interval_bytes: u64,
    now_ms: i64,
) -> Result<Option<ScanOutcome>, EngineError> {
    let Ok(file_bytes) = disk::len(path) else {
        return Ok(None);
    };
    let index_path = path.with_extension("index");
    let time_path = path.with_extension("timeindex");
    let fresh = |p: &Path| match (disk::modified(p), disk::modified(path)) {
        (Ok(modified), Ok(log_modified)) => modified >= log_modified,
        _ => false,
    };
    if !fresh(&index_path) || !fresh(&time_path) {
        return Ok(None);
    }
    let (Ok(index_bytes), Ok(time_bytes)) = (disk::read(&index_path), disk::read(&time_path))
    else {
        return Ok(None);
    };
    let (Some(index), Some(time_index)) = (
        crate::index::OffsetIndex::from_bytes(&index_bytes, file_bytes),
        crate::index::TimeIndex::from_bytes(&time_bytes),
    ) else {
        return Ok(None);
    };
    let (relative, position) = index.lookup(u32::MAX);
    let (max_timestamp_ms, max_timestamp_batch_offset) = match time_index.last() {
        Some((t, o)) => (t, base_offset + i64::from(o)),
        None => (-1, base_offset),
    };
    let start = base_offset + i64::from(relative);
    let meta = SegmentMeta {
        size_bytes: u64::from(position),
        next_offset: start,
        index,
        time_index,
        max_timestamp_ms,
        max_timestamp_batch_offset,
        bytes_since_index_entry: 0,
        created_ms: now_ms,
    };
    let outcome = scan_from(
        path,
        meta,
        base_offset,
        start.max(min_offset),
        index_interval_bytes,
    )?;
    let complete = outcome.stopped_because.is_none()
        && outcome.meta.size_bytes == file_bytes
        && outcome.meta.size_bytes > u64::from(position);
    Ok(complete.then_some(ScanOutcome {
        indexes_from_files: true,
        ..outcome
    }))
}

/// Scans from `meta.size_bytes` (a batch start) to the end of the file,
/// recording each valid batch in `meta`.
fn scan_from(
    path: &Path,
    meta: SegmentMeta,
    base_offset: i64,
    mut expected_min: i64,
    index_interval_bytes: u64,
) -> Result<ScanOutcome, EngineError> {
    let file = disk::open_reader(path).map_err(|e| EngineError::io(path, e))?;
    let start_position = meta.size_bytes;
    let mut reader = ScanReader::new(file, path, start_position)?;
    let file_bytes = reader.file_bytes;
    let segment = Segment::new(
        path.parent().unwrap_or(Path::new(".")),
        base_offset,
        meta,
        0,
    );
    let mut position: u64 = start_position;
    let mut stopped_because = None;
    while position < file_bytes {
        let header = match reader.next_batch(position, expected_min, base_offset)? {
            NextBatch::Valid(header) => header,
            NextBatch::Stop(reason) => {
                stopped_because = reason;
                break;
            }
        };
        let total = header.total_bytes();
        segment.record_append(
            position,
            header.base_offset,
            header.last_offset(),
            header.max_timestamp,
            total as u64,
            index_interval_bytes,
        );
        expected_min = header.last_offset() + 1;
        position += total as u64;
    }
    let meta = segment.meta.borrow().clone();
    Ok(ScanOutcome {
        scanned_bytes: meta.size_bytes - start_position,
        meta,
        stopped_because,
        file_bytes,
        indexes_from_files: false,
    })
}

/// What the scan found at a position.
enum NextBatch {
    /// A whole, valid batch with this header.
    Valid(BatchHeader),
    /// The valid prefix ends here; why, unless the rest is zeros
    /// (preallocated space: a clean end, nothing to report).
    Stop(Option<String>),
}

/// A segment file read through a window, batch by batch.
struct ScanReader<'p> {
    file: FileReader,
    path: &'p Path,
    /// Bytes in the file (including preallocated zeros).
    file_bytes: u64,
    window: Vec<u8>,
    window_start: u64,
}

impl<'p> ScanReader<'p> {
    /// A reader whose first read fills the window from `start_position`.
    fn new(mut file: FileReader, path: &'p Path, start_position: u64) -> Result<Self, EngineError> {
        let file_bytes = file
            .seek(SeekFrom::End(0))
            .map_err(|e| EngineError::io(path, e))?;
        Ok(ScanReader {
            file,
            path,
            file_bytes,
            window: Vec::with_capacity(SCAN_WINDOW_BYTES),
            // Empty window: the first read fills it from `start_position`.
            window_start: start_position,
        })
    }

    /// `length` bytes at `position`, or `None` when the file ends first.
    fn bytes_at(&mut self, position: u64, length: usize) -> Result<Option<&[u8]>, EngineError> {
        fill_and_parse(
            &mut self.file,
            self.path,
            &mut self.window,
            &mut self.window_start,
            position,
            length,
        )
    }

    /// Checks the batch at `position`: a header that parses, offsets from
    /// `expected_min` on and within the segment's range from `base_offset`,
    /// every announced byte present, and a CRC32C that matches.
    fn next_batch(
        &mut self,
        position: u64,
        expected_min: i64,
        base_offset: i64,
    ) -> Result<NextBatch, EngineError> {
        let header = match self.bytes_at(position, HEADER_BYTES)? {
            Some(bytes) => match BatchHeader::parse(bytes) {
                Ok(h) => h,
                Err(e) => {
                    let reason = (!is_zeroes(bytes))
                        .then(|| format!("invalid batch header at byte {position}: {e}"));
                    return Ok(NextBatch::Stop(reason));
                }
            },
            None => {
                let reason = trailing_reason(&self.window, self.window_start, position);
                return Ok(NextBatch::Stop(reason));
            }
        };
        if let Some(reason) = offsets_problem(&header, position, expected_min, base_offset) {
            // A recycled file's stale batch (`recycle.rs`): whole, valid,
            // and wholly below this segment, which no batch of its own can
            // be. The log ends here as cleanly as at preallocated zeros.
            let stale = header.last_offset() < base_offset
                && header.base_offset <= header.last_offset()
                && self.whole_batch_problem(position, &header)?.is_none();
            return Ok(NextBatch::Stop((!stale).then_some(reason)));
        }
        if let Some(reason) = self.whole_batch_problem(position, &header)? {
            return Ok(NextBatch::Stop(Some(reason)));
        }
        Ok(NextBatch::Valid(header))
    }

    /// Why the batch at `position` whose header is `header` is not whole
    /// and CRC-valid, if it is not.
    fn whole_batch_problem(
        &mut self,
        position: u64,
        header: &BatchHeader,
    ) -> Result<Option<String>, EngineError> {
        let total = header.total_bytes();
        let Some(bytes) = self.bytes_at(position, total)? else {
            return Ok(Some(format!(
                "torn batch at byte {position}: {total} bytes announced, file ends first"
            )));
        };
        let crc = batch::compute_crc(bytes);
        Ok((crc != header.crc).then(|| {
            format!(
                "CRC mismatch at byte {position} (stored {:#010x}, computed {crc:#010x})",
                header.crc
            )
        }))
    }
}

/// Why the offsets of the batch at `position` cannot continue the log, if
/// they cannot: they must start at `expected_min` or later, not run
/// backwards, and stay within the 32-bit range of the segment's relative
/// offsets from `base_offset`.
fn offsets_problem(
    header: &BatchHeader,
    position: u64,
    expected_min: i64,
    base_offset: i64,
) -> Option<String> {
    if header.base_offset < expected_min || header.last_offset() < header.base_offset {
        return Some(format!(
            "batch at byte {position} has offsets {}..={} but {expected_min} or more was expected",
            header.base_offset,
            header.last_offset()
        ));
    }
    if header.last_offset() - base_offset > i64::from(u32::MAX) {
        return Some(format!(
            "batch at byte {position} is beyond the segment's offset range"
        ));
    }
    None
}

/// Returns `length` bytes at `position`, reading more of the file into the
/// window as needed; `None` when the file ends first.
fn fill_and_parse<'w>(
    file: &mut FileReader,
    path: &Path,
    window: &'w mut Vec<u8>,
    window_start: &mut u64,
    position: u64,
    length: usize,
) -> Result<Option<&'w [u8]>, EngineError> {
    let window_end = *window_start + window.len() as u64;
    if position < *window_start || position + length as u64 > window_end {
        window.clear();
        *window_start = position;
        file.seek(SeekFrom::Start(position))
            .map_err(|e| EngineError::io(path, e))?;
        let want = length.max(SCAN_WINDOW_BYTES);
        window.resize(want, 0);
        let mut filled = 0;
        while filled < want {
            let n = file
                .read(&mut window[filled..])
                .map_err(|e| EngineError::io(path, e))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        window.truncate(filled);
    }
    let offset = (position - *window_start) as usize;
    Ok(window.get(offset..offset + length))
}

fn is_zeroes(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

fn trailing_reason(window: &[u8], window_start: u64, position: u64) -> Option<String> {
    let offset = position.saturating_sub(window_start) as usize;
    let rest = window.get(offset..).unwrap_or(&[]);
    (!is_zeroes(rest)).then(|| format!("torn batch header at byte {position}"))
}

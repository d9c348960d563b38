//! Recovery: finding the valid prefix of a segment after a crash.
//!
//! A segment is scanned batch by batch: header sanity, CRC32C, and offsets
//! that only grow. The first batch that fails — torn by a crash, zeroed by
//! preallocation, or corrupted on disk — ends the valid prefix; the caller
//! truncates the file there (and drops later segments), logging why. The
//! scan rebuilds the segment's indexes on the way, which is also how a
//! missing or corrupt `.index` / `.timeindex` is replaced.
//!
//! The scan uses plain buffered reads: it runs before the partition serves
//! anything, so blocking its shard briefly at start is harmless, and it keeps
//! recovery testable without an executor.

use crate::batch::{self, BatchHeader, HEADER_BYTES};
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
    let mut file = std::fs::File::open(path).map_err(|e| EngineError::io(path, e))?;
    let file_bytes = file
        .seek(SeekFrom::End(0))
        .map_err(|e| EngineError::io(path, e))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| EngineError::io(path, e))?;
    let segment = Segment::new(
        path.parent().unwrap_or(Path::new(".")),
        base_offset,
        Segment::empty_meta(base_offset, now_ms),
        0,
    );
    let mut expected_min = min_offset.max(base_offset);
    let mut window: Vec<u8> = Vec::with_capacity(SCAN_WINDOW_BYTES);
    let mut window_start: u64 = 0;
    let mut position: u64 = 0;
    let mut stopped_because = None;
    loop {
        if position >= file_bytes {
            break;
        }
        // Make sure the window holds the header at `position`.
        let header = match fill_and_parse(
            &mut file,
            path,
            &mut window,
            &mut window_start,
            position,
            HEADER_BYTES,
        )? {
            Some(bytes) => match BatchHeader::parse(bytes) {
                Ok(h) => h,
                Err(e) => {
                    if !is_zeroes(bytes) {
                        stopped_because =
                            Some(format!("invalid batch header at byte {position}: {e}"));
                    }
                    break;
                }
            },
            None => {
                stopped_because = trailing_reason(&window, window_start, position);
                break;
            }
        };
        let total = header.total_bytes();
        if header.base_offset < expected_min || header.last_offset() < header.base_offset {
            stopped_because = Some(format!(
                "batch at byte {position} has offsets {}..={} but {expected_min} or more was expected",
                header.base_offset,
                header.last_offset()
            ));
            break;
        }
        if header.last_offset() - base_offset > i64::from(u32::MAX) {
            stopped_because = Some(format!(
                "batch at byte {position} is beyond the segment's offset range"
            ));
            break;
        }
        let bytes = match fill_and_parse(
            &mut file,
            path,
            &mut window,
            &mut window_start,
            position,
            total,
        )? {
            Some(bytes) => bytes,
            None => {
                stopped_because = Some(format!(
                    "torn batch at byte {position}: {total} bytes announced, file ends first"
                ));
                break;
            }
        };
        let crc = batch::compute_crc(bytes);
        if crc != header.crc {
            stopped_because = Some(format!(
                "CRC mismatch at byte {position} (stored {:#010x}, computed {crc:#010x})",
                header.crc
            ));
            break;
        }
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
        meta,
        stopped_because,
        file_bytes,
    })
}

/// Returns `length` bytes at `position`, reading more of the file into the
/// window as needed; `None` when the file ends first.
fn fill_and_parse<'w>(
    file: &mut std::fs::File,
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

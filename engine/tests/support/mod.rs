//! Helpers shared by the engine's hard tests (model, crash, corruption):
//! temp dirs on a real disk, and a reader that checks every byte it is served.
#![allow(dead_code)]

pub mod sim;

use engine::batch::{self, BatchHeader};
use engine::log::ReadMode;
use engine::{PartitionLog, ReadData};

/// One record as read back: offset, key, value.
pub type ReadRecord = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// A temp dir under the target dir: ext4 here, unlike `/tmp` (tmpfs has no O_DIRECT).
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

/// Reads every record from `from` up to the high watermark, in `mode`, and
/// checks what it is served: whole batches only, each passing the produce
/// validation (CRC32C included), the first one holding `from`, the rest
/// contiguous in offsets, nothing at or past the high watermark. Records
/// below `from` (a batch that straddles it) are dropped.
pub async fn read_checked(log: &PartitionLog, from: i64, mode: ReadMode) -> Vec<ReadRecord> {
    let hw = log.high_watermark();
    let mut out = Vec::new();
    let mut offset = from;
    // A bound on the loop: each round moves `offset` forward by at least one.
    for _ in 0..=(hw - from).max(0) + 1 {
        let result = log
            .read(offset, 4096, mode)
            .await
            .unwrap_or_else(|e| panic!("read at {offset} (hw {hw}) failed: {e}"));
        let bytes = match result.data {
            ReadData::Empty => break,
            ReadData::Bytes(b) => b.to_vec(),
            ReadData::Pieces(pieces) => {
                // Each piece is whole batches of one cached chunk.
                for piece in &pieces {
                    let mut iter = batch::batches(piece);
                    assert!(
                        iter.by_ref().all(|item| item.is_ok()),
                        "piece with a bad batch"
                    );
                    assert_eq!(iter.remainder_bytes(), 0, "a piece ends inside a batch");
                }
                pieces.concat()
            }
            ReadData::File(slice) => {
                let mut buf = vec![0u8; slice.length];
                std::os::unix::fs::FileExt::read_exact_at(&*slice.file, &mut buf, slice.position)
                    .expect("file slice readable");
                buf
            }
        };
        assert!(
            !bytes.is_empty(),
            "a non-empty read kind with no bytes at {offset}"
        );
        let mut iter = batch::batches(&bytes);
        let mut first = true;
        for item in iter.by_ref() {
            let (header, range) = item.unwrap_or_else(|e| panic!("batch header at {offset}: {e}"));
            let checked: BatchHeader = batch::validate_batch(&bytes[range.clone()], usize::MAX)
                .unwrap_or_else(|e| {
                    panic!("served batch at {} is invalid: {e}", header.base_offset)
                });
            assert_eq!(checked.base_offset, header.base_offset);
            if first && offset == from {
                assert!(
                    header.base_offset <= from && from <= header.last_offset(),
                    "first batch {}..={} does not hold {from}",
                    header.base_offset,
                    header.last_offset()
                );
            } else {
                assert_eq!(header.base_offset, offset, "batches are contiguous");
            }
            first = false;
            assert!(
                header.last_offset() < hw,
                "served past the high watermark {hw}"
            );
            for record in batch::records(&bytes[range]).expect("records parse") {
                let o = header.base_offset + i64::from(record.offset_delta);
                if o >= from {
                    out.push((
                        o,
                        record.key.map(|k| k.to_vec()),
                        record.value.map(|v| v.to_vec()),
                    ));
                }
            }
            offset = header.last_offset() + 1;
        }
        assert_eq!(iter.remainder_bytes(), 0, "a read ended inside a batch");
    }
    assert_eq!(
        offset.max(from),
        hw.max(from),
        "reads stopped short of the high watermark"
    );
    out
}

/// Reads in every mode and checks they agree.
pub async fn read_both(log: &PartitionLog, from: i64) -> Vec<ReadRecord> {
    let copy = read_checked(log, from, ReadMode::Copy).await;
    let slice = read_checked(log, from, ReadMode::FileSlice).await;
    assert_eq!(copy, slice, "copy and file-slice reads differ");
    let pieces = read_checked(log, from, ReadMode::CachedPiecesOrCopy).await;
    assert_eq!(copy, pieces, "copy and cached-pieces reads differ");
    copy
}

/// Headers and byte positions of the complete, valid batches of a segment file.
pub fn file_batches(path: &std::path::Path) -> Vec<(u64, BatchHeader)> {
    let bytes = std::fs::read(path).expect("segment readable");
    let mut out = Vec::new();
    let mut position = 0usize;
    while position < bytes.len() {
        let Ok(header) = BatchHeader::parse(&bytes[position..]) else {
            break;
        };
        let end = position + header.total_bytes();
        if end > bytes.len() || batch::validate_batch(&bytes[position..end], usize::MAX).is_err() {
            break;
        }
        out.push((position as u64, header));
        position = end;
    }
    out
}

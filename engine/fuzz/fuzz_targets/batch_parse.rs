//! Fuzz the RecordBatch v2 decoders: header parse, the batch iterator,
//! validation, record decoding and every codec's decompressor.
//!
//! Run: `cd engine/fuzz && cargo +nightly fuzz run batch_parse corpus/batch_parse`.
//! The body matches `exercise` in `engine/tests/batch_corpus.rs`, which
//! replays the corpus in CI; keep the two in step.

#![no_main]

use engine::batch::{batches, decompress, records, validate_batch, BatchHeader, Compression};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = BatchHeader::parse(data);
    for codec in Compression::ALL {
        let _ = decompress(codec, data);
    }
    let mut iter = batches(data);
    for item in iter.by_ref() {
        let Ok((header, range)) = item else { break };
        assert_eq!(range.len(), header.total_bytes());
        let batch = &data[range];
        let decoded = records(batch);
        if let Ok(validated) = validate_batch(batch, usize::MAX) {
            assert_eq!(validated, header);
            // Uncompressed records were checked by validation itself, so
            // decoding must agree; compressed ones are only CRC-checked.
            if header.compression() == Ok(Compression::None) {
                let decoded = decoded.expect("validated uncompressed batch must decode");
                assert_eq!(decoded.len(), header.records_count as usize);
            }
        }
    }
    assert!(iter.consumed_bytes() + iter.remainder_bytes() <= data.len());
});

//! Fuzz the RecordBatch v2 decoders: header parse, the batch iterator,
//! validation, record decoding, every codec's decompressor and broker-side
//! recompression.
//!
//! Run: `cd engine/fuzz && cargo +nightly fuzz run batch_parse corpus/batch_parse`.
//! The body matches `exercise` in `engine/tests/batch_corpus.rs`, which
//! replays the corpus in CI; keep the two in step.

#![no_main]

use engine::batch::{
    batches, decompress, records, recompress, validate_batch, BatchHeader, Compression,
    CompressionLevels,
};
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
            // Broker-side recompression: when it takes the batch, the new
            // one validates and holds the same records.
            for target in Compression::ALL {
                if let Ok(rewritten) = recompress(batch, target, &CompressionLevels::default()) {
                    let after = validate_batch(&rewritten, usize::MAX)
                        .expect("a recompressed batch validates");
                    assert_eq!(after.compression(), Ok(target));
                    assert_eq!(records(&rewritten).ok(), records(batch).ok());
                }
            }
        }
    }
    assert!(iter.consumed_bytes() + iter.remainder_bytes() <= data.len());
});

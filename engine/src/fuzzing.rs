//! Entry points for the fuzz targets in `fuzz/` and for the corpus replay
//! test (`engine/tests/fuzz_corpus.rs`): what the broker does with the bytes
//! of a produced record set, run on arbitrary input, with no log and no
//! executor. Nothing here may panic on any input; the assertions are
//! invariants of rill's own code (a batch it rewrote validates again and
//! holds the records it came with), so a failed one is a bug too.

use crate::batch::{
    self, compute_crc, needs_recompression, recompress, records, validate_batch, Compression,
    CompressionLevels, HEADER_BYTES,
};
use crate::log::validated_batches;

/// `max.message.bytes` for the fuzzed appends: Kafka's default. Inputs are
/// far smaller; a larger limit would only let a batch through that the
/// default refuses.
const MAX_MESSAGE_BYTES: usize = 1_048_588;

/// Byte range of the CRC32C in a batch header (see `batch::header`).
const CRC_RANGE: std::ops::Range<usize> = 17..21;

/// The codecs a topic's `compression.type` can name, in attribute order.
const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// Runs a produce payload (`records` of one partition in a Produce
/// request: zero or more record batches) through what the produce path does
/// to it:
///
/// 1. the append's validation as the bytes came (a client's, so control
///    batches are refused);
/// 2. the same on a copy whose batch CRCs are recomputed, so that the
///    fuzzer gets past the CRC32C and into record parsing, decompression
///    and the producer-field checks; once as a client's payload, once as a
///    replica's / the coordinator's (control batches and their markers);
/// 3. for each batch that passed: record decoding (what compaction, replay
///    and internal topics do), and the broker-side recompression of
///    `compression.type` to a codec chosen by the batch's original CRC
///    bits, whose result must validate again and hold the same records.
///
/// Returns how many batches the append accepted (after the CRC fix-up).
pub fn record_batch(data: &[u8]) -> usize {
    let _ = validated_batches(data, MAX_MESSAGE_BYTES, false);

    let (fixed, original_crcs) = with_recomputed_crcs(data);
    let _ = validated_batches(&fixed, MAX_MESSAGE_BYTES, true);
    let Ok(accepted) = validated_batches(&fixed, MAX_MESSAGE_BYTES, false) else {
        return 0;
    };
    let count = accepted.len();
    for (index, (range, header)) in accepted.into_iter().enumerate() {
        let Some(bytes) = fixed.get(range) else {
            panic!("validation accepted a batch outside the payload");
        };
        let decoded = records(bytes);
        if let Ok(list) = &decoded {
            assert_eq!(
                list.len(),
                usize::try_from(header.records_count).unwrap_or(usize::MAX),
                "a validated batch decodes to another record count"
            );
        }
        let pick = original_crcs.get(index).copied().unwrap_or(0);
        let target = CODECS[pick as usize % CODECS.len()];
        if !needs_recompression(&header, target) {
            continue;
        }
        let Ok(rewritten) = recompress(bytes, target, &CompressionLevels::default()) else {
            continue;
        };
        match validate_batch(&rewritten, usize::MAX) {
            Ok(again) => {
                assert_eq!(again.records_count, header.records_count);
                assert_eq!(again.base_offset, header.base_offset);
                assert_eq!(again.producer_id, header.producer_id);
            }
            Err(e) => panic!("a recompressed batch does not validate: {e}"),
        }
        // The rewrite checked the records, so they decode, and to the same.
        match (&decoded, records(&rewritten)) {
            (Ok(before), Ok(after)) => assert_eq!(before, &after, "recompression changed records"),
            (_, Err(e)) => panic!("a recompressed batch's records do not decode: {e}"),
            (Err(_), Ok(_)) => {}
        }
    }
    count
}

/// A copy of `data` with the CRC of every batch that the batch iterator
/// finds rewritten to the right value, and the CRCs as they were.
fn with_recomputed_crcs(data: &[u8]) -> (Vec<u8>, Vec<u32>) {
    let mut fixed = data.to_vec();
    let mut originals = Vec::new();
    let ranges: Vec<_> = batch::batches(data)
        .filter_map(|item| item.ok().map(|(_, range)| range))
        .collect();
    for range in ranges {
        let Some(one) = fixed.get_mut(range) else {
            continue;
        };
        if one.len() < HEADER_BYTES {
            continue;
        }
        let mut crc = [0u8; 4];
        crc.copy_from_slice(&one[CRC_RANGE]);
        originals.push(u32::from_be_bytes(crc));
        let actual = compute_crc(one);
        one[CRC_RANGE].copy_from_slice(&actual.to_be_bytes());
    }
    (fixed, originals)
}

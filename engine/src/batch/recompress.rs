//! Broker-side recompression: one batch rewritten in another codec, as Kafka
//! does when a topic's `compression.type` names a codec other than the one
//! the producer used.
//!
//! The records section is decompressed, checked as an uncompressed batch's
//! records are on produce (the broker now vouches for bytes it built), and
//! compressed again with the topic's codec and level. The header keeps every
//! field but three: `batchLength`, the codec bits of `attributes`, and the
//! CRC32C over the new bytes. Base offset, leader epoch, timestamps,
//! producer id / epoch / base sequence and record count stay, so the
//! idempotence checks and the offset assignment that follow on append see
//! the batch the producer sent.
//!
//! The records themselves are copied byte for byte: a consumer decodes the
//! same keys, values, headers and deltas from either batch.

use std::borrow::Cow;

use super::compression::{compress_with_levels, CompressionLevels};
use super::error::BatchError;
use super::header::{
    attribute, compute_crc, offset, BatchHeader, Compression, HEADER_BYTES, LOG_OVERHEAD_BYTES,
};
use super::records::{check_records, records_section};

/// Whether a batch with `header` must be rewritten for a topic whose
/// `compression.type` is the codec `target`: a data batch whose codec
/// differs. Control batches (transaction markers) are never rewritten,
/// and a batch whose codec bits name no codec is left to validation.
pub fn needs_recompression(header: &BatchHeader, target: Compression) -> bool {
    !header.is_control() && header.compression().is_ok_and(|codec| codec != target)
}

/// The batch at the start of `batch` (exactly one, as validated) rewritten
/// with `target` at `levels`. Fails when the records do not decompress or
/// do not parse as `records_count` records: the producer gets the error of
/// a corrupt batch.
pub fn recompress(
    batch: &[u8],
    target: Compression,
    levels: &CompressionLevels,
) -> Result<Vec<u8>, BatchError> {
    let (header, raw) = records_section(batch)?;
    check_records(&raw, header.records_count, header.last_offset_delta)?;
    let packed: Cow<'_, [u8]> = match target {
        Compression::None => raw,
        codec => Cow::Owned(compress_with_levels(codec, &raw, levels)?),
    };
    let batch_length =
        i32::try_from(HEADER_BYTES - LOG_OVERHEAD_BYTES + packed.len()).map_err(|_| {
            BatchError::TooLarge {
                size_bytes: HEADER_BYTES + packed.len(),
                max_bytes: i32::MAX as usize,
            }
        })?;
    let rewritten = BatchHeader {
        batch_length,
        attributes: (header.attributes & !attribute::COMPRESSION_MASK) | target.attribute_bits(),
        ..header
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + packed.len());
    out.resize(HEADER_BYTES, 0);
    rewritten.write_to(&mut out);
    out.extend_from_slice(&packed);
    let crc = compute_crc(&out);
    out[offset::CRC..offset::ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{records, validate_batch, BatchBuilder};

    /// A transactional producer's batch with keys, values, nulls and
    /// headers, large enough for every codec to shrink it.
    fn sample(codec: Compression) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, codec)
            .producer(42, 3, 1000, true)
            .partition_leader_epoch(-1);
        for n in 0..50i32 {
            let key = format!("key-{}", n % 7);
            let value = format!("value {n} {}", "x".repeat(40));
            let headers: &[(&[u8], Option<&[u8]>)] = &[(b"h", Some(b"v")), (b"null", None)];
            let value = (n % 10 != 9).then_some(value.as_bytes());
            builder.push(
                n,
                1_700_000_000_000 + i64::from(n) * 3,
                Some(key.as_bytes()),
                value,
                headers,
            );
        }
        builder.build().unwrap()
    }

    #[test]
    fn every_codec_pair_round_trips() {
        for source in Compression::ALL {
            let original = sample(source);
            let before = validate_batch(&original, usize::MAX).unwrap();
            for target in Compression::ALL {
                let out = recompress(&original, target, &CompressionLevels::default()).unwrap();
                let after = validate_batch(&out, usize::MAX)
                    .unwrap_or_else(|e| panic!("{source:?} -> {target:?}: {e}"));
                assert_eq!(after.compression(), Ok(target));
                assert_eq!(after.crc, compute_crc(&out), "CRC of the new bytes");
                assert_eq!(after.total_bytes(), out.len());
                // Every field but length, codec bits and CRC is kept.
                let expected = BatchHeader {
                    batch_length: after.batch_length,
                    crc: after.crc,
                    attributes: (before.attributes & !attribute::COMPRESSION_MASK)
                        | target.attribute_bits(),
                    ..before
                };
                assert_eq!(after, expected, "{source:?} -> {target:?}");
                assert!(after.is_transactional());
                assert_eq!(records(&out).unwrap(), records(&original).unwrap());
                if target != Compression::None {
                    assert!(out.len() < sample(Compression::None).len(), "{target:?}");
                }
            }
        }
    }

    #[test]
    fn levels_are_used() {
        let original = sample(Compression::None);
        let at = |zstd| {
            let levels = CompressionLevels {
                zstd,
                ..CompressionLevels::default()
            };
            recompress(&original, Compression::Zstd, &levels).unwrap()
        };
        assert_ne!(at(-100), at(19), "the zstd level reaches the encoder");
        assert_eq!(
            records(&at(-100)).unwrap(),
            records(&at(19)).unwrap(),
            "either level decodes to the same records"
        );
    }

    #[test]
    fn other_attribute_bits_survive() {
        let mut original = sample(Compression::Gzip);
        crate::batch::set_log_append_time(&mut original, 1_800_000_000_000);
        let out = recompress(&original, Compression::Lz4, &CompressionLevels::default()).unwrap();
        let header = validate_batch(&out, usize::MAX).unwrap();
        assert!(header.timestamp_type_log_append());
        assert!(header.is_transactional());
        assert_eq!(header.max_timestamp, 1_800_000_000_000);
    }

    #[test]
    fn control_batches_and_same_codec_are_left_alone() {
        let data = BatchHeader::parse(&sample(Compression::Snappy)).unwrap();
        assert!(!needs_recompression(&data, Compression::Snappy));
        assert!(needs_recompression(&data, Compression::None));
        assert!(needs_recompression(&data, Compression::Zstd));
        let mut builder = BatchBuilder::new(0, Compression::None)
            .producer(1, 0, -1, true)
            .control(true);
        builder.push(0, 0, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 0]), &[]);
        let control = BatchHeader::parse(&builder.build().unwrap()).unwrap();
        assert!(!needs_recompression(&control, Compression::Gzip));
    }

    #[test]
    fn corrupt_records_are_refused_not_rewritten() {
        // A gzip body that does not decompress.
        let mut garbage = sample(Compression::Gzip);
        let last = garbage.len() - 20;
        garbage[HEADER_BYTES + 10..last].fill(0xAB);
        assert!(matches!(
            recompress(&garbage, Compression::None, &CompressionLevels::default()),
            Err(BatchError::Compression { .. })
        ));
        // A well-compressed body whose records do not match the count.
        let mut miscounted = sample(Compression::Zstd);
        let header = BatchHeader::parse(&miscounted).unwrap();
        BatchHeader {
            records_count: 51,
            ..header
        }
        .write_to(&mut miscounted);
        assert!(matches!(
            recompress(&miscounted, Compression::Lz4, &CompressionLevels::default()),
            Err(BatchError::InvalidRecord { .. })
        ));
        // Too short to hold a header.
        assert!(recompress(&[0u8; 10], Compression::Lz4, &CompressionLevels::default()).is_err());
    }
}

//! The produce-path check of one batch ([`validate_batch`]) and the iterator
//! over consecutive batches in a produce payload or a segment slice
//! ([`batches`]).

use std::ops::Range;

use super::error::BatchError;
use super::header::{compute_crc, offset, BatchHeader, Compression, HEADER_BYTES, MAGIC_V2};
use super::records::check_records;

/// Validate exactly one complete batch (`buf.len()` must equal its
/// `total_bytes`) as a broker does on produce, cheapest checks first:
/// magic 2, `batch_length` consistent with `buf`, size within
/// `max_message_bytes`, known codec, CRC32C over attributes..end,
/// `records_count >= 0`, `last_offset_delta == records_count - 1` for
/// non-empty batches, and — for uncompressed batches — records that parse
/// exactly to the end with strictly increasing offset deltas.
///
/// Compressed records are not decompressed here: that costs far more than
/// the append itself, and the CRC already proves the bytes are the ones the
/// producer sent.
pub fn validate_batch(buf: &[u8], max_message_bytes: usize) -> Result<BatchHeader, BatchError> {
    // A batch too short for a header can still carry an old magic byte; say
    // so rather than "incomplete", so v0/v1 producers get the right error.
    if let Some(&magic) = buf.get(offset::MAGIC) {
        if magic as i8 != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic { magic: magic as i8 });
        }
    }
    let header = BatchHeader::parse(buf)?;
    let total_bytes = header.total_bytes();
    if total_bytes > buf.len() {
        return Err(BatchError::Incomplete {
            needed_bytes: total_bytes,
        });
    }
    if total_bytes < buf.len() {
        return Err(BatchError::Corrupt {
            reason: "bytes after the end of the batch",
        });
    }
    if total_bytes > max_message_bytes {
        return Err(BatchError::TooLarge {
            size_bytes: total_bytes,
            max_bytes: max_message_bytes,
        });
    }
    let compression = header.compression()?;
    let actual = compute_crc(buf);
    if actual != header.crc {
        return Err(BatchError::CorruptCrc {
            expected: header.crc,
            actual,
        });
    }
    if header.records_count < 0 {
        return Err(BatchError::Corrupt {
            reason: "negative records count",
        });
    }
    if header.records_count > 0 && header.last_offset_delta != header.records_count - 1 {
        return Err(BatchError::InvalidRecord {
            reason: "last offset delta does not match the records count",
        });
    }
    if header.last_offset_delta < 0 {
        return Err(BatchError::InvalidRecord {
            reason: "negative last offset delta",
        });
    }
    if compression == Compression::None {
        check_records(
            &buf[HEADER_BYTES..],
            header.records_count,
            header.last_offset_delta,
        )?;
    }
    Ok(header)
}

/// Iterator over consecutive complete batches; see [`batches`].
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    buf: &'a [u8],
    position: usize,
    remainder_bytes: usize,
    done: bool,
}

/// Iterate over consecutive complete batches in a produce payload or a log
/// segment slice. Yields each header with the batch's byte range in `buf`.
/// Stops at a trailing incomplete batch (its size is
/// [`BatchIter::remainder_bytes`]); a header that does not parse yields its
/// error once and ends the iteration. Headers are parsed, nothing else is
/// checked: use [`validate_batch`] on each range for that.
pub fn batches(buf: &[u8]) -> BatchIter<'_> {
    BatchIter {
        buf,
        position: 0,
        remainder_bytes: 0,
        done: false,
    }
}

impl BatchIter<'_> {
    /// Bytes of the trailing incomplete batch (0 when there is none, or the
    /// iteration has not reached the end yet).
    pub fn remainder_bytes(&self) -> usize {
        self.remainder_bytes
    }

    /// Bytes of the complete batches yielded so far: where the next batch
    /// starts. After an `Err`, this is where the bad header starts — the
    /// truncation point for recovery.
    pub fn consumed_bytes(&self) -> usize {
        self.position
    }
}

impl Iterator for BatchIter<'_> {
    type Item = Result<(BatchHeader, Range<usize>), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = self.buf.get(self.position..).unwrap_or(&[]);
        if rest.is_empty() {
            self.done = true;
            return None;
        }
        if rest.len() < HEADER_BYTES {
            self.done = true;
            self.remainder_bytes = rest.len();
            return None;
        }
        let header = match BatchHeader::parse(rest) {
            Ok(header) => header,
            Err(error) => {
                self.done = true;
                return Some(Err(error));
            }
        };
        let total_bytes = header.total_bytes();
        if total_bytes > rest.len() {
            self.done = true;
            self.remainder_bytes = rest.len();
            return None;
        }
        let start = self.position;
        self.position += total_bytes;
        Some(Ok((header, start..self.position)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BatchBuilder;

    fn batch(base_offset: i64, compression: Compression, count: i32) -> Vec<u8> {
        let mut builder = BatchBuilder::new(base_offset, compression);
        for delta in 0..count {
            let value = format!("value-{delta}");
            builder.push(
                delta,
                1000 + i64::from(delta),
                Some(b"k"),
                Some(value.as_bytes()),
                &[],
            );
        }
        builder.build().unwrap()
    }

    fn rewrite_crc(buf: &mut [u8]) {
        let crc = compute_crc(buf);
        buf[offset::CRC..offset::ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn valid_batches_pass_for_every_codec() {
        for codec in Compression::ALL {
            let buf = batch(10, codec, 5);
            let header = validate_batch(&buf, 1 << 20).unwrap();
            assert_eq!(header.records_count, 5);
            assert_eq!(header.last_offset(), 14);
            assert_eq!(header.compression(), Ok(codec));
        }
    }

    #[test]
    fn every_byte_in_the_crc_range_is_covered() {
        let buf = batch(0, Compression::None, 3);
        for index in offset::ATTRIBUTES..buf.len() {
            let mut flipped = buf.clone();
            flipped[index] ^= 0x01;
            let error = validate_batch(&flipped, 1 << 20).unwrap_err();
            // Flipping a codec bit can make the codec unknown before the CRC
            // is looked at; everything else must be a CRC mismatch.
            assert!(
                matches!(
                    error,
                    BatchError::CorruptCrc { .. } | BatchError::UnknownCompression { .. }
                ),
                "byte {index}: {error:?}"
            );
        }
        let mut flipped_crc = buf.clone();
        flipped_crc[offset::CRC] ^= 0x80;
        assert!(matches!(
            validate_batch(&flipped_crc, 1 << 20),
            Err(BatchError::CorruptCrc { .. })
        ));
    }

    #[test]
    fn framing_errors() {
        let buf = batch(0, Compression::None, 3);
        let mut wrong_magic = buf.clone();
        wrong_magic[offset::MAGIC] = 1;
        assert_eq!(
            validate_batch(&wrong_magic, 1 << 20),
            Err(BatchError::UnsupportedMagic { magic: 1 })
        );
        assert_eq!(
            validate_batch(&wrong_magic[..30], 1 << 20),
            Err(BatchError::UnsupportedMagic { magic: 1 })
        );
        assert_eq!(
            validate_batch(&buf[..buf.len() - 1], 1 << 20),
            Err(BatchError::Incomplete {
                needed_bytes: buf.len()
            })
        );
        assert!(matches!(
            validate_batch(&buf[..40], 1 << 20),
            Err(BatchError::Incomplete { .. })
        ));
        let mut extra = buf.clone();
        extra.push(0);
        assert!(matches!(
            validate_batch(&extra, 1 << 20),
            Err(BatchError::Corrupt { .. })
        ));
        assert_eq!(
            validate_batch(&buf, buf.len() - 1),
            Err(BatchError::TooLarge {
                size_bytes: buf.len(),
                max_bytes: buf.len() - 1
            })
        );
        assert!(validate_batch(&buf, buf.len()).is_ok());
    }

    #[test]
    fn count_mismatches_are_invalid_records() {
        let buf = batch(0, Compression::None, 3);
        let mut wrong_count = buf.clone();
        wrong_count[offset::RECORDS_COUNT..HEADER_BYTES].copy_from_slice(&2i32.to_be_bytes());
        rewrite_crc(&mut wrong_count);
        assert!(matches!(
            validate_batch(&wrong_count, 1 << 20),
            Err(BatchError::InvalidRecord { .. })
        ));
        // Count and last offset delta agree but the records do not.
        wrong_count[offset::LAST_OFFSET_DELTA..offset::BASE_TIMESTAMP]
            .copy_from_slice(&1i32.to_be_bytes());
        rewrite_crc(&mut wrong_count);
        assert!(matches!(
            validate_batch(&wrong_count, 1 << 20),
            Err(BatchError::InvalidRecord { .. })
        ));
        let mut negative = buf.clone();
        negative[offset::RECORDS_COUNT..HEADER_BYTES].copy_from_slice(&(-1i32).to_be_bytes());
        rewrite_crc(&mut negative);
        assert!(matches!(
            validate_batch(&negative, 1 << 20),
            Err(BatchError::Corrupt { .. })
        ));
        let mut unknown_codec = buf;
        unknown_codec[offset::ATTRIBUTES + 1] |= 0x07;
        rewrite_crc(&mut unknown_codec);
        assert_eq!(
            validate_batch(&unknown_codec, 1 << 20),
            Err(BatchError::UnknownCompression { codec: 7 })
        );
    }

    #[test]
    fn empty_batch_is_valid() {
        let buf = BatchBuilder::new(0, Compression::None).build().unwrap();
        assert_eq!(buf.len(), HEADER_BYTES);
        let header = validate_batch(&buf, 1 << 20).unwrap();
        assert_eq!(header.records_count, 0);
    }

    #[test]
    fn iterator_yields_ranges_and_remainder() {
        let first = batch(0, Compression::None, 2);
        let second = batch(2, Compression::Lz4, 3);
        let mut payload = first.clone();
        payload.extend_from_slice(&second);
        payload.extend_from_slice(&first[..first.len() - 1]);
        let mut iter = batches(&payload);
        let (header, range) = iter.next().unwrap().unwrap();
        assert_eq!((header.base_offset, range.clone()), (0, 0..first.len()));
        let (header, range) = iter.next().unwrap().unwrap();
        assert_eq!(header.base_offset, 2);
        assert_eq!(range, first.len()..first.len() + second.len());
        assert!(iter.next().is_none());
        assert_eq!(iter.remainder_bytes(), first.len() - 1);
        assert_eq!(iter.consumed_bytes(), first.len() + second.len());
        assert!(iter.next().is_none());

        // A short trailing header is a remainder too.
        let mut short_tail = first.clone();
        short_tail.extend_from_slice(&[0u8; 10]);
        let mut iter = batches(&short_tail);
        assert_eq!(iter.by_ref().count(), 1);
        assert_eq!(iter.remainder_bytes(), 10);
        assert_eq!(batches(&[]).count(), 0);
    }

    #[test]
    fn iterator_stops_after_one_error() {
        let mut payload = batch(0, Compression::None, 1);
        let good_bytes = payload.len();
        payload.extend_from_slice(&[0u8; 100]); // a zeroed, preallocated tail
        let mut iter = batches(&payload);
        assert!(iter.next().unwrap().is_ok());
        assert_eq!(
            iter.next(),
            Some(Err(BatchError::UnsupportedMagic { magic: 0 }))
        );
        assert_eq!(iter.consumed_bytes(), good_bytes);
        assert!(iter.next().is_none());
    }
}

//! [`BatchBuilder`]: write a v2 batch from records. Used by tests, compaction,
//! internal topics (offsets, transaction markers) and broker-side
//! recompression — never on the produce path, which stores client bytes.

use super::compression::compress;
use super::error::BatchError;
use super::header::{
    attribute, compute_crc, offset, BatchHeader, Compression, HEADER_BYTES, LOG_OVERHEAD_BYTES,
    MAGIC_V2,
};
use super::records::write_record;

/// Accumulates encoded records, then writes header, codec and CRC in
/// [`BatchBuilder::build`].
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    base_offset: i64,
    compression: Compression,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    /// Encoded records, uncompressed.
    records: Vec<u8>,
    /// Reused body buffer for [`write_record`].
    scratch: Vec<u8>,
    records_count: i32,
    base_timestamp_ms: i64,
    max_timestamp_ms: i64,
    last_offset_delta: i32,
    /// First error met by `push` (which cannot fail), reported by `build`.
    error: Option<BatchError>,
}

impl BatchBuilder {
    /// An empty builder; no producer (id, epoch and sequence -1).
    pub fn new(base_offset: i64, compression: Compression) -> Self {
        BatchBuilder {
            base_offset,
            compression,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            records: Vec::new(),
            scratch: Vec::new(),
            records_count: 0,
            base_timestamp_ms: 0,
            max_timestamp_ms: -1,
            last_offset_delta: 0,
            error: None,
        }
    }

    /// Idempotent / transactional producer identity.
    pub fn producer(
        mut self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        transactional: bool,
    ) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self.transactional = transactional;
        self
    }

    /// Mark as a control batch (transaction markers).
    pub fn control(mut self, is_control: bool) -> Self {
        self.control = is_control;
        self
    }

    /// Leader epoch to stamp (default -1, as a producer sends it).
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Append a record. Offset deltas should increase; the last one pushed
    /// becomes the batch's `last_offset_delta`. A field over i32::MAX bytes
    /// is reported by [`BatchBuilder::build`].
    pub fn push(
        &mut self,
        offset_delta: i32,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
    ) {
        if self.error.is_some() {
            return;
        }
        if self.records_count == 0 {
            self.base_timestamp_ms = timestamp_ms;
        }
        let timestamp_delta = timestamp_ms.wrapping_sub(self.base_timestamp_ms);
        let written = write_record(
            &mut self.records,
            &mut self.scratch,
            offset_delta,
            timestamp_delta,
            key,
            value,
            headers,
        );
        match (written, self.records_count.checked_add(1)) {
            (Ok(()), Some(records_count)) => {
                self.records_count = records_count;
                self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
                self.last_offset_delta = offset_delta;
            }
            (Err(error), _) => self.error = Some(error),
            (_, None) => {
                self.error = Some(BatchError::InvalidRecord {
                    reason: "more than i32::MAX records",
                })
            }
        }
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        // records_count never goes negative.
        usize::try_from(self.records_count).unwrap_or(0)
    }

    /// No record pushed yet.
    pub fn is_empty(&self) -> bool {
        self.records_count == 0
    }

    /// Uncompressed size of the records pushed so far, for callers that cut
    /// batches at a size.
    pub fn records_bytes(&self) -> usize {
        self.records.len()
    }

    /// Write the batch: compress the records, fill the header (base
    /// timestamp = first record's, max timestamp = largest, last offset
    /// delta = last pushed) and the CRC. An empty batch has last offset delta
    /// 0 and max timestamp -1.
    pub fn build(self) -> Result<Vec<u8>, BatchError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let body = match self.compression {
            Compression::None => self.records,
            codec => compress(codec, &self.records)?,
        };
        let batch_length =
            i32::try_from(HEADER_BYTES - LOG_OVERHEAD_BYTES + body.len()).map_err(|_| {
                BatchError::TooLarge {
                    size_bytes: HEADER_BYTES + body.len(),
                    max_bytes: i32::MAX as usize,
                }
            })?;
        let mut attributes = self.compression.attribute_bits();
        if self.transactional {
            attributes |= attribute::TRANSACTIONAL;
        }
        if self.control {
            attributes |= attribute::CONTROL;
        }
        let header = BatchHeader {
            base_offset: self.base_offset,
            batch_length,
            partition_leader_epoch: self.partition_leader_epoch,
            magic: MAGIC_V2,
            crc: 0,
            attributes,
            last_offset_delta: self.last_offset_delta,
            base_timestamp: if self.records_count == 0 {
                -1
            } else {
                self.base_timestamp_ms
            },
            max_timestamp: self.max_timestamp_ms,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
            records_count: self.records_count,
        };
        let mut out = vec![0u8; HEADER_BYTES];
        header.write_to(&mut out);
        out.extend_from_slice(&body);
        let crc = compute_crc(&out);
        out[offset::CRC..offset::ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{records, validate_batch};

    #[test]
    fn header_fields_follow_the_records() {
        let mut builder = BatchBuilder::new(100, Compression::None)
            .producer(7, 2, 30, true)
            .partition_leader_epoch(4);
        assert!(builder.is_empty());
        builder.push(0, 5000, Some(b"a"), Some(b"1"), &[]);
        builder.push(1, 7000, None, Some(b"2"), &[(b"h", None)]);
        builder.push(2, 6000, Some(b"c"), None, &[]);
        assert_eq!(builder.len(), 3);
        assert!(builder.records_bytes() > 0);
        let buf = builder.build().unwrap();
        let header = validate_batch(&buf, 1 << 20).unwrap();
        assert_eq!(header.base_offset, 100);
        assert_eq!(header.partition_leader_epoch, 4);
        assert_eq!(header.base_timestamp, 5000);
        assert_eq!(header.max_timestamp, 7000);
        assert_eq!(header.last_offset_delta, 2);
        assert_eq!(header.records_count, 3);
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (7, 2, 30)
        );
        assert!(header.is_transactional());
        assert!(!header.is_control());
        let decoded = records(&buf).unwrap();
        assert_eq!(decoded[1].timestamp_delta, 2000);
        assert_eq!(decoded[2].timestamp_delta, 1000);
        assert_eq!(decoded[2].value, None);
    }

    #[test]
    fn defaults_and_control() {
        let mut builder = BatchBuilder::new(0, Compression::Gzip).control(true);
        builder.push(0, 1, None, Some(b"marker"), &[]);
        let buf = builder.build().unwrap();
        let header = BatchHeader::parse(&buf).unwrap();
        assert!(header.is_control());
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (-1, -1, -1)
        );
        assert_eq!(header.partition_leader_epoch, -1);
        assert_eq!(header.compression(), Ok(Compression::Gzip));
        assert_eq!(header.crc, compute_crc(&buf));
    }
}

//! Kafka record batch v2 (magic 2) encoding and decoding, written by hand so
//! that producers append records straight into one reusable buffer (no
//! allocation per message) and consumers walk fetched bytes in place.
//!
//! Layout of a batch header (61 bytes), big-endian:
//! `base_offset i64 | batch_length i32 | partition_leader_epoch i32 |
//! magic i8 | crc u32 | attributes i16 | last_offset_delta i32 |
//! base_timestamp i64 | max_timestamp i64 | producer_id i64 |
//! producer_epoch i16 | base_sequence i32 | records_count i32`.
//! The CRC-32C covers everything from `attributes` to the end.

use crate::error::{BenchError, Result};
use crate::workload::Compression;
use bytes::{BufMut, Bytes, BytesMut};
use std::io::{Read, Write};

/// Size of the fixed batch header.
pub const BATCH_HEADER_BYTES: usize = 61;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
const RECORDS_COUNT_OFFSET: usize = 57;

/// Bytes a zig-zag varint of `value` takes.
pub fn varint_len(value: i64) -> usize {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    let mut len = 1;
    while zigzag >= 0x80 {
        zigzag >>= 7;
        len += 1;
    }
    len
}

/// Appends a zig-zag varint.
pub fn put_varint(buf: &mut BytesMut, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        buf.put_u8((zigzag as u8 & 0x7f) | 0x80);
        zigzag >>= 7;
    }
    buf.put_u8(zigzag as u8);
}

/// Reads a zig-zag varint at `*pos`, advancing it. `None` if truncated.
pub fn get_varint(data: &[u8], pos: &mut usize) -> Option<i64> {
    let mut result: u64 = 0;
    let mut shift = 0;
    loop {
        let byte = *data.get(*pos)?;
        *pos += 1;
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
    Some(((result >> 1) as i64) ^ -((result & 1) as i64))
}

/// Builds one record batch for one partition. Reused after [`finish`]:
/// the buffer keeps its capacity.
///
/// [`finish`]: BatchBuilder::finish
/// The attributes bit of a transactional batch.
const TRANSACTIONAL_BIT: i16 = 0x10;

/// A producer's identity in a batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStamp {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
}

pub struct BatchBuilder {
    buf: BytesMut,
    records: i32,
    base_timestamp_ms: i64,
    max_timestamp_ms: i64,
    value_bytes: usize,
}

impl BatchBuilder {
    pub fn new(capacity_bytes: usize) -> Self {
        let mut buf = BytesMut::with_capacity(capacity_bytes + BATCH_HEADER_BYTES);
        buf.put_bytes(0, BATCH_HEADER_BYTES);
        BatchBuilder {
            buf,
            records: 0,
            base_timestamp_ms: 0,
            max_timestamp_ms: 0,
            value_bytes: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    pub fn records(&self) -> i32 {
        self.records
    }

    /// Encoded size so far, header included.
    pub fn size_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Sum of value sizes appended so far (the payload the user asked for).
    pub fn value_bytes(&self) -> usize {
        self.value_bytes
    }

    /// Appends one record whose value is `timestamp_prefix` followed by
    /// `payload` (the two parts avoid assembling the value in a temporary).
    pub fn append(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        timestamp_prefix: &[u8],
        payload: &[u8],
    ) {
        if self.records == 0 {
            self.base_timestamp_ms = timestamp_ms;
        }
        self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
        let timestamp_delta = timestamp_ms - self.base_timestamp_ms;
        let offset_delta = i64::from(self.records);
        let value_len = timestamp_prefix.len() + payload.len();
        let key_len: i64 = key.map_or(-1, |k| k.len() as i64);
        let body_len = 1
            + varint_len(timestamp_delta)
            + varint_len(offset_delta)
            + varint_len(key_len)
            + key.map_or(0, |k| k.len())
            + varint_len(value_len as i64)
            + value_len
            + varint_len(0);
        put_varint(&mut self.buf, body_len as i64);
        self.buf.put_i8(0); // record attributes
        put_varint(&mut self.buf, timestamp_delta);
        put_varint(&mut self.buf, offset_delta);
        put_varint(&mut self.buf, key_len);
        if let Some(key) = key {
            self.buf.put_slice(key);
        }
        put_varint(&mut self.buf, value_len as i64);
        self.buf.put_slice(timestamp_prefix);
        self.buf.put_slice(payload);
        put_varint(&mut self.buf, 0); // no headers
        self.records += 1;
        self.value_bytes += value_len;
    }

    /// Completes the batch (header, optional compression, CRC) and resets the
    /// builder for the next batch.
    pub fn finish(&mut self, compression: Compression) -> Result<Bytes> {
        self.finish_as(compression, None)
    }

    /// [`BatchBuilder::finish`] for an idempotent or transactional
    /// producer: its id, epoch and first sequence in the header.
    pub fn finish_as(
        &mut self,
        compression: Compression,
        producer: Option<ProducerStamp>,
    ) -> Result<Bytes> {
        assert!(self.records > 0, "finish called on an empty batch");
        let mut batch = if compression == Compression::None {
            let batch = self.buf.split();
            self.buf.put_bytes(0, BATCH_HEADER_BYTES);
            batch
        } else {
            let compressed = compress(compression, &self.buf[BATCH_HEADER_BYTES..])?;
            let mut batch = BytesMut::with_capacity(BATCH_HEADER_BYTES + compressed.len());
            batch.put_bytes(0, BATCH_HEADER_BYTES);
            batch.put_slice(&compressed);
            self.buf.truncate(BATCH_HEADER_BYTES);
            batch
        };
        let batch_length = (batch.len() - 12) as i32;
        let header = &mut batch[..BATCH_HEADER_BYTES];
        header[0..8].copy_from_slice(&0i64.to_be_bytes());
        header[8..12].copy_from_slice(&batch_length.to_be_bytes());
        header[12..16].copy_from_slice(&(-1i32).to_be_bytes()); // leader epoch
        header[16] = 2; // magic
        let stamp = producer.unwrap_or(ProducerStamp {
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
        });
        let transactional_bit = if stamp.transactional {
            TRANSACTIONAL_BIT
        } else {
            0
        };
        let attributes = compression.attribute_bits() | transactional_bit;
        header[21..23].copy_from_slice(&attributes.to_be_bytes());
        header[23..27].copy_from_slice(&(self.records - 1).to_be_bytes());
        header[27..35].copy_from_slice(&self.base_timestamp_ms.to_be_bytes());
        header[35..43].copy_from_slice(&self.max_timestamp_ms.to_be_bytes());
        header[43..51].copy_from_slice(&stamp.producer_id.to_be_bytes());
        header[51..53].copy_from_slice(&stamp.producer_epoch.to_be_bytes());
        header[53..57].copy_from_slice(&stamp.base_sequence.to_be_bytes());
        header[57..61].copy_from_slice(&self.records.to_be_bytes());
        let crc = crc_fast::crc32_iscsi(&batch[ATTRIBUTES_OFFSET..]);
        batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        self.records = 0;
        self.value_bytes = 0;
        self.max_timestamp_ms = 0;
        Ok(batch.freeze())
    }
}

fn compress(compression: Compression, records: &[u8]) -> Result<Vec<u8>> {
    let io_error = |error: std::io::Error| BenchError::Protocol(format!("compress: {error}"));
    match compression {
        Compression::None => Ok(records.to_vec()),
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            encoder.write_all(records).map_err(io_error)?;
            encoder.finish().map_err(io_error)
        }
        // Raw snappy block; decoders also accept the xerial framing Java writes.
        Compression::Snappy => snap::raw::Encoder::new()
            .compress_vec(records)
            .map_err(|error| BenchError::Protocol(format!("snappy: {error}"))),
        Compression::Lz4 => {
            let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
            encoder.write_all(records).map_err(io_error)?;
            encoder
                .finish()
                .map_err(|error| BenchError::Protocol(format!("lz4: {error}")))
        }
        Compression::Zstd => zstd::bulk::compress(records, 1).map_err(io_error),
    }
}

fn decompress(codec: i16, data: &[u8]) -> Result<Vec<u8>> {
    let io_error = |error: std::io::Error| BenchError::Protocol(format!("decompress: {error}"));
    let mut out = Vec::with_capacity(data.len() * 4);
    match codec {
        1 => {
            flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .map_err(io_error)?;
        }
        2 => {
            const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
            if data.starts_with(XERIAL_MAGIC) && data.len() >= 16 {
                // xerial framing: 16-byte header, then (len u32, block) chunks.
                let mut pos = 16;
                while pos + 4 <= data.len() {
                    let len = u32::from_be_bytes([
                        data[pos],
                        data[pos + 1],
                        data[pos + 2],
                        data[pos + 3],
                    ]) as usize;
                    pos += 4;
                    let chunk = data.get(pos..pos + len).ok_or_else(|| {
                        BenchError::Protocol("truncated xerial snappy chunk".into())
                    })?;
                    out.extend_from_slice(
                        &snap::raw::Decoder::new()
                            .decompress_vec(chunk)
                            .map_err(|error| BenchError::Protocol(format!("snappy: {error}")))?,
                    );
                    pos += len;
                }
            } else {
                out = snap::raw::Decoder::new()
                    .decompress_vec(data)
                    .map_err(|error| BenchError::Protocol(format!("snappy: {error}")))?;
            }
        }
        3 => {
            lz4_flex::frame::FrameDecoder::new(data)
                .read_to_end(&mut out)
                .map_err(io_error)?;
        }
        4 => {
            zstd::stream::read::Decoder::new(data)
                .map_err(io_error)?
                .read_to_end(&mut out)
                .map_err(io_error)?;
        }
        other => {
            return Err(BenchError::Protocol(format!(
                "unknown compression codec {other}"
            )))
        }
    }
    Ok(out)
}

/// What [`walk_batches`] found in a fetched `records` field.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WalkSummary {
    pub records: u64,
    pub value_bytes: u64,
    /// Offset to fetch next; `None` if no complete batch was present.
    pub next_offset: Option<i64>,
}

/// Walks every complete batch in `data` (a fetch may end with a partial
/// batch, which is expected and skipped), checks each CRC, and calls
/// `on_value` with each record value at an offset `>= min_offset` (a broker
/// may return the whole batch that holds the offset asked for). Control
/// batches are skipped.
pub fn walk_batches(
    data: &[u8],
    min_offset: i64,
    mut on_value: impl FnMut(&[u8]),
) -> Result<WalkSummary> {
    walk_batch_records(data, min_offset, |record| {
        if let Some(value) = record.value {
            on_value(value);
        }
    })
}

/// One record of a fetched batch, borrowed from the fetch buffer (or from
/// the batch's decompressed body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset: i64,
    pub timestamp_ms: i64,
    /// `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// `None` for a null value (a tombstone).
    pub value: Option<&'a [u8]>,
}

/// [`walk_batches`] handing over whole records (offset, timestamp, key,
/// value): what a console consumer prints (`rill admin topic consume`).
pub fn walk_batch_records(
    data: &[u8],
    min_offset: i64,
    mut on_record: impl FnMut(RecordView<'_>),
) -> Result<WalkSummary> {
    let mut summary = WalkSummary::default();
    let mut pos = 0;
    while pos + BATCH_HEADER_BYTES <= data.len() {
        let header = &data[pos..];
        let base_offset = i64::from_be_bytes(header[0..8].try_into().map_err(|_| truncated())?);
        let batch_length = i32::from_be_bytes(header[8..12].try_into().map_err(|_| truncated())?);
        let batch_end = pos + 12 + batch_length.max(0) as usize;
        if batch_length < (BATCH_HEADER_BYTES - 12) as i32 {
            return Err(BenchError::Protocol(format!(
                "batch length {batch_length} too small"
            )));
        }
        if batch_end > data.len() {
            break; // partial trailing batch
        }
        let batch = &data[pos..batch_end];
        if batch[16] != 2 {
            return Err(BenchError::Protocol(format!(
                "unsupported magic {}",
                batch[16]
            )));
        }
        let crc_stored = u32::from_be_bytes(
            batch[CRC_OFFSET..CRC_OFFSET + 4]
                .try_into()
                .map_err(|_| truncated())?,
        );
        let crc_computed = crc_fast::crc32_iscsi(&batch[ATTRIBUTES_OFFSET..]);
        if crc_stored != crc_computed {
            return Err(BenchError::Protocol(format!(
                "CRC mismatch in batch at offset {base_offset}: stored {crc_stored:#x}, computed {crc_computed:#x}"
            )));
        }
        let attributes = i16::from_be_bytes([batch[21], batch[22]]);
        let last_offset_delta =
            i32::from_be_bytes(batch[23..27].try_into().map_err(|_| truncated())?);
        let count = i32::from_be_bytes(
            batch[RECORDS_COUNT_OFFSET..61]
                .try_into()
                .map_err(|_| truncated())?,
        );
        summary.next_offset = Some(base_offset + i64::from(last_offset_delta) + 1);
        let is_control = attributes & 0x20 != 0;
        if !is_control {
            let codec = attributes & 0x07;
            let body = &batch[BATCH_HEADER_BYTES..];
            let base = BatchBase {
                offset: base_offset,
                timestamp_ms: i64::from_be_bytes(
                    batch[27..35].try_into().map_err(|_| truncated())?,
                ),
                count,
            };
            if codec == 0 {
                walk_records(body, base, min_offset, &mut summary, &mut on_record)?;
            } else {
                let plain = decompress(codec, body)?;
                walk_records(&plain, base, min_offset, &mut summary, &mut on_record)?;
            }
        }
        pos = batch_end;
    }
    Ok(summary)
}

fn truncated() -> BenchError {
    BenchError::Protocol("truncated record batch".into())
}

/// What the records of one batch need from its header.
#[derive(Clone, Copy)]
struct BatchBase {
    offset: i64,
    timestamp_ms: i64,
    count: i32,
}

fn walk_records(
    body: &[u8],
    base: BatchBase,
    min_offset: i64,
    summary: &mut WalkSummary,
    on_record: &mut impl FnMut(RecordView<'_>),
) -> Result<()> {
    let mut pos = 0;
    for _ in 0..base.count {
        let len = get_varint(body, &mut pos).ok_or_else(truncated)?;
        let record_end = pos + len.max(0) as usize;
        if record_end > body.len() {
            return Err(truncated());
        }
        let mut cursor = pos + 1; // skip attributes
        let timestamp_delta = get_varint(body, &mut cursor).ok_or_else(truncated)?;
        let offset_delta = get_varint(body, &mut cursor).ok_or_else(truncated)?;
        if base.offset + offset_delta < min_offset {
            pos = record_end;
            continue;
        }
        let key = length_prefixed(body, &mut cursor)?;
        let value = length_prefixed(body, &mut cursor)?;
        summary.value_bytes += value.map_or(0, |v| v.len() as u64);
        on_record(RecordView {
            offset: base.offset + offset_delta,
            timestamp_ms: base.timestamp_ms + timestamp_delta,
            key,
            value,
        });
        summary.records += 1;
        pos = record_end;
    }
    Ok(())
}

/// A varint length and that many bytes at `*cursor`; a negative length is
/// a null.
fn length_prefixed<'a>(body: &'a [u8], cursor: &mut usize) -> Result<Option<&'a [u8]>> {
    let len = get_varint(body, cursor).ok_or_else(truncated)?;
    if len < 0 {
        return Ok(None);
    }
    let bytes = body
        .get(*cursor..*cursor + len as usize)
        .ok_or_else(truncated)?;
    *cursor += len as usize;
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for value in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut buf = BytesMut::new();
            put_varint(&mut buf, value);
            assert_eq!(buf.len(), varint_len(value), "{value}");
            let mut pos = 0;
            assert_eq!(get_varint(&buf, &mut pos), Some(value));
            assert_eq!(pos, buf.len());
        }
    }

    fn build(compression: Compression) -> Bytes {
        let mut builder = BatchBuilder::new(4096);
        for i in 0..10u64 {
            let key = i.to_be_bytes();
            builder.append(
                1_000 + i as i64,
                (i % 2 == 0).then_some(&key[..]),
                &i.to_be_bytes(),
                b"payload-payload",
            );
        }
        assert_eq!(builder.records(), 10);
        assert_eq!(builder.value_bytes(), 10 * 23);
        builder.finish(compression).unwrap()
    }

    #[test]
    fn batches_round_trip_with_every_codec() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = build(compression);
            let mut prefixes = Vec::new();
            let summary = walk_batches(&batch, 0, |value| {
                prefixes.push(u64::from_be_bytes(value[..8].try_into().unwrap()));
                assert_eq!(&value[8..], b"payload-payload");
            })
            .unwrap();
            assert_eq!(summary.records, 10, "{compression:?}");
            assert_eq!(summary.next_offset, Some(10));
            assert_eq!(prefixes, (0..10).collect::<Vec<_>>());
        }
    }

    #[test]
    fn matches_kafka_protocol_decoder() {
        // Cross-check our encoder against the kafka-protocol crate's decoder.
        let mut batch = build(Compression::None);
        let records = kafka_protocol::records::RecordBatchDecoder::decode(&mut batch)
            .unwrap()
            .records;
        assert_eq!(records.len(), 10);
        assert_eq!(records[3].timestamp, 1_003);
        assert_eq!(records[3].offset, 3);
        assert!(records[3].key.is_none());
        assert_eq!(records[4].key.as_deref(), Some(&4u64.to_be_bytes()[..]));
    }

    #[test]
    fn builder_is_reusable_and_partial_batches_are_skipped() {
        let mut builder = BatchBuilder::new(1024);
        builder.append(1, None, &[0; 8], b"a");
        let first = builder.finish(Compression::None).unwrap();
        assert!(builder.is_empty());
        builder.append(2, None, &[0; 8], b"b");
        let second = builder.finish(Compression::None).unwrap();
        let mut both = BytesMut::new();
        both.put_slice(&first);
        both.put_slice(&second[..second.len() - 3]); // truncated second batch
        let summary = walk_batches(&both, 0, |_| {}).unwrap();
        assert_eq!(summary.records, 1);
        assert_eq!(summary.next_offset, Some(1));
    }

    #[test]
    fn records_below_min_offset_are_skipped() {
        let batch = build(Compression::None);
        let summary = walk_batches(&batch, 7, |_| {}).unwrap();
        assert_eq!(summary.records, 3);
        assert_eq!(summary.next_offset, Some(10));
    }

    #[test]
    fn whole_records_carry_offset_timestamp_key_and_value() {
        for compression in [Compression::None, Compression::Zstd] {
            let mut builder = BatchBuilder::new(1024);
            builder.append(1_000, Some(b"k1"), b"", b"v1");
            builder.append(1_005, None, b"", b"v2");
            let batch = builder.finish(compression).unwrap();
            let mut seen = Vec::new();
            walk_batch_records(&batch, 0, |r| {
                seen.push((
                    r.offset,
                    r.timestamp_ms,
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                ));
            })
            .unwrap();
            assert_eq!(
                seen,
                vec![
                    (0, 1_000, Some(b"k1".to_vec()), Some(b"v1".to_vec())),
                    (1, 1_005, None, Some(b"v2".to_vec())),
                ]
            );
        }
    }

    #[test]
    fn corrupted_batch_is_rejected() {
        let batch = build(Compression::None);
        let mut corrupt = BytesMut::from(&batch[..]);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert!(walk_batches(&corrupt, 0, |_| {}).is_err());
    }
}

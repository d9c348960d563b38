//! The records inside a batch: decode ([`records`]), the allocation-free walk
//! the produce path uses to check uncompressed batches, and encode (used by
//! [`super::BatchBuilder`]) side by side.
//!
//! One record:
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
//! keyLength varint (-1 null) | key | valueLength varint (-1 null) | value
//! headersCount varint | [keyLength varint | key | valueLength varint (-1 null) | value]*
//! ```

use std::borrow::Cow;
use std::ops::Range;

use bytes::Bytes;

use super::compression::decompress;
use super::error::BatchError;
use super::header::{BatchHeader, Compression, HEADER_BYTES};
use super::record_walk::records_fit;
use super::varint::{read_varint, read_varlong, write_varint, write_varlong};

/// The smallest possible record: length, attributes, timestampDelta,
/// offsetDelta, keyLength, valueLength, headersCount — one byte each. Bounds
/// up-front allocations by what the bytes can actually hold.
const MIN_RECORD_BYTES: usize = 7;

/// One decoded record. Keys, values and headers share the batch's (or the
/// decompressed buffer's) allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Offset relative to the batch's base offset.
    pub offset_delta: i32,
    /// Timestamp relative to the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Record key; `None` is Kafka's null key.
    pub key: Option<Bytes>,
    /// Record value; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// Header keys (never null) and values (nullable), in order.
    pub headers: Vec<(Bytes, Option<Bytes>)>,
    /// Record attributes; unused by Kafka so far, kept as sent.
    pub attributes: i8,
}

/// Byte ranges of one record's fields within the records buffer.
#[derive(Debug)]
pub(crate) struct RecordSpan {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub attributes: i8,
    pub key: Option<Range<usize>>,
    pub value: Option<Range<usize>>,
}

/// A header's key range and nullable value range.
pub(crate) type HeaderSpan = (Range<usize>, Option<Range<usize>>);

fn invalid(reason: &'static str) -> BatchError {
    BatchError::InvalidRecord { reason }
}

/// Read a length-prefixed byte field; `-1` is null.
fn read_nullable(buf: &[u8], position: &mut usize) -> Result<Option<Range<usize>>, BatchError> {
    let length = read_varint(buf, position)?;
    if length == -1 {
        return Ok(None);
    }
    let length = usize::try_from(length).map_err(|_| invalid("negative field length"))?;
    let start = *position;
    let end = start
        .checked_add(length)
        .filter(|end| *end <= buf.len())
        .ok_or(invalid("field runs past the end of its record"))?;
    *position = end;
    Ok(Some(start..end))
}

/// Read one record at `*position`, never looking past its declared length.
/// Header ranges go to `headers` when given; otherwise they are only checked.
pub(crate) fn read_record(
    buf: &[u8],
    position: &mut usize,
    mut headers: Option<&mut Vec<HeaderSpan>>,
) -> Result<RecordSpan, BatchError> {
    let length = read_varint(buf, position)?;
    let length = usize::try_from(length).map_err(|_| invalid("negative record length"))?;
    let end = position
        .checked_add(length)
        .filter(|end| *end <= buf.len())
        .ok_or(invalid("record runs past the end of the records"))?;
    // Every read below sees only this record's bytes.
    let body = &buf[..end];
    let attributes = *body
        .get(*position)
        .ok_or(invalid("record too short for its attributes"))? as i8;
    *position += 1;
    let timestamp_delta = read_varlong(body, position)?;
    let offset_delta = read_varint(body, position)?;
    let key = read_nullable(body, position)?;
    let value = read_nullable(body, position)?;
    let headers_count = read_varint(body, position)?;
    if headers_count < 0 {
        return Err(invalid("negative header count"));
    }
    // Each header needs at least two bytes, so a huge count fails on the
    // record's own bytes long before the loop could run away.
    for _ in 0..headers_count {
        let header_key = read_nullable(body, position)?.ok_or(invalid("null header key"))?;
        let header_value = read_nullable(body, position)?;
        if let Some(headers) = headers.as_deref_mut() {
            headers.push((header_key, header_value));
        }
    }
    if *position != end {
        return Err(invalid("record length does not match its fields"));
    }
    Ok(RecordSpan {
        offset_delta,
        timestamp_delta,
        attributes,
        key,
        value,
    })
}

/// Walk `records_count` records that must fill `buf` exactly, with offset
/// deltas strictly increasing from >= 0 and none above `last_offset_delta`.
/// Allocates nothing: this is the produce-path check of uncompressed batches.
/// The fast walk answers for well-formed batches; the slow one says what is
/// wrong with the rest (and has the last word).
pub(crate) fn check_records(
    buf: &[u8],
    records_count: i32,
    last_offset_delta: i32,
) -> Result<(), BatchError> {
    if records_fit(buf, records_count, last_offset_delta) {
        return Ok(());
    }
    check_records_slowly(buf, records_count, last_offset_delta)
}

/// [`check_records`] one field at a time, with the reason for a refusal.
#[cold]
pub(crate) fn check_records_slowly(
    buf: &[u8],
    records_count: i32,
    last_offset_delta: i32,
) -> Result<(), BatchError> {
    let mut position = 0;
    let mut previous_offset_delta = -1i32;
    for _ in 0..records_count {
        let record = read_record(buf, &mut position, None)?;
        if record.offset_delta <= previous_offset_delta {
            return Err(invalid("offset deltas are not strictly increasing"));
        }
        if record.offset_delta > last_offset_delta {
            return Err(invalid("offset delta beyond the batch's last offset delta"));
        }
        previous_offset_delta = record.offset_delta;
    }
    if position != buf.len() {
        return Err(invalid("bytes left after the last record"));
    }
    Ok(())
}

/// Decode exactly `records_count` records that fill `data`.
pub(crate) fn parse_records(data: &Bytes, records_count: i32) -> Result<Vec<Record>, BatchError> {
    let count = usize::try_from(records_count).map_err(|_| BatchError::Corrupt {
        reason: "negative records count",
    })?;
    let mut out = Vec::with_capacity(count.min(data.len() / MIN_RECORD_BYTES));
    let mut position = 0;
    let mut header_spans = Vec::new();
    for _ in 0..count {
        header_spans.clear();
        let span = read_record(data, &mut position, Some(&mut header_spans))?;
        out.push(Record {
            offset_delta: span.offset_delta,
            timestamp_delta: span.timestamp_delta,
            key: span.key.map(|range| data.slice(range)),
            value: span.value.map(|range| data.slice(range)),
            headers: header_spans
                .drain(..)
                .map(|(key, value)| (data.slice(key), value.map(|range| data.slice(range))))
                .collect(),
            attributes: span.attributes,
        });
    }
    if position != data.len() {
        return Err(invalid("bytes left after the last record"));
    }
    Ok(out)
}

/// Decompress if needed and decode every record of one batch. `batch` must
/// start with the batch; bytes past its `batch_length` are ignored. The CRC
/// is not checked here: see [`super::validate_batch`].
pub fn records(batch: &[u8]) -> Result<Vec<Record>, BatchError> {
    let (header, section) = records_section(batch)?;
    let data = match section {
        Cow::Borrowed(raw) => Bytes::copy_from_slice(raw),
        Cow::Owned(raw) => Bytes::from(raw),
    };
    parse_records(&data, header.records_count)
}

/// The batch's header and its records section, decompressed (borrowed
/// from `batch` when it is not compressed). Bytes past `batch_length` are
/// ignored; the CRC is not checked.
pub(crate) fn records_section(batch: &[u8]) -> Result<(BatchHeader, Cow<'_, [u8]>), BatchError> {
    let header = BatchHeader::parse(batch)?;
    let total_bytes = header.total_bytes();
    let body = batch
        .get(HEADER_BYTES..total_bytes)
        .ok_or(BatchError::Incomplete {
            needed_bytes: total_bytes,
        })?;
    let section = match header.compression()? {
        Compression::None => Cow::Borrowed(body),
        codec => Cow::Owned(decompress(codec, body)?),
    };
    Ok((header, section))
}

fn field_length(length: usize) -> Result<i32, BatchError> {
    i32::try_from(length).map_err(|_| invalid("field longer than i32::MAX bytes"))
}

fn write_nullable(out: &mut Vec<u8>, field: Option<&[u8]>) -> Result<(), BatchError> {
    match field {
        None => write_varint(out, -1),
        Some(bytes) => {
            write_varint(out, field_length(bytes.len())?);
            out.extend_from_slice(bytes);
        }
    }
    Ok(())
}

/// Append one encoded record to `out`; `scratch` is reused for the body so
/// its length can be written first.
pub(crate) fn write_record(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&[u8], Option<&[u8]>)],
) -> Result<(), BatchError> {
    scratch.clear();
    scratch.push(0); // attributes: unused by Kafka
    write_varlong(scratch, timestamp_delta);
    write_varint(scratch, offset_delta);
    write_nullable(scratch, key)?;
    write_nullable(scratch, value)?;
    write_varint(scratch, field_length(headers.len())?);
    for (header_key, header_value) in headers {
        write_nullable(scratch, Some(header_key))?;
        write_nullable(scratch, *header_value)?;
    }
    write_varint(out, field_length(scratch.len())?);
    out.extend_from_slice(scratch);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (offset delta, timestamp delta, key, value)
    type TestRecord<'a> = (i32, i64, Option<&'a [u8]>, Option<&'a [u8]>);

    fn encode(records: &[TestRecord<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        for (offset_delta, timestamp_delta, key, value) in records {
            let headers: &[(&[u8], Option<&[u8]>)] = &[(b"h", Some(b"v")), (b"n", None)];
            write_record(
                &mut out,
                &mut scratch,
                *offset_delta,
                *timestamp_delta,
                *key,
                *value,
                headers,
            )
            .unwrap();
        }
        out
    }

    #[test]
    fn known_record_bytes() {
        // Kafka's encoding of a record with key "k", value "v", no headers,
        // offsetDelta 1, timestampDelta 2.
        let mut out = Vec::new();
        write_record(&mut out, &mut Vec::new(), 1, 2, Some(b"k"), Some(b"v"), &[]).unwrap();
        assert_eq!(out, [16, 0, 4, 2, 2, b'k', 2, b'v', 0]);
    }

    #[test]
    fn encode_then_parse() {
        let raw = encode(&[(0, 5, Some(b"key"), Some(b"value")), (1, -3, None, None)]);
        let parsed = parse_records(&Bytes::from(raw.clone()), 2).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].key.as_deref(), Some(&b"key"[..]));
        assert_eq!(parsed[0].value.as_deref(), Some(&b"value"[..]));
        assert_eq!(parsed[0].timestamp_delta, 5);
        assert_eq!(parsed[1].key, None);
        assert_eq!(parsed[1].value, None);
        assert_eq!(parsed[1].offset_delta, 1);
        assert_eq!(parsed[1].timestamp_delta, -3);
        assert_eq!(
            parsed[1].headers,
            vec![
                (Bytes::from_static(b"h"), Some(Bytes::from_static(b"v"))),
                (Bytes::from_static(b"n"), None)
            ]
        );
        assert_eq!(check_records(&raw, 2, 1), Ok(()));
    }

    #[test]
    fn count_and_length_mismatches_are_invalid() {
        let raw = encode(&[(0, 0, Some(b"a"), Some(b"b")), (1, 0, None, Some(b"c"))]);
        let data = Bytes::from(raw.clone());
        assert!(matches!(
            parse_records(&data, 1),
            Err(BatchError::InvalidRecord { .. })
        ));
        assert!(matches!(
            parse_records(&data, 3),
            Err(BatchError::InvalidRecord { .. })
        ));
        assert!(matches!(
            parse_records(&data, -1),
            Err(BatchError::Corrupt { .. })
        ));
        assert!(check_records(&raw[..raw.len() - 1], 2, 1).is_err());
        // A record whose declared length is one byte too long.
        let mut stretched = raw.clone();
        stretched[0] += 2; // zigzag: +1 byte
        assert!(check_records(&stretched, 2, 1).is_err());
    }

    #[test]
    fn offset_deltas_must_increase_and_stay_in_range() {
        let repeated = encode(&[(0, 0, None, None), (0, 0, None, None)]);
        assert!(check_records(&repeated, 2, 1).is_err());
        let decreasing = encode(&[(1, 0, None, None), (0, 0, None, None)]);
        assert!(check_records(&decreasing, 2, 1).is_err());
        let beyond = encode(&[(0, 0, None, None), (2, 0, None, None)]);
        assert!(check_records(&beyond, 2, 1).is_err());
        let negative = encode(&[(-1, 0, None, None)]);
        assert!(check_records(&negative, 1, 0).is_err());
    }

    #[test]
    fn negative_lengths_are_refused() {
        // length 4: attributes 0, ts 0, offset 0, key length -2.
        let bad_key = [8u8, 0, 0, 0, 3];
        assert!(check_records(&bad_key, 1, 0).is_err());
        // Negative record length.
        assert!(check_records(&[1u8], 1, 0).is_err());
        // Null header key: one header whose key length is -1.
        let null_header_key = [16u8, 0, 0, 0, 1, 1, 2, 1, 1];
        assert!(check_records(&null_header_key, 1, 0).is_err());
    }
}

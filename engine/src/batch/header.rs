//! The fixed 61-byte RecordBatch v2 header, the codec bits, CRC32C, and the
//! in-place writes a broker makes when it appends a batch.
//!
//! Layout (big-endian), with byte offsets:
//!
//! ```text
//!  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
//! 17 crc u32 | 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64
//! 35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16
//! 53 baseSequence i32 | 57 recordsCount i32 | 61 records...
//! ```
//!
//! The CRC covers bytes 21..end, so the broker can assign the base offset and
//! leader epoch (bytes 0..16) without recomputing it.

use super::error::BatchError;

/// Size of the RecordBatch v2 header, log overhead included.
pub const HEADER_BYTES: usize = 61;
/// baseOffset + batchLength: the bytes not counted by `batchLength`.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The only message format rill stores.
pub const MAGIC_V2: i8 = 2;

/// Byte offsets of the header fields.
pub(crate) mod offset {
    pub const BASE_OFFSET: usize = 0;
    pub const BATCH_LENGTH: usize = 8;
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const BASE_TIMESTAMP: usize = 27;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORDS_COUNT: usize = 57;
}

/// Smallest legal `batchLength`: a header with no records.
pub const MIN_BATCH_LENGTH: i32 = (HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32;

/// Attribute bits.
pub(crate) mod attribute {
    pub const COMPRESSION_MASK: i16 = 0x07;
    pub const TIMESTAMP_TYPE_LOG_APPEND: i16 = 0x08;
    pub const TRANSACTIONAL: i16 = 0x10;
    pub const CONTROL: i16 = 0x20;
    pub const DELETE_HORIZON: i16 = 0x40;
}

/// The record codec of a batch (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Records stored as is.
    None,
    /// gzip (RFC 1952).
    Gzip,
    /// snappy; xerial-framed when written by Java clients.
    Snappy,
    /// lz4 frame format.
    Lz4,
    /// zstd frame.
    Zstd,
}

impl Compression {
    /// Every codec, for tests and benchmarks that sweep them.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec named by the low three bits of a batch's attributes.
    pub fn from_attributes(attributes: i16) -> Result<Self, BatchError> {
        match attributes & attribute::COMPRESSION_MASK {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            codec => Err(BatchError::UnknownCompression { codec }),
        }
    }

    /// The attribute bits that select this codec.
    pub fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The codec for a Kafka `compression.type` value; `None` for
    /// unknown names and for `producer`, which means "keep what came in".
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" | "uncompressed" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// Kafka's name for the codec.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// The decoded 61-byte header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record; assigned by the broker on append.
    pub base_offset: i64,
    /// Bytes after the `batch_length` field.
    pub batch_length: i32,
    /// Leader epoch at append; assigned by the broker.
    pub partition_leader_epoch: i32,
    /// Message format; always [`MAGIC_V2`] once parsed.
    pub magic: i8,
    /// CRC32C over attributes..end.
    pub crc: u32,
    /// Codec, timestamp type, transactional, control, delete horizon bits.
    pub attributes: i16,
    /// Offset of the last record relative to `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest record timestamp (or the append time with LogAppendTime).
    pub max_timestamp: i64,
    /// Idempotent producer id, -1 if none.
    pub producer_id: i64,
    /// Idempotent producer epoch, -1 if none.
    pub producer_epoch: i16,
    /// Sequence of the first record, -1 if none.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub records_count: i32,
}

/// The first [`HEADER_BYTES`] of `buf` as a fixed-size array, if present.
fn header_array(buf: &[u8]) -> Option<&[u8; HEADER_BYTES]> {
    buf.get(..HEADER_BYTES)
        .and_then(|head| head.try_into().ok())
}

// The readers below take a fixed-size array and constant offsets, so their
// slicing cannot fail for any input; the array type carries the bound.
fn read_i16(head: &[u8; HEADER_BYTES], at: usize) -> i16 {
    let mut bytes = [0u8; 2];
    bytes.copy_from_slice(&head[at..at + 2]);
    i16::from_be_bytes(bytes)
}

fn read_i32(head: &[u8; HEADER_BYTES], at: usize) -> i32 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(&head[at..at + 4]);
    i32::from_be_bytes(bytes)
}

fn read_i64(head: &[u8; HEADER_BYTES], at: usize) -> i64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&head[at..at + 8]);
    i64::from_be_bytes(bytes)
}

impl BatchHeader {
    /// Decode the header at the start of `buf`.
    ///
    /// Needs at least [`HEADER_BYTES`] (else `Incomplete`), magic 2 (else
    /// `UnsupportedMagic`) and a `batch_length` that at least covers the
    /// header (else `Corrupt`). Does not check the CRC: see
    /// [`super::validate_batch`].
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        let head = header_array(buf).ok_or(BatchError::Incomplete {
            needed_bytes: HEADER_BYTES,
        })?;
        let magic = head[offset::MAGIC] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic { magic });
        }
        let batch_length = read_i32(head, offset::BATCH_LENGTH);
        if batch_length < MIN_BATCH_LENGTH {
            return Err(BatchError::Corrupt {
                reason: "batch length shorter than the batch header",
            });
        }
        Ok(BatchHeader {
            base_offset: read_i64(head, offset::BASE_OFFSET),
            batch_length,
            partition_leader_epoch: read_i32(head, offset::PARTITION_LEADER_EPOCH),
            magic,
            crc: read_i32(head, offset::CRC) as u32,
            attributes: read_i16(head, offset::ATTRIBUTES),
            last_offset_delta: read_i32(head, offset::LAST_OFFSET_DELTA),
            base_timestamp: read_i64(head, offset::BASE_TIMESTAMP),
            max_timestamp: read_i64(head, offset::MAX_TIMESTAMP),
            producer_id: read_i64(head, offset::PRODUCER_ID),
            producer_epoch: read_i16(head, offset::PRODUCER_EPOCH),
            base_sequence: read_i32(head, offset::BASE_SEQUENCE),
            records_count: read_i32(head, offset::RECORDS_COUNT),
        })
    }

    /// Size of the whole batch, log overhead included.
    pub fn total_bytes(&self) -> usize {
        // A parsed header has batch_length >= 49; a hand-built negative one
        // counts as an empty length rather than wrapping.
        usize::try_from(self.batch_length).unwrap_or(0) + LOG_OVERHEAD_BYTES
    }

    /// Offset of the last record (saturating: the base offset of a produced
    /// batch is client garbage until the broker assigns it).
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// The batch's codec.
    pub fn compression(&self) -> Result<Compression, BatchError> {
        Compression::from_attributes(self.attributes)
    }

    /// Part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & attribute::TRANSACTIONAL != 0
    }

    /// A control batch (transaction commit/abort marker).
    pub fn is_control(&self) -> bool {
        self.attributes & attribute::CONTROL != 0
    }

    /// Timestamps are the broker's append time, not the producer's.
    pub fn timestamp_type_log_append(&self) -> bool {
        self.attributes & attribute::TIMESTAMP_TYPE_LOG_APPEND != 0
    }

    /// The base timestamp is a delete horizon (set by compaction).
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & attribute::DELETE_HORIZON != 0
    }

    /// Serialise all 61 header bytes into the start of `buf`. A shorter
    /// buffer is a caller bug: asserted in debug builds, ignored in release.
    pub fn write_to(&self, buf: &mut [u8]) {
        debug_assert!(buf.len() >= HEADER_BYTES, "header buffer too short");
        let Some(head) = buf.get_mut(..HEADER_BYTES) else {
            return;
        };
        head[offset::BASE_OFFSET..offset::BATCH_LENGTH]
            .copy_from_slice(&self.base_offset.to_be_bytes());
        head[offset::BATCH_LENGTH..offset::PARTITION_LEADER_EPOCH]
            .copy_from_slice(&self.batch_length.to_be_bytes());
        head[offset::PARTITION_LEADER_EPOCH..offset::MAGIC]
            .copy_from_slice(&self.partition_leader_epoch.to_be_bytes());
        head[offset::MAGIC] = self.magic as u8;
        head[offset::CRC..offset::ATTRIBUTES].copy_from_slice(&self.crc.to_be_bytes());
        head[offset::ATTRIBUTES..offset::LAST_OFFSET_DELTA]
            .copy_from_slice(&self.attributes.to_be_bytes());
        head[offset::LAST_OFFSET_DELTA..offset::BASE_TIMESTAMP]
            .copy_from_slice(&self.last_offset_delta.to_be_bytes());
        head[offset::BASE_TIMESTAMP..offset::MAX_TIMESTAMP]
            .copy_from_slice(&self.base_timestamp.to_be_bytes());
        head[offset::MAX_TIMESTAMP..offset::PRODUCER_ID]
            .copy_from_slice(&self.max_timestamp.to_be_bytes());
        head[offset::PRODUCER_ID..offset::PRODUCER_EPOCH]
            .copy_from_slice(&self.producer_id.to_be_bytes());
        head[offset::PRODUCER_EPOCH..offset::BASE_SEQUENCE]
            .copy_from_slice(&self.producer_epoch.to_be_bytes());
        head[offset::BASE_SEQUENCE..offset::RECORDS_COUNT]
            .copy_from_slice(&self.base_sequence.to_be_bytes());
        head[offset::RECORDS_COUNT..HEADER_BYTES]
            .copy_from_slice(&self.records_count.to_be_bytes());
    }
}

/// CRC32C over bytes 21..end of one batch (attributes to the last record):
/// the value Kafka stores in the header. Zero-length input past the header
/// start hashes as empty.
pub fn compute_crc(buf: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(buf.get(offset::ATTRIBUTES..).unwrap_or(&[]))
}

/// Write the base offset (bytes 0..8, outside the CRC). No-op on a buffer
/// shorter than a header.
pub fn set_base_offset(buf: &mut [u8], base_offset: i64) {
    debug_assert!(buf.len() >= HEADER_BYTES, "batch buffer too short");
    if buf.len() < HEADER_BYTES {
        return;
    }
    buf[offset::BASE_OFFSET..offset::BATCH_LENGTH].copy_from_slice(&base_offset.to_be_bytes());
}

/// Write the partition leader epoch (bytes 12..16, outside the CRC). No-op
/// on a buffer shorter than a header.
pub fn set_partition_leader_epoch(buf: &mut [u8], epoch: i32) {
    debug_assert!(buf.len() >= HEADER_BYTES, "batch buffer too short");
    if buf.len() < HEADER_BYTES {
        return;
    }
    buf[offset::PARTITION_LEADER_EPOCH..offset::MAGIC].copy_from_slice(&epoch.to_be_bytes());
}

/// Switch a batch to LogAppendTime: set the timestamp-type bit and
/// `max_timestamp`, then recompute and store the CRC (both fields are inside
/// it). `buf` must be exactly one batch. No-op on a buffer shorter than a
/// header.
pub fn set_log_append_time(buf: &mut [u8], timestamp_ms: i64) {
    debug_assert!(buf.len() >= HEADER_BYTES, "batch buffer too short");
    if buf.len() < HEADER_BYTES {
        return;
    }
    let mut attributes_bytes = [0u8; 2];
    attributes_bytes.copy_from_slice(&buf[offset::ATTRIBUTES..offset::LAST_OFFSET_DELTA]);
    let attributes = i16::from_be_bytes(attributes_bytes) | attribute::TIMESTAMP_TYPE_LOG_APPEND;
    buf[offset::ATTRIBUTES..offset::LAST_OFFSET_DELTA].copy_from_slice(&attributes.to_be_bytes());
    buf[offset::MAX_TIMESTAMP..offset::PRODUCER_ID].copy_from_slice(&timestamp_ms.to_be_bytes());
    let crc = compute_crc(buf);
    buf[offset::CRC..offset::ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BatchHeader {
        BatchHeader {
            base_offset: 0x0102_0304_0506_0708,
            batch_length: 200,
            partition_leader_epoch: 7,
            magic: MAGIC_V2,
            crc: 0xdead_beef,
            attributes: Compression::Zstd.attribute_bits() | attribute::TRANSACTIONAL,
            last_offset_delta: 4,
            base_timestamp: 1_700_000_000_000,
            max_timestamp: 1_700_000_000_999,
            producer_id: 42,
            producer_epoch: 3,
            base_sequence: 100,
            records_count: 5,
        }
    }

    #[test]
    fn write_then_parse_round_trips_every_field() {
        let header = sample();
        let mut buf = [0u8; HEADER_BYTES];
        header.write_to(&mut buf);
        assert_eq!(&buf[0..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(buf[offset::MAGIC], 2);
        assert_eq!(BatchHeader::parse(&buf), Ok(header));
        let parsed = BatchHeader::parse(&buf).unwrap();
        assert_eq!(parsed.total_bytes(), 212);
        assert_eq!(parsed.last_offset(), 0x0102_0304_0506_0708 + 4);
        assert_eq!(parsed.compression(), Ok(Compression::Zstd));
        assert!(parsed.is_transactional());
        assert!(!parsed.is_control());
        assert!(!parsed.timestamp_type_log_append());
        assert!(!parsed.has_delete_horizon());
    }

    #[test]
    fn parse_refuses_short_wrong_magic_and_short_length() {
        let mut buf = [0u8; HEADER_BYTES];
        sample().write_to(&mut buf);
        assert_eq!(
            BatchHeader::parse(&buf[..60]),
            Err(BatchError::Incomplete { needed_bytes: 61 })
        );
        let mut wrong_magic = buf;
        wrong_magic[offset::MAGIC] = 1;
        assert_eq!(
            BatchHeader::parse(&wrong_magic),
            Err(BatchError::UnsupportedMagic { magic: 1 })
        );
        let mut short_length = buf;
        short_length[8..12].copy_from_slice(&48i32.to_be_bytes());
        assert!(matches!(
            BatchHeader::parse(&short_length),
            Err(BatchError::Corrupt { .. })
        ));
        short_length[8..12].copy_from_slice(&49i32.to_be_bytes());
        assert_eq!(BatchHeader::parse(&short_length).unwrap().total_bytes(), 61);
    }

    #[test]
    fn compression_bits_and_names() {
        for codec in Compression::ALL {
            assert_eq!(
                Compression::from_attributes(codec.attribute_bits()),
                Ok(codec)
            );
            // Higher attribute bits do not disturb the codec.
            assert_eq!(
                Compression::from_attributes(codec.attribute_bits() | 0x78),
                Ok(codec)
            );
            assert_eq!(Compression::from_name(codec.name()), Some(codec));
        }
        assert_eq!(
            Compression::from_name("uncompressed"),
            Some(Compression::None)
        );
        assert_eq!(Compression::from_name("producer"), None);
        for codec in 5..8 {
            assert_eq!(
                Compression::from_attributes(codec),
                Err(BatchError::UnknownCompression { codec })
            );
        }
    }

    #[test]
    fn in_place_writes_leave_the_crc_range_alone() {
        let mut buf = vec![0u8; HEADER_BYTES + 10];
        sample().write_to(&mut buf);
        let crc_before = compute_crc(&buf);
        set_base_offset(&mut buf, 1234);
        set_partition_leader_epoch(&mut buf, 99);
        assert_eq!(compute_crc(&buf), crc_before);
        let header = BatchHeader::parse(&buf).unwrap();
        assert_eq!(header.base_offset, 1234);
        assert_eq!(header.partition_leader_epoch, 99);
    }

    #[test]
    fn log_append_time_sets_bit_timestamp_and_crc() {
        let mut buf = vec![0u8; HEADER_BYTES + 10];
        sample().write_to(&mut buf);
        set_log_append_time(&mut buf, 1_800_000_000_000);
        let header = BatchHeader::parse(&buf).unwrap();
        assert!(header.timestamp_type_log_append());
        assert!(header.is_transactional(), "other attribute bits kept");
        assert_eq!(header.compression(), Ok(Compression::Zstd));
        assert_eq!(header.max_timestamp, 1_800_000_000_000);
        assert_eq!(header.crc, compute_crc(&buf));
    }

    /// CRC32C bit by bit (reflected polynomial 0x82F63B78): slow, and
    /// plainly the definition, to hold the SIMD crate to it.
    fn crc32c_bitwise(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = (crc >> 1) ^ (0x82F6_3B78 & 0u32.wrapping_sub(crc & 1));
            }
        }
        !crc
    }

    #[test]
    fn crc_is_crc32c_of_attributes_to_end() {
        let buf: Vec<u8> = (0..100u8).collect();
        assert_eq!(compute_crc(&buf), crc32c_bitwise(&buf[21..]));
        assert_eq!(compute_crc(&buf[..5]), crc32c_bitwise(&[]));
        // Known CRC32C check value ("123456789" -> 0xe3069283).
        let mut check = vec![0u8; 21];
        check.extend_from_slice(b"123456789");
        assert_eq!(compute_crc(&check), 0xe306_9283);
    }

    /// Every length up to a few folding blocks and past the SIMD paths'
    /// thresholds, at every start alignment within a cache line: the
    /// folding, its tails and its unaligned heads all agree with the
    /// definition.
    #[test]
    fn crc_matches_the_definition_at_every_length_and_alignment() {
        let bytes: Vec<u8> = (0..20_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let lengths = (0..600).chain((600..20_000 - 64).step_by(97));
        for length in lengths {
            for start in [0, 1, 3, 7, 8, 15, 31, 63] {
                let piece = &bytes[start..start + length];
                assert_eq!(
                    crc_fast::crc32_iscsi(piece),
                    crc32c_bitwise(piece),
                    "length {length}, start {start}"
                );
            }
        }
    }
}

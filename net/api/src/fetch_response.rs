//! Fetch response encoding (Fetch v4 – v16), written by hand.
//!
//! The kafka-protocol crate can only encode `records` from an in-memory
//! `Bytes`; rill serves records straight from segment files (a
//! [`engine::FileSlice`]), so this module writes the framing itself and hands
//! back a list of [`OutChunk`]s: framing bytes (adjacent framing coalesced into
//! one `Bytes`) interleaved with the record payloads, which stay zero-copy
//! (`Bytes` clones or file ranges). A [`kernel::sendpath::Sender`] writes the
//! chunks to the socket in order.
//!
//! Field order and version gates follow Kafka's `FetchResponse.json` (and the
//! kafka-protocol crate's generated `fetch_response.rs`, which the tests use
//! as an oracle). Flexible versions (v12+) use compact arrays/strings/bytes and
//! tagged fields; rill never sets the optional tagged fields (diverging epoch,
//! current leader, snapshot id, node endpoints), so every tagged-field section
//! is the single byte 0.

use bytes::{BufMut, Bytes, BytesMut};
use engine::{ErrorCode, ReadData};

/// Lowest Fetch version this encoder writes.
pub const FETCH_VERSION_MIN: i16 = 4;
/// Highest Fetch version this encoder writes.
pub const FETCH_VERSION_MAX: i16 = 16;
/// First flexible (compact + tagged fields) Fetch version.
const FETCH_VERSION_FLEXIBLE: i16 = 12;

/// One partition's part of a Fetch response.
pub struct FetchPartitionData {
    /// Partition index.
    pub partition_index: i32,
    /// Partition-level error code.
    pub error_code: ErrorCode,
    /// High watermark.
    pub high_watermark: i64,
    /// Last stable offset.
    pub last_stable_offset: i64,
    /// Log start offset (v5+).
    pub log_start_offset: i64,
    /// Aborted transactions as `(producer_id, first_offset)`; `None` is null.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    /// Preferred read replica (v11+), -1 for none.
    pub preferred_read_replica: i32,
    /// Whole record batches to return.
    pub records: ReadData,
}

/// One topic's part of a Fetch response.
pub struct FetchTopicData {
    /// Topic name (written up to v12).
    pub topic: String,
    /// Topic id (written from v13).
    pub topic_id: [u8; 16],
    /// Partitions of this topic.
    pub partitions: Vec<FetchPartitionData>,
}

/// A whole Fetch response body.
pub struct FetchResponseData {
    /// Throttle time in milliseconds.
    pub throttle_time_ms: i32,
    /// Top-level error code (v7+).
    pub error_code: ErrorCode,
    /// Fetch session id (v7+).
    pub session_id: i32,
    /// Topics in the response.
    pub topics: Vec<FetchTopicData>,
}

/// The chunk type the send paths write (the kernel owns them).
pub use kernel::sendpath::OutChunk;

/// Encodes a complete framed Fetch response: the 4-byte size prefix, the
/// response header (correlation id, plus empty tagged fields for flexible
/// versions, i.e. header v1 from Fetch v12) and the body.
///
/// # Panics
///
/// If `api_version` is outside [`FETCH_VERSION_MIN`]..=[`FETCH_VERSION_MAX`]
/// (the caller negotiates versions and must reject others before reading), or
/// if a partition's records are longer than `i32::MAX` bytes (fetch sizes are
/// `i32` in the protocol, so a longer read is an engine bug).
pub fn encode_fetch_response(
    correlation_id: i32,
    api_version: i16,
    data: &FetchResponseData,
) -> Vec<OutChunk> {
    assert!(
        (FETCH_VERSION_MIN..=FETCH_VERSION_MAX).contains(&api_version),
        "unsupported Fetch version {api_version}"
    );
    let flexible = api_version >= FETCH_VERSION_FLEXIBLE;
    let mut out = ChunkWriter::new();
    // Size prefix, patched once the total is known.
    out.framing.put_i32(0);
    out.framing.put_i32(correlation_id);
    if flexible {
        out.framing.put_u8(0); // header tagged fields
    }
    out.framing.put_i32(data.throttle_time_ms);
    if api_version >= 7 {
        out.framing.put_i16(data.error_code.code());
        out.framing.put_i32(data.session_id);
    }
    out.put_array_length(flexible, Some(data.topics.len()));
    for topic in &data.topics {
        encode_topic(&mut out, api_version, topic);
    }
    if flexible {
        out.framing.put_u8(0); // body tagged fields (node_endpoints absent)
    }
    out.finish()
}

/// Sets `throttle_time_ms` in a response [`encode_fetch_response`] made,
/// for a throttle learnt from the encoded size: the field has a fixed place
/// in the head chunk (after the size prefix, the correlation id and, from
/// v12, the header's tagged fields) and a fixed width, so the response is
/// patched rather than encoded again, and its size does not change.
///
/// # Panics
///
/// If `chunks` do not start with the head that [`encode_fetch_response`]
/// writes for `api_version`.
pub fn set_throttle_time(chunks: &mut [OutChunk], api_version: i16, throttle_time_ms: i32) {
    let at = if api_version >= FETCH_VERSION_FLEXIBLE {
        9
    } else {
        8
    };
    let Some(OutChunk::Bytes(head)) = chunks.first_mut() else {
        panic!("an encoded Fetch response starts with its framing");
    };
    assert!(
        head.len() >= at + 4,
        "an encoded Fetch response's head holds its throttle time: {} bytes",
        head.len()
    );
    // The head is framing only (a few hundred bytes): copied, not the records.
    let mut patched = BytesMut::from(&head[..]);
    patched[at..at + 4].copy_from_slice(&throttle_time_ms.to_be_bytes());
    *head = patched.freeze();
}

fn encode_topic(out: &mut ChunkWriter, api_version: i16, topic: &FetchTopicData) {
    let flexible = api_version >= FETCH_VERSION_FLEXIBLE;
    if api_version <= 12 {
        out.put_string(flexible, &topic.topic);
    }
    if api_version >= 13 {
        out.framing.put_slice(&topic.topic_id);
    }
    out.put_array_length(flexible, Some(topic.partitions.len()));
    for partition in &topic.partitions {
        encode_partition(out, api_version, partition);
    }
    if flexible {
        out.framing.put_u8(0);
    }
}

fn encode_partition(out: &mut ChunkWriter, api_version: i16, partition: &FetchPartitionData) {
    let flexible = api_version >= FETCH_VERSION_FLEXIBLE;
    out.framing.put_i32(partition.partition_index);
    out.framing.put_i16(partition.error_code.code());
    out.framing.put_i64(partition.high_watermark);
    out.framing.put_i64(partition.last_stable_offset);
    if api_version >= 5 {
        out.framing.put_i64(partition.log_start_offset);
    }
    let aborted = partition.aborted_transactions.as_deref();
    out.put_array_length(flexible, aborted.map(<[_]>::len));
    for &(producer_id, first_offset) in aborted.unwrap_or_default() {
        out.framing.put_i64(producer_id);
        out.framing.put_i64(first_offset);
        if flexible {
            out.framing.put_u8(0);
        }
    }
    if api_version >= 11 {
        out.framing.put_i32(partition.preferred_read_replica);
    }
    out.put_records(flexible, &partition.records);
    if flexible {
        // diverging_epoch, current_leader and snapshot_id are left absent.
        out.framing.put_u8(0);
    }
}

/// Accumulates framing bytes and splits them around record payloads.
struct ChunkWriter {
    chunks: Vec<OutChunk>,
    framing: BytesMut,
    total_bytes: usize,
    /// The first framing piece, kept mutable so the size prefix can be patched.
    head: Option<BytesMut>,
}

impl ChunkWriter {
    fn new() -> Self {
        Self {
            chunks: Vec::new(),
            framing: BytesMut::with_capacity(256),
            total_bytes: 0,
            head: None,
        }
    }

    fn put_unsigned_varint(&mut self, mut value: u32) {
        while value >= 0x80 {
            self.framing.put_u8((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        self.framing.put_u8(value as u8);
    }

    /// Array length: int32 (-1 = null), or unsigned varint length+1 (0 = null)
    /// in flexible versions.
    fn put_array_length(&mut self, flexible: bool, length: Option<usize>) {
        self.put_length(flexible, length);
    }

    fn put_length(&mut self, flexible: bool, length: Option<usize>) {
        let length = length.map(|length| {
            // Protocol lengths are int32; larger collections cannot be framed.
            assert!(length < i32::MAX as usize, "length {length} too large");
            length as u32
        });
        match (flexible, length) {
            (true, Some(length)) => self.put_unsigned_varint(length + 1),
            (true, None) => self.put_unsigned_varint(0),
            (false, Some(length)) => self.framing.put_i32(length as i32),
            (false, None) => self.framing.put_i32(-1),
        }
    }

    fn put_string(&mut self, flexible: bool, value: &str) {
        if flexible {
            self.put_length(true, Some(value.len()));
        } else {
            assert!(value.len() <= i16::MAX as usize, "string too long");
            self.framing.put_i16(value.len() as i16);
        }
        self.framing.put_slice(value.as_bytes());
    }

    /// Records (nullable bytes): the length prefix is framing, the payload a
    /// chunk of its own (one per piece of a batch-cache read). Empty reads
    /// are sent as empty (not null) records, as Kafka does.
    fn put_records(&mut self, flexible: bool, records: &ReadData) {
        let payload: Vec<OutChunk> = match records {
            ReadData::Empty => Vec::new(),
            ReadData::Bytes(bytes) => vec![OutChunk::Bytes(bytes.clone())],
            ReadData::Pieces(pieces) => pieces.iter().cloned().map(OutChunk::Bytes).collect(),
            ReadData::File(slice) => vec![OutChunk::File(slice.clone())],
        };
        let length: usize = payload.iter().map(OutChunk::len).sum();
        self.put_length(flexible, Some(length));
        if length > 0 {
            self.flush_framing();
            self.total_bytes += length;
            self.chunks
                .extend(payload.into_iter().filter(|chunk| !chunk.is_empty()));
        }
    }

    fn flush_framing(&mut self) {
        if self.framing.is_empty() {
            return;
        }
        let framing = self.framing.split();
        self.total_bytes += framing.len();
        if self.head.is_none() {
            // Placeholder; replaced by the patched head in `finish`.
            self.head = Some(framing);
            self.chunks.push(OutChunk::Bytes(Bytes::new()));
        } else {
            self.chunks.push(OutChunk::Bytes(framing.freeze()));
        }
    }

    fn finish(mut self) -> Vec<OutChunk> {
        self.flush_framing();
        let size = self.total_bytes - 4;
        assert!(
            size <= i32::MAX as usize,
            "response of {size} bytes too large"
        );
        if let Some(mut head) = self.head.take() {
            head[..4].copy_from_slice(&(size as i32).to_be_bytes());
            self.chunks[0] = OutChunk::Bytes(head.freeze());
        }
        self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;
    use kafka_protocol::messages::FetchResponse;
    use kafka_protocol::protocol::Decodable;
    use std::io::Write;
    use std::sync::Arc;

    fn sample_records(seed: u8, length: usize) -> Bytes {
        (0..length)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect::<Vec<u8>>()
            .into()
    }

    fn partition(
        index: i32,
        aborted: Option<Vec<(i64, i64)>>,
        records: ReadData,
    ) -> FetchPartitionData {
        FetchPartitionData {
            partition_index: index,
            error_code: if index == 2 {
                ErrorCode::NotLeaderOrFollower
            } else {
                ErrorCode::None
            },
            high_watermark: 1000 + i64::from(index),
            last_stable_offset: 900 + i64::from(index),
            log_start_offset: 10 + i64::from(index),
            aborted_transactions: aborted,
            preferred_read_replica: -1,
            records,
        }
    }

    /// Two topics, three partitions: null and non-null aborted transactions,
    /// empty and non-empty records.
    fn sample_response(records: impl Fn(u8) -> ReadData) -> FetchResponseData {
        FetchResponseData {
            throttle_time_ms: 17,
            error_code: ErrorCode::None,
            session_id: 4242,
            topics: vec![
                FetchTopicData {
                    topic: "orders".to_string(),
                    topic_id: [7; 16],
                    partitions: vec![
                        partition(0, None, records(1)),
                        partition(1, Some(vec![(55, 100), (56, 120)]), records(2)),
                    ],
                },
                FetchTopicData {
                    topic: "payments-with-a-longer-name".to_string(),
                    topic_id: *b"0123456789abcdef",
                    partitions: vec![partition(2, Some(vec![]), ReadData::Empty)],
                },
            ],
        }
    }

    fn bytes_records(seed: u8) -> ReadData {
        ReadData::Bytes(sample_records(seed, 300 + usize::from(seed) * 200))
    }

    /// Concatenates the chunks, reading file ranges.
    fn materialise(chunks: &[OutChunk]) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let mut out = Vec::new();
        for chunk in chunks {
            match chunk {
                OutChunk::Bytes(bytes) => out.extend_from_slice(bytes),
                OutChunk::File(slice) => {
                    let mut buffer = vec![0; slice.length];
                    slice
                        .file
                        .read_exact_at(&mut buffer, slice.position)
                        .unwrap();
                    out.extend_from_slice(&buffer);
                }
            }
        }
        out
    }

    fn check_decodes(version: i16, expected: &FetchResponseData, wire: &[u8]) {
        let mut buf = Bytes::copy_from_slice(wire);
        let size = buf.get_i32();
        assert_eq!(size as usize, wire.len() - 4, "v{version} size prefix");
        assert_eq!(buf.get_i32(), 99, "v{version} correlation id");
        if version >= 12 {
            assert_eq!(buf.get_u8(), 0, "v{version} header tagged fields");
        }
        let decoded = FetchResponse::decode(&mut buf, version).unwrap();
        assert_eq!(buf.remaining(), 0, "v{version} trailing bytes");
        assert_eq!(decoded.throttle_time_ms, expected.throttle_time_ms);
        if version >= 7 {
            assert_eq!(decoded.error_code, expected.error_code.code());
            assert_eq!(decoded.session_id, expected.session_id);
        }
        assert!(decoded.node_endpoints.is_empty());
        assert_eq!(decoded.responses.len(), expected.topics.len());
        for (got, want) in decoded.responses.iter().zip(&expected.topics) {
            if version <= 12 {
                assert_eq!(got.topic.0.as_str(), want.topic, "v{version}");
            } else {
                assert_eq!(got.topic_id.as_bytes(), &want.topic_id, "v{version}");
            }
            assert_eq!(got.partitions.len(), want.partitions.len());
            for (p, w) in got.partitions.iter().zip(&want.partitions) {
                assert_eq!(p.partition_index, w.partition_index);
                assert_eq!(p.error_code, w.error_code.code());
                assert_eq!(p.high_watermark, w.high_watermark);
                assert_eq!(p.last_stable_offset, w.last_stable_offset);
                if version >= 5 {
                    assert_eq!(p.log_start_offset, w.log_start_offset);
                }
                let aborted = p.aborted_transactions.as_ref().map(|list| {
                    list.iter()
                        .map(|a| (a.producer_id.0, a.first_offset))
                        .collect::<Vec<_>>()
                });
                assert_eq!(aborted, w.aborted_transactions, "v{version}");
                assert_eq!(*p.preferred_read_replica, w.preferred_read_replica);
                let want_records = match &w.records {
                    ReadData::Empty => Bytes::new(),
                    ReadData::Bytes(bytes) => bytes.clone(),
                    ReadData::Pieces(pieces) => Bytes::from(pieces.concat()),
                    ReadData::File(_) => unreachable!("oracle compares Bytes responses"),
                };
                assert_eq!(p.records.as_ref(), Some(&want_records), "v{version}");
            }
        }
    }

    #[test]
    fn every_version_decodes_with_the_crate_decoder() {
        let expected = sample_response(bytes_records);
        for version in FETCH_VERSION_MIN..=FETCH_VERSION_MAX {
            let chunks = encode_fetch_response(99, version, &expected);
            check_decodes(version, &expected, &materialise(&chunks));
        }
    }

    /// The same records as [`bytes_records`], cut into three pieces.
    #[test]
    fn a_patched_throttle_time_is_the_encoded_one() {
        for version in FETCH_VERSION_MIN..=FETCH_VERSION_MAX {
            let mut data = sample_response(bytes_records);
            data.throttle_time_ms = 0;
            let mut patched = encode_fetch_response(7, version, &data);
            set_throttle_time(&mut patched, version, 1234);
            data.throttle_time_ms = 1234;
            let encoded = encode_fetch_response(7, version, &data);
            assert_eq!(materialise(&patched), materialise(&encoded), "v{version}");
        }
    }

    fn pieces_records(seed: u8) -> ReadData {
        let all = sample_records(seed, 300 + usize::from(seed) * 200);
        let (a, b) = (all.len() / 3, 2 * all.len() / 3);
        ReadData::Pieces(vec![all.slice(..a), all.slice(a..b), all.slice(b..)])
    }

    #[test]
    fn pieces_go_out_as_their_own_chunks_and_decode_like_joined_bytes() {
        let joined = sample_response(bytes_records);
        let pieces = sample_response(pieces_records);
        for version in FETCH_VERSION_MIN..=FETCH_VERSION_MAX {
            let joined_chunks = encode_fetch_response(99, version, &joined);
            let pieces_chunks = encode_fetch_response(99, version, &pieces);
            // Two partitions with records: two more chunks each.
            assert_eq!(pieces_chunks.len(), joined_chunks.len() + 4, "v{version}");
            let wire = materialise(&pieces_chunks);
            assert_eq!(wire, materialise(&joined_chunks), "v{version}");
            check_decodes(version, &pieces, &wire);
        }
    }

    #[test]
    fn framing_is_coalesced_around_record_payloads() {
        let expected = sample_response(bytes_records);
        let chunks = encode_fetch_response(99, 16, &expected);
        // framing, records, framing, records, framing (the empty partition
        // adds no payload chunk).
        assert_eq!(chunks.len(), 5);
        for (index, chunk) in chunks.iter().enumerate() {
            assert!(matches!(chunk, OutChunk::Bytes(_)));
            assert!(!chunk.is_empty(), "chunk {index} empty");
        }
        assert_eq!(chunks[1].len(), 500);
        assert_eq!(chunks[3].len(), 700);
    }

    #[test]
    fn empty_response_is_one_chunk() {
        let data = FetchResponseData {
            throttle_time_ms: 0,
            error_code: ErrorCode::None,
            session_id: 0,
            topics: vec![],
        };
        for version in FETCH_VERSION_MIN..=FETCH_VERSION_MAX {
            let chunks = encode_fetch_response(99, version, &data);
            assert_eq!(chunks.len(), 1);
            check_decodes(version, &data, &materialise(&chunks));
        }
    }

    #[test]
    fn file_records_match_bytes_records() {
        // Lay both partitions' records out in one file, at odd offsets.
        let mut file = tempfile_in_target();
        let first = sample_records(1, 500);
        let second = sample_records(2, 700);
        file.write_all(&[0xee; 13]).unwrap();
        file.write_all(&first).unwrap();
        file.write_all(&[0xdd; 3]).unwrap();
        file.write_all(&second).unwrap();
        let file = Arc::new(file);
        let file_records = |seed: u8| {
            let (position, length) = if seed == 1 { (13, 500) } else { (516, 700) };
            ReadData::File(engine::FileSlice {
                file: file.clone(),
                position,
                length,
            })
        };
        for version in FETCH_VERSION_MIN..=FETCH_VERSION_MAX {
            let with_bytes = encode_fetch_response(99, version, &sample_response(bytes_records));
            let with_file = encode_fetch_response(99, version, &sample_response(file_records));
            assert_eq!(with_file.len(), with_bytes.len());
            assert!(matches!(with_file[1], OutChunk::File(_)));
            assert_eq!(
                materialise(&with_file),
                materialise(&with_bytes),
                "v{version}"
            );
        }
    }

    fn tempfile_in_target() -> std::fs::File {
        let path = std::env::temp_dir().join(format!(
            "rill-fetch-response-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }
}

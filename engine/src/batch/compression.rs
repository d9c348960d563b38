//! The four Kafka record codecs, as whole-buffer compress / decompress.
//!
//! - gzip: plain gzip; concatenated members are accepted on decode.
//! - snappy: Java clients write the xerial `snappy-java` framing (magic
//!   `\x82SNAPPY\0`, two i32 versions, then chunks of `[i32 length][raw snappy
//!   block]`); librdkafka may send a bare raw block. Both decode; encode writes
//!   xerial framing, which every client accepts.
//! - lz4: the LZ4 frame format with independent 64 KiB blocks (Kafka's
//!   `KafkaLZ4BlockInputStream` refuses linked blocks).
//! - zstd: one or more zstd frames.
//!
//! Decompressed output is capped at [`MAX_DECOMPRESSED_BYTES`]: a batch is
//! at most a few MiB, so anything larger is a zip bomb, refused before it can
//! take the memory.
//!
//! Levels follow KIP-390 ([`CompressionLevels`]): `compression.gzip.level`,
//! `compression.lz4.level` and `compression.zstd.level`, with Kafka's ranges
//! and defaults. lz4's is accepted and kept but has no effect: `lz4_flex`
//! has one (fast) encoder, and every lz4 decoder reads its frames.

use std::io::{Read, Write};

use super::error::BatchError;
use super::header::Compression;

/// Refuse to decompress a batch's records to more than this.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;

const SNAPPY_XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// magic + version + compatible version.
const SNAPPY_XERIAL_HEADER_BYTES: usize = 16;
/// snappy-java's default block size; also bounds our encoder's chunks.
const SNAPPY_XERIAL_CHUNK_BYTES: usize = 32 * 1024;
/// zstd windows beyond this are refused: 2^26 = 64 MiB matches the output cap.
const ZSTD_WINDOW_LOG_MAX: u32 = 26;
/// KIP-390 compression levels, one per codec that has them (Kafka's
/// `compression.<codec>.level` topic and broker configs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressionLevels {
    /// `compression.gzip.level`: 1..=9, or -1 for zlib's default (6).
    pub gzip: i32,
    /// `compression.lz4.level`: 1..=17 (recorded; see the module doc).
    pub lz4: i32,
    /// `compression.zstd.level`: -131072..=22.
    pub zstd: i32,
}

impl CompressionLevels {
    /// Kafka's `compression.gzip.level` default: zlib's own default level.
    pub const GZIP_DEFAULT: i32 = -1;
    /// Kafka's `compression.gzip.level` range (besides -1).
    pub const GZIP_RANGE: std::ops::RangeInclusive<i32> = 1..=9;
    /// Kafka's `compression.lz4.level` default.
    pub const LZ4_DEFAULT: i32 = 9;
    /// Kafka's `compression.lz4.level` range.
    pub const LZ4_RANGE: std::ops::RangeInclusive<i32> = 1..=17;
    /// Kafka's `compression.zstd.level` default.
    pub const ZSTD_DEFAULT: i32 = 3;
    /// Kafka's `compression.zstd.level` range (zstd's negative "fast"
    /// levels down to -131072, up to 22).
    pub const ZSTD_RANGE: std::ops::RangeInclusive<i32> = -131_072..=22;

    /// Whether `level` is a valid `compression.gzip.level`.
    pub fn gzip_level_valid(level: i32) -> bool {
        level == Self::GZIP_DEFAULT || Self::GZIP_RANGE.contains(&level)
    }
}

impl Default for CompressionLevels {
    fn default() -> Self {
        CompressionLevels {
            gzip: Self::GZIP_DEFAULT,
            lz4: Self::LZ4_DEFAULT,
            zstd: Self::ZSTD_DEFAULT,
        }
    }
}

fn codec_error(codec: Compression, reason: impl ToString) -> BatchError {
    BatchError::Compression {
        codec: codec.name(),
        reason: reason.to_string(),
    }
}

fn too_large(codec: Compression, max_bytes: usize) -> BatchError {
    codec_error(
        codec,
        format!("decompressed size exceeds {max_bytes} bytes"),
    )
}

/// Compress `raw` records with `codec` at Kafka's default levels.
/// `Compression::None` copies.
pub fn compress(codec: Compression, raw: &[u8]) -> Result<Vec<u8>, BatchError> {
    compress_with_levels(codec, raw, &CompressionLevels::default())
}

/// Compress `raw` records with `codec` at `levels` (a level out of its
/// range falls back to the codec's default). `Compression::None` copies.
pub fn compress_with_levels(
    codec: Compression,
    raw: &[u8],
    levels: &CompressionLevels,
) -> Result<Vec<u8>, BatchError> {
    match codec {
        Compression::None => Ok(raw.to_vec()),
        Compression::Gzip => {
            let level = u32::try_from(levels.gzip)
                .ok()
                .filter(|level| (1..=9).contains(level))
                .map_or_else(flate2::Compression::default, flate2::Compression::new);
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
            encoder
                .write_all(raw)
                .map_err(|error| codec_error(codec, error))?;
            encoder.finish().map_err(|error| codec_error(codec, error))
        }
        Compression::Snappy => compress_snappy_xerial(raw),
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            encoder
                .write_all(raw)
                .map_err(|error| codec_error(codec, error))?;
            encoder.finish().map_err(|error| codec_error(codec, error))
        }
        Compression::Zstd => {
            let level = if CompressionLevels::ZSTD_RANGE.contains(&levels.zstd) {
                levels.zstd
            } else {
                CompressionLevels::ZSTD_DEFAULT
            };
            zstd::bulk::compress(raw, level).map_err(|error| codec_error(codec, error))
        }
    }
}

/// Decompress `data` with `codec`, refusing output over
/// [`MAX_DECOMPRESSED_BYTES`]. `Compression::None` copies.
pub fn decompress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    decompress_capped(codec, data, MAX_DECOMPRESSED_BYTES)
}

/// [`decompress`] with a tighter cap of `max_bytes` (at most
/// [`MAX_DECOMPRESSED_BYTES`]): for payloads smaller than a batch, such as a
/// client's pushed telemetry, whose zip bomb should be refused sooner.
/// `Compression::None` copies (the input's own size is its caller's to
/// bound).
pub fn decompress_capped(
    codec: Compression,
    data: &[u8],
    max_bytes: usize,
) -> Result<Vec<u8>, BatchError> {
    let max_bytes = max_bytes.min(MAX_DECOMPRESSED_BYTES);
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            read_bounded(codec, flate2::read::MultiGzDecoder::new(data), max_bytes)
        }
        Compression::Snappy => decompress_snappy(data, max_bytes),
        Compression::Lz4 => {
            read_bounded(codec, lz4_flex::frame::FrameDecoder::new(data), max_bytes)
        }
        Compression::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::new(data)
                .map_err(|error| codec_error(codec, error))?;
            decoder
                .window_log_max(ZSTD_WINDOW_LOG_MAX)
                .map_err(|error| codec_error(codec, error))?;
            read_bounded(codec, decoder, max_bytes)
        }
    }
}

/// Read a streaming decoder to its end, but never past `max_bytes`.
fn read_bounded(
    codec: Compression,
    reader: impl Read,
    max_bytes: usize,
) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::new();
    reader
        .take(max_bytes as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|error| codec_error(codec, error))?;
    if out.len() > max_bytes {
        return Err(too_large(codec, max_bytes));
    }
    Ok(out)
}

fn compress_snappy_xerial(raw: &[u8]) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::with_capacity(SNAPPY_XERIAL_HEADER_BYTES + raw.len() / 2 + 64);
    out.extend_from_slice(&SNAPPY_XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes()); // version
    out.extend_from_slice(&1i32.to_be_bytes()); // compatible version
    let mut encoder = snap::raw::Encoder::new();
    for chunk in raw.chunks(SNAPPY_XERIAL_CHUNK_BYTES) {
        let block = encoder
            .compress_vec(chunk)
            .map_err(|error| codec_error(Compression::Snappy, error))?;
        // A chunk is 32 KiB, so its compressed length always fits an i32.
        let length = i32::try_from(block.len())
            .map_err(|_| codec_error(Compression::Snappy, "snappy block too large"))?;
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&block);
    }
    Ok(out)
}

fn decompress_snappy(data: &[u8], max_bytes: usize) -> Result<Vec<u8>, BatchError> {
    if data.starts_with(&SNAPPY_XERIAL_MAGIC) {
        decompress_snappy_xerial(data, max_bytes)
    } else {
        let mut out = Vec::new();
        decompress_snappy_block(data, &mut out, max_bytes)?;
        Ok(out)
    }
}

fn decompress_snappy_xerial(data: &[u8], max_bytes: usize) -> Result<Vec<u8>, BatchError> {
    let mut rest = data
        .get(SNAPPY_XERIAL_HEADER_BYTES..)
        .ok_or_else(|| codec_error(Compression::Snappy, "truncated xerial header"))?;
    let mut out = Vec::new();
    // Each pass consumes at least the 4-byte length, so the loop is bounded
    // by data.len() / 4.
    while !rest.is_empty() {
        let (length_bytes, after) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| codec_error(Compression::Snappy, "truncated xerial chunk length"))?;
        let length = usize::try_from(i32::from_be_bytes(*length_bytes))
            .map_err(|_| codec_error(Compression::Snappy, "negative xerial chunk length"))?;
        let block = after
            .get(..length)
            .ok_or_else(|| codec_error(Compression::Snappy, "truncated xerial chunk"))?;
        decompress_snappy_block(block, &mut out, max_bytes)?;
        rest = &after[length..];
    }
    Ok(out)
}

/// Append one raw snappy block to `out`, checking its declared length
/// against the cap before allocating.
fn decompress_snappy_block(
    block: &[u8],
    out: &mut Vec<u8>,
    max_bytes: usize,
) -> Result<(), BatchError> {
    let length = snap::raw::decompress_len(block)
        .map_err(|error| codec_error(Compression::Snappy, error))?;
    let start = out.len();
    if length > max_bytes.saturating_sub(start) {
        return Err(too_large(Compression::Snappy, max_bytes));
    }
    out.resize(start + length, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|error| codec_error(Compression::Snappy, error))?;
    out.truncate(start + written);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_records() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|n| (n % 251).to_le_bytes())
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let raw = sample_records();
        for codec in Compression::ALL {
            let packed = compress(codec, &raw).unwrap();
            if codec != Compression::None {
                assert!(packed.len() < raw.len(), "{codec:?} did not compress");
            }
            assert_eq!(decompress(codec, &packed).unwrap(), raw, "{codec:?}");
            assert_eq!(
                decompress(codec, &compress(codec, &[]).unwrap()).unwrap(),
                b""
            );
        }
    }

    #[test]
    fn levels_change_the_output_and_still_round_trip() {
        let raw = sample_records();
        for (codec, low, high) in [
            (Compression::Gzip, 1, 9),
            (Compression::Zstd, -5, 19),
            (Compression::Lz4, 1, 17),
        ] {
            let at = |level| {
                let levels = CompressionLevels {
                    gzip: level,
                    lz4: level,
                    zstd: level,
                };
                compress_with_levels(codec, &raw, &levels).unwrap()
            };
            let (fast, small) = (at(low), at(high));
            for packed in [&fast, &small] {
                assert_eq!(decompress(codec, packed).unwrap(), raw, "{codec:?}");
            }
            if codec != Compression::Lz4 {
                assert!(small.len() < fast.len(), "{codec:?}: level {high} smaller");
            }
        }
        assert!(CompressionLevels::gzip_level_valid(-1));
        assert!(!CompressionLevels::gzip_level_valid(0));
        assert!(!CompressionLevels::gzip_level_valid(10));
    }

    #[test]
    fn snappy_writes_xerial_and_reads_raw_blocks() {
        let raw = sample_records();
        let packed = compress(Compression::Snappy, &raw).unwrap();
        assert_eq!(&packed[..8], &SNAPPY_XERIAL_MAGIC);
        assert_eq!(&packed[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
        let raw_block = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw_block).unwrap(), raw);
    }

    #[test]
    fn lz4_frame_uses_independent_blocks() {
        let packed = compress(Compression::Lz4, b"hello").unwrap();
        assert_eq!(&packed[..4], &[0x04, 0x22, 0x4d, 0x18], "lz4 frame magic");
        // FLG byte: version 01, bit 5 = block independence.
        assert_eq!(packed[4] & 0xc0, 0x40);
        assert_ne!(packed[4] & 0x20, 0);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let garbage = [0xffu8, 0x00, 0x13, 0x37, 0x42, 0x99, 0x01];
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let error = decompress(codec, &garbage).unwrap_err();
            assert!(
                matches!(error, BatchError::Compression { .. }),
                "{codec:?}: {error:?}"
            );
        }
        let mut truncated = compress(Compression::Snappy, &sample_records()).unwrap();
        truncated.truncate(100);
        assert!(decompress(Compression::Snappy, &truncated).is_err());
    }

    #[test]
    fn zip_bombs_are_refused() {
        let zeros = vec![0u8; MAX_DECOMPRESSED_BYTES + 1];
        for codec in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
            let bomb = compress(codec, &zeros).unwrap();
            let error = decompress(codec, &bomb).unwrap_err();
            assert!(error.to_string().contains("exceeds"), "{codec:?}: {error}");
        }
        // A raw snappy block that *declares* 1 GiB is refused from its header
        // alone: varint 0x80 0x80 0x80 0x80 0x04 = 2^30.
        let declared = [0x80, 0x80, 0x80, 0x80, 0x04, 0x00];
        let error = decompress(Compression::Snappy, &declared).unwrap_err();
        assert!(error.to_string().contains("exceeds"), "{error}");
    }

    #[test]
    fn a_tighter_cap_refuses_sooner_and_passes_what_fits() {
        let raw = sample_records();
        for codec in Compression::ALL.into_iter().skip(1) {
            let packed = compress(codec, &raw).unwrap();
            let error = decompress_capped(codec, &packed, raw.len() - 1).unwrap_err();
            assert!(error.to_string().contains("exceeds"), "{codec:?}: {error}");
            assert_eq!(decompress_capped(codec, &packed, raw.len()).unwrap(), raw);
        }
    }
}

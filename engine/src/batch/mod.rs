//! Kafka RecordBatch v2 (magic 2): the unit rill stores, replicates and serves.
//!
//! Records are kept on disk exactly as the producer sent them, so this module
//! is mostly about *looking at* batch bytes without copying them:
//!
//! - [`header`]: the fixed 61-byte header, [`BatchHeader`], the codec bits
//!   ([`Compression`]), CRC32C, and the in-place writes a broker makes on
//!   append (base offset, leader epoch, LogAppendTime).
//! - [`validate`]: the produce-path check of one complete batch
//!   ([`validate_batch`]) and the iterator over consecutive batches in a
//!   produce payload or a segment slice ([`batches`]).
//! - [`records`]: decoding the records of a batch ([`records`]), used by
//!   compaction, internal topics and tests — never on the append hot path.
//! - `record_walk`: the append hot path's yes-or-no walk over an
//!   uncompressed batch's records, in registers.
//! - [`compression`]: gzip, snappy (xerial-framed and raw), lz4 (frame) and
//!   zstd, with a hard bound on decompressed size, and KIP-390 levels.
//! - [`recompress`]: a batch rewritten in another codec, the broker-side
//!   `compression.type`.
//! - [`builder`]: [`BatchBuilder`], which writes a batch from records.
//! - [`varint`]: Kafka's zigzag varints.
//! - [`error`]: [`BatchError`] and its Kafka error codes.
//!
//! Every decoder here is fed attacker-controlled bytes: nothing indexes out of
//! bounds, nothing panics, and decompression is capped at
//! [`MAX_DECOMPRESSED_BYTES`].

pub mod builder;
pub mod compression;
pub mod error;
pub mod header;
pub mod recompress;
mod record_walk;
pub mod records;
pub mod validate;
pub mod varint;

pub use builder::BatchBuilder;
pub use compression::{
    compress, compress_with_levels, decompress, decompress_capped, CompressionLevels,
    MAX_DECOMPRESSED_BYTES,
};
pub use error::{BatchError, RecordError, RecordErrors};
pub use header::{
    compute_crc, set_base_offset, set_log_append_time, set_partition_leader_epoch, BatchHeader,
    Compression, HEADER_BYTES, LOG_OVERHEAD_BYTES, MAGIC_V2,
};
pub use recompress::{needs_recompression, recompress};
pub use records::{records, Record};
pub use validate::{batches, validate_batch, BatchIter};

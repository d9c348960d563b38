//! rill's storage engine: Kafka's partition log, thread-per-core.
//!
//! Everything here is **shard-local**: a [`manager::LogManager`] lives on one
//! glommio executor, owns the partitions that [`shard::shard_of`] assigns to
//! that shard, and is shared inside the shard with `Rc`. The `runtimes` crate
//! routes requests to the owning shard. One thing leaves the shard's thread:
//! the whole blocks a group-commit round streams while its appends arrive go,
//! as owned buffers, to the shard's stream-writer thread (`stream_writer`),
//! and only the outcome of each write comes back.
//!
//! Map of the modules:
//! - [`error_code`]: [`ErrorCode`], the one table of Kafka error codes,
//!   success included, that every layer answers with.
//! - [`types`]: plain types shared by every module and by the `net/` crates:
//!   [`TopicPartition`] and the aliases naming Kafka's ids (`Offset`,
//!   `ProducerId`, `ProducerEpoch`, `LeaderEpoch`, `TopicId`, ...). It
//!   imports nothing from the crate.
//! - [`clock`]: the one source of wall-clock time ([`Clock`]: the system
//!   clock in production, a manual clock a test moves), carried in
//!   [`EngineConfig::clock`].
//! - [`batch`]: Kafka RecordBatch v2 — parse, validate (CRC32C), in-place
//!   offset assignment, records, codecs, a builder.
//! - [`fuzzing`]: the produce path's batch checks as one never-panicking entry
//!   point, shared by the cargo-fuzz targets (`fuzz/`) and the corpus replay test.
//! - [`config`]: per-topic settings with Kafka's names and defaults, and the
//!   engine-wide settings (data dir, flush policy, cache size).
//! - [`disk`]: the one seam every file operation of the log goes through:
//!   the real disk, or a simulated one that loses what was not synced at a
//!   power failure (`engine/tests/simulation.rs` runs the log on it).
//! - [`index`]: the sparse offset index and the time index of one segment.
//! - [`segment`]: one `.log` file with its indexes; naming by base offset.
//! - [`segment_swap`]: the crash-safe swap of a cleaned segment, and its
//!   recovery at open.
//! - [`appender`]: the direct-IO writer (O_DIRECT, aligned DMA buffers, tail
//!   page kept in memory, preallocation ahead of the write position, whole
//!   blocks streamed to the shard's stream-writer thread).
//! - [`log`]: the partition log — append, read (copy or file slice), lookup by
//!   offset and time, high watermark, truncation, delete-records, and the
//!   pipelined group commit that makes appends durable; for replication, a
//!   follower's append of its leader's batches as they are
//!   (`append_replicated`) and the high watermark capped by what the
//!   in-sync replicas have (`set_replication_limit`). Its
//!   `log/maintenance.rs` is the narrow view (`Maintenance`, crate
//!   internal) through which compaction reads and rewrites sealed segments.
//!   [`log::epoch_cache`] is Kafka's leader-epoch cache ([`LeaderEpochCache`],
//!   pure), which each partition keeps durable as its
//!   `leader-epoch-checkpoint` (`log/epochs.rs`) and cuts with the log
//!   (`log/truncate.rs`: crash-safe `truncate_to` for replication).
//! - [`io_sizing`]: the in-flight write bytes, stream chunk and read-ahead,
//!   derived (pure) from the disk's measured figures (`io-properties.yaml`).
//! - [`recovery`]: scanning and truncating after a crash.
//! - [`recycle`]: deleted segments' files kept as spares that later
//!   segments take over, already written, so appends change no metadata.
//! - [`producer_state`]: idempotent producers (epochs, the last sequences,
//!   duplicate detection) and open transactions, with their snapshots.
//! - [`producer_id_blocks`]: the persisted, monotonically increasing allocator of
//!   producer-id blocks (KIP-730).
//! - [`txn_index`]: the aborted-transaction index (`.txnindex`) that
//!   `read_committed` fetches answer from.
//! - [`retention`]: the pure policy of which sealed segments are past
//!   `retention.ms` / `retention.bytes` (the log deletes them).
//! - [`compaction`]: the cleaner of `cleanup.policy=compact`, working
//!   through the log's maintenance view only.
//! - [`cache`]: the per-shard cache of recent batches.
//! - [`manager`]: the shard's set of partitions; one that fails to open
//!   goes offline alone, and the others open.
//! - [`log_dirs`]: several data dirs (Kafka's `log.dirs`): which dir a new
//!   partition goes to, and finding the partitions of every dir at start.
//! - [`shard`]: the pure partition → shard function.
//!
//! Imports run one way, with no cycle between files (`tests/src/layering.rs`
//! checks it): `types` and `clock` at the bottom; `batch`, `index`,
//! `segment`, `segment_swap`, `producer_state`, `txn_index`, `recovery`,
//! `recycle`, `retention` above them; `log` on those; `compaction` on `log`'s maintenance view; `manager`
//! on top.

pub mod appender;
pub mod batch;
pub mod cache;
pub mod clock;
pub mod compaction;
pub mod config;
pub mod disk;
pub mod disk_space;
pub mod error;
pub mod error_code;
pub mod fault;
pub mod fuzzing;
pub mod index;
pub mod index_cache;
pub mod io_sizing;
pub mod latency;
pub mod log;
pub mod log_dirs;
pub mod manager;
pub mod placement;
pub mod producer_id_blocks;
pub mod producer_state;
pub mod recovery;
pub mod recycle;
pub mod remote_segment;
pub mod retention;
pub mod segment;
pub mod segment_swap;
pub mod shard;
mod stream_writer;
pub mod txn_index;
pub mod types;

pub use clock::Clock;
pub use config::{EngineConfig, FlushPolicy, TopicConfig};
pub use error::{EngineError, FaultClass};
pub use error_code::ErrorCode;
pub use log::epoch_cache::{EpochEndOffset, EpochEntry, LeaderEpochCache};
pub use log::{
    AppendResult, FileSlice, PartitionLog, ReadData, ReadResult, RemoteSpan, SealedSegment,
};
pub use manager::LogManager;
pub use producer_id_blocks::{ProducerIdBlock, ProducerIdBlocks, ProducerIdError, ProducerIdStore};
pub use types::TopicPartition;

//! The partition log: Kafka's log of one topic-partition on this shard.
//!
//! Offsets obey `log_start ≤ high_watermark ≤ written ≤ log_end`, checked
//! wherever one of them moves:
//! - `log_end` (LEO): the next offset to assign; appends move it at once.
//! - `written`: everything below it is in the segment file (not yet synced).
//! - `durable`: everything below it survived an fdatasync.
//! - `high_watermark`: what readers may see. On a single node it is `durable`
//!   under the `fsync` policy (a consumer never sees a message that a crash
//!   could take back) and `written` under `interval` and `os`. A replicated
//!   partition caps it further with what the in-sync replicas have
//!   (`replica.rs`, which states the rule); it never moves back but by
//!   truncation.
//!
//! Submodules: [`epoch_cache`] (Kafka's leader-epoch cache and its
//! checkpoint text), `epochs` (the partition's `leader-epoch-checkpoint`,
//! kept in step with the log), `truncate` (cutting the log's tail, crash
//! safe, for replication), `replica` (a follower's append of its leader's
//! batches as they are, and the high watermark's replication cap),
//! [`append`] (validation, offsets, roll), `record_checks` (keys and
//! timestamps record by record, KIP-467), [`flush`] (the
//! pipelined group commit), [`read`] (copy and file-slice reads, lookups),
//! [`cleanup`] (delete-records, retention), `tiering` (the remote copy's
//! reach, segments to upload), [`open`] (recovery at
//! start), [`txn`] (idempotent producers, transaction markers, the last
//! stable offset, the aborted-transaction index), [`watch`] (offsets that
//! tasks wait on), [`maintenance`] (the narrow view the background cleaners
//! get). All time comes from the engine's [`crate::clock::Clock`].

mod append;
mod cleanup;
pub mod epoch_cache;
mod epochs;
mod flush;
mod maintenance;
mod open;
mod read;
mod record_checks;
mod replica;
mod tiering;
mod truncate;
mod txn;
pub mod watch;

use crate::cache::{BatchCache, PartitionChunks};
use crate::clock::Clock;
use crate::config::{EngineConfig, FlushPolicy, TopicConfig};
use crate::error::EngineError;
use crate::segment::Segment;
use crate::stream_writer::StreamWriter;
use crate::types::{LeaderEpoch, Offset, TopicId, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::rc::Rc;
use watch::OffsetWatch;

pub(crate) use append::validated_batches;
pub use epochs::CHECKPOINT_FILE_NAME as LEADER_EPOCH_CHECKPOINT_FILE_NAME;
pub use read::{FileSlice, ReadData, ReadMode, ReadResult};
pub use tiering::{RemoteAuxState, RemoteSpan, SealedSegment};

/// What the shard's partitions share. Shard-local.
pub struct LogContext {
    /// Engine-wide settings.
    pub config: EngineConfig,
    /// The shard's cache of recent batches.
    pub cache: BatchCache,
    /// The shard's cache of sealed segments' indexes.
    pub index_cache: crate::index_cache::IndexCache,
    /// fdatasync latency histogram source: (count, total µs, max µs).
    pub fsync_stats: RefCell<FsyncStats>,
    /// Client batches rewritten in their topic's `compression.type`.
    pub recompressed_batches: Cell<u64>,
    /// New segments that took a deleted segment's file (`recycle.rs`).
    pub segments_recycled: Cell<u64>,
    /// What the shard's log cleaner did (see [`crate::compaction`]).
    pub cleaner: RefCell<CleanerStats>,
    /// The shard's stream writer, started on first use (`None` inside if it
    /// could not start: the rounds then write everything themselves).
    stream_writer: std::cell::OnceCell<Option<StreamWriter>>,
    /// Whether the first data dir's free space is below the reserve
    /// (appends are then refused); the log manager refreshes it.
    pub space: crate::disk_space::LowSpace,
    /// The same for each further data dir (`EngineConfig::more_data_dirs`,
    /// in order): a full dir refuses appends to its own partitions only.
    pub more_spaces: Vec<crate::disk_space::LowSpace>,
    /// The shard's in-flight write bytes (`config.io.inflight_write_bytes`),
    /// shared by its partitions' appenders.
    pub(crate) write_budget: crate::appender::WriteBudget,
}

/// Counters of the group commit, for metrics.
#[derive(Debug, Default, Clone)]
pub struct FsyncStats {
    /// fdatasync calls.
    pub syncs: u64,
    /// Total time spent in fdatasync, µs.
    pub sync_us_total: u64,
    /// Slowest fdatasync, µs.
    pub sync_us_max: u64,
    /// Appends (produce batches) covered by those syncs.
    pub appends_covered: u64,
    /// Write calls issued.
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Total time the writer waited for its writes, µs: with `sync_us_total`
    /// it splits a group-commit round into disk time and CPU time.
    pub write_us_total: u64,
    /// Streamed writes (whole blocks written while a round's appends still
    /// arrive) and their bytes (also counted in `bytes_written`).
    pub streamed_writes: u64,
    pub streamed_bytes: u64,
    /// Bytes written straight from the appends' memory, without the copy
    /// into DMA buffers (also counted in `bytes_written`).
    pub uncopied_bytes: u64,
    /// Each fdatasync's latency, µs.
    pub sync_latency_us: crate::latency::LatencyHistogram,
    /// Each writer round's write latency (its O_DIRECT writes), µs.
    pub write_latency_us: crate::latency::LatencyHistogram,
}

impl LogContext {
    /// A context for the only shard.
    pub fn new(config: EngineConfig) -> Rc<Self> {
        Self::for_shard(config, 1)
    }

    /// A context for one of `shard_count` shards: its share of the
    /// broker-wide index cache.
    pub fn for_shard(config: EngineConfig, shard_count: usize) -> Rc<Self> {
        let batch_cache_bytes = match config.batch_cache_max_bytes {
            Some(broker_bytes) => (broker_bytes / shard_count.max(1) as u64) as usize,
            None => config.batch_cache_bytes,
        };
        let cache = BatchCache::new(batch_cache_bytes);
        let index_cache = crate::index_cache::IndexCache::new(
            config.index_cache_bytes / shard_count.max(1) as u64,
        );
        let more_spaces = config
            .more_data_dirs
            .iter()
            .map(|_| crate::disk_space::LowSpace::default())
            .collect();
        Rc::new(LogContext {
            cache,
            index_cache,
            fsync_stats: RefCell::new(FsyncStats::default()),
            recompressed_batches: Cell::new(0),
            segments_recycled: Cell::new(0),
            cleaner: RefCell::new(CleanerStats::default()),
            stream_writer: std::cell::OnceCell::new(),
            space: crate::disk_space::LowSpace::default(),
            more_spaces,
            write_budget: crate::appender::WriteBudget::new(config.io.inflight_write_bytes),
            config,
        })
    }

    /// The free-space state of data dir `dir_index` (0: `data_dir`).
    pub fn space_of(&self, dir_index: usize) -> &crate::disk_space::LowSpace {
        dir_index
            .checked_sub(1)
            .and_then(|i| self.more_spaces.get(i))
            .unwrap_or(&self.space)
    }

    /// The shard's stream writer, started on first use (none on a
    /// simulated disk, whose streamed writes are tasks of the shard).
    pub(crate) fn stream_writer(&self) -> Option<&StreamWriter> {
        if crate::disk::is_simulated() {
            return None;
        }
        self.stream_writer
            .get_or_init(|| match StreamWriter::start() {
                Ok(writer) => Some(writer),
                Err(e) => {
                    tracing::warn!(error = %e, "stream writer did not start; rounds write all their bytes");
                    None
                }
            })
            .as_ref()
    }
}

/// The outcome of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    /// Offset given to the first record.
    pub base_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// The broker time written into the batches, or -1 under CreateTime.
    pub log_append_time_ms: i64,
    /// Log start offset after the append.
    pub log_start_offset: i64,
    /// Records appended.
    pub record_count: i64,
    /// Bytes appended.
    pub size_bytes: usize,
    /// The payload was a resend of batches already in the log: nothing was
    /// appended, and the offsets are those of the original append (Kafka
    /// answers a duplicate with success and the original base offset).
    pub duplicate: bool,
}

/// Bytes appended but not yet written, in order.
pub(crate) struct PendingChunk {
    pub segment: Rc<Segment>,
    pub position: u64,
    pub first_offset: i64,
    pub next_offset: i64,
    pub batch_count: u64,
    pub bytes: bytes::BytesMut,
}

pub(crate) struct LogState {
    /// Segments by base offset; the last one is active.
    pub segments: Vec<Rc<Segment>>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub pending: VecDeque<PendingChunk>,
    pub leader_epoch: LeaderEpoch,
    /// Messages and time since the last sync, for the interval policy.
    pub messages_since_sync: u64,
    pub last_sync_ms: i64,
    /// Bytes of small appends since the last try at streaming them.
    pub stream_due_bytes: usize,
}

/// One partition's log. Shard-local: use it from the shard that owns it.
pub struct PartitionLog {
    pub(crate) me: std::rc::Weak<PartitionLog>,
    tp: TopicPartition,
    dir: PathBuf,
    topic_id: TopicId,
    config: RefCell<TopicConfig>,
    ctx: Rc<LogContext>,
    pub(crate) state: RefCell<LogState>,
    pub(crate) written: OffsetWatch,
    pub(crate) durable: OffsetWatch,
    pub(crate) high_watermark: OffsetWatch,
    pub(crate) flusher_running: Cell<bool>,
    pub(crate) commit: RefCell<flush::CommitState>,
    pub(crate) failed: Cell<bool>,
    /// The failure was a full disk (ENOSPC/EDQUOT), not a failing one.
    pub(crate) failed_for_space: Cell<bool>,
    /// The writer is retrying a round after a transient error (EMFILE,
    /// ENOMEM, ...): new appends are refused with a retriable error until
    /// it is written, so memory does not fill while the disk cannot.
    pub(crate) stalled: Cell<bool>,
    pub(crate) closed: Cell<bool>,
    pub(crate) chunks: PartitionChunks,
    pub(crate) txn: RefCell<txn::TxnState>,
    /// Leader epoch → first offset, as the `leader-epoch-checkpoint` says.
    pub(crate) epochs: RefCell<epoch_cache::LeaderEpochCache>,
    /// A truncation is under way: appends and other truncations are refused
    /// until it ends.
    pub(crate) truncating: Cell<bool>,
    /// Whether this broker leads the partition (or holds its only
    /// replica): only then are client and control appends taken. The
    /// replication runtime sets it with each role; a follower's log is
    /// written only by its fetcher.
    pub(crate) leading: Cell<bool>,
    /// Something was appended or truncated since the log was opened (or
    /// the open found checkpoints behind the log): `close` must write the
    /// checkpoints. An idle partition's close writes nothing, which keeps
    /// the shutdown of a broker with many idle partitions short.
    pub(crate) mutated: Cell<bool>,
    /// Log bytes read and checked batch by batch when the log was opened.
    scanned_at_open_bytes: u64,
    /// Which of the configured data dirs holds `dir` (0: the first).
    dir_index: usize,
    /// How far the remote (tiered) copy reaches (`tiering`).
    pub(crate) remote: Cell<RemoteSpan>,
    /// What DeleteRecords deleted (`tiering`: it hides the remote part too).
    pub(crate) deleted_below: Cell<Offset>,
    /// Deleted segments' files kept for new segments (`recycle.rs`).
    pub(crate) recycled: RefCell<crate::recycle::RecyclePool>,
    /// Where the next append will start, for connections receiving one
    /// (`crate::placement`); registered by the first append.
    pub(crate) placement: std::cell::OnceCell<crate::placement::PlacementHint>,
}

impl PartitionLog {
    /// Topic and partition.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    /// The topic's id (Kafka's topic UUID).
    pub fn topic_id(&self) -> TopicId {
        self.topic_id
    }

    /// The partition directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The index of the data dir holding the partition (0: the first of
    /// `log.dirs`).
    pub fn log_dir_index(&self) -> usize {
        self.dir_index
    }

    /// New segments that took a deleted segment's file since the log was
    /// opened (`recycle.rs`).
    pub fn segments_recycled(&self) -> u64 {
        self.recycled.borrow().adopted()
    }

    /// How far below the free-space reserve this partition may write.
    pub(crate) fn space_allowance(&self) -> crate::disk_space::Allowance {
        crate::disk_space::Allowance::of_topic(&self.topic_partition().topic)
    }

    /// The topic config in force.
    pub fn config(&self) -> TopicConfig {
        self.config.borrow().clone()
    }

    /// `min.insync.replicas` in force (read on every acks=all produce, so
    /// without cloning the whole config).
    pub fn min_insync_replicas(&self) -> i32 {
        self.config.borrow().min_insync_replicas
    }

    /// Replaces the topic config (the caller persists it).
    pub fn set_config(&self, config: TopicConfig) {
        *self.config.borrow_mut() = config;
    }

    /// The shard context.
    pub fn context(&self) -> &Rc<LogContext> {
        &self.ctx
    }

    /// The clock this log reads its time from (the engine config's).
    pub fn clock(&self) -> &Clock {
        &self.ctx.config.clock
    }

    /// Wall-clock milliseconds from the engine's clock (see [`crate::clock`]).
    #[inline]
    pub(crate) fn now_ms(&self) -> i64 {
        self.ctx.config.clock.now_ms()
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> Offset {
        self.state.borrow().log_start_offset
    }

    /// Next offset to be assigned.
    pub fn log_end_offset(&self) -> Offset {
        self.state.borrow().log_end_offset
    }

    /// What readers may see.
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark.get()
    }

    /// Everything below this offset survived an fdatasync.
    pub fn durable_offset(&self) -> Offset {
        self.durable.get()
    }

    /// Leader epoch written into appended batches.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.state.borrow().leader_epoch
    }

    /// Sets the leader epoch for later appends.
    pub fn set_leader_epoch(&self, epoch: LeaderEpoch) {
        self.state.borrow_mut().leader_epoch = epoch;
    }

    /// Whether client and control appends are taken: this broker leads the
    /// partition or holds its only replica (the default). A follower or an
    /// offline replica takes only its fetcher's appends
    /// ([`PartitionLog::append_replicated`]); anything else is refused with
    /// [`EngineError::NotLeader`].
    pub fn set_leading(&self, leading: bool) {
        self.leading.set(leading);
    }

    /// See [`PartitionLog::set_leading`].
    pub fn is_leading(&self) -> bool {
        self.leading.get()
    }

    /// Log bytes recovery read and checked batch by batch at open: the
    /// segments past the recovery point, and the tails of those below it.
    pub fn scanned_at_open_bytes(&self) -> u64 {
        self.scanned_at_open_bytes
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.state.borrow().segments.len()
    }

    /// Base offsets of the segments.
    pub fn segment_base_offsets(&self) -> Vec<Offset> {
        self.state
            .borrow()
            .segments
            .iter()
            .map(|s| s.base_offset)
            .collect()
    }

    /// Bytes of log on disk (logical sizes of the segments).
    pub fn size_bytes(&self) -> u64 {
        self.state
            .borrow()
            .segments
            .iter()
            .map(|s| s.meta.borrow().size_bytes)
            .sum()
    }

    /// Resolves when the append that ended at `last_offset` meets the flush
    /// policy: after its fdatasync under `fsync`, once written otherwise.
    pub async fn wait_durable(&self, last_offset: i64) -> Result<(), EngineError> {
        let watch = match self.ctx.config.flush_policy {
            FlushPolicy::Fsync => &self.durable,
            FlushPolicy::Interval | FlushPolicy::Os => &self.written,
        };
        self.wait_on(watch, last_offset).await
    }

    /// Resolves once the append that ended at `last_offset` is in the file.
    pub async fn wait_written(&self, last_offset: i64) -> Result<(), EngineError> {
        self.wait_on(&self.written, last_offset).await
    }

    async fn wait_on(&self, watch: &OffsetWatch, last_offset: i64) -> Result<(), EngineError> {
        watch.wait_past(last_offset).await.map_err(|end| match end {
            watch::WatchEnd::Closed => EngineError::Closed,
            watch::WatchEnd::Failed => EngineError::io(
                &self.dir,
                std::io::Error::other("the partition's disk writes failed"),
            ),
        })
    }

    /// Resolves when the high watermark passes `offset` (data to read) or the
    /// log closes. Long-polling fetches wait here.
    pub async fn wait_for_data(&self, offset: i64) {
        let _ = self.high_watermark.wait_past(offset).await;
    }

    pub(crate) fn check_offsets(&self) {
        let state = self.state.borrow();
        let hw = self.high_watermark.get();
        let written = self.written.get();
        assert!(
            state.log_start_offset <= hw && hw <= written && written <= state.log_end_offset,
            "offset order broken: start {} hw {} written {} end {}",
            state.log_start_offset,
            hw,
            written,
            state.log_end_offset
        );
    }

    pub(crate) fn active_segment(&self) -> Rc<Segment> {
        let state = self.state.borrow();
        match state.segments.last() {
            Some(s) => s.clone(),
            None => unreachable!("a partition log always has an active segment"),
        }
    }
}

/// The shard's cleaner counters, for `/metrics`.
#[derive(Debug, Default, Clone, Copy)]
pub struct CleanerStats {
    /// Passes run.
    pub passes: u64,
    /// Bytes the passes read (key maps and rewrites).
    pub bytes_read: u64,
    /// Bytes the rewrites removed from the logs.
    pub bytes_removed: u64,
    /// Records removed.
    pub records_removed: u64,
    /// Duration of the last pass, ms.
    pub last_pass_ms: u64,
    /// Total time in passes, ms.
    pub pass_ms_total: u64,
}

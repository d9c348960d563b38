//! Storage: partitions, data dirs' free space, the group commit, the caches,
//! the log cleaner and the I/O sizes.

use super::per_shard::PerShard;
use super::registry::{Declared, Family, Value};
use super::Shards;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// Reads one figure of a data dir.
type ReadDir = fn(&super::DirSpace) -> i64;

/// Partitions owned and taken offline.
pub(super) static PARTITIONS: [PerShard; 2] = [
    PerShard::gauge("rill_partitions", "Partitions this shard owns.", |m| {
        m.partitions as i64
    }),
    PerShard::gauge(
        "rill_partitions_offline",
        "Partitions offline on this shard: a failed disk write took them offline, or their files could not be opened at start.",
        |m| m.partitions_offline as i64,
    ),
];

/// Group commit: appends per fdatasync is appends_covered / fsyncs, mean
/// fsync latency is fsync_microseconds_total / fsyncs.
pub(super) static GROUP_COMMIT: [PerShard; 12] = [
    PerShard::counter("rill_fsyncs_total", "fdatasync calls.", |m| {
        m.group_commit.syncs as i64
    }),
    PerShard::counter(
        "rill_fsync_appends_covered_total",
        "Appends (produce batches) covered by the fdatasync calls.",
        |m| m.group_commit.appends_covered as i64,
    ),
    PerShard::counter(
        "rill_fsync_microseconds_total",
        "Time spent in fdatasync, in microseconds.",
        |m| m.group_commit.sync_us_total as i64,
    ),
    PerShard::gauge(
        "rill_fsync_microseconds_max",
        "The slowest fdatasync, in microseconds.",
        |m| m.group_commit.sync_us_max as i64,
    ),
    PerShard::counter("rill_disk_writes_total", "Disk write calls issued.", |m| {
        m.group_commit.writes as i64
    }),
    PerShard::counter(
        "rill_disk_written_bytes_total",
        "Bytes written to disk.",
        |m| m.group_commit.bytes_written as i64,
    ),
    // With the fsync time it tells disk time from CPU time in a round.
    PerShard::counter(
        "rill_disk_write_microseconds_total",
        "Time the writers waited for their O_DIRECT writes, in microseconds.",
        |m| m.group_commit.write_us_total as i64,
    ),
    // Written while their round's appends were still arriving
    // (`rill.stream_min_bytes`).
    PerShard::counter(
        "rill_disk_streamed_writes_total",
        "Whole blocks of small appends written while their round was still open.",
        |m| m.group_commit.streamed_writes as i64,
    ),
    PerShard::counter(
        "rill_disk_streamed_bytes_total",
        "Bytes of the streamed writes (also in rill_disk_written_bytes_total).",
        |m| m.group_commit.streamed_bytes as i64,
    ),
    // Received where they would lie in the file, so no copy was needed
    // (`api::connection::scatter`, `engine::appender::plan`).
    PerShard::counter(
        "rill_disk_uncopied_bytes_total",
        "Bytes written to disk straight from the requests' memory, without a copy (also in rill_disk_written_bytes_total).",
        |m| m.group_commit.uncopied_bytes as i64,
    ),
    // Each cost a decompress and a compress.
    PerShard::counter(
        "rill_recompressed_batches_total",
        "Client batches rewritten in their topic's compression.type.",
        |m| m.recompressed_batches as i64,
    ),
    PerShard::counter(
        "rill_segments_recycled_total",
        "New segments that took the file of a segment retention deleted (rill.segment.recycle.max).",
        |m| m.segments_recycled as i64,
    ),
];

/// The cache of recent batches (for tailing readers) and of sealed
/// segments' indexes (misses read the index files), against the shard's
/// shares of `rill.cache.batch.max.bytes` and `rill.cache.index.max.bytes`.
pub(super) static CACHES: [PerShard; 9] = [
    PerShard::gauge(
        "rill_batch_cache_bytes",
        "Bytes of recent batches cached for tailing readers.",
        |m| m.batch_cache_bytes as i64,
    ),
    PerShard::gauge(
        "rill_batch_cache_max_bytes",
        "The batch cache's cap in bytes.",
        |m| m.batch_cache_max_bytes as i64,
    ),
    PerShard::gauge(
        "rill_index_cache_bytes",
        "Bytes of sealed segments' indexes held in memory.",
        |m| m.index_cache.bytes as i64,
    ),
    PerShard::gauge(
        "rill_index_cache_max_bytes",
        "The index cache's cap in bytes.",
        |m| m.index_cache.max_bytes as i64,
    ),
    PerShard::gauge(
        "rill_index_cache_segments",
        "Segments whose indexes are cached.",
        |m| m.index_cache.entries as i64,
    ),
    PerShard::counter("rill_index_cache_hits_total", "Index cache hits.", |m| {
        m.index_cache.hits as i64
    }),
    PerShard::counter(
        "rill_index_cache_misses_total",
        "Index cache misses (the index files read).",
        |m| m.index_cache.misses as i64,
    ),
    PerShard::counter(
        "rill_index_cache_evictions_total",
        "Indexes evicted from the cache.",
        |m| m.index_cache.evictions as i64,
    ),
    PerShard::counter(
        "rill_index_cache_rebuilds_total",
        "Indexes rebuilt from their segment.",
        |m| m.index_cache.rebuilds as i64,
    ),
];

/// The log cleaner (cleanup.policy=compact).
pub(super) static CLEANER: [PerShard; 6] = [
    PerShard::counter("rill_cleaner_passes_total", "Log cleaner passes.", |m| {
        m.cleaner.passes as i64
    }),
    PerShard::counter(
        "rill_cleaner_cleaned_bytes_total",
        "Bytes the cleaner passes read (Kafka's cleaned bytes).",
        |m| m.cleaner.bytes_read as i64,
    ),
    PerShard::counter(
        "rill_cleaner_removed_bytes_total",
        "Bytes the cleaner removed.",
        |m| m.cleaner.bytes_removed as i64,
    ),
    PerShard::counter(
        "rill_cleaner_removed_records_total",
        "Records the cleaner removed.",
        |m| m.cleaner.records_removed as i64,
    ),
    PerShard::gauge(
        "rill_cleaner_last_pass_duration_ms",
        "The last cleaner pass's duration in milliseconds.",
        |m| m.cleaner.last_pass_ms as i64,
    ),
    PerShard::counter(
        "rill_cleaner_pass_duration_ms_total",
        "Time spent in cleaner passes, in milliseconds.",
        |m| m.cleaner.pass_ms_total as i64,
    ),
];

/// The I/O sizes in use, from `io-properties.yaml` (`rill iotune`) or the
/// defaults; `rill_io_sizes_measured` says which.
pub(super) static IO_SIZES: [PerShard; 4] = [
    PerShard::gauge(
        "rill_io_inflight_write_bytes",
        "Bytes of writes kept in flight.",
        |m| m.io_sizing.inflight_write_bytes as i64,
    ),
    PerShard::gauge(
        "rill_io_stream_chunk_bytes",
        "The streamed write chunk (rill.stream_min_bytes).",
        |m| m.stream_chunk_bytes as i64,
    ),
    PerShard::gauge("rill_io_read_ahead_bytes", "Bytes read ahead.", |m| {
        m.io_sizing.read_ahead_bytes as i64
    }),
    PerShard::gauge(
        "rill_io_sizes_measured",
        "1 when the I/O sizes come from a measured io-properties file, 0 for the defaults.",
        |m| i64::from(m.io_sizing.measured),
    ),
];

static DISK_FREE_BYTES: Family = Family::gauge(
    "rill_disk_free_bytes",
    "Free bytes of a data dir's file system at the shard's last check.",
    &["shard", "dir"],
);
static DISK_LOW: Family = Family::gauge(
    "rill_disk_low",
    "1 when a data dir is below rill.storage.min.free.bytes: its partitions refuse appends with KAFKA_STORAGE_ERROR until space is freed.",
    &["shard", "dir"],
);

/// `rill_disk_free_bytes{shard,dir}` and `rill_disk_low{shard,dir}`: other
/// dirs' partitions go on when one is low.
#[derive(Debug)]
pub(super) struct DiskDirsCollector(pub(super) Shards);

impl Collector for DiskDirsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let readers: [(&Family, ReadDir); 2] = [
            (&DISK_FREE_BYTES, |d| d.free_bytes as i64),
            (&DISK_LOW, |d| i64::from(d.low)),
        ];
        for (family, read) in readers {
            let samples = self.0.iter().flat_map(|(shard, m)| {
                m.disk_dirs
                    .iter()
                    .map(move |d| (vec![shard.to_string(), d.dir.clone()], Value::Int(read(d))))
            });
            family.encode(&mut encoder, samples)?;
        }
        Ok(())
    }
}

impl Declared for DiskDirsCollector {
    fn families(&self) -> Vec<&'static Family> {
        vec![&DISK_FREE_BYTES, &DISK_LOW]
    }
}

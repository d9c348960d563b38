//! Tiered storage (KIP-405): each shard's remote log work (uploads, upload
//! lag, deletions, fetches served from the store), per shard, and the
//! object store's own figures (its chunk cache, its bytes fetched, its
//! failures), once for the broker, as shard 0 reads them.

use super::per_shard::PerShard;
use super::registry::{Declared, Family, Value};
use super::Shards;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// One shard's remote log work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TieredCounters {
    /// Segments uploaded and committed.
    pub segments_uploaded: u64,
    /// Their log bytes.
    pub bytes_uploaded: u64,
    /// Sealed segments waiting for upload on the partitions led here.
    pub upload_lag_segments: u64,
    /// Their bytes.
    pub upload_lag_bytes: u64,
    /// Remote segments deleted.
    pub segments_deleted: u64,
    /// Upload or deletion rounds that failed (retried after a backoff).
    pub task_errors: u64,
    /// Fetches served from the store.
    pub remote_reads: u64,
    /// Bytes they returned.
    pub remote_read_bytes: u64,
    /// Their total time, in microseconds.
    pub remote_read_micros: u64,
    /// Fetches the store could not serve.
    pub remote_read_errors: u64,
    /// Upload rounds held back by the copy quota.
    pub copy_throttled: u64,
    /// Remote reads held back by the fetch quota or cut short by
    /// `remote.fetch.max.wait.ms` (answered empty).
    pub fetch_throttled: u64,
}

/// The object store's figures (one store per broker).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteStoreFigures {
    /// Bytes in the chunk cache.
    pub cache_bytes: u64,
    /// The cache's cap.
    pub cache_max_bytes: u64,
    /// Reads the cache answered.
    pub cache_hits: u64,
    /// Reads it sent to the store.
    pub cache_misses: u64,
    /// Bytes fetched from the store.
    pub bytes_fetched: u64,
    /// Failed store calls (uploads, reads, listings, deletions).
    pub errors: u64,
}

/// The per-shard series.
pub(super) static TIERED: [PerShard; 12] = [
    PerShard::counter(
        "rill_remote_copy_segments_total",
        "Segments uploaded to tiered storage and committed.",
        |m| m.tiered.segments_uploaded as i64,
    ),
    PerShard::counter(
        "rill_remote_copy_bytes_total",
        "Log bytes of the segments uploaded.",
        |m| m.tiered.bytes_uploaded as i64,
    ),
    PerShard::gauge(
        "rill_remote_copy_lag_segments",
        "Sealed segments of the partitions led here not yet uploaded (Kafka's RemoteCopyLagSegments).",
        |m| m.tiered.upload_lag_segments as i64,
    ),
    PerShard::gauge(
        "rill_remote_copy_lag_bytes",
        "Their bytes (Kafka's RemoteCopyLagBytes).",
        |m| m.tiered.upload_lag_bytes as i64,
    ),
    PerShard::counter(
        "rill_remote_delete_segments_total",
        "Remote segments deleted: retention, abandoned uploads, tiering turned off.",
        |m| m.tiered.segments_deleted as i64,
    ),
    PerShard::counter(
        "rill_remote_task_errors_total",
        "Upload or deletion rounds that failed; each partition retries after a backoff.",
        |m| m.tiered.task_errors as i64,
    ),
    PerShard::counter(
        "rill_remote_fetch_requests_total",
        "Partition fetches served from tiered storage.",
        |m| m.tiered.remote_reads as i64,
    ),
    PerShard::counter(
        "rill_remote_fetch_bytes_total",
        "Bytes those fetches returned.",
        |m| m.tiered.remote_read_bytes as i64,
    ),
    PerShard::counter(
        "rill_remote_fetch_microseconds_total",
        "Time those fetches waited for the store, in microseconds (mean latency: this over rill_remote_fetch_requests_total).",
        |m| m.tiered.remote_read_micros as i64,
    ),
    PerShard::counter(
        "rill_remote_fetch_errors_total",
        "Partition fetches the store could not serve (answered KAFKA_STORAGE_ERROR, retriable).",
        |m| m.tiered.remote_read_errors as i64,
    ),
    PerShard::counter(
        "rill_remote_copy_throttled_total",
        "Upload rounds held back by remote.log.manager.copy.max.bytes.per.second (the segments go in a later round).",
        |m| m.tiered.copy_throttled as i64,
    ),
    PerShard::counter(
        "rill_remote_fetch_throttled_total",
        "Remote reads answered empty: held back by remote.log.manager.fetch.max.bytes.per.second, or past remote.fetch.max.wait.ms.",
        |m| m.tiered.fetch_throttled as i64,
    ),
];

type ReadStore = fn(&RemoteStoreFigures) -> u64;

static STORE: [(Family, ReadStore); 6] = [
    (
        Family::gauge(
            "rill_remote_storage_cache_bytes",
            "Bytes in the cache of remote log chunks.",
            &[],
        ),
        |f| f.cache_bytes,
    ),
    (
        Family::gauge(
            "rill_remote_storage_cache_max_bytes",
            "The cache's cap (remote.log.index.file.cache.total.size.bytes).",
            &[],
        ),
        |f| f.cache_max_bytes,
    ),
    (
        Family::counter(
            "rill_remote_storage_cache_hits_total",
            "Remote reads the chunk cache answered.",
            &[],
        ),
        |f| f.cache_hits,
    ),
    (
        Family::counter(
            "rill_remote_storage_cache_misses_total",
            "Remote reads sent to the store.",
            &[],
        ),
        |f| f.cache_misses,
    ),
    (
        Family::counter(
            "rill_remote_storage_fetched_bytes_total",
            "Bytes fetched from the object store.",
            &[],
        ),
        |f| f.bytes_fetched,
    ),
    (
        Family::counter(
            "rill_remote_storage_errors_total",
            "Object store calls that failed (uploads, reads, listings, deletions).",
            &[],
        ),
        |f| f.errors,
    ),
];

/// The store's figures, from the shard that read them.
#[derive(Debug)]
pub(super) struct RemoteStoreCollector(pub(super) Shards);

impl Collector for RemoteStoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(figures) = self.0.iter().find_map(|(_, m)| m.remote_store) else {
            return Ok(());
        };
        for (family, read) in &STORE {
            let value = Value::Int(i64::try_from(read(&figures)).unwrap_or(i64::MAX));
            family.encode(&mut encoder, [(Vec::new(), value)])?;
        }
        Ok(())
    }
}

impl Declared for RemoteStoreCollector {
    fn families(&self) -> Vec<&'static Family> {
        STORE.iter().map(|(family, _)| family).collect()
    }
}

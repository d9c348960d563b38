//! Counters and latency histograms. **Per shard** ([`ShardMetrics`] in a
//! `RefCell`, no atomics on the request path); the admin endpoint collects a
//! [`MetricsSnapshot`] from every shard over the mesh and, at scrape time,
//! renders them through a prometheus-client registry ([`registry`]): one
//! collector per concern, next to the data it reads, each encoding families
//! declared once (name, type, HELP, label names).
//!
//! - [`registry`]: [`Family`](registry::Family), the
//!   [`Declared`](registry::Declared) collectors and the
//!   [`MetricsRegistry`](registry::MetricsRegistry) that lists them.
//! - `requests`: per-API counters and the latency summaries.
//! - `connections`: connections, quotas, TLS, SASL.
//! - `storage`: partitions, data dirs, group commit, caches, cleaner, I/O.
//! - `replication`: replication counters and lags, consumer group lag.

mod connections;
mod per_shard;
pub mod registry;
mod replication;
mod requests;
mod storage;
mod tiered;

pub use prometheus_client;
pub use tiered::{RemoteStoreFigures, TieredCounters};

use hdrhistogram::Histogram;
use per_shard::ShardTable;
use registry::MetricsRegistry;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Request counters of one API.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiCounters {
    /// Requests handled.
    pub requests: u64,
    /// Request bytes received (frames without prefix).
    pub bytes_in: u64,
    /// Response bytes sent.
    pub bytes_out: u64,
}

/// What one shard measured (also the `Send` snapshot it hands out).
#[derive(Debug, Clone)]
pub struct ShardMetrics {
    /// Per API key.
    pub apis: BTreeMap<i16, ApiCounters>,
    /// Produce request latency in µs.
    pub produce_latency_us: Histogram<u64>,
    /// Fetch request latency in µs (includes the long poll).
    pub fetch_latency_us: Histogram<u64>,
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Connections open now.
    pub connections_open: i64,
    /// Connections refused at `max.connections`.
    pub connections_refused: u64,
    /// Connections closed because of bad input.
    pub protocol_errors: u64,
    /// Request bytes read and not yet answered, against this shard's share
    /// of `queued.max.request.bytes` (0 when it is unlimited; filled when a
    /// snapshot is taken).
    pub queued_request_bytes: u64,
    /// Requests answered with a quota throttle.
    pub quota_throttled_requests: u64,
    /// Throttle time handed out, in ms.
    pub quota_throttle_ms: u64,
    /// TLS handshakes completed.
    pub tls_handshakes: u64,
    /// TLS handshakes failed (not TLS, refused certificate, timeout).
    pub tls_handshake_failures: u64,
    /// Partitions owned (filled when a snapshot is taken).
    pub partitions: u64,
    /// The engine's group-commit counters (filled when a snapshot is taken).
    pub group_commit: engine::log::FsyncStats,
    /// Per data dir (`log.dirs`, in order): its path, the free bytes of its
    /// file system at the shard's last check, and whether that is below the
    /// reserve (appends to its partitions refused); filled when a snapshot
    /// is taken.
    pub disk_dirs: Vec<DirSpace>,
    /// Partitions a failed disk write took offline (filled when a snapshot
    /// is taken).
    pub partitions_offline: u64,
    /// Client batches the engine rewrote in their topic's
    /// `compression.type` (filled when a snapshot is taken).
    pub recompressed_batches: u64,
    /// New segments that took a deleted segment's file (filled when a
    /// snapshot is taken).
    pub segments_recycled: u64,
    /// The shard's cache of recent batches: bytes held and its cap
    /// (filled when a snapshot is taken).
    pub batch_cache_bytes: u64,
    /// See `batch_cache_bytes`.
    pub batch_cache_max_bytes: u64,
    /// Bytes of the shard's connections' read buffers (filled when a
    /// snapshot is taken).
    pub connection_read_buffer_bytes: u64,
    /// The shard's cache of sealed segments' indexes (filled when a
    /// snapshot is taken).
    pub index_cache: engine::index_cache::IndexCacheStats,
    /// The shard's log cleaner counters (filled when a snapshot is taken).
    pub cleaner: engine::compaction::CleanerStats,
    /// The I/O sizes in use (see [`engine::io_sizing`]; from the
    /// io-properties file or the defaults) and the stream chunk
    /// (`stream_min_bytes`); filled when a snapshot is taken.
    pub io_sizing: engine::io_sizing::IoSizing,
    /// See `io_sizing`.
    pub stream_chunk_bytes: u64,
    /// Committed offsets of the groups this shard coordinates, as
    /// `(group, topic, partition, offset)` (filled when a snapshot is taken).
    pub committed_offsets: Vec<(String, String, i32, i64)>,
    /// Log end offset of every partition this shard owns (filled when a
    /// snapshot is taken): the other half of the consumer lag, which the
    /// renderer joins because a group's coordinator and its partitions'
    /// owners are usually different shards.
    pub log_end_offsets: Vec<(String, i32, i64)>,
    /// Replication counters of this shard's partitions (filled when a
    /// snapshot is taken).
    pub replication: ReplicationCounters,
    /// SASL authentications by (mechanism, succeeded).
    pub sasl_authentications: BTreeMap<(&'static str, bool), u64>,
    /// The shard's incremental fetch session cache (filled when a
    /// snapshot is taken).
    pub fetch_sessions: FetchSessionCounters,
    /// Tiered storage: this shard's remote log work.
    pub tiered: TieredCounters,
    /// Tiered storage: the object store's figures (shard 0 reads them).
    pub remote_store: Option<RemoteStoreFigures>,
}

/// One shard's incremental fetch session cache (KIP-227).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FetchSessionCounters {
    /// Sessions held.
    pub sessions: u64,
    /// Partitions over all sessions held.
    pub partitions: u64,
    /// Sessions evicted to make room for new ones, since start.
    pub evictions: u64,
}

/// What the replication runtime counts on one shard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationCounters {
    /// ISR shrinks this shard's leaders had committed.
    pub isr_shrinks: u64,
    /// ISR expansions this shard's leaders had committed.
    pub isr_expands: u64,
    /// Times this shard started leading a replicated partition.
    pub leaderships_taken: u64,
    /// Times this shard's followers truncated their log because the
    /// leader's fetch answer named a diverging epoch (KIP-595).
    pub diverging_epoch_truncations: u64,
    /// Consumer partition reads this shard's leaders answered with another
    /// replica to read from (KIP-392's `preferred_read_replica`).
    pub read_replica_redirects: u64,
    /// Consumer partition reads this shard's followers served (KIP-392).
    pub follower_consumer_reads: u64,
    /// Per followed partition `(topic, partition)`: the leader's HW minus
    /// this replica's log end at its last fetch, in messages.
    pub follower_lag: BTreeMap<(String, i32), i64>,
    /// Per led partition and follower `(topic, partition, follower, lag)`:
    /// the leader's log end minus the follower's at its last fetch, in
    /// messages (filled when a snapshot is taken).
    pub lag_at_leader: Vec<(String, i32, i32, i64)>,
}

/// One shard's metrics as sent to the admin endpoint.
pub type MetricsSnapshot = (usize, ShardMetrics);

/// Every shard's snapshot, shared by the collectors of one scrape.
type Shards = Arc<[MetricsSnapshot]>;

fn histogram() -> Histogram<u64> {
    // 1 µs .. 1 h at 3 significant digits: fixed size, never resizes on
    // record. Constant, valid bounds: this cannot fail at run time.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

impl Default for ShardMetrics {
    fn default() -> Self {
        ShardMetrics {
            apis: BTreeMap::new(),
            produce_latency_us: histogram(),
            fetch_latency_us: histogram(),
            connections_accepted: 0,
            connections_open: 0,
            connections_refused: 0,
            protocol_errors: 0,
            queued_request_bytes: 0,
            quota_throttled_requests: 0,
            quota_throttle_ms: 0,
            tls_handshakes: 0,
            tls_handshake_failures: 0,
            partitions: 0,
            group_commit: engine::log::FsyncStats::default(),
            disk_dirs: Vec::new(),
            partitions_offline: 0,
            recompressed_batches: 0,
            segments_recycled: 0,
            batch_cache_bytes: 0,
            batch_cache_max_bytes: 0,
            connection_read_buffer_bytes: 0,
            index_cache: Default::default(),
            cleaner: engine::compaction::CleanerStats::default(),
            io_sizing: engine::io_sizing::IoSizing::default(),
            stream_chunk_bytes: 0,
            committed_offsets: Vec::new(),
            log_end_offsets: Vec::new(),
            replication: ReplicationCounters::default(),
            sasl_authentications: BTreeMap::new(),
            fetch_sessions: FetchSessionCounters::default(),
            tiered: TieredCounters::default(),
            remote_store: None,
        }
    }
}

impl ShardMetrics {
    /// Counts one request.
    pub fn record_request(&mut self, api_key: i16, bytes_in: usize, bytes_out: usize) {
        let counters = self.apis.entry(api_key).or_default();
        counters.requests += 1;
        counters.bytes_in += bytes_in as u64;
        counters.bytes_out += bytes_out as u64;
    }

    /// Counts one SASL authentication (or re-authentication) of `mechanism`.
    pub fn record_sasl(&mut self, mechanism: &'static str, succeeded: bool) {
        *self
            .sasl_authentications
            .entry((mechanism, succeeded))
            .or_default() += 1;
    }

    /// Records a latency (saturating at the histogram's bound).
    pub fn record_latency(&mut self, api_key: i16, latency_us: u64) {
        let histogram = match api_key {
            0 => &mut self.produce_latency_us,
            1 => &mut self.fetch_latency_us,
            _ => return,
        };
        histogram.saturating_record(latency_us.max(1));
    }
}

/// Registers the collectors of the shards' metrics (everything but the
/// cluster's and the process's) with `registry`.
pub fn register(registry: &mut MetricsRegistry, snapshots: Vec<MetricsSnapshot>) {
    let shards: Shards = snapshots.into();
    let table = |table| ShardTable {
        shards: shards.clone(),
        table,
    };
    registry.register(requests::ApiCollector(shards.clone()));
    registry.register(storage::DiskDirsCollector(shards.clone()));
    registry.register(table(&connections::CONNECTIONS));
    registry.register(table(&storage::PARTITIONS));
    registry.register(table(&connections::QUOTAS));
    registry.register(table(&connections::TLS));
    registry.register(table(&storage::GROUP_COMMIT));
    registry.register(table(&storage::CACHES));
    registry.register(table(&storage::CLEANER));
    registry.register(table(&storage::IO_SIZES));
    registry.register(table(&requests::FETCH_SESSIONS));
    registry.register(table(&tiered::TIERED));
    registry.register(tiered::RemoteStoreCollector(shards.clone()));
    registry.register(requests::LatencyCollector(shards.clone()));
    registry.register(replication::ConsumerLagCollector(shards.clone()));
    registry.register(replication::ReplicationCollector(shards.clone()));
    registry.register(connections::SaslCollector(shards));
}

/// Renders the snapshots of all shards as Prometheus text.
pub fn render(snapshots: &[MetricsSnapshot]) -> String {
    let mut registry = MetricsRegistry::default();
    register(&mut registry, snapshots.to_vec());
    registry.render()
}

/// One data dir's free space as one shard last saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirSpace {
    /// The dir as configured.
    pub dir: String,
    /// Free bytes of its file system.
    pub free_bytes: u64,
    /// Below the reserve: appends to its partitions are refused.
    pub low: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_quantiles() {
        let mut m = ShardMetrics::default();
        m.record_request(0, 100, 20);
        m.record_latency(0, 1500);
        let text = render(&[(0, m.clone()), (1, m)]);
        assert!(text.contains("rill_requests_total{api=\"Produce\",shard=\"1\"} 1"));
        assert!(text.contains("rill_produce_latency_seconds_count 2"));
        assert!(text.contains("rill_produce_latency_seconds{quantile=\"0.99\"} 0.0015"));
    }

    #[test]
    fn disk_call_latencies_of_every_shard_render_as_summaries() {
        let mut m = ShardMetrics::default();
        m.group_commit.sync_latency_us.record(4_000);
        m.group_commit.write_latency_us.record(300);
        let text = render(&[(0, m.clone()), (1, m)]);
        assert!(
            text.contains("rill_fsync_latency_seconds_count 2"),
            "{text}"
        );
        assert!(text.contains("rill_fsync_latency_seconds{quantile=\"0.99\"} 0.004"));
        assert!(text.contains("rill_disk_write_latency_seconds_count 2"));
        assert!(text.contains("rill_disk_write_latency_seconds{quantile=\"0.5\"} 0.0003"));
    }

    #[test]
    fn disk_space_has_a_series_per_shard_and_dir() {
        let m = ShardMetrics {
            disk_dirs: vec![
                DirSpace {
                    dir: String::from("/a"),
                    free_bytes: 10,
                    low: false,
                },
                DirSpace {
                    dir: String::from("/b\"c"),
                    free_bytes: 3,
                    low: true,
                },
            ],
            ..ShardMetrics::default()
        };
        let text = render(&[(0, m.clone()), (1, m)]);
        assert!(text.contains("rill_disk_free_bytes{shard=\"1\",dir=\"/a\"} 10"));
        assert!(text.contains("rill_disk_low{shard=\"0\",dir=\"/a\"} 0"));
        assert!(text.contains("rill_disk_low{shard=\"0\",dir=\"/b\\\"c\"} 1"));
        assert_eq!(text.matches("# TYPE rill_disk_free_bytes gauge").count(), 1);
    }

    #[test]
    fn sasl_counters_sum_over_shards() {
        let mut m = ShardMetrics::default();
        m.record_sasl("PLAIN", true);
        m.record_sasl("PLAIN", false);
        let text = render(&[(0, m.clone()), (1, m)]);
        assert!(text.contains(
            "rill_sasl_authentications_total{mechanism=\"PLAIN\",result=\"succeeded\"} 2"
        ));
        assert!(text
            .contains("rill_sasl_authentications_total{mechanism=\"PLAIN\",result=\"failed\"} 2"));
    }

    #[test]
    fn lag_joins_coordinator_and_owner_shards() {
        let coordinator = ShardMetrics {
            committed_offsets: vec![("g".into(), "t".into(), 0, 40)],
            ..ShardMetrics::default()
        };
        let owner = ShardMetrics {
            log_end_offsets: vec![("t".into(), 0, 100)],
            ..ShardMetrics::default()
        };
        let text = render(&[(0, coordinator), (1, owner)]);
        assert!(
            text.contains("rill_consumer_group_lag{group=\"g\",topic=\"t\",partition=\"0\"} 60")
        );
    }

    #[test]
    fn counters_keep_their_names_and_type_lines() {
        let mut m = ShardMetrics::default();
        m.record_request(18, 10, 30);
        m.connections_open = -1;
        let text = render(&[(3, m)]);
        assert!(
            text.contains("# TYPE rill_requests_total counter\n"),
            "{text}"
        );
        assert!(text.contains("\nrill_response_bytes_total{api=\"ApiVersions\",shard=\"3\"} 30\n"));
        assert!(text.contains("# TYPE rill_connections_open gauge\n"));
        assert!(text.contains("\nrill_connections_open{shard=\"3\"} -1\n"));
        assert!(text.contains("\nrill_isr_shrinks_total 0\n"));
    }

    #[test]
    fn summaries_are_typed_summary_with_their_sample_names() {
        let mut m = ShardMetrics::default();
        m.record_latency(1, 2_000_000);
        let text = render(&[(0, m)]);
        assert!(
            text.contains("# TYPE rill_fetch_latency_seconds summary\n"),
            "{text}"
        );
        assert!(!text.contains("untyped"), "{text}");
        assert!(
            !text.contains("# TYPE rill_fetch_latency_seconds_sum"),
            "{text}"
        );
        assert!(text.contains("\nrill_fetch_latency_seconds{quantile=\"1\"} 2"));
        assert!(text.contains("\nrill_fetch_latency_seconds_sum 2"));
        assert!(text.contains("\nrill_fetch_latency_seconds_count 1\n"));
        assert!(text.contains("\nrill_produce_latency_seconds_count 0\n"));
    }

    #[test]
    fn shard_families_are_declared_once() {
        let mut registry = MetricsRegistry::default();
        register(&mut registry, Vec::new());
        let families = registry.families();
        assert!(!families.is_empty());
        let mut names: Vec<String> = families.iter().flat_map(|f| f.exposed_names()).collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "{names:?}");
    }
}

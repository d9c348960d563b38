//! Counters and latency histograms. **Per shard** ([`ShardMetrics`] in a
//! `RefCell`, no atomics on the request path); the admin endpoint collects a
//! [`MetricsSnapshot`] from every shard over the mesh, merges and renders them
//! as Prometheus text.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write;

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

fn api_name(key: i16) -> String {
    kafka_protocol::messages::ApiKey::try_from(key)
        .map(|k| format!("{k:?}"))
        .unwrap_or_else(|_| format!("api{key}"))
}

/// A per-shard series: name, Prometheus type, how to read it.
type Gauge = (&'static str, &'static str, fn(&ShardMetrics) -> i64);

/// Renders the snapshots of all shards as Prometheus text.
pub fn render(snapshots: &[MetricsSnapshot]) -> String {
    let mut out = String::new();
    api_counters(&mut out, snapshots);
    disk_dirs(&mut out, snapshots);
    per_shard_series(&mut out, snapshots);
    latency_summaries(&mut out, snapshots);
    consumer_lag(&mut out, snapshots);
    replication(&mut out, snapshots);
    sasl(&mut out, snapshots);
    out
}

/// A per-API series: name, how to read it from one API's counters.
type ApiSeries = (&'static str, fn(&ApiCounters) -> u64);

/// Requests, request bytes and response bytes.
const API_SERIES: &[ApiSeries] = &[
    ("rill_requests_total", |c| c.requests),
    ("rill_request_bytes_total", |c| c.bytes_in),
    ("rill_response_bytes_total", |c| c.bytes_out),
];

/// Every series of [`API_SERIES`], per API and shard.
fn api_counters(out: &mut String, snapshots: &[MetricsSnapshot]) {
    for &(name, get) in API_SERIES {
        let _ = writeln!(out, "# TYPE {name} counter");
        for (shard, m) in snapshots {
            for (key, c) in &m.apis {
                let _ = writeln!(
                    out,
                    "{name}{{api=\"{}\",shard=\"{shard}\"}} {}",
                    api_name(*key),
                    get(c)
                );
            }
        }
    }
}

/// The per-shard series, one line per shard each, in the order rendered.
const PER_SHARD_SERIES: &[Gauge] = &[
    ("rill_connections_open", "gauge", |m| m.connections_open),
    ("rill_partitions_offline", "gauge", |m| {
        m.partitions_offline as i64
    }),
    ("rill_connections_accepted_total", "counter", |m| {
        m.connections_accepted as i64
    }),
    ("rill_connections_refused_total", "counter", |m| {
        m.connections_refused as i64
    }),
    ("rill_protocol_errors_total", "counter", |m| {
        m.protocol_errors as i64
    }),
    ("rill_queued_request_bytes", "gauge", |m| {
        m.queued_request_bytes as i64
    }),
    // Connection read buffers: 4 KiB for a connection that never filled
    // one, then 64 KiB or the frame being read; their bytes are not in
    // rill_queued_request_bytes until a frame is whole.
    ("rill_connection_read_buffer_bytes", "gauge", |m| {
        m.connection_read_buffer_bytes as i64
    }),
    // Recent batches kept for tailing readers, against the shard's share
    // of `rill.cache.batch.max.bytes`.
    ("rill_batch_cache_bytes", "gauge", |m| {
        m.batch_cache_bytes as i64
    }),
    ("rill_batch_cache_max_bytes", "gauge", |m| {
        m.batch_cache_max_bytes as i64
    }),
    // Client quotas: requests throttled and the throttle time given.
    ("rill_quota_throttled_requests_total", "counter", |m| {
        m.quota_throttled_requests as i64
    }),
    ("rill_quota_throttle_ms_total", "counter", |m| {
        m.quota_throttle_ms as i64
    }),
    ("rill_tls_handshakes_total", "counter", |m| {
        m.tls_handshakes as i64
    }),
    ("rill_tls_handshake_failures_total", "counter", |m| {
        m.tls_handshake_failures as i64
    }),
    ("rill_partitions", "gauge", |m| m.partitions as i64),
    // Group commit: appends per fdatasync is appends_covered / fsyncs,
    // mean fsync latency is fsync_seconds_total / fsyncs.
    ("rill_fsyncs_total", "counter", |m| {
        m.group_commit.syncs as i64
    }),
    ("rill_fsync_appends_covered_total", "counter", |m| {
        m.group_commit.appends_covered as i64
    }),
    ("rill_fsync_microseconds_total", "counter", |m| {
        m.group_commit.sync_us_total as i64
    }),
    ("rill_fsync_microseconds_max", "gauge", |m| {
        m.group_commit.sync_us_max as i64
    }),
    ("rill_disk_writes_total", "counter", |m| {
        m.group_commit.writes as i64
    }),
    ("rill_disk_written_bytes_total", "counter", |m| {
        m.group_commit.bytes_written as i64
    }),
    // Time the writers waited for their O_DIRECT writes: with the fsync
    // time it tells disk time from CPU time in a group-commit round.
    ("rill_disk_write_microseconds_total", "counter", |m| {
        m.group_commit.write_us_total as i64
    }),
    // Whole blocks of small appends written while their round's appends
    // were still arriving (`rill.stream_min_bytes`); their bytes are in
    // rill_disk_written_bytes_total too.
    ("rill_disk_streamed_writes_total", "counter", |m| {
        m.group_commit.streamed_writes as i64
    }),
    ("rill_disk_streamed_bytes_total", "counter", |m| {
        m.group_commit.streamed_bytes as i64
    }),
    // Batches rewritten because their codec was not the topic's
    // `compression.type`: each cost a decompress and a compress.
    ("rill_recompressed_batches_total", "counter", |m| {
        m.recompressed_batches as i64
    }),
    // Sealed segments' indexes held in memory, against the shard's share
    // of `rill.cache.index.max.bytes`; misses read the index files.
    ("rill_index_cache_bytes", "gauge", |m| {
        m.index_cache.bytes as i64
    }),
    ("rill_index_cache_max_bytes", "gauge", |m| {
        m.index_cache.max_bytes as i64
    }),
    ("rill_index_cache_segments", "gauge", |m| {
        m.index_cache.entries as i64
    }),
    ("rill_index_cache_hits_total", "counter", |m| {
        m.index_cache.hits as i64
    }),
    ("rill_index_cache_misses_total", "counter", |m| {
        m.index_cache.misses as i64
    }),
    ("rill_index_cache_evictions_total", "counter", |m| {
        m.index_cache.evictions as i64
    }),
    ("rill_index_cache_rebuilds_total", "counter", |m| {
        m.index_cache.rebuilds as i64
    }),
    // The log cleaner (cleanup.policy=compact): passes, bytes read by
    // them (the "cleaned" bytes of Kafka's cleaner), bytes and records
    // they removed, and the last pass's duration.
    ("rill_cleaner_passes_total", "counter", |m| {
        m.cleaner.passes as i64
    }),
    ("rill_cleaner_cleaned_bytes_total", "counter", |m| {
        m.cleaner.bytes_read as i64
    }),
    ("rill_cleaner_removed_bytes_total", "counter", |m| {
        m.cleaner.bytes_removed as i64
    }),
    ("rill_cleaner_removed_records_total", "counter", |m| {
        m.cleaner.records_removed as i64
    }),
    ("rill_cleaner_last_pass_duration_ms", "gauge", |m| {
        m.cleaner.last_pass_ms as i64
    }),
    ("rill_cleaner_pass_duration_ms_total", "counter", |m| {
        m.cleaner.pass_ms_total as i64
    }),
    // The I/O sizes in use, from `io-properties.yaml` (`rill iotune`)
    // or the defaults; `rill_io_sizes_measured` says which.
    ("rill_io_inflight_write_bytes", "gauge", |m| {
        m.io_sizing.inflight_write_bytes as i64
    }),
    ("rill_io_stream_chunk_bytes", "gauge", |m| {
        m.stream_chunk_bytes as i64
    }),
    ("rill_io_read_ahead_bytes", "gauge", |m| {
        m.io_sizing.read_ahead_bytes as i64
    }),
    ("rill_io_sizes_measured", "gauge", |m| {
        i64::from(m.io_sizing.measured)
    }),
];

/// Every series of [`PER_SHARD_SERIES`], one line per shard.
fn per_shard_series(out: &mut String, snapshots: &[MetricsSnapshot]) {
    for &(name, kind, get) in PER_SHARD_SERIES {
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (shard, m) in snapshots {
            let _ = writeln!(out, "{name}{{shard=\"{shard}\"}} {}", get(m));
        }
    }
}

/// The latency histograms of all shards, merged, as summaries.
fn latency_summaries(out: &mut String, snapshots: &[MetricsSnapshot]) {
    let mut produce = histogram();
    let mut fetch = histogram();
    let mut disk_write = histogram();
    let mut fsync = histogram();
    for (_, m) in snapshots {
        let _ = produce.add(&m.produce_latency_us);
        let _ = fetch.add(&m.fetch_latency_us);
        let _ = disk_write.add(m.group_commit.write_latency_us.histogram());
        let _ = fsync.add(m.group_commit.sync_latency_us.histogram());
    }
    summary(out, "rill_produce_latency_seconds", &produce);
    summary(out, "rill_fetch_latency_seconds", &fetch);
    // What a produce waits for on the device (acks after the write under
    // `os`, after the fdatasync too under `fsync`): a produce p99 near
    // these is the disk's, not the broker's.
    summary(out, "rill_disk_write_latency_seconds", &disk_write);
    summary(out, "rill_fsync_latency_seconds", &fsync);
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

/// `text` as a Prometheus label value (backslash, quote and newline escaped).
fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `rill_disk_free_bytes{shard,dir}` and `rill_disk_low{shard,dir}`: below
/// the reserve (`rill.storage.min.free.bytes`) a dir's partitions refuse
/// appends with KAFKA_STORAGE_ERROR until space is freed; other dirs'
/// partitions go on.
fn disk_dirs(out: &mut String, snapshots: &[MetricsSnapshot]) {
    let _ = writeln!(out, "# TYPE rill_disk_free_bytes gauge");
    for (shard, m) in snapshots {
        for d in &m.disk_dirs {
            let dir = label_value(&d.dir);
            let _ = writeln!(
                out,
                "rill_disk_free_bytes{{shard=\"{shard}\",dir=\"{dir}\"}} {}",
                d.free_bytes
            );
        }
    }
    let _ = writeln!(out, "# TYPE rill_disk_low gauge");
    for (shard, m) in snapshots {
        for d in &m.disk_dirs {
            let dir = label_value(&d.dir);
            let _ = writeln!(
                out,
                "rill_disk_low{{shard=\"{shard}\",dir=\"{dir}\"}} {}",
                i64::from(d.low)
            );
        }
    }
}

/// `rill_sasl_authentications_total{mechanism,result}`, summed over shards:
/// a rise of `failed` is a wrong password or someone guessing.
fn sasl(out: &mut String, snapshots: &[MetricsSnapshot]) {
    let mut totals: BTreeMap<(&str, bool), u64> = BTreeMap::new();
    for (_, m) in snapshots {
        for (key, count) in &m.sasl_authentications {
            *totals.entry(*key).or_default() += count;
        }
    }
    let _ = writeln!(out, "# TYPE rill_sasl_authentications_total counter");
    for ((mechanism, succeeded), count) in totals {
        let result = if succeeded { "succeeded" } else { "failed" };
        let _ = writeln!(
            out,
            "rill_sasl_authentications_total{{mechanism=\"{mechanism}\",result=\"{result}\"}} {count}"
        );
    }
}

/// The replication counters, summed over shards, and each followed
/// partition's lag.
fn replication(out: &mut String, snapshots: &[MetricsSnapshot]) {
    let total = |f: fn(&ReplicationCounters) -> u64| -> u64 {
        snapshots.iter().map(|(_, m)| f(&m.replication)).sum()
    };
    let counters: [(&str, u64); 4] = [
        ("rill_isr_shrinks_total", total(|r| r.isr_shrinks)),
        ("rill_isr_expands_total", total(|r| r.isr_expands)),
        (
            "rill_leader_elections_total",
            total(|r| r.leaderships_taken),
        ),
        (
            "rill_diverging_epoch_truncations_total",
            total(|r| r.diverging_epoch_truncations),
        ),
    ];
    for (name, value) in counters {
        let _ = writeln!(out, "# TYPE {name} counter");
        let _ = writeln!(out, "{name} {value}");
    }
    let _ = writeln!(out, "# TYPE rill_follower_lag_at_leader_messages gauge");
    for (_, m) in snapshots {
        for (topic, partition, follower, lag) in &m.replication.lag_at_leader {
            let _ = writeln!(
                out,
                "rill_follower_lag_at_leader_messages{{topic=\"{topic}\",partition=\"{partition}\",follower=\"{follower}\"}} {lag}"
            );
        }
    }
    let _ = writeln!(out, "# TYPE rill_replica_lag_messages gauge");
    for (_, m) in snapshots {
        for ((topic, partition), lag) in &m.replication.follower_lag {
            let _ = writeln!(
                out,
                "rill_replica_lag_messages{{topic=\"{topic}\",partition=\"{partition}\"}} {lag}"
            );
        }
    }
}

/// `rill_consumer_group_committed_offset` and `rill_consumer_group_lag`
/// (log end minus committed, never below 0) per group, topic and partition.
fn consumer_lag(out: &mut String, snapshots: &[MetricsSnapshot]) {
    let log_ends: BTreeMap<(&str, i32), i64> = snapshots
        .iter()
        .flat_map(|(_, m)| m.log_end_offsets.iter())
        .map(|(topic, partition, end)| ((topic.as_str(), *partition), *end))
        .collect();
    let _ = writeln!(out, "# TYPE rill_consumer_group_committed_offset gauge");
    let _ = writeln!(out, "# TYPE rill_consumer_group_lag gauge");
    for (_, m) in snapshots {
        for (group, topic, partition, committed) in &m.committed_offsets {
            let labels = format!("group=\"{group}\",topic=\"{topic}\",partition=\"{partition}\"");
            let _ = writeln!(
                out,
                "rill_consumer_group_committed_offset{{{labels}}} {committed}"
            );
            if let Some(end) = log_ends.get(&(topic.as_str(), *partition)) {
                let lag = (end - committed).max(0);
                let _ = writeln!(out, "rill_consumer_group_lag{{{labels}}} {lag}");
            }
        }
    }
}

fn summary(out: &mut String, name: &str, h: &Histogram<u64>) {
    let _ = writeln!(out, "# TYPE {name} summary");
    for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
        let value_s = h.value_at_quantile(q) as f64 / 1e6;
        let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {value_s}");
    }
    let sum_s = h.mean() * h.len() as f64 / 1e6;
    let _ = writeln!(out, "{name}_sum {sum_s}");
    let _ = writeln!(out, "{name}_count {}", h.len());
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
}

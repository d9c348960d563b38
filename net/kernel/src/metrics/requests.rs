//! Request counters per API and the latency summaries (produce, fetch and
//! the disk calls a produce waits for).

use super::per_shard::PerShard;
use super::registry::{Declared, Family, Value};
use super::{histogram, Shards};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

const API_SHARD: &[&str] = &["api", "shard"];

/// Reads one of an API's counters.
type ReadApi = fn(&super::ApiCounters) -> u64;

static REQUESTS: Family = Family::counter(
    "rill_requests_total",
    "Requests handled, per API.",
    API_SHARD,
);
static REQUEST_BYTES: Family = Family::counter(
    "rill_request_bytes_total",
    "Request bytes received (frames without their size prefix), per API.",
    API_SHARD,
);
static RESPONSE_BYTES: Family = Family::counter(
    "rill_response_bytes_total",
    "Response bytes sent, per API.",
    API_SHARD,
);

fn api_name(key: i16) -> String {
    kafka_protocol::messages::ApiKey::try_from(key)
        .map(|k| format!("{k:?}"))
        .unwrap_or_else(|_| format!("api{key}"))
}

/// `rill_requests_total`, `rill_request_bytes_total` and
/// `rill_response_bytes_total` per API and shard.
#[derive(Debug)]
pub(super) struct ApiCollector(pub(super) Shards);

impl Collector for ApiCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let counters: [(&Family, ReadApi); 3] = [
            (&REQUESTS, |c| c.requests),
            (&REQUEST_BYTES, |c| c.bytes_in),
            (&RESPONSE_BYTES, |c| c.bytes_out),
        ];
        for (family, read) in counters {
            let samples = self.0.iter().flat_map(|(shard, m)| {
                m.apis.iter().map(move |(key, c)| {
                    let labels = vec![api_name(*key), shard.to_string()];
                    (labels, Value::from(read(c)))
                })
            });
            family.encode(&mut encoder, samples)?;
        }
        Ok(())
    }
}

impl Declared for ApiCollector {
    fn families(&self) -> Vec<&'static Family> {
        vec![&REQUESTS, &REQUEST_BYTES, &RESPONSE_BYTES]
    }
}

static PRODUCE_LATENCY: Family = Family::summary(
    "rill_produce_latency_seconds",
    "Produce request latency in seconds, all shards.",
);
static FETCH_LATENCY: Family = Family::summary(
    "rill_fetch_latency_seconds",
    "Fetch request latency in seconds (the long poll included), all shards.",
);
// What a produce waits for on the device (acks after the write under `os`,
// after the fdatasync too under `fsync`): a produce p99 near these is the
// disk's, not the broker's.
static DISK_WRITE_LATENCY: Family = Family::summary(
    "rill_disk_write_latency_seconds",
    "Latency of a group-commit round's O_DIRECT writes in seconds, all shards.",
);
static FSYNC_LATENCY: Family = Family::summary(
    "rill_fsync_latency_seconds",
    "Latency of each fdatasync in seconds, all shards.",
);

/// The latency summaries, every shard's histograms merged.
#[derive(Debug)]
pub(super) struct LatencyCollector(pub(super) Shards);

impl Collector for LatencyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let (mut produce, mut fetch) = (histogram(), histogram());
        let (mut disk_write, mut fsync) = (histogram(), histogram());
        for (_, m) in self.0.iter() {
            let _ = produce.add(&m.produce_latency_us);
            let _ = fetch.add(&m.fetch_latency_us);
            let _ = disk_write.add(m.group_commit.write_latency_us.histogram());
            let _ = fsync.add(m.group_commit.sync_latency_us.histogram());
        }
        PRODUCE_LATENCY.encode_summary(&mut encoder, &produce)?;
        FETCH_LATENCY.encode_summary(&mut encoder, &fetch)?;
        DISK_WRITE_LATENCY.encode_summary(&mut encoder, &disk_write)?;
        FSYNC_LATENCY.encode_summary(&mut encoder, &fsync)
    }
}

impl Declared for LatencyCollector {
    fn families(&self) -> Vec<&'static Family> {
        vec![
            &PRODUCE_LATENCY,
            &FETCH_LATENCY,
            &DISK_WRITE_LATENCY,
            &FSYNC_LATENCY,
        ]
    }
}

/// Incremental fetch sessions (KIP-227): Kafka's
/// `NumIncrementalFetchSessions`, `NumIncrementalFetchPartitionsCached` and
/// `IncrementalFetchSessionEvictionsPerSec` (a counter here; the rate is
/// the scraper's).
pub(super) static FETCH_SESSIONS: [PerShard; 3] = [
    PerShard::gauge(
        "rill_fetch_sessions",
        "Incremental fetch sessions cached (a session lives on the shard of its connection).",
        |m| m.fetch_sessions.sessions as i64,
    ),
    PerShard::gauge(
        "rill_fetch_session_partitions",
        "Partitions over the cached incremental fetch sessions.",
        |m| m.fetch_sessions.partitions as i64,
    ),
    PerShard::counter(
        "rill_fetch_session_evictions_total",
        "Incremental fetch sessions evicted to make room for a new one.",
        |m| m.fetch_sessions.evictions as i64,
    ),
];

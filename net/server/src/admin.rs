//! The admin HTTP listener (shard 0): a tiny HTTP/1.1 GET responder serving
//! Prometheus text at `/metrics`. Metrics are gathered from every shard over
//! the mesh at scrape time, so no shard pays for them in between, and
//! rendered through a prometheus-client registry ([`registry`]);
//! [`metric_families`] lists every family it can show. The metrics clients
//! push (KIP-714, `rill_client_*`) follow, gathered the same way
//! (`runtimes::telemetry::render_all`): their families are named by the
//! clients, so they are not declared.

use crate::oauth_stats::OAuthStats;
use crate::process_stats::ProcessStats;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use kernel::call::OwnerCall;
use kernel::metrics::registry::{Family, MetricsRegistry};
use kernel::metrics::MetricsSnapshot;
use runtimes::cluster_runtime::metrics::ClusterGauges;
use runtimes::Shard;
use std::rc::Rc;

/// Largest HTTP request head read.
const MAX_REQUEST_BYTES: usize = 8 << 10;

/// Accepts admin connections until the listener fails.
pub async fn serve(shard: Rc<Shard>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let shard = shard.clone();
                glommio::spawn_local(async move {
                    if let Err(e) = answer(&shard, stream).await {
                        tracing::debug!(error = %e, "admin request failed");
                    }
                })
                .detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "admin accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// This shard's metrics, with the partition gauge filled in.
pub fn local_snapshot(shard: &Shard) -> MetricsSnapshot {
    let mut metrics = shard.metrics.borrow().clone();
    metrics.partitions = shard.logs.partitions().len() as u64;
    metrics.group_commit = shard.logs.context().fsync_stats.borrow().clone();
    let ctx = shard.logs.context();
    metrics.disk_dirs = ctx
        .config
        .data_dirs()
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let space = ctx.space_of(i);
            kernel::metrics::DirSpace {
                dir: dir.display().to_string(),
                free_bytes: space.free_bytes(),
                low: space.is_low(),
            }
        })
        .collect();
    metrics.queued_request_bytes = shard.request_bytes.in_use();
    metrics.partitions_offline = shard
        .logs
        .partitions()
        .iter()
        .filter(|tp| shard.logs.get(tp).is_some_and(|log| log.is_offline()))
        .count() as u64
        + shard.logs.offline_partitions().len() as u64;
    metrics.recompressed_batches = shard.logs.context().recompressed_batches.get();
    metrics.segments_recycled = shard.logs.context().segments_recycled.get();
    metrics.index_cache = shard.logs.context().index_cache.stats();
    metrics.batch_cache_bytes = shard.logs.context().cache.used_bytes() as u64;
    metrics.batch_cache_max_bytes = shard.logs.context().cache.capacity_bytes() as u64;
    metrics.connection_read_buffer_bytes = shard.read_buffer_bytes.get();
    metrics.io_sizing = shard.logs.context().config.io;
    metrics.stream_chunk_bytes = shard.logs.context().config.stream_min_bytes as u64;
    metrics.cleaner = *shard.logs.context().cleaner.borrow();
    metrics.committed_offsets = shard.runtime().groups.committed_offsets();
    metrics.fetch_sessions = shard.runtime().fetch_sessions.borrow().stats();
    let tiered = shard.runtime().tiered.clone();
    metrics.tiered = tiered.snapshot();
    if shard.id == 0 {
        metrics.remote_store = tiered.store_figures(shard.config.tiered.cache_bytes);
    }
    let replicas = shard.runtime().replicas.clone();
    metrics.replication = replicas.counters.borrow().clone();
    metrics.replication.lag_at_leader = replicas.lag_at_leader();
    metrics.log_end_offsets = shard
        .logs
        .partitions()
        .into_iter()
        .filter_map(|tp| {
            let end = shard.logs.get(&tp)?.log_end_offset();
            Some((tp.topic, tp.partition, end))
        })
        .collect();
    (shard.id, metrics)
}

/// Asks a shard for its metrics.
#[derive(Debug)]
struct MetricsRequest;

impl OwnerCall<runtimes::ShardRuntime> for MetricsRequest {
    type Reply = MetricsSnapshot;

    async fn run(self, shard: Rc<Shard>) -> MetricsSnapshot {
        local_snapshot(&shard)
    }
}

/// Gathers every shard's metrics.
pub async fn collect(shard: &Rc<Shard>) -> Vec<MetricsSnapshot> {
    let mut snapshots = vec![local_snapshot(shard)];
    for other in (0..shard.count).filter(|&s| s != shard.id) {
        if let Ok(snapshot) = shard.call(other, MetricsRequest).await {
            snapshots.push(snapshot);
        }
    }
    snapshots.sort_by_key(|(id, _)| *id);
    snapshots
}

/// The registry of one scrape: the shards' metrics, then the cluster's
/// gauges, then the process's figures, then OAUTHBEARER's key set.
pub fn registry(
    snapshots: Vec<MetricsSnapshot>,
    cluster: ClusterGauges,
    process: ProcessStats,
    oauth: OAuthStats,
) -> MetricsRegistry {
    let mut registry = MetricsRegistry::default();
    kernel::metrics::register(&mut registry, snapshots);
    registry.register(cluster);
    registry.register(process);
    registry.register(oauth);
    registry
}

/// Every metric family `/metrics` can show, in order: name, type, HELP and
/// label names (what `docs/metrics.md` lists).
pub fn metric_families() -> Vec<&'static Family> {
    let registry = registry(
        Vec::new(),
        ClusterGauges::default(),
        ProcessStats::default(),
        OAuthStats::default(),
    );
    registry.families().to_vec()
}

async fn answer(shard: &Rc<Shard>, mut stream: TcpStream) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_BYTES {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let first_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let first_line = String::from_utf8_lossy(first_line);
    let mut parts = first_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => {
            let snapshots = collect(shard).await;
            let oauth = OAuthStats::read(&shard.config, shard.now_ms());
            let cluster = ClusterGauges::read(shard);
            let text = registry(snapshots, cluster, ProcessStats::read(), oauth);
            let clients = runtimes::telemetry::render_all(shard).await;
            ("200 OK", text.render() + &clients)
        }
        ("GET", "/") => ("200 OK", String::from("rill admin: see /metrics\n")),
        ("GET", _) => ("404 Not Found", String::from("not found\n")),
        _ => ("405 Method Not Allowed", String::from("GET only\n")),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.close().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::metrics::registry::Kind;
    use kernel::metrics::{DirSpace, ShardMetrics};
    use std::collections::{BTreeMap, BTreeSet};

    /// A shard with a sample in every labelled family.
    fn busy_shard() -> ShardMetrics {
        let mut m = ShardMetrics::default();
        m.record_request(0, 100, 20);
        m.record_latency(0, 1500);
        m.record_sasl("PLAIN", false);
        m.disk_dirs.push(DirSpace {
            dir: String::from("/data"),
            free_bytes: 10,
            low: false,
        });
        m.committed_offsets.push(("g".into(), "t".into(), 0, 4));
        m.log_end_offsets.push(("t".into(), 0, 9));
        m.replication.follower_lag.insert(("t".into(), 1), 2);
        m.replication.lag_at_leader.push(("t".into(), 0, 2, 3));
        m.remote_store = Some(kernel::metrics::RemoteStoreFigures::default());
        m
    }

    /// Each sample line's name and label names.
    fn samples(text: &str) -> BTreeSet<(String, Vec<String>)> {
        let sample = |line: &str| {
            let series = line.rsplit_once(' ').map_or(line, |(series, _)| series);
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let labels = labels
                .split(',')
                .filter_map(|pair| Some(pair.split_once('=')?.0.to_string()))
                .collect();
            (name.to_string(), labels)
        };
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(sample)
            .collect()
    }

    #[test]
    fn metric_families_are_listed_once() {
        let families = metric_families();
        assert!(families.len() > 50, "{}", families.len());
        let mut names = BTreeSet::new();
        for family in &families {
            for name in family.exposed_names() {
                assert!(names.insert(name.clone()), "{name} declared twice");
            }
            assert!(!family.help.is_empty(), "{}", family.name);
            let labels: BTreeSet<_> = family.labels.iter().collect();
            assert_eq!(labels.len(), family.labels.len(), "{}", family.name);
            if family.kind == Kind::Counter {
                assert!(family.name.ends_with("_total"), "{}", family.name);
            }
        }
    }

    #[test]
    fn every_family_written_is_declared_with_its_labels() {
        let process = ProcessStats {
            cpu_seconds: 1.5,
            resident_memory_bytes: Some(4096),
            context_switches: (10, 2),
        };
        let snapshots = vec![(0, busy_shard()), (1, busy_shard())];
        let keys = security::oauth::keys::KeySetStats {
            fetches_succeeded: 3,
            fetches_failed: 1,
            keys: 2,
            loaded_at_ms: 1_000,
        };
        let oauth = OAuthStats::new(Some(keys), 61_000);
        let text = registry(snapshots, ClusterGauges::default(), process, oauth).render();
        assert!(text.contains("rill_oauth_jwks_age_seconds 60"), "{text}");
        let mut declared: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for family in metric_families() {
            let labels: Vec<String> = family.labels.iter().map(|l| l.to_string()).collect();
            for name in family.exposed_names() {
                let own = name == family.name;
                declared.insert(name, if own { labels.clone() } else { Vec::new() });
            }
        }
        let written = samples(&text);
        let names: BTreeSet<&String> = written.iter().map(|(name, _)| name).collect();
        assert_eq!(names, declared.keys().collect(), "{text}");
        for (name, labels) in &written {
            assert_eq!(labels, &declared[name], "{name}");
        }
        // One descriptor per family; a summary's `_sum` and `_count` are
        // samples of its family, with no descriptor of their own.
        for family in metric_families() {
            for name in family.exposed_names() {
                let descriptors = usize::from(name == family.name);
                let found = text.matches(&format!("# TYPE {name} ")).count();
                assert_eq!(found, descriptors, "{name}");
            }
        }
    }
}

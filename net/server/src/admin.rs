//! The admin HTTP listener (shard 0): a tiny HTTP/1.1 GET responder serving
//! Prometheus text at `/metrics`. Metrics are gathered from every shard over
//! the mesh at scrape time, so no shard pays for them in between.

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use kernel::call::OwnerCall;
use kernel::metrics::{render, MetricsSnapshot};
use kernel::shard::Shard;
use runtimes::group_runtime::GroupRuntime;
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
    metrics.queued_request_bytes = shard
        .service::<api::connection::ShardRequestBytes>()
        .0
        .in_use();
    metrics.partitions_offline = shard
        .logs
        .partitions()
        .iter()
        .filter(|tp| shard.logs.get(tp).is_some_and(|log| log.is_offline()))
        .count() as u64;
    metrics.recompressed_batches = shard.logs.context().recompressed_batches.get();
    metrics.index_cache = shard.logs.context().index_cache.stats();
    metrics.batch_cache_bytes = shard.logs.context().cache.used_bytes() as u64;
    metrics.batch_cache_max_bytes = shard.logs.context().cache.capacity_bytes() as u64;
    metrics.connection_read_buffer_bytes =
        shard.service::<api::connection::ReadBufferBytes>().0.get();
    metrics.io_sizing = shard.logs.context().config.io;
    metrics.stream_chunk_bytes = shard.logs.context().config.stream_min_bytes as u64;
    metrics.cleaner = *shard.logs.context().cleaner.borrow();
    metrics.committed_offsets = shard.service::<GroupRuntime>().committed_offsets();
    let replicas = shard.service::<runtimes::replication_runtime::ReplicaManager>();
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

impl OwnerCall for MetricsRequest {
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
            let mut text = render(&collect(shard).await);
            text.push_str(&runtimes::cluster_runtime::metrics::render(shard));
            text.push_str(&crate::process_stats::ProcessStats::read().render());
            ("200 OK", text)
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

//! Whole-engine benchmarks on the real disk: index lookups, reads from the
//! batch cache, appender throughput, group commit, and the executor's
//! wake-up latency with and without `spin_before_park`.
//!
//! Run: `cargo bench -p rill-engine --bench log -- --warm-up-time 1 --measurement-time 5`
//! The data goes to `$RILL_BENCH_DIR` (default `target/bench-data`): it must
//! be on the disk being measured, not tmpfs.
//!
//! Back of the envelope: a 1 GiB segment with `index.interval.bytes` 4096
//! has 262,144 index entries; a binary search is 18 probes, ~20–40 ns.
//! Group commit: with fdatasync at ~0.1–8 ms, one sync per 1 KiB append caps
//! a partition at 125–10,000 appends/s; 256 appends in flight share one
//! sync, so throughput should grow by two orders of magnitude.

/// The broker binary's allocator, so appends see the same allocation costs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::batch::{BatchBuilder, Compression};
use engine::index::{OffsetIndex, TimeIndex};
use engine::{EngineConfig, FlushPolicy, LogManager, TopicConfig, TopicPartition};
use std::rc::Rc;
use std::time::{Duration, Instant};

fn bench_dir() -> std::path::PathBuf {
    let root = std::env::var("RILL_BENCH_DIR").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench-data").to_string()
    });
    std::fs::create_dir_all(&root).expect("bench dir");
    tempfile::tempdir_in(root).expect("temp dir").keep()
}

fn executor(spin: Option<Duration>) -> glommio::LocalExecutor {
    let mut builder = glommio::LocalExecutorBuilder::default().io_memory(2 << 20);
    if let Some(spin) = spin {
        builder = builder.spin_before_park(spin);
    }
    builder.make().expect("executor")
}

fn one_batch(records: usize, value_bytes: usize) -> Vec<u8> {
    let value = vec![b'x'; value_bytes];
    let mut builder = BatchBuilder::new(0, Compression::None);
    for i in 0..records {
        builder.push(i as i32, 1_700_000_000_000, Some(b"key"), Some(&value), &[]);
    }
    builder.build().expect("batch")
}

fn index_lookups(c: &mut Criterion) {
    // A 1 GiB segment's worth of index: one entry per 4 KiB.
    let entries = (1u64 << 30) / 4096;
    let mut index = OffsetIndex::new();
    let mut time = TimeIndex::new();
    for i in 0..entries as u32 {
        index.append(i * 4 + 1, i * 4096 + 4096);
        time.maybe_append(1_000_000 + i64::from(i), i * 4 + 1);
    }
    let mut group = c.benchmark_group("index_lookup_1GiB_segment");
    let mut probe = 12345u32;
    group.bench_function("offset", |b| {
        b.iter(|| {
            probe = probe.wrapping_mul(1_103_515_245).wrapping_add(12345) % (entries as u32 * 4);
            black_box(index.lookup(black_box(probe)))
        })
    });
    group.bench_function("timestamp", |b| {
        b.iter(|| {
            probe = probe.wrapping_mul(1_103_515_245).wrapping_add(12345) % (entries as u32);
            black_box(time.lookup(black_box(1_000_000 + i64::from(probe))))
        })
    });
    group.finish();
}

/// A tailing fetch served from the batch cache when it is full of 1 KiB
/// batches (the default 64 MiB budget: ~60,000 chunks in one partition):
/// finding the chunk that holds the fetch offset is a binary search.
fn cache_tail_read(c: &mut Criterion) {
    use engine::cache::{read_from_chunks, BatchCache, PartitionChunks};
    let cache = BatchCache::new(64 << 20);
    let partition: PartitionChunks = Default::default();
    let mut batch = one_batch(1, 1024);
    let mut next = 0i64;
    while cache.used_bytes() + batch.len() <= 64 << 20 {
        engine::batch::set_base_offset(&mut batch, next);
        cache.insert(&partition, next, next + 1, batch.clone().into());
        next += 1;
    }
    let mut group = c.benchmark_group("cache_read_64MiB_of_1KiB_batches");
    for (name, behind) in [("tail", 1), ("1000_behind", 1000)] {
        let offset = next - behind;
        group.bench_function(name, |b| {
            b.iter(|| {
                let chunks = partition.borrow();
                black_box(read_from_chunks(
                    &chunks,
                    black_box(offset),
                    1 << 20,
                    i64::MAX,
                ))
            })
        });
    }
    group.finish();
}

/// Stops the manager and removes the bench data.
async fn close(manager: Rc<LogManager>, log: Rc<engine::PartitionLog>) {
    let dir = log.dir().parent().map(|p| p.to_path_buf());
    drop(log);
    manager.shutdown().await.expect("shutdown");
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

async fn open(
    policy: FlushPolicy,
    segment_bytes: &str,
) -> (Rc<LogManager>, Rc<engine::PartitionLog>) {
    open_streaming(policy, segment_bytes, default_stream_min_bytes()).await
}

/// The engine's default `stream_min_bytes`, or the chunk derived from
/// `RILL_BENCH_IO` when it is set.
fn default_stream_min_bytes() -> usize {
    bench_io_sizing()
        .map(|s| s.stream_chunk_bytes)
        .unwrap_or_else(|| EngineConfig::new("unused").stream_min_bytes)
}

/// `RILL_BENCH_IO=read_bandwidth,read_iops,write_bandwidth,write_iops` (the
/// figures of an `io-properties.yaml` entry): the I/O sizes `rill serve`
/// derives from them for one shard; unset, the defaults (no file).
fn bench_io_sizing() -> Option<engine::io_sizing::IoSizing> {
    let text = std::env::var("RILL_BENCH_IO").ok()?;
    let n: Vec<u64> = text
        .split(',')
        .map(|f| f.trim().parse().expect("RILL_BENCH_IO: four integers"))
        .collect();
    assert_eq!(n.len(), 4, "RILL_BENCH_IO: four integers");
    let figures = engine::io_sizing::DiskFigures {
        read_bandwidth: n[0],
        read_iops: n[1],
        write_bandwidth: n[2],
        write_iops: n[3],
    };
    Some(engine::io_sizing::derive(Some(&figures), 1))
}

/// [`open`] with the given `stream_min_bytes` (0: no streamed writes).
async fn open_streaming(
    policy: FlushPolicy,
    segment_bytes: &str,
    stream_min_bytes: usize,
) -> (Rc<LogManager>, Rc<engine::PartitionLog>) {
    let mut config = EngineConfig::new(bench_dir());
    config.flush_policy = policy;
    config.stream_min_bytes = stream_min_bytes;
    config.io = bench_io_sizing().unwrap_or_default();
    let manager = LogManager::open(config, 0, 1).await.expect("open");
    let topic = TopicConfig::default()
        .with_overrides([
            ("segment.bytes", segment_bytes),
            ("max.message.bytes", "2000000"),
        ])
        .expect("config");
    let log = manager
        .create_partition(TopicPartition::new("bench", 0), [0; 16], topic)
        .await
        .expect("create");
    (manager, log)
}

/// 1 MiB appends, one at a time, each waiting for its flush policy.
///
/// Like the broker's produce path the log is handed the request's buffer
/// (`append_owned`); making that buffer (the producer's and the network's
/// work, a copy fio does not do either) is left out of the timed part.
fn appender_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_1MiB");
    group.throughput(Throughput::Bytes(1 << 20));
    group.sample_size(20);
    for policy in [FlushPolicy::Os, FlushPolicy::Fsync] {
        let ex = executor(Some(Duration::from_micros(100)));
        group.bench_with_input(
            BenchmarkId::from_parameter(policy),
            &policy,
            |b, &policy| {
                b.iter_custom(|iters| {
                    ex.run(async move {
                        let (manager, log) = open(policy, "1073741824").await;
                        let payload = one_batch(1, (1 << 20) - 100);
                        let mut elapsed = Duration::ZERO;
                        for _ in 0..iters {
                            let bytes = payload.clone();
                            let started = Instant::now();
                            let r = log.append_owned(bytes, 0).expect("append");
                            log.wait_durable(r.last_offset).await.expect("durable");
                            elapsed += started.elapsed();
                        }
                        close(manager, log).await;
                        elapsed
                    })
                })
            },
        );
    }
    group.finish();
}

/// 1 MiB appends from 4 concurrent producers (a broker's usual case): the
/// validation of one append and the copy into DMA buffers of one round
/// overlap the disk write of another.
fn appender_pipelined(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_1MiB_4_in_flight");
    group.throughput(Throughput::Bytes(4 << 20));
    group.sample_size(20);
    let ex = executor(Some(Duration::from_micros(100)));
    group.bench_function("os", |b| {
        b.iter_custom(|iters| {
            ex.run(async move {
                let (manager, log) = open(FlushPolicy::Os, "1073741824").await;
                let payload = one_batch(1, (1 << 20) - 100);
                // The producers' buffers are made before the clock starts
                // (like the request buffers a broker reads off the network).
                let mut buffers: Vec<Vec<Vec<u8>>> = (0..4)
                    .map(|_| (0..iters).map(|_| payload.clone()).collect())
                    .collect();
                let started = Instant::now();
                let tasks: Vec<_> = buffers
                    .drain(..)
                    .map(|mine| {
                        let log = log.clone();
                        glommio::spawn_local(async move {
                            for bytes in mine {
                                let r = log.append_owned(bytes, 0).expect("append");
                                log.wait_durable(r.last_offset).await.expect("durable");
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await;
                }
                let elapsed = started.elapsed();
                close(manager, log).await;
                elapsed
            })
        })
    });
    group.finish();
}

/// `concurrency` producers each appending 1 KiB batches under `fsync`,
/// every append waiting for its covering fdatasync. Each append's ack
/// latency is kept and the p50/p99 printed with the sync counters.
fn group_commit(c: &mut Criterion) {
    let mut group = c.benchmark_group("group_commit_1KiB_fsync");
    group.sample_size(10);
    // The default, and 256 in flight without streamed writes (the rounds
    // write all their bytes after their appends) to show what streaming buys.
    let stream_default = default_stream_min_bytes();
    eprintln!(
        "  io sizing: {:?}, stream_min_bytes {stream_default}",
        bench_io_sizing().unwrap_or_default()
    );
    for (name, concurrency, stream_min_bytes) in [
        ("in_flight", 1usize, stream_default),
        ("in_flight", 256, stream_default),
        ("in_flight_unstreamed", 256, 0),
    ] {
        group.throughput(Throughput::Elements(concurrency as u64));
        let ex = executor(Some(Duration::from_micros(100)));
        group.bench_with_input(BenchmarkId::new(name, concurrency), &concurrency, |b, &concurrency| {
            b.iter_custom(|iters| {
                ex.run(async move {
                    let (manager, log) =
                        open_streaming(FlushPolicy::Fsync, "1073741824", stream_min_bytes).await;
                    let payload = one_batch(1, 1024);
                    let started = Instant::now();
                    let mut tasks = Vec::with_capacity(concurrency);
                    for _ in 0..concurrency {
                        let log = log.clone();
                        let payload = payload.clone();
                        tasks.push(glommio::spawn_local(async move {
                            let mut acks_us = Vec::with_capacity(iters as usize);
                            for _ in 0..iters {
                                // The producer's buffer: made from a hot copy,
                                // as a request buffer just read off a socket
                                // is (buffers made ahead of the clock are cold
                                // in the CPU caches and measured slower).
                                let bytes = payload.clone();
                                let appended = Instant::now();
                                let r = log.append_owned(bytes, 0).expect("append");
                                log.wait_durable(r.last_offset).await.expect("durable");
                                acks_us.push(appended.elapsed().as_micros() as u32);
                            }
                            acks_us
                        }));
                    }
                    let mut acks_us = Vec::new();
                    for t in tasks {
                        acks_us.extend(t.await);
                    }
                    let elapsed = started.elapsed();
                    acks_us.sort_unstable();
                    let at = |q: f64| acks_us[((acks_us.len() - 1) as f64 * q) as usize];
                    let stats = log.context().fsync_stats.borrow().clone();
                    // A round's time less its write and sync is the CPU
                    // (and scheduling) between one sync and the next write.
                    eprintln!(
                        "  {name} {concurrency}: {} appends, {} fdatasyncs, {:.1} appends/sync, round avg {} us, sync avg {} us max {} us, {} writes avg {} us, {} streamed writes, ack p50 {} us p99 {} us",
                        stats.appends_covered,
                        stats.syncs,
                        stats.appends_covered as f64 / stats.syncs.max(1) as f64,
                        elapsed.as_micros() as u64 / stats.syncs.max(1),
                        stats.sync_us_total / stats.syncs.max(1),
                        stats.sync_us_max,
                        stats.writes,
                        stats.write_us_total / stats.writes.max(1),
                        stats.streamed_writes,
                        at(0.5),
                        at(0.99)
                    );
                    close(manager, log).await;
                    elapsed
                })
            })
        });
    }
    group.finish();
}

/// Append + wait-written latency (no fsync) with and without spinning
/// before parking: without it an io_uring completion waits for the
/// executor's next timer tick.
fn spin_before_park(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_written_latency_os");
    for (name, spin) in [
        ("park", None),
        ("spin_100us", Some(Duration::from_micros(100))),
    ] {
        let ex = executor(spin);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                ex.run(async move {
                    let (manager, log) = open(FlushPolicy::Os, "1073741824").await;
                    let payload = one_batch(1, 100);
                    let started = Instant::now();
                    for _ in 0..iters {
                        let mut bytes = payload.clone();
                        let r = log.append(&mut bytes, 0).expect("append");
                        log.wait_written(r.last_offset).await.expect("written");
                    }
                    let elapsed = started.elapsed();
                    close(manager, log).await;
                    elapsed
                })
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    index_lookups,
    cache_tail_read,
    appender_throughput,
    appender_pipelined,
    group_commit,
    spin_before_park
);
criterion_main!(benches);

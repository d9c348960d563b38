//! Memory per idle partition: creates N partitions (default 10,000) on one
//! shard, writes one small batch to each, reopens them all from disk and
//! reports the resident memory they cost.
//!
//! Run: `cargo run --release -p rill-engine --example idle_partitions -- 10000 [dir]`

/// The broker binary's allocator, so the figure is what `rill serve` pays.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use engine::batch::{BatchBuilder, Compression};
use engine::{EngineConfig, LogManager, TopicConfig, TopicPartition};
use std::time::Instant;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let dir = args
        .next()
        .unwrap_or_else(|| "target/idle-partitions".to_string());
    let reopen_only = args.next().as_deref() == Some("--reopen-only");
    if !reopen_only {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let executor = glommio::LocalExecutorBuilder::default()
        .io_memory(2 << 20)
        .make()
        .expect("executor");
    executor.run(async move {
        let config = EngineConfig::new(&dir);
        let started = Instant::now();
        if !reopen_only {
            let manager = LogManager::open(config.clone(), 0, 1).await.expect("open");
            for p in 0..count as i32 {
                let log = manager
                    .create_partition(TopicPartition::new("idle", p), [3; 16], TopicConfig::default())
                    .await
                    .expect("create");
                let mut builder = BatchBuilder::new(0, Compression::None);
                builder.push(0, 1_700_000_000_000, Some(b"k"), Some(b"v"), &[]);
                let mut batch = builder.build().expect("batch");
                log.append(&mut batch, 0).expect("append");
            }
            manager.shutdown().await.expect("shutdown");
            eprintln!("created {count} partitions in {:.1} s", started.elapsed().as_secs_f64());
            // Measure the reopen in a fresh process, so freed memory of the
            // creation phase does not hide the cost.
            let status = std::process::Command::new(std::env::current_exe().expect("exe"))
                .args([count.to_string(), dir.clone(), "--reopen-only".to_string()])
                .status()
                .expect("child");
            assert!(status.success());
            return;
        }
        let before = rss_bytes();
        let started = Instant::now();
        let manager = LogManager::open(config, 0, 1).await.expect("reopen");
        let after = rss_bytes();
        assert_eq!(manager.partitions().len(), count);
        println!(
            "reopened {count} partitions in {:.1} s: RSS {} -> {} bytes, {} bytes per idle partition",
            started.elapsed().as_secs_f64(),
            before,
            after,
            after.saturating_sub(before) / count as u64
        );
        drop(manager);
    });
}

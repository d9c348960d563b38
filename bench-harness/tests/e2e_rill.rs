//! End to end against the real rill broker: start `rill serve` on a free
//! port with a temp data dir, run a 3-second produce + consume workload, and
//! check that everything produced was consumed with sane latencies.
//!
//! The binary is `$RILL_BIN`, else `<workspace>/target/debug/rill`. Ignored
//! until the broker is usable: `cargo test -p rill-bench --test e2e_rill -- --ignored`.

use bench_harness::runner::{run_workload, RunOptions};
use bench_harness::workload::{Compression, KeyDistribution, MessageSize, Workload};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Rill {
    child: Child,
    addr: String,
    _data_dir: tempfile::TempDir,
}

impl Drop for Rill {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rill_bin() -> PathBuf {
    std::env::var_os("RILL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/debug/rill"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_rill() -> Rill {
    let bin = rill_bin();
    assert!(
        bin.exists(),
        "no rill binary at {} (set RILL_BIN)",
        bin.display()
    );
    let data_dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let child = Command::new(&bin)
        .args([
            "serve",
            "--listen",
            &addr,
            "--admin-listen",
            &admin,
            "--data-dir",
        ])
        .arg(data_dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let rill = Rill {
        child,
        addr,
        _data_dir: data_dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&rill.addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "rill did not listen on {}",
            rill.addr
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    rill
}

fn workload() -> Workload {
    Workload {
        name: "e2e-rill".into(),
        partitions_per_topic: 4,
        message_size: MessageSize::Fixed(512),
        producers_per_topic: 2,
        consumers_per_topic: 2,
        producer_rate_msgs_per_s: 5_000,
        warmup_duration_s: 0,
        test_duration_s: 3,
        ..Workload::default()
    }
}

async fn check(workload: Workload) {
    let rill = start_rill();
    let options = RunOptions {
        quiet: true,
        ..RunOptions::default()
    };
    let result = run_workload(&rill.addr, &workload, &options).await.unwrap();
    assert_eq!(result.errors, 0, "{:?}", result.error_samples);
    assert!(result.total_produced_messages > 0);
    assert_eq!(
        result.total_produced_messages,
        result.total_consumed_messages
    );
    let publish = &result.publish_latency_us;
    assert!(
        publish.count > 0 && publish.p50_us > 0 && publish.p50_us <= publish.p99_us,
        "{publish:?}"
    );
    assert!(publish.p99_us < 5_000_000, "{publish:?}");
    let end_to_end = &result.end_to_end_latency_us;
    assert!(
        end_to_end.count > 0 && end_to_end.p99_us < 10_000_000,
        "{end_to_end:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the rill broker"]
async fn rill_produce_consume_3s() {
    check(workload()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the rill broker"]
async fn rill_keyed_compressed_3s() {
    check(Workload {
        key_distribution: KeyDistribution::RoundRobin,
        compression: Compression::Zstd,
        ..workload()
    })
    .await;
}

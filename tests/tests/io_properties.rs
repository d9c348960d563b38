//! `rill serve` sizes its I/O from the `io-properties.yaml` `rill iotune`
//! writes: the derived sizes show on /metrics and in the start log, produce
//! and consume work with them; without a file the defaults; a file that does
//! not parse stops the start with a message naming it.

use rill_tests::kafka::{consume_all, create_topic, produce_all, producer};
use rill_tests::{data_dir, free_port, Broker};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// A hand-written file: 1 GB/s and 100 k IOPS for writes, 3 GB/s and 50 k
/// IOPS for reads, on the root mountpoint (which holds every data dir).
const FILE: &str = "# hand-written for the test\ndisks:\n  - mountpoint: /\n    read_iops: 50000\n    read_bandwidth: 3000000000\n    write_iops: 100000\n    write_bandwidth: 1000000000\n";

/// What `engine::io_sizing::derive` makes of [`FILE`] on 2 shards, worked
/// out by hand (each rounded down to 4 KiB blocks):
/// - in flight: 1 GB/s × 2 ms ÷ 2 shards = 1,000,000 → 999,424;
/// - stream chunk: 1 GB/s × 40 µs = 40,000 → 36,864;
/// - read-ahead: 3 GB/s ÷ 50 k IOPS = 60,000 → 57,344.
const MEASURED: (i64, i64, i64) = (999_424, 36_864, 57_344);
/// The built-in sizes (no file).
const DEFAULTS: (i64, i64, i64) = (64 << 20, 64 << 10, 64 << 10);

/// The three sizes on /metrics, checked to be the same on every shard.
fn io_sizes(broker: &Broker, shards: i64) -> (i64, i64, i64) {
    let per_shard = |name: &str| {
        let sum = broker.metric_sum(name);
        assert_eq!(
            sum % shards,
            0,
            "{name}: {sum} is not the same on {shards} shards"
        );
        sum / shards
    };
    (
        per_shard("rill_io_inflight_write_bytes"),
        per_shard("rill_io_stream_chunk_bytes"),
        per_shard("rill_io_read_ahead_bytes"),
    )
}

/// Produces small and large records to a new topic and reads them back.
async fn produce_and_consume(broker: &Broker, topic: &str) {
    create_topic(&broker.bootstrap(), topic, 2, &[]).await;
    let p = producer(&broker.bootstrap(), &[("acks", "all")]);
    // Small records go through the stream writer; 300 KiB ones are written
    // in several pieces, each waiting for the shard's in-flight budget.
    let records: Vec<_> = (0..200)
        .map(|i| {
            let size = if i % 20 == 0 { 300 << 10 } else { 100 };
            let mut value = format!("v{i}-").into_bytes();
            value.resize(size, b'x');
            (Some(format!("k{i}").into_bytes()), value)
        })
        .collect();
    produce_all(&p, topic, &records, None).await;
    let mut got: Vec<Vec<u8>> = consume_all(
        &broker.bootstrap(),
        topic,
        2,
        records.len(),
        Duration::from_secs(30),
        &[],
    )
    .into_iter()
    .filter_map(|r| r.value)
    .collect();
    let mut want: Vec<Vec<u8>> = records.into_iter().map(|(_, v)| v).collect();
    got.sort();
    want.sort();
    assert!(
        got == want,
        "consumed {} records, not the 200 produced",
        got.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_in_the_data_dir_sizes_the_io() {
    let dir = data_dir();
    let file = dir.path().join("io-properties.yaml");
    std::fs::write(&file, FILE).expect("write io-properties.yaml");
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    assert_eq!(io_sizes(&broker, 2), MEASURED);
    assert_eq!(broker.metric_sum("rill_io_sizes_measured"), 2);
    let log = broker.log();
    let line = log
        .lines()
        .find(|l| l.contains("io sizes:"))
        .unwrap_or_else(|| panic!("no io sizes line in:\n{log}"));
    assert!(
        line.contains(&file.display().to_string()) && line.contains("mountpoint /"),
        "{line}"
    );
    assert!(line.contains("inflight_write_bytes=999424"), "{line}");
    produce_and_consume(&broker, "io-measured").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_key_names_a_file_elsewhere() {
    let dir = data_dir();
    let elsewhere = data_dir();
    let file = elsewhere.path().join("disk.yaml");
    std::fs::write(&file, FILE).expect("write disk.yaml");
    let config = elsewhere.path().join("server.properties");
    std::fs::write(
        &config,
        format!("rill.io.properties.file={}\n", file.display()),
    )
    .expect("write server.properties");
    let broker = Broker::start(
        RILL,
        dir.path(),
        &["--cores", "2", "--config", config.to_str().expect("utf-8")],
    );
    assert_eq!(io_sizes(&broker, 2), MEASURED);
    assert!(broker.log().contains(&file.display().to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_file_the_defaults() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    assert_eq!(io_sizes(&broker, 2), DEFAULTS);
    assert_eq!(broker.metric_sum("rill_io_sizes_measured"), 0);
    let log = broker.log();
    assert!(
        log.lines()
            .any(|l| l.contains("io sizes:") && l.contains("from defaults")),
        "{log}"
    );
    produce_and_consume(&broker, "io-defaults").await;
}

/// Runs `rill serve` on `dir` with `args`; it must exit at start with code
/// 2 and `reason` in its output.
fn refuses_to_start(dir: &Path, args: &[&str], reason: &str) {
    let output = Command::new(RILL)
        .args(["serve", "--listen"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--admin-listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("rill runs");
    rill_tests::assert_refused_start(&output, &[reason]);
}

#[test]
fn a_malformed_file_refuses_the_start() {
    // In the data dir, found by default.
    let dir = data_dir();
    let file = dir.path().join("io-properties.yaml");
    std::fs::write(
        &file,
        "disks:\n  - mountpoint: /\n    write_bandwidth: fast\n",
    )
    .expect("write");
    refuses_to_start(dir.path(), &[], &format!("{}:3", file.display()));
    // Named by the flag: a file that is not there is an error too.
    let other = data_dir();
    let missing = other.path().join("missing.yaml");
    refuses_to_start(
        other.path(),
        &["--io-properties", missing.to_str().expect("utf-8")],
        &missing.display().to_string(),
    );
    // Several disks, none holding the data dir.
    let elsewhere = other.path().join("elsewhere.yaml");
    std::fs::write(
        &elsewhere,
        "disks:\n  - mountpoint: /nonexistent/a\n    write_bandwidth: 1\n  - mountpoint: /nonexistent/b\n    write_bandwidth: 2\n",
    )
    .expect("write");
    refuses_to_start(
        other.path(),
        &["--io-properties", elsewhere.to_str().expect("utf-8")],
        "no entry's mountpoint contains the data dir",
    );
}

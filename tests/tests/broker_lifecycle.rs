//! A broker's life: restarts after SIGTERM and SIGKILL keep every
//! acknowledged message (fsync policy), also when small batches stream their
//! blocks to disk, topics are deleted, metrics are served, and Debian's kcat
//! (librdkafka 2.0.2, an old client) produces and consumes.

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rill_tests::kafka::{
    assert_delivered_as_consumed, assert_offsets_contiguous, client_config, consume_all,
    consume_to_end, create_topic, produce_all, producer,
};
use rill_tests::paced::PacedWrites;
use rill_tests::{data_dir, http_get, Broker};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

fn values(prefix: &str, n: usize) -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                Some(format!("k{}", i % 7).into_bytes()),
                format!("{prefix}-{i}").into_bytes(),
            )
        })
        .collect()
}

/// The sum over the shards of a Prometheus series in a `/metrics` response.
fn metric_total(metrics: &str, name: &str) -> i64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .sum()
}

/// The value of an unlabelled series (the process metrics).
fn metric_value(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} "))?.trim().parse().ok())
}

/// Sorted values of every record of `topic`, which must hold `expected`.
fn consumed_values(bootstrap: &str, topic: &str, partitions: i32, expected: usize) -> Vec<Vec<u8>> {
    let got = consume_all(
        bootstrap,
        topic,
        partitions,
        expected,
        Duration::from_secs(30),
        &[],
    );
    let mut values: Vec<Vec<u8>> = got.into_iter().filter_map(|r| r.value).collect();
    values.sort();
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_keep_every_acknowledged_message() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--flush-policy", "fsync"]);
    create_topic(&broker.bootstrap(), "durable", 3, &[]).await;
    let mut acknowledged: Vec<Vec<u8>> = Vec::new();
    let mut sent_total = 0;
    for (round, signal) in [(0, libc::SIGTERM), (1, libc::SIGKILL), (2, libc::SIGKILL)] {
        // The stop lands while records are still being sent: after 100
        // acknowledgements of 500 paced ones.
        let batch = values(&format!("round{round}"), 500);
        let p = producer(
            &broker.bootstrap(),
            &[("acks", "all"), ("message.timeout.ms", "3000")],
        );
        let writes = PacedWrites::start(p, "durable", None, batch.clone(), PACE);
        writes.wait_acked(100, Duration::from_secs(30));
        assert!(writes.sent() < batch.len(), "the stop lands mid-write");
        if signal == libc::SIGKILL {
            broker.kill();
        } else {
            let code = broker.stop_with(signal);
            assert_eq!(code, Some(0), "graceful stop exits 0:\n{}", broker.log());
        }
        // Nothing sent after the broker is gone can be in the log.
        sent_total += writes.sent();
        let acked = writes.finish().await;
        acknowledged.extend(acked.iter().map(|&(i, _, _)| batch[i].1.clone()));
        broker.restart();
        // Every acknowledged record is there; unacknowledged ones may be.
        let got = consume_to_end(&broker.bootstrap(), "durable", 3, Duration::from_secs(30));
        let got: std::collections::HashSet<Vec<u8>> =
            got.into_iter().filter_map(|r| r.value).collect();
        assert!(
            got.len() <= sent_total,
            "nothing read back that was not sent"
        );
        for value in &acknowledged {
            assert!(
                got.contains(value),
                "after round {round} (signal {signal}): {value:?} lost"
            );
        }
    }
}

/// The pace of the writes a stop lands among: 500 records in about 2.5 s.
const PACE: Duration = Duration::from_millis(5);

/// Small batches from producers with several requests in flight, with the
/// broker streaming from the first whole block (`rill.stream_min_bytes`):
/// the broker reports streamed writes, and every acknowledged message reads
/// back whole, before and after a SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_small_batches_survive_a_kill() {
    let dir = data_dir();
    let config = dir.path().join("rill.toml");
    std::fs::write(&config, "\"rill.stream_min_bytes\" = 4096\n").expect("config");
    let config = config.to_string_lossy().to_string();
    let mut broker = Broker::start(
        RILL,
        dir.path(),
        &["--flush-policy", "fsync", "--config", &config],
    );
    create_topic(&broker.bootstrap(), "streamed", 1, &[]).await;
    // Batches of a few 1 KiB records: under 4 KiB each, so every round
    // has whole blocks to stream.
    let small_batches = [("acks", "all"), ("linger.ms", "1"), ("batch.size", "3500")];
    let padded = |prefix: &str| -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
        values(prefix, 2000)
            .into_iter()
            .map(|(k, mut v)| {
                v.resize(1000, b'.');
                (k, v)
            })
            .collect()
    };
    let (a, b) = (padded("a"), padded("b"));
    let (pa, pb) = (
        producer(&broker.bootstrap(), &small_batches),
        producer(&broker.bootstrap(), &small_batches),
    );
    let (delivered_a, delivered_b) = tokio::join!(
        produce_all(&pa, "streamed", &a, None),
        produce_all(&pb, "streamed", &b, None)
    );
    let consumed = consume_to_end(&broker.bootstrap(), "streamed", 1, Duration::from_secs(30));
    let sent: Vec<_> = a.iter().chain(&b).cloned().collect();
    let delivered: Vec<_> = delivered_a.into_iter().chain(delivered_b).collect();
    assert_delivered_as_consumed(&sent, &delivered, &consumed);
    assert_offsets_contiguous(&consumed);
    drop((pa, pb));
    let metrics = http_get(broker.admin_addr, "/metrics");
    assert!(
        metric_total(&metrics, "rill_disk_streamed_writes_total") > 0,
        "the rounds streamed blocks: {metrics}"
    );
    let mut want: Vec<Vec<u8>> = a.iter().chain(&b).map(|(_, v)| v.clone()).collect();
    want.sort();
    assert_eq!(
        consumed_values(&broker.bootstrap(), "streamed", 1, want.len()),
        want
    );
    // A third producer's small batches, cut by a SIGKILL mid-write.
    let c = padded("c");
    let pc = producer(
        &broker.bootstrap(),
        &[&small_batches[..], &[("message.timeout.ms", "3000")]].concat(),
    );
    let writes = PacedWrites::start(pc, "streamed", None, c.clone(), PACE);
    writes.wait_acked(200, Duration::from_secs(30));
    assert!(writes.sent() < c.len(), "the kill lands mid-write");
    broker.kill();
    let acked = writes.finish().await;
    broker.restart();
    let got: std::collections::HashSet<Vec<u8>> =
        consume_to_end(&broker.bootstrap(), "streamed", 1, Duration::from_secs(30))
            .into_iter()
            .filter_map(|r| r.value)
            .collect();
    let acked_c = acked.iter().map(|&(i, _, _)| &c[i].1);
    for value in want.iter().chain(acked_c) {
        assert!(got.contains(value), "after SIGKILL: {value:?} lost");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_topics_are_gone_and_metrics_are_served() {
    let dir = data_dir();
    let started = std::time::Instant::now();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "doomed", 2, &[]).await;
    let p = producer(&bootstrap, &[("acks", "1")]);
    produce_all(&p, "doomed", &values("d", 50), None).await;
    let cpu_first_s = metric_value(
        &http_get(broker.admin_addr, "/metrics"),
        "process_cpu_seconds_total",
    )
    .expect("process_cpu_seconds_total served");
    assert!(dir.path().join("doomed-0").exists());
    let admin: AdminClient<DefaultClientContext> =
        client_config(&bootstrap).create().expect("admin");
    let results = admin
        .delete_topics(&["doomed"], &AdminOptions::new())
        .await
        .expect("delete request");
    for r in results {
        r.expect("deleted");
    }
    let metadata = admin
        .inner()
        .fetch_metadata(None, Duration::from_secs(5))
        .expect("metadata");
    assert!(
        !metadata.topics().iter().any(|t| t.name() == "doomed"),
        "topic gone from metadata"
    );
    assert!(
        !dir.path().join("doomed-0").exists(),
        "partition directory removed"
    );
    let metrics = http_get(broker.admin_addr, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(metrics.contains("# TYPE"), "prometheus text: {metrics}");
    let total = |name: &str| metric_total(&metrics, name);
    // The group commit wrote and synced the 50 records (fsync is the
    // default policy); an O_DIRECT write takes microseconds, never zero.
    assert!(total("rill_fsyncs_total") > 0, "fsyncs exported: {metrics}");
    assert!(
        total("rill_disk_writes_total") > 0,
        "writes exported: {metrics}"
    );
    assert!(
        total("rill_disk_write_microseconds_total") > 0,
        "write time exported: {metrics}"
    );
    // Each of those calls is in the latency summaries too.
    for summary in [
        "rill_fsync_latency_seconds_count",
        "rill_disk_write_latency_seconds_count",
    ] {
        let count = metric_value(&metrics, summary).unwrap_or(0.0);
        assert!(count >= 1.0, "{summary}: {metrics}");
    }
    // The process metrics, under Prometheus's standard names: a resident
    // set between 1 MiB and 64 GiB, a CPU counter that grew while the broker
    // deleted a topic and answered Metadata, and no more CPU than the wall
    // time since start on every core.
    assert!(metrics.contains("# TYPE process_cpu_seconds_total counter"));
    assert!(metrics.contains("# TYPE process_resident_memory_bytes gauge"));
    let rss_bytes = metric_value(&metrics, "process_resident_memory_bytes").expect("RSS served");
    assert!(
        (1_048_576.0..68_719_476_736.0).contains(&rss_bytes),
        "RSS {rss_bytes}"
    );
    let cpu_s = metric_value(&metrics, "process_cpu_seconds_total").expect("CPU served");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(
        cpu_first_s > 0.0 && cpu_s > cpu_first_s,
        "CPU {cpu_first_s} s then {cpu_s} s"
    );
    assert!(
        cpu_s < started.elapsed().as_secs_f64() * cores,
        "CPU {cpu_s} s in {:?} on {cores} cores",
        started.elapsed()
    );
}

#[test]
fn kcat_produces_and_consumes() {
    if rill_tests::host_command("kcat").arg("-V").output().is_err() {
        panic!("kcat is not installed (apt-get install kcat); .ci/run installs it");
    }
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    let input: String = (0..100).map(|i| format!("line-{i}\n")).collect();
    let mut produce = rill_tests::host_command("kcat")
        .args([
            "-b",
            &bootstrap,
            "-P",
            "-t",
            "kcat-topic",
            "-X",
            "broker.address.family=v4",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("kcat -P");
    {
        use std::io::Write;
        let mut stdin = produce.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).expect("write");
    }
    assert!(
        produce.wait().expect("kcat exits").success(),
        "kcat -P failed:\n{}",
        broker.log()
    );
    let out = rill_tests::host_command("kcat")
        .args([
            "-b",
            &bootstrap,
            "-C",
            "-t",
            "kcat-topic",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-X",
            "broker.address.family=v4",
        ])
        .output()
        .expect("kcat -C");
    assert!(
        out.status.success(),
        "kcat -C failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), input);
}

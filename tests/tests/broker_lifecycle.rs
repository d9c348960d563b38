//! A broker's life: restarts after SIGTERM and SIGKILL keep every
//! acknowledged message (fsync policy), topics are deleted, metrics are
//! served, and Debian's kcat (librdkafka 2.0.2, an old client) produces and
//! consumes.

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rill_tests::kafka::{client_config, consume_all, create_topic, produce_all, producer};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_keep_every_acknowledged_message() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--flush-policy", "fsync"]);
    create_topic(&broker.bootstrap(), "durable", 3, &[]).await;
    let mut acknowledged = Vec::new();
    for (round, signal) in [(0, libc::SIGTERM), (1, libc::SIGKILL), (2, libc::SIGKILL)] {
        let batch = values(&format!("round{round}"), 500);
        let p = producer(&broker.bootstrap(), &[("acks", "all")]);
        let delivered = produce_all(&p, "durable", &batch, None).await;
        assert!(delivered.iter().all(|&(_, o)| o >= 0));
        acknowledged.extend(batch);
        drop(p);
        let code = broker.stop_with(signal);
        if signal == libc::SIGTERM {
            assert_eq!(code, Some(0), "graceful stop exits 0:\n{}", broker.log());
        }
        broker.restart();
        let got = consume_all(
            &broker.bootstrap(),
            "durable",
            3,
            acknowledged.len(),
            Duration::from_secs(30),
            &[],
        );
        let mut got_values: Vec<Vec<u8>> = got.into_iter().filter_map(|r| r.value).collect();
        let mut want: Vec<Vec<u8>> = acknowledged.iter().map(|(_, v)| v.clone()).collect();
        got_values.sort();
        want.sort();
        assert_eq!(got_values, want, "after round {round} (signal {signal})");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_topics_are_gone_and_metrics_are_served() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "doomed", 2, &[]).await;
    let p = producer(&bootstrap, &[("acks", "1")]);
    produce_all(&p, "doomed", &values("d", 50), None).await;
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
    let total = |name: &str| -> i64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
            .sum()
    };
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
}

#[test]
fn kcat_produces_and_consumes() {
    if std::process::Command::new("kcat")
        .arg("-V")
        .output()
        .is_err()
    {
        panic!("kcat is not installed (apt-get install kcat); .ci/run installs it");
    }
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    let input: String = (0..100).map(|i| format!("line-{i}\n")).collect();
    let mut produce = std::process::Command::new("kcat")
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
    let out = std::process::Command::new("kcat")
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

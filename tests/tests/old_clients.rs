//! Clients written for Kafka 2.x: rill accepts every request version Kafka
//! 3.9 accepts (the versions KIP-896 removed in Kafka 4.0 included), except
//! Produce below v3 and Fetch below v4, which would need the pre-v2 message
//! formats (Kafka 4.0's floor, kept).
//!
//! - The advertised ranges, old versions the `kafka-protocol` crate still
//!   speaks (Metadata v0's empty list meaning every topic, FindCoordinator
//!   v0) through `rill_tests::raw`, and the floors still refused.
//! - `tests/python/old_versions.py`: every version Kafka 4.0 dropped that a
//!   client may send (OffsetCommit v0/v1, OffsetFetch v0, ListOffsets v0,
//!   CreateTopics v0/v1, DeleteTopics v0, DescribeConfigs v0,
//!   DescribeLogDirs v0, OffsetForLeaderEpoch v0/v1), OffsetCommit v2's
//!   `retention_time_ms` and v1's commit timestamp (expiry counts from
//!   them), the v0 of AlterConfigs, DeleteRecords, CreatePartitions and
//!   DeleteGroups (which Kafka 4.0 kept), and a JoinGroup v0 →
//!   SyncGroup v0 → Heartbeat v0 → OffsetCommit v1 → LeaveGroup v0 cycle,
//!   encoded and decoded by kafka-python's own old definitions.
//! - Whole old clients that produce, read part of a topic in a group,
//!   commit, close and resume from the commit: kafka-python pinned to
//!   `api_version=(0, 11)` (also a committed and an aborted transaction, with
//!   the transaction APIs at v0), and Debian's sarama 1.22 set to Kafka 2.2 (its
//!   commits are OffsetCommit v1; skipped with a message when `go` or
//!   `golang-github-shopify-sarama-dev` is missing). The broker logs each
//!   request's version at debug; the tests print what each client sent.

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;
use rill_tests::kafka::{create_topic, produce_all, producer};
use rill_tests::python::{python_script, require_kafka_python};
use rill_tests::raw::{exchange, request};
use rill_tests::{data_dir, Broker};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Logs every request's API and version (`api::connection` at debug).
const LOG_VERSIONS: (&str, &str) = ("RUST_LOG", "info,api::connection=debug");

/// Kafka 3.9's lowest version of each API rill serves, where it is not 0
/// (Kafka 4.0 raised OffsetCommit to 2, OffsetFetch, ListOffsets,
/// DeleteTopics, DescribeConfigs and DescribeLogDirs to 1, CreateTopics and
/// OffsetForLeaderEpoch to 2). Produce and Fetch keep Kafka 4.0's floor:
/// below it the records are the pre-v2 message formats.
/// WriteTxnMarkers (broker to broker) keeps v1. The ACL APIs keep Kafka
/// 4.0's v1 (KIP-896; the codec decodes v1+; v0 is pre-2.0 admin tools').
/// SaslHandshake lists v0 as Kafka does (older librdkafka needs it listed)
/// but answers a v0 exchange UNSUPPORTED_VERSION (its raw tokens are not
/// read; tests/tests/sasl.rs). The share group client APIs (KIP-932) start
/// at Kafka 4.1's v1 (their v0 was 4.0's early access).
fn expected_min(api_key: i16) -> i16 {
    let share_client_apis = [
        ApiKey::ShareGroupHeartbeat,
        ApiKey::ShareGroupDescribe,
        ApiKey::ShareFetch,
        ApiKey::ShareAcknowledge,
    ];
    match api_key {
        k if share_client_apis.iter().any(|api| *api as i16 == k) => 1,
        k if k == ApiKey::Produce as i16 => 3,
        k if k == ApiKey::Fetch as i16 => 4,
        k if k == ApiKey::WriteTxnMarkers as i16
            || k == ApiKey::CreateAcls as i16
            || k == ApiKey::DescribeAcls as i16
            || k == ApiKey::DeleteAcls as i16 =>
        {
            1
        }
        _ => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_3_9_request_versions_are_served() {
    require_kafka_python();
    let dir = data_dir();
    // Offsets committed with a retention (OffsetCommit v2–v4) expire within
    // a check interval.
    let config = dir.path().join("rill.toml");
    std::fs::write(&config, "\"offsets.retention.check.interval.ms\" = 200\n").expect("config");
    let config = config.to_string_lossy().to_string();
    let broker = Broker::start(RILL, dir.path(), &["--config", &config]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "old", 2, &[]).await;
    let p = producer(&bootstrap, &[("acks", "all")]);
    let records: Vec<_> = (0..10)
        .map(|i| (None, format!("old-{i}").into_bytes()))
        .collect();
    let delivered = produce_all(&p, "old", &records, Some(0)).await;
    assert_eq!(delivered.last(), Some(&(0, 9)));

    // ApiVersions v0: Kafka 3.9's floors.
    let versions: ApiVersionsResponse = request(
        broker.addr,
        ApiKey::ApiVersions,
        0,
        &ApiVersionsRequest::default(),
    )
    .expect("ApiVersions v0");
    assert_eq!(versions.error_code, 0);
    for key in &versions.api_keys {
        assert_eq!(
            key.min_version,
            expected_min(key.api_key),
            "lowest version of API {}",
            key.api_key
        );
    }
    let advertised: BTreeSet<i16> = versions.api_keys.iter().map(|k| k.api_key).collect();
    for api in [
        ApiKey::OffsetCommit,
        ApiKey::OffsetFetch,
        ApiKey::ListOffsets,
        ApiKey::CreateTopics,
        ApiKey::DeleteTopics,
        ApiKey::DescribeConfigs,
        ApiKey::DescribeLogDirs,
        ApiKey::OffsetForLeaderEpoch,
    ] {
        assert!(advertised.contains(&(api as i16)), "{api:?} advertised");
    }

    // Metadata v0: an empty list asks for every topic.
    let metadata: MetadataResponse = request(
        broker.addr,
        ApiKey::Metadata,
        0,
        &MetadataRequest::default().with_topics(Some(Vec::new())),
    )
    .expect("Metadata v0");
    let old = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "old"))
        .expect("Metadata v0 with an empty list lists every topic");
    assert_eq!(old.partitions.len(), 2);

    // FindCoordinator v0: a group key, no key type.
    let coordinator: FindCoordinatorResponse = request(
        broker.addr,
        ApiKey::FindCoordinator,
        0,
        &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("old-group")),
    )
    .expect("FindCoordinator v0");
    assert_eq!(coordinator.error_code, 0);
    assert_eq!(coordinator.port, i32::from(broker.addr.port()));

    // Below the floors, and above the tops: the connection is closed (Kafka
    // does the same), and the broker carries on.
    for (api, version) in [
        (ApiKey::Produce, 2),
        (ApiKey::Fetch, 3),
        (ApiKey::OffsetCommit, 10),
        (ApiKey::ListOffsets, 9),
    ] {
        assert!(
            is_refused(&broker, api as i16, version),
            "{api:?} v{version} is refused"
        );
    }
    let mut socket = TcpStream::connect(broker.addr).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let again: ApiVersionsResponse = exchange(
        &mut socket,
        ApiKey::ApiVersions,
        0,
        9,
        &ApiVersionsRequest::default(),
    )
    .expect("the broker still answers");
    assert_eq!(again.error_code, 0);

    // The versions Kafka 4.0 dropped, through kafka-python's definitions.
    let out = run(Command::new("python3")
        .arg(python_script("old_versions.py"))
        .arg(&bootstrap));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "old_versions.py failed:\n{stdout}\n{}\n--- rill log ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        broker.log()
    );
    for check in [
        "CreateTopics v0",
        "CreateTopics v1",
        "Metadata v0 empty list lists all topics",
        "DeleteTopics v0",
        "ListOffsets v0",
        "OffsetCommit v0 then OffsetFetch v0/v1",
        "OffsetCommit v1 without a generation",
        "OffsetCommit v2 retention_time_ms, v1 commit timestamp",
        "FindCoordinator v0",
        "JoinGroup/SyncGroup/Heartbeat v0",
        "OffsetCommit v1 in a generation",
        "DescribeGroups/ListGroups v0",
        "LeaveGroup v0 then a simple commit",
        "DescribeConfigs v0",
        "DescribeLogDirs v0",
        "OffsetForLeaderEpoch v0/v1",
        "AlterConfigs v0, then DescribeConfigs v0 shows the override",
        "DeleteRecords v0, then ListOffsets v0 earliest",
        "CreatePartitions v0",
        "DeleteGroups v0",
    ] {
        assert!(
            stdout.lines().any(|l| l == format!("ok {check}")),
            "check `{check}` ran:\n{stdout}"
        );
    }
}

#[test]
fn kafka_python_pinned_to_kafka_0_11_resumes_from_its_commit() {
    require_kafka_python();
    let dir = data_dir();
    let broker = Broker::start_with_env(RILL, dir.path(), &[], &[LOG_VERSIONS]);
    let out = run(Command::new("python3")
        .arg(python_script("old_client.py"))
        .args([
            &broker.bootstrap(),
            "py-old",
            "py-old-group",
            "0.11",
            "20",
            "12",
        ]));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "old_client.py failed:\n{stdout}\n{}\n--- rill log ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        broker.log()
    );
    let (first, second) = offsets_read(&stdout, "\"first\": [", "\"second\": [");
    assert_eq!(first, (0..12).collect::<Vec<_>>(), "first read: {stdout}");
    assert_eq!(second, (12..20).collect::<Vec<_>>(), "resumed: {stdout}");
    // The transactions: only the committed one is read, and its offset landed.
    assert!(
        stdout.contains(
            r#""committed": ["kept-0", "kept-1", "kept-2", "kept-3", "kept-4"], "txn_offset": 3"#
        ),
        "transactions: {stdout}"
    );
    let sent = versions_sent(&broker.log());
    eprintln!("kafka-python api_version=(0, 11) sent: {sent:?}");
    for expected in [
        ("Produce", 3),
        ("OffsetCommit", 3),
        ("JoinGroup", 2),
        ("InitProducerId", 0),
        ("AddPartitionsToTxn", 0),
        ("AddOffsetsToTxn", 0),
        ("TxnOffsetCommit", 0),
        ("EndTxn", 0),
    ] {
        assert!(
            sent.contains(&(expected.0.to_string(), expected.1)),
            "{expected:?} in {sent:?}"
        );
    }
}

#[test]
fn sarama_1_22_for_kafka_2_2_resumes_from_its_commit() {
    let Some(binary) = build_sarama_client() else {
        return;
    };
    let dir = data_dir();
    let broker = Broker::start_with_env(RILL, dir.path(), &[], &[LOG_VERSIONS]);
    let out = run(Command::new(&binary).args([
        &broker.bootstrap(),
        "sarama-old",
        "sarama-group",
        "20",
        "12",
    ]));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "sarama client failed:\n{stdout}\n{}\n--- rill log ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        broker.log()
    );
    let (first, second) = offsets_read(&stdout, "first=[", "second=[");
    assert_eq!(first, (0..12).collect::<Vec<_>>(), "first read: {stdout}");
    assert_eq!(second, (12..20).collect::<Vec<_>>(), "resumed: {stdout}");
    let sent = versions_sent(&broker.log());
    eprintln!("sarama 1.22 (Kafka 2.2) sent: {sent:?}");
    for expected in [
        ("OffsetCommit", 1),
        ("OffsetFetch", 1),
        ("FindCoordinator", 0),
    ] {
        assert!(
            sent.contains(&(expected.0.to_string(), expected.1)),
            "{expected:?} in {sent:?}"
        );
    }
}

/// Whether the broker closes a connection on a request of `api_key` at
/// `version` (an empty body: the version is checked before the body).
fn is_refused(broker: &Broker, api_key: i16, version: i16) -> bool {
    let mut payload = Vec::new();
    payload.extend_from_slice(&api_key.to_be_bytes());
    payload.extend_from_slice(&version.to_be_bytes());
    payload.extend_from_slice(&5i32.to_be_bytes());
    payload.extend_from_slice(&4i16.to_be_bytes());
    payload.extend_from_slice(b"test");
    let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&payload);
    let mut socket = TcpStream::connect(broker.addr).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    socket.write_all(&frame).expect("write");
    let mut answer = [0u8; 4];
    matches!(socket.read(&mut answer), Ok(0))
}

/// Runs `command` to completion, its output captured.
fn run(command: &mut Command) -> Output {
    command.output().expect("the client starts")
}

/// The two offset lists a client printed after `first` and `second`.
fn offsets_read(stdout: &str, first: &str, second: &str) -> (Vec<i64>, Vec<i64>) {
    let list = |marker: &str| -> Vec<i64> {
        let start = stdout
            .find(marker)
            .unwrap_or_else(|| panic!("`{marker}` in {stdout}"))
            + marker.len();
        let end = start + stdout[start..].find(']').expect("closing ]");
        stdout[start..end]
            .split([',', ' '])
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().expect("an offset"))
            .collect()
    };
    (list(first), list(second))
}

/// The (API, version) pairs of the requests the broker logged.
fn versions_sent(log: &str) -> BTreeSet<(String, i16)> {
    let mut plain = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An ANSI colour sequence: ESC [ ... m.
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
        .lines()
        .filter_map(|line| {
            let api = line.split("api=\"").nth(1)?.split('"').next()?;
            let version = line.split("version=").nth(1)?.split_whitespace().next()?;
            Some((api.to_string(), version.parse().ok()?))
        })
        .collect()
}

/// Builds `tests/go/sarama_old` with Debian's Go and sarama sources
/// (GOPATH mode, offline); `None`, with a message, when they are missing.
fn build_sarama_client() -> Option<PathBuf> {
    let gopath = Path::new("/usr/share/gocode");
    let has_go = Command::new("go")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has_go || !gopath.join("src/github.com/Shopify/sarama").is_dir() {
        eprintln!(
            "SKIPPED: the sarama test needs `go` and Debian's sarama 1.22 \
             (apt-get install golang-go golang-github-shopify-sarama-dev)"
        );
        return None;
    }
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sarama-old");
    std::fs::create_dir_all(&out_dir).expect("build dir");
    let binary = out_dir.join("sarama-old");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/sarama_old/main.go");
    let out = run(Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .env("GOPATH", gopath)
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOCACHE", out_dir.join("cache")));
    assert!(
        out.status.success(),
        "go build of the sarama client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(binary)
}

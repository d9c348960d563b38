//! Several listeners, Kafka's way (`listeners`, `advertised.listeners`,
//! `listener.security.protocol.map`): each serves clients and answers
//! Metadata and FindCoordinator with its own advertised address; a listener
//! without a protocol the broker can serve stops it at start.

use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;
use rill_tests::kafka::{consume_all, produce_all, producer};
use rill_tests::{data_dir, free_port, raw, Broker};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// (host, port) of every broker in a Metadata answer from `addr`.
fn advertised(addr: SocketAddr) -> Vec<(String, i32)> {
    let answer: MetadataResponse =
        raw::request(addr, ApiKey::Metadata, 12, &MetadataRequest::default()).expect("metadata");
    answer
        .brokers
        .iter()
        .map(|b| (b.host.to_string(), b.port))
        .collect()
}

fn coordinator(addr: SocketAddr) -> (String, i32) {
    let mut request = FindCoordinatorRequest::default();
    request.key = StrBytes::from_static_str("listeners-group");
    let answer: FindCoordinatorResponse =
        raw::request(addr, ApiKey::FindCoordinator, 3, &request).expect("find coordinator");
    assert_eq!(answer.error_code, 0);
    (answer.host.to_string(), answer.port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_advertises_its_own_address() {
    let dir = data_dir();
    let (outer, inner) = (free_port(), free_port());
    let file = dir.path().join("server.properties");
    std::fs::write(
        &file,
        format!(
            "listeners=EXTERNAL://127.0.0.1:{outer},INTERNAL://127.0.0.1:{inner},CONTROLLER://127.0.0.1:{control}\n\
             advertised.listeners=EXTERNAL://127.0.0.1:{outer},INTERNAL://localhost:{inner}\n\
             listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             controller.listener.names=CONTROLLER\n",
            control = free_port(),
        ),
    )
    .expect("write server.properties");
    let outer_addr: SocketAddr = format!("127.0.0.1:{outer}").parse().expect("addr");
    let inner_addr: SocketAddr = format!("127.0.0.1:{inner}").parse().expect("addr");
    let broker = Broker::start_listening(
        RILL,
        dir.path(),
        outer_addr,
        &[
            "--cores",
            "2",
            "--config",
            file.to_str().expect("utf-8 path"),
        ],
        &[],
    );
    assert_eq!(
        advertised(outer_addr),
        [(String::from("127.0.0.1"), i32::from(outer))]
    );
    assert_eq!(
        advertised(inner_addr),
        [(String::from("localhost"), i32::from(inner))]
    );
    assert_eq!(
        coordinator(inner_addr),
        (String::from("localhost"), i32::from(inner))
    );
    assert_eq!(
        coordinator(outer_addr),
        (String::from("127.0.0.1"), i32::from(outer))
    );
    // A real client through the second listener: produced there, read back
    // through the first.
    let inside = format!("localhost:{inner}");
    let p = producer(&inside, &[("acks", "all")]);
    let records: Vec<_> = (0..10)
        .map(|i| (None, format!("v{i}").into_bytes()))
        .collect();
    produce_all(&p, "two-doors", &records, None).await;
    let got = consume_all(
        &broker.bootstrap(),
        "two-doors",
        1,
        10,
        Duration::from_secs(20),
        &[],
    );
    assert_eq!(got.len(), 10);
    let log = broker.log();
    assert!(
        log.contains("shard listening") && log.contains("INTERNAL"),
        "{log}"
    );
}

/// Runs `rill serve` with `properties`; it must exit at start (not serve)
/// with `reason` in its output.
fn refuses_to_start(properties: &str, reason: &str) {
    rill_tests::assert_settings_refused(RILL, data_dir().path(), properties, &[reason]);
}

#[test]
fn a_listener_without_a_protocol_stops_the_broker() {
    refuses_to_start(
        &format!("listeners=PUBLIC://127.0.0.1:{}\n", free_port()),
        "listener PUBLIC has no security protocol",
    );
    refuses_to_start(
        &format!(
            "listeners=PUBLIC://127.0.0.1:{}\nlistener.security.protocol.map=PUBLIC:TLS\n",
            free_port()
        ),
        "unknown security protocol",
    );
    let port = free_port();
    refuses_to_start(
        &format!("listeners=A://127.0.0.1:{port},B://127.0.0.1:{port}\nlistener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT\n"),
        "already listener A's",
    );
}

/// A second broker on a port the first one serves must not start: the
/// shards bind with SO_REUSEPORT, which alone would let it share the port
/// and take part of the first broker's connections.
#[test]
fn a_second_broker_on_a_served_port_stops_at_start() {
    let dir = data_dir();
    let first = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    let other = data_dir();
    let output = Command::new(RILL)
        .args([
            "serve",
            "--listen",
            &first.bootstrap(),
            "--admin-listen",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .arg("--data-dir")
        .arg(other.path())
        .output()
        .expect("rill runs");
    let text = String::from_utf8_lossy(&output.stderr);
    // A start that fails (rather than a bad setting, exit code 2).
    assert_eq!(output.status.code(), Some(1), "{text}");
    let wanted = format!("cannot listen on {}", first.bootstrap());
    assert!(text.contains(&wanted) && text.contains("in use"), "{text}");
    // The first broker still answers every connection.
    for _ in 0..20 {
        assert!(!advertised(first.addr).is_empty());
    }
}

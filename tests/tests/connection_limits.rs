//! Limits against abusive clients on a real `rill`:
//! `max.connections.per.ip`, `connections.max.idle.ms`, and a flood of
//! malformed requests that is counted in `/metrics` but does not flood the
//! log.

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use rill_tests::raw::assert_closed_by_broker;
use rill_tests::raw::exchange;
use rill_tests::Broker;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

fn broker_with(dir: &Path, settings: &str) -> Broker {
    let config = dir.join("rill.toml");
    std::fs::write(&config, settings).expect("config");
    let config = config.to_string_lossy().to_string();
    Broker::start(RILL, dir, &["--cores", "1", "--config", &config])
}

fn connect(broker: &Broker) -> TcpStream {
    let socket = TcpStream::connect(broker.addr).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    socket
}

/// Whether an ApiVersions request on `socket` is answered.
fn answered(socket: &mut TcpStream) -> bool {
    exchange::<_, ApiVersionsResponse>(
        socket,
        ApiKey::ApiVersions,
        3,
        1,
        &ApiVersionsRequest::default(),
    )
    .is_ok_and(|r| r.error_code == 0)
}

/// A per-shard counter, summed over the shards.
fn metric(broker: &Broker, name: &str) -> i64 {
    broker.metric_sum(name)
}

/// Waits until the broker counts `open` connections (a close the broker
/// made is also one it counted).
fn wait_for_open_connections(broker: &Broker, open: i64) {
    let started = Instant::now();
    while metric(broker, "rill_connections_open") != open {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} connections open, not {open}",
            metric(broker, "rill_connections_open")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn connections_beyond_the_per_ip_limit_are_refused_until_one_closes() {
    let dir = rill_tests::data_dir();
    let broker = broker_with(dir.path(), "\"max.connections.per.ip\" = 3\n");
    // The start-up check's connection must be gone before counting.
    wait_for_open_connections(&broker, 0);
    let mut open: Vec<TcpStream> = (0..3).map(|_| connect(&broker)).collect();
    for socket in &mut open {
        assert!(answered(socket), "a connection within the limit is served");
    }
    let mut fourth = connect(&broker);
    assert!(!answered(&mut fourth), "the fourth connection is served");
    assert!(metric(&broker, "rill_connections_refused_total") >= 1);

    drop(open.pop());
    // The broker counts the close when it sees it.
    let started = Instant::now();
    loop {
        let mut again = connect(&broker);
        if answered(&mut again) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a freed slot was not given back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for socket in &mut open {
        assert!(answered(socket), "the first connections stay served");
    }
}

#[test]
fn an_idle_connection_is_closed_and_a_busy_one_is_not() {
    let dir = rill_tests::data_dir();
    let broker = broker_with(dir.path(), "\"connections.max.idle.ms\" = 600\n");
    wait_for_open_connections(&broker, 0);
    let mut idle = connect(&broker);
    let mut busy = connect(&broker);
    assert!(answered(&mut idle));
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1800) {
        assert!(answered(&mut busy), "a busy connection was closed");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_closed_by_broker(&mut idle);
    wait_for_open_connections(&broker, 1);
    assert!(answered(&mut busy));
}

#[test]
fn a_flood_of_malformed_requests_is_counted_not_logged_line_by_line() {
    let dir = rill_tests::data_dir();
    let broker = broker_with(dir.path(), "");
    const FLOOD: usize = 300;
    for _ in 0..FLOOD {
        let mut socket = connect(&broker);
        // A frame with an API key no one has.
        let body: [u8; 10] = [0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        socket.write_all(&frame).expect("write");
        assert_closed_by_broker(&mut socket);
    }
    let started = Instant::now();
    while metric(&broker, "rill_protocol_errors_total") < FLOOD as i64 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} protocol errors counted of {FLOOD}",
            metric(&broker, "rill_protocol_errors_total")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let lines = broker
        .log()
        .matches("bad request; closing connection")
        .count();
    assert!(
        (1..=10).contains(&lines),
        "{lines} log lines for {FLOOD} bad requests"
    );
    let mut good = connect(&broker);
    assert!(answered(&mut good), "a good client is still served");
}

/// `queued.max.request.bytes` and its per-connection cousin: producers whose
/// requests together exceed both budgets wait for room, are never refused,
/// and every record arrives; the budget is all given back afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bytes_budgets_hold_producers_back_without_losing_anything() {
    let dir = rill_tests::data_dir();
    let broker = broker_with(
        dir.path(),
        "\"queued.max.request.bytes\" = 65536\n\
         \"rill.queued.max.request.bytes.per.connection\" = 32768\n",
    );
    let bootstrap = broker.bootstrap();
    let records: Vec<_> = (0..400)
        .map(|i| (None, vec![(i % 251) as u8; 4096]))
        .collect();
    // Two producers at once, batches of up to 64 KiB: more than either
    // budget is asked for at a time.
    let settings = [
        ("acks", "all"),
        ("batch.size", "65536"),
        ("linger.ms", "20"),
    ];
    let (a, b) = (
        rill_tests::kafka::producer(&bootstrap, &settings),
        rill_tests::kafka::producer(&bootstrap, &settings),
    );
    let (left, right) = tokio::join!(
        rill_tests::kafka::produce_all(&a, "budgeted", &records, Some(0)),
        rill_tests::kafka::produce_all(&b, "budgeted", &records, Some(0)),
    );
    assert_eq!(left.len() + right.len(), 800);
    let got = rill_tests::kafka::consume_all(
        &bootstrap,
        "budgeted",
        1,
        800,
        Duration::from_secs(30),
        &[],
    );
    assert_eq!(got.len(), 800);
    drop((a, b));
    // Every answered request gave its bytes back.
    let deadline = Instant::now() + Duration::from_secs(10);
    while broker.metric_sum("rill_queued_request_bytes") != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(broker.metric_sum("rill_queued_request_bytes"), 0);
}

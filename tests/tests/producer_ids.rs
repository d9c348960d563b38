//! Producer ids over a restart: `InitProducerId` without a transactional id,
//! sent over plain sockets (encoded by the `kafka-protocol` crate), before
//! and after the broker restarts on the same data dir. Every id after the
//! restart must be greater than every id before it and none may repeat,
//! or a new producer would be taken for an old one's retry. With two shards,
//! connections spread over both, and their ids must be distinct as well.
//!
//! Holds for the clock-based ids (they grow with time) and for ids from
//! persisted blocks (the next block starts after every block handed out).

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use rill_tests::raw::exchange;
use rill_tests::{data_dir, Broker};
use std::collections::HashSet;
use std::net::TcpStream;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Connections per broker run; with two shards, `SO_REUSEPORT` spreads them.
const CONNECTIONS: usize = 8;
/// `InitProducerId` requests per connection.
const REQUESTS_PER_CONNECTION: usize = 3;

/// One `InitProducerId` (no transactional id, no previous id) at `version`
/// on `socket`: the id it hands out, after checking the answer is a fresh
/// id, epoch 0; an I/O error when the connection fails.
fn init_producer_id(
    socket: &mut TcpStream,
    version: i16,
    correlation_id: i32,
) -> std::io::Result<i64> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response: InitProducerIdResponse = exchange(
        socket,
        ApiKey::InitProducerId,
        version,
        correlation_id,
        &request,
    )?;
    assert_eq!(response.error_code, 0, "v{version}");
    assert_eq!(response.producer_epoch, 0, "a fresh id starts at epoch 0");
    assert!(response.producer_id.0 >= 0, "{:?}", response.producer_id);
    Ok(response.producer_id.0)
}

/// A connection and the id of its first `InitProducerId`. Retried on a
/// connection error: right after a restart, the previous process's
/// listening socket can outlive it for a few milliseconds (its io_uring is
/// torn down after the exit, we believe), so a connection may land there,
/// pass `Broker`'s readiness check, and then be reset.
fn connect_and_init(broker: &Broker, version: i16, correlation_id: i32) -> (TcpStream, i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let attempt = TcpStream::connect(broker.addr).and_then(|mut socket| {
            socket.set_read_timeout(Some(Duration::from_secs(10)))?;
            let id = init_producer_id(&mut socket, version, correlation_id)?;
            Ok((socket, id))
        });
        match attempt {
            Ok(connected) => return connected,
            Err(e) if Instant::now() < deadline => {
                eprintln!("connection failed ({e}); retrying");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("no connection answered within 10 s: {e}"),
        }
    }
}

/// Ids from [`CONNECTIONS`] connections of [`REQUESTS_PER_CONNECTION`]
/// requests each, alternating v0 (classic header) and v4 (flexible).
fn ids_of_one_run(broker: &Broker) -> Vec<i64> {
    // v0 (classic header) and v4 (flexible), alternating.
    let version_of = |round: usize, index: usize| [0i16, 4][(round + index) % 2];
    let mut ids = Vec::new();
    let mut sockets = Vec::new();
    for index in 0..CONNECTIONS {
        let (socket, id) = connect_and_init(broker, version_of(0, index), index as i32);
        sockets.push(socket);
        ids.push(id);
    }
    for round in 1..REQUESTS_PER_CONNECTION {
        for (index, socket) in sockets.iter_mut().enumerate() {
            let correlation_id = (round * CONNECTIONS + index) as i32;
            let id = init_producer_id(socket, version_of(round, index), correlation_id)
                .unwrap_or_else(|e| panic!("connection {index}, round {round}: {e}"));
            ids.push(id);
        }
    }
    ids
}

/// Starts rill with `args`, takes ids, restarts it on the same data dir
/// (gracefully, then after a SIGKILL) and takes ids again each time.
fn ids_never_repeat_and_grow_over_restarts(args: &[&str]) {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), args);
    let mut seen = HashSet::new();
    let mut max_before = i64::MIN;
    // Between the runs: a graceful stop, then a crash.
    let restarts = [Some(libc::SIGTERM), Some(libc::SIGKILL), None];
    for (run, stop_signal) in restarts.into_iter().enumerate() {
        let ids = ids_of_one_run(&broker);
        assert_eq!(ids.len(), CONNECTIONS * REQUESTS_PER_CONNECTION);
        for id in &ids {
            assert!(seen.insert(*id), "run {run}: id {id} repeated: {ids:?}");
            assert!(
                *id > max_before,
                "run {run}: id {id} not above {max_before}, the greatest id before the restart"
            );
        }
        max_before = ids.iter().copied().max().unwrap_or(max_before);
        if let Some(signal) = stop_signal {
            broker.stop_with(signal);
            broker.restart();
        }
    }
}

#[test]
fn producer_ids_grow_over_restarts_on_one_shard() {
    ids_never_repeat_and_grow_over_restarts(&["--cores", "1"]);
}

#[test]
fn producer_ids_of_two_shards_are_distinct_and_grow_over_restarts() {
    ids_never_repeat_and_grow_over_restarts(&["--cores", "2"]);
}

//! A starting broker answers no client before the active controller has
//! registered this process and unfenced it (it has caught up with the
//! metadata log), as a Kafka broker enables request processing only then.
//! Before, a restarted broker cut off from the quorum answered at once from
//! the image it had loaded from disk, listing brokers that were long gone
//! as live. Its listeners are bound meanwhile: a connection waits in the
//! kernel's queue and is answered once the broker is unfenced.
//! `server.max.startup.time.ms` bounds the wait: past it the broker stops.
//! The admin port's `rill_broker_state` says which it is (Kafka's numbers).

use kafka_protocol::messages::{ApiKey, DescribeClusterRequest, DescribeClusterResponse};
use rill_tests::cluster::{describe_cluster, wait_for, Cluster};
use rill_tests::{data_dir, free_port, raw, Broker};
use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Long enough for an election (1–2 s) plus a session expiry (2.5 s) on a
/// loaded two-core machine.
const SETTLE: Duration = Duration::from_secs(30);

/// Kafka's `BrokerState` numbers, served as `rill_broker_state`.
const STARTING: i64 = 1;
const RUNNING: i64 = 3;

/// How long a request to a broker that must not answer yet is given.
const SILENCE: Duration = Duration::from_secs(3);

/// Sends DescribeCluster v0 on `socket` (correlation id 1).
fn send_describe_cluster(socket: &mut TcpStream) {
    use std::io::Write;
    let frame = raw::request_frame(
        ApiKey::DescribeCluster,
        0,
        1,
        &DescribeClusterRequest::default(),
    );
    socket.write_all(&frame).expect("request sent");
}

/// The broker ids of a DescribeCluster answer, sorted.
fn broker_ids(response: &DescribeClusterResponse) -> Vec<i32> {
    let mut ids: Vec<i32> = response.brokers.iter().map(|b| b.broker_id.0).collect();
    ids.sort_unstable();
    ids
}

#[test]
fn a_restarted_broker_cut_off_from_the_quorum_answers_once_it_rejoins() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    for node in [2, 3, 1] {
        assert_eq!(
            cluster.node(node).stop(),
            Some(0),
            "node {node} stops cleanly"
        );
    }
    let served_before = cluster.node(1).log().matches("serving clients").count();
    // Alone, node 1 cannot reach a quorum: its image on disk lists all
    // three as live, and it must not answer from it.
    cluster.node(1).restart();
    let mut socket = TcpStream::connect(cluster.node(1).addr).expect("the listener is bound");
    socket.set_read_timeout(Some(SILENCE)).expect("timeout");
    send_describe_cluster(&mut socket);
    let early =
        raw::read_response::<DescribeClusterResponse>(&mut socket, ApiKey::DescribeCluster, 0, 1);
    match early {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("a broker without a quorum answered DescribeCluster: {other:?}"),
    }
    assert_eq!(
        cluster.node(1).metric_sum("rill_broker_state"),
        STARTING,
        "the admin port says the broker is starting"
    );
    assert_eq!(
        cluster.node(1).log().matches("serving clients").count(),
        served_before,
        "node 1 said it serves before it was unfenced:\n{}",
        cluster.node(1).log()
    );

    // Node 2 back: a quorum of two; node 1 registers, catches up, is
    // unfenced, and answers the request that waited.
    cluster.node(2).restart();
    socket.set_read_timeout(Some(SETTLE)).expect("timeout");
    let answer: DescribeClusterResponse =
        raw::read_response(&mut socket, ApiKey::DescribeCluster, 0, 1)
            .expect("the waiting request is answered once the broker is unfenced");
    assert_eq!(answer.error_code, 0);
    let ids = broker_ids(&answer);
    assert!(
        ids.contains(&1),
        "node 1 lists itself once unfenced: {ids:?}"
    );
    assert!(
        cluster.node(1).log().matches("serving clients").count() > served_before,
        "node 1 serves and says so"
    );
    assert_eq!(cluster.node(1).metric_sum("rill_broker_state"), RUNNING);
    // Node 3 never came back: it is fenced within its session and leaves
    // the list, while 1 and 2 stay.
    wait_for("node 3 to leave the live brokers", SETTLE, || {
        let (_, ids) = describe_cluster(cluster.node(1)).ok()?;
        (ids == vec![1, 2]).then_some(())
    });
}

#[test]
fn a_broker_not_unfenced_within_its_startup_limit_stops() {
    let dir = data_dir();
    let settings_dir = data_dir();
    let settings = settings_dir.path().join("rill.properties");
    std::fs::write(&settings, "server.max.startup.time.ms=2000\n").expect("settings");
    // Node 1 of three voters whose other two never start: no quorum.
    let voters = format!(
        "1@127.0.0.1:{},2@127.0.0.1:{},3@127.0.0.1:{}",
        free_port(),
        free_port(),
        free_port()
    );
    let settings_arg = settings.to_string_lossy().into_owned();
    let mut broker = Broker::start(
        RILL,
        dir.path(),
        &[
            "--cores",
            "1",
            "--node-id",
            "1",
            "--controller-quorum-voters",
            &voters,
            "--config",
            &settings_arg,
        ],
    );
    let code = broker.wait_exit(Duration::from_secs(30));
    let log = broker.log();
    assert_eq!(code, Some(1), "a failed start's exit code:\n{log}");
    assert!(
        log.contains("server.max.startup.time.ms")
            && log.contains("broker 1 to be registered with the active controller"),
        "the log says what the broker waited for:\n{log}"
    );
    assert!(!log.contains("serving clients"), "it never served:\n{log}");
}

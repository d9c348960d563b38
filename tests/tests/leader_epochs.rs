//! Leader epochs end to end: records produced with rdkafka, then
//! OffsetForLeaderEpoch (key 23) sent raw (encoded by the `kafka-protocol`
//! crate) at every version rill serves, and checked against Kafka's rules:
//! the current epoch ends at the log end offset, an epoch above every known
//! one is undefined (-1/-1), a `current_leader_epoch` newer than the
//! partition's is UNKNOWN_LEADER_EPOCH, an unknown partition
//! UNKNOWN_TOPIC_OR_PARTITION. After a graceful restart and after a crash,
//! each partition directory holds Kafka's `leader-epoch-checkpoint` and the
//! answers are the same, asked under each partition's current epoch (a
//! restart moves it on).

use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rill_tests::kafka::{create_topic, produce_all, producer};
use rill_tests::raw::exchange;
use rill_tests::{data_dir, Broker};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// A connection that answers, retried briefly: right after a restart the
/// previous process's socket can outlive it for a few milliseconds.
fn connect(broker: &Broker) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let attempt = TcpStream::connect(broker.addr).and_then(|mut socket| {
            socket.set_read_timeout(Some(Duration::from_secs(10)))?;
            exchange::<_, ApiVersionsResponse>(
                &mut socket,
                ApiKey::ApiVersions,
                0,
                0,
                &ApiVersionsRequest::default(),
            )?;
            Ok(socket)
        });
        match attempt {
            Ok(socket) => return socket,
            Err(e) if Instant::now() < deadline => {
                eprintln!("connection failed ({e}); retrying");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("no connection answered within 10 s: {e}"),
        }
    }
}

/// One asked partition: (topic, partition, current_leader_epoch, leader_epoch).
type Ask = (&'static str, i32, i32, i32);

/// What the broker answers for one partition: (error, epoch, end offset).
type Answer = (i16, i32, i64);

/// The asks of every check, in order, and the answers they expect for a
/// log of 30 records in `epochs-0` and 10 in `epochs-1`, all of epoch 0,
/// whose leader epochs are now `current` (partition 0) and `current_1`. A
/// restart moves them on: the new incarnation registers fenced, which
/// takes the leaderships away, and its unfencing gives them back, as in
/// Kafka; no record is written under the later epochs.
fn asks_and_answers(current: i32, current_1: i32) -> Vec<(Ask, Answer)> {
    vec![
        // Consumers (no current epoch): epoch 0 ends at the log end.
        (("epochs", 0, -1, 0), (0, 0, 30)),
        (("epochs", 1, -1, 0), (0, 0, 10)),
        // The current epoch checked and matching.
        (("epochs", 0, current, 0), (0, 0, 30)),
        // An epoch above every known one: undefined.
        (("epochs", 0, -1, current + 1), (0, -1, -1)),
        // A requester that knows a newer epoch than this broker.
        (
            ("epochs", 1, current_1 + 1, 0),
            (UNKNOWN_LEADER_EPOCH, -1, -1),
        ),
        // Unknown partitions.
        (("epochs", 7, -1, 0), (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)),
        (
            ("nothing-here", 0, -1, 0),
            (UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ),
    ]
}

/// Sends all the asks in one request at `version` and returns the answers
/// in the order asked (topics in request order, partitions within them).
fn offsets_for_epochs(
    socket: &mut TcpStream,
    version: i16,
    correlation_id: i32,
    asks: &[Ask],
) -> Vec<Answer> {
    let mut topics: Vec<OffsetForLeaderTopic> = Vec::new();
    for &(topic, partition, current_leader_epoch, leader_epoch) in asks {
        let mut p = OffsetForLeaderPartition::default();
        p.partition = partition;
        p.current_leader_epoch = current_leader_epoch;
        p.leader_epoch = leader_epoch;
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == topic => t.partitions.push(p),
            _ => {
                let mut t = OffsetForLeaderTopic::default();
                t.topic = TopicName(StrBytes::from_string(topic.to_string()));
                t.partitions.push(p);
                topics.push(t);
            }
        }
    }
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(topics);
    let response: OffsetForLeaderEpochResponse = exchange(
        socket,
        ApiKey::OffsetForLeaderEpoch,
        version,
        correlation_id,
        &request,
    )
    .expect("OffsetForLeaderEpoch answered");
    response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
        .collect()
}

/// Checks the versions the codec speaks (v2–v4; v0 and v1, which Kafka 3.9
/// still accepts, are checked by `old_clients`), and that rill advertises
/// 0..=4.
fn check_answers(broker: &Broker, when: &str) {
    let mut socket = connect(broker);
    let versions: ApiVersionsResponse = exchange(
        &mut socket,
        ApiKey::ApiVersions,
        3,
        1,
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("leader-epochs"))
            .with_client_software_version(StrBytes::from_static_str("1")),
    )
    .expect("ApiVersions answered");
    let advertised = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::OffsetForLeaderEpoch as i16)
        .map(|k| (k.min_version, k.max_version));
    assert_eq!(advertised, Some((0, 4)), "{when}: ApiVersions");
    let epoch_of = |partition| {
        rill_tests::raw::leader_epoch(broker.addr, "epochs", partition)
            .unwrap_or_else(|| panic!("{when}: no leader epoch for epochs-{partition}"))
    };
    let (asks, expected): (Vec<Ask>, Vec<Answer>) = asks_and_answers(epoch_of(0), epoch_of(1))
        .into_iter()
        .unzip();
    for version in 2..=4i16 {
        let answers = offsets_for_epochs(&mut socket, version, 10 + i32::from(version), &asks);
        assert_eq!(answers, expected, "{when}: v{version}");
    }
}

/// The directory of partition `name` (`<topic>-<partition>`) under `root`.
fn partition_dir(root: &Path, name: &str) -> PathBuf {
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("data dir readable") {
            let path = entry.expect("entry").path();
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|n| n == name) {
                return path;
            }
            pending.push(path);
        }
    }
    panic!("no directory {name} under {}", root.display())
}

/// Each partition's checkpoint is Kafka's text: version 0, one entry,
/// epoch 0 from offset 0.
fn check_checkpoint_files(root: &Path, when: &str) {
    for partition in ["epochs-0", "epochs-1"] {
        let file = partition_dir(root, partition).join("leader-epoch-checkpoint");
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{when}: {}: {e}", file.display()));
        assert_eq!(text, "0\n1\n0 0\n", "{when}: {partition}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_for_leader_epoch_answers_from_the_checkpoint_across_restarts() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "epochs", 2, &[]).await;
    let p = producer(&bootstrap, &[("acks", "all")]);
    let first: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..30)
        .map(|i| (None, format!("a-{i}").into_bytes()))
        .collect();
    let second: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..10)
        .map(|i| (None, format!("b-{i}").into_bytes()))
        .collect();
    let sent = produce_all(&p, "epochs", &first, Some(0)).await;
    assert_eq!(sent.last(), Some(&(0, 29)));
    let sent = produce_all(&p, "epochs", &second, Some(1)).await;
    assert_eq!(sent.last(), Some(&(1, 9)));
    drop(p);

    check_answers(&broker, "before any restart");
    check_checkpoint_files(dir.path(), "before any restart");

    broker.stop();
    broker.restart();
    check_checkpoint_files(dir.path(), "after a graceful restart");
    check_answers(&broker, "after a graceful restart");

    broker.kill();
    broker.restart();
    check_checkpoint_files(dir.path(), "after a crash");
    check_answers(&broker, "after a crash");
}

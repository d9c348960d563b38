//! Incremental fetch sessions (KIP-227) against a real broker, with raw
//! Fetch requests on one connection (a session lives on the shard serving
//! its connection): a full fetch makes a session; an incremental fetch with
//! nothing new waits `max_wait_ms` and answers no partition; an append to
//! one of ten partitions is answered with exactly that one, and wakes a
//! long poll that did not name it; a wrong epoch, an unknown id and a
//! request naming topics by id in a session made with names are refused
//! with Kafka's codes; a forgotten partition is no longer answered; a
//! FINAL epoch closes the session; with
//! `max.incremental.fetch.session.cache.slots=2` a third fresh consumer
//! session is refused (the fetch is answered sessionless), as Kafka's
//! eviction rules say.

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::FutureRecord;
use rill_tests::kafka::{create_topic, producer};
use rill_tests::raw::exchange;
use rill_tests::{data_dir, Broker};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TOPIC: &str = "sessions";
const PARTITIONS: i32 = 10;
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

/// One client connection and its correlation ids.
struct Client {
    socket: TcpStream,
    correlation_id: i32,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let socket = TcpStream::connect(addr).expect("connect");
        socket
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Client {
            socket,
            correlation_id: 0,
        }
    }

    fn fetch(&mut self, version: i16, body: &FetchRequest) -> FetchResponse {
        self.correlation_id += 1;
        exchange(
            &mut self.socket,
            ApiKey::Fetch,
            version,
            self.correlation_id,
            body,
        )
        .expect("Fetch answered")
    }
}

fn partition(index: i32, offset: i64) -> FetchPartition {
    let mut p = FetchPartition::default();
    p.partition = index;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    p
}

/// A fetch of `partitions` of the topic (by name) in session `id` at `epoch`.
fn fetch_body(
    id: i32,
    epoch: i32,
    partitions: Vec<FetchPartition>,
    max_wait_ms: i32,
) -> FetchRequest {
    let mut body = FetchRequest::default();
    body.replica_id = BrokerId(-1);
    body.max_wait_ms = max_wait_ms;
    body.min_bytes = 1;
    body.max_bytes = 1 << 20;
    body.session_id = id;
    body.session_epoch = epoch;
    if !partitions.is_empty() {
        let mut topic = FetchTopic::default();
        topic.topic = TopicName(StrBytes::from_static_str(TOPIC));
        topic.partitions = partitions;
        body.topics = vec![topic];
    }
    body
}

/// `(partition, high watermark, record bytes)` of every partition answered.
fn answered(response: &FetchResponse) -> Vec<(i32, i64, usize)> {
    assert_eq!(response.error_code, 0, "top-level error");
    let mut parts: Vec<_> = response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
            let bytes = p.records.as_ref().map(|r| r.len()).unwrap_or(0);
            (p.partition_index, p.high_watermark, bytes)
        })
        .collect();
    parts.sort();
    parts
}

async fn produce_to(bootstrap: &str, partition: i32) {
    let p = producer(bootstrap, &[("acks", "all"), ("linger.ms", "0")]);
    let record: FutureRecord<'_, (), [u8]> = FutureRecord::to(TOPIC)
        .partition(partition)
        .payload(b"session");
    p.send(record, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .expect("sent");
}

/// Full fetch of every partition at 0: the new session's id.
fn open_session(client: &mut Client) -> i32 {
    let all = (0..PARTITIONS).map(|p| partition(p, 0)).collect();
    let response = client.fetch(12, &fetch_body(0, 0, all, 0));
    assert_eq!(
        answered(&response).len(),
        PARTITIONS as usize,
        "a full answer"
    );
    response.session_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_fetches_answer_what_changed() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, TOPIC, PARTITIONS, &[]).await;
    let mut client = Client::connect(broker.addr);
    let id = open_session(&mut client);
    assert_ne!(id, 0, "a full fetch with epoch 0 makes a session");

    // Nothing new: the long poll runs its course and names no partition.
    let started = Instant::now();
    let response = client.fetch(12, &fetch_body(id, 1, vec![], 400));
    assert!(
        started.elapsed() >= Duration::from_millis(350),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(response.session_id, id);
    assert_eq!(answered(&response), vec![]);

    // One partition of ten gets a record: the answer is that partition.
    produce_to(&bootstrap, 7).await;
    let response = client.fetch(12, &fetch_body(id, 2, vec![], 5_000));
    let parts = answered(&response);
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert_eq!((parts[0].0, parts[0].1), (7, 1));
    assert!(parts[0].2 > 0, "with its records");

    // Move partition 7 on; a long poll that names nothing wakes on an
    // append to any partition of the session (3, on the other shard).
    let mut waiting = Client {
        socket: client.socket.try_clone().expect("clone"),
        correlation_id: client.correlation_id,
    };
    let poll = std::thread::spawn(move || {
        let started = Instant::now();
        let body = fetch_body(id, 3, vec![partition(7, 1)], 20_000);
        let response = waiting.fetch(12, &body);
        (started.elapsed(), response, waiting.correlation_id)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    produce_to(&bootstrap, 3).await;
    let (waited, response, correlation_id) = poll.join().expect("poll");
    client.correlation_id = correlation_id;
    assert!(
        waited < Duration::from_secs(10),
        "woken by the append: {waited:?}"
    );
    let parts = answered(&response);
    assert_eq!(
        parts.iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![3],
        "{parts:?}"
    );

    refusals(&mut client, id, 4);
    assert_eq!(broker.metric_sum("rill_fetch_sessions"), 1);
    assert_eq!(broker.metric_sum("rill_fetch_session_partitions"), 10);
    forgetting(&mut client, &bootstrap, id, 4).await;
    assert_eq!(broker.metric_sum("rill_fetch_sessions"), 0, "closed by FINAL");
}

/// A wrong epoch, an unknown id, topic ids in a session of names: refused
/// with no partitions; the session still takes its right epoch after.
fn refusals(client: &mut Client, id: i32, epoch: i32) {
    let response = client.fetch(12, &fetch_body(id, epoch + 1, vec![], 0));
    assert_eq!(response.error_code, INVALID_FETCH_SESSION_EPOCH);
    assert!(response.responses.is_empty());
    assert_eq!(response.session_id, 0);
    let response = client.fetch(12, &fetch_body(id.wrapping_add(1_000_000), 1, vec![], 0));
    assert_eq!(response.error_code, FETCH_SESSION_ID_NOT_FOUND);
    let response = client.fetch(13, &fetch_body(id, epoch, vec![], 0));
    assert_eq!(response.error_code, FETCH_SESSION_TOPIC_ID_ERROR);
}

/// Partition 3 moves on and 7 is forgotten: an append to 7 is not
/// answered; a FINAL epoch closes the session.
async fn forgetting(client: &mut Client, bootstrap: &str, id: i32, epoch: i32) {
    let mut body = fetch_body(id, epoch, vec![partition(3, 1)], 0);
    let mut forgotten = ForgottenTopic::default();
    forgotten.topic = TopicName(StrBytes::from_static_str(TOPIC));
    forgotten.partitions = vec![7];
    body.forgotten_topics_data = vec![forgotten];
    let response = client.fetch(12, &body);
    assert_eq!(response.error_code, 0);
    produce_to(bootstrap, 7).await;
    let response = client.fetch(12, &fetch_body(id, epoch + 1, vec![], 300));
    assert_eq!(
        answered(&response),
        vec![],
        "partition 7 is out of the session"
    );

    let response = client.fetch(12, &fetch_body(id, -1, vec![partition(7, 0)], 0));
    assert_eq!(response.session_id, 0, "FINAL: sessionless");
    assert_eq!(answered(&response).len(), 1);
    let response = client.fetch(12, &fetch_body(id, epoch + 2, vec![], 0));
    assert_eq!(response.error_code, FETCH_SESSION_ID_NOT_FOUND, "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_cache_answers_a_fresh_consumer_sessionless() {
    let dir = data_dir();
    let file = dir.path().join("server.properties");
    std::fs::write(&file, "max.incremental.fetch.session.cache.slots=2\n").expect("config");
    let config = file.to_str().expect("utf-8 path");
    let broker = Broker::start(RILL, dir.path(), &["--cores", "1", "--config", config]);
    create_topic(&broker.bootstrap(), TOPIC, PARTITIONS, &[]).await;
    let mut clients: Vec<Client> = (0..3).map(|_| Client::connect(broker.addr)).collect();
    let ids: Vec<i32> = clients.iter_mut().map(open_session).collect();
    assert!(ids[0] != 0 && ids[1] != 0 && ids[0] != ids[1], "{ids:?}");
    // Kafka's rules: a consumer session may only displace one unused for
    // two minutes, or one created that long ago that it outranks.
    assert_eq!(ids[2], 0, "no room: sessionless");
    assert_eq!(broker.metric_sum("rill_fetch_sessions"), 2);
    assert_eq!(broker.metric_sum("rill_fetch_session_evictions_total"), 0);
    // The two sessions still serve.
    let response = clients[1].fetch(12, &fetch_body(ids[1], 1, vec![], 0));
    assert_eq!((response.error_code, response.session_id), (0, ids[1]));
}

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
    assert_eq!(
        broker.metric_sum("rill_fetch_sessions"),
        0,
        "closed by FINAL"
    );
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

/// Request bytes, response bytes and requests of the Fetch API on a
/// broker, from its `/metrics`.
fn fetch_counters(broker: &Broker) -> [i64; 3] {
    let metrics = rill_tests::http_get(broker.admin_addr, "/metrics");
    let sum = |name: &str| -> i64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains("api=\"Fetch\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
            .sum()
    };
    [
        sum("rill_request_bytes_total"),
        sum("rill_response_bytes_total"),
        sum("rill_requests_total"),
    ]
}

/// CPU time (user + system) of a process, in ms.
fn cpu_ms(pid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_name = &stat[stat.rfind(')').expect("stat name") + 2..];
    let fields: Vec<i64> = after_name
        .split(' ')
        .skip(11)
        .take(2)
        .map(|f| f.parse().expect("ticks"))
        .collect();
    // SAFETY: sysconf reads a constant.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    (fields[0] + fields[1]) * 1000 / ticks_per_s
}

/// Writes a record every 20 ms to partitions 0..5 of `topic` until
/// `stop` (the "few active" partitions).
fn trickle(
    bootstrap: String,
    topic: &'static str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let p = producer(&bootstrap, &[("acks", "1"), ("linger.ms", "0")]);
        let mut n = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let record: FutureRecord<'_, (), [u8]> = FutureRecord::to(topic)
                .partition(n % 5)
                .payload(b"trickle-record-of-some-bytes");
            let _ = runtime.block_on(p.send(record, Duration::from_secs(10)));
            n += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

const MEASURED_PARTITIONS: i32 = 1000;
const MEASURED_FETCHES: usize = 300;

/// A consumer of 1,000 partitions, 5 of them written every 20 ms:
/// `MEASURED_FETCHES` fetches sessionless, then as many in a session;
/// per fetch: request bytes, response bytes, broker CPU µs.
fn consumer_rounds(broker: &Broker, with_sessions: bool) -> (f64, f64, f64) {
    let mut client = Client::connect(broker.addr);
    let mut offsets = vec![0i64; MEASURED_PARTITIONS as usize];
    let all = |offsets: &[i64]| -> Vec<FetchPartition> {
        (0..MEASURED_PARTITIONS)
            .map(|p| partition(p, offsets[p as usize]))
            .collect()
    };
    let (mut id, mut epoch) = (0, if with_sessions { 0 } else { -1 });
    let before = fetch_counters(broker);
    let cpu_before = cpu_ms(broker.pid().expect("pid"));
    let mut changed: Vec<i32> = Vec::new();
    for _ in 0..MEASURED_FETCHES {
        let asked = if with_sessions && epoch > 0 {
            changed
                .iter()
                .map(|&p| partition(p, offsets[p as usize]))
                .collect()
        } else {
            all(&offsets)
        };
        let response = client.fetch(12, &fetch_body(id, epoch, asked, 100));
        changed.clear();
        for p in response.responses.iter().flat_map(|t| &t.partitions) {
            if p.records.as_ref().is_some_and(|r| !r.is_empty()) {
                offsets[p.partition_index as usize] = p.high_watermark;
                changed.push(p.partition_index);
            }
        }
        if with_sessions {
            id = response.session_id;
            epoch = if id == 0 { 0 } else { epoch + 1 };
        }
    }
    let after = fetch_counters(broker);
    let cpu = cpu_ms(broker.pid().expect("pid")) - cpu_before;
    let n = (after[2] - before[2]).max(1) as f64;
    (
        (after[0] - before[0]) as f64 / n,
        (after[1] - before[1]) as f64 / n,
        cpu as f64 * 1000.0 / n,
    )
}

/// Not a check: the figures of docs/benchmarks/fetch-sessions.md
/// (`cargo test -p rill --test blackbox fetch_sessions:: -- --ignored --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_a_consumer_of_1000_partitions() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    create_topic(&broker.bootstrap(), TOPIC, MEASURED_PARTITIONS, &[]).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = trickle(broker.bootstrap(), TOPIC, stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    for with_sessions in [false, true, false, true] {
        let (request, response, cpu_us) =
            tokio::task::block_in_place(|| consumer_rounds(&broker, with_sessions));
        println!(
            "consumer sessions={with_sessions}: {request:.0} request bytes, {response:.0} response bytes, {cpu_us:.0} µs broker CPU per fetch"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().expect("writer");
}

/// Not a check: a leader and a follower of 1,000 partitions (RF 2), 5 of
/// them written every 20 ms; the leader's Fetch bytes and CPU over 10 s,
/// with follower sessions and with the leader's cache at 0 slots (every
/// fetch sessionless).
#[test]
#[ignore = "a measurement, run by hand"]
fn measure_a_follower_of_1000_partitions() {
    for slots in [0, 1000] {
        let dir = data_dir();
        let file = dir.path().join("sessions.properties");
        let line = format!("max.incremental.fetch.session.cache.slots={slots}\n");
        std::fs::write(&file, line).expect("config");
        let config = file.to_str().expect("utf-8 path");
        let args = ["--config", config];
        let mut cluster =
            rill_tests::cluster::Cluster::start_settled(RILL, 2, &args, Duration::from_secs(60));
        let bootstrap = cluster.bootstrap();
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(rill_tests::kafka::create_topic_replicated(
            &bootstrap,
            "followed",
            MEASURED_PARTITIONS,
            2,
            &[],
        ));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = trickle(bootstrap.clone(), "followed", stop.clone());
        std::thread::sleep(Duration::from_secs(10));
        let (mut bytes, mut cpu) = ([0i64; 3], 0i64);
        for node in [1, 2] {
            let broker = cluster.node(node);
            let c = fetch_counters(broker);
            for i in 0..3 {
                bytes[i] -= c[i];
            }
            cpu -= cpu_ms(broker.pid().expect("pid"));
        }
        std::thread::sleep(Duration::from_secs(10));
        let mut sessions = 0;
        for node in [1, 2] {
            let broker = cluster.node(node);
            let c = fetch_counters(broker);
            for i in 0..3 {
                bytes[i] += c[i];
            }
            cpu += cpu_ms(broker.pid().expect("pid"));
            sessions += broker.metric_sum("rill_fetch_sessions");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().expect("writer");
        let n = bytes[2].max(1) as f64;
        println!(
            "followers, cache slots {slots} ({sessions} sessions held): {} fetches in 10 s, {:.1} request bytes, {:.1} response bytes, {:.0} µs CPU (both brokers) per fetch",
            bytes[2],
            bytes[0] as f64 / n,
            bytes[1] as f64 / n,
            cpu as f64 * 1000.0 / n
        );
    }
}

//! Tiered storage (KIP-405) end to end: a real broker with a `file://`
//! object store, librdkafka producing far past the local retention and
//! consuming everything back from offset 0 and finding offsets by
//! timestamp in the remote part, uploads and reads held to their quotas,
//! the store's objects checked on
//! disk, a deleted topic's objects purged, Kafka's refusals, a follower
//! rebuilt from the store knowing every producer, a
//! three-node cluster whose leader is killed while it uploads, and a real
//! S3 API (an in-process `s3s-fs` server) stopped for 30 s under load.

use kafka_protocol::messages::describe_producers_request::TopicRequest as ProducersTopic;
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use rill_tests::cluster::Cluster;
use rill_tests::kafka::{
    assert_delivered_as_consumed, client_config, consume_all, create_topic,
    create_topic_replicated, produce_all, producer,
};
use rill_tests::{data_dir, s3, Broker};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Writes `server.properties` in `dir`: tiered storage on, into the store
/// `store` names (its `rill.remote.storage.*` lines), with rounds and
/// retention checks every 200 ms and retries backing off from 200 ms to 1 s.
fn tiered_properties(dir: &Path, store: &str) -> PathBuf {
    let props = dir.join("server.properties");
    std::fs::write(
        &props,
        format!(
            "remote.log.storage.system.enable=true\n{store}\n\
             remote.log.manager.task.interval.ms=200\n\
             remote.log.manager.task.retry.backoff.ms=200\n\
             remote.log.manager.task.retry.backoff.max.ms=1000\n\
             log.retention.check.interval.ms=200\n"
        ),
    )
    .expect("server.properties");
    props
}

/// The store line of a `file://` store in `remote`.
fn file_store(remote: &Path) -> String {
    format!("rill.remote.storage.url=file://{}", remote.display())
}

/// A one-shard broker tiering into the directory `remote`, with `extra`
/// lines of `server.properties`.
fn tiered_broker(dir: &Path, remote: &Path, extra: &str) -> Broker {
    let props = tiered_properties(dir, &format!("{}{extra}", file_store(remote)));
    let config = props.to_str().expect("utf-8");
    Broker::start(RILL, dir, &["--cores", "1", "--config", config])
}

/// Creates the tiered topic `topic` on `broker`, produces `count` records
/// in batches of 16 KiB (four to a segment), and waits until at least
/// `uploaded` segments are in the store and the local log is down to two:
/// what was sent, and where it went.
async fn tier_records(
    broker: &Broker,
    remote: &Path,
    topic: &str,
    count: usize,
    uploaded: usize,
) -> (Vec<(Option<Vec<u8>>, Vec<u8>)>, Vec<(i32, i64)>) {
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, topic, 1, &TIERED_TOPIC).await;
    let sent = records(count);
    let writer = producer(&bootstrap, &[("acks", "all"), ("batch.size", "16384")]);
    let delivered = produce_all(&writer, topic, &sent, None).await;
    let partition_dir = broker.data_dir.join(format!("{topic}-0"));
    wait_until(
        "uploads and local deletion",
        Duration::from_secs(60),
        || {
            files_ending(&partition_dir, ".log").len() <= 2
                && files_ending(remote, ".log").len() >= uploaded
        },
    );
    (sent, delivered)
}

/// A tiered topic's configs: 64 KiB segments, one byte kept locally, so
/// every sealed segment goes once uploaded.
const TIERED_TOPIC: [(&str, &str); 3] = [
    ("remote.storage.enable", "true"),
    ("segment.bytes", "65536"),
    ("local.retention.bytes", "1"),
];

/// The store's directory, made and named without `..` (which `file://`
/// URLs may not hold).
fn remote_dir(data_dir: &Path) -> PathBuf {
    let remote = data_dir.join("remote");
    std::fs::create_dir_all(&remote).expect("remote dir");
    remote.canonicalize().expect("canonical remote dir")
}

/// Files under `root` whose name ends with `suffix`.
fn files_ending(root: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                out.push(path);
            }
        }
    }
    out
}

/// Waits until `check` holds, or fails with `what` after `timeout`.
fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Records of about 1 KiB with their index in the value.
fn records(count: usize) -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
    (0..count)
        .map(|i| {
            (
                None,
                format!("record {i:06} {}", "x".repeat(1000)).into_bytes(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_past_local_retention_are_read_back_from_the_object_store() {
    let dir = data_dir();
    let remote = remote_dir(dir.path());
    let broker = tiered_broker(dir.path(), &remote, "");
    let bootstrap = broker.bootstrap();
    let (sent, delivered) = tier_records(&broker, &remote, "tiered", 2_000, 20).await;
    for suffix in [
        ".index",
        ".timeindex",
        ".txnindex",
        ".leader-epoch-checkpoint",
        ".snapshot",
    ] {
        assert!(
            files_ending(&remote, suffix).len() >= 20,
            "each uploaded segment has its {suffix}"
        );
    }
    // Kafka's log start stays 0: the remote copy begins there.
    let client: BaseConsumer = client_config(&bootstrap).create().expect("client");
    let (low, high) = client
        .fetch_watermarks("tiered", 0, Duration::from_secs(5))
        .expect("watermarks");
    assert_eq!((low, high), (0, 2_000));
    // ListOffsets by timestamp looks in the store first: the oldest
    // timestamp answers offset 0, a remote record's own timestamp the
    // first record at or after it, far below the local log.
    assert_eq!(offset_for_time(&client, "tiered", 0), 0);
    let wanted = timestamp_at(&bootstrap, "tiered", 500);
    let found = offset_for_time(&client, "tiered", wanted);
    assert!(
        found <= 500,
        "offset {found} for the timestamp of offset 500"
    );
    assert!(timestamp_at(&bootstrap, "tiered", found) >= wanted);
    if found > 0 {
        assert!(timestamp_at(&bootstrap, "tiered", found - 1) < wanted);
    }
    // Everything reads back from offset 0, most of it from the store.
    let consumed = consume_all(
        &bootstrap,
        "tiered",
        1,
        sent.len(),
        Duration::from_secs(60),
        &[],
    );
    assert_eq!(consumed.len(), sent.len());
    assert_delivered_as_consumed(&sent, &delivered, &consumed);
    let reads = broker.metric_sum("rill_remote_fetch_requests_total");
    assert!(reads > 0, "fetches were served remotely");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_quotas_hold_uploads_and_reads_back_and_lose_nothing() {
    let dir = data_dir();
    let remote = remote_dir(dir.path());
    // 100 KB/s each over two samples of 1 s: about 200 KB go at once, the
    // rest waits for the rates to fall.
    let mut quotas = String::new();
    for kind in ["copy", "fetch"] {
        quotas.push_str(&format!(
            "\nremote.log.manager.{kind}.max.bytes.per.second=100000\n\
             remote.log.manager.{kind}.quota.window.num=2\n\
             remote.log.manager.{kind}.quota.window.size.seconds=1"
        ));
    }
    let broker = tiered_broker(dir.path(), &remote, &quotas);
    let bootstrap = broker.bootstrap();
    let (sent, delivered) = tier_records(&broker, &remote, "held", 600, 8).await;
    assert!(
        broker.metric_sum("rill_remote_copy_throttled_total") > 0,
        "600 KB went up at 100 KB/s without an upload round held back"
    );
    let consumed = consume_all(
        &bootstrap,
        "held",
        1,
        sent.len(),
        Duration::from_secs(60),
        &[],
    );
    assert_delivered_as_consumed(&sent, &delivered, &consumed);
    assert!(
        broker.metric_sum("rill_remote_fetch_throttled_total") > 0,
        "600 KB read back at 100 KB/s without a remote read held back"
    );
}

/// DescribeProducers of partition 0 of `topic` on the broker at `addr`:
/// each producer id with its epoch and last sequence, by id.
fn producers_of(addr: std::net::SocketAddr, topic: &str) -> Vec<(i64, i32, i32)> {
    let mut asked = ProducersTopic::default();
    asked.name = TopicName(StrBytes::from_string(topic.to_string()));
    asked.partition_indexes = vec![0];
    let mut body = DescribeProducersRequest::default();
    body.topics = vec![asked];
    let response: DescribeProducersResponse =
        rill_tests::raw::request(addr, ApiKey::DescribeProducers, 0, &body)
            .expect("DescribeProducers answered");
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0, "{partition:?}");
    let mut producers: Vec<(i64, i32, i32)> = (partition.active_producers.iter())
        .map(|p| (p.producer_id.0, p.producer_epoch, p.last_sequence))
        .collect();
    producers.sort_unstable();
    producers
}

/// ListOffsets by timestamp on partition 0 of `topic`.
fn offset_for_time(client: &BaseConsumer, topic: &str, timestamp_ms: i64) -> i64 {
    let mut query = TopicPartitionList::new();
    query
        .add_partition_offset(topic, 0, Offset::Offset(timestamp_ms))
        .expect("partition");
    let found = client
        .offsets_for_times(query, Duration::from_secs(10))
        .expect("offsets_for_times");
    match found
        .find_partition(topic, 0)
        .map(|element| element.offset())
    {
        Some(Offset::Offset(offset)) => offset,
        other => panic!("no offset for timestamp {timestamp_ms}: {other:?}"),
    }
}

/// The timestamp of the record at `offset` of partition 0 of `topic`.
fn timestamp_at(bootstrap: &str, topic: &str, offset: i64) -> i64 {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "rill-tests-timestamps")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(offset))
        .expect("partition");
    consumer.assign(&assignment).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            if message.offset() == offset {
                return message.timestamp().to_millis().expect("a timestamp");
            }
        }
    }
    panic!("offset {offset} of {topic} not read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_leaves_nothing_in_the_object_store() {
    let dir = data_dir();
    let remote = remote_dir(dir.path());
    let broker = tiered_broker(dir.path(), &remote, "");
    let bootstrap = broker.bootstrap();
    let topic_configs = [
        ("remote.storage.enable", "true"),
        ("segment.bytes", "32768"),
    ];
    create_topic(&bootstrap, "doomed", 1, &topic_configs).await;
    let writer = producer(&bootstrap, &[("acks", "all"), ("batch.size", "8192")]);
    produce_all(&writer, "doomed", &records(300), None).await;
    wait_until("uploads", Duration::from_secs(60), || {
        files_ending(&remote, ".log").len() >= 5
    });
    let admin: AdminClient<DefaultClientContext> =
        client_config(&bootstrap).create().expect("admin");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let deleted = admin
        .delete_topics(&["doomed"], &options)
        .await
        .expect("delete request");
    assert!(deleted.iter().all(|r| r.is_ok()), "{deleted:?}");
    wait_until("the purge", Duration::from_secs(60), || {
        files_ending(&remote, "").is_empty()
    });
    // The topic's name is free again, and its new incarnation is empty.
    create_topic(&bootstrap, "doomed", 1, &topic_configs).await;
    let client: BaseConsumer = client_config(&bootstrap).create().expect("client");
    let (low, high) = client
        .fetch_watermarks("doomed", 0, Duration::from_secs(5))
        .expect("watermarks");
    assert_eq!((low, high), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiering_is_refused_where_kafka_refuses_it() {
    let dir = data_dir();
    let remote = remote_dir(dir.path());
    let broker = tiered_broker(dir.path(), &remote, "");
    let bootstrap = broker.bootstrap();
    let admin: AdminClient<DefaultClientContext> =
        client_config(&bootstrap).create().expect("admin");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for bad in [
        vec![
            ("remote.storage.enable", "true"),
            ("cleanup.policy", "compact"),
        ],
        vec![
            ("remote.storage.enable", "true"),
            ("retention.ms", "60000"),
            ("local.retention.ms", "120000"),
        ],
    ] {
        let topic =
            rdkafka::admin::NewTopic::new("refused", 1, rdkafka::admin::TopicReplication::Fixed(1));
        let topic = bad.iter().fold(topic, |t, (k, v)| t.set(k, v));
        let result = admin
            .create_topics(&[topic], &options)
            .await
            .expect("request");
        assert!(
            matches!(
                &result[0],
                Err((_, rdkafka::types::RDKafkaErrorCode::InvalidConfig))
            ),
            "{bad:?}: {result:?}"
        );
    }
}

/// Partition 0's (leader, replicas, ISR), by rdkafka's metadata.
fn partition_of(bootstrap: &str, topic: &str) -> (i32, Vec<i32>, Vec<i32>) {
    let client: BaseConsumer = client_config(bootstrap).create().expect("client");
    let metadata = client
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let partition = &metadata.topics()[0].partitions()[0];
    let mut isr = partition.isr().to_vec();
    isr.sort_unstable();
    (partition.leader(), partition.replicas().to_vec(), isr)
}

/// The partition's leader, by rdkafka's metadata.
fn leader_of(bootstrap: &str, topic: &str) -> i32 {
    partition_of(bootstrap, topic).0
}

/// The segment stems in the store that lack one of a segment's objects (a
/// partial upload left behind).
fn partial_segments(remote: &Path) -> Vec<String> {
    // Every segment has these; the producer snapshot only when its leader
    // had one at the segment's end.
    const WHOLE: [&str; 5] = [
        "index",
        "timeindex",
        "txnindex",
        "leader-epoch-checkpoint",
        "log",
    ];
    let mut objects: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for path in files_ending(remote, "") {
        let name = path.file_name().map(|n| n.to_string_lossy().to_string());
        let name = name.unwrap_or_default();
        let (base, suffix) = name.split_once('.').unwrap_or((&name, ""));
        let stem = path.with_file_name(base).to_string_lossy().to_string();
        objects.entry(stem).or_default().push(suffix.to_string());
    }
    objects
        .into_iter()
        .filter(|(_, suffixes)| !WHOLE.iter().all(|s| suffixes.iter().any(|have| have == s)))
        .map(|(stem, _)| stem)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_mid_upload_leaves_nothing_half_written_and_loses_nothing() {
    let shared = data_dir();
    let remote = remote_dir(shared.path());
    let props = tiered_properties(shared.path(), &file_store(&remote));
    let config = props.to_str().expect("utf-8");
    // The first leader aborts at its 5th upload, its indexes written and
    // its log not.
    let crash = [("RILL_FAULT_REMOTE_CRASH_AT_UPLOAD", "5")];
    let mut cluster = Cluster::start_with_env(RILL, 3, &["--config", config], &crash);
    cluster.wait_settled(Duration::from_secs(60));
    let bootstrap = cluster.bootstrap();
    let topic_configs = [&TIERED_TOPIC[..], &[("min.insync.replicas", "2")]].concat();
    create_topic_replicated(&bootstrap, "replicated", 1, 3, &topic_configs).await;
    let first_leader = leader_of(&bootstrap, "replicated");
    let sent = records(2_000);
    // Idempotent: the leader's crash makes it resend, and a resend must
    // not write twice.
    let writer = producer(
        &bootstrap,
        &[
            ("acks", "all"),
            ("batch.size", "16384"),
            ("enable.idempotence", "true"),
        ],
    );
    let delivered = produce_all(&writer, "replicated", &sent, None).await;
    wait_until("the first leader's crash", Duration::from_secs(60), || {
        !cluster.node(first_leader).is_running()
    });
    // A follower takes over, deletes the half-written copy, uploads on,
    // and every replica keeps only its tail.
    let survivors: Vec<i32> = cluster
        .ids
        .iter()
        .copied()
        .filter(|&id| id != first_leader)
        .collect();
    let bootstrap = cluster.node(survivors[0]).bootstrap();
    let dirs: Vec<PathBuf> = survivors
        .iter()
        .map(|&id| cluster.node(id).data_dir.join("replicated-0"))
        .collect();
    let mut seen = (0, Vec::new());
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until("the new leader's uploads", Duration::from_secs(60), || {
            seen = (
                files_ending(&remote, ".log").len(),
                partial_segments(&remote),
            );
            // The new leader's segments follow its own rolls (a follower
            // appends what each fetch brought): fewer, larger ones.
            seen.0 >= 6
                && seen.1.is_empty()
                && dirs.iter().all(|d| files_ending(d, ".log").len() <= 2)
        })
    }));
    if waited.is_err() {
        let logs: Vec<String> = survivors.iter().map(|&id| cluster.node(id).log()).collect();
        panic!(
            "{} segments uploaded, partial {:?}; survivors' logs:\n{}",
            seen.0,
            seen.1,
            logs.join("\n----\n")
        );
    }
    let deleted: i64 = survivors
        .iter()
        .map(|&id| {
            cluster
                .node(id)
                .metric_sum("rill_remote_delete_segments_total")
        })
        .sum();
    assert!(deleted >= 1, "the half-written copy was deleted");
    let consumed = consume_all(
        &bootstrap,
        "replicated",
        1,
        sent.len(),
        Duration::from_secs(60),
        &[],
    );
    assert_delivered_as_consumed(&sent, &delivered, &consumed);
}

/// A broker tiering to the S3 server at `address`.
fn s3_broker(dir: &Path, address: std::net::SocketAddr) -> Broker {
    let store = format!(
        "rill.remote.storage.url=s3://{}/cluster-a\n\
         rill.remote.storage.endpoint=http://{address}\n\
         rill.remote.storage.allow.http=true\n\
         rill.remote.storage.op.timeout.ms=2000",
        s3::BUCKET
    );
    let props = tiered_properties(dir, &store);
    let config = props.to_str().expect("utf-8");
    Broker::start_with_env(
        RILL,
        dir,
        &["--cores", "1", "--config", config],
        &s3::CREDENTIALS_ENV,
    )
}

/// How long the S3 store is down under load.
const STORE_OUTAGE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_store_down_under_load_delays_uploads_and_loses_nothing() {
    let dir = data_dir();
    let store_root = dir.path().join("s3");
    let server = s3::S3Server::start("127.0.0.1:0".parse().expect("addr"), &store_root);
    let address = server.address;
    let broker = s3_broker(dir.path(), address);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "s3", 1, &TIERED_TOPIC).await;
    let writer = producer(&bootstrap, &[("acks", "all"), ("batch.size", "16384")]);
    let first = records(1_000);
    let mut delivered = produce_all(&writer, "s3", &first, None).await;
    let objects = store_root.join(s3::BUCKET).join("cluster-a");
    let partition_dir = dir.path().join("s3-0");
    wait_until("uploads to S3", Duration::from_secs(60), || {
        files_ending(&objects, ".log").len() >= 10
            && files_ending(&partition_dir, ".log").len() <= 2
    });
    // The store goes down for 30 s, the outage, while records go
    // on arriving (about 33 a second): every one is acknowledged, nothing
    // local is deleted that is not uploaded, and uploads wait.
    drop(server);
    let uploaded = files_ending(&objects, ".log").len();
    let second = records(1_000);
    let outage_start = tokio::time::Instant::now();
    let outage_end = outage_start + STORE_OUTAGE;
    for (second_of_outage, chunk) in second.chunks(second.len() / 30).enumerate() {
        delivered.extend(produce_all(&writer, "s3", chunk, None).await);
        let next = outage_start + Duration::from_secs(second_of_outage as u64 + 1);
        tokio::time::sleep_until(next.min(outage_end)).await;
    }
    tokio::time::sleep_until(outage_end).await;
    let local = files_ending(&partition_dir, ".log").len();
    assert!(
        local >= 10,
        "local segments kept while the store is down: {local}"
    );
    assert_eq!(files_ending(&objects, ".log").len(), uploaded);
    assert!(broker.metric_sum("rill_remote_task_errors_total") > 0);
    // Back up: uploads resume and the local log is trimmed again.
    let _server = s3::S3Server::start(address, &store_root);
    wait_until("uploads after the outage", Duration::from_secs(60), || {
        files_ending(&partition_dir, ".log").len() <= 2
    });
    let sent: Vec<_> = first.into_iter().chain(second).collect();
    let consumed = consume_all(
        &bootstrap,
        "s3",
        1,
        sent.len(),
        Duration::from_secs(60),
        &[],
    );
    assert_delivered_as_consumed(&sent, &delivered, &consumed);
    assert!(broker.metric_sum("rill_remote_fetch_requests_total") > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_follower_starts_at_the_leaders_local_log() {
    let shared = data_dir();
    let remote = remote_dir(shared.path());
    let props = tiered_properties(shared.path(), &file_store(&remote));
    let config = props.to_str().expect("utf-8");
    let mut cluster =
        Cluster::start_settled(RILL, 3, &["--config", config], Duration::from_secs(60));
    let bootstrap = cluster.bootstrap();
    create_topic_replicated(&bootstrap, "rebuilt", 1, 3, &TIERED_TOPIC).await;
    // Two idempotent producers: the first writes only what ends up in the
    // store, the second the rest.
    let sent = records(1_000);
    let settings = [
        ("acks", "all"),
        ("batch.size", "16384"),
        ("enable.idempotence", "true"),
    ];
    let (early, late) = sent.split_at(300);
    let mut delivered = produce_all(&producer(&bootstrap, &settings), "rebuilt", early, None).await;
    delivered.extend(produce_all(&producer(&bootstrap, &settings), "rebuilt", late, None).await);
    let (leader, replicas, _) = partition_of(&bootstrap, "rebuilt");
    let leader_dir = cluster.node(leader).data_dir.join("rebuilt-0");
    wait_until("tiering on the leader", Duration::from_secs(60), || {
        files_ending(&leader_dir, ".log").len() <= 2
    });
    // A follower loses its copy: it fetches from 0, which the leader holds
    // only remotely (OFFSET_MOVED_TO_TIERED_STORAGE), and starts at the
    // leader's local log instead, back in the ISR.
    let follower = replicas
        .iter()
        .copied()
        .find(|&id| id != leader)
        .expect("a follower");
    let other = replicas
        .iter()
        .copied()
        .find(|&id| id != leader && id != follower)
        .expect("another");
    cluster.node(follower).stop();
    std::fs::remove_dir_all(cluster.node(follower).data_dir.join("rebuilt-0")).expect("emptied");
    cluster.node(follower).restart();
    // It holds only the tail: its log starts where the leader's local log
    // did, not at 0, and it is back in the ISR.
    let follower_dir = cluster.node(follower).data_dir.join("rebuilt-0");
    let first_base = || {
        let bases = files_ending(&follower_dir, ".log");
        (bases.iter())
            .filter_map(|p| p.file_stem()?.to_str()?.parse::<i64>().ok())
            .min()
    };
    let all: Vec<i32> = (1..=3).collect();
    wait_until(
        "the emptied follower's tail, in the ISR",
        Duration::from_secs(60),
        || {
            first_base().is_some_and(|base| base > 0)
                && partition_of(&bootstrap, "rebuilt").2 == all
        },
    );
    // It knows both producers, the first from the store's producer
    // snapshot (none of its batches is in the tail it fetched), with the
    // leader's sequences: leading, it would deduplicate their retries.
    let leader_producers = producers_of(cluster.node(leader).addr, "rebuilt");
    assert_eq!(leader_producers.len(), 2, "{leader_producers:?}");
    assert_eq!(
        producers_of(cluster.node(follower).addr, "rebuilt"),
        leader_producers
    );
    // The leader goes: a follower leads and serves everything from 0, the
    // start from the store.
    cluster.node(leader).kill();
    let bootstrap = cluster.node(follower).bootstrap();
    wait_until("a new leader", Duration::from_secs(60), || {
        [follower, other].contains(&partition_of(&bootstrap, "rebuilt").0)
    });
    let consumed = consume_all(
        &bootstrap,
        "rebuilt",
        1,
        sent.len(),
        Duration::from_secs(60),
        &[],
    );
    assert_delivered_as_consumed(&sent, &delivered, &consumed);
}

//! Client telemetry (KIP-714) against a real `rill`: subscriptions set as
//! CLIENT_METRICS config resources with kafka-python's admin client (as
//! `kafka-configs --entity-type client-metrics` does; rdkafka's admin API
//! has no such resource type), pushes from librdkafka producers (2.12.1 in
//! this repo's rdkafka-sys; KIP-714 came in 2.5, and `enable.metrics.push`
//! is on by default), and `/metrics` scraped for what they pushed.
//!
//! What must hold:
//! - a producer a subscription matches pushes, and its queue-time metrics
//!   show on `/metrics`, sanitized, labelled with its client id and
//!   instance id; metrics it was not asked for do not;
//! - a producer no subscription matches asks (GetTelemetrySubscriptions)
//!   but never pushes, and nothing of it shows;
//! - with `rill.telemetry.max.clients` below the number of pushing
//!   clients, `/metrics` never shows more client instances than the cap;
//! - a subscription survives a restart (DescribeConfigs) and is listed by
//!   ListConfigResources;
//! - in a three-broker cluster a subscription set through one broker is
//!   what every broker answers, under the same subscription id for the
//!   same instance (a client may push to any of them);
//! - the protocol's answers, over a raw socket: an instance id for the zero
//!   one, an empty metrics list with no subscription, and Kafka's error
//!   codes for a stale subscription id, a push too soon, an undecodable
//!   payload, a payload over `telemetry.max.bytes`, an unknown compression,
//!   the zero instance id, and a push after a terminating one.

use kafka_protocol::messages::{
    ApiKey, GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest, PushTelemetryResponse,
};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rill_tests::cluster::{wait_for, Cluster};
use rill_tests::kafka::client_config;
use rill_tests::python::{python_script, require_kafka_python};
use rill_tests::{data_dir, http_get, Broker};
use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TIMEOUT: Duration = Duration::from_secs(30);
const QUEUE_TIME_AVG: &str = "rill_client_org_apache_kafka_producer_record_queue_time_avg";
const QUEUE_TIME_MAX: &str = "rill_client_org_apache_kafka_producer_record_queue_time_max";

const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
const INVALID_RECORD: i16 = 87;
const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
const UNKNOWN_SUBSCRIPTION_ID: i16 = 117;
const TELEMETRY_TOO_LARGE: i16 = 118;

/// `tests/python/client_metrics.py` with `args`: its output, or what it
/// printed when it failed.
fn try_client_metrics(bootstrap: &str, args: &[&str]) -> Result<String, String> {
    require_kafka_python();
    let output = Command::new("python3")
        .arg(python_script("client_metrics.py"))
        .arg(bootstrap)
        .args(args)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// [`try_client_metrics`], which must succeed.
fn client_metrics(bootstrap: &str, args: &[&str]) -> String {
    try_client_metrics(bootstrap, args)
        .unwrap_or_else(|failure| panic!("client_metrics.py {args:?}: {failure}"))
}

/// A broker on two shards with `settings` in its config file.
fn start_broker(dir: &std::path::Path, settings: &str) -> Broker {
    let config = dir.join("telemetry.properties");
    std::fs::write(&config, settings).expect("config file");
    let config = config.display().to_string();
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    Broker::start(RILL, &data, &["--cores", "2", "--config", &config])
}

/// A librdkafka producer with `client_id` writing small records to `topic`
/// until `stop`, polling so that its callbacks run.
fn keep_producing(bootstrap: &str, client_id: &str, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    let producer: BaseProducer = client_config(bootstrap)
        .set("client.id", client_id)
        .set("enable.metrics.push", "true")
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let _ = producer.send(BaseRecord::<(), [u8]>::to("telemetry").payload(&[7u8; 64]));
            producer.poll(Duration::from_millis(20));
        }
        let _ = producer.flush(Duration::from_secs(5));
    })
}

/// The `/metrics` sample lines of client metrics.
fn client_lines(broker: &Broker) -> Vec<String> {
    http_get(broker.admin_addr, "/metrics")
        .lines()
        .filter(|line| line.starts_with("rill_client_"))
        .map(str::to_owned)
        .collect()
}

/// A label's value in a sample line.
fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("{name}=\""))? + name.len() + 2;
    let end = start + line[start..].find('"')?;
    Some(&line[start..end])
}

/// `rill_requests_total` of one API, summed over the shards.
fn requests_of(broker: &Broker, api: &str) -> i64 {
    http_get(broker.admin_addr, "/metrics")
        .lines()
        .filter(|line| line.starts_with("rill_requests_total{"))
        .filter(|line| label(line, "api") == Some(api))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<i64>().ok())
        .sum()
}

#[test]
fn a_subscribed_producer_pushes_its_queue_time_to_metrics() {
    let dir = data_dir();
    let broker = start_broker(dir.path(), "");
    let bootstrap = broker.bootstrap();
    let set = [
        "set",
        "producers",
        "metrics=org.apache.kafka.producer.",
        "interval.ms=500",
    ];
    assert_eq!(client_metrics(&bootstrap, &set), "OK");
    let stop = Arc::new(AtomicBool::new(false));
    let producer = keep_producing(&bootstrap, "telemetry-producer", stop.clone());
    let lines = wait_for("the producer's queue time on /metrics", TIMEOUT, || {
        let lines = client_lines(&broker);
        let shown = |family: &str| {
            lines.iter().any(|l| {
                l.starts_with(&format!("{family}{{"))
                    && label(l, "client_id") == Some("telemetry-producer")
            })
        };
        (shown(QUEUE_TIME_AVG) && shown(QUEUE_TIME_MAX)).then_some(lines)
    });
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("producer thread");
    for line in &lines {
        // Kafka's text form of a UUID: 22 characters of URL-safe base64.
        let instance = label(line, "client_instance_id").expect("instance label");
        assert_eq!(instance.len(), 22, "{line}");
        assert_ne!(instance, "AAAAAAAAAAAAAAAAAAAAAA", "{line}");
        // Only what the subscription asked for.
        assert!(
            line.starts_with("rill_client_org_apache_kafka_producer_"),
            "{line}"
        );
    }
    let text = http_get(broker.admin_addr, "/metrics");
    assert!(
        text.contains(&format!("# TYPE {QUEUE_TIME_AVG} gauge\n")),
        "{text}"
    );
    assert!(requests_of(&broker, "PushTelemetry") >= 1);
}

#[test]
fn a_producer_no_subscription_matches_never_pushes() {
    let dir = data_dir();
    let broker = start_broker(dir.path(), "");
    let bootstrap = broker.bootstrap();
    let set = [
        "set",
        "others",
        "metrics=*",
        "interval.ms=500",
        "match=client_id=someone-else",
    ];
    assert_eq!(client_metrics(&bootstrap, &set), "OK");
    let stop = Arc::new(AtomicBool::new(false));
    let producer = keep_producing(&bootstrap, "unmatched-producer", stop.clone());
    wait_for("the producer to ask for its subscription", TIMEOUT, || {
        (requests_of(&broker, "GetTelemetrySubscriptions") >= 1).then_some(())
    });
    // A matched producer pushes within about one interval (0.5 s) of its
    // answer; this one is told to push nothing, so it never does.
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("producer thread");
    assert_eq!(requests_of(&broker, "PushTelemetry"), 0);
    assert_eq!(client_lines(&broker), Vec::<String>::new());
}

#[test]
fn metrics_never_show_more_clients_than_the_cap() {
    let dir = data_dir();
    let cap = 2;
    let broker = start_broker(dir.path(), &format!("rill.telemetry.max.clients={cap}\n"));
    let bootstrap = broker.bootstrap();
    let set = ["set", "everyone", "metrics=*", "interval.ms=500"];
    assert_eq!(client_metrics(&bootstrap, &set), "OK");
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<JoinHandle<()>> = (0..5)
        .map(|n| keep_producing(&bootstrap, &format!("capped-{n}"), stop.clone()))
        .collect();
    let mut most_shown = 0;
    let deadline = Instant::now() + Duration::from_secs(8);
    while Instant::now() < deadline || most_shown == 0 {
        let instances: BTreeSet<String> = client_lines(&broker)
            .iter()
            .filter_map(|l| label(l, "client_instance_id").map(str::to_owned))
            .collect();
        assert!(
            instances.len() <= cap,
            "{} client instances shown, cap {cap}: {instances:?}",
            instances.len()
        );
        most_shown = most_shown.max(instances.len());
        assert!(Instant::now() < deadline + TIMEOUT, "no client ever pushed");
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for producer in producers {
        producer.join().expect("producer thread");
    }
    // Five clients pushed: the cap, not a lack of clients, held them back.
    assert!(requests_of(&broker, "PushTelemetry") >= 5);
}

#[test]
fn a_subscription_survives_a_restart_and_is_listed() {
    let dir = data_dir();
    let mut broker = start_broker(dir.path(), "");
    let bootstrap = broker.bootstrap();
    let set = [
        "set",
        "app-producers",
        "metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.",
        "interval.ms=1000",
        "match=client_id=app-.*",
    ];
    assert_eq!(client_metrics(&bootstrap, &set), "OK");
    // A bad value is refused with Kafka's INVALID_CONFIG, and changes nothing.
    let refused = try_client_metrics(&bootstrap, &["set", "app-producers", "interval.ms=5"]);
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("Error 40")),
        "{refused:?}"
    );
    broker.stop();
    broker.restart();
    let bootstrap = broker.bootstrap();
    let described = wait_for(
        "the subscription described after the restart",
        TIMEOUT,
        || try_client_metrics(&bootstrap, &["describe", "app-producers"]).ok(),
    );
    assert_eq!(
        described,
        "{\"metrics\": \"org.apache.kafka.producer.,org.apache.kafka.consumer.\", \
         \"interval.ms\": \"1000\", \"match\": \"client_id=app-.*\"}"
    );
    assert_eq!(client_metrics(&bootstrap, &["list"]), "[\"app-producers\"]");
    assert_eq!(
        client_metrics(
            &bootstrap,
            &["delete", "app-producers", "match", "metrics", "interval.ms"]
        ),
        "OK"
    );
    assert_eq!(client_metrics(&bootstrap, &["list"]), "[]");
}

/// GetTelemetrySubscriptions v0 for `instance_id` on `socket`.
fn get_subscription(
    socket: &mut TcpStream,
    instance_id: [u8; 16],
) -> GetTelemetrySubscriptionsResponse {
    let mut request = GetTelemetrySubscriptionsRequest::default();
    request.client_instance_id = uuid::Uuid::from_bytes(instance_id);
    rill_tests::raw::exchange(socket, ApiKey::GetTelemetrySubscriptions, 0, 1, &request)
        .expect("GetTelemetrySubscriptions answered")
}

/// PushTelemetry v0 on `socket`: its error code.
fn push(
    socket: &mut TcpStream,
    answer: &GetTelemetrySubscriptionsResponse,
    subscription_id: i32,
    compression_type: i8,
    metrics: &[u8],
    terminating: bool,
) -> i16 {
    let mut request = PushTelemetryRequest::default();
    request.client_instance_id = answer.client_instance_id;
    request.subscription_id = subscription_id;
    request.compression_type = compression_type;
    request.metrics = bytes::Bytes::copy_from_slice(metrics);
    request.terminating = terminating;
    let response: PushTelemetryResponse =
        rill_tests::raw::exchange(socket, ApiKey::PushTelemetry, 0, 2, &request)
            .expect("PushTelemetry answered");
    response.error_code
}

fn connect(addr: SocketAddr) -> TcpStream {
    let socket = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    socket
}

#[test]
fn the_protocol_answers_with_kafkas_codes() {
    let dir = data_dir();
    let broker = start_broker(dir.path(), "telemetry.max.bytes=1024\n");
    let mut socket = connect(broker.addr);
    // No subscription: an instance id, nothing to push, the 5-minute default.
    let none = get_subscription(&mut socket, [0; 16]);
    assert_eq!(none.error_code, 0);
    assert_ne!(none.client_instance_id, uuid::Uuid::nil());
    assert!(none.requested_metrics.is_empty());
    assert_eq!(none.push_interval_ms, 300_000);
    assert_eq!(none.telemetry_max_bytes, 1024);
    let set = ["set", "all", "metrics=*", "interval.ms=60000"];
    assert_eq!(client_metrics(&broker.bootstrap(), &set), "OK");

    let fresh = |socket: &mut TcpStream| {
        let answer = get_subscription(socket, [0; 16]);
        assert_eq!(answer.error_code, 0);
        assert_eq!(answer.push_interval_ms, 60_000);
        assert_eq!(answer.requested_metrics.len(), 1);
        assert_eq!(answer.requested_metrics[0].as_str(), "");
        assert_eq!(answer.accepted_compression_types, [4, 3, 1, 2]);
        answer
    };
    let a = fresh(&mut socket);
    let id = a.subscription_id;
    assert_eq!(
        push(&mut socket, &a, id ^ 1, 0, &[], false),
        UNKNOWN_SUBSCRIPTION_ID
    );
    // Told to ask again: not throttled, and the id is the same.
    let again = get_subscription(&mut socket, a.client_instance_id.into_bytes());
    assert_eq!((again.error_code, again.subscription_id), (0, id));
    // The first push after asking is taken; its payload is not OTLP.
    assert_eq!(
        push(&mut socket, &a, id, 0, &[0xff; 3], false),
        INVALID_RECORD
    );
    // The next comes before the interval.
    assert_eq!(
        push(&mut socket, &a, id, 0, &[], false),
        THROTTLING_QUOTA_EXCEEDED
    );
    let early = get_subscription(&mut socket, a.client_instance_id.into_bytes());
    assert_eq!(early.error_code, THROTTLING_QUOTA_EXCEEDED);

    let b = fresh(&mut socket);
    assert_eq!(
        push(&mut socket, &b, b.subscription_id, 9, &[1], false),
        UNSUPPORTED_COMPRESSION_TYPE
    );
    let c = fresh(&mut socket);
    assert_eq!(
        push(&mut socket, &c, c.subscription_id, 0, &[0; 1025], false),
        TELEMETRY_TOO_LARGE
    );
    let mut zero = fresh(&mut socket);
    zero.client_instance_id = uuid::Uuid::nil();
    assert_eq!(push(&mut socket, &zero, 0, 0, &[], false), INVALID_REQUEST);
    let d = fresh(&mut socket);
    assert_eq!(push(&mut socket, &d, d.subscription_id, 0, &[], true), 0);
    assert_eq!(
        push(&mut socket, &d, d.subscription_id, 0, &[], false),
        INVALID_REQUEST
    );
}

#[test]
fn every_broker_of_a_cluster_answers_the_same_subscription() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], TIMEOUT);
    let set = [
        "set",
        "producers",
        "metrics=org.apache.kafka.producer.",
        "interval.ms=1000",
    ];
    let first = cluster.node(1).bootstrap();
    assert_eq!(client_metrics(&first, &set), "OK");
    let mut socket = connect(cluster.node(1).addr);
    let asked = get_subscription(&mut socket, [0; 16]);
    assert_eq!(asked.requested_metrics.len(), 1);
    let instance = asked.client_instance_id.into_bytes();
    for node in 2..=3 {
        let addr = cluster.node(node).addr;
        let answer = wait_for("the subscription on every broker", TIMEOUT, || {
            let answer = get_subscription(&mut connect(addr), instance);
            (!answer.requested_metrics.is_empty()).then_some(answer)
        });
        assert_eq!(answer.error_code, 0, "node {node}");
        assert_eq!(
            answer.requested_metrics[0].as_str(),
            "org.apache.kafka.producer."
        );
        assert_eq!(answer.push_interval_ms, 1000, "node {node}");
        assert_eq!(answer.subscription_id, asked.subscription_id, "node {node}");
    }
}

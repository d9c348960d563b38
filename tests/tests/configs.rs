//! Kafka's configuration, accepted: every Kafka 4.x topic config through the
//! admin API (described back, bad values refused with INVALID_CONFIG), a
//! stock `server.properties` starting the broker, unknown broker keys only
//! warned about, and the advertised host of a wildcard bind.

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use rill_tests::kafka::{client_config, consume_all, produce_all, producer};
use rill_tests::{data_dir, free_port, Broker};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Every topic config of Kafka 4.x at a valid value that is not its default.
const EVERY_TOPIC_CONFIG: &[(&str, &str)] = &[
    ("cleanup.policy", "compact,delete"),
    ("compression.gzip.level", "5"),
    ("compression.lz4.level", "10"),
    ("compression.type", "lz4"),
    ("compression.zstd.level", "7"),
    ("delete.retention.ms", "1000"),
    ("file.delete.delay.ms", "1000"),
    ("flush.messages", "1000"),
    ("flush.ms", "1000"),
    ("follower.replication.throttled.replicas", "0:0"),
    ("index.interval.bytes", "8192"),
    ("leader.replication.throttled.replicas", "*"),
    ("local.retention.bytes", "1000000"),
    ("local.retention.ms", "60000"),
    ("max.compaction.lag.ms", "600000"),
    ("max.message.bytes", "2000000"),
    ("message.timestamp.after.max.ms", "7200000"),
    ("message.timestamp.before.max.ms", "7200000"),
    ("message.timestamp.type", "LogAppendTime"),
    ("min.cleanable.dirty.ratio", "0.25"),
    ("min.compaction.lag.ms", "1000"),
    ("min.insync.replicas", "2"),
    ("preallocate", "true"),
    ("remote.log.copy.disable", "true"),
    ("remote.log.delete.on.disable", "true"),
    // `true` is refused by a broker without tiered storage, as Kafka's.
    ("remote.storage.enable", "false"),
    ("retention.bytes", "1000000000"),
    ("retention.ms", "86400000"),
    ("segment.bytes", "2097152"),
    ("segment.index.bytes", "1048576"),
    ("segment.jitter.ms", "1000"),
    ("segment.ms", "3600000"),
    ("unclean.leader.election.enable", "true"),
];

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    client_config(bootstrap).create().expect("admin client")
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))
}

async fn create(
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
    configs: &[(&str, &str)],
) -> Result<(), RDKafkaErrorCode> {
    let mut topic = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    for (k, v) in configs {
        topic = topic.set(k, v);
    }
    let results = admin
        .create_topics(&[topic], &options())
        .await
        .expect("create_topics request");
    results
        .into_iter()
        .next()
        .expect("one result")
        .map(|_| ())
        .map_err(|(_, code)| code)
}

/// name -> (value, source) as DescribeConfigs answers for `resource`.
async fn describe(
    admin: &AdminClient<DefaultClientContext>,
    resource: ResourceSpecifier<'_>,
) -> BTreeMap<String, (Option<String>, rdkafka::admin::ConfigSource)> {
    let results = admin
        .describe_configs(&[resource], &options())
        .await
        .expect("describe_configs request");
    let resource = results
        .into_iter()
        .next()
        .expect("one result")
        .expect("described");
    resource
        .entries
        .into_iter()
        .map(|e| (e.name, (e.value, e.source)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kafka_topic_config_is_accepted_and_described() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    let admin = admin(&broker.bootstrap());
    create(&admin, "every-config", EVERY_TOPIC_CONFIG)
        .await
        .expect("every Kafka topic config accepted");
    let described = describe(&admin, ResourceSpecifier::Topic("every-config")).await;
    assert_eq!(described.len(), EVERY_TOPIC_CONFIG.len(), "{described:?}");
    for (name, value) in EVERY_TOPIC_CONFIG {
        let (got, source) = &described[*name];
        assert_eq!(got.as_deref(), Some(*value), "{name}");
        let expected = if *name == "remote.storage.enable" {
            rdkafka::admin::ConfigSource::Default
        } else {
            rdkafka::admin::ConfigSource::DynamicTopic
        };
        assert_eq!(*source, expected, "{name}");
    }
    // Inert ones are logged once as such.
    let log = broker.log();
    assert!(
        log.contains("accepted but not applied") && log.contains("segment.jitter.ms"),
        "{log}"
    );

    // Bad values and unknown names get Kafka's INVALID_CONFIG; nothing is created.
    for bad in [
        ("min.cleanable.dirty.ratio", "1.5"),
        ("max.compaction.lag.ms", "0"),
        ("compression.zstd.level", "99"),
        ("message.timestamp.type", "WallClock"),
        ("remote.storage.enable", "true"),
        ("message.downconversion.enable", "true"),
        ("no.such.config", "1"),
    ] {
        assert_eq!(
            create(&admin, "refused", &[bad]).await,
            Err(RDKafkaErrorCode::InvalidConfig),
            "{bad:?}"
        );
    }
    let metadata = admin
        .inner()
        .fetch_metadata(None, Duration::from_secs(5))
        .expect("metadata");
    assert!(
        !metadata.topics().iter().any(|t| t.name() == "refused"),
        "a refused topic is not created"
    );

    // An inert config survives a restart (persisted beside the partition).
    drop(admin);
    let mut broker = broker;
    broker.stop();
    broker.restart();
    let admin = rill_tests::kafka::client_config(&broker.bootstrap())
        .create::<AdminClient<DefaultClientContext>>()
        .expect("admin");
    let described = describe(&admin, ResourceSpecifier::Topic("every-config")).await;
    assert_eq!(described["segment.jitter.ms"].0.as_deref(), Some("1000"));
    // So does an applied one.
    assert_eq!(
        described["min.cleanable.dirty.ratio"].0.as_deref(),
        Some("0.25")
    );
}

/// Kafka's sample KRaft `server.properties`, with the port and data dir a
/// test needs, and one key rill has never heard of.
fn server_properties(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let stock = include_str!("../fixtures/server.properties");
    let text = format!(
        "{stock}\n\
         listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{control}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
         log.dirs={data}\n\
         broker.rack=rack-a\n\
         replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector\n\
         some.plugin.setting.rill.never.heard.of=42\n",
        control = free_port(),
        data = dir.display(),
    );
    let path = dir.join("server.properties");
    std::fs::write(&path, text).expect("write server.properties");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_server_properties_starts_rill() {
    let dir = data_dir();
    let port = free_port();
    let file = server_properties(dir.path(), port);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let broker = Broker::start_listening(
        RILL,
        dir.path(),
        addr,
        &[
            "--cores",
            "1",
            "--config",
            file.to_str().expect("utf-8 path"),
        ],
        &[],
    );
    let bootstrap = broker.bootstrap();
    let p = producer(&bootstrap, &[("acks", "all")]);
    let records: Vec<_> = (0..20)
        .map(|i| (None, format!("v{i}").into_bytes()))
        .collect();
    produce_all(&p, "from-properties", &records, None).await;
    let got = consume_all(
        &bootstrap,
        "from-properties",
        1,
        20,
        Duration::from_secs(20),
        &[],
    );
    assert_eq!(got.len(), 20);
    let admin = admin(&bootstrap);
    let described = describe(&admin, ResourceSpecifier::Broker(1)).await;
    assert_eq!(described["node.id"].0.as_deref(), Some("1"));
    assert_eq!(described["broker.rack"].0.as_deref(), Some("rack-a"));
    assert_eq!(
        described["replica.selector.class"].0.as_deref(),
        Some("org.apache.kafka.common.replica.RackAwareReplicaSelector")
    );
    assert_eq!(
        described["log.retention.ms"].0.as_deref(),
        Some("604800000")
    );
    // Broker-wide topic defaults by Kafka's synonyms are described too.
    assert_eq!(
        described["log.cleaner.min.cleanable.ratio"].0.as_deref(),
        Some("0.5")
    );
    let log = broker.log();
    assert!(
        log.contains("unknown broker setting") && log.contains("some.plugin.setting.rill.never"),
        "{log}"
    );
    // The host tuning advice is one line at most (details at debug level).
    assert!(log.matches("host tuning:").count() <= 1, "{log}");
    assert!(
        !log.contains("tune warn:") && !log.contains("tune fail:"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_bind_advertises_the_host_name() {
    let dir = data_dir();
    let port = free_port();
    let addr: SocketAddr = format!("0.0.0.0:{port}").parse().expect("addr");
    let broker = Broker::start_listening(RILL, dir.path(), addr, &["--cores", "1"], &[]);
    let name = net_host_name();
    let resolves = std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), port))
        .is_ok_and(|mut a| a.next().is_some());
    let admin = admin(&format!("127.0.0.1:{port}"));
    let metadata = admin
        .inner()
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("metadata");
    let host = metadata.brokers()[0].host().to_string();
    if resolves {
        assert_eq!(host, name);
        assert!(broker.log().contains("advertising the host's name"));
    } else {
        assert_eq!(host, "127.0.0.1");
    }
    assert_eq!(metadata.brokers()[0].port(), i32::from(port));
}

/// The host's name, read as rill reads it.
fn net_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("hostname")
        .trim()
        .to_string()
}

/// IncrementalAlterConfigs on the BROKER resource `broker` ("": every
/// broker's default): the error code of each (name, value) set.
fn alter_broker(addr: SocketAddr, broker: &str, configs: &[(&str, &str)]) -> i16 {
    let sets: Vec<_> = configs.iter().map(|&(n, v)| (n, v, 0)).collect();
    alter_broker_ops(addr, broker, &sets)
}

/// As [`alter_broker`], with each config's operation (0 SET, 1 DELETE,
/// 2 APPEND, 3 SUBTRACT).
fn alter_broker_ops(addr: SocketAddr, broker: &str, configs: &[(&str, &str, i8)]) -> i16 {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    use kafka_protocol::protocol::StrBytes;
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 4;
    resource.resource_name = StrBytes::from_string(broker.to_string());
    for (name, value, operation) in configs {
        let mut config = AlterableConfig::default();
        config.name = StrBytes::from_string(name.to_string());
        config.config_operation = *operation;
        config.value = Some(StrBytes::from_string(value.to_string()));
        resource.configs.push(config);
    }
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources.push(resource);
    let response: IncrementalAlterConfigsResponse =
        rill_tests::raw::request(addr, ApiKey::IncrementalAlterConfigs, 0, &request)
            .expect("IncrementalAlterConfigs");
    response.responses[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_log_retention_changes_at_runtime() {
    use rdkafka::admin::ConfigSource;
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let admin = self::admin(&broker.bootstrap());
    let mut plain = NewTopic::new("plain", 2, TopicReplication::Fixed(1));
    plain = plain.set("segment.bytes", "1048576");
    let own = NewTopic::new("own", 1, TopicReplication::Fixed(1)).set("retention.ms", "1000");
    for r in admin
        .create_topics(&[plain, own], &options())
        .await
        .expect("create")
    {
        r.expect("created");
    }
    // Refused: a bad value (INVALID_CONFIG), a key Kafka does not change at
    // runtime (INVALID_REQUEST).
    assert_eq!(
        alter_broker(broker.addr, "", &[("log.retention.ms", "-5")]),
        40
    );
    assert_eq!(
        alter_broker(broker.addr, "", &[("num.io.threads", "4")]),
        42
    );
    assert_eq!(
        alter_broker(
            broker.addr,
            "",
            &[
                ("log.retention.ms", "3600000"),
                ("log.cleaner.min.cleanable.ratio", "0.3")
            ]
        ),
        0
    );
    let described = describe(&admin, ResourceSpecifier::Broker(0)).await;
    assert_eq!(
        described["log.retention.ms"],
        (
            Some("3600000".to_string()),
            ConfigSource::DynamicDefaultBroker
        )
    );
    assert_eq!(described["log.segment.bytes"].1, ConfigSource::StaticBroker);
    // Applied to the topics without an override, on every shard's partitions.
    let plain = describe(&admin, ResourceSpecifier::Topic("plain")).await;
    assert_eq!(
        plain["retention.ms"],
        (
            Some("3600000".to_string()),
            ConfigSource::DynamicDefaultBroker
        )
    );
    assert_eq!(plain["segment.bytes"].1, ConfigSource::DynamicTopic);
    assert_eq!(plain["segment.ms"].1, ConfigSource::Default);
    assert_eq!(plain["min.cleanable.dirty.ratio"].0.as_deref(), Some("0.3"));
    let own = describe(&admin, ResourceSpecifier::Topic("own")).await;
    assert_eq!(own["retention.ms"].0.as_deref(), Some("1000"));
    // APPEND and SUBTRACT edit a LIST config from its file value; on any
    // other type they are INVALID_CONFIG, as in Kafka.
    // The list reads in the order it was made, as Kafka keeps it: the
    // appended item last.
    let policy = |described: &BTreeMap<String, (Option<String>, ConfigSource)>| {
        described["cleanup.policy"].0.clone().unwrap_or_default()
    };
    assert_eq!(
        alter_broker_ops(broker.addr, "", &[("log.cleanup.policy", "compact", 2)]),
        0
    );
    let described = describe(&admin, ResourceSpecifier::Broker(0)).await;
    assert_eq!(
        described["log.cleanup.policy"].0.as_deref(),
        Some("delete,compact")
    );
    let plain_now = describe(&admin, ResourceSpecifier::Topic("plain")).await;
    assert_eq!(policy(&plain_now), "delete,compact");
    assert_eq!(
        alter_broker_ops(broker.addr, "", &[("log.cleanup.policy", "compact", 3)]),
        0
    );
    let plain_now = describe(&admin, ResourceSpecifier::Topic("plain")).await;
    assert_eq!(policy(&plain_now), "delete");
    assert_eq!(
        alter_broker_ops(broker.addr, "", &[("log.retention.ms", "5", 2)]),
        40
    );
    for partition in ["plain-0", "plain-1"] {
        let stored = std::fs::read_to_string(dir.path().join(partition).join("topic.config"))
            .expect("topic.config");
        assert!(
            stored.contains("retention.ms=3600000"),
            "{partition}: {stored}"
        );
    }
    // AlterConfigs (rdkafka's alter_configs) on broker 0's own resource; the
    // cluster-wide default stays under it.
    let change = rdkafka::admin::AlterConfig::new(ResourceSpecifier::Broker(0))
        .set("log.retention.bytes", "987654321");
    for r in admin
        .alter_configs(&[change], &options())
        .await
        .expect("alter_configs")
    {
        r.expect("broker 0 altered");
    }
    let described = describe(&admin, ResourceSpecifier::Broker(0)).await;
    assert_eq!(
        described["log.retention.bytes"],
        (Some("987654321".to_string()), ConfigSource::DynamicBroker)
    );
    assert_eq!(
        described["log.retention.ms"],
        (
            Some("3600000".to_string()),
            ConfigSource::DynamicDefaultBroker
        )
    );
    // This broker's own value wins over the cluster-wide default; both
    // outlive a restart (they are in the metadata log).
    assert_eq!(
        alter_broker(broker.addr, "0", &[("log.retention.ms", "7200000")]),
        0
    );
    drop(admin);
    broker.stop();
    broker.restart();
    let client = self::admin(&broker.bootstrap());
    // The broker listens before its metadata log is replayed: wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let described = loop {
        let described = describe(&client, ResourceSpecifier::Broker(0)).await;
        if described["log.retention.ms"].1 != ConfigSource::StaticBroker
            || std::time::Instant::now() > deadline
        {
            break described;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        described["log.retention.ms"],
        (Some("7200000".to_string()), ConfigSource::DynamicBroker)
    );
    assert_eq!(
        described["log.retention.bytes"].0.as_deref(),
        Some("987654321")
    );
    let plain = describe(&client, ResourceSpecifier::Topic("plain")).await;
    assert_eq!(plain["retention.ms"].0.as_deref(), Some("7200000"));
    // AlterConfigs replaces the resource's whole set: what it leaves out
    // returns to the file's value.
    let change = rdkafka::admin::AlterConfig::new(ResourceSpecifier::Broker(0))
        .set("log.retention.ms", "7200000");
    for r in client
        .alter_configs(&[change], &options())
        .await
        .expect("alter_configs")
    {
        r.expect("broker 0 altered");
    }
    let described = describe(&client, ResourceSpecifier::Broker(0)).await;
    assert_eq!(
        described["log.retention.bytes"],
        (Some("-1".to_string()), ConfigSource::StaticBroker)
    );
}

/// DescribeConfigs v4 as a raw request: (name, value, config_type,
/// read_only) of every config of `resource` (type 2 topic, 4 broker).
fn describe_raw(
    addr: SocketAddr,
    resource_type: i8,
    name: &str,
) -> Vec<(String, String, i8, bool)> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
    use kafka_protocol::protocol::StrBytes;
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = resource_type;
    resource.resource_name = StrBytes::from_string(name.to_string());
    resource.configuration_keys = None;
    let mut request = DescribeConfigsRequest::default();
    request.resources.push(resource);
    let response: DescribeConfigsResponse =
        rill_tests::raw::request(addr, ApiKey::DescribeConfigs, 4, &request)
            .expect("DescribeConfigs");
    let result = &response.results[0];
    assert_eq!(result.error_code, 0, "{result:?}");
    (result.configs.iter())
        .map(|c| {
            let value = c.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
            (c.name.to_string(), value, c.config_type, c.read_only)
        })
        .collect()
}

/// DescribeConfigs says each config's Kafka type (`ConfigType`: 1 BOOLEAN,
/// 2 STRING, 3 INT, 5 LONG, 6 DOUBLE, 7 LIST), as Kafka's `ConfigDef`
/// defines it, and the broker's `listeners` and `advertised.listeners`
/// (static, read-only), which kafka-python's admin tests read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn described_configs_carry_kafkas_types_and_the_listeners() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    let admin = admin(&broker.bootstrap());
    create(&admin, "typed", &[]).await.expect("created");
    let topic = describe_raw(broker.addr, 2, "typed");
    let type_of = |configs: &[(String, String, i8, bool)], name: &str| {
        let found = configs.iter().find(|c| c.0 == name);
        found.unwrap_or_else(|| panic!("{name} not described")).2
    };
    for (name, expected) in [
        ("retention.bytes", 5),
        ("segment.bytes", 3),
        ("min.cleanable.dirty.ratio", 6),
        ("preallocate", 1),
        ("compression.type", 2),
        ("cleanup.policy", 7),
    ] {
        assert_eq!(type_of(&topic, name), expected, "{name}");
    }
    assert!(
        topic.iter().all(|c| c.2 != 0),
        "every topic config typed: {topic:?}"
    );
    let broker_configs = describe_raw(broker.addr, 4, "0");
    let advertised = broker_configs
        .iter()
        .find(|c| c.0 == "advertised.listeners")
        .expect("advertised.listeners described");
    let expected = format!("PLAINTEXT://{}", broker.addr);
    assert_eq!(
        (advertised.1.as_str(), advertised.2, advertised.3),
        (expected.as_str(), 7, true)
    );
    assert_eq!(type_of(&broker_configs, "log.retention.ms"), 5);
    assert_eq!(type_of(&broker_configs, "auto.create.topics.enable"), 1);
    assert!(
        broker_configs.iter().all(|c| c.2 != 0),
        "every broker config typed: {broker_configs:?}"
    );
}

/// The active controller writes the cluster-level `min.insync.replicas`
/// (its config file's value) once, as Kafka 4.1's does with the ELR on:
/// topics describe it as a dynamic default of the cluster, it may be
/// changed, and removing it is refused with Kafka's INVALID_CONFIG.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_min_insync_replicas_is_written_once_and_kept() {
    use rdkafka::admin::ConfigSource;
    let dir = data_dir();
    let files = data_dir();
    let properties = files.path().join("rill.properties");
    std::fs::write(&properties, "min.insync.replicas=2\n").expect("write properties");
    let path = properties.to_str().expect("utf-8 path");
    let broker = Broker::start(RILL, dir.path(), &["--cores", "1", "--config", path]);
    let admin = admin(&broker.bootstrap());
    create(&admin, "guarded", &[]).await.expect("created");
    let written = (Some("2".to_string()), ConfigSource::DynamicDefaultBroker);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let described = describe(&admin, ResourceSpecifier::Topic("guarded")).await;
        if described["min.insync.replicas"] == written {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never written: {:?}",
            described["min.insync.replicas"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        alter_broker_ops(broker.addr, "", &[("min.insync.replicas", "", 1)]),
        40,
        "removing it is refused"
    );
    assert_eq!(
        alter_broker(broker.addr, "", &[("min.insync.replicas", "1")]),
        0
    );
    let described = describe(&admin, ResourceSpecifier::Topic("guarded")).await;
    assert_eq!(
        described["min.insync.replicas"],
        (Some("1".to_string()), ConfigSource::DynamicDefaultBroker)
    );
}

/// In a cluster, a cluster-wide dynamic default set through one broker holds
/// on every broker and reaches their partitions; a per-broker one only on
/// its broker.
#[test]
fn dynamic_broker_configs_hold_across_a_cluster() {
    use rdkafka::admin::ConfigSource;
    use rill_tests::cluster::{wait_for, Cluster};
    let settle = Duration::from_secs(30);
    let mut cluster = Cluster::start_settled(RILL, 3, &[], settle);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(
        &cluster.node(1).bootstrap(),
        "spread",
        3,
        &[],
    ));
    let via = cluster.node(2).addr;
    assert_eq!(
        alter_broker(via, "", &[("log.retention.bytes", "123456789")]),
        0
    );
    assert_eq!(
        alter_broker(via, "1", &[("log.segment.bytes", "2097152")]),
        0
    );
    let mut partitions_checked = 0;
    for node in 1..=3 {
        let broker = cluster.node(node);
        let client = admin(&broker.bootstrap());
        let described = wait_for("the dynamic default on every broker", settle, || {
            let d = runtime.block_on(describe(&client, ResourceSpecifier::Broker(node)));
            (d["log.retention.bytes"].0.as_deref() == Some("123456789")).then_some(d)
        });
        assert_eq!(
            described["log.retention.bytes"].1,
            ConfigSource::DynamicDefaultBroker
        );
        let segment = if node == 1 { "2097152" } else { "1073741824" };
        assert_eq!(
            described["log.segment.bytes"].0.as_deref(),
            Some(segment),
            "node {node}"
        );
        // Each broker's own partitions of the topic got the new default.
        let dir = broker.data_dir.clone();
        for entry in std::fs::read_dir(&dir).expect("data dir").flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with("spread-") {
                let config = entry.path().join("topic.config");
                wait_for("the partition's config", settle, || {
                    std::fs::read_to_string(&config)
                        .ok()
                        .filter(|c| c.contains("retention.bytes=123456789"))
                });
                partitions_checked += 1;
            }
        }
    }
    assert_eq!(
        partitions_checked, 3,
        "every partition of the topic checked"
    );
}

//! Broker settings: Kafka's names and defaults in the TOML or
//! `server.properties` file, flag precedence, and unknown keys ignored.

use kernel::config::{parse_toml, BrokerConfig, ServeArgs};
use kernel::error::ConfigError;
use kernel::sendpath::SendPath;
use std::io::Write;

fn args_with_file(text: &str) -> (ServeArgs, tempfile::NamedTempFile) {
    args_with_named_file(text, ".toml")
}

fn args_with_named_file(text: &str, suffix: &str) -> (ServeArgs, tempfile::NamedTempFile) {
    let mut file = tempfile::Builder::new().suffix(suffix).tempfile().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    let args = ServeArgs {
        config: Some(file.path().to_path_buf()),
        ..ServeArgs::default()
    };
    (args, file)
}

#[test]
fn defaults_are_kafkas() {
    let c = BrokerConfig::from_args(&ServeArgs::default()).unwrap();
    assert_eq!(c.listen.to_string(), "0.0.0.0:9092");
    assert_eq!(
        (c.advertised_host.clone(), c.advertised_port),
        (
            kernel::config::listeners::default_advertised_host(&c.listen).0,
            9092
        )
    );
    assert_eq!(c.data_dir, std::path::PathBuf::from("./rill-data"));
    assert_eq!(c.admin_listen.to_string(), "127.0.0.1:9644");
    assert_eq!(c.send_path, SendPath::Splice);
    assert_eq!(c.engine.flush_policy, engine::FlushPolicy::Fsync);
    assert!(c.auto_create_topics_enable);
    assert_eq!(c.num_partitions, 1);
    assert_eq!(c.default_replication_factor, 1);
    assert_eq!(c.broker_id, 0);
    assert_eq!(c.socket_request_max_bytes, 104_857_600);
    assert_eq!(c.offsets_topic_num_partitions, 50);
    assert_eq!(c.spin_before_park_us, 0);
    assert_eq!(c.engine.topic_defaults.max_message_bytes, 1_048_588);
    assert!(c.cores >= 1);
}

#[test]
fn kafka_names_map_into_topic_defaults() {
    let (args, _file) = args_with_file(
        r#"
        "num.partitions" = 3
        "auto.create.topics.enable" = false
        log.retention.hours = 2
        log.segment.bytes = 1048576
        log.cleanup.policy = "compact,delete"
        "message.max.bytes" = 2000000
        "log.flush.interval.messages" = 10
        "broker.id" = 7
        [rill]
        spin_before_park_us = 0
        "#,
    );
    let c = BrokerConfig::from_args(&args).unwrap();
    assert_eq!(c.num_partitions, 3);
    assert!(!c.auto_create_topics_enable);
    assert_eq!(c.broker_id, 7);
    assert_eq!(c.spin_before_park_us, 0);
    let t = &c.engine.topic_defaults;
    assert_eq!(t.retention_ms, 2 * 3_600_000);
    assert_eq!(t.segment_bytes, 1_048_576);
    assert!(t.cleanup_policy.compact && t.cleanup_policy.delete);
    assert_eq!(t.max_message_bytes, 2_000_000);
    assert_eq!(t.flush_messages, 10);
}

#[test]
fn retention_ms_wins_over_hours() {
    let (args, _file) =
        args_with_file("\"log.retention.ms\" = 5000\n\"log.retention.hours\" = 1\n");
    let c = BrokerConfig::from_args(&args).unwrap();
    assert_eq!(c.engine.topic_defaults.retention_ms, 5000);
}

#[test]
fn compression_type_and_levels_are_broker_defaults() {
    let (args, _file) = args_with_file(
        "\"compression.type\" = \"zstd\"\n\"compression.zstd.level\" = 7\n\"compression.gzip.level\" = 1\n",
    );
    let c = BrokerConfig::from_args(&args).unwrap();
    let t = &c.engine.topic_defaults;
    assert_eq!(t.compression_type, "zstd");
    assert_eq!(
        (t.compression_levels.zstd, t.compression_levels.gzip),
        (7, 1)
    );
    assert_eq!(t.compression_levels.lz4, 9, "Kafka's default");
    let (args, _file) = args_with_file("\"compression.lz4.level\" = 18\n");
    assert!(matches!(
        BrokerConfig::from_args(&args),
        Err(ConfigError::Invalid { .. })
    ));
}

#[test]
fn unknown_keys_are_ignored() {
    let (args, _file) = args_with_file("\"log.retention.hourz\" = 1\n\"num.partitions\" = 4\n");
    let c = BrokerConfig::from_args(&args).unwrap();
    assert_eq!(c.num_partitions, 4);
    assert_eq!(c.engine.topic_defaults.retention_ms, 7 * 24 * 3_600_000);
}

#[test]
fn stock_kafka_server_properties_is_read() {
    let stock = include_str!("../../../tests/fixtures/server.properties");
    let text = format!(
        "{stock}\nlog.cleaner.min.cleanable.ratio=0.25\nlog.preallocate=true\nno.such.key=1\n"
    );
    let (args, _file) = args_with_named_file(&text, ".properties");
    let c = BrokerConfig::from_args(&args).unwrap();
    assert_eq!(c.broker_id, 1);
    // PLAINTEXT://:9092 binds every interface; CONTROLLER is not a client listener.
    assert_eq!(c.listen.to_string(), "0.0.0.0:9092");
    assert_eq!(
        (c.advertised_host.as_str(), c.advertised_port),
        ("localhost", 9092)
    );
    assert_eq!(
        c.data_dir,
        std::path::PathBuf::from("/tmp/kraft-combined-logs")
    );
    assert_eq!(c.internal_topics_replication_factor, 1);
    let t = &c.engine.topic_defaults;
    assert_eq!(t.retention_ms, 168 * 3_600_000);
    assert_eq!(t.segment_bytes, 1_073_741_824);
    assert_eq!(t.get("min.cleanable.dirty.ratio").unwrap(), "0.25");
    assert_eq!(t.get("preallocate").unwrap(), "true");
    // The same content without the extension is recognised by its syntax.
    let (args, _file) = args_with_named_file(stock, ".conf");
    assert_eq!(BrokerConfig::from_args(&args).unwrap().broker_id, 1);
}

#[test]
fn bad_values_are_an_error() {
    let (args, _file) = args_with_file("\"num.partitions\" = \"many\"\n");
    assert!(matches!(
        BrokerConfig::from_args(&args),
        Err(ConfigError::Invalid { .. })
    ));
    let (args, _file) = args_with_file("log.segment.bytes = 3\n");
    assert!(BrokerConfig::from_args(&args).is_err());
    assert!(matches!(
        parse_toml("this is = = not toml"),
        Err(ConfigError::Toml(_))
    ));
}

#[test]
fn flags_win_over_the_file() {
    let (mut args, _file) = args_with_file(
        "listeners = \"PLAINTEXT://127.0.0.1:9999\"\nadvertised.listeners = \"PLAINTEXT://broker.example:9999\"\n",
    );
    let c = BrokerConfig::from_args(&args).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:9999");
    assert_eq!(
        (c.advertised_host.as_str(), c.advertised_port),
        ("broker.example", 9999)
    );
    args.listen = Some("127.0.0.1:19092".into());
    args.advertised_listener = Some("10.0.0.1:19092".into());
    args.fetch_send_path = Some("copy".into());
    args.flush_policy = Some("os".into());
    let c = BrokerConfig::from_args(&args).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:19092");
    assert_eq!(c.advertised_host, "10.0.0.1");
    assert_eq!(c.send_path, SendPath::Copy);
    assert_eq!(c.engine.flush_policy, engine::FlushPolicy::Os);
    args.fetch_send_path = Some("carrier-pigeon".into());
    assert!(BrokerConfig::from_args(&args).is_err());
}

#[test]
fn wildcard_listen_advertises_the_host_name() {
    let args = ServeArgs {
        listen: Some("0.0.0.0:29092".into()),
        ..ServeArgs::default()
    };
    let c = BrokerConfig::from_args(&args).unwrap();
    let name = kernel::config::listeners::host_name().unwrap();
    let resolves = std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), 1))
        .is_ok_and(|mut a| a.next().is_some());
    let expected = if resolves { name } else { "127.0.0.1".into() };
    assert_eq!((c.advertised_host, c.advertised_port), (expected, 29092));
}

#[test]
fn kafka_bootstrap_servers_of_several_controllers_need_voters() {
    let (args, _file) = args_with_named_file(
        "controller.quorum.bootstrap.servers=127.0.0.1:19093,127.0.0.1:19095\n",
        ".properties",
    );
    let err = BrokerConfig::from_args(&args).unwrap_err().to_string();
    assert!(err.contains("controller.quorum.voters"), "{err}");
    // Kafka's single-node sample names itself: a single node.
    let (args, _file) = args_with_named_file(
        "controller.quorum.bootstrap.servers=localhost:9093\n",
        ".properties",
    );
    let config = BrokerConfig::from_args(&args).unwrap();
    assert!(config.cluster.is_single_node());
    let (args, _file) = args_with_named_file(
        "controller.quorum.bootstrap.servers=127.0.0.1:19093,127.0.0.1:19095\n\
         controller.quorum.voters=0@127.0.0.1:19093\n",
        ".properties",
    );
    let config = BrokerConfig::from_args(&args).unwrap();
    assert_eq!(config.cluster.voters.len(), 1);
}

#[test]
fn sasl_listeners_serve_and_a_sasl_first_listener_needs_a_single_node() {
    let listeners = "listeners=PLAINTEXT://127.0.0.1:19092,SASL_PLAINTEXT://127.0.0.1:19094\n\
                     listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n\
                     sasl.enabled.mechanisms=SCRAM-SHA-512\n";
    let (args, _file) = args_with_named_file(listeners, ".properties");
    let c = BrokerConfig::from_args(&args).unwrap();
    assert_eq!(c.listeners.len(), 2);
    assert_eq!(c.sasl.mechanisms_for("SASL_PLAINTEXT").len(), 1);
    let (args, _file) = args_with_named_file(
        "listeners=SASL_PLAINTEXT://127.0.0.1:19094\n\
         listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT\n\
         controller.quorum.voters=0@127.0.0.1:19093,1@127.0.0.1:19095\n",
        ".properties",
    );
    let err = BrokerConfig::from_args(&args).unwrap_err().to_string();
    assert!(
        err.contains("sasl.mechanism.inter.broker.protocol"),
        "{err}"
    );
    // With the broker's own login, brokers reach each other over SASL.
    let (args, _file) = args_with_named_file(
        "listeners=SASL_PLAINTEXT://127.0.0.1:19094\n\
         listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT\n\
         controller.quorum.voters=0@127.0.0.1:19093,1@127.0.0.1:19095\n\
         sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n\
         listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=\
         org.apache.kafka.common.security.scram.ScramLoginModule required \
         username=\"broker\" password=\"broker-secret\";\n",
        ".properties",
    );
    let c = BrokerConfig::from_args(&args).unwrap();
    let login = c.inter_broker_login.as_ref().expect("a login");
    assert_eq!(login.user, "broker");
    assert_eq!(login.password, "broker-secret");
    assert!(!format!("{login:?}").contains("broker-secret"));
    let (args, _file) = args_with_named_file(
        "listeners=SSL://127.0.0.1:19096\nlistener.security.protocol.map=SSL:SSL\n",
        ".properties",
    );
    assert!(BrokerConfig::from_args(&args).is_err());
    let (args, _file) = args_with_named_file("sasl.enabled.mechanisms=KERBEROS\n", ".properties");
    assert!(BrokerConfig::from_args(&args).is_err());
}

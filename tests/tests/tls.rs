//! TLS client listeners (`SSL`), with certificates made here by rcgen: real
//! clients (librdkafka over OpenSSL, kafka-python over Python's ssl) produce
//! and consume through them; mutual TLS (`ssl.client.auth=required`) admits a
//! certificate of the truststore's CA, named by `ssl.principal.mapping.rules`,
//! and refuses none, another CA's, or one no mapping rule applies to;
//! `SASL_SSL` logs in with PLAIN and SCRAM over TLS; a TLS listener without
//! its key stops the broker at start.

use rcgen::{DnType, ExtendedKeyUsagePurpose};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rill_tests::kafka::{client_config, consume_all, produce_all, producer};
use rill_tests::pki::Pki;
use rill_tests::python::{python_script, require_kafka_python};
use rill_tests::{data_dir, free_port, http_get, raw, Broker};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// A broker with a PLAINTEXT listener (first, the one `Broker` waits on) and
/// an SSL listener configured by `ssl_lines`; returns it and the SSL port.
fn start_with_ssl(dir: &Path, ssl_lines: &str, extra_args: &[&str]) -> (Broker, u16) {
    let (plain, ssl) = (free_port(), free_port());
    let file = dir.join("server.properties");
    std::fs::write(
        &file,
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{plain},SSL://localhost:{ssl}\n\
             {ssl_lines}\n"
        ),
    )
    .expect("write server.properties");
    let addr: SocketAddr = format!("127.0.0.1:{plain}").parse().expect("addr");
    let mut args = vec!["--cores", "2", "--config", file.to_str().expect("utf-8")];
    args.extend_from_slice(extra_args);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let broker = Broker::start_listening(RILL, &data, addr, &args, &[]);
    (broker, ssl)
}

/// The sum over shards of a counter in `/metrics`.
fn metric(broker: &Broker, name: &str) -> i64 {
    http_get(broker.admin_addr, "/metrics")
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .sum()
}

fn ssl_settings<'a>(ca: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut settings = vec![("security.protocol", "ssl"), ("ssl.ca.location", ca)];
    settings.extend_from_slice(extra);
    settings
}

fn ssl_client(bootstrap: &str, settings: &[(&str, &str)]) -> ClientConfig {
    let mut config = client_config(bootstrap);
    for (k, v) in settings {
        config.set(*k, *v);
    }
    config
}

/// (host, port) of the brokers a Metadata answer through `config` names.
fn advertised_through(config: &ClientConfig) -> Result<Vec<(String, i32)>, String> {
    let consumer: BaseConsumer = config.create().map_err(|e| e.to_string())?;
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    Ok(metadata
        .brokers()
        .iter()
        .map(|b| (b.host().to_string(), b.port()))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_produces_and_consumes_over_ssl_beside_plaintext() {
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "main");
    let keystore = pki.broker_keystore();
    let (mut broker, ssl) = start_with_ssl(
        dir.path(),
        &format!("ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"),
        &[],
    );
    let ca = pki.ca_file();
    let settings = ssl_settings(&ca, &[]);
    let secure = format!("localhost:{ssl}");

    // Each listener answers Metadata with its own address.
    assert_eq!(
        advertised_through(&ssl_client(&secure, &settings)).expect("metadata over TLS"),
        [(String::from("localhost"), i32::from(ssl))]
    );
    let plain: kafka_protocol::messages::MetadataResponse = raw::request(
        broker.addr,
        kafka_protocol::messages::ApiKey::Metadata,
        12,
        &kafka_protocol::messages::MetadataRequest::default(),
    )
    .expect("metadata over plaintext");
    assert_eq!(plain.brokers.len(), 1);
    assert_eq!(plain.brokers[0].port, i32::from(broker.addr.port()));

    // Produce over TLS, large enough values that a fetch spans many chunks.
    let p = producer(&secure, &settings);
    let records: Vec<_> = (0..200)
        .map(|i| {
            (
                Some(format!("k{i}").into_bytes()),
                vec![b'a' + (i % 26) as u8; 3000],
            )
        })
        .collect();
    produce_all(&p, "over-tls", &records, None).await;
    drop(p);
    let got = consume_all(
        &secure,
        "over-tls",
        1,
        200,
        Duration::from_secs(30),
        &settings,
    );
    assert_eq!(got.len(), 200);
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, r)| r.value.as_deref() == Some(&records[i].1[..])));

    // After a restart the batch cache is empty: the fetch is served from the
    // segment files, which TLS sends by reading them into memory.
    assert_eq!(broker.stop(), Some(0));
    broker.restart();
    let again = consume_all(
        &secure,
        "over-tls",
        1,
        200,
        Duration::from_secs(30),
        &settings,
    );
    assert_eq!(again, got);
    // The PLAINTEXT listener serves the same data.
    let plain_read = consume_all(
        &broker.bootstrap(),
        "over-tls",
        1,
        200,
        Duration::from_secs(30),
        &[],
    );
    assert_eq!(plain_read, got);
    assert!(metric(&broker, "rill_tls_handshakes_total") >= 1);
    assert_eq!(metric(&broker, "rill_tls_handshake_failures_total"), 0);

    // A plaintext client on the TLS port is not served (and is counted).
    let wrong = advertised_through(
        &client_config(&secure)
            .set("socket.timeout.ms", "3000")
            .clone(),
    );
    assert!(wrong.is_err(), "{wrong:?}");
    assert!(metric(&broker, "rill_tls_handshake_failures_total") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_admits_the_truststores_clients_only() {
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "main");
    let other = Pki::new(dir.path(), "other");
    let keystore = pki.broker_keystore();
    let ca = pki.ca_file();
    // Per-listener keys, as Kafka names them.
    let (broker, ssl) = start_with_ssl(
        dir.path(),
        &format!(
            "listener.name.ssl.ssl.keystore.location={keystore}\n\
             listener.name.ssl.ssl.truststore.type=PEM\n\
             listener.name.ssl.ssl.truststore.location={ca}\n\
             listener.name.ssl.ssl.client.auth=required\n\
             ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=(.*)$/$1@$2/U\n"
        ),
        &["--log-level", "info,api::connection::transport=debug"],
    );
    let secure = format!("localhost:{ssl}");
    let (alice_cert, alice_key) = pki.issue(
        "alice",
        &[],
        &[
            (DnType::OrganizationalUnitName, "eng"),
            (DnType::CommonName, "alice"),
        ],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    // Of the right CA, but no mapping rule applies to its subject.
    let (carol_cert, carol_key) = pki.issue(
        "carol",
        &[],
        &[(DnType::CommonName, "carol")],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let (mallory_cert, mallory_key) = other.issue(
        "mallory",
        &[],
        &[(DnType::CommonName, "mallory")],
        ExtendedKeyUsagePurpose::ClientAuth,
    );

    let alice = ssl_settings(
        &ca,
        &[
            ("ssl.certificate.location", &alice_cert),
            ("ssl.key.location", &alice_key),
        ],
    );
    let p = producer(&secure, &alice);
    let records: Vec<_> = (0..20)
        .map(|i| (None, format!("m{i}").into_bytes()))
        .collect();
    produce_all(&p, "mtls", &records, None).await;
    let got = consume_all(&secure, "mtls", 1, 20, Duration::from_secs(30), &alice);
    assert_eq!(got.len(), 20);
    let log = broker.log();
    assert!(
        log.contains("User:ALICE@ENG"),
        "the session's principal is what the mapping rule makes of the subject \
         CN=alice,OU=eng:\n{log}"
    );
    let admitted = metric(&broker, "rill_tls_handshakes_total");
    assert!(admitted >= 1);

    // No certificate, or one from another CA: refused.
    let quick = [("socket.timeout.ms", "3000")];
    let anonymous = ssl_settings(&ca, &quick);
    assert!(advertised_through(&ssl_client(&secure, &anonymous)).is_err());
    // Another CA's certificate, and one no mapping rule applies to.
    for (cert, key) in [(&mallory_cert, &mallory_key), (&carol_cert, &carol_key)] {
        let refused = ssl_settings(
            &ca,
            &[
                ("ssl.certificate.location", cert),
                ("ssl.key.location", key),
                ("socket.timeout.ms", "3000"),
            ],
        );
        assert!(advertised_through(&ssl_client(&secure, &refused)).is_err());
    }
    assert!(metric(&broker, "rill_tls_handshake_failures_total") >= 3);
    assert!(!broker.log().contains("User:CN=mallory"));
    let log = broker.log();
    assert!(
        log.contains("applies to 'CN=carol'"),
        "carol is refused for want of a mapping rule:\n{log}"
    );
}

#[test]
fn kafka_python_produces_and_consumes_over_ssl() {
    require_kafka_python();
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "main");
    let (cert, key) = pki.issue(
        "broker",
        &["localhost", "127.0.0.1"],
        &[(DnType::CommonName, "broker")],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    // The two-file form (rill's ssl.certificate.location / ssl.key.location);
    // client certificates requested, so a client without one is admitted
    // (as User:ANONYMOUS).
    let ca = pki.ca_file();
    let (_broker, ssl) = start_with_ssl(
        dir.path(),
        &format!(
            "ssl.certificate.location={cert}\nssl.key.location={key}\n\
             ssl.client.auth=requested\nssl.truststore.location={ca}\n"
        ),
        &[],
    );
    let out = Command::new("python3")
        .arg(python_script("tls_client.py"))
        .args([&format!("localhost:{ssl}"), &ca, "py-tls", "30"])
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tls_client.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: Vec<String> = (0..30).map(|i| format!("\"v{i}\"")).collect();
    assert!(
        stdout.contains(&format!("[{}]", expected.join(", "))),
        "{stdout}"
    );
}

#[test]
fn a_silent_client_is_dropped_at_the_handshake_timeout() {
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "main");
    let keystore = pki.broker_keystore();
    let (broker, ssl) = start_with_ssl(
        dir.path(),
        &format!("ssl.keystore.location={keystore}\nrill.ssl.handshake.timeout.ms=300\n"),
        &[],
    );
    let mut silent = std::net::TcpStream::connect(("127.0.0.1", ssl)).expect("connect");
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    // The broker closes the connection (end of file or a reset) at its
    // handshake timeout; the 10 s read timeout is a hang, and fails.
    rill_tests::raw::assert_closed_by_broker(&mut silent);
    assert_eq!(metric(&broker, "rill_tls_handshake_failures_total"), 1);
    assert!(broker.log().contains("TLS handshake not finished"));
}

/// Runs `rill serve` with `properties`; it must exit at start with code 2
/// and `reason` in its output.
fn refuses_to_start(dir: &Path, properties: &str, reason: &[&str]) {
    rill_tests::assert_settings_refused(RILL, dir, properties, reason);
}

#[test]
fn a_tls_listener_without_a_usable_key_stops_the_broker() {
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "main");
    let (cert, _) = pki.issue(
        "broker",
        &["localhost"],
        &[(DnType::CommonName, "broker")],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let listeners = format!("listeners=SSL://127.0.0.1:{}\n", free_port());
    let missing = dir.path().join("no-such-key.pem").display().to_string();
    refuses_to_start(
        dir.path(),
        &format!("{listeners}ssl.certificate.location={cert}\nssl.key.location={missing}\n"),
        &["ssl.key.location", "cannot read", "no-such-key.pem"],
    );
    refuses_to_start(
        dir.path(),
        &listeners,
        &["TLS listener SSL has no certificate"],
    );
    refuses_to_start(
        dir.path(),
        &format!("{listeners}ssl.certificate.location={cert}\nssl.key.location={cert}\n"),
        &["ssl.key.location", "no PEM private key"],
    );
    refuses_to_start(
        dir.path(),
        &format!("{listeners}ssl.keystore.location={cert}\nssl.principal.mapping.rules=RULE:^CN=(.*$/$1/\n"),
        &["ssl.principal.mapping.rules", "pattern"],
    );
    // In a cluster the first listener carries replication: over TLS, the
    // brokers need a truststore the others' certificates chain to.
    let keystore = pki.broker_keystore();
    refuses_to_start(
        dir.path(),
        &format!(
            "{listeners}ssl.keystore.location={keystore}\nnode.id=1\n\
             controller.quorum.voters=1@127.0.0.1:{}\n",
            free_port()
        ),
        &["ssl.truststore.location", "no truststore"],
    );
}

/// SASL over TLS (`SASL_SSL`): librdkafka logs in with PLAIN (a JAAS user)
/// and SCRAM-SHA-512 (a bootstrap user) through TLS, produces and reads
/// back; a wrong password gets no metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_logs_in_with_plain_and_scram_over_tls() {
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "sasl");
    let keystore = pki.broker_keystore();
    let (plain, secure) = (free_port(), free_port());
    let file = dir.path().join("server.properties");
    std::fs::write(
        &file,
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://localhost:{secure}\n\
             ssl.keystore.type=PEM\n\
             ssl.keystore.location={keystore}\n\
             listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";\n\
             rill.sasl.bootstrap.scram=SCRAM-SHA-512=[name=bob,password=bob-secret]\n"
        ),
    )
    .expect("write server.properties");
    let addr: SocketAddr = format!("127.0.0.1:{plain}").parse().expect("addr");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let _broker = Broker::start_listening(
        RILL,
        &data,
        addr,
        &["--cores", "2", "--config", file.to_str().expect("utf-8")],
        &[],
    );
    let ca = pki.ca_file();
    let bootstrap = format!("localhost:{secure}");
    let login = |mechanism: &'static str, user: &'static str, password: &'static str| {
        vec![
            ("security.protocol", "SASL_SSL"),
            ("ssl.ca.location", ca.as_str()),
            ("sasl.mechanism", mechanism),
            ("sasl.username", user),
            ("sasl.password", password),
        ]
    };
    for (mechanism, user, password) in [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-512", "bob", "bob-secret"),
    ] {
        let settings = login(mechanism, user, password);
        // The bootstrap SCRAM user is written just after start.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while advertised_through(&ssl_client(&bootstrap, &settings)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "{user} cannot log in with {mechanism} over TLS"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let topic = format!("sasl-ssl-{user}");
        let p = producer(&bootstrap, &settings);
        let records: Vec<_> = (0..20)
            .map(|i| (None, format!("{user}-{i}").into_bytes()))
            .collect();
        produce_all(&p, &topic, &records, None).await;
        let got = consume_all(
            &bootstrap,
            &topic,
            1,
            20,
            Duration::from_secs(30),
            &settings,
        );
        assert_eq!(got.len(), 20, "{mechanism}");
    }
    let wrong = login("SCRAM-SHA-512", "bob", "not-bobs");
    let refused =
        advertised_through(ssl_client(&bootstrap, &wrong).set("socket.timeout.ms", "3000"));
    assert!(refused.is_err(), "{refused:?}");

    // kafka-python over SASL_SSL, both mechanisms, then a wrong password.
    require_kafka_python();
    let python = |mechanism: &str, user: &str, password: &str, topic: &str| {
        let out = Command::new("python3")
            .arg(python_script("sasl_client.py"))
            .args([&bootstrap, mechanism, user, password, topic, "3", &ca])
            .output()
            .expect("python3 runs");
        let line = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{line}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        line
    };
    for (mechanism, user, password) in [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-512", "bob", "bob-secret"),
    ] {
        let topic = format!("py-sasl-ssl-{user}");
        rill_tests::kafka::create_topic(&addr.to_string(), &topic, 1, &[]).await;
        let line = python(mechanism, user, password, &topic);
        assert!(line.contains("\"produced\": 3"), "{mechanism}: {line}");
        for i in 0..3 {
            assert!(
                line.contains(&format!("\"{user}-{i}\"")),
                "{mechanism}: {line}"
            );
        }
    }
    let line = python("SCRAM-SHA-512", "bob", "not-bobs", "py-sasl-ssl-bob");
    assert!(line.contains("\"error\""), "{line}");
    assert!(!line.contains("bob-0"), "{line}");
}

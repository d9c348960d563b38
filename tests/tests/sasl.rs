//! SASL authentication, Kafka's way: a SASL_PLAINTEXT listener beside a
//! PLAINTEXT one, PLAIN users from a JAAS config, SCRAM users in the
//! metadata quorum (bootstrap users and AlterUserScramCredentials), real
//! clients (librdkafka, kafka-python) and raw requests for the exact
//! answers: the gate before authentication, failures that close, the
//! handshake timeout, KIP-368 re-authentication.

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
    ApiVersionsRequest, ApiVersionsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, MetadataRequest, MetadataResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::producer::FutureRecord;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;
use rill_tests::kafka::{client_config, consume_all, create_topic, produce_all, producer};
use rill_tests::python::{python_script, require_kafka_python};
use rill_tests::raw::assert_closed_by_broker;
use rill_tests::sasl::SaslBroker;
use rill_tests::{raw, Broker};
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;

/// Starts a broker with the JAAS users admin and alice, the bootstrap
/// SCRAM user `root` (both mechanisms) and `extra` properties; returns once
/// the bootstrap user is in the quorum.
fn start(extra: &str) -> SaslBroker {
    let b = start_with_env(extra, &[]);
    wait_for_user(&b, "root", 2);
    b
}

/// Starts the broker of [`start`] with `envs`, without waiting for the
/// bootstrap user.
fn start_with_env(extra: &str, envs: &[(&str, &str)]) -> SaslBroker {
    let properties = format!(
        "listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n\
         rill.sasl.bootstrap.scram=SCRAM-SHA-512=[name=root,password=root-secret];SCRAM-SHA-256=[name=root,password=root-secret]\n\
         {extra}"
    );
    SaslBroker::start(RILL, &properties, "2", envs)
}

/// Waits until `user` has `mechanisms` SCRAM credentials (bootstrap users
/// are written just after start).
fn wait_for_user(b: &SaslBroker, user: &str, mechanisms: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // Right after a (re)start a connection may still be reset while
        // the broker opens; that is "not yet", like a missing credential.
        let found = try_describe(b.plain, &[]).map_or(0, |answer| {
            answer
                .results
                .iter()
                .find(|r| r.user.as_str() == user)
                .map_or(0, |r| r.credential_infos.len())
        });
        if found == mechanisms {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{user} has {found} SCRAM credentials, wanted {mechanisms}:\n{}",
            b.broker.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn describe(addr: SocketAddr, users: &[&str]) -> DescribeUserScramCredentialsResponse {
    try_describe(addr, users).expect("describe")
}

fn try_describe(
    addr: SocketAddr,
    users: &[&str],
) -> std::io::Result<DescribeUserScramCredentialsResponse> {
    let mut request = DescribeUserScramCredentialsRequest::default();
    if !users.is_empty() {
        request.users = Some(
            users
                .iter()
                .map(|u| {
                    let mut name = UserName::default();
                    name.name = StrBytes::from_string(u.to_string());
                    name
                })
                .collect(),
        );
    }
    raw::request(addr, ApiKey::DescribeUserScramCredentials, 0, &request)
}

/// librdkafka settings for SASL_PLAINTEXT.
fn sasl<'a>(mechanism: &'a str, user: &'a str, password: &'a str) -> [(&'a str, &'a str); 4] {
    [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", mechanism),
        ("sasl.username", user),
        ("sasl.password", password),
    ]
}

/// A per-shard counter or the SASL counter, summed over its lines.
fn metric(broker: &Broker, prefix: &str) -> i64 {
    rill_tests::http_get(broker.admin_addr, "/metrics")
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(_, v)| v.trim().parse::<i64>().ok())
        .sum()
}

/// Records the errors librdkafka reports.
#[derive(Clone, Default)]
struct Errors(Arc<Mutex<Vec<String>>>);

impl ClientContext for Errors {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0
            .lock()
            .expect("errors lock")
            .push(format!("{error:?}: {reason}"));
    }
}

impl ConsumerContext for Errors {}

/// Whether a librdkafka client logs in (a Metadata request succeeds).
fn can_log_in(bootstrap: &str, mechanism: &str, user: &str, password: &str) -> bool {
    let mut config = client_config(bootstrap);
    for (k, v) in sasl(mechanism, user, password) {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().expect("consumer");
    consumer
        .fetch_metadata(None, Duration::from_secs(5))
        .is_ok()
}

/// A client that logs in as a bootstrap user the moment the broker serves
/// (before the quorum holds the user: the write is held back here) gets
/// in, as it would on Kafka, where `kafka-storage format --add-scram`
/// wrote the user before the start; a wrong password still fails.
#[test]
fn a_bootstrap_user_logs_in_before_the_quorum_holds_its_credential() {
    let b = start_with_env("", &[("RILL_FAULT_DELAY_BOOTSTRAP_SCRAM_MS", "600000")]);
    let credentials = |b: &SaslBroker| {
        try_describe(b.plain, &[])
            .expect("describe the SCRAM users")
            .results
            .len()
    };
    assert_eq!(credentials(&b), 0, "the quorum already holds a user");
    let bootstrap = b.sasl_bootstrap();
    // Each refused login waits out the client's metadata timeout: the
    // cases run side by side.
    let cases = [
        ("SCRAM-SHA-512", "root", "root-secret", true),
        ("SCRAM-SHA-256", "root", "root-secret", true),
        ("SCRAM-SHA-512", "root", "wrong", false),
        ("SCRAM-SHA-256", "root", "wrong", false),
        ("SCRAM-SHA-512", "nobody", "root-secret", false),
    ];
    std::thread::scope(|scope| {
        let checks: Vec<_> = cases
            .iter()
            .map(|case| {
                let bootstrap = &bootstrap;
                scope.spawn(move || (case, can_log_in(bootstrap, case.0, case.1, case.2)))
            })
            .collect();
        for check in checks {
            let (case, logged_in) = check.join().expect("login check");
            assert_eq!(logged_in, case.3, "{case:?}");
        }
    });
    assert_eq!(credentials(&b), 0, "the window closed during the test");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_produces_and_consumes_with_plain_and_both_scram_mechanisms() {
    let b = start("");
    create_topic(&b.plain.to_string(), "sasl-data", 1, &[]).await;
    let mut total = 0;
    for (mechanism, user, password) in [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-512", "root", "root-secret"),
        ("SCRAM-SHA-256", "root", "root-secret"),
        // PLAIN also takes a SCRAM user's password.
        ("PLAIN", "root", "root-secret"),
    ] {
        let settings = sasl(mechanism, user, password);
        let p = producer(&b.sasl_bootstrap(), &settings);
        let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..5)
            .map(|i| (None, format!("{mechanism}/{user}/{i}").into_bytes()))
            .collect();
        produce_all(&p, "sasl-data", &records, None).await;
        total += records.len();
        let got = consume_all(
            &b.sasl_bootstrap(),
            "sasl-data",
            1,
            total,
            Duration::from_secs(30),
            &settings,
        );
        assert_eq!(got.len(), total, "{mechanism} as {user}");
        let last = got.last().and_then(|r| r.value.clone()).expect("a value");
        assert_eq!(last, format!("{mechanism}/{user}/4").into_bytes());
    }
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let succeeded = metric(
            &b.broker,
            &format!(
                "rill_sasl_authentications_total{{mechanism=\"{mechanism}\",result=\"succeeded\"}}"
            ),
        );
        assert!(succeeded >= 2, "{mechanism}: {succeeded} authentications");
    }
    assert_eq!(
        metric(
            &b.broker,
            "rill_sasl_authentications_total{mechanism=\"SCRAM-SHA-512\",result=\"failed\"}"
        ),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_gets_an_authentication_error_and_no_data() {
    let b = start("");
    create_topic(&b.plain.to_string(), "sasl-secret", 1, &[]).await;
    let p = producer(&b.plain.to_string(), &[]);
    produce_all(&p, "sasl-secret", &[(None, b"secret".to_vec())], None).await;
    // The three wrong logins run side by side: each is watched for 5 s.
    let mut consumers = Vec::new();
    for (mechanism, user) in [
        ("PLAIN", "alice"),
        ("SCRAM-SHA-512", "root"),
        ("SCRAM-SHA-256", "nobody"),
    ] {
        let errors = Errors::default();
        let mut config = client_config(&b.sasl_bootstrap());
        config
            .set("group.id", "sasl-wrong")
            .set("enable.auto.commit", "false");
        for (k, v) in sasl(mechanism, user, "wrong-password") {
            config.set(k, v);
        }
        let consumer: BaseConsumer<Errors> = config
            .create_with_context(errors.clone())
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("sasl-secret", 0, rdkafka::Offset::Beginning)
            .expect("partition");
        consumer.assign(&tpl).expect("assign");
        consumers.push((mechanism, consumer, errors));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        for (mechanism, consumer, _) in &consumers {
            if let Some(Ok(message)) = consumer.poll(Duration::from_millis(70)) {
                panic!("{mechanism}: data with a wrong password: {message:?}");
            }
        }
    }
    for (mechanism, _, errors) in &consumers {
        let seen = errors.0.lock().expect("errors lock").clone();
        assert!(
            seen.iter()
                .any(|e| e.contains("Authentication") || e.contains("SASL")),
            "{mechanism}: no authentication error in {seen:?}"
        );
    }
    let failed = metric(
        &b.broker,
        "rill_sasl_authentications_total{mechanism=\"PLAIN\",result=\"failed\"}",
    );
    assert!(failed >= 1, "{failed}");
}

/// Runs `tests/python/sasl_client.py`; its JSON line.
fn python_client(
    b: &SaslBroker,
    mechanism: &str,
    user: &str,
    password: &str,
    topic: &str,
) -> String {
    let output = Command::new("python3")
        .arg(python_script("sasl_client.py"))
        .args([&b.sasl_bootstrap(), mechanism, user, password, topic, "3"])
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_logs_in_with_scram_sha_512_and_plain() {
    require_kafka_python();
    let b = start("");
    for (mechanism, user, password, topic) in [
        ("SCRAM-SHA-512", "root", "root-secret", "py-scram"),
        ("PLAIN", "alice", "alice-secret", "py-plain"),
    ] {
        create_topic(&b.plain.to_string(), topic, 1, &[]).await;
        let line = python_client(&b, mechanism, user, password, topic);
        assert!(line.contains("\"produced\": 3"), "{mechanism}: {line}");
        for i in 0..3 {
            assert!(
                line.contains(&format!("\"{user}-{i}\"")),
                "{mechanism}: {line}"
            );
        }
    }
    let line = python_client(&b, "SCRAM-SHA-512", "root", "wrong", "py-scram");
    assert!(line.contains("\"error\""), "{line}");
    assert!(!line.contains("root-0"), "{line}");
}

fn connect(addr: SocketAddr) -> TcpStream {
    let socket = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    socket
}

fn handshake(socket: &mut TcpStream, mechanism: &str) -> SaslHandshakeResponse {
    let mut request = SaslHandshakeRequest::default();
    request.mechanism = StrBytes::from_string(mechanism.to_string());
    raw::exchange(socket, ApiKey::SaslHandshake, 1, 1, &request).expect("handshake")
}

/// SaslHandshake + SaslAuthenticate (v1) with PLAIN.
fn plain_login(socket: &mut TcpStream, user: &str, password: &str) -> SaslAuthenticateResponse {
    assert_eq!(handshake(socket, "PLAIN").error_code, 0);
    let mut request = SaslAuthenticateRequest::default();
    request.auth_bytes = format!("\0{user}\0{password}").into_bytes().into();
    raw::exchange(socket, ApiKey::SaslAuthenticate, 1, 2, &request).expect("authenticate")
}

fn metadata(socket: &mut TcpStream) -> std::io::Result<MetadataResponse> {
    raw::exchange(socket, ApiKey::Metadata, 12, 3, &MetadataRequest::default())
}

#[test]
fn debians_kcat_logs_in_with_plain_and_scram_and_a_v0_handshake_is_refused_cleanly() {
    // kcat 1.7 on librdkafka 2.0 enables its SASL handshake only when the
    // broker lists SaslHandshake v0 (then speaks v1 + SaslAuthenticate).
    // Its SCRAM final message repeats the client nonce (librdkafka before
    // 2.6.1), which rill accepts as Kafka 3.8.1 and later do.
    if rill_tests::host_command("kcat").arg("-V").output().is_err() {
        panic!("kcat is not installed (apt-get install kcat); .ci/run installs it");
    }
    let b = start("");
    let logins = [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-512", "root", "root-secret"),
        ("SCRAM-SHA-256", "root", "root-secret"),
    ];
    for (mechanism, user, password) in logins {
        let output = rill_tests::host_command("kcat")
            .args(["-b", &b.sasl_bootstrap(), "-L", "-m", "10"])
            .args(["-X", "security.protocol=SASL_PLAINTEXT"])
            .args(["-X", &format!("sasl.mechanisms={mechanism}")])
            .args(["-X", &format!("sasl.username={user}")])
            .args(["-X", &format!("sasl.password={password}")])
            .args(["-X", "broker.address.family=v4"])
            .output()
            .expect("run kcat");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("broker"),
            "kcat -L over SASL/{mechanism} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // A v0 handshake (raw tokens would follow) gets an error and a close.
    let mut socket = connect(b.sasl);
    let mut request = SaslHandshakeRequest::default();
    request.mechanism = StrBytes::from_static_str("PLAIN");
    let answer: SaslHandshakeResponse =
        raw::exchange(&mut socket, ApiKey::SaslHandshake, 0, 1, &request).expect("an answer");
    assert_eq!(answer.error_code, 35, "UNSUPPORTED_VERSION");
    assert_closed_by_broker(&mut socket);
}

#[test]
fn only_the_sasl_exchange_is_served_before_authentication() {
    let b = start("rill.sasl.handshake.timeout.ms=1500\n");
    // ApiVersions is served, and advertises the SASL APIs.
    let mut socket = connect(b.sasl);
    let versions: ApiVersionsResponse = raw::exchange(
        &mut socket,
        ApiKey::ApiVersions,
        3,
        1,
        &ApiVersionsRequest::default(),
    )
    .expect("api versions");
    let range = |key: ApiKey| {
        versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(
        range(ApiKey::SaslHandshake),
        Some((0, 1)),
        "v0 listed, as Kafka (older librdkafka needs it)"
    );
    assert_eq!(range(ApiKey::SaslAuthenticate), Some((0, 2)));
    assert_eq!(range(ApiKey::DescribeUserScramCredentials), Some((0, 0)));
    assert_eq!(range(ApiKey::AlterUserScramCredentials), Some((0, 0)));
    // An unknown mechanism is refused with the list of those offered.
    let refused = handshake(&mut socket, "GSSAPI");
    assert_eq!(refused.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    let offered: Vec<&str> = refused.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    // Metadata before authenticating closes the connection.
    assert!(metadata(&mut socket).is_err());
    assert_closed_by_broker(&mut socket);
    // A wrong password answers SASL_AUTHENTICATION_FAILED, then closes.
    let mut socket = connect(b.sasl);
    let failed = plain_login(&mut socket, "alice", "nope");
    assert_eq!(failed.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    assert!(failed
        .error_message
        .as_ref()
        .is_some_and(|m| m.contains("Authentication failed")));
    assert_closed_by_broker(&mut socket);
    // The right one authenticates the connection.
    let mut socket = connect(b.sasl);
    let ok = plain_login(&mut socket, "alice", "alice-secret");
    assert_eq!(ok.error_code, 0);
    assert_eq!(ok.session_lifetime_ms, 0, "no connections.max.reauth.ms");
    assert!(!metadata(&mut socket).expect("metadata").brokers.is_empty());
    // The PLAINTEXT listener needs no SASL, and refuses it.
    let mut plain = connect(b.plain);
    assert!(metadata(&mut plain).is_ok());
    assert_eq!(
        handshake(&mut plain, "PLAIN").error_code,
        34,
        "ILLEGAL_SASL_STATE"
    );
    // A connection that does not authenticate is closed after the handshake timeout.
    let mut idle = connect(b.sasl);
    let started = Instant::now();
    assert_closed_by_broker(&mut idle);
    // Not at once: after the handshake timeout (a lower bound only; the
    // socket's 5 s read timeout bounds the wait, and a hang fails above).
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(1000), "{waited:?}");
    // An authenticated one is not.
    std::thread::sleep(Duration::from_millis(500));
    assert!(metadata(&mut socket).is_ok());
}

/// Kafka's admin-side SCRAM math: the salted password for an upsertion.
fn salted_sha256(password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    pbkdf2::pbkdf2_hmac_array::<sha2::Sha256, 32>(password.as_bytes(), salt, iterations).to_vec()
}

fn upsertion(
    name: &str,
    mechanism: i8,
    iterations: i32,
    password: &str,
) -> ScramCredentialUpsertion {
    let salt = format!("{name}-salt").into_bytes();
    let mut u = ScramCredentialUpsertion::default();
    u.name = StrBytes::from_string(name.to_string());
    u.mechanism = mechanism;
    u.iterations = iterations;
    u.salted_password = salted_sha256(password, &salt, iterations.max(1).unsigned_abs()).into();
    u.salt = salt.into();
    u
}

fn deletion(name: &str, mechanism: i8) -> ScramCredentialDeletion {
    let mut d = ScramCredentialDeletion::default();
    d.name = StrBytes::from_string(name.to_string());
    d.mechanism = mechanism;
    d
}

fn alter(
    addr: SocketAddr,
    upsertions: Vec<ScramCredentialUpsertion>,
    deletions: Vec<ScramCredentialDeletion>,
) -> Vec<(String, i16)> {
    let mut request = AlterUserScramCredentialsRequest::default();
    request.upsertions = upsertions;
    request.deletions = deletions;
    let response: AlterUserScramCredentialsResponse =
        raw::request(addr, ApiKey::AlterUserScramCredentials, 0, &request).expect("alter");
    response
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect()
}

#[test]
fn scram_users_are_created_described_kept_across_restarts_and_deleted() {
    let mut b = start("");
    let results = alter(
        b.plain,
        vec![
            upsertion("bob", 1, 8192, "bob-secret"),
            upsertion("carol", 1, 100, "carol-secret"),
            upsertion("dave", 9, 4096, "dave-secret"),
        ],
        vec![deletion("nobody", 2)],
    );
    let code = |name: &str| {
        results
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| *c)
            .unwrap_or_else(|| panic!("no result for {name}: {results:?}"))
    };
    assert_eq!(code("bob"), 0);
    assert_eq!(code("carol"), 93, "UNACCEPTABLE_CREDENTIAL");
    assert_eq!(code("dave"), 33, "UNSUPPORTED_SASL_MECHANISM");
    assert_eq!(code("nobody"), 91, "RESOURCE_NOT_FOUND");
    // Describe: mechanisms and iterations, nothing else.
    let described = describe(b.plain, &["bob", "ghost"]);
    assert_eq!(described.results.len(), 2);
    let bob = &described.results[0];
    assert_eq!((bob.user.as_str(), bob.error_code), ("bob", 0));
    let infos: Vec<(i8, i32)> = bob
        .credential_infos
        .iter()
        .map(|i| (i.mechanism, i.iterations))
        .collect();
    assert_eq!(infos, [(1, 8192)]);
    assert_eq!(described.results[1].error_code, 91, "RESOURCE_NOT_FOUND");
    let everyone = describe(b.plain, &[]);
    let users: Vec<&str> = everyone.results.iter().map(|r| r.user.as_str()).collect();
    assert_eq!(users, ["bob", "root"]);
    // bob logs in with SCRAM-SHA-256 (and PLAIN), not with a wrong password.
    assert!(can_log_in(
        &b.sasl_bootstrap(),
        "SCRAM-SHA-256",
        "bob",
        "bob-secret"
    ));
    assert!(can_log_in(
        &b.sasl_bootstrap(),
        "PLAIN",
        "bob",
        "bob-secret"
    ));
    assert!(!can_log_in(
        &b.sasl_bootstrap(),
        "SCRAM-SHA-256",
        "bob",
        "bob-secreT"
    ));
    // The credential is in the metadata log: it survives a restart.
    assert_eq!(b.broker.stop(), Some(0));
    b.broker.restart();
    wait_for_user(&b, "bob", 1);
    assert!(can_log_in(
        &b.sasl_bootstrap(),
        "SCRAM-SHA-256",
        "bob",
        "bob-secret"
    ));
    // Deleted, it no longer logs in; a second delete finds nothing.
    assert_eq!(
        alter(b.plain, vec![], vec![deletion("bob", 1)]),
        [("bob".to_string(), 0)]
    );
    assert!(!can_log_in(
        &b.sasl_bootstrap(),
        "SCRAM-SHA-256",
        "bob",
        "bob-secret"
    ));
    assert_eq!(
        alter(b.plain, vec![], vec![deletion("bob", 1)]),
        [("bob".to_string(), 91)]
    );
    // The same user twice in one request is DUPLICATE_RESOURCE.
    assert_eq!(
        alter(
            b.plain,
            vec![upsertion("erin", 1, 4096, "x")],
            vec![deletion("erin", 2)]
        ),
        [("erin".to_string(), 92)]
    );
}

#[test]
fn an_expired_session_is_closed_unless_it_re_authenticates() {
    let b = start("connections.max.reauth.ms=1500\n");
    let mut socket = connect(b.sasl);
    let ok = plain_login(&mut socket, "alice", "alice-secret");
    assert_eq!((ok.error_code, ok.session_lifetime_ms), (0, 1500));
    assert!(metadata(&mut socket).is_ok());
    std::thread::sleep(Duration::from_millis(1800));
    assert!(
        metadata(&mut socket).is_err(),
        "served past the session lifetime"
    );
    // Re-authenticating on the same connection extends the session.
    let mut socket = connect(b.sasl);
    assert_eq!(
        plain_login(&mut socket, "alice", "alice-secret").error_code,
        0
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        plain_login(&mut socket, "alice", "alice-secret").error_code,
        0
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        metadata(&mut socket).is_ok(),
        "re-authentication did not extend the session"
    );
    // ... as the same principal only.
    let other = plain_login(&mut socket, "admin", "admin-secret");
    assert_eq!(other.error_code, 58);
    assert_closed_by_broker(&mut socket);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_re_authenticates_and_keeps_producing_past_the_lifetime() {
    let b = start("connections.max.reauth.ms=2000\n");
    create_topic(&b.plain.to_string(), "sasl-reauth", 1, &[]).await;
    let errors_before = metric(&b.broker, "rill_protocol_errors_total");
    let accepted_before = metric(&b.broker, "rill_connections_accepted_total");
    let settings = sasl("SCRAM-SHA-512", "root", "root-secret");
    let p = producer(&b.sasl_bootstrap(), &settings);
    let started = Instant::now();
    let mut sent = 0;
    while started.elapsed() < Duration::from_secs(7) {
        let record = vec![(None, format!("r{sent}").into_bytes())];
        produce_all(&p, "sasl-reauth", &record, None).await;
        sent += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let succeeded = metric(
        &b.broker,
        "rill_sasl_authentications_total{mechanism=\"SCRAM-SHA-512\",result=\"succeeded\"}",
    );
    let accepted = metric(&b.broker, "rill_connections_accepted_total") - accepted_before;
    let errors = metric(&b.broker, "rill_protocol_errors_total");
    let got = consume_all(
        &b.plain.to_string(),
        "sasl-reauth",
        1,
        sent,
        Duration::from_secs(20),
        &[],
    );
    assert_eq!(got.len(), sent);
    // No connection was closed for an expired session: the producer
    // re-authenticated on its connections instead of opening new ones.
    assert_eq!(errors, errors_before);
    assert!(
        succeeded > accepted,
        "{succeeded} authentications on {accepted} connections: no re-authentication"
    );
}

/// The issue's ACL check with real users: alice (SASL) may only read topic
/// A through group G; the super user admin may do everything; a grant takes
/// effect at once and survives a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_hold_per_authenticated_user() {
    use rill_tests::acl::{create_acls, creation};
    const TOPIC: i8 = 2;
    const GROUP: i8 = 3;
    const READ: i8 = 3;
    const WRITE: i8 = 4;
    const ALLOW: i8 = 3;
    let mut b = start(
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
         super.users=User:admin;User:ANONYMOUS\n",
    );
    let sasl_bootstrap = b.sasl_bootstrap();
    let as_user = |user: &'static str, password: &'static str| {
        sasl("PLAIN", user, password)
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect::<Vec<_>>()
    };
    let admin = as_user("admin", "admin-secret");
    let alice = as_user("alice", "alice-secret");
    // The super user creates and fills both topics over SASL.
    create_topic_as(&sasl_bootstrap, &admin, "topic-a").await;
    create_topic_as(&sasl_bootstrap, &admin, "topic-b").await;
    let records: Vec<_> = (0..10)
        .map(|i| (None, format!("v{i}").into_bytes()))
        .collect();
    let p = producer(&sasl_bootstrap, &with(&admin, &[("acks", "all")]));
    produce_all(&p, "topic-a", &records, None).await;
    produce_all(&p, "topic-b", &records, None).await;
    // Without an ACL alice sees nothing.
    assert!(topics_seen(&sasl_bootstrap, &alice).is_empty());
    assert_eq!(
        create_acls(
            b.plain,
            vec![
                creation(TOPIC, "topic-a", "User:alice", READ, ALLOW),
                creation(GROUP, "group-g", "User:alice", READ, ALLOW),
            ]
        ),
        [0, 0]
    );
    // READ implies DESCRIBE: A is listed, B is not.
    assert_eq!(topics_seen(&sasl_bootstrap, &alice), ["topic-a"]);
    assert_eq!(
        consume_in_group(&sasl_bootstrap, &alice, "topic-a", "group-g", 10),
        10
    );
    let refused = producer(
        &sasl_bootstrap,
        &with(&alice, &[("acks", "all"), ("message.timeout.ms", "5000")]),
    );
    let outcome = refused
        .send(
            FutureRecord::<(), _>::to("topic-a").payload("no"),
            Duration::from_secs(5),
        )
        .await;
    let err = outcome.expect_err("alice may not write topic-a").0;
    assert_eq!(
        err.rdkafka_error_code(),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed),
        "{err:?}"
    );
    // A grant takes effect without a restart, and survives one.
    assert_eq!(
        create_acls(
            b.plain,
            vec![creation(TOPIC, "topic-a", "User:alice", WRITE, ALLOW)]
        ),
        [0]
    );
    let writer = producer(&sasl_bootstrap, &with(&alice, &[("acks", "all")]));
    produce_all(&writer, "topic-a", &records[..1], None).await;
    b.broker.stop();
    b.broker.restart();
    assert_eq!(topics_seen(&sasl_bootstrap, &alice), ["topic-a"]);
    let writer = producer(&sasl_bootstrap, &with(&alice, &[("acks", "all")]));
    produce_all(&writer, "topic-a", &records[..1], None).await;
    assert_eq!(
        consume_in_group(&sasl_bootstrap, &alice, "topic-a", "group-g", 2),
        2
    );
}

fn with<'a>(base: &[(&'a str, &'a str)], extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    base.iter().chain(extra).copied().collect()
}

async fn create_topic_as(bootstrap: &str, user: &[(&str, &str)], name: &str) {
    let mut config = client_config(bootstrap);
    for (k, v) in user {
        config.set(*k, *v);
    }
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        config.create().expect("admin client");
    let topic = rdkafka::admin::NewTopic::new(name, 1, rdkafka::admin::TopicReplication::Fixed(1));
    let results = admin
        .create_topics(
            &[topic],
            &rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("create_topics");
    for r in results {
        r.expect("topic created");
    }
}

/// The topics a Metadata request for all topics lists to `user`.
fn topics_seen(bootstrap: &str, user: &[(&str, &str)]) -> Vec<String> {
    let mut config = client_config(bootstrap);
    for (k, v) in user {
        config.set(*k, *v);
    }
    let consumer: BaseConsumer = config.create().expect("consumer");
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("metadata");
    let mut names: Vec<String> = metadata
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|n| !n.starts_with("__"))
        .collect();
    names.sort();
    names
}

/// Reads `topic` through consumer group `group` as `user` until `expected`
/// records came (or 30 s); how many came.
fn consume_in_group(
    bootstrap: &str,
    user: &[(&str, &str)],
    topic: &str,
    group: &str,
    expected: usize,
) -> usize {
    let mut config = client_config(bootstrap);
    for (k, v) in user {
        config.set(*k, *v);
    }
    config
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = 0;
    while got < expected && Instant::now() < deadline {
        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(200)) {
            got += 1;
        }
    }
    got
}

/// Raises this process's open-file limit to the hard one; the soft limit now.
fn raise_open_files() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            let _ = libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        }
    }
    limit.rlim_cur
}

/// The broker's resident memory (`process_resident_memory_bytes`).
fn rss_bytes(broker: &Broker) -> i64 {
    rill_tests::http_get(broker.admin_addr, "/metrics")
        .lines()
        .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as i64)
}

/// Issue #19's check: 10,000 connections that never authenticate hold
/// little memory, do not stop an authenticated client from producing, and
/// are closed at the handshake timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_unauthenticated_connections_do_not_stop_a_client() {
    let limit = raise_open_files();
    // Both ends of each connection are in this machine's table; keep room.
    let wanted = 10_000usize.min((limit as usize).saturating_sub(1_000));
    if wanted < 10_000 {
        eprintln!("RLIMIT_NOFILE is {limit}: opening {wanted} connections, not 10,000");
    }
    let b = start("rill.sasl.handshake.timeout.ms=5000\n");
    let before = rss_bytes(&b.broker);
    let mut idle = Vec::with_capacity(wanted);
    for _ in 0..wanted {
        idle.push(TcpStream::connect(b.sasl).expect("connect"));
    }
    let p = producer(
        &b.sasl_bootstrap(),
        &with(
            &sasl("SCRAM-SHA-512", "root", "root-secret"),
            // Slowed (the broker is accepting 10,000 connections, and in CI
            // other tests share the cores), never stopped.
            &[("acks", "all"), ("message.timeout.ms", "120000")],
        ),
    );
    let records: Vec<_> = (0..50)
        .map(|i| (None, format!("v{i}").into_bytes()))
        .collect();
    let delivered = produce_all(&p, "crowded", &records, None).await;
    assert_eq!(delivered.len(), 50);
    let grown = rss_bytes(&b.broker) - before;
    eprintln!(
        "{wanted} unauthenticated connections: broker RSS grew {} MiB",
        grown >> 20
    );
    assert!(
        grown < 200 << 20,
        "{wanted} idle connections grew the broker by {} MiB",
        grown >> 20
    );
    // The handshake timeout closes every one of them.
    let deadline = Instant::now() + Duration::from_secs(60);
    while b.broker.metric_sum("rill_connections_open") > 10 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(b.broker.metric_sum("rill_connections_open") <= 10);
    let sample = &mut idle[wanted / 2];
    sample
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    assert!(matches!(sample.read(&mut byte), Ok(0) | Err(_)));
}

/// `sasl.server.max.receive.size` (Kafka's guard): before it authenticates,
/// a connection on a SASL listener may not send a frame over the limit (the
/// broker closes it rather than buffer it); once authenticated, the same
/// size is read as usual.
#[test]
fn a_frame_over_the_sasl_receive_limit_closes_an_unauthenticated_connection() {
    let b = start("sasl.server.max.receive.size=65536\n");
    // A 100 KiB token: over the limit, the connection is closed unanswered.
    let mut socket = connect(b.sasl);
    assert_eq!(handshake(&mut socket, "PLAIN").error_code, 0);
    let mut big_token = SaslAuthenticateRequest::default();
    big_token.auth_bytes = vec![b'x'; 100 * 1024].into();
    let answer: std::io::Result<SaslAuthenticateResponse> =
        raw::exchange(&mut socket, ApiKey::SaslAuthenticate, 1, 2, &big_token);
    assert!(
        answer.is_err(),
        "an oversized unauthenticated frame was read: {answer:?}"
    );
    // A token under the limit is read (and refused as a bad PLAIN message).
    let mut socket = connect(b.sasl);
    assert_eq!(handshake(&mut socket, "PLAIN").error_code, 0);
    let mut token = SaslAuthenticateRequest::default();
    token.auth_bytes = vec![b'x'; 1024].into();
    let refused: SaslAuthenticateResponse =
        raw::exchange(&mut socket, ApiKey::SaslAuthenticate, 1, 2, &token).expect("answered");
    assert_eq!(refused.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    // Authenticated, a 100 KiB Metadata request (3,000 topic names) is served.
    let mut socket = connect(b.sasl);
    assert_eq!(
        plain_login(&mut socket, "alice", "alice-secret").error_code,
        0
    );
    let mut request = MetadataRequest::default();
    request.allow_auto_topic_creation = false;
    request.topics = Some(
        (0..3000)
            .map(|i| {
                let mut topic =
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
                let name = format!("no-such-topic-with-a-long-name-{i:05}");
                topic.name = Some(kafka_protocol::messages::TopicName(StrBytes::from_string(
                    name,
                )));
                topic
            })
            .collect(),
    );
    let served: MetadataResponse =
        raw::exchange(&mut socket, ApiKey::Metadata, 12, 3, &request).expect("metadata served");
    assert_eq!(served.topics.len(), 3000);
}

//! SASL/OAUTHBEARER (KIP-255, KIP-768) with real clients: librdkafka's and
//! kafka-python's unsecured tokens against Kafka's default validator (the
//! principal and the required scope matter), and tokens signed by a test identity
//! provider whose JWKS the broker fetches over HTTP (a key it does not
//! hold yet is fetched when a token names it; a forged token, a wrong
//! audience, an unknown key are refused). Raw requests check the session
//! lifetime a token's expiry sets.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::client::{ClientContext, OAuthToken};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rill_tests::kafka::{client_config, consume_all, create_topic};
use rill_tests::sasl::SaslBroker;
use rill_tests::{data_dir, free_port, raw, Broker};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

const SUPER_USERS: &str =
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
     super.users=User:admin;User:ANONYMOUS\n";

/// A broker with a PLAINTEXT listener (first) and a SASL_PLAINTEXT one
/// offering OAUTHBEARER only, with `extra` properties.
fn start(extra: &str) -> SaslBroker {
    let properties =
        format!("listener.name.sasl_plaintext.sasl.enabled.mechanisms=OAUTHBEARER\n{extra}");
    SaslBroker::start(RILL, &properties, "2", &[])
}

/// librdkafka's settings for its own unsecured token.
fn unsecured(config: &str) -> Vec<(&'static str, String)> {
    vec![
        ("security.protocol", String::from("SASL_PLAINTEXT")),
        ("sasl.mechanism", String::from("OAUTHBEARER")),
        ("enable.sasl.oauthbearer.unsecure.jwt", String::from("true")),
        ("sasl.oauthbearer.config", config.to_string()),
    ]
}

/// The topics a client with `settings` sees, or `None` when it cannot log
/// in (its metadata request times out).
fn topics_seen(bootstrap: &str, settings: &[(&str, String)]) -> Option<Vec<String>> {
    let mut config = client_config(bootstrap);
    for (k, v) in settings {
        config.set(*k, v);
    }
    let consumer: BaseConsumer = config.create().expect("consumer");
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(5)).ok()?;
    Some(
        metadata
            .topics()
            .iter()
            .map(|t| t.name().to_string())
            .collect(),
    )
}

/// The OAUTHBEARER counter of `result`, summed over shards.
fn authentications(broker: &Broker, result: &str) -> i64 {
    rill_tests::sasl::authentications(broker, "OAUTHBEARER", result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafkas_unsecured_tokens_log_in_as_their_principal_with_the_required_scope() {
    let b = start(&format!(
        "{SUPER_USERS}listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=\
         org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
         unsecuredValidatorRequiredScope=\"kafka\";\n"
    ));
    create_topic(&b.plain.to_string(), "oauth-topic", 1, &[]).await;
    let bootstrap = b.sasl.to_string();
    let cases = [
        // The super user sees the topic; alice, with no ACL, sees nothing.
        (
            "principal=admin scope=kafka",
            Some(vec![String::from("oauth-topic")]),
        ),
        ("principal=alice scope=kafka,other", Some(Vec::new())),
        // Without the required scope the token is refused.
        ("principal=admin scope=other", None),
    ];
    for (config, expected) in cases {
        let seen = topics_seen(&bootstrap, &unsecured(config));
        assert_eq!(seen, expected, "{config}");
    }
    assert!(authentications(&b.broker, "failed") >= 1);
    // The admin's token produces; the records are read back elsewhere.
    let mut producer_config = client_config(&bootstrap);
    for (k, v) in unsecured("principal=admin scope=kafka") {
        producer_config.set(k, v);
    }
    let producer: FutureProducer = producer_config.create().expect("producer");
    for i in 0..5 {
        let value = format!("v{i}");
        let record = FutureRecord::<(), _>::to("oauth-topic").payload(&value);
        let sent = producer.send(record, Duration::from_secs(20)).await;
        assert!(sent.is_ok(), "{sent:?}");
    }
    let read = consume_all(
        &b.plain.to_string(),
        "oauth-topic",
        1,
        5,
        Duration::from_secs(20),
        &[],
    );
    assert_eq!(read.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_logs_in_with_an_unsigned_token_and_extensions() {
    rill_tests::python::require_kafka_python();
    let b = start("");
    create_topic(&b.plain.to_string(), "py-oauth", 1, &[]).await;
    let output = std::process::Command::new("python3")
        .arg(rill_tests::python::python_script("sasl_client.py"))
        .args([
            &b.sasl.to_string(),
            "OAUTHBEARER",
            "pyuser",
            "-",
            "py-oauth",
            "3",
        ])
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON line");
    assert_eq!(
        answer["consumed"],
        json!(["pyuser-0", "pyuser-1", "pyuser-2"]),
        "{text}"
    );
    assert!(authentications(&b.broker, "succeeded") >= 2);
}

/// A test identity provider: P-256 keys, a JWKS served over HTTP.
struct Provider {
    jwks: Arc<Mutex<Vec<serde_json::Value>>>,
    fetches: Arc<AtomicUsize>,
    url: String,
}

/// One signing key of the provider.
struct SigningKey {
    kid: String,
    jwk: serde_json::Value,
    key: EncodingKey,
}

fn signing_key(kid: &str) -> SigningKey {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key pair");
    let point = pair.public_key_raw();
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65])});
    SigningKey {
        kid: kid.to_string(),
        jwk,
        key: EncodingKey::from_ec_der(&pair.serialize_der()),
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

impl SigningKey {
    /// A token for `sub`, valid for `lifetime_s`, with `audience`.
    fn token(&self, sub: &str, audience: &str, lifetime_s: u64) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        let now = now_s();
        let claims = json!({"sub": sub, "aud": audience, "iss": "test-idp",
            "iat": now, "exp": now + lifetime_s});
        jsonwebtoken::encode(&header, &claims, &self.key).expect("sign")
    }
}

impl Provider {
    /// Serves `keys` as a JWKS on a free port, one request per connection.
    fn start(keys: &[&SigningKey]) -> Provider {
        let published: Vec<serde_json::Value> = keys.iter().map(|k| k.jwk.clone()).collect();
        let jwks = Arc::new(Mutex::new(published));
        let fetches = Arc::new(AtomicUsize::new(0));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the provider");
        let url = format!("http://{}/keys", listener.local_addr().expect("addr"));
        let (served, counted) = (jwks.clone(), fetches.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                let keys = served.lock().expect("jwks lock").clone();
                respond(stream, &json!({ "keys": keys }).to_string());
            }
        });
        Provider { jwks, fetches, url }
    }

    fn publish(&self, key: &SigningKey) {
        self.jwks.lock().expect("jwks lock").push(key.jwk.clone());
    }
}

/// Reads one HTTP request and answers `body` as JSON.
fn respond(mut stream: TcpStream, body: &str) {
    let mut request = Vec::new();
    let mut buffer = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes());
}

/// Hands librdkafka a fixed token.
struct TokenContext(String);

impl ClientContext for TokenContext {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn generate_oauth_token(
        &self,
        _config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        Ok(OAuthToken {
            token: self.0.clone(),
            principal_name: String::from("ignored-by-the-broker"),
            lifetime_ms: i64::try_from(now_s() * 1000 + 600_000)?,
        })
    }
}

/// A producer that logs in with `token`.
fn token_producer(bootstrap: &str, token: String) -> FutureProducer<TokenContext> {
    let mut config = client_config(bootstrap);
    config
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "OAUTHBEARER")
        .set("message.timeout.ms", "8000");
    config
        .create_with_context(TokenContext(token))
        .expect("producer")
}

/// Whether a producer with `token` gets its record written.
async fn produces(bootstrap: &str, token: String, value: &str) -> bool {
    let producer = token_producer(bootstrap, token);
    let record = FutureRecord::<(), _>::to("signed-topic").payload(value);
    producer.send(record, Duration::from_secs(10)).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_tokens_are_checked_against_the_providers_keys() {
    let (first, rotated, forger) = (signing_key("k1"), signing_key("k2"), signing_key("k1"));
    let provider = Provider::start(&[&first]);
    let b = start(&format!(
        "{SUPER_USERS}listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=\
         org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\n\
         sasl.oauthbearer.jwks.endpoint.url={}\n\
         sasl.oauthbearer.expected.audience=rill\n\
         sasl.oauthbearer.expected.issuer=test-idp\n",
        provider.url
    ));
    assert_eq!(
        provider.fetches.load(Ordering::SeqCst),
        1,
        "fetched once at start"
    );
    create_topic(&b.plain.to_string(), "signed-topic", 1, &[]).await;
    let bootstrap = b.sasl.to_string();
    assert!(produces(&bootstrap, first.token("admin", "rill", 600), "good").await);
    // Forged (right kid, wrong key), wrong audience, a key not published.
    assert!(!produces(&bootstrap, forger.token("admin", "rill", 600), "forged").await);
    assert!(!produces(&bootstrap, first.token("admin", "kafka", 600), "audience").await);
    let fetches_before = provider.fetches.load(Ordering::SeqCst);
    assert!(!produces(&bootstrap, rotated.token("admin", "rill", 600), "unknown").await);
    // The unknown kid made the broker fetch again; once the provider
    // publishes the rotated key, its tokens log in.
    assert!(provider.fetches.load(Ordering::SeqCst) > fetches_before);
    provider.publish(&rotated);
    let mut rotated_in = false;
    for _ in 0..5 {
        if produces(&bootstrap, rotated.token("admin", "rill", 600), "rotated").await {
            rotated_in = true;
            break;
        }
    }
    assert!(rotated_in, "the rotated key was never fetched");
    let read = consume_all(
        &b.plain.to_string(),
        "signed-topic",
        1,
        2,
        Duration::from_secs(20),
        &[],
    );
    let values: Vec<Vec<u8>> = read.into_iter().filter_map(|r| r.value).collect();
    assert_eq!(values, [b"good".to_vec(), b"rotated".to_vec()]);
    assert!(authentications(&b.broker, "failed") >= 3);
    // The refresher's figures: the start's fetch and the rotation's.
    let metrics = rill_tests::http_get(b.broker.admin_addr, "/metrics");
    let sample = |prefix: &str| -> f64 {
        (metrics.lines())
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit_once(' '))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{prefix} missing:\n{metrics}"))
    };
    assert!(sample("rill_oauth_jwks_fetches_total{result=\"succeeded\"}") >= 2.0);
    assert_eq!(sample("rill_oauth_jwks_keys "), 2.0);
    assert!(sample("rill_oauth_jwks_age_seconds ") < 60.0);
}

#[test]
fn a_jwks_that_cannot_be_fetched_stops_the_start_with_the_key() {
    let dir = data_dir();
    let file = dir.path().join("server.properties");
    let missing = dir.path().join("no-such-jwks.json");
    std::fs::write(
        &file,
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{},SASL_PLAINTEXT://127.0.0.1:{}\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n\
             sasl.enabled.mechanisms=OAUTHBEARER\n\
             sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\n\
             sasl.oauthbearer.jwks.endpoint.url=file://{}\n",
            free_port(),
            free_port(),
            missing.display()
        ),
    )
    .expect("write server.properties");
    let output = std::process::Command::new(RILL)
        .args(["serve", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--admin-listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--config")
        .arg(&file)
        .output()
        .expect("run rill");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sasl.oauthbearer.jwks.endpoint.url") && stderr.contains("no-such-jwks"),
        "{stderr}"
    );
}

fn handshake(socket: &mut TcpStream) -> SaslHandshakeResponse {
    let mut request = SaslHandshakeRequest::default();
    request.mechanism = StrBytes::from_static_str("OAUTHBEARER");
    raw::exchange(socket, ApiKey::SaslHandshake, 1, 1, &request).expect("handshake")
}

fn authenticate(socket: &mut TcpStream, bytes: &[u8]) -> SaslAuthenticateResponse {
    let mut request = SaslAuthenticateRequest::default();
    request.auth_bytes = bytes.to_vec().into();
    raw::exchange(socket, ApiKey::SaslAuthenticate, 2, 2, &request).expect("authenticate")
}

/// An unsigned token for `sub` expiring in `lifetime_s`.
fn unsigned_token(sub: &str, lifetime_s: u64) -> String {
    let claims = json!({"sub": sub, "iat": now_s(), "exp": now_s() + lifetime_s});
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

#[test]
fn a_tokens_expiry_bounds_the_session_and_a_refusal_comes_as_rfc_7628_says() {
    let b = start("connections.max.reauth.ms=3600000\n");
    let mut socket = TcpStream::connect(b.sasl).expect("connect");
    assert_eq!(handshake(&mut socket).error_code, 0);
    let message = format!("n,,\x01auth=Bearer {}\x01\x01", unsigned_token("carol", 60));
    let answer = authenticate(&mut socket, message.as_bytes());
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    assert!(
        (50_000..=60_000).contains(&answer.session_lifetime_ms),
        "the session outlives its token: {}",
        answer.session_lifetime_ms
    );
    // An expired token: the error challenge, then the failure on \x01.
    let mut socket = TcpStream::connect(b.sasl).expect("connect");
    assert_eq!(handshake(&mut socket).error_code, 0);
    let claims = json!({"sub": "carol", "exp": now_s() - 10});
    let expired = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let message = format!("n,,\x01auth=Bearer {expired}\x01\x01");
    let challenge = authenticate(&mut socket, message.as_bytes());
    assert_eq!(challenge.error_code, 0);
    assert_eq!(&challenge.auth_bytes[..], br#"{"status":"invalid_token"}"#);
    let failure = authenticate(&mut socket, b"\x01");
    assert_eq!(failure.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    let reason = failure
        .error_message
        .map(|m| m.to_string())
        .unwrap_or_default();
    assert!(reason.contains("expired"), "{reason}");
}

/// rill's own client (`rill admin`, the same as `rill-bench`'s) logs in
/// with OAUTHBEARER: an unsigned token for its user, or the token given.
#[test]
fn rill_admin_logs_in_with_oauthbearer() {
    let b = start("");
    let admin = |extra: &[&str]| {
        let mut command = std::process::Command::new(RILL);
        command.args(["admin", "--brokers", &b.sasl_bootstrap()]);
        command.args([
            "--security-protocol",
            "SASL_PLAINTEXT",
            "--sasl-mechanism",
            "OAUTHBEARER",
        ]);
        command.args(["--sasl-username", "admin"]).args(extra);
        command
            .args(["topic", "list"])
            .output()
            .expect("rill admin runs")
    };
    let listed = admin(&[]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(String::from_utf8_lossy(&listed.stdout).contains("PARTITIONS"));
    let refused = admin(&["--sasl-password", "not-a-jwt"]);
    assert!(!refused.status.success());
    let reason = String::from_utf8_lossy(&refused.stderr);
    assert!(reason.contains("invalid OAUTHBEARER token"), "{reason}");
}

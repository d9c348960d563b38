//! `rill-bench` over SASL_PLAINTEXT and SASL_SSL against a real rill broker
//! (certificates made here by rcgen): a run logs in with PLAIN and with
//! SCRAM-SHA-512 and moves every record; `handshakes` reports a setup rate
//! for SCRAM-SHA-256 over TLS; a wrong password fails the run with the
//! broker's SASL_AUTHENTICATION_FAILED.

use crate::common;

use common::{bench, read_json, scratch_dir, start_rill_with, BENCH_BIN};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Writes a CA (`ca.pem`) and a broker keystore for localhost/127.0.0.1
/// (`broker.pem`: key then certificate) into `dir`.
fn make_pki(dir: &Path) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "bench CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let mut params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    std::fs::write(
        dir.join("broker.pem"),
        format!("{}{}", key.serialize_pem(), cert.pem()),
    )
    .unwrap();
}

struct SecureBroker {
    _rill: common::Rill,
    sasl_plaintext: String,
    sasl_ssl: String,
    ca: String,
    dir: tempfile::TempDir,
}

/// rill with PLAINTEXT (the harness's), SASL_PLAINTEXT and SASL_SSL
/// listeners; PLAIN user alice, SCRAM users bob (SHA-512) and carol
/// (SHA-256).
fn start_secure_broker() -> SecureBroker {
    let dir = scratch_dir();
    make_pki(dir.path());
    let ports = bench_harness::ports::free_ports(2).unwrap();
    let (sasl_plain_port, sasl_ssl_port) = (ports[0], ports[1]);
    let properties = dir.path().join("server.properties");
    let keystore = dir.path().join("broker.pem");
    std::fs::write(
        &properties,
        format!(
            // The PLAINTEXT listener's address comes from `--listen`.
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_plain_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}\n\
             advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{sasl_plain_port},SASL_SSL://localhost:{sasl_ssl_port}\n\
             ssl.keystore.type=PEM\n\
             ssl.keystore.location={}\n\
             sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n\
             listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";\n\
             rill.sasl.bootstrap.scram=SCRAM-SHA-512=[name=bob,password=bob-secret];SCRAM-SHA-256=[name=carol,password=carol-secret]\n",
            keystore.display()
        ),
    )
    .unwrap();
    let rill = start_rill_with(&["--config", properties.to_str().unwrap()]);
    SecureBroker {
        _rill: rill,
        sasl_plaintext: format!("127.0.0.1:{sasl_plain_port}"),
        sasl_ssl: format!("localhost:{sasl_ssl_port}"),
        ca: dir.path().join("ca.pem").display().to_string(),
        dir,
    }
}

fn security_args(
    protocol: &str,
    ca: &str,
    mechanism: &str,
    user: &str,
    password: &str,
) -> Vec<String> {
    let mut args = vec![
        "--security-protocol".to_string(),
        protocol.to_string(),
        "--sasl-mechanism".to_string(),
        mechanism.to_string(),
        "--sasl-username".to_string(),
        user.to_string(),
        "--sasl-password".to_string(),
        password.to_string(),
    ];
    if protocol.ends_with("SSL") {
        args.extend(["--ssl-ca-location".to_string(), ca.to_string()]);
    }
    args
}

/// `rill-bench handshakes` with `security`; the raw process output.
fn handshakes(
    security: &[String],
    bootstrap: &str,
    connections: u32,
    out: &Path,
) -> std::process::Output {
    Command::new(BENCH_BIN)
        .args(security)
        .args(["handshakes", "--bootstrap", bootstrap, "--concurrency", "4"])
        .args(["--connections", &connections.to_string()])
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// Bootstrap SCRAM users are written just after start: wait until one
/// connection logs in.
fn wait_until_logged_in(security: &[String], bootstrap: &str, out: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let output = handshakes(security, bootstrap, 1, out);
        if output.status.success() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no login at {bootstrap}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn u64_at(value: &Value, pointer: &str) -> u64 {
    value
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} missing in {value}"))
}

#[test]
fn runs_over_sasl_plaintext_and_sasl_ssl() {
    let broker = start_secure_broker();
    let dir = broker.dir.path();
    for (name, protocol, bootstrap, mechanism, user, password) in [
        (
            "sasl-plain",
            "SASL_PLAINTEXT",
            &broker.sasl_plaintext,
            "PLAIN",
            "alice",
            "alice-secret",
        ),
        (
            "sasl-ssl-scram",
            "SASL_SSL",
            &broker.sasl_ssl,
            "SCRAM-SHA-512",
            "bob",
            "bob-secret",
        ),
    ] {
        let security = security_args(protocol, &broker.ca, mechanism, user, password);
        wait_until_logged_in(&security, bootstrap, &dir.join("wait.json"));
        let out = dir.join(format!("{name}.json"));
        let mut args = security.clone();
        args.extend(
            [
                "run",
                "--bootstrap",
                bootstrap,
                "--partitions",
                "2",
                "--message-size",
                "512",
                "--producers",
                "1",
                "--consumers",
                "1",
                "--acks",
                "all",
                "--rate",
                "2000",
                "--warmup-s",
                "0",
                "--duration-s",
                "2",
                "--quiet",
                "--topic-prefix",
                name,
                "--label",
                name,
                "--out",
            ]
            .map(String::from),
        );
        args.push(out.display().to_string());
        bench(&args);
        let result = read_json(&out);
        assert_eq!(
            u64_at(&result, "/errors"),
            0,
            "{name}: {}",
            result["error_samples"]
        );
        let produced = u64_at(&result, "/total_produced_messages");
        assert!(produced > 0, "{name}");
        assert_eq!(
            produced,
            u64_at(&result, "/total_consumed_messages"),
            "{name}"
        );
    }
}

#[test]
fn handshakes_reports_a_setup_rate_and_a_wrong_password_fails() {
    let broker = start_secure_broker();
    let dir = broker.dir.path();
    let security = security_args(
        "SASL_SSL",
        &broker.ca,
        "SCRAM-SHA-256",
        "carol",
        "carol-secret",
    );
    let out = dir.join("handshakes.json");
    wait_until_logged_in(&security, &broker.sasl_ssl, &out);
    let output = handshakes(&security, &broker.sasl_ssl, 24, &out);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("connections/s"));
    let report = read_json(&out);
    assert_eq!(report["security_protocol"], "SASL_SSL");
    assert_eq!(u64_at(&report, "/connections"), 24);
    assert_eq!(u64_at(&report, "/setup_latency_us/count"), 24);
    let (p50, p99, max) = (
        u64_at(&report, "/setup_latency_us/p50_us"),
        u64_at(&report, "/setup_latency_us/p99_us"),
        u64_at(&report, "/setup_latency_us/max_us"),
    );
    assert!(0 < p50 && p50 <= p99 && p99 <= max, "{report}");
    let rate = report["connections_per_s"].as_f64().unwrap();
    assert!(rate > 0.0 && rate.is_finite(), "{report}");

    // A wrong password: SASL_AUTHENTICATION_FAILED (58), and no figure.
    let wrong = security_args(
        "SASL_SSL",
        &broker.ca,
        "SCRAM-SHA-256",
        "carol",
        "not-carols",
    );
    let refused = handshakes(&wrong, &broker.sasl_ssl, 1, &dir.join("refused.json"));
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("broker error 58") && stderr.contains("SaslAuthenticate"),
        "{stderr}"
    );
    assert!(!dir.join("refused.json").exists());
}

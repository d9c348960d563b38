//! KafkaJS, the Node.js client, against rill (README names it among the
//! clients that work unchanged): its admin client creates a topic, an
//! idempotent producer writes gzip-compressed keyed records with
//! acks=all, a transactional producer commits one transaction and aborts
//! another, and two consumers of one group (KafkaJS's own classic
//! JoinGroup/SyncGroup, read_committed) split the partitions and read
//! every committed record once; and KafkaJS logs in with every SASL
//! mechanism it has. The scripts are in `tests/node/`; `.ci/run` installs
//! KafkaJS (`npm ci` there).

use rill_tests::sasl::SaslBroker;
use rill_tests::{data_dir, Broker};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// The client script's directory, failing (never skipping) when KafkaJS is
/// not installed there: CI installs it.
fn kafkajs_dir() -> &'static Path {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node"));
    assert!(
        dir.join("node_modules/kafkajs").is_dir(),
        "these tests need node and KafkaJS: (cd tests/node && npm ci)"
    );
    dir
}

#[test]
fn kafkajs_produces_transacts_and_consumes_in_a_group() {
    let dir = kafkajs_dir();
    let data = data_dir();
    let broker = Broker::start(RILL, data.path(), &["--cores", "2"]);
    let output = Command::new("node")
        .arg(dir.join("kafkajs_client.js"))
        .args([&broker.bootstrap(), "kafkajs-topic"])
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(report["created"], true, "{report}");
    assert_eq!(report["produced"], serde_json::json!([0, 0, 0]), "{report}");
    assert_eq!(report["settled"], true, "the group never split: {report}");
    assert_eq!(report["members"], 2, "{report}");
    let mut expected: Vec<String> = (0..30).map(|i| format!("v{i}")).collect();
    expected.push(String::from("committed"));
    expected.sort();
    let seen: Vec<String> = serde_json::from_value(report["seen"].clone()).expect("values");
    assert_eq!(seen, expected, "each committed record once, no aborted one");
    let committed: Vec<i64> = serde_json::from_value(report["committed"].clone()).expect("offsets");
    let ends: Vec<i64> = serde_json::from_value(report["ends"].clone()).expect("offsets");
    assert_eq!(committed.len(), 3, "{report}");
    assert!(
        committed.iter().zip(&ends).all(|(c, e)| c <= e) && committed.iter().sum::<i64>() >= 31,
        "committed offsets {committed:?} against the ends {ends:?}"
    );
    assert_eq!(report["emptied"], "Empty", "{report}");
}

/// KafkaJS logs in with PLAIN, both SCRAM mechanisms and OAUTHBEARER (an
/// unsigned token) and produces with each.
#[test]
fn kafkajs_logs_in_with_every_sasl_mechanism() {
    let dir = kafkajs_dir();
    let b = SaslBroker::start(
        RILL,
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER\n\
         listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";\n\
         rill.sasl.bootstrap.scram=SCRAM-SHA-512=[name=bob,password=bob-secret];SCRAM-SHA-256=[name=bob,password=bob-secret]",
        "2",
        &[],
    );
    let output = Command::new("node")
        .arg(dir.join("kafkajs_sasl.js"))
        .arg(b.sasl_bootstrap())
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&output.stderr)));
    for mechanism in ["plain", "scram-sha-256", "scram-sha-512", "oauthbearer"] {
        assert_eq!(report[mechanism], "ok", "{mechanism}: {report}");
    }
}

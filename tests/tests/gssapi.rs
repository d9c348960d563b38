//! SASL/GSSAPI (Kerberos) against a real `rill` and a real KDC (MIT's
//! `krb5kdc`, a realm of the test's own), with kafka-python's GSSAPI
//! client (the `gssapi` Python module over MIT's libraries):
//! - principals log in with their tickets and are named by
//!   `sasl.kerberos.principal.to.local.rules` (DEFAULT: `alice@RILL.TEST`
//!   is `User:alice`; a RULE makes `carol@RILL.TEST` `User:team-ops`),
//!   which the authorizer then sees: each produces and reads back under
//!   its ACLs, and `bob`, authenticated but with no ACL, is refused the
//!   topic;
//! - a ticket for a service principal the broker's keytab lacks is
//!   refused (SASL_AUTHENTICATION_FAILED), and counted as a failure;
//! - a keytab that does not exist stops the start, naming it.

use rill_tests::acl::{create_acls, creation};
use rill_tests::kafka::create_topic;
use rill_tests::kerberos::Kdc;
use rill_tests::python::{python_script, require_kafka_python};
use rill_tests::sasl::SaslBroker;
use rill_tests::{assert_settings_refused, data_dir, free_port};
use serde_json::Value;
use std::path::Path;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TOPIC: i8 = 2;
const READ: i8 = 3;
const WRITE: i8 = 4;
const DESCRIBE: i8 = 8;
const ALLOW: i8 = 3;

/// kafka-python produces 2 records as `label` with the ticket cache
/// `cache`, asking a ticket for `kafka/<host>`, and reads them back.
fn client(bootstrap: &str, kdc: &Kdc, cache: &Path, label: &str, host: &str) -> Value {
    let output = std::process::Command::new("python3")
        .arg(python_script("sasl_client.py"))
        .args([bootstrap, "GSSAPI", label, host, "krb", "2"])
        .env("KRB5_CONFIG", kdc.krb5_conf())
        .env("KRB5CCNAME", cache)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|_| {
        panic!(
            "one JSON line: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn authentications(broker: &SaslBroker, result: &str) -> i64 {
    rill_tests::sasl::authentications(&broker.broker, "GSSAPI", result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kerberos_principals_log_in_under_their_short_names() {
    require_kafka_python();
    let realm_dir = data_dir();
    let kdc = Kdc::start(realm_dir.path());
    for principal in [
        "kafka/127.0.0.1",
        "kafka/localhost",
        "alice",
        "bob",
        "carol",
    ] {
        kdc.add(principal);
    }
    let keytab = kdc.keytab("broker", &["kafka/127.0.0.1"]);
    let krb5_conf = kdc.krb5_conf();
    let b = SaslBroker::start(
        RILL,
        &format!(
            "sasl.enabled.mechanisms=GSSAPI\n\
             sasl.kerberos.service.name=kafka\n\
             sasl.kerberos.principal.to.local.rules=RULE:[1:$1@$0](carol@.*)s/carol@.*/team-ops/,DEFAULT\n\
             listener.name.sasl_plaintext.gssapi.sasl.jaas.config=\
             com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true \
             storeKey=true keyTab=\"{}\" principal=\"kafka/127.0.0.1@RILL.TEST\";\n\
             authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
             super.users=User:ANONYMOUS\n",
            keytab.display()
        ),
        "2",
        &[("KRB5_CONFIG", krb5_conf.to_str().expect("utf-8 path"))],
    );
    create_topic(&b.plain.to_string(), "krb", 1, &[]).await;
    let grants = ["User:alice", "User:team-ops"]
        .into_iter()
        .flat_map(|user| [WRITE, READ, DESCRIBE].map(|op| creation(TOPIC, "krb", user, op, ALLOW)))
        .collect();
    assert!(create_acls(b.plain, grants).iter().all(|&code| code == 0));

    let sasl = b.sasl_bootstrap();
    let alice = client(&sasl, &kdc, &kdc.kinit("alice"), "alice", "127.0.0.1");
    assert_eq!(
        alice["consumed"],
        serde_json::json!(["alice-0", "alice-1"]),
        "{alice}"
    );
    let carol = client(&sasl, &kdc, &kdc.kinit("carol"), "carol", "127.0.0.1");
    let read = carol["consumed"].as_array().cloned().unwrap_or_default();
    assert!(read.contains(&Value::from("carol-1")), "{carol}");
    let bob = client(&sasl, &kdc, &kdc.kinit("bob"), "bob", "127.0.0.1");
    let refusal = bob["error"].as_str().unwrap_or_default();
    assert!(refusal.contains("TopicAuthorizationFailed"), "{bob}");
    assert!(authentications(&b, "succeeded") >= 3);

    // A ticket for kafka/localhost, whose key the broker's keytab lacks.
    let failed_before = authentications(&b, "failed");
    let stranger = client(&sasl, &kdc, &kdc.kinit("alice"), "alice", "localhost");
    assert!(stranger["error"].is_string(), "{stranger}");
    assert!(authentications(&b, "failed") > failed_before);
}

#[test]
fn a_missing_keytab_stops_the_start_naming_it() {
    let dir = data_dir();
    let missing = dir.path().join("no-such.keytab");
    let properties = format!(
        "listeners=PLAINTEXT://127.0.0.1:{},SASL_PLAINTEXT://127.0.0.1:{}\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n\
         sasl.enabled.mechanisms=GSSAPI\n\
         sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required \
         useKeyTab=true keyTab=\"{}\" principal=\"kafka/h@RILL.TEST\";\n",
        free_port(),
        free_port(),
        missing.display()
    );
    assert_settings_refused(
        RILL,
        dir.path(),
        &properties,
        &["sasl.jaas.config", "no-such.keytab"],
    );
}

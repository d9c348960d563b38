//! KIP-430's authorized operations, read by librdkafka's admin client
//! (confluent-kafka's describe_topics, describe_cluster and
//! describe_consumer_groups with `include_authorized_operations`): Metadata,
//! DescribeCluster and DescribeGroups answer with what the caller's ACLs
//! allow, implied operations included, and every operation of the
//! resource type where no ACL names it (`allow.everyone.if.no.acl.found`).

use rill_tests::acl::{create_acls, creation};
use rill_tests::kafka::create_topic;
use rill_tests::python::python_script;
use rill_tests::{data_dir, Broker};
use serde_json::{json, Value};
use std::process::Command;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

// Kafka's codes.
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const READ: i8 = 3;
const ALTER: i8 = 7;
const ALLOW: i8 = 3;

/// `authorized_operations.py`'s answer for group `group` and `topics`.
fn described(bootstrap: &str, group: &str, topics: &[&str]) -> Value {
    rill_tests::python::require_share_consumer();
    let output = Command::new("python3")
        .arg(python_script("authorized_operations.py"))
        .args([bootstrap, group])
        .args(topics)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_see_the_operations_their_acls_allow() {
    let dir = data_dir();
    let file = dir.path().join("server.properties");
    let settings =
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
                    allow.everyone.if.no.acl.found=true\n";
    std::fs::write(&file, settings).expect("settings");
    let broker = Broker::start(RILL, dir.path(), &["--config", &file.to_string_lossy()]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "named", 1, &[]).await;
    create_topic(&bootstrap, "open", 1, &[]).await;
    let every_topic_operation = json!([
        "ALTER",
        "ALTER_CONFIGS",
        "CREATE",
        "DELETE",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "READ",
        "WRITE"
    ]);
    // No ACL yet: everything, as librdkafka's own test expects of Kafka.
    let before = described(&bootstrap, "g", &["named"]);
    assert_eq!(before["topics"]["named"], every_topic_operation, "{before}");
    let every_cluster_operation = json!([
        "ALTER",
        "ALTER_CONFIGS",
        "CLUSTER_ACTION",
        "CREATE",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "IDEMPOTENT_WRITE"
    ]);
    assert_eq!(before["cluster"], every_cluster_operation, "{before}");
    let every_group_operation = json!([
        "ALTER_CONFIGS",
        "DELETE",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "READ"
    ]);
    assert_eq!(before["groups"]["g"], every_group_operation, "{before}");

    // Once ACLs name them, only what they allow, and what that implies.
    let anonymous = "User:ANONYMOUS";
    let codes = create_acls(
        broker.addr,
        vec![
            creation(TOPIC, "named", anonymous, READ, ALLOW),
            creation(GROUP, "g", anonymous, READ, ALLOW),
            creation(CLUSTER, "kafka-cluster", anonymous, ALTER, ALLOW),
        ],
    );
    assert_eq!(codes, [0, 0, 0]);
    let after = described(&bootstrap, "g", &["named", "open"]);
    assert_eq!(
        after["topics"]["named"],
        json!(["DESCRIBE", "READ"]),
        "{after}"
    );
    assert_eq!(after["topics"]["open"], every_topic_operation, "{after}");
    assert_eq!(after["cluster"], json!(["ALTER", "DESCRIBE"]), "{after}");
    assert_eq!(after["groups"]["g"], json!(["DESCRIBE", "READ"]), "{after}");
}

//! `rill admin` against a real single-node broker: each command run as the
//! real binary (`rill admin --brokers ...`), its table and its
//! `--format json` output checked against what the broker holds (a group
//! made by a real rdkafka consumer, records produced and read back).
//!
//! One broker serves the main test (it starts in about a second; the
//! commands are sub-second each; decommission has a cluster of its own), with an authorizer so that the ACL
//! commands are answered, and `User:ANONYMOUS` a super user so that the
//! authorizer refuses nothing else.

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::Message;
use rill_tests::cluster::{wait_for, Cluster};
use rill_tests::kafka::{client_config, produce_all, producer};
use rill_tests::{data_dir, free_port, Broker};
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

fn broker(dir: &std::path::Path) -> Broker {
    let file = dir.join("admin-server.properties");
    let settings =
        format!("authorizer.class.name={STANDARD_AUTHORIZER}\nsuper.users=User:ANONYMOUS\n");
    std::fs::write(&file, settings).expect("write server.properties");
    Broker::start(
        RILL,
        dir,
        &[
            "--cores",
            "2",
            "--config",
            file.to_str().expect("utf-8 path"),
        ],
    )
}

/// Runs `rill admin --brokers <broker> args...`, with `stdin` piped in.
/// What `rill admin --brokers` is pointed at: one broker or a cluster's
/// bootstrap list.
trait Target {
    fn brokers(&self) -> String;
}

impl Target for Broker {
    fn brokers(&self) -> String {
        self.bootstrap()
    }
}

impl Target for str {
    fn brokers(&self) -> String {
        self.to_string()
    }
}

fn admin_with_input(broker: &(impl Target + ?Sized), args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(RILL)
        .arg("admin")
        .args(["--brokers", &broker.brokers(), "--timeout-ms", "10000"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rill admin starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("rill admin ends")
}

fn admin(broker: &(impl Target + ?Sized), args: &[&str]) -> Output {
    admin_with_input(broker, args, "")
}

/// The table a command printed; the command must have succeeded.
/// `rill admin ARGS` refused by the broker: exit code 1 and Kafka's error
/// `name` on stderr, which is returned.
fn admin_refused(broker: &(impl Target + ?Sized), args: &[&str], name: &str) -> String {
    let refused = admin(broker, args);
    assert_eq!(refused.status.code(), Some(1), "{args:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(stderr.contains(name), "{args:?}: {stderr}");
    stderr
}

fn admin_ok(broker: &(impl Target + ?Sized), args: &[&str]) -> String {
    let output = admin(broker, args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "rill admin {args:?} failed ({}):\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The JSON a command printed with `--format json`.
fn admin_json(broker: &(impl Target + ?Sized), args: &[&str]) -> Value {
    let mut with_format = args.to_vec();
    with_format.extend(["--format", "json"]);
    let stdout = admin_ok(broker, &with_format);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stdout}"))
}

/// The rows of a table whose first cell is `first`, split on blanks.
fn rows_starting<'a>(table: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    table
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.first() == Some(&first))
        .collect()
}

fn names(json: &Value, field: &str) -> Vec<String> {
    json.as_array()
        .expect("a JSON array")
        .iter()
        .map(|item| item[field].as_str().expect("a string field").to_string())
        .collect()
}

#[test]
fn admin_commands_against_a_real_broker() {
    let dir = data_dir();
    let broker = broker(dir.path());
    cluster_and_quorum(&broker);
    topics(&broker);
    records(&broker);
    groups(&broker);
    acls(&broker);
    users(&broker);
    quotas(&broker);
    leaders_and_reassignments(&broker);
    features_and_cordons(&broker);
    deletion_and_errors(&broker);
}

/// The cluster's level of `feature` as `feature describe` shows it.
fn finalized(broker: &Broker, feature: &str) -> i64 {
    let described = admin_json(broker, &["feature", "describe"]);
    let found = described
        .as_array()
        .expect("a JSON array")
        .iter()
        .find(|f| f["feature"] == feature)
        .unwrap_or_else(|| panic!("{feature} not described: {described}"));
    found["finalized"].as_i64().expect("a level")
}

fn features_and_cordons(broker: &Broker) {
    // Feature levels: a downgrade as asked, a dry run changing nothing, a
    // level past the supported range refused.
    assert_eq!(finalized(broker, "group.version"), 1);
    let table = admin_ok(broker, &["feature", "describe"]);
    assert_eq!(
        rows_starting(&table, "group.version"),
        vec![vec!["group.version", "0-1", "1"]]
    );
    admin_ok(
        broker,
        &[
            "feature",
            "downgrade",
            "--feature",
            "group.version",
            "--version",
            "0",
            "--dry-run",
        ],
    );
    assert_eq!(finalized(broker, "group.version"), 1);
    admin_ok(
        broker,
        &[
            "feature",
            "downgrade",
            "--feature",
            "group.version",
            "--version",
            "0",
        ],
    );
    assert_eq!(finalized(broker, "group.version"), 0);
    admin_refused(
        broker,
        &[
            "feature",
            "upgrade",
            "--feature",
            "group.version",
            "--version",
            "2",
        ],
        "InvalidUpdateVersion",
    );
    admin_ok(
        broker,
        &[
            "feature",
            "upgrade",
            "--feature",
            "group.version",
            "--version",
            "1",
        ],
    );
    assert_eq!(finalized(broker, "group.version"), 1);
    // Cordoned, the only broker takes no new topic; uncordoned, it does.
    // (It holds within a heartbeat: the creation is retried until then.)
    admin_ok(broker, &["cordon", "all"]);
    let refused_creation = wait_for("the broker cordoned", Duration::from_secs(30), || {
        let output = admin(
            broker,
            &[
                "topic",
                "create",
                &format!("cordoned-{}", next_suffix()),
                "-p",
                "1",
            ],
        );
        (!output.status.success()).then_some(output)
    });
    assert!(String::from_utf8_lossy(&refused_creation.stderr).contains("InvalidReplicationFactor"));
    let (_, ids) = rill_tests::cluster::describe_cluster(broker).expect("DescribeCluster");
    admin_ok(broker, &["uncordon", &ids[0].to_string()]);
    wait_for("the broker open again", Duration::from_secs(30), || {
        admin(
            broker,
            &[
                "topic",
                "create",
                &format!("open-{}", next_suffix()),
                "-p",
                "1",
            ],
        )
        .status
        .success()
        .then_some(())
    });
    admin_ok(broker, &["uncordon", "all"]);
}

/// A suffix that makes each try's topic name new.
fn next_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn cluster_and_quorum(broker: &Broker) {
    let info = admin_json(broker, &["cluster", "info"]);
    let brokers = info["brokers"].as_array().expect("brokers");
    assert_eq!(brokers.len(), 1, "{info}");
    assert_eq!(brokers[0]["port"], broker.addr.port(), "{info}");
    assert!(!info["cluster_id"].as_str().expect("cluster id").is_empty());
    let node_id = brokers[0]["id"].as_i64().expect("id");
    assert_eq!(info["controller_id"].as_i64(), Some(node_id), "{info}");
    let table = admin_ok(broker, &["cluster", "info"]);
    assert!(table.contains("BROKERS"), "{table}");
    assert_eq!(
        rows_starting(&table, &node_id.to_string()).len(),
        1,
        "{table}"
    );

    let quorum = admin_json(broker, &["quorum", "describe"]);
    assert_eq!(quorum["leader_id"].as_i64(), Some(node_id), "{quorum}");
    let voters = quorum["voters"].as_array().expect("voters");
    assert_eq!(voters.len(), 1, "{quorum}");
    assert_eq!(voters[0]["node_id"].as_i64(), Some(node_id), "{quorum}");

    // KIP-853's refusals, exit code 1 with Kafka's error names: the node
    // votes already, a node that does not vote, the active controller.
    let id = node_id.to_string();
    let endpoint = broker.addr.to_string();
    let refusals = [
        (
            vec!["add-voter", "--id", &id, "--endpoint", &endpoint],
            "DuplicateVoter",
        ),
        (vec!["remove-voter", "--id", "42"], "VoterNotFound"),
        (vec!["remove-voter", "--id", &id], "InvalidRequest"),
    ];
    for (args, name) in refusals {
        admin_refused(broker, &[&["quorum"][..], &args].concat(), name);
    }
}

fn topics(broker: &Broker) {
    let created = admin_ok(
        broker,
        &[
            "topic",
            "create",
            "orders",
            "-p",
            "3",
            "-c",
            "retention.ms=3600000",
        ],
    );
    assert_eq!(
        rows_starting(&created, "orders"),
        [vec!["orders", "OK"]],
        "{created}"
    );
    let list = admin_json(broker, &["topic", "list"]);
    let orders: Vec<&Value> = list
        .as_array()
        .expect("topics")
        .iter()
        .filter(|t| t["name"] == "orders")
        .collect();
    assert_eq!(orders.len(), 1, "{list}");
    assert_eq!(orders[0]["partitions"], 3, "{list}");
    assert_eq!(orders[0]["replicas"], 1, "{list}");
    let table = admin_ok(broker, &["topic", "list"]);
    assert_eq!(
        rows_starting(&table, "orders"),
        [vec!["orders", "3", "1", "false"]]
    );

    let altered = admin_ok(
        broker,
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "retention.bytes=1073741824",
            "--delete",
            "retention.ms",
        ],
    );
    assert_eq!(
        rows_starting(&altered, "orders"),
        [vec!["orders", "OK"]],
        "{altered}"
    );
    let described = admin_json(broker, &["topic", "describe", "orders"]);
    let partitions = described["partitions"].as_array().expect("partitions");
    assert_eq!(partitions.len(), 3, "{described}");
    assert_eq!(partitions[2]["partition"], 2);
    let config = |name: &str| {
        described["configs"]
            .as_array()
            .expect("configs")
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no config {name} in {described}"))
    };
    assert_eq!(config("retention.bytes")["value"], "1073741824");
    assert_eq!(config("retention.bytes")["source"], "DYNAMIC_TOPIC_CONFIG");
    assert_ne!(config("retention.ms")["source"], "DYNAMIC_TOPIC_CONFIG");
    let set_only = admin_ok(broker, &["topic", "describe", "orders", "--non-default"]);
    assert_eq!(
        rows_starting(&set_only, "retention.bytes"),
        [vec![
            "retention.bytes",
            "1073741824",
            "DYNAMIC_TOPIC_CONFIG"
        ]],
        "{set_only}"
    );
    assert!(
        rows_starting(&set_only, "retention.ms").is_empty(),
        "{set_only}"
    );
}

fn records(broker: &Broker) {
    let output = admin_with_input(
        broker,
        &[
            "topic", "produce", "orders", "-p", "0", "--key", "k", "--format", "json",
        ],
        "first\nsecond\nthird\n",
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let produced: Value = serde_json::from_slice(&output.stdout).expect("produce JSON");
    let offsets: Vec<i64> = produced
        .as_array()
        .expect("records")
        .iter()
        .map(|r| r["offset"].as_i64().expect("offset"))
        .collect();
    assert_eq!(offsets, [0, 1, 2], "{produced}");

    let consumed = admin_json(
        broker,
        &["topic", "consume", "orders", "--offset", "earliest"],
    );
    let values = names(&consumed, "value");
    assert_eq!(values, ["first", "second", "third"], "{consumed}");
    assert!(consumed
        .as_array()
        .expect("records")
        .iter()
        .all(|r| r["key"] == "k" && r["partition"] == 0));
    let from_one = admin_ok(
        broker,
        &[
            "topic", "consume", "orders", "-p", "0", "--offset", "1", "--num", "1",
        ],
    );
    assert_eq!(
        rows_starting(&from_one, "orders")
            .iter()
            .map(|row| (row[2], row[5]))
            .collect::<Vec<_>>(),
        [("1", "second")],
        "{from_one}"
    );
    let latest = admin_json(
        broker,
        &["topic", "consume", "orders", "--offset", "latest"],
    );
    assert_eq!(latest.as_array().map(Vec::len), Some(0), "{latest}");
    let described = admin_json(broker, &["topic", "describe", "orders"]);
    let partition_0 = &described["partitions"][0];
    assert_eq!(partition_0["log_start_offset"], 0, "{described}");
    assert_eq!(partition_0["high_watermark"], 3, "{described}");
    assert_eq!(
        described["partitions"][1]["high_watermark"], 0,
        "{described}"
    );
    keys_land_where_kafkas_partitioner_puts_them(broker);
}

/// Without `-p`, a keyed record goes where Kafka's default partitioner
/// (murmur2) puts it: where librdkafka's `murmur2_random` puts it too.
fn keys_land_where_kafkas_partitioner_puts_them(broker: &Broker) {
    admin_ok(broker, &["topic", "create", "keyed", "-p", "8"]);
    let producer = producer(&broker.bootstrap(), &[("partitioner", "murmur2_random")]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for key in ["user-1", "user-2", "user-42", "a-little-bit-longer-key"] {
        let produced = admin_json(
            broker,
            &["topic", "produce", "keyed", "--key", key, "--value", "v"],
        );
        let ours = produced[0]["partition"].as_i64().expect("partition");
        let record = [(Some(key.as_bytes().to_vec()), b"v".to_vec())];
        let delivered = runtime.block_on(produce_all(&producer, "keyed", &record, None));
        assert_eq!(i64::from(delivered[0].0), ours, "key {key}");
    }
    let added = admin_ok(broker, &["topic", "add-partitions", "keyed", "-n", "2"]);
    assert_eq!(
        rows_starting(&added, "keyed"),
        [vec!["keyed", "OK"]],
        "{added}"
    );
    let described = admin_json(broker, &["topic", "describe", "keyed"]);
    assert_eq!(
        described["partitions"].as_array().map(Vec::len),
        Some(10),
        "{described}"
    );
    admin_ok(broker, &["topic", "delete", "keyed"]);
}

/// A subscribed consumer of `orders` in `group` that read the 3 records
/// and committed.
fn group_member(broker: &Broker, group: &str) -> BaseConsumer {
    let mut config = client_config(&broker.bootstrap());
    config
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().expect("consumer");
    consumer.subscribe(&["orders"]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut got = 0;
    while got < 3 && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                assert_eq!(message.topic(), "orders");
                got += 1;
            }
            Some(Err(e)) => panic!("consume through {group}: {e}"),
            None => {}
        }
    }
    assert_eq!(got, 3);
    consumer
        .commit_consumer_state(CommitMode::Sync)
        .expect("commit");
    consumer
}

/// A KIP-848 group (`group.protocol=consumer`) is described too, through
/// ConsumerGroupDescribe: its type, its member and the member's host.
fn kip848_group(broker: &Broker) {
    let mut config = client_config(&broker.bootstrap());
    config
        .set("group.id", "billing-848")
        .set("group.protocol", "consumer")
        .set("auto.offset.reset", "earliest");
    let consumer: BaseConsumer = config.create().expect("consumer");
    consumer.subscribe(&["orders"]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(20);
    while consumer.assignment().map_or(0, |a| a.count()) == 0 {
        assert!(Instant::now() < deadline, "no assignment");
        let _ = consumer.poll(Duration::from_millis(100));
    }
    let described = admin_json(broker, &["group", "describe", "billing-848"]);
    assert_eq!(described["type"], "consumer", "{described}");
    assert_eq!(described["state"], "Stable", "{described}");
    assert_eq!(
        described["members"][0]["protocol"], "consumer",
        "{described}"
    );
    assert_eq!(described["members"][0]["host"], "/127.0.0.1", "{described}");
    let classic = admin_json(broker, &["group", "describe", "billing"]);
    assert_eq!(classic["type"], "classic", "{classic}");
}

fn committed_offset(described: &Value, partition: i64) -> Option<i64> {
    described["offsets"]
        .as_array()
        .expect("offsets")
        .iter()
        .find(|o| o["topic"] == "orders" && o["partition"] == partition)
        .and_then(|o| o["committed_offset"].as_i64())
}

fn groups(broker: &Broker) {
    let consumer = group_member(broker, "billing");
    let list = admin_json(broker, &["group", "list"]);
    assert!(
        names(&list, "group").contains(&String::from("billing")),
        "{list}"
    );
    let described = admin_json(broker, &["group", "describe", "billing"]);
    assert_eq!(described["state"], "Stable", "{described}");
    assert_eq!(
        described["members"].as_array().map(Vec::len),
        Some(1),
        "{described}"
    );
    assert_eq!(committed_offset(&described, 0), Some(3), "{described}");
    assert_eq!(described["offsets"][0]["lag"], 0, "{described}");
    kip848_group(broker);

    // As Kafka's tool: no reset while the group has members.
    let refused = admin(
        broker,
        &["group", "reset-offsets", "billing", "--to-earliest"],
    );
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("only for an empty group"), "{why}");

    drop(consumer); // leaves the group
    let deadline = Instant::now() + Duration::from_secs(10);
    while admin_json(broker, &["group", "describe", "billing"])["state"] != "Empty" {
        assert!(Instant::now() < deadline, "billing never became empty");
        std::thread::sleep(Duration::from_millis(100));
    }
    let reset = admin_ok(
        broker,
        &["group", "reset-offsets", "billing", "--to-earliest"],
    );
    assert_eq!(rows_starting(&reset, "orders").len(), 3, "{reset}");
    let described = admin_json(broker, &["group", "describe", "billing"]);
    assert_eq!(committed_offset(&described, 0), Some(0), "{described}");
    assert_eq!(described["offsets"][0]["lag"], 3, "{described}");
    let to_two = admin_json(
        broker,
        &[
            "group",
            "reset-offsets",
            "billing",
            "-t",
            "orders",
            "--to-offset",
            "2",
        ],
    );
    assert_eq!(to_two["offsets"][0]["new_offset"], 2, "{to_two}");
    let described = admin_json(broker, &["group", "describe", "billing"]);
    assert_eq!(committed_offset(&described, 0), Some(2), "{described}");

    delete_and_check_gone(
        broker,
        "group",
        "billing",
        "group",
        "error: group billing does not exist",
    );
}

/// `NOUN delete NAME` answers OK; then NAME is gone from `NOUN list` (its
/// JSON field `list_field`), and `NOUN describe NAME` fails (exit 1) with
/// `missing` on stderr.
fn delete_and_check_gone(broker: &Broker, noun: &str, name: &str, list_field: &str, missing: &str) {
    let deleted = admin_ok(broker, &[noun, "delete", name]);
    assert_eq!(
        rows_starting(&deleted, name),
        [vec![name, "OK"]],
        "{deleted}"
    );
    let list = admin_json(broker, &[noun, "list"]);
    assert!(
        !names(&list, list_field).contains(&name.to_string()),
        "{list}"
    );
    admin_refused(broker, &[noun, "describe", name], missing);
}

fn acls(broker: &Broker) {
    let created = admin_ok(
        broker,
        &[
            "acl",
            "create",
            "--resource-type",
            "topic",
            "--resource-name",
            "orders",
            "--principal",
            "User:alice",
            "--operation",
            "read",
            "--operation",
            "describe",
        ],
    );
    assert_eq!(rows_starting(&created, "topic").len(), 2, "{created}");
    let listed = admin_json(broker, &["acl", "list", "--principal", "User:alice"]);
    let operations = names(&listed, "operation");
    assert_eq!(operations, ["read", "describe"], "{listed}");
    assert!(listed
        .as_array()
        .expect("acls")
        .iter()
        .all(|a| a["resource_name"] == "orders"
            && a["permission"] == "allow"
            && a["pattern"] == "literal"));
    let deleted = admin_json(
        broker,
        &[
            "acl",
            "delete",
            "--principal",
            "User:alice",
            "--operation",
            "read",
        ],
    );
    assert_eq!(names(&deleted, "operation"), ["read"], "{deleted}");
    let left = admin_ok(broker, &["acl", "list"]);
    assert_eq!(
        rows_starting(&left, "topic"),
        [vec![
            "topic",
            "orders",
            "literal",
            "User:alice",
            "*",
            "describe",
            "allow"
        ]],
        "{left}"
    );
}

fn users(broker: &Broker) {
    let created = admin_ok(
        broker,
        &[
            "user",
            "create",
            "alice",
            "--password",
            "secret",
            "--mechanism",
            "SCRAM-SHA-512",
            "--iterations",
            "8192",
        ],
    );
    assert_eq!(
        rows_starting(&created, "alice"),
        [vec!["alice", "OK"]],
        "{created}"
    );
    let list = admin_ok(broker, &["user", "list"]);
    assert_eq!(
        rows_starting(&list, "alice"),
        [vec!["alice", "SCRAM-SHA-512", "8192"]],
        "{list}"
    );
    admin_ok(
        broker,
        &["user", "delete", "alice", "--mechanism", "SCRAM-SHA-512"],
    );
    let list = admin_json(broker, &["user", "list"]);
    assert!(
        !names(&list, "user").contains(&String::from("alice")),
        "{list}"
    );
}

fn quotas(broker: &Broker) {
    admin_ok(
        broker,
        &[
            "quota",
            "alter",
            "--user",
            "alice",
            "--set",
            "producer_byte_rate=1048576",
            "--set",
            "consumer_byte_rate=2048",
        ],
    );
    let described = admin_json(broker, &["quota", "describe", "--user", "alice"]);
    let mut pairs: Vec<(String, f64)> = described
        .as_array()
        .expect("quotas")
        .iter()
        .map(|q| {
            assert_eq!(q["entity"]["user"], "alice", "{described}");
            (
                q["key"].as_str().expect("key").to_string(),
                q["value"].as_f64().expect("value"),
            )
        })
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        pairs,
        [
            (String::from("consumer_byte_rate"), 2048.0),
            (String::from("producer_byte_rate"), 1048576.0)
        ],
        "{described}"
    );
    admin_ok(
        broker,
        &[
            "quota",
            "alter",
            "--user",
            "alice",
            "--delete",
            "consumer_byte_rate",
        ],
    );
    let table = admin_ok(broker, &["quota", "describe"]);
    assert_eq!(
        rows_starting(&table, "user=alice"),
        [vec!["user=alice", "producer_byte_rate", "1048576"]],
        "{table}"
    );
}

fn leaders_and_reassignments(broker: &Broker) {
    let elected = admin_json(
        broker,
        &["elect-leaders", "--type", "preferred", "--topic", "orders"],
    );
    let statuses: Vec<(i64, String)> = elected
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["partition"].as_i64().expect("partition"),
                r["status"].as_str().expect("status").to_string(),
            )
        })
        .collect();
    // One replica each, already the leader: nothing to elect.
    assert_eq!(
        statuses,
        [
            (0, "not needed".to_string()),
            (1, "not needed".to_string()),
            (2, "not needed".to_string())
        ],
        "{elected}"
    );
    // One broker: the only move is onto the replica it has, done at once.
    let node_id = admin_json(broker, &["cluster", "info"])["controller_id"].to_string();
    let moved = admin_json(
        broker,
        &[
            "reassign",
            "alter",
            "--topic",
            "orders",
            "--partition",
            "0",
            "--replicas",
            &node_id,
        ],
    );
    assert_eq!(moved[0]["status"], "OK", "{moved}");
    let ongoing = admin_json(broker, &["reassign", "list"]);
    assert_eq!(ongoing.as_array().map(Vec::len), Some(0), "{ongoing}");
    admin_refused(
        broker,
        &[
            "reassign",
            "alter",
            "--topic",
            "orders",
            "--partition",
            "0",
            "--cancel",
        ],
        "NoReassignmentInProgress",
    );
}

fn deletion_and_errors(broker: &Broker) {
    // A broker's refusal: one clear line, exit code 1, no panic.
    let stderr = admin_refused(broker, &["topic", "create", "orders"], "TopicAlreadyExists");
    assert!(!stderr.contains("panicked"), "{stderr}");

    delete_and_check_gone(broker, "topic", "orders", "name", "UnknownTopicOrPartition");

    // No broker at all: a connection error, not a hang or a panic.
    let nobody = Command::new(RILL)
        .args([
            "admin",
            "--brokers",
            "127.0.0.1:1",
            "--timeout-ms",
            "2000",
            "cluster",
            "info",
        ])
        .output()
        .expect("rill admin runs");
    assert_eq!(nobody.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&nobody.stderr);
    assert!(
        stderr.starts_with("error: connect to 127.0.0.1:1"),
        "{stderr}"
    );
}

/// A user made by `user create` logs in: `rill admin` itself, with
/// rill-bench's SASL flags, over a SASL_PLAINTEXT listener (which also
/// proves the salted password the tool computed is the one SCRAM expects).
#[test]
fn a_created_scram_user_logs_in_with_the_sasl_flags() {
    let dir = data_dir();
    let sasl_port = free_port();
    let file = dir.path().join("sasl-server.properties");
    std::fs::write(
        &file,
        format!(
            // The PLAINTEXT listener's address comes from `--listen`.
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}\n\
             advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{sasl_port}\n\
             sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512\n"
        ),
    )
    .expect("write server.properties");
    let broker = Broker::start(
        RILL,
        dir.path(),
        &["--config", file.to_str().expect("utf-8 path")],
    );
    admin_ok(
        &broker,
        &["user", "create", "carol", "--password", "carol-secret"],
    );
    let sasl = |password: &str| {
        Command::new(RILL)
            .args([
                "admin",
                "--brokers",
                &format!("127.0.0.1:{sasl_port}"),
                "--timeout-ms",
                "10000",
            ])
            .args([
                "--security-protocol",
                "SASL_PLAINTEXT",
                "--sasl-mechanism",
                "SCRAM-SHA-256",
            ])
            .args(["--sasl-username", "carol", "--sasl-password", password])
            .args(["cluster", "info", "--format", "json"])
            .output()
            .expect("rill admin runs")
    };
    // The credential may take a moment to reach the listener's shard.
    let deadline = Instant::now() + Duration::from_secs(10);
    let output = loop {
        let output = sasl("carol-secret");
        if output.status.success() || Instant::now() > deadline {
            break output;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let info: Value = serde_json::from_slice(&output.stdout).expect("cluster info JSON");
    assert_eq!(info["brokers"].as_array().map(Vec::len), Some(1), "{info}");
    let refused = sasl("wrong");
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("SaslAuthenticate"), "{stderr}");
}

/// The replica lists and ISRs (sorted) of `topic`'s partitions, by
/// partition.
fn placements(bootstrap: &str, topic: &str) -> Vec<(Vec<i64>, Vec<i64>)> {
    let described = admin_json(bootstrap, &["topic", "describe", topic]);
    let ids = |list: &Value| -> Vec<i64> {
        let list = list.as_array().expect("an id list");
        list.iter().map(|id| id.as_i64().expect("id")).collect()
    };
    described["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .map(|p| {
            let mut isr = ids(&p["isr"]);
            isr.sort_unstable();
            (ids(&p["replicas"]), isr)
        })
        .collect()
}

/// The runbook of issue #33 point 3 on four brokers (three voters and the
/// broker-only node 4), under idempotent acks=all load throughout: `cordon
/// 4`; `decommission 4` while it runs moves its replicas to the brokers
/// that have room and leaves it registered; once stopped, a second run
/// unregisters it. Not one acknowledged record is lost.
#[test]
fn decommission_moves_replicas_off_a_broker_under_load_then_unregisters_it_once_stopped() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // Three voters and a broker-only node 4, the one retired.
    let mut cluster = Cluster::start_settled(RILL, 3, &[], Duration::from_secs(30));
    cluster.add_broker(RILL, 4, &[]);
    let bootstrap = cluster.bootstrap();
    let live = |bootstrap: &str| {
        let info = admin_json(bootstrap, &["cluster", "info"]);
        let brokers = info["brokers"].as_array().expect("brokers").clone();
        let ids = brokers.iter().map(|b| b["id"].as_i64().expect("id"));
        ids.collect::<Vec<_>>()
    };
    wait_for("broker 4 to register", Duration::from_secs(30), || {
        (live(&bootstrap) == [1, 2, 3, 4]).then_some(())
    });
    // Four partitions of three replicas on four brokers: 4 holds three.
    let create = [
        "topic",
        "create",
        "moving",
        "-p",
        "4",
        "-r",
        "3",
        "-c",
        "min.insync.replicas=2",
    ];
    admin_ok(bootstrap.as_str(), &create);
    wait_for("every replica in sync", Duration::from_secs(30), || {
        let placed = placements(&bootstrap, "moving");
        let in_sync = placed.iter().all(|(replicas, isr)| {
            let mut sorted = replicas.clone();
            sorted.sort_unstable();
            replicas.len() == 3 && sorted == *isr
        });
        (placed.len() == 4 && in_sync).then_some(())
    });
    let on_4 = placements(&bootstrap, "moving")
        .iter()
        .filter(|(replicas, _)| replicas.contains(&4))
        .count();
    assert!(on_4 > 0, "broker 4 holds no replica of moving");

    // Under idempotent acks=all load throughout, as the runbook goes:
    // cordon, drain, stop, unregister.
    let stop = Arc::new(AtomicBool::new(false));
    let producing = {
        let (stop, bootstrap) = (stop.clone(), bootstrap.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().expect("runtime");
            let producer = rill_tests::replicated::idempotent_producer(&bootstrap);
            let mut acknowledged = Vec::new();
            let mut next = 0u32;
            while !stop.load(Ordering::Acquire) {
                let values: Vec<u32> = (next..next + 20).collect();
                let records: Vec<_> = values
                    .iter()
                    .map(|v| (None, v.to_string().into_bytes()))
                    .collect();
                runtime.block_on(produce_all(&producer, "moving", &records, None));
                acknowledged.extend(values);
                next += 20;
            }
            acknowledged
        })
    };
    admin_ok(bootstrap.as_str(), &["cordon", "4"]);
    let decommission = ["decommission", "4", "--wait-ms", "60000"];
    let drained = admin_json(bootstrap.as_str(), &decommission);
    assert_eq!(drained["running"], true, "{drained}");
    assert_eq!(drained["unregistered"], false, "{drained}");
    let moves = drained["moves"].as_array().expect("moves");
    assert_eq!(moves.len(), on_4, "{drained}");
    for moved in moves {
        let before = moved["before"].as_array().expect("before");
        let after = moved["after"].as_array().expect("after");
        assert!(before.contains(&Value::from(4)), "{drained}");
        assert!(!after.contains(&Value::from(4)), "{drained}");
        assert_eq!(after.len(), 3, "{drained}");
    }
    for (replicas, _) in placements(&bootstrap, "moving") {
        assert!(!replicas.contains(&4), "{replicas:?}");
        assert_eq!(replicas.len(), 3, "{replicas:?}");
    }

    cluster.node(4).stop();
    let survivors: String = bootstrap.split(',').take(3).collect::<Vec<_>>().join(",");
    // Until its registration times out, a stopped broker may still be
    // listed as live: the command then leaves it registered again.
    let retired = wait_for("broker 4 unregistered", Duration::from_secs(30), || {
        let retired = admin_json(survivors.as_str(), &decommission);
        (retired["unregistered"] == true).then_some(retired)
    });
    assert_eq!(
        retired["moves"].as_array().map(Vec::len),
        Some(0),
        "{retired}"
    );
    assert_eq!(live(&survivors), [1, 2, 3]);
    stop.store(true, Ordering::Release);
    let acknowledged = producing.join().expect("the producer");
    assert!(
        acknowledged.len() >= 20,
        "records went on being acknowledged"
    );
    // Not one acknowledged record is lost.
    let read = rill_tests::kafka::consume_all(
        &survivors,
        "moving",
        4,
        acknowledged.len(),
        Duration::from_secs(60),
        &[],
    );
    let read: std::collections::BTreeSet<u32> = read
        .iter()
        .filter_map(|r| String::from_utf8(r.value.clone()?).ok()?.parse().ok())
        .collect();
    let lost: Vec<&u32> = acknowledged.iter().filter(|v| !read.contains(v)).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged records lost: {lost:?}",
        lost.len()
    );
    // Once more: Kafka's BROKER_ID_NOT_REGISTERED, exit code 1.
    admin_refused(
        survivors.as_str(),
        &["decommission", "4", "--skip-reassign"],
        "BrokerIdNotRegistered",
    );
}

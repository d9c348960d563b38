//! Leader elections across real `rill` processes (issue #33, point 5):
//!
//! - ElectLeaders PREFERRED, sent by kafka-python's admin client, moves a
//!   leadership back to its preferred replica after a restart while the
//!   automatic rebalance is off; Kafka's error codes for the rest;
//! - ElectLeaders UNCLEAN elects the only live replica of a leaderless
//!   partition although it is out of sync and the topic forbids unclean
//!   elections (the topic's flag stays as it was);
//! - turning `unclean.leader.election.enable` on for a topic elects its
//!   leaderless partition at once;
//! - eligible leader replicas (KIP-966): with RF 3 and
//!   `min.insync.replicas=2`, killing the followers puts the last one to
//!   leave the ISR in the ELR (DescribeTopicPartitions shows it); with the
//!   leader dead too, that replica leads again, cleanly, and no acks=all
//!   record acknowledged is lost;
//! - `auto.leader.rebalance.enable` with a short check interval returns a
//!   leadership to a restarted broker by itself.
//!
//! The first cluster has three voters and two broker-only nodes (4, 5):
//! the nodes killed together are at most one voter, so the metadata quorum
//! keeps a majority throughout.

use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponsePartition;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse, ElectLeadersRequest, ElectLeadersResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rill_tests::cluster::{describe_cluster, wait_for, Cluster};
use rill_tests::python::{python_script, require_kafka_python};
use rill_tests::replicated::{
    idempotent_producer, partition_view, produce_numbers, read_numbers, signal,
};
use rill_tests::{data_dir, Broker};
use std::process::Command;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// An election, a session expiry (2.5 s) and a catch-up on a loaded
/// two-core machine.
const SETTLE: Duration = Duration::from_secs(60);

/// Kafka's error codes the tests expect.
const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REQUEST: i16 = 42;
const ELECTION_NOT_NEEDED: i16 = 84;

/// Election types.
const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

/// A config file with `lines` (TOML), as a path for `--config`.
fn config_file(dir: &tempfile::TempDir, lines: &str) -> String {
    let path = dir.path().join("rill.toml");
    std::fs::write(&path, lines).expect("config file");
    path.to_str().expect("utf-8 path").to_owned()
}

/// Creates `topic` with one partition on exactly `replicas`.
async fn create_assigned(bootstrap: &str, topic: &str, replicas: &[i32], configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> = rill_tests::kafka::client_config(bootstrap)
        .create()
        .expect("admin client");
    let assignment = [replicas];
    let mut new_topic = NewTopic::new(topic, 1, TopicReplication::Variable(&assignment));
    for (key, value) in configs {
        new_topic = new_topic.set(key, value);
    }
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = admin
        .create_topics(&[new_topic], &options)
        .await
        .expect("create_topics request");
    for result in results {
        result.expect("topic created");
    }
}

/// ElectLeaders at `version` of partition 0 of `topic`: (top-level code,
/// the partition's code).
fn elect(broker: &Broker, version: i16, election_type: i8, topic: &str) -> (i16, i16) {
    let mut asked = TopicPartitions::default();
    asked.topic = TopicName(StrBytes::from_string(topic.to_owned()));
    asked.partitions = vec![0];
    let mut request = ElectLeadersRequest::default();
    request.election_type = election_type;
    request.timeout_ms = 30_000;
    request.topic_partitions = Some(vec![asked]);
    let response: ElectLeadersResponse =
        rill_tests::raw::request(broker.addr, ApiKey::ElectLeaders, version, &request)
            .expect("ElectLeaders answered");
    let result = &response.replica_election_results[0];
    assert_eq!(result.topic.0.as_str(), topic);
    (response.error_code, result.partition_result[0].error_code)
}

/// ElectLeaders through kafka-python: the lines the script prints.
fn elect_with_kafka_python(bootstrap: &str, election_type: i8, topic: &str) -> Vec<String> {
    require_kafka_python();
    let out = Command::new("python3")
        .arg(python_script("elect_leaders.py"))
        .args([bootstrap, &election_type.to_string(), topic, "0"])
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "elect_leaders.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_owned).collect()
}

/// Partition 0 of `topic` as DescribeTopicPartitions v0 shows it.
fn described(broker: &Broker, topic: &str) -> Option<DescribeTopicPartitionsResponsePartition> {
    let mut asked = TopicRequest::default();
    asked.name = TopicName(StrBytes::from_string(topic.to_owned()));
    let mut request = DescribeTopicPartitionsRequest::default();
    request.topics = vec![asked];
    request.response_partition_limit = 10;
    let response: DescribeTopicPartitionsResponse =
        rill_tests::raw::request(broker.addr, ApiKey::DescribeTopicPartitions, 0, &request).ok()?;
    response
        .topics
        .into_iter()
        .next()?
        .partitions
        .into_iter()
        .next()
}

/// (leader, ISR, ELR, last known ELR) of a described partition, ISR sorted.
fn elr_view(
    partition: &DescribeTopicPartitionsResponsePartition,
) -> (i32, Vec<i32>, Vec<i32>, Vec<i32>) {
    let ids = |brokers: &Option<Vec<kafka_protocol::messages::BrokerId>>| {
        brokers.iter().flatten().map(|b| b.0).collect::<Vec<i32>>()
    };
    let mut isr: Vec<i32> = partition.isr_nodes.iter().map(|b| b.0).collect();
    isr.sort_unstable();
    (
        partition.leader_id.0,
        isr,
        ids(&partition.eligible_leader_replicas),
        ids(&partition.last_known_elr),
    )
}

/// IncrementalAlterConfigs v0 SET of one config of topic `topic`; its code.
fn set_topic_config(broker: &Broker, topic: &str, key: &str, value: &str) -> i16 {
    let mut config = AlterableConfig::default();
    config.name = StrBytes::from_string(key.to_owned());
    config.value = Some(StrBytes::from_string(value.to_owned()));
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_string(topic.to_owned());
    resource.configs = vec![config];
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource];
    let response: IncrementalAlterConfigsResponse =
        rill_tests::raw::request(broker.addr, ApiKey::IncrementalAlterConfigs, 0, &request)
            .expect("IncrementalAlterConfigs answered");
    response.responses[0].error_code
}

/// Topic config `key` of `topic` as DescribeConfigs shows it.
async fn topic_config(bootstrap: &str, topic: &str, key: &str) -> Option<String> {
    let admin: AdminClient<DefaultClientContext> = rill_tests::kafka::client_config(bootstrap)
        .create()
        .expect("admin client");
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let described = admin
        .describe_configs(&[ResourceSpecifier::Topic(topic)], &options)
        .await
        .expect("describe_configs request");
    let resource = described.into_iter().next()?.ok()?;
    resource.get(key)?.value.clone()
}

/// Waits until partition 0 of `topic`, as `bootstrap` reports it, has
/// `leader`.
fn wait_leader(bootstrap: &str, topic: &str, leader: i32) {
    wait_for(&format!("{topic} led by {leader}"), SETTLE, || {
        (partition_view(bootstrap, topic)?.leader == leader).then_some(())
    });
}

/// Waits until node 1 lists exactly `brokers` as live.
fn wait_live(cluster: &mut Cluster, brokers: &[i32]) {
    wait_for(&format!("live brokers {brokers:?}"), SETTLE, || {
        let (_, live) = describe_cluster(cluster.node(1)).ok()?;
        (live == brokers).then_some(())
    });
}

#[test]
fn operators_elect_leaders_and_eligible_replicas_keep_every_acknowledged_record() {
    let dir = data_dir();
    let config = config_file(&dir, "\"auto.leader.rebalance.enable\" = false\n");
    let mut cluster = Cluster::start_settled(RILL, 3, &["--config", &config], SETTLE);
    cluster.add_broker(RILL, 4, &["--config", &config]);
    cluster.add_broker(RILL, 5, &["--config", &config]);
    wait_live(&mut cluster, &[1, 2, 3, 4, 5]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    preferred_election(&mut cluster, &runtime);
    unclean_election(&mut cluster, &runtime);
    eligible_leader_replicas(&mut cluster, &runtime);
}

/// Broker 1 restarts; its leadership stays with 2 (no auto rebalance)
/// until kafka-python's ElectLeaders PREFERRED moves it back.
fn preferred_election(cluster: &mut Cluster, runtime: &tokio::runtime::Runtime) {
    let bootstrap = cluster.bootstrap();
    let versions: ApiVersionsResponse = rill_tests::raw::request(
        cluster.node(1).addr,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .expect("ApiVersions");
    let advertised = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ElectLeaders as i16)
        .map(|k| (k.min_version, k.max_version));
    assert_eq!(advertised, Some((0, 2)), "ElectLeaders v0-v2 advertised");
    runtime.block_on(create_assigned(&bootstrap, "preferred", &[1, 2, 3], &[]));
    wait_for("the preferred replica leading a full ISR", SETTLE, || {
        let view = partition_view(&bootstrap, "preferred")?;
        (view.leader == 1 && view.isr == [1, 2, 3]).then_some(())
    });
    assert_eq!(cluster.node(1).stop(), Some(0), "a clean stop");
    wait_leader(&cluster.node(2).bootstrap(), "preferred", 2);
    cluster.node(1).restart();
    wait_for("broker 1 back in the ISR", SETTLE, || {
        let view = partition_view(&bootstrap, "preferred")?;
        (view.isr == [1, 2, 3]).then_some(view.leader)
    });
    assert_eq!(
        partition_view(&bootstrap, "preferred").map(|v| v.leader),
        Some(2)
    );
    let lines = elect_with_kafka_python(&bootstrap, PREFERRED, "preferred");
    assert_eq!(lines, ["top 0", "preferred 0 0"], "kafka-python's answer");
    wait_leader(&bootstrap, "preferred", 1);
    // Again, at every version: not needed. Unknown topics, and UNCLEAN on
    // a partition that has a leader, as Kafka answers them.
    for version in 0..=2 {
        let (top, code) = elect(cluster.node(3), version, PREFERRED, "preferred");
        assert_eq!((top, code), (NONE, ELECTION_NOT_NEEDED), "v{version}");
    }
    assert_eq!(
        elect(cluster.node(3), 2, PREFERRED, "nope").1,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        elect(cluster.node(3), 2, UNCLEAN, "preferred").1,
        ELECTION_NOT_NEEDED
    );
    // An election type Kafka does not define refuses the whole request.
    assert_eq!(
        elect(cluster.node(3), 2, 7, "preferred"),
        (INVALID_REQUEST, INVALID_REQUEST)
    );
}

/// Two partitions on [2, 4]: 4 stops (out of the ISR), records arrive
/// without it, 2 dies, 4 comes back out of sync. ElectLeaders UNCLEAN
/// elects it for one; turning unclean election on elects it for the other.
fn unclean_election(cluster: &mut Cluster, runtime: &tokio::runtime::Runtime) {
    let bootstrap = cluster.bootstrap();
    let forbidden = [("unclean.leader.election.enable", "false")];
    for topic in ["unclean-elect", "unclean-flag"] {
        runtime.block_on(create_assigned(&bootstrap, topic, &[2, 4], &forbidden));
        wait_for("both replicas in sync", SETTLE, || {
            (partition_view(&bootstrap, topic)?.isr == [2, 4]).then_some(())
        });
    }
    signal(cluster.node(4), libc::SIGSTOP);
    for topic in ["unclean-elect", "unclean-flag"] {
        wait_for("the stopped replica out of the ISR", SETTLE, || {
            (partition_view(&bootstrap, topic)?.isr == [2]).then_some(())
        });
    }
    let acks_one = rill_tests::kafka::producer(&bootstrap, &[("acks", "1")]);
    let written = runtime.block_on(produce_numbers(&acks_one, "unclean-elect", 0..5));
    assert_eq!(written.len(), 5, "the leader alone takes acks=1 writes");
    cluster.node(2).kill();
    let survivor = cluster.node(1).bootstrap();
    for topic in ["unclean-elect", "unclean-flag"] {
        wait_leader(&survivor, topic, -1);
    }
    signal(cluster.node(4), libc::SIGCONT);
    wait_live(cluster, &[1, 3, 4, 5]);
    // Alive but out of sync: no clean leader, and the topic forbids unclean.
    assert_eq!(
        partition_view(&survivor, "unclean-elect").map(|v| v.leader),
        Some(-1)
    );
    assert_eq!(
        elect(cluster.node(3), 2, UNCLEAN, "unclean-elect"),
        (NONE, NONE)
    );
    wait_leader(&survivor, "unclean-elect", 4);
    let flag = runtime.block_on(topic_config(
        &survivor,
        "unclean-elect",
        "unclean.leader.election.enable",
    ));
    assert_eq!(
        flag.as_deref(),
        Some("false"),
        "the topic's flag is untouched"
    );
    // The other partition waits for the flag, then leads on its own.
    assert_eq!(
        partition_view(&survivor, "unclean-flag").map(|v| v.leader),
        Some(-1)
    );
    assert_eq!(
        set_topic_config(
            cluster.node(3),
            "unclean-flag",
            "unclean.leader.election.enable",
            "true"
        ),
        NONE
    );
    wait_leader(&survivor, "unclean-flag", 4);
    cluster.node(2).restart();
    wait_live(cluster, &[1, 2, 3, 4, 5]);
}

/// RF 3 on [4, 5, 3] with `min.insync.replicas=2`: 3 dies (ISR 4, 5), then
/// 5 (ISR 4 alone: 5 is an eligible leader replica), then the leader 4.
/// 5 comes back and leads, cleanly; every acknowledged record is there.
fn eligible_leader_replicas(cluster: &mut Cluster, runtime: &tokio::runtime::Runtime) {
    let bootstrap = cluster.bootstrap();
    let guarded = [("min.insync.replicas", "2")];
    runtime.block_on(create_assigned(&bootstrap, "elr", &[4, 5, 3], &guarded));
    wait_for("all three in sync", SETTLE, || {
        let view = partition_view(&bootstrap, "elr")?;
        (view.leader == 4 && view.isr == [3, 4, 5]).then_some(())
    });
    let producer = idempotent_producer(&bootstrap);
    let mut acknowledged = runtime.block_on(produce_numbers(&producer, "elr", 0..30));
    cluster.node(3).kill();
    let asked = cluster.node(1).bootstrap();
    wait_for("3 out of the ISR", SETTLE, || {
        (partition_view(&asked, "elr")?.isr == [4, 5]).then_some(())
    });
    acknowledged.extend(runtime.block_on(produce_numbers(&producer, "elr", 30..60)));
    assert_eq!(
        acknowledged,
        (0..60).collect::<Vec<u32>>(),
        "ISR at the minimum"
    );
    cluster.node(5).kill();
    let under_minimum = wait_for("5 out of the ISR, into the ELR", SETTLE, || {
        let view = elr_view(&described(cluster.node(1), "elr")?);
        (view.1 == [4]).then_some(view)
    });
    assert_eq!(under_minimum, (4, vec![4], vec![5], vec![]));
    cluster.node(4).kill();
    let leaderless = wait_for("no leader left", SETTLE, || {
        let view = elr_view(&described(cluster.node(1), "elr")?);
        (view.0 == -1).then_some(view)
    });
    assert_eq!(
        leaderless,
        (-1, vec![4], vec![5], vec![4]),
        "5 eligible, 4 led last"
    );
    // 5 returns: elected from the ELR, with unclean election off.
    cluster.node(5).restart();
    wait_leader(&asked, "elr", 5);
    let elected = elr_view(&described(cluster.node(1), "elr").expect("described"));
    assert_eq!(elected, (5, vec![5], vec![4], vec![]));
    cluster.node(4).restart();
    cluster.node(3).restart();
    wait_for("the ISR back at the minimum", SETTLE, || {
        (partition_view(&asked, "elr")?.isr.len() >= 2).then_some(())
    });
    let read = read_numbers(&asked, "elr", acknowledged.len());
    assert_eq!(
        read, acknowledged,
        "every acknowledged record, once, in order"
    );
}

#[test]
fn the_auto_rebalance_returns_leadership_to_a_restarted_broker() {
    let dir = data_dir();
    let config = config_file(&dir, "\"leader.imbalance.check.interval.seconds\" = 1\n");
    let mut cluster = Cluster::start_settled(RILL, 3, &["--config", &config], SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(create_assigned(&bootstrap, "auto", &[1, 2, 3], &[]));
    wait_for("the preferred replica leading a full ISR", SETTLE, || {
        let view = partition_view(&bootstrap, "auto")?;
        (view.leader == 1 && view.isr == [1, 2, 3]).then_some(())
    });
    assert_eq!(cluster.node(1).stop(), Some(0), "a clean stop");
    wait_leader(&cluster.node(2).bootstrap(), "auto", 2);
    cluster.node(1).restart();
    // Back in the ISR, it is the only preferred leadership out of place
    // (100 % of broker 1's, above the default 10 %): the next check, within
    // a second, moves it back without any request.
    wait_leader(&bootstrap, "auto", 1);
}

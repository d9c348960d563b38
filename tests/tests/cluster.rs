//! The metadata quorum with real processes: a single node is a quorum of
//! one; three nodes elect a controller, register, list each other in
//! DescribeCluster and Metadata, and survive the active controller's
//! SIGKILL (another is elected, the dead broker is fenced, and it rejoins
//! when it restarts). A broker-only node joins a running cluster as an
//! observer of the quorum and leads partitions like any broker.

use rill_tests::cluster::{describe_cluster, describe_quorum, wait_for, Cluster};
use rill_tests::{data_dir, free_port, Broker};
use std::process::Command;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Long enough for an election (1–2 s) plus a session expiry (2.5 s) on a
/// loaded two-core machine.
const SETTLE: Duration = Duration::from_secs(30);

#[test]
fn a_single_node_is_a_quorum_of_one_across_restarts() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let quorum = wait_for("the single node to lead its quorum", SETTLE, || {
        let response = describe_quorum(&broker).ok()?;
        let partition = response.topics.first()?.partitions.first()?.clone();
        (partition.leader_id.0 == 0 && partition.high_watermark > 0).then_some(partition)
    });
    assert_eq!(quorum.error_code, 0);
    let voters: Vec<i32> = quorum
        .current_voters
        .iter()
        .map(|v| v.replica_id.0)
        .collect();
    assert_eq!(voters, vec![0]);
    let first_term = quorum.leader_epoch;
    assert_eq!(
        describe_cluster(&broker).expect("describe cluster"),
        (0, vec![0])
    );
    assert!(dir.path().join("__cluster_metadata-0").is_dir());

    broker.stop();
    broker.restart();
    let quorum = wait_for("the node to lead again after a restart", SETTLE, || {
        let response = describe_quorum(&broker).ok()?;
        let partition = response.topics.first()?.partitions.first()?.clone();
        (partition.leader_id.0 == 0).then_some(partition)
    });
    assert!(
        quorum.leader_epoch > first_term,
        "a restarted quorum elects in a new term: {} then {}",
        first_term,
        quorum.leader_epoch
    );
    // The metadata log is not a topic.
    assert!(!topics_of(&broker.bootstrap()).contains_key("__cluster_metadata"));
}

#[test]
fn three_nodes_elect_a_controller_and_survive_its_death() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let controller = wait_for("one controller that all agree on", SETTLE, || {
        let seen: Vec<i32> = (1..=3)
            .map(|n| describe_cluster(cluster.node(n)).map(|(c, _)| c))
            .collect::<Result<_, _>>()
            .ok()?;
        (seen.iter().all(|&c| c == seen[0]) && (1..=3).contains(&seen[0])).then_some(seen[0])
    });
    let quorum = describe_quorum(cluster.node(controller)).expect("describe quorum");
    let partition = &quorum.topics[0].partitions[0];
    assert_eq!(partition.leader_id.0, controller);
    let mut voters: Vec<i32> = partition
        .current_voters
        .iter()
        .map(|v| v.replica_id.0)
        .collect();
    voters.sort_unstable();
    assert_eq!(voters, vec![1, 2, 3]);
    assert!(
        partition.high_watermark >= 3,
        "three registrations committed"
    );
    // The leader knows every voter's progress: each reaches what the
    // leader had committed then.
    let committed = partition.high_watermark;
    wait_for(
        "every voter's log end at the committed offset",
        SETTLE,
        || {
            let quorum = describe_quorum(cluster.node(controller)).ok()?;
            let voters = &quorum.topics[0].partitions[0].current_voters;
            (voters.len() == 3 && voters.iter().all(|v| v.log_end_offset >= committed))
                .then_some(())
        },
    );

    let metrics = rill_tests::http_get(cluster.node(controller).admin_addr, "/metrics");
    assert!(metrics.contains("rill_active_controller 1"), "{metrics}");
    assert!(metrics.contains("rill_brokers_live 3"), "{metrics}");

    // Metadata (rdkafka) from any broker lists all three.
    {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let consumer: BaseConsumer = rill_tests::kafka::client_config(&cluster.node(1).bootstrap())
            .create()
            .expect("consumer");
        let metadata = consumer
            .fetch_metadata(None, Duration::from_secs(10))
            .expect("metadata");
        let mut ids: Vec<i32> = metadata.brokers().iter().map(|b| b.id()).collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![1, 2, 3]);
    }

    cluster.node(controller).kill();
    let survivors: Vec<i32> = (1..=3).filter(|&n| n != controller).collect();
    let successor = wait_for(
        "a new controller, and the dead broker fenced",
        SETTLE,
        || {
            let views: Vec<(i32, Vec<i32>)> = survivors
                .iter()
                .map(|&n| describe_cluster(cluster.node(n)))
                .collect::<Result<_, _>>()
                .ok()?;
            let agreed = views.iter().all(|v| *v == views[0]);
            let (new_controller, brokers) = &views[0];
            (agreed && *new_controller != controller && *brokers == survivors)
                .then_some(*new_controller)
        },
    );
    assert!(survivors.contains(&successor));
    // Topic creation goes on through the new controller, from any survivor.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let other = survivors
        .iter()
        .copied()
        .find(|&n| n != successor)
        .unwrap_or(successor);
    runtime.block_on(rill_tests::kafka::create_topic(
        &cluster.node(other).bootstrap(),
        "after-failover",
        2,
        &[],
    ));
    assert_eq!(
        topics_of(&cluster.node(successor).bootstrap()).get("after-failover"),
        Some(&2)
    );
    let metrics = rill_tests::http_get(cluster.node(successor).admin_addr, "/metrics");
    assert!(metrics.contains("rill_active_controller 1"), "{metrics}");
    assert!(metrics.contains("rill_brokers_live 2"), "{metrics}");
    assert!(metrics.contains("rill_brokers_fenced 1"), "{metrics}");

    cluster.node(controller).restart();
    for node in 1..=3 {
        wait_for("the restarted broker to be listed again", SETTLE, || {
            let (seen_controller, brokers) = describe_cluster(cluster.node(node)).ok()?;
            (brokers == vec![1, 2, 3] && seen_controller == successor).then_some(())
        });
    }
}

#[test]
fn cluster_settings_that_cannot_work_stop_the_broker_with_a_reason() {
    let dir = data_dir();
    let voters = format!("1@127.0.0.1:{}", free_port());
    let run = |args: &[&str]| {
        let listen = format!("127.0.0.1:{}", free_port());
        let admin = format!("127.0.0.1:{}", free_port());
        Command::new(RILL)
            .args([
                "serve",
                "--listen",
                &listen,
                "--admin-listen",
                &admin,
                "--data-dir",
            ])
            .arg(dir.path())
            .args(args)
            .output()
            .expect("rill runs")
    };
    // A node outside the voters that claims the controller role is refused
    // (it would be one without a vote); with the roles unset it would start
    // as a broker-only node instead (see the observer test).
    let not_a_voter = run(&[
        "--node-id",
        "2",
        "--controller-quorum-voters",
        &voters,
        "--process-roles",
        "broker,controller",
    ]);
    assert_eq!(not_a_voter.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&not_a_voter.stderr).contains("not a voter"));
    // A voter without the controller role would leave its quorum short.
    let voter_without_vote = run(&[
        "--node-id",
        "1",
        "--controller-quorum-voters",
        &voters,
        "--process-roles",
        "broker",
    ]);
    assert_eq!(voter_without_vote.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&voter_without_vote.stderr).contains("controller role"));
    // A controller-only node must be a voter (tests/tests/controller_only.rs
    // runs three of them).
    let controller_only = run(&[
        "--node-id",
        "2",
        "--controller-quorum-voters",
        &voters,
        "--process-roles",
        "controller",
    ]);
    assert_eq!(controller_only.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&controller_only.stderr).contains("controller-only"));

    // A data dir made by a single node (quorum {0}) does not name node 1:
    // it is another quorum's, and refused.
    let mut single = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    single.stop();
    let other_quorum = run(&[
        "--cores",
        "1",
        "--node-id",
        "1",
        "--controller-quorum-voters",
        &voters,
    ]);
    assert_eq!(other_quorum.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&other_quorum.stderr).contains("another quorum"),
        "{}",
        String::from_utf8_lossy(&other_quorum.stderr)
    );
}

/// Every partition's (leader, replicas) from `bootstrap`, by rdkafka.
fn leaders(bootstrap: &str, topic: &str) -> Vec<(i32, Vec<i32>)> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rill_tests::kafka::client_config(bootstrap)
        .create()
        .expect("consumer");
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let mut partitions: Vec<(i32, i32, Vec<i32>)> = metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| (p.id(), p.leader(), p.replicas().to_vec()))
        .collect();
    partitions.sort_unstable();
    partitions.into_iter().map(|(_, l, r)| (l, r)).collect()
}

#[test]
fn topics_spread_over_the_cluster_and_clients_follow_the_leaders() {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::Message;
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // Created through broker 2; every broker then knows it.
    runtime.block_on(rill_tests::kafka::create_topic(
        &cluster.node(2).bootstrap(),
        "spread",
        6,
        &[],
    ));
    let placement = leaders(&cluster.node(1).bootstrap(), "spread");
    assert_eq!(placement.len(), 6);
    for (leader, replicas) in &placement {
        assert_eq!(replicas, &vec![*leader], "one replica, the leader");
    }
    let mut per_broker = [0; 3];
    for (leader, _) in &placement {
        per_broker[(*leader - 1) as usize] += 1;
    }
    assert_eq!(
        per_broker,
        [2, 2, 2],
        "Kafka's placement spreads leaders evenly"
    );
    assert_eq!(leaders(&cluster.node(3).bootstrap(), "spread"), placement);

    // A broker that does not lead a partition says so (the client goes to
    // the leader after a metadata refresh).
    let (p, (leader, _)) = placement.iter().enumerate().next().expect("partition 0");
    let other = (1..=3).find(|&n| n != *leader).expect("another broker");
    assert_eq!(
        list_offsets_error(cluster.node(other), "spread", p as i32),
        6,
        "NOT_LEADER_OR_FOLLOWER"
    );
    assert_eq!(
        list_offsets_error(cluster.node(*leader), "spread", p as i32),
        0
    );

    // Produce through one bootstrap broker: rdkafka sends each partition's
    // batches to its leader.
    let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..600)
        .map(|i| {
            (
                Some(format!("k{i}").into_bytes()),
                format!("v{i}").into_bytes(),
            )
        })
        .collect();
    let producer = rill_tests::kafka::producer(&cluster.node(1).bootstrap(), &[("acks", "all")]);
    let delivered = runtime.block_on(rill_tests::kafka::produce_all(
        &producer, "spread", &records, None,
    ));
    assert_eq!(delivered.len(), 600);

    // A consumer group whose coordinator is whichever broker leads its
    // __consumer_offsets partition: it reads everything and commits.
    let group_consumer = |bootstrap: &str| -> BaseConsumer {
        rill_tests::kafka::client_config(bootstrap)
            .set("group.id", "spread-readers")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .create()
            .expect("consumer")
    };
    let consumer = group_consumer(&cluster.node(3).bootstrap());
    consumer.subscribe(&["spread"]).expect("subscribe");
    let mut values = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while values.len() < 600 && std::time::Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            values.insert(message.payload().expect("value").to_vec());
        }
    }
    assert_eq!(values.len(), 600, "every record read back once");
    consumer
        .commit_consumer_state(CommitMode::Sync)
        .expect("commit");
    drop(consumer);
    let reader = group_consumer(&cluster.node(1).bootstrap());
    let mut assignment = rdkafka::TopicPartitionList::new();
    for partition in 0..6 {
        assignment.add_partition("spread", partition);
    }
    let committed = reader
        .committed_offsets(assignment, Duration::from_secs(10))
        .expect("committed offsets");
    let total: i64 = committed
        .elements()
        .iter()
        .map(|e| match e.offset() {
            rdkafka::Offset::Offset(o) => o,
            other => panic!("no committed offset: {other:?}"),
        })
        .sum();
    assert_eq!(total, 600, "the group's commits add up to every record");

    grow_by_assignment(&runtime, &cluster.node(2).bootstrap());

    // Deleted through broker 3: every broker drops its replicas' files.
    {
        use rdkafka::admin::{AdminClient, AdminOptions};
        use rdkafka::client::DefaultClientContext;
        let admin: AdminClient<DefaultClientContext> =
            rill_tests::kafka::client_config(&cluster.node(3).bootstrap())
                .create()
                .expect("admin");
        let results = runtime
            .block_on(admin.delete_topics(&["spread"], &AdminOptions::new()))
            .expect("delete");
        assert!(results.iter().all(Result::is_ok), "{results:?}");
    }
    for node in 1..=3 {
        let dir = cluster.node(node).data_dir.clone();
        wait_for(
            "the partitions to be deleted on every broker",
            SETTLE,
            || {
                let left = std::fs::read_dir(&dir)
                    .ok()?
                    .filter_map(Result::ok)
                    .any(|e| e.file_name().to_string_lossy().starts_with("spread-"));
                (!left).then_some(())
            },
        );
    }
}

/// CreatePartitions with an explicit assignment (`kafka-topics.sh --alter
/// --replica-assignment`), sent to the broker at `bootstrap`, puts the new
/// partitions of "spread" on the brokers it names; one naming a broker the
/// cluster does not have is refused with INVALID_REPLICA_ASSIGNMENT, as
/// KRaft refuses it.
fn grow_by_assignment(runtime: &tokio::runtime::Runtime, bootstrap: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, PartitionAssignment};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::types::RDKafkaErrorCode;
    let admin: AdminClient<DefaultClientContext> = rill_tests::kafka::client_config(bootstrap)
        .create()
        .expect("admin");
    let grow = |count: usize, assignment: PartitionAssignment| {
        let partitions = NewPartitions::new("spread", count).assign(assignment);
        let results = runtime
            .block_on(admin.create_partitions(&[partitions], &AdminOptions::new()))
            .expect("create partitions");
        results.into_iter().next().expect("one result")
    };
    let unknown = grow(7, &[&[9]]);
    assert_eq!(
        unknown.map_err(|(_, code)| code),
        Err(RDKafkaErrorCode::InvalidReplicaAssignment)
    );
    assert_eq!(grow(8, &[&[3], &[1]]), Ok(String::from("spread")));
    // The broker asked answers once it has applied the change.
    let placement = leaders(bootstrap, "spread");
    assert_eq!(placement.len(), 8);
    assert_eq!(placement[6], (3, vec![3]));
    assert_eq!(placement[7], (1, vec![1]));
}

/// ListOffsets v1 (latest) of one partition from `broker`: its error code.
fn list_offsets_error(broker: &Broker, topic: &str, partition: i32) -> i16 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{
        ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let mut wanted = ListOffsetsPartition::default();
    wanted.partition_index = partition;
    wanted.timestamp = -1;
    let mut request_topic = ListOffsetsTopic::default();
    request_topic.name = TopicName(StrBytes::from_string(topic.to_string()));
    request_topic.partitions = vec![wanted];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = vec![request_topic];
    let response: ListOffsetsResponse =
        rill_tests::raw::request(broker.addr, ApiKey::ListOffsets, 1, &request)
            .expect("list offsets");
    response.topics[0].partitions[0].error_code
}

/// The topics a broker lists, with their partition counts, by rdkafka.
fn topics_of(bootstrap: &str) -> std::collections::BTreeMap<String, usize> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rill_tests::kafka::client_config(bootstrap)
        .create()
        .expect("consumer");
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("metadata");
    metadata
        .topics()
        .iter()
        .map(|t| (t.name().to_string(), t.partitions().len()))
        .collect()
}

#[test]
fn the_metadata_log_snapshots_and_a_restart_rebuilds_the_same_topics() {
    let dir = data_dir();
    let config = dir.path().join("rill.toml");
    std::fs::write(&config, "\"rill.metadata.snapshot.interval.entries\" = 4\n").expect("config");
    let config = config.to_string_lossy().to_string();
    let mut broker = Broker::start(RILL, dir.path(), &["--cores", "2", "--config", &config]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for i in 0..8 {
        runtime.block_on(rill_tests::kafka::create_topic(
            &broker.bootstrap(),
            &format!("snap-{i}"),
            1 + i % 3,
            &[],
        ));
    }
    let before = topics_of(&broker.bootstrap());
    assert_eq!(before.len(), 8);
    assert!(
        dir.path().join("__cluster_metadata-0/snapshot").is_file(),
        "more records than the interval were applied: the quorum snapshotted"
    );
    broker.stop();
    broker.restart();
    let after = wait_for("the topics back after the restart", SETTLE, || {
        let topics = topics_of(&broker.bootstrap());
        (topics.len() == 8).then_some(topics)
    });
    assert_eq!(after, before);
}

#[test]
fn topics_on_disk_are_adopted_into_a_new_metadata_log() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--cores", "2"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(
        &broker.bootstrap(),
        "older",
        3,
        &[],
    ));
    let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..30)
        .map(|i| (None, format!("v{i}").into_bytes()))
        .collect();
    let producer = rill_tests::kafka::producer(&broker.bootstrap(), &[]);
    runtime.block_on(rill_tests::kafka::produce_all(
        &producer, "older", &records, None,
    ));
    drop(producer);
    broker.stop();
    // As a data dir from before rill kept cluster metadata: partitions only.
    std::fs::remove_dir_all(dir.path().join("__cluster_metadata-0")).expect("remove metadata log");
    broker.restart();
    wait_for(
        "the topic adopted into the new metadata log",
        SETTLE,
        || {
            let quorum = describe_quorum(&broker).ok()?;
            let partition = quorum.topics.first()?.partitions.first()?.clone();
            // Registration, unfencing, the topic and its three partitions.
            (partition.high_watermark >= 6).then_some(())
        },
    );
    assert_eq!(topics_of(&broker.bootstrap()).get("older"), Some(&3));
    let read = rill_tests::kafka::consume_all(
        &broker.bootstrap(),
        "older",
        3,
        30,
        Duration::from_secs(30),
        &[],
    );
    assert_eq!(
        read.len(),
        30,
        "every record of the adopted topic is served"
    );
    // The adopted topic is in the metadata log now: another restart keeps
    // it without adopting anything.
    broker.stop();
    broker.restart();
    assert_eq!(
        wait_for("the adopted topic after another restart", SETTLE, || {
            topics_of(&broker.bootstrap()).get("older").copied()
        }),
        3
    );
}

#[test]
fn a_killed_broker_is_fenced_long_before_its_session_expires() {
    // A session far longer than the test waits: only the controller
    // noticing that the dead broker's port refuses connections can fence
    // it in time.
    let config_dir = data_dir();
    let config = config_dir.path().join("rill.toml");
    std::fs::write(&config, "\"broker.session.timeout.ms\" = 120000\n").expect("config");
    let config = config.to_str().expect("utf-8 path").to_owned();
    let mut cluster = Cluster::start_settled(RILL, 3, &["--config", &config], SETTLE);
    let controller = wait_for("a controller", SETTLE, || {
        let (controller, _) = describe_cluster(cluster.node(1)).ok()?;
        (1..=3).contains(&controller).then_some(controller)
    });
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &cluster.bootstrap(),
        "fast-fence",
        3,
        3,
        &[],
    ));
    let victim = (1..=3)
        .find(|&n| n != controller)
        .expect("a non-controller");
    cluster.node(victim).kill();
    let survivors: Vec<i32> = (1..=3).filter(|&n| n != victim).collect();
    wait_for(
        "the dead broker fenced without waiting 120 s",
        Duration::from_secs(30),
        || {
            let (_, brokers) = describe_cluster(cluster.node(controller)).ok()?;
            (brokers == survivors).then_some(())
        },
    );
    // Its leaderships moved: every partition is led by a survivor.
    let led = wait_for("every partition led by a survivor", SETTLE, || {
        let leaders = leaders(&cluster.node(controller).bootstrap(), "fast-fence");
        leaders
            .iter()
            .all(|(leader, _)| survivors.contains(leader))
            .then_some(leaders)
    });
    assert_eq!(led.len(), 3);
    // Back, it registers again and is listed.
    cluster.node(victim).restart();
    wait_for("the restarted broker listed again", SETTLE, || {
        let (_, brokers) = describe_cluster(cluster.node(controller)).ok()?;
        (brokers == vec![1, 2, 3]).then_some(())
    });
}

#[test]
fn a_broker_only_node_joins_a_running_cluster_and_leads_a_partition() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    cluster.add_broker(RILL, 4, &[]);
    for node in 1..=4 {
        wait_for("every broker to list the broker-only node", SETTLE, || {
            let (_, brokers) = describe_cluster(cluster.node(node)).ok()?;
            (brokers == vec![1, 2, 3, 4]).then_some(())
        });
    }
    let log = cluster.node(4).log();
    assert!(log.contains("broker-only"), "{log}");
    assert!(
        !cluster
            .node(4)
            .data_dir
            .join("__cluster_metadata-0")
            .exists(),
        "an observer keeps no metadata log"
    );
    // It knows the controller and the voters, and is not one of them.
    let (controller, _) = describe_cluster(cluster.node(1)).expect("describe cluster");
    assert!((1..=3).contains(&controller));
    wait_for("the observer to name the controller", SETTLE, || {
        let (seen, _) = describe_cluster(cluster.node(4)).ok()?;
        (seen == controller).then_some(())
    });
    let quorum = describe_quorum(cluster.node(4)).expect("describe quorum");
    let partition = &quorum.topics[0].partitions[0];
    assert_eq!(partition.leader_id.0, controller);
    let mut voters: Vec<i32> = partition
        .current_voters
        .iter()
        .map(|v| v.replica_id.0)
        .collect();
    voters.sort_unstable();
    assert_eq!(voters, vec![1, 2, 3]);

    // A topic placed on it (created through it: its request goes to the
    // active controller), led by it.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        use rdkafka::client::DefaultClientContext;
        let admin: AdminClient<DefaultClientContext> =
            rill_tests::kafka::client_config(&cluster.node(4).bootstrap())
                .create()
                .expect("admin client");
        let assignment: &[&[i32]] = &[&[4, 1, 2]];
        let topic = NewTopic::new("observed", 1, TopicReplication::Variable(assignment));
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        for result in admin
            .create_topics(&[topic], &options)
            .await
            .expect("create_topics request")
        {
            result.expect("topic created");
        }
    });
    for node in 1..=4 {
        let bootstrap = cluster.node(node).bootstrap();
        wait_for("broker 4 to lead the partition", SETTLE, || {
            (leaders(&bootstrap, "observed") == vec![(4, vec![4, 1, 2])]).then_some(())
        });
    }
    let records = |from: usize, count: usize| -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
        (from..from + count)
            .map(|i| (None, format!("observed-{i}").into_bytes()))
            .collect()
    };
    let producer = rill_tests::kafka::producer(&cluster.bootstrap(), &[("acks", "all")]);
    let delivered = runtime.block_on(rill_tests::kafka::produce_all(
        &producer,
        "observed",
        &records(0, 50),
        Some(0),
    ));
    assert_eq!(delivered.len(), 50);
    assert_eq!(delivered.last(), Some(&(0, 49)));
    let consumed = rill_tests::kafka::consume_all(
        &cluster.node(4).bootstrap(),
        "observed",
        1,
        50,
        SETTLE,
        &[],
    );
    let values: Vec<Vec<u8>> = consumed.into_iter().filter_map(|r| r.value).collect();
    assert_eq!(
        values,
        records(0, 50)
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>()
    );

    // Killed, it is fenced and its partition fails over; restarted, it
    // fetches the image again, registers and follows the new leader.
    cluster.node(4).kill();
    wait_for("the killed observer fenced", SETTLE, || {
        let (_, brokers) = describe_cluster(cluster.node(1)).ok()?;
        (brokers == vec![1, 2, 3]).then_some(())
    });
    cluster.node(4).restart();
    for node in 1..=4 {
        wait_for(
            "every broker to list the restarted observer",
            SETTLE,
            || {
                let (_, brokers) = describe_cluster(cluster.node(node)).ok()?;
                (brokers == vec![1, 2, 3, 4]).then_some(())
            },
        );
    }
    let delivered = runtime.block_on(rill_tests::kafka::produce_all(
        &producer,
        "observed",
        &records(50, 50),
        Some(0),
    ));
    assert_eq!(delivered.last(), Some(&(0, 99)));
    let bootstrap = cluster.node(1).bootstrap();
    wait_for("the restarted observer back in the ISR", SETTLE, || {
        let consumer: BaseConsumer = rill_tests::kafka::client_config(&bootstrap).create().ok()?;
        let metadata = consumer
            .fetch_metadata(Some("observed"), Duration::from_secs(5))
            .ok()?;
        let isr = metadata
            .topics()
            .first()?
            .partitions()
            .first()?
            .isr()
            .to_vec();
        isr.contains(&4).then_some(())
    });
    let consumed = rill_tests::kafka::consume_all(
        &cluster.node(4).bootstrap(),
        "observed",
        1,
        100,
        SETTLE,
        &[],
    );
    let values: Vec<Vec<u8>> = consumed.into_iter().filter_map(|r| r.value).collect();
    assert_eq!(
        values,
        records(0, 100)
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_broker_only_node_follows_the_quorum_through_a_controller_failover() {
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    cluster.add_broker(RILL, 4, &[]);
    let controller = wait_for(
        "the observer registered and naming the controller",
        SETTLE,
        || {
            let (seen, brokers) = describe_cluster(cluster.node(4)).ok()?;
            (brokers == vec![1, 2, 3, 4] && (1..=3).contains(&seen)).then_some(seen)
        },
    );
    // The observer's voter (it asks the controller) dies: it falls back to
    // the other voters and learns the successor from them.
    cluster.node(controller).kill();
    let survivors: Vec<i32> = (1..=3).filter(|&n| n != controller).collect();
    let mut expected = survivors.clone();
    expected.push(4);
    let successor = wait_for("the observer to name the new controller", SETTLE, || {
        let (seen, brokers) = describe_cluster(cluster.node(4)).ok()?;
        (survivors.contains(&seen) && brokers == expected).then_some(seen)
    });
    // Its requests for the controller reach the successor.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(
        &cluster.node(4).bootstrap(),
        "after-observed-failover",
        2,
        &[],
    ));
    assert_eq!(
        topics_of(&cluster.node(successor).bootstrap()).get("after-observed-failover"),
        Some(&2)
    );
    wait_for("the observer to see the new topic", SETTLE, || {
        let topics = topics_of(&cluster.node(4).bootstrap());
        (topics.get("after-observed-failover") == Some(&2)).then_some(())
    });
}

#[test]
fn producer_ids_are_unique_across_the_brokers_of_a_cluster() {
    use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
    let mut cluster = Cluster::start_settled(RILL, 3, &[], SETTLE);
    let mut ids = Vec::new();
    for round in 0..2 {
        for node in 1..=3 {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            let response: InitProducerIdResponse = wait_for("a producer id", SETTLE, || {
                let response: InitProducerIdResponse = rill_tests::raw::request(
                    cluster.node(node).addr,
                    kafka_protocol::messages::ApiKey::InitProducerId,
                    4,
                    &request,
                )
                .ok()?;
                (response.error_code == 0).then_some(response)
            });
            ids.push((round, node, response.producer_id.0));
        }
    }
    let mut distinct: Vec<i64> = ids.iter().map(|&(_, _, id)| id).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        ids.len(),
        "every InitProducerId got its own id, whichever broker answered: {ids:?}"
    );
}

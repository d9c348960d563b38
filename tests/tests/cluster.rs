//! The metadata quorum with real processes: a single node is a quorum of
//! one; three nodes elect a controller, register, list each other in
//! DescribeCluster and Metadata, and survive the active controller's
//! SIGKILL (another is elected, the dead broker is fenced, and it rejoins
//! when it restarts).

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
    let metadata = rdkafka_metadata(&broker.bootstrap());
    assert!(!metadata.contains(&String::from("__cluster_metadata")));
}

fn rdkafka_metadata(bootstrap: &str) -> Vec<String> {
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
        .map(|t| t.name().to_string())
        .collect()
}

#[test]
fn three_nodes_elect_a_controller_and_survive_its_death() {
    let mut cluster = Cluster::start(RILL, 3, &[]);
    for node in 1..=3 {
        wait_for("every broker to list all three", SETTLE, || {
            let (_, brokers) = describe_cluster(cluster.node(node)).ok()?;
            (brokers == vec![1, 2, 3]).then_some(())
        });
    }
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
    assert!(
        partition
            .current_voters
            .iter()
            .all(|v| v.log_end_offset >= 0),
        "the leader knows every voter's progress: {:?}",
        partition.current_voters
    );

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

    cluster.node(controller).stop_with(libc::SIGKILL);
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
    let broker_only = run(&[
        "--node-id",
        "2",
        "--controller-quorum-voters",
        &voters,
        "--process-roles",
        "broker",
    ]);
    assert_eq!(broker_only.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&broker_only.stderr).contains("process.roles"));
    let not_a_voter = run(&["--node-id", "2", "--controller-quorum-voters", &voters]);
    assert_eq!(not_a_voter.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&not_a_voter.stderr).contains("not a voter"));

    // A data dir made by a single node (quorum {0}) refuses another quorum.
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
        String::from_utf8_lossy(&other_quorum.stderr).contains("changing the voters"),
        "{}",
        String::from_utf8_lossy(&other_quorum.stderr)
    );
}

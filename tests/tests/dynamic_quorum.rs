//! Dynamic quorum (KIP-853, issue #33 point 1): a dead controller is
//! replaced while idempotent acks=all producers keep writing. Three
//! controller-only voters (1, 2, 3) and three broker-only nodes (4, 5, 6):
//! 1. the active controller is SIGKILLed for good;
//! 2. a fresh controller, 7, starts with its own controller listener and
//!    is added by `rill admin quorum add-voter` (it catches up as a
//!    learner from a snapshot, then votes);
//! 3. the dead one is removed by `rill admin quorum remove-voter`;
//! 4. one more of the original voters is killed: the quorum, now the
//!    survivor and 7, still holds 2 of 3;
//! 5. 7 is killed and restarted: its membership is on its disk, and the
//!    quorum comes back.
//!
//! A topic is created after each step (metadata changes work throughout),
//! and every acknowledged record is read back at the end.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rill_tests::cluster::{describe_quorum, wait_for, Cluster};
use rill_tests::kafka::{client_config, create_topic_replicated};
use rill_tests::replicated::{idempotent_producer, produce_numbers, read_numbers};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Elections and catch-up on a loaded two-core machine.
const SETTLE: Duration = Duration::from_secs(60);

const BROKERS: [i32; 3] = [4, 5, 6];
const NEW_CONTROLLER: i32 = 7;

/// The voters and the leader as voter `node` sees them.
fn quorum_of(cluster: &mut Cluster, node: i32) -> Option<(i32, Vec<i32>)> {
    let quorum = describe_quorum(cluster.node(node)).ok()?;
    let partition = quorum.topics.first()?.partitions.first()?;
    let mut voters: Vec<i32> = partition
        .current_voters
        .iter()
        .map(|voter| voter.replica_id.0)
        .collect();
    voters.sort_unstable();
    let leader = partition.leader_id.0;
    (leader > 0).then_some((leader, voters))
}

/// `rill admin quorum ARGS` against `bootstrap`; its stdout.
fn admin_quorum(bootstrap: &str, args: &[&str]) -> String {
    let output = Command::new(RILL)
        .args(["admin", "--brokers", bootstrap, "--timeout-ms", "45000"])
        .arg("quorum")
        .args(args)
        .output()
        .expect("rill admin runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "rill admin quorum {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// What the background producer saw: the acknowledged numbers and the
/// longest time one batch of [`BATCH`] took (a bound on the longest stall).
type Produced = (Vec<u32>, Duration);

/// Records per timed batch of [`keep_producing`].
const BATCH: u32 = 5;

/// Produces batches of numbers to `held` until `stop`, one record at a
/// time (each waits for its acknowledgement).
fn keep_producing(bootstrap: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Produced> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let producer = idempotent_producer(&bootstrap);
        let (mut acknowledged, mut longest) = (Vec::new(), Duration::ZERO);
        let mut next = 0u32;
        while !stop.load(Ordering::Acquire) {
            let started = Instant::now();
            let batch = runtime.block_on(produce_numbers(&producer, "held", next..next + BATCH));
            longest = longest.max(started.elapsed());
            acknowledged.extend(batch);
            next += BATCH;
        }
        (acknowledged, longest)
    })
}

#[test]
fn a_dead_controller_is_replaced_under_load_and_the_new_quorum_outlives_one_more_loss() {
    let (mut cluster, bootstrap) = Cluster::controllers_and_brokers(RILL, &BROKERS);
    // Metadata lists the other brokers once they are unfenced (and the
    // answering one always): placement needs all 3 live.
    for id in BROKERS {
        let single = cluster.node(id).bootstrap();
        let consumer: BaseConsumer = client_config(&single).create().expect("a client");
        wait_for(
            &format!("broker {id} to list 3 live brokers"),
            SETTLE,
            || {
                let metadata = consumer.fetch_metadata(None, Duration::from_secs(5)).ok()?;
                (metadata.brokers().len() == BROKERS.len()).then_some(())
            },
        );
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let min_isr = [("min.insync.replicas", "2")];
    runtime.block_on(create_topic_replicated(&bootstrap, "held", 1, 3, &min_isr));
    let stop = Arc::new(AtomicBool::new(false));
    let producing = keep_producing(bootstrap.clone(), stop.clone());

    // 1. The active controller dies for good.
    let (dead, _) = wait_for("an active controller", SETTLE, || {
        quorum_of(&mut cluster, 1)
    });
    cluster.node(dead).kill();
    let survivors: Vec<i32> = (1..=3).filter(|&id| id != dead).collect();
    wait_for("a new active controller", SETTLE, || {
        quorum_of(&mut cluster, survivors[0]).filter(|(leader, _)| *leader != dead)
    });
    runtime.block_on(create_topic_replicated(
        &bootstrap,
        "after-loss",
        1,
        3,
        &min_isr,
    ));

    // 2. A fresh controller joins, and votes once caught up.
    let endpoint = cluster.add_controller(RILL, NEW_CONTROLLER);
    let id = NEW_CONTROLLER.to_string();
    let adding = Instant::now();
    admin_quorum(
        &bootstrap,
        &["add-voter", "--id", &id, "--endpoint", &endpoint],
    );
    let add_took = adding.elapsed();
    wait_for("4 voters after add-voter", SETTLE, || {
        quorum_of(&mut cluster, NEW_CONTROLLER)
            .filter(|(_, voters)| voters == &[1, 2, 3, NEW_CONTROLLER])
    });
    runtime.block_on(create_topic_replicated(
        &bootstrap,
        "after-add",
        1,
        3,
        &min_isr,
    ));

    // 3. The dead one gives up its place.
    let removing = Instant::now();
    admin_quorum(&bootstrap, &["remove-voter", "--id", &dead.to_string()]);
    let remove_took = removing.elapsed();
    let expected = [survivors[0], survivors[1], NEW_CONTROLLER];
    for node in [survivors[0], survivors[1], NEW_CONTROLLER] {
        wait_for(
            &format!("node {node} to see the new voters"),
            SETTLE,
            || quorum_of(&mut cluster, node).filter(|(_, voters)| voters == &expected),
        );
    }
    let described = admin_quorum(&bootstrap, &["describe", "--format", "json"]);
    assert!(described.contains(&endpoint), "{described}");
    runtime.block_on(create_topic_replicated(
        &bootstrap,
        "after-remove",
        1,
        3,
        &min_isr,
    ));

    // 4. One more original voter dies: 2 of the 3 voters remain.
    cluster.node(survivors[0]).kill();
    wait_for("a leader of the 2 remaining voters", SETTLE, || {
        quorum_of(&mut cluster, NEW_CONTROLLER)
            .filter(|(leader, _)| *leader == survivors[1] || *leader == NEW_CONTROLLER)
    });
    runtime.block_on(create_topic_replicated(
        &bootstrap,
        "after-second-loss",
        1,
        3,
        &min_isr,
    ));
    let produced_then = runtime.block_on(produce_numbers(
        &idempotent_producer(&bootstrap),
        "after-second-loss",
        0..20,
    ));
    assert_eq!(
        produced_then.len(),
        20,
        "produce goes on with 2 of 3 voters"
    );

    // The new voter's membership is on its disk: killed and restarted (its
    // config still does not name it), it votes again and the quorum of
    // 2 of 3 comes back.
    cluster.node(NEW_CONTROLLER).kill();
    cluster.node(NEW_CONTROLLER).restart();
    wait_for(
        "the quorum back after the new voter's restart",
        SETTLE,
        || quorum_of(&mut cluster, NEW_CONTROLLER).filter(|(_, voters)| voters == &expected),
    );
    runtime.block_on(create_topic_replicated(
        &bootstrap,
        "after-restart",
        1,
        3,
        &min_isr,
    ));

    stop.store(true, Ordering::Release);
    let (acknowledged, longest_stall) = producing.join().expect("the producer");
    assert!(
        acknowledged.len() >= 100,
        "{} acknowledged",
        acknowledged.len()
    );
    eprintln!(
        "add-voter took {add_took:?}, remove-voter {remove_took:?}; {} records \
         acknowledged, the longest batch of {BATCH} took {longest_stall:?}",
        acknowledged.len()
    );
    let mut read = read_numbers(&bootstrap, "held", acknowledged.len());
    read.sort_unstable();
    read.dedup();
    let lost: Vec<u32> = acknowledged
        .iter()
        .filter(|v| read.binary_search(v).is_err())
        .copied()
        .collect();
    assert!(lost.is_empty(), "acknowledged records lost: {lost:?}");
}

//! Controller-only nodes (issue #33, point 2): three voters with
//! `process.roles=controller` and three broker-only nodes form one
//! cluster. The controllers never register as brokers (DescribeCluster
//! and Metadata list only 4, 5 and 6, and name a broker as the
//! controller, as KRaft does, since clients send admin requests there).
//! Under idempotent acks=all load:
//! - the partition leader is killed: a broker fails over;
//! - the active controller is killed: a controller fails over, and topics
//!   are still created;
//! - the killed broker restarts while the controller moves, and comes
//!   back into the ISR;
//!
//! and every acknowledged record is read back. The brokers learn the
//! metadata as deltas from the controllers.

use rill_tests::cluster::{describe_cluster, describe_quorum, wait_for, Cluster};
use rill_tests::kafka::create_topic_replicated;
use rill_tests::replicated::{idempotent_producer, partition_view, produce_numbers, read_numbers};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// Elections and session expiries on a loaded two-core machine.
const SETTLE: Duration = Duration::from_secs(60);

const BROKERS: [i32; 3] = [4, 5, 6];

/// The quorum's leader as voter `node` sees it.
fn active_controller(cluster: &mut Cluster, node: i32) -> Option<i32> {
    let quorum = describe_quorum(cluster.node(node)).ok()?;
    let leader = quorum.topics.first()?.partitions.first()?.leader_id.0;
    (leader > 0).then_some(leader)
}

/// Waits until `node` lists exactly `live` as its brokers.
fn wait_brokers(cluster: &mut Cluster, node: i32, live: &[i32]) {
    wait_for(
        &format!("node {node} to list brokers {live:?}"),
        SETTLE,
        || {
            let (controller_id, brokers) = describe_cluster(cluster.node(node)).ok()?;
            (brokers == live && live.contains(&controller_id)).then_some(())
        },
    );
}

#[test]
fn controller_only_voters_and_broker_only_nodes_fail_over_and_lose_nothing() {
    let (mut cluster, bootstrap) = Cluster::controllers_and_brokers(RILL, &BROKERS);
    // Controllers and brokers alike list the three brokers only.
    wait_brokers(&mut cluster, 1, &BROKERS);
    wait_brokers(&mut cluster, 4, &BROKERS);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let min_isr = [("min.insync.replicas", "2")];
    runtime.block_on(create_topic_replicated(&bootstrap, "held", 1, 3, &min_isr));
    let producer = idempotent_producer(&bootstrap);
    let mut acknowledged = runtime.block_on(produce_numbers(&producer, "held", 0..200));

    // A broker fails over.
    let leader = wait_for("a leader", SETTLE, || {
        partition_view(&bootstrap, "held").map(|view| view.leader)
    });
    assert!(BROKERS.contains(&leader), "leader {leader}");
    cluster.node(leader).kill();
    acknowledged.extend(runtime.block_on(produce_numbers(&producer, "held", 200..400)));

    // A controller fails over, and the killed broker restarts meanwhile.
    let controller = wait_for("an active controller", SETTLE, || {
        active_controller(&mut cluster, 1)
    });
    assert!((1..=3).contains(&controller), "controller {controller}");
    cluster.node(controller).kill();
    cluster.node(leader).restart();
    let survivor = if controller == 1 { 2 } else { 1 };
    let next = wait_for("a new active controller", SETTLE, || {
        active_controller(&mut cluster, survivor).filter(|&id| id != controller)
    });
    assert!((1..=3).contains(&next));
    acknowledged.extend(runtime.block_on(produce_numbers(&producer, "held", 400..600)));
    // The restarted broker registers with the new controller (asked of a
    // controller: a broker lists itself even before it is live), and
    // metadata changes go on.
    wait_brokers(&mut cluster, next, &BROKERS);
    runtime.block_on(create_topic_replicated(&bootstrap, "after", 2, 3, &min_isr));
    wait_for("the restarted broker back in the ISR", SETTLE, || {
        let view = partition_view(&bootstrap, "held")?;
        (view.isr == BROKERS.to_vec()).then_some(())
    });

    // The brokers learned the metadata as deltas (the records since their
    // offset), not as the whole image at every change.
    for id in BROKERS {
        let deltas = cluster
            .node(id)
            .metric_sum("rill_metadata_deltas_fetched_total");
        let images = cluster
            .node(id)
            .metric_sum("rill_metadata_images_fetched_total");
        assert!(
            deltas > 0,
            "broker {id} took no metadata delta ({images} images)"
        );
    }
    assert_eq!(acknowledged.len(), 600, "every record acknowledged");
    let mut read = read_numbers(&bootstrap, "held", acknowledged.len());
    read.sort_unstable();
    read.dedup();
    let missing: Vec<u32> = acknowledged
        .iter()
        .filter(|v| read.binary_search(v).is_err())
        .copied()
        .collect();
    assert!(missing.is_empty(), "acknowledged records lost: {missing:?}");
}

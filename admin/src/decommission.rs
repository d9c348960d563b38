//! `rill admin decommission <broker-id>`: retire a broker for good, as
//! rpk's `redpanda admin brokers decommission` does. Every replica the
//! broker holds is reassigned to the other live brokers
//! (AlterPartitionReassignments) and the tool waits until those moves are
//! done (ListPartitionReassignments); then, once the broker is stopped, it
//! unregisters it (UnregisterBroker, as `kafka-cluster.sh unregister` sends
//! it). A running broker would register again at its next heartbeat, so
//! a broker still running after its moves is left registered, with a word
//! to stop it and run the command again.

use crate::client::Admin;
use crate::error::{check, status, AdminError, Result};
use crate::output::{id_list, Report, Table};
use bench_harness::kafka::client::topic_name;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, UnregisterBrokerRequest,
};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// How often the tool asks whether the moves are done.
const POLL_INTERVAL_MS: u64 = 500;

/// `rill admin decommission`.
#[derive(Debug, clap::Args)]
pub struct DecommissionArgs {
    /// The broker to retire.
    pub broker_id: i32,
    /// Only unregister it: its replicas stay in their partitions' lists,
    /// offline, until reassigned.
    #[arg(long)]
    pub skip_reassign: bool,
    /// How long to wait for the moves before giving up (the broker is then
    /// left registered).
    #[arg(long, default_value_t = 600_000)]
    pub wait_ms: u64,
}

/// One partition's move: topic, partition, replicas before and after.
pub type Move = (String, i32, Vec<i32>, Vec<i32>);

/// The moves that take every replica off `leaving`: each partition that
/// names it gets, in its place, the other live broker holding the fewest
/// replicas (lowest id on a tie) not yet in its list; where none is left
/// the partition keeps one replica fewer. A partition whose only replica
/// is `leaving`, with no broker to take it, is an error: nothing is moved.
pub fn plan_moves(
    partitions: &[(String, i32, Vec<i32>)],
    live_brokers: &[i32],
    leaving: i32,
) -> Result<Vec<Move>> {
    let mut load: BTreeMap<i32, usize> = live_brokers
        .iter()
        .filter(|b| **b != leaving)
        .map(|b| (*b, 0))
        .collect();
    for (_, _, replicas) in partitions {
        for replica in replicas {
            if let Some(count) = load.get_mut(replica) {
                *count += 1;
            }
        }
    }
    let mut moves = Vec::new();
    for (topic, partition, replicas) in partitions {
        if !replicas.contains(&leaving) {
            continue;
        }
        let spare = load
            .iter()
            .filter(|(broker, _)| !replicas.contains(broker))
            .min_by_key(|(broker, count)| (**count, **broker))
            .map(|(broker, _)| *broker);
        let after: Vec<i32> = match spare {
            Some(spare) => {
                *load.entry(spare).or_default() += 1;
                let swap = |r: &i32| if *r == leaving { spare } else { *r };
                replicas.iter().map(swap).collect()
            }
            None => replicas.iter().copied().filter(|r| *r != leaving).collect(),
        };
        if after.is_empty() {
            return Err(AdminError::Refused(format!(
                "{topic}-{partition} has no replica but broker {leaving} and no other broker to take it"
            )));
        }
        moves.push((topic.clone(), *partition, replicas.clone(), after));
    }
    Ok(moves)
}

/// Runs `decommission`: the moves first, while the broker still runs (its
/// replicas stay in sync while the new ones catch up); the unregistering
/// once it is stopped (a running broker would register again at its next
/// heartbeat), which a second run does when the first found it running.
pub async fn run(admin: &mut Admin, args: DecommissionArgs) -> Result<Report> {
    let moves = if args.skip_reassign {
        Vec::new()
    } else {
        let moves = planned(admin, args.broker_id).await?;
        start_moves(admin, &moves).await?;
        wait_for_moves(admin, &moves, Duration::from_millis(args.wait_ms)).await?;
        moves
    };
    // Metadata lists live brokers only: a stopped one has dropped out.
    let metadata = admin.metadata(Some(&[])).await?;
    let running = metadata
        .brokers
        .iter()
        .any(|b| b.node_id.0 == args.broker_id);
    if !running {
        let request = UnregisterBrokerRequest::default().with_broker_id(BrokerId(args.broker_id));
        let answer = admin.call_any(&request).await?;
        check(
            answer.error_code,
            answer.error_message.as_deref(),
            format!("unregister broker {}", args.broker_id),
        )?;
    }
    Ok(decommission_report(args.broker_id, running, &moves))
}

fn decommission_report(broker_id: i32, running: bool, moves: &[Move]) -> Report {
    let mut summary = Table::new(&["BROKER", "STATUS"]);
    let status = if running {
        "replicas moved; still running: stop it, then run decommission again to unregister it"
    } else {
        "unregistered"
    };
    summary.row(vec![broker_id.to_string(), status.to_string()]);
    let mut table =
        Table::new(&["TOPIC", "PARTITION", "REPLICAS-BEFORE", "REPLICAS-AFTER"]).titled("MOVES");
    for (topic, partition, before, after) in moves {
        table.row(vec![
            topic.clone(),
            partition.to_string(),
            id_list(before),
            id_list(after),
        ]);
    }
    let json = json!({
        "broker_id": broker_id,
        "running": running,
        "unregistered": !running,
        "moves": moves.iter().map(|(topic, partition, before, after)| json!({
            "topic": topic, "partition": partition, "before": before, "after": after,
        })).collect::<Vec<_>>(),
    });
    Report {
        tables: vec![summary, table],
        json,
        failures: Vec::new(),
    }
}

/// Every partition's replicas and the live brokers, from Metadata, and
/// the moves off `leaving`.
async fn planned(admin: &Admin, leaving: i32) -> Result<Vec<Move>> {
    let metadata = admin.metadata(None).await?;
    let live: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
    let mut partitions = Vec::new();
    for topic in &metadata.topics {
        let name = topic
            .name
            .as_ref()
            .map_or(String::new(), |n| n.0.to_string());
        for p in &topic.partitions {
            let replicas = p.replica_nodes.iter().map(|b| b.0).collect();
            partitions.push((name.clone(), p.partition_index, replicas));
        }
    }
    partitions.sort();
    plan_moves(&partitions, &live, leaving)
}

async fn start_moves(admin: &mut Admin, moves: &[Move]) -> Result<()> {
    if moves.is_empty() {
        return Ok(());
    }
    let mut by_topic: HashMap<&str, Vec<ReassignablePartition>> = HashMap::new();
    for (topic, partition, _, after) in moves {
        by_topic.entry(topic).or_default().push(
            ReassignablePartition::default()
                .with_partition_index(*partition)
                .with_replicas(Some(after.iter().copied().map(BrokerId).collect())),
        );
    }
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_allow_replication_factor_change(true)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    ReassignableTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let answer = admin.call_controller(&request).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        "AlterPartitionReassignments",
    )?;
    for topic in &answer.responses {
        for result in &topic.partitions {
            if result.error_code != 0 {
                let why = status(result.error_code, result.error_message.as_deref());
                return Err(AdminError::Partial(format!(
                    "move {}-{}: {why}; the broker stays registered",
                    topic.name.0, result.partition_index
                )));
            }
        }
    }
    Ok(())
}

async fn wait_for_moves(admin: &mut Admin, moves: &[Move], wait: Duration) -> Result<()> {
    let deadline = Instant::now() + wait;
    while !moves.is_empty() {
        let answer = crate::reassign::ongoing_reassignments(admin, None).await?;
        let ongoing = answer.topics.iter().any(|t| {
            t.partitions.iter().any(|p| {
                moves.iter().any(|(topic, partition, _, _)| {
                    t.name.0.as_str() == topic && p.partition_index == *partition
                })
            })
        });
        if !ongoing {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(AdminError::Timeout(format!(
                "the moves were still running after {} ms (see `rill admin reassign list`); the broker stays registered",
                wait.as_millis()
            )));
        }
        tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(topic: &str, index: i32, replicas: &[i32]) -> (String, i32, Vec<i32>) {
        (topic.to_string(), index, replicas.to_vec())
    }

    #[test]
    fn replicas_move_to_the_least_loaded_broker_not_in_the_list() {
        let partitions = [
            partition("a", 0, &[3, 1]),
            partition("a", 1, &[1, 2]),
            partition("b", 0, &[2, 3]),
            partition("b", 1, &[3]),
        ];
        let moves = plan_moves(&partitions, &[1, 2, 3, 4], 3).unwrap();
        assert_eq!(
            moves,
            vec![
                // 4 holds nothing: it takes the first, keeping the order.
                ("a".into(), 0, vec![3, 1], vec![4, 1]),
                // 4 now holds one, 1 holds two: 4 again (2 is excluded).
                ("b".into(), 0, vec![2, 3], vec![2, 4]),
                // 1, 2 and 4 hold two each: the lowest id, 1.
                ("b".into(), 1, vec![3], vec![1]),
            ]
        );
    }

    #[test]
    fn without_a_spare_broker_a_partition_keeps_fewer_replicas() {
        let moves = plan_moves(&[partition("a", 0, &[1, 2])], &[1, 2], 2).unwrap();
        assert_eq!(moves, vec![("a".into(), 0, vec![1, 2], vec![1])]);
        let alone = plan_moves(&[partition("a", 0, &[2])], &[2], 2).unwrap_err();
        assert!(alone.to_string().contains("a-0"), "{alone}");
    }
}

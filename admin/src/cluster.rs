//! `rill admin cluster info` (DescribeCluster, or Metadata where a broker
//! lacks it: cluster id, controller, brokers) and `rill admin quorum describe` (DescribeQuorum of the
//! metadata quorum, `__cluster_metadata`-0, as
//! `kafka-metadata-quorum.sh describe --status` shows it).
//! `quorum add-voter` / `remove-voter` are in [`crate::voters`].

use crate::client::Admin;
use crate::error::{check, AdminError, Result};
use crate::output::{Report, Table};
use bench_harness::kafka::client::topic_name;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response::ReplicaState;
use kafka_protocol::messages::{
    DescribeClusterRequest, DescribeQuorumRequest, DescribeQuorumResponse,
};
use serde_json::json;

/// `rill admin cluster ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Cluster id, controller and brokers (DescribeCluster).
    Info,
}

/// `rill admin quorum ...`.
#[derive(Debug, clap::Subcommand)]
pub enum QuorumCommand {
    /// Leader, epoch, high watermark and each voter's progress of the
    /// metadata quorum (DescribeQuorum, asked of its leader).
    Describe,
    /// Make a running controller a voter (AddRaftVoter, KIP-853).
    AddVoter(crate::voters::AddVoterArgs),
    /// Make a voter stop voting (RemoveRaftVoter, KIP-853).
    RemoveVoter {
        /// The voter's `node.id`.
        #[arg(long)]
        id: i32,
    },
}

/// Runs a `cluster` command.
pub async fn run_cluster(admin: &mut Admin, command: ClusterCommand) -> Result<Report> {
    match command {
        ClusterCommand::Info => info(admin).await,
    }
}

/// Runs a `quorum` command.
pub async fn run_quorum(admin: &mut Admin, command: QuorumCommand) -> Result<Report> {
    match command {
        QuorumCommand::Describe => quorum(admin).await,
        QuorumCommand::AddVoter(args) => crate::voters::add_voter(admin, &args).await,
        QuorumCommand::RemoveVoter { id } => crate::voters::remove_voter(admin, id).await,
    }
}

/// The cluster as `cluster info` shows it.
struct ClusterView {
    cluster_id: String,
    controller_id: i32,
    /// id, host, port, rack, fenced.
    brokers: Vec<(i32, String, i32, Option<String>, bool)>,
}

/// DescribeCluster (Kafka 2.8+, rill); Metadata for a broker without it.
async fn cluster_view(admin: &Admin) -> Result<ClusterView> {
    if admin.any().version_of::<DescribeClusterRequest>().is_err() {
        let metadata = admin.metadata(Some(&[])).await?;
        return Ok(ClusterView {
            cluster_id: metadata
                .cluster_id
                .map_or(String::new(), |id| id.to_string()),
            controller_id: metadata.controller_id.0,
            brokers: metadata
                .brokers
                .iter()
                .map(|b| {
                    let rack = b.rack.as_ref().map(|r| r.to_string());
                    (b.node_id.0, b.host.to_string(), b.port, rack, false)
                })
                .collect(),
        });
    }
    let answer = admin.call_any(&DescribeClusterRequest::default()).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        "DescribeCluster",
    )?;
    Ok(ClusterView {
        cluster_id: answer.cluster_id.to_string(),
        controller_id: answer.controller_id.0,
        brokers: answer
            .brokers
            .iter()
            .map(|b| {
                let rack = b.rack.as_ref().map(|r| r.to_string());
                (b.broker_id.0, b.host.to_string(), b.port, rack, b.is_fenced)
            })
            .collect(),
    })
}

async fn info(admin: &mut Admin) -> Result<Report> {
    let mut view = cluster_view(admin).await?;
    view.brokers.sort();
    let mut summary = Table::new(&["CLUSTER-ID", "CONTROLLER"]).titled("CLUSTER");
    summary.row(vec![
        view.cluster_id.clone(),
        view.controller_id.to_string(),
    ]);
    let mut brokers = Table::new(&["ID", "HOST", "PORT", "RACK", "FENCED"]).titled("BROKERS");
    for (id, host, port, rack, fenced) in &view.brokers {
        brokers.row(vec![
            id.to_string(),
            host.clone(),
            port.to_string(),
            rack.as_deref().unwrap_or("-").to_string(),
            fenced.to_string(),
        ]);
    }
    let json = json!({
        "cluster_id": view.cluster_id,
        "controller_id": view.controller_id,
        "brokers": view.brokers.iter().map(|(id, host, port, rack, fenced)| json!({
            "id": id,
            "host": host,
            "port": port,
            "rack": rack,
            "fenced": fenced,
        })).collect::<Vec<_>>(),
    });
    Ok(Report {
        tables: vec![summary, brokers],
        json,
        failures: Vec::new(),
    })
}

/// The metadata quorum's topic (KRaft's name).
const METADATA_TOPIC: &str = "__cluster_metadata";

async fn describe_quorum_at(
    admin: &Admin,
    connection: &bench_harness::kafka::connection::Connection,
) -> Result<DescribeQuorumResponse> {
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(topic_name(METADATA_TOPIC))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let answer = admin.call(connection, &request).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        "DescribeQuorum",
    )?;
    Ok(answer)
}

async fn quorum(admin: &mut Admin) -> Result<Report> {
    let any = admin.any();
    let mut answer = describe_quorum_at(admin, &any).await?;
    // Only the leader knows every voter's progress: ask it when the first
    // broker is not it (keeping the first answer if the leader cannot be
    // reached).
    let leader_id = first_partition(&answer)?.leader_id.0;
    if leader_id >= 0 {
        if let Ok(leader) = admin.broker(leader_id).await {
            if leader.addr() != any.addr() {
                if let Ok(from_leader) = describe_quorum_at(admin, &leader).await {
                    answer = from_leader;
                }
            }
        }
    }
    let partition = first_partition(&answer)?;
    check(
        partition.error_code,
        partition.error_message.as_deref(),
        "DescribeQuorum of __cluster_metadata-0",
    )?;
    let mut summary =
        Table::new(&["LEADER", "EPOCH", "HIGH-WATERMARK", "VOTERS", "OBSERVERS"]).titled("QUORUM");
    summary.row(vec![
        partition.leader_id.0.to_string(),
        partition.leader_epoch.to_string(),
        partition.high_watermark.to_string(),
        partition.current_voters.len().to_string(),
        partition.observers.len().to_string(),
    ]);
    let mut replicas = Table::new(&[
        "NODE",
        "ROLE",
        "LOG-END-OFFSET",
        "LAG",
        "LAST-CAUGHT-UP-MS",
        "ENDPOINT",
    ])
    .titled("REPLICAS");
    let endpoint = |id: i32| {
        let node = answer.nodes.iter().find(|node| node.node_id.0 == id);
        let listener = node.and_then(|node| node.listeners.first());
        listener.map_or_else(String::new, |l| format!("{}:{}", l.host, l.port))
    };
    let roles = [
        ("voter", &partition.current_voters),
        ("observer", &partition.observers),
    ];
    for (role, states) in roles {
        for state in states {
            let is_leader = state.replica_id == partition.leader_id && role == "voter";
            replicas.row(vec![
                state.replica_id.0.to_string(),
                String::from(if is_leader { "leader" } else { role }),
                state.log_end_offset.to_string(),
                lag(partition.high_watermark, state).to_string(),
                state.last_caught_up_timestamp.to_string(),
                endpoint(state.replica_id.0),
            ]);
        }
    }
    let json = json!({
        "leader_id": partition.leader_id.0,
        "leader_epoch": partition.leader_epoch,
        "high_watermark": partition.high_watermark,
        "voters": partition.current_voters.iter().map(|s| replica_json(partition.high_watermark, s)).collect::<Vec<_>>(),
        "observers": partition.observers.iter().map(|s| replica_json(partition.high_watermark, s)).collect::<Vec<_>>(),
        "endpoints": answer.nodes.iter().map(|n| json!({ "node_id": n.node_id.0, "endpoint": endpoint(n.node_id.0) })).collect::<Vec<_>>(),
    });
    Ok(Report {
        tables: vec![summary, replicas],
        json,
        failures: Vec::new(),
    })
}

fn first_partition(
    answer: &DescribeQuorumResponse,
) -> Result<&kafka_protocol::messages::describe_quorum_response::PartitionData> {
    answer
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| AdminError::Answer(String::from("DescribeQuorum named no partition")))
}

/// How far a replica is behind the high watermark; -1 when the answering
/// broker does not know its log end (a follower's view of the others).
fn lag(high_watermark: i64, state: &ReplicaState) -> i64 {
    if state.log_end_offset < 0 {
        -1
    } else {
        (high_watermark - state.log_end_offset).max(0)
    }
}

fn replica_json(high_watermark: i64, state: &ReplicaState) -> serde_json::Value {
    json!({
        "node_id": state.replica_id.0,
        "log_end_offset": state.log_end_offset,
        "lag": lag(high_watermark, state),
        "last_fetch_timestamp": state.last_fetch_timestamp,
        "last_caught_up_timestamp": state.last_caught_up_timestamp,
    })
}

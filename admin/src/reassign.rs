//! `rill admin reassign alter / list` (AlterPartitionReassignments,
//! ListPartitionReassignments, KIP-455) and `rill admin elect-leaders`
//! (ElectLeaders, KIP-460: preferred or unclean).

use crate::client::{codes, Admin};
use crate::error::{check, status, AdminError, Result};
use crate::output::{id_list, Report, Table};
use bench_harness::kafka::client::topic_name;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use serde_json::json;

/// `rill admin reassign ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ReassignCommand {
    /// Move one partition to new replicas, or cancel its move.
    Alter {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partition: i32,
        /// The new replica list, broker ids `1,2,3` (the first is the
        /// preferred leader).
        #[arg(long, value_delimiter = ',', required_unless_present = "cancel")]
        replicas: Vec<i32>,
        /// Cancel the partition's ongoing reassignment instead.
        #[arg(long, conflicts_with = "replicas")]
        cancel: bool,
    },
    /// Ongoing reassignments.
    List {
        /// Only this topic's partitions.
        #[arg(long)]
        topic: Option<String>,
    },
}

/// `rill admin elect-leaders`.
#[derive(Debug, clap::Args)]
pub struct ElectArgs {
    /// `preferred` (the first replica, if in sync) or `unclean` (any live
    /// replica, even out of sync: may lose records).
    #[arg(long = "type", default_value = "preferred")]
    pub election_type: String,
    /// Only this topic (default: every partition of the cluster).
    #[arg(long)]
    pub topic: Option<String>,
    /// Only these partitions of `--topic` (repeatable; default: all).
    #[arg(long = "partition", requires = "topic")]
    pub partitions: Vec<i32>,
}

/// Runs a `reassign` command.
pub async fn run(admin: &mut Admin, command: ReassignCommand) -> Result<Report> {
    match command {
        ReassignCommand::Alter {
            topic,
            partition,
            replicas,
            cancel,
        } => alter(admin, &topic, partition, (!cancel).then_some(replicas)).await,
        ReassignCommand::List { topic } => list(admin, topic).await,
    }
}

async fn alter(
    admin: &mut Admin,
    topic: &str,
    partition: i32,
    replicas: Option<Vec<i32>>,
) -> Result<Report> {
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_allow_replication_factor_change(true)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(partition)
                .with_replicas(
                    replicas
                        .clone()
                        .map(|ids| ids.into_iter().map(BrokerId).collect()),
                )])]);
    let answer = admin.call_controller(&request).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        "AlterPartitionReassignments",
    )?;
    let mut table = Table::new(&["TOPIC", "PARTITION", "REPLICAS", "STATUS"]);
    let mut json = Vec::new();
    let mut failures = Vec::new();
    let target = replicas
        .as_deref()
        .map_or(String::from("(cancel)"), id_list);
    for topic in &answer.responses {
        for result in &topic.partitions {
            let status = status(result.error_code, result.error_message.as_deref());
            if result.error_code != 0 {
                failures.push(format!(
                    "reassign {}-{}: {status}",
                    topic.name.0, result.partition_index
                ));
            }
            json.push(json!({
                "topic": topic.name.0.as_str(), "partition": result.partition_index,
                "replicas": replicas, "error_code": result.error_code, "status": status,
            }));
            table.row(vec![
                topic.name.0.to_string(),
                result.partition_index.to_string(),
                target.clone(),
                status,
            ]);
        }
    }
    Ok(Report {
        tables: vec![table],
        json: json.into(),
        failures,
    })
}

/// ListPartitionReassignments of `topics` (`None`: every partition),
/// asked of the controller; a refusal is the error.
pub async fn ongoing_reassignments(
    admin: &mut Admin,
    topics: Option<Vec<ListPartitionReassignmentsTopics>>,
) -> Result<ListPartitionReassignmentsResponse> {
    let request = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(topics);
    let answer = admin.call_controller(&request).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        "ListPartitionReassignments",
    )?;
    Ok(answer)
}

async fn list(admin: &mut Admin, topic: Option<String>) -> Result<Report> {
    let topics = match topic {
        None => None,
        Some(name) => {
            let partitions: Vec<i32> = admin
                .leaders(std::slice::from_ref(&name))
                .await?
                .into_values()
                .flatten()
                .map(|(_, p)| p)
                .collect();
            Some(vec![ListPartitionReassignmentsTopics::default()
                .with_name(topic_name(&name))
                .with_partition_indexes(partitions)])
        }
    };
    let answer = ongoing_reassignments(admin, topics).await?;
    let ids = |nodes: &[BrokerId]| nodes.iter().map(|b| b.0).collect::<Vec<i32>>();
    let mut rows = Vec::new();
    for topic in &answer.topics {
        for p in &topic.partitions {
            rows.push((
                topic.name.0.to_string(),
                p.partition_index,
                ids(&p.replicas),
                ids(&p.adding_replicas),
                ids(&p.removing_replicas),
            ));
        }
    }
    rows.sort();
    let mut table = Table::new(&["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"]);
    let mut json = Vec::new();
    for (topic, partition, replicas, adding, removing) in rows {
        table.row(vec![
            topic.clone(),
            partition.to_string(),
            id_list(&replicas),
            id_list(&adding),
            id_list(&removing),
        ]);
        json.push(json!({
            "topic": topic, "partition": partition, "replicas": replicas,
            "adding": adding, "removing": removing,
        }));
    }
    Ok(Report::single(table, json.into()))
}

/// ElectLeaders' election type: 0 preferred, 1 unclean.
fn election_type(name: &str) -> Result<i8> {
    match name.to_ascii_lowercase().as_str() {
        "preferred" => Ok(0),
        "unclean" => Ok(1),
        other => Err(AdminError::Usage(format!(
            "--type {other}: preferred or unclean"
        ))),
    }
}

/// Elects leaders; a partition whose leader is already the one the
/// election would pick reads `not needed`, which is no failure (as in
/// `kafka-leader-election.sh`).
pub async fn elect_leaders(admin: &mut Admin, args: ElectArgs) -> Result<Report> {
    let election = election_type(&args.election_type)?;
    let topic_partitions = match &args.topic {
        None => None,
        Some(topic) => {
            let partitions = if args.partitions.is_empty() {
                admin
                    .leaders(std::slice::from_ref(topic))
                    .await?
                    .into_values()
                    .flatten()
                    .map(|(_, p)| p)
                    .collect()
            } else {
                args.partitions.clone()
            };
            Some(vec![TopicPartitions::default()
                .with_topic(topic_name(topic))
                .with_partitions(partitions)])
        }
    };
    let request = ElectLeadersRequest::default()
        .with_election_type(election)
        .with_topic_partitions(topic_partitions)
        .with_timeout_ms(30_000);
    let answer = admin.call_controller(&request).await?;
    check(answer.error_code, None, "ElectLeaders")?;
    let mut rows = Vec::new();
    for topic in &answer.replica_election_results {
        for result in &topic.partition_result {
            rows.push((
                topic.topic.0.to_string(),
                result.partition_id,
                result.error_code,
                result.error_message.as_ref().map(|m| m.to_string()),
            ));
        }
    }
    rows.sort();
    let mut table = Table::new(&["TOPIC", "PARTITION", "STATUS"]);
    let mut json = Vec::new();
    let mut failures = Vec::new();
    for (topic, partition, code, message) in rows {
        let status = match code {
            codes::ELECTION_NOT_NEEDED => String::from("not needed"),
            _ => status(code, message.as_deref()),
        };
        if code != 0 && code != codes::ELECTION_NOT_NEEDED {
            failures.push(format!("elect a leader of {topic}-{partition}: {status}"));
        }
        json.push(
            json!({"topic": topic, "partition": partition, "error_code": code, "status": status}),
        );
        table.row(vec![topic, partition.to_string(), status]);
    }
    Ok(Report {
        tables: vec![table],
        json: json.into(),
        failures,
    })
}

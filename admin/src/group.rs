//! `rill admin group list / describe / reset-offsets / delete` (ListGroups
//! at every broker, DescribeGroups, OffsetFetch and OffsetCommit at the
//! group's coordinator, ListOffsets at each leader, DeleteGroups).
//! A KIP-848 group, which DescribeGroups does not describe
//! (GROUP_ID_NOT_FOUND), is described by ConsumerGroupDescribe, as Kafka's
//! admin client does.

use crate::client::Admin;
use crate::error::{check, status, AdminError, Result};
use crate::output::{Report, Table};
use bench_harness::kafka::client::{topic_name, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup as Kip848Group;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, DeleteGroupsRequest, DescribeGroupsRequest, GroupId,
    ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// `rill admin group ...`.
#[derive(Debug, clap::Subcommand)]
pub enum GroupCommand {
    /// Every group of every broker.
    List,
    /// A group's state, members, committed offsets and lag.
    Describe { group: String },
    /// Move an empty group's committed offsets (as
    /// `kafka-consumer-groups.sh --reset-offsets --execute`).
    ResetOffsets(ResetArgs),
    /// Delete groups (they must be empty).
    Delete {
        #[arg(required = true)]
        groups: Vec<String>,
    },
}

/// `group reset-offsets`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("to").required(true).args(["to_earliest", "to_latest", "to_offset"])))]
pub struct ResetArgs {
    pub group: String,
    /// Only these topics (default: every topic the group committed for).
    #[arg(short, long = "topic")]
    pub topics: Vec<String>,
    /// To each partition's log start.
    #[arg(long)]
    pub to_earliest: bool,
    /// To each partition's end (skip everything so far).
    #[arg(long)]
    pub to_latest: bool,
    /// To this offset in every partition.
    #[arg(long)]
    pub to_offset: Option<i64>,
    /// Print the new offsets without committing them.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs a `group` command.
pub async fn run(admin: &mut Admin, command: GroupCommand) -> Result<Report> {
    match command {
        GroupCommand::List => list(admin).await,
        GroupCommand::Describe { group } => describe(admin, &group).await,
        GroupCommand::ResetOffsets(args) => reset_offsets(admin, args).await,
        GroupCommand::Delete { groups } => delete(admin, &groups).await,
    }
}

fn group_id(name: &str) -> GroupId {
    GroupId(StrBytes::from_string(name.to_string()))
}

/// Groups live at their coordinators: every broker is asked.
async fn list(admin: &mut Admin) -> Result<Report> {
    let brokers: Vec<i32> = admin
        .metadata(Some(&[]))
        .await?
        .brokers
        .iter()
        .map(|b| b.node_id.0)
        .collect();
    let mut groups = BTreeMap::new();
    for broker in brokers {
        let connection = admin.broker(broker).await?;
        let answer = admin
            .call(&connection, &ListGroupsRequest::default())
            .await?;
        check(
            answer.error_code,
            None,
            format!("ListGroups at broker {broker}"),
        )?;
        for group in answer.groups {
            groups.insert(
                group.group_id.0.to_string(),
                (
                    group.protocol_type.to_string(),
                    group.group_state.to_string(),
                    broker,
                ),
            );
        }
    }
    let mut table = Table::new(&["GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"]);
    let mut json = Vec::new();
    for (group, (protocol_type, state, broker)) in groups {
        json.push(json!({
            "group": group, "state": state, "protocol_type": protocol_type, "coordinator": broker,
        }));
        table.row(vec![group, state, protocol_type, broker.to_string()]);
    }
    Ok(Report::single(table, json.into()))
}

/// DescribeGroups' `GROUP_ID_NOT_FOUND`: the group is not a classic one.
const GROUP_ID_NOT_FOUND: i16 = 69;

/// A group as `describe` shows it, classic or KIP-848.
struct GroupView {
    /// `classic` or `consumer`.
    group_type: &'static str,
    state: String,
    protocol_type: String,
    /// The classic group's protocol, or the KIP-848 group's assignor.
    protocol: String,
    /// (member id, instance id, client id, host, `classic` or `consumer`).
    members: Vec<[String; 5]>,
}

impl GroupView {
    fn classic(g: DescribedGroup) -> GroupView {
        let members = (g.members.iter())
            .map(|m| {
                let instance = m.group_instance_id.as_deref().unwrap_or("-");
                let (id, client, host) = (&m.member_id, &m.client_id, &m.client_host);
                [id, instance, client, host, "classic"].map(|f| f.to_string())
            })
            .collect();
        GroupView {
            group_type: "classic",
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            protocol: g.protocol_data.to_string(),
            members,
        }
    }

    fn kip848(g: Kip848Group) -> GroupView {
        let members = (g.members.iter())
            .map(|m| {
                let instance = m.instance_id.as_deref().unwrap_or("-");
                // member_type (v1): 0 a classic member the group hosts.
                let kind = if m.member_type == 0 {
                    "classic"
                } else {
                    "consumer"
                };
                let (id, client, host) = (&m.member_id, &m.client_id, &m.client_host);
                [id, instance, client, host, kind].map(|f| f.to_string())
            })
            .collect();
        GroupView {
            group_type: "consumer",
            state: g.group_state.to_string(),
            protocol_type: String::from("consumer"),
            protocol: g.assignor_name.to_string(),
            members,
        }
    }
}

async fn describe_group(admin: &mut Admin, group: &str) -> Result<GroupView> {
    let coordinator = admin.coordinator(group).await?;
    let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
    let answer = admin.call(&coordinator, &request).await?;
    let described = answer
        .groups
        .into_iter()
        .next()
        .ok_or_else(|| AdminError::Answer(String::from("DescribeGroups named no group")))?;
    if described.error_code == GROUP_ID_NOT_FOUND {
        let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id(group)]);
        let answer = admin.call(&coordinator, &request).await?;
        let described = (answer.groups.into_iter().next()).ok_or_else(|| {
            AdminError::Answer(String::from("ConsumerGroupDescribe named no group"))
        })?;
        check(
            described.error_code,
            described.error_message.as_deref(),
            format!("describe group {group}"),
        )?;
        return Ok(GroupView::kip848(described));
    }
    check(
        described.error_code,
        described.error_message.as_deref(),
        format!("describe group {group}"),
    )?;
    Ok(GroupView::classic(described))
}

/// The group's committed offsets, by topic and partition.
async fn committed(admin: &mut Admin, group: &str) -> Result<BTreeMap<(String, i32), i64>> {
    let coordinator = admin.coordinator(group).await?;
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(None);
    let answer = admin.call(&coordinator, &request).await?;
    check(
        answer.error_code,
        None,
        format!("committed offsets of group {group}"),
    )?;
    let mut offsets = BTreeMap::new();
    for topic in answer.topics {
        for partition in topic.partitions {
            check(
                partition.error_code,
                None,
                format!(
                    "committed offset of {}-{}",
                    topic.name.0, partition.partition_index
                ),
            )?;
            if partition.committed_offset >= 0 {
                offsets.insert(
                    (topic.name.0.to_string(), partition.partition_index),
                    partition.committed_offset,
                );
            }
        }
    }
    Ok(offsets)
}

fn topics_of(offsets: &BTreeMap<(String, i32), i64>) -> Vec<String> {
    let topics: BTreeSet<&String> = offsets.keys().map(|(t, _)| t).collect();
    topics.into_iter().cloned().collect()
}

/// Committed offset, log end and lag of each partition.
fn offsets_table(
    committed: &BTreeMap<(String, i32), i64>,
    ends: &HashMap<(String, i32), i64>,
) -> (Table, Vec<serde_json::Value>) {
    let mut table = Table::new(&[
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
    ])
    .titled("OFFSETS");
    let mut json = Vec::new();
    for ((topic, partition), offset) in committed {
        let end = ends.get(&(topic.clone(), *partition)).copied();
        let lag = end.map(|end| (end - offset).max(0));
        table.row(vec![
            topic.clone(),
            partition.to_string(),
            offset.to_string(),
            end.map_or(String::from("-"), |e| e.to_string()),
            lag.map_or(String::from("-"), |l| l.to_string()),
        ]);
        json.push(json!({
            "topic": topic, "partition": partition, "committed_offset": offset,
            "log_end_offset": end, "lag": lag,
        }));
    }
    (table, json)
}

async fn describe(admin: &mut Admin, group: &str) -> Result<Report> {
    let described = describe_group(admin, group).await?;
    let committed = committed(admin, group).await?;
    // A coordinator describes a group it does not know as Dead.
    if described.state == "Dead" && committed.is_empty() {
        return Err(AdminError::NotFound(format!(
            "group {group} does not exist"
        )));
    }
    let ends = admin
        .offsets(&topics_of(&committed), LATEST_TIMESTAMP)
        .await?;
    let mut summary = Table::new(&[
        "GROUP",
        "TYPE",
        "STATE",
        "PROTOCOL-TYPE",
        "PROTOCOL",
        "MEMBERS",
    ])
    .titled("GROUP");
    summary.row(vec![
        group.to_string(),
        described.group_type.to_string(),
        described.state.clone(),
        described.protocol_type.clone(),
        described.protocol.clone(),
        described.members.len().to_string(),
    ]);
    let mut members = Table::new(&["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "PROTOCOL"])
        .titled("MEMBERS");
    for member in &described.members {
        members.row(member.to_vec());
    }
    let (offsets, offsets_json) = offsets_table(&committed, &ends);
    let json = json!({
        "group": group,
        "type": described.group_type,
        "state": described.state,
        "protocol_type": described.protocol_type,
        "protocol": described.protocol,
        "members": described.members.iter().map(|[id, instance, client, host, protocol]| json!({
            "member_id": id,
            "instance_id": (instance != "-").then_some(instance),
            "client_id": client,
            "host": host,
            "protocol": protocol,
        })).collect::<Vec<_>>(),
        "offsets": offsets_json,
    });
    Ok(Report {
        tables: vec![summary, members, offsets],
        json,
        failures: Vec::new(),
    })
}

/// The offsets a reset moves each partition to.
async fn reset_targets(
    admin: &mut Admin,
    args: &ResetArgs,
    topics: &[String],
) -> Result<BTreeMap<(String, i32), i64>> {
    let timestamp = if args.to_earliest {
        EARLIEST_TIMESTAMP
    } else {
        LATEST_TIMESTAMP
    };
    let found = admin.offsets(topics, timestamp).await?;
    let targets = match args.to_offset {
        // As Kafka's tool: an offset past either end is clamped to it.
        Some(offset) => {
            let starts = admin.offsets(topics, EARLIEST_TIMESTAMP).await?;
            found
                .into_iter()
                .map(|(key, end)| {
                    let start = starts.get(&key).copied().unwrap_or(0);
                    (key, offset.clamp(start, end.max(start)))
                })
                .collect()
        }
        None => found.into_iter().collect(),
    };
    Ok(targets)
}

async fn reset_offsets(admin: &mut Admin, args: ResetArgs) -> Result<Report> {
    let described = describe_group(admin, &args.group).await?;
    let state = described.state.as_str();
    if !described.members.is_empty() || !(state == "Empty" || state == "Dead") {
        return Err(AdminError::Refused(format!(
            "group {} is {state} with {} member(s): offsets can be reset only for an empty group (stop its consumers first)",
            args.group,
            described.members.len()
        )));
    }
    let before = committed(admin, &args.group).await?;
    let topics = if args.topics.is_empty() {
        topics_of(&before)
    } else {
        args.topics.clone()
    };
    if topics.is_empty() {
        return Err(AdminError::Usage(format!(
            "group {} has no committed offsets: name the topics with --topic",
            args.group
        )));
    }
    let targets = reset_targets(admin, &args, &topics).await?;
    let mut failures = Vec::new();
    if !args.dry_run {
        failures = commit(admin, &args.group, &targets).await?;
    }
    let mut table = Table::new(&["TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET"]);
    let mut json = Vec::new();
    for ((topic, partition), offset) in &targets {
        let old = before.get(&(topic.clone(), *partition)).copied();
        table.row(vec![
            topic.clone(),
            partition.to_string(),
            old.map_or(String::from("-"), |o| o.to_string()),
            offset.to_string(),
        ]);
        json.push(json!({"topic": topic, "partition": partition, "old_offset": old, "new_offset": offset}));
    }
    Ok(Report {
        tables: vec![table],
        json: json!({"group": args.group, "dry_run": args.dry_run, "offsets": json}),
        failures,
    })
}

/// OffsetCommit outside any generation (generation -1, no member id),
/// which a coordinator accepts for an empty group; the failures, if any.
async fn commit(
    admin: &mut Admin,
    group: &str,
    targets: &BTreeMap<(String, i32), i64>,
) -> Result<Vec<String>> {
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, partition), offset) in targets {
        by_topic.entry(topic).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
                .with_committed_leader_epoch(-1),
        );
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_retention_time_ms(-1)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let coordinator = admin.coordinator(group).await?;
    let answer = admin.call(&coordinator, &request).await?;
    let mut failures = Vec::new();
    for topic in &answer.topics {
        for partition in &topic.partitions {
            if partition.error_code != 0 {
                failures.push(format!(
                    "commit {}-{} for group {group}: {}",
                    topic.name.0,
                    partition.partition_index,
                    status(partition.error_code, None)
                ));
            }
        }
    }
    Ok(failures)
}

async fn delete(admin: &mut Admin, groups: &[String]) -> Result<Report> {
    let mut table = Table::new(&["GROUP", "STATUS"]);
    let mut json = Vec::new();
    let mut failures = Vec::new();
    for group in groups {
        let coordinator = admin.coordinator(group).await?;
        let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]);
        let answer = admin.call(&coordinator, &request).await?;
        for result in answer.results {
            let status = status(result.error_code, None);
            if result.error_code != 0 {
                failures.push(format!("delete group {}: {status}", result.group_id.0));
            }
            json.push(json!({"group": result.group_id.0.as_str(), "error_code": result.error_code, "status": status}));
            table.row(vec![result.group_id.0.to_string(), status]);
        }
    }
    Ok(Report {
        tables: vec![table],
        json: json.into(),
        failures,
    })
}

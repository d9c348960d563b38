//! `rill admin topic create / list / describe / alter-config /
//! add-partitions / delete` (CreateTopics, Metadata and ListOffsets,
//! DescribeConfigs, IncrementalAlterConfigs, CreatePartitions,
//! DeleteTopics); `produce` and `consume` are [`crate::records`]'s.

use crate::client::{codes, key_value, Admin};
use crate::error::{check, status, AdminError, Result};
use crate::output::{id_list, Report, Table};
use crate::records::{ConsumeArgs, ProduceArgs};
use bench_harness::kafka::client::{topic_name, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

/// DescribeConfigs' and IncrementalAlterConfigs' resource type of a topic.
const TOPIC_RESOURCE: i8 = 2;
/// IncrementalAlterConfigs operations.
const SET: i8 = 0;
const DELETE: i8 = 1;

/// `rill admin topic ...`.
#[derive(Debug, clap::Subcommand)]
pub enum TopicCommand {
    /// Create topics.
    Create {
        /// Topic names.
        #[arg(required = true)]
        topics: Vec<String>,
        /// Partitions of each (-1: the broker's `num.partitions`).
        #[arg(short, long, default_value_t = 1, allow_negative_numbers = true)]
        partitions: i32,
        /// Replicas of each partition (-1: the broker's
        /// `default.replication.factor`).
        #[arg(short, long, default_value_t = -1, allow_negative_numbers = true)]
        replicas: i16,
        /// A topic config, `key=value` (repeatable).
        #[arg(short, long = "config")]
        configs: Vec<String>,
    },
    /// List topics.
    List {
        /// Also list internal topics (`__consumer_offsets`, ...).
        #[arg(short, long)]
        internal: bool,
    },
    /// Partitions, leaders, replicas and configs of one topic.
    Describe {
        topic: String,
        /// Only the configs set on the topic (not defaults).
        #[arg(long)]
        non_default: bool,
    },
    /// Set or delete topic configs (IncrementalAlterConfigs).
    AlterConfig {
        topic: String,
        /// `key=value` to set (repeatable).
        #[arg(long = "set")]
        set: Vec<String>,
        /// A key to delete, back to its default (repeatable).
        #[arg(long = "delete")]
        delete: Vec<String>,
    },
    /// Add partitions to a topic (CreatePartitions); records keep their
    /// partitions, so keyed records may land elsewhere from now on.
    AddPartitions {
        topic: String,
        /// How many partitions to add.
        #[arg(short, long)]
        num: i32,
    },
    /// Delete topics.
    Delete {
        #[arg(required = true)]
        topics: Vec<String>,
    },
    /// Produce records: `--value`, or one record per line of stdin.
    Produce(ProduceArgs),
    /// Print records of a topic.
    Consume(ConsumeArgs),
}

/// Runs a `topic` command.
pub async fn run(admin: &mut Admin, command: TopicCommand) -> Result<Report> {
    match command {
        TopicCommand::Create {
            topics,
            partitions,
            replicas,
            configs,
        } => create(admin, &topics, partitions, replicas, &configs).await,
        TopicCommand::List { internal } => list(admin, internal).await,
        TopicCommand::Describe { topic, non_default } => describe(admin, &topic, non_default).await,
        TopicCommand::AlterConfig { topic, set, delete } => {
            alter_config(admin, &topic, &set, &delete).await
        }
        TopicCommand::AddPartitions { topic, num } => add_partitions(admin, &topic, num).await,
        TopicCommand::Delete { topics } => delete_topics(admin, &topics).await,
        TopicCommand::Produce(args) => crate::records::produce(admin, args).await,
        TopicCommand::Consume(args) => crate::records::consume(admin, args).await,
    }
}

/// A table of `TOPIC STATUS` rows and its JSON, failures counted.
fn status_report(results: Vec<(String, i16, Option<String>)>, what: &str) -> Report {
    let mut table = Table::new(&["TOPIC", "STATUS"]);
    let mut json = Vec::new();
    let mut failures = Vec::new();
    for (topic, code, message) in results {
        let status = status(code, message.as_deref());
        if code != 0 {
            failures.push(format!("{what} {topic}: {status}"));
        }
        json.push(json!({"topic": topic, "error_code": code, "status": status}));
        table.row(vec![topic, status]);
    }
    Report {
        tables: vec![table],
        json: json.into(),
        failures,
    }
}

async fn create(
    admin: &mut Admin,
    topics: &[String],
    partitions: i32,
    replicas: i16,
    configs: &[String],
) -> Result<Report> {
    let mut creatable_configs = Vec::new();
    for pair in configs {
        let (name, value) = key_value(pair)?;
        creatable_configs.push(
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(name))
                .with_value(Some(StrBytes::from_string(value))),
        );
    }
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            topics
                .iter()
                .map(|name| {
                    CreatableTopic::default()
                        .with_name(topic_name(name))
                        .with_num_partitions(partitions)
                        .with_replication_factor(replicas)
                        .with_configs(creatable_configs.clone())
                })
                .collect(),
        );
    let mut answer = admin.call_any(&request).await?;
    if answer
        .topics
        .iter()
        .any(|t| t.error_code == codes::NOT_CONTROLLER)
    {
        // Kafka before KRaft takes CreateTopics only at the controller.
        answer = admin.call_controller(&request).await?;
    }
    let results = answer
        .topics
        .into_iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.error_code,
                t.error_message.map(|m| m.to_string()),
            )
        })
        .collect();
    Ok(status_report(results, "create topic"))
}

/// `topic` in a Metadata answer; its error (it does not exist) fails.
fn find_topic<'a>(
    metadata: &'a MetadataResponse,
    topic: &str,
) -> Result<&'a MetadataResponseTopic> {
    let found = metadata
        .topics
        .iter()
        .find(|t| topic_title(t) == topic)
        .ok_or_else(|| AdminError::Answer(format!("Metadata did not name topic {topic}")))?;
    check(found.error_code, None, format!("topic {topic}"))?;
    Ok(found)
}

fn topic_title(topic: &MetadataResponseTopic) -> String {
    topic
        .name
        .as_ref()
        .map_or(String::new(), |n| n.0.to_string())
}

async fn list(admin: &mut Admin, internal: bool) -> Result<Report> {
    let metadata = admin.metadata(None).await?;
    let mut topics: Vec<&MetadataResponseTopic> = metadata
        .topics
        .iter()
        .filter(|t| internal || !t.is_internal)
        .collect();
    topics.sort_by_key(|t| topic_title(t));
    let mut table = Table::new(&["NAME", "PARTITIONS", "REPLICAS", "INTERNAL"]);
    let mut json = Vec::new();
    for topic in topics {
        let name = topic_title(topic);
        let replicas = topic
            .partitions
            .first()
            .map_or(0, |p| p.replica_nodes.len());
        table.row(vec![
            name.clone(),
            topic.partitions.len().to_string(),
            replicas.to_string(),
            topic.is_internal.to_string(),
        ]);
        json.push(json!({
            "name": name,
            "id": topic.topic_id.to_string(),
            "partitions": topic.partitions.len(),
            "replicas": replicas,
            "internal": topic.is_internal,
        }));
    }
    Ok(Report::single(table, json.into()))
}

/// One topic's configs: `(name, value, source, read only, sensitive)`.
type ConfigRow = (String, Option<String>, &'static str, bool, bool);

/// DescribeConfigs' `config_source` as Kafka's admin client names it.
fn config_source(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

async fn topic_configs(admin: &Admin, topic: &str) -> Result<Vec<ConfigRow>> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configuration_keys(None)]);
    let answer = admin.call_any(&request).await?;
    let result = answer
        .results
        .first()
        .ok_or_else(|| AdminError::Answer(String::from("DescribeConfigs named no resource")))?;
    check(
        result.error_code,
        result.error_message.as_deref(),
        format!("configs of topic {topic}"),
    )?;
    let mut rows: Vec<ConfigRow> = result
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()),
                config_source(c.config_source),
                c.read_only,
                c.is_sensitive,
            )
        })
        .collect();
    rows.sort();
    Ok(rows)
}

/// Each partition's leader, replicas and offsets (log start, high
/// watermark; `-` where unknown).
fn partitions_section(
    partitions: &[MetadataResponsePartition],
    offsets: impl Fn(&MetadataResponsePartition) -> (Option<i64>, Option<i64>),
) -> (Table, Vec<serde_json::Value>) {
    let mut table = Table::new(&[
        "PARTITION",
        "LEADER",
        "EPOCH",
        "REPLICAS",
        "ISR",
        "OFFLINE",
        "LOG-START",
        "HIGH-WATERMARK",
    ])
    .titled("PARTITIONS");
    let ids = |nodes: &[BrokerId]| nodes.iter().map(|b| b.0).collect::<Vec<i32>>();
    let shown = |offset: Option<i64>| offset.map_or(String::from("-"), |o| o.to_string());
    let mut json = Vec::new();
    for p in partitions {
        let (start, end) = offsets(p);
        table.row(vec![
            p.partition_index.to_string(),
            p.leader_id.0.to_string(),
            p.leader_epoch.to_string(),
            id_list(&ids(&p.replica_nodes)),
            id_list(&ids(&p.isr_nodes)),
            id_list(&ids(&p.offline_replicas)),
            shown(start),
            shown(end),
        ]);
        json.push(json!({
            "partition": p.partition_index,
            "leader": p.leader_id.0,
            "leader_epoch": p.leader_epoch,
            "replicas": ids(&p.replica_nodes),
            "isr": ids(&p.isr_nodes),
            "offline": ids(&p.offline_replicas),
            "log_start_offset": start,
            "high_watermark": end,
        }));
    }
    (table, json)
}

fn configs_table(configs: &[ConfigRow]) -> Table {
    let mut table = Table::new(&["KEY", "VALUE", "SOURCE"]).titled("CONFIGS");
    for (name, value, source, _, sensitive) in configs {
        let shown = if *sensitive {
            Some("<sensitive>")
        } else {
            value.as_deref()
        };
        table.row(vec![
            name.clone(),
            shown.unwrap_or("-").to_string(),
            source.to_string(),
        ]);
    }
    table
}

async fn describe(admin: &mut Admin, topic: &str, non_default: bool) -> Result<Report> {
    let metadata = admin.metadata(Some(&[topic.to_string()])).await?;
    let found = find_topic(&metadata, topic)?;
    let mut summary = Table::new(&["NAME", "ID", "PARTITIONS", "INTERNAL"]).titled("SUMMARY");
    summary.row(vec![
        topic.to_string(),
        found.topic_id.to_string(),
        found.partitions.len().to_string(),
        found.is_internal.to_string(),
    ]);
    let mut partitions = found.partitions.clone();
    partitions.sort_by_key(|p| p.partition_index);
    // Offsets are extra: a partition without a leader has none to give,
    // and its replicas are still worth showing.
    let topics = [topic.to_string()];
    let starts = admin
        .offsets(&topics, EARLIEST_TIMESTAMP)
        .await
        .unwrap_or_default();
    let ends = admin
        .offsets(&topics, LATEST_TIMESTAMP)
        .await
        .unwrap_or_default();
    let offsets = |p: &MetadataResponsePartition| {
        let key = (topic.to_string(), p.partition_index);
        (starts.get(&key).copied(), ends.get(&key).copied())
    };
    let (partition_table, partitions_json) = partitions_section(&partitions, offsets);
    let configs: Vec<ConfigRow> = topic_configs(admin, topic)
        .await?
        .into_iter()
        .filter(|c| !non_default || c.2 == "DYNAMIC_TOPIC_CONFIG")
        .collect();
    let config_table = configs_table(&configs);
    let json = json!({
        "name": topic,
        "id": found.topic_id.to_string(),
        "internal": found.is_internal,
        "partitions": partitions_json,
        "configs": configs.iter().map(|(name, value, source, read_only, sensitive)| json!({
            "name": name, "value": value, "source": source,
            "read_only": read_only, "sensitive": sensitive,
        })).collect::<Vec<_>>(),
    });
    Ok(Report {
        tables: vec![summary, partition_table, config_table],
        json,
        failures: Vec::new(),
    })
}

async fn alter_config(
    admin: &mut Admin,
    topic: &str,
    set: &[String],
    delete: &[String],
) -> Result<Report> {
    if set.is_empty() && delete.is_empty() {
        return Err(AdminError::Usage(String::from(
            "alter-config needs --set key=value or --delete key",
        )));
    }
    let mut configs = Vec::new();
    for pair in set {
        let (name, value) = key_value(pair)?;
        configs.push(
            AlterableConfig::default()
                .with_name(StrBytes::from_string(name))
                .with_config_operation(SET)
                .with_value(Some(StrBytes::from_string(value))),
        );
    }
    for name in delete {
        configs.push(
            AlterableConfig::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_config_operation(DELETE)
                .with_value(None),
        );
    }
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configs(configs),
    ]);
    let answer = admin.call_any(&request).await?;
    let results = answer
        .responses
        .into_iter()
        .map(|r| {
            (
                r.resource_name.to_string(),
                r.error_code,
                r.error_message.map(|m| m.to_string()),
            )
        })
        .collect();
    Ok(status_report(results, "alter configs of topic"))
}

async fn add_partitions(admin: &mut Admin, topic: &str, num: i32) -> Result<Report> {
    if num < 1 {
        return Err(AdminError::Usage(format!(
            "--num {num}: add at least one partition"
        )));
    }
    let metadata = admin.metadata(Some(&[topic.to_string()])).await?;
    let total = find_topic(&metadata, topic)?.partitions.len() as i32 + num;
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(topic))
            .with_count(total)
            .with_assignments(None)]);
    let mut answer = admin.call_any(&request).await?;
    if answer
        .results
        .iter()
        .any(|t| t.error_code == codes::NOT_CONTROLLER)
    {
        answer = admin.call_controller(&request).await?;
    }
    let results = answer
        .results
        .into_iter()
        .map(|r| {
            (
                r.name.0.to_string(),
                r.error_code,
                r.error_message.map(|m| m.to_string()),
            )
        })
        .collect();
    Ok(status_report(results, "add partitions to topic"))
}

async fn delete_topics(admin: &mut Admin, topics: &[String]) -> Result<Report> {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_names(topics.iter().map(|t| topic_name(t)).collect());
    let mut answer = admin.call_any(&request).await?;
    if answer
        .responses
        .iter()
        .any(|t| t.error_code == codes::NOT_CONTROLLER)
    {
        answer = admin.call_controller(&request).await?;
    }
    let results = answer
        .responses
        .into_iter()
        .map(|r| {
            (
                r.name.map_or(String::new(), |n| n.0.to_string()),
                r.error_code,
                r.error_message.map(|m| m.to_string()),
            )
        })
        .collect();
    Ok(status_report(results, "delete topic"))
}

//! `rill admin log-dirs describe / move`: a broker's data dirs
//! (DescribeLogDirs: each dir's partitions, their sizes, the dir's free
//! bytes) and moving a replica from one of its dirs to another
//! (AlterReplicaLogDirs), as `kafka-log-dirs.sh --describe` and the
//! `log_dirs` of `kafka-reassign-partitions.sh` do.

use crate::client::Admin;
use crate::error::{status, Result};
use crate::output::{Report, Table};
use bench_harness::kafka::client::topic_name;
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, DescribeLogDirsRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

/// `rill admin log-dirs ...`.
#[derive(Debug, clap::Subcommand)]
pub enum LogDirsCommand {
    /// One broker's data dirs, their partitions and free bytes.
    Describe {
        /// The broker's id.
        #[arg(long)]
        broker: i32,
    },
    /// Move one replica to another data dir of the broker holding it.
    Move {
        /// The broker's id.
        #[arg(long)]
        broker: i32,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partition: i32,
        /// The target data dir, as the broker names it (`describe` lists
        /// them).
        #[arg(long)]
        dir: String,
    },
}

/// Runs a `log-dirs` command.
pub async fn run(admin: &mut Admin, command: LogDirsCommand) -> Result<Report> {
    match command {
        LogDirsCommand::Describe { broker } => describe(admin, broker).await,
        LogDirsCommand::Move {
            broker,
            topic,
            partition,
            dir,
        } => move_replica(admin, broker, &topic, partition, &dir).await,
    }
}

async fn describe(admin: &mut Admin, broker: i32) -> Result<Report> {
    let connection = admin.broker(broker).await?;
    let answer = admin
        .call(
            &connection,
            &DescribeLogDirsRequest::default().with_topics(None),
        )
        .await?;
    let mut table = Table::new(&["DIR", "TOPIC", "PARTITION", "SIZE-BYTES", "USABLE-BYTES"]);
    let mut json = Vec::new();
    for result in &answer.results {
        let dir = result.log_dir.to_string();
        let usable = result.usable_bytes.to_string();
        if result.topics.is_empty() {
            table.row(vec![
                dir.clone(),
                String::new(),
                String::new(),
                String::new(),
                usable.clone(),
            ]);
        }
        for topic in &result.topics {
            for partition in &topic.partitions {
                table.row(vec![
                    dir.clone(),
                    topic.name.0.to_string(),
                    partition.partition_index.to_string(),
                    partition.partition_size.to_string(),
                    usable.clone(),
                ]);
            }
        }
        json.push(json!({
            "dir": dir,
            "status": status(result.error_code, None),
            "total_bytes": result.total_bytes,
            "usable_bytes": result.usable_bytes,
            "partitions": result.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| json!({
                "topic": t.name.0.to_string(),
                "partition": p.partition_index,
                "size_bytes": p.partition_size,
            }))).collect::<Vec<_>>(),
        }));
    }
    Ok(Report {
        tables: vec![table],
        json: json!({ "broker": broker, "dirs": json }),
        failures: Vec::new(),
    })
}

async fn move_replica(
    admin: &mut Admin,
    broker: i32,
    topic: &str,
    partition: i32,
    dir: &str,
) -> Result<Report> {
    let connection = admin.broker(broker).await?;
    let request =
        AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
            .with_path(StrBytes::from_string(dir.to_string()))
            .with_topics(vec![AlterReplicaLogDirTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![partition])])]);
    let answer = admin.call(&connection, &request).await?;
    let code = answer
        .results
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.error_code)
        .next()
        .unwrap_or(0);
    let outcome = status(code, None);
    let mut table = Table::new(&["BROKER", "TOPIC", "PARTITION", "DIR", "STATUS"]);
    table.row(vec![
        broker.to_string(),
        topic.to_string(),
        partition.to_string(),
        dir.to_string(),
        outcome.clone(),
    ]);
    let failures = if code == 0 {
        Vec::new()
    } else {
        vec![format!(
            "moving {topic}-{partition} to {dir} on broker {broker}: {outcome}"
        )]
    };
    Ok(Report {
        tables: vec![table],
        json: json!({ "broker": broker, "topic": topic, "partition": partition, "dir": dir, "status": outcome }),
        failures,
    })
}

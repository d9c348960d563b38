//! An OMB workload and Kafka driver as one rill-bench [`Workload`].
//!
//! OMB's semantics are kept: `producerRate` is the rate of the whole test,
//! split over every producer; a subscription is a consumer group reading
//! every partition; the driver's client configs are Kafka client
//! properties. What rill-bench cannot honour is refused with a message
//! (more than one subscription per topic) or listed as not applied (a
//! client property it has no equivalent for), never silently dropped.

use super::workload::{properties, KeyDistributor, OmbKafkaDriver, OmbWorkload};
use crate::error::{BenchError, Result};
use crate::workload::{
    parse_acks, Compression, KeyDistribution, MessageSize, StartOffset, Workload,
};
use std::path::Path;

/// The translation and what it could not apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    pub workload: Workload,
    /// `file: key=value` of every driver property rill-bench ignores.
    pub not_applied: Vec<String>,
}

/// Builds the rill-bench workload. `workload_dir` is where relative
/// `payloadFile` paths are found (the workload file's directory, as OMB
/// runs from its checkout).
pub fn translate(
    omb: &OmbWorkload,
    driver: &OmbKafkaDriver,
    workload_dir: &Path,
) -> Result<Translated> {
    if omb.subscriptions_per_topic > 1 {
        return Err(BenchError::Workload(format!(
            "subscriptionsPerTopic: {}: rill-bench runs one subscription (consumer group) per topic",
            omb.subscriptions_per_topic
        )));
    }
    let consumers = omb.subscriptions_per_topic * omb.consumer_per_subscription;
    let mut workload = Workload {
        name: omb.name.clone(),
        topics: omb.topics,
        partitions_per_topic: omb.partitions_per_topic,
        replication_factor: driver.replication_factor,
        message_size: MessageSize::Fixed(message_size_bytes(omb, workload_dir)?),
        key_distribution: match omb.key_distributor {
            KeyDistributor::NoKey => KeyDistribution::None,
            KeyDistributor::KeyRoundRobin => KeyDistribution::RoundRobin,
            KeyDistributor::RandomNano => KeyDistribution::Random,
        },
        producers_per_topic: omb.producers_per_topic,
        consumers_per_topic: consumers,
        producer_rate_msgs_per_s: omb.producer_rate,
        consumer_backlog_size_mb: omb.consumer_backlog_size_gb.saturating_mul(1024),
        warmup_duration_s: omb.warmup_duration_minutes.saturating_mul(60),
        test_duration_s: omb.test_duration_minutes.saturating_mul(60),
        consumer_group: (consumers > 0).then(|| String::from("sub-000")),
        ..Workload::default()
    };
    let mut not_applied = Vec::new();
    apply_producer_config(&mut workload, &driver.producer_config, &mut not_applied)?;
    apply_consumer_config(&mut workload, &driver.consumer_config, &mut not_applied)?;
    apply_topic_config(&mut workload, &driver.topic_config, &mut not_applied)?;
    for (key, value) in properties(&driver.common_config) {
        if key != "bootstrap.servers" {
            not_applied.push(format!("commonConfig: {key}={value}"));
        }
    }
    workload.validate()?;
    Ok(Translated {
        workload,
        not_applied,
    })
}

/// `messageSize`, or the size of `payloadFile` when it is given (the
/// file's bytes are not sent: rill-bench's payload carries its send
/// timestamp).
fn message_size_bytes(omb: &OmbWorkload, workload_dir: &Path) -> Result<u32> {
    let Some(file) = &omb.payload_file else {
        return Ok(omb.message_size);
    };
    let path = workload_dir.join(file);
    let length = std::fs::metadata(&path)
        .map_err(|error| BenchError::Workload(format!("payloadFile {}: {error}", path.display())))?
        .len();
    u32::try_from(length)
        .map_err(|_| BenchError::Workload(format!("payloadFile {}: too large", path.display())))
}

fn number<T: std::str::FromStr>(file: &str, key: &str, value: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| BenchError::Workload(format!("{file}: {key}={value}: not a number")))
}

fn apply_producer_config(
    workload: &mut Workload,
    text: &str,
    not_applied: &mut Vec<String>,
) -> Result<()> {
    const FILE: &str = "producerConfig";
    for (key, value) in properties(text) {
        match key.as_str() {
            "acks" => workload.acks = parse_acks(&value)?,
            "linger.ms" => workload.linger_ms = number(FILE, &key, &value)?,
            "batch.size" => workload.batch_size_bytes = number(FILE, &key, &value)?,
            "max.in.flight.requests.per.connection" => {
                workload.max_in_flight_per_producer = number(FILE, &key, &value)?
            }
            "compression.type" => workload.compression = compression(&value)?,
            _ => not_applied.push(format!("{FILE}: {key}={value}")),
        }
    }
    Ok(())
}

fn compression(value: &str) -> Result<Compression> {
    Ok(match value {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => {
            return Err(BenchError::Workload(format!(
                "producerConfig: compression.type={other}: none, gzip, snappy, lz4 or zstd"
            )))
        }
    })
}

fn apply_consumer_config(
    workload: &mut Workload,
    text: &str,
    not_applied: &mut Vec<String>,
) -> Result<()> {
    const FILE: &str = "consumerConfig";
    for (key, value) in properties(text) {
        match key.as_str() {
            "auto.offset.reset" => {
                workload.consumer_start = match value.as_str() {
                    "earliest" => StartOffset::Earliest,
                    "latest" => StartOffset::Latest,
                    other => {
                        return Err(BenchError::Workload(format!(
                            "{FILE}: auto.offset.reset={other}: earliest or latest"
                        )))
                    }
                }
            }
            "fetch.max.wait.ms" => workload.fetch_max_wait_ms = number(FILE, &key, &value)?,
            "fetch.max.bytes" => workload.fetch_max_bytes = number(FILE, &key, &value)?,
            "max.partition.fetch.bytes" => {
                workload.fetch_partition_max_bytes = number(FILE, &key, &value)?
            }
            _ => not_applied.push(format!("{FILE}: {key}={value}")),
        }
    }
    Ok(())
}

fn apply_topic_config(
    workload: &mut Workload,
    text: &str,
    not_applied: &mut Vec<String>,
) -> Result<()> {
    for (key, value) in properties(text) {
        match key.as_str() {
            "min.insync.replicas" => {
                workload.min_insync_replicas = Some(number("topicConfig", &key, &value)?)
            }
            _ => not_applied.push(format!("topicConfig: {key}={value}")),
        }
    }
    Ok(())
}

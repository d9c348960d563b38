//! `rill admin topic produce` and `topic consume`: a console producer and
//! consumer on rill-bench's record batch code (`bench_harness::kafka::batch`)
//! and plain Produce / Fetch requests to each partition's leader.

use crate::client::Admin;
use crate::error::{check, AdminError, Result};
use crate::output::{text, Report, Table};
use bench_harness::kafka::batch::{walk_batch_records, BatchBuilder};
use bench_harness::kafka::client::{topic_name, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use bench_harness::workload::Compression;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{BrokerId, FetchRequest, ProduceRequest};
use serde_json::json;
use std::io::BufRead;

/// Bytes one fetch asks for per partition; a bigger batch still comes
/// whole (Fetch v3+, KIP-74).
const FETCH_PARTITION_BYTES: i32 = 1024 * 1024;

/// `rill admin topic produce`.
#[derive(Debug, clap::Args)]
pub struct ProduceArgs {
    pub topic: String,
    /// The partition to write to (default: the key's, as Kafka's default
    /// partitioner picks it; partition 0 for records without a key).
    #[arg(short, long)]
    pub partition: Option<i32>,
    /// The key of every record (none: a null key).
    #[arg(short, long)]
    pub key: Option<String>,
    /// One record with this value; without it, each line of stdin is one
    /// record.
    #[arg(short, long)]
    pub value: Option<String>,
}

/// `rill admin topic consume`.
#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    pub topic: String,
    /// Only this partition (default: every partition, in order).
    #[arg(short, long)]
    pub partition: Option<i32>,
    /// Where to start: `earliest`, `latest` or an offset.
    #[arg(short, long, default_value = "earliest")]
    pub offset: String,
    /// Stop after this many records.
    #[arg(short, long)]
    pub num: Option<usize>,
}

/// Where a consume starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    Earliest,
    Latest,
    At(i64),
}

fn parse_start(offset: &str) -> Result<Start> {
    match offset {
        "earliest" => Ok(Start::Earliest),
        "latest" => Ok(Start::Latest),
        number => number
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .map(Start::At)
            .ok_or_else(|| {
                AdminError::Usage(format!(
                    "--offset {offset}: earliest, latest or an offset >= 0"
                ))
            }),
    }
}

/// The leader of `topic`-`partition`.
async fn leader_of(admin: &Admin, topic: &str, partition: i32) -> Result<i32> {
    admin
        .leaders(&[topic.to_string()])
        .await?
        .into_iter()
        .find(|(_, partitions)| partitions.iter().any(|(_, p)| *p == partition))
        .map(|(leader, _)| leader)
        .ok_or_else(|| AdminError::Usage(format!("topic {topic} has no partition {partition}")))
}

/// Kafka's `murmur2` (`org.apache.kafka.common.utils.Utils`), by which
/// its default partitioner places a keyed record: the same key lands in
/// the same partition whichever client wrote it.
fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (index, byte) in tail.iter().enumerate().rev() {
            h ^= u32::from(*byte) << (8 * index);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition a produce writes to, and its leader.
async fn produce_target(admin: &Admin, args: &ProduceArgs) -> Result<(i32, i32)> {
    let by_leader = admin.leaders(std::slice::from_ref(&args.topic)).await?;
    let count = by_leader.values().map(Vec::len).sum::<usize>() as i32;
    let partition = match (args.partition, &args.key) {
        (Some(partition), _) => partition,
        (None, Some(key)) if count > 0 => (murmur2(key.as_bytes()) & 0x7fff_ffff) % count,
        (None, _) => 0,
    };
    by_leader
        .into_iter()
        .find(|(_, partitions)| partitions.iter().any(|(_, p)| *p == partition))
        .map(|(leader, _)| (partition, leader))
        .ok_or_else(|| {
            AdminError::Usage(format!("topic {} has no partition {partition}", args.topic))
        })
}

/// Writes the records (one batch, acks=all) and prints each one's offset.
pub async fn produce(admin: &mut Admin, args: ProduceArgs) -> Result<Report> {
    let values: Vec<String> = match &args.value {
        Some(value) => vec![value.clone()],
        None => std::io::stdin()
            .lock()
            .lines()
            .collect::<std::io::Result<_>>()?,
    };
    if values.is_empty() {
        return Err(AdminError::Usage(String::from(
            "nothing to produce: give --value or lines on stdin",
        )));
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut builder = BatchBuilder::new(values.iter().map(String::len).sum::<usize>() + 64);
    for value in &values {
        let key = args.key.as_deref().map(str::as_bytes);
        builder.append(now_ms, key, b"", value.as_bytes());
    }
    let batch = builder.finish(Compression::None)?;
    let (partition_index, leader) = produce_target(admin, &args).await?;
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(&args.topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition_index)
                .with_records(Some(batch))])]);
    let connection = admin.broker(leader).await?;
    let answer = admin.call(&connection, &request).await?;
    let partition = answer
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .ok_or_else(|| AdminError::Answer(String::from("Produce answered no partition")))?;
    check(
        partition.error_code,
        partition.error_message.as_deref(),
        format!("produce to {}-{partition_index}", args.topic),
    )?;
    let mut table = Table::new(&["TOPIC", "PARTITION", "OFFSET"]);
    let mut json = Vec::new();
    for index in 0..values.len() {
        let offset = partition.base_offset + index as i64;
        table.row(vec![
            args.topic.clone(),
            partition_index.to_string(),
            offset.to_string(),
        ]);
        json.push(json!({"topic": args.topic, "partition": partition_index, "offset": offset}));
    }
    Ok(Report::single(table, json.into()))
}

/// One consumed record, owned.
struct Consumed {
    partition: i32,
    offset: i64,
    timestamp_ms: i64,
    key: Option<String>,
    value: Option<String>,
}

/// Reads each partition from its start to its high watermark as of the
/// call (it does not wait for new records), at most `--num` records.
pub async fn consume(admin: &mut Admin, args: ConsumeArgs) -> Result<Report> {
    let start = parse_start(&args.offset)?;
    let topics = [args.topic.clone()];
    let ends = admin.offsets(&topics, LATEST_TIMESTAMP).await?;
    let firsts = match start {
        Start::Earliest => admin.offsets(&topics, EARLIEST_TIMESTAMP).await?,
        _ => ends.clone(),
    };
    let mut partitions: Vec<i32> = ends.keys().map(|(_, p)| *p).collect();
    partitions.sort_unstable();
    if let Some(only) = args.partition {
        if !partitions.contains(&only) {
            return Err(AdminError::Usage(format!(
                "topic {} has no partition {only}",
                args.topic
            )));
        }
        partitions = vec![only];
    }
    let limit = args.num.unwrap_or(usize::MAX);
    let mut consumed = Vec::new();
    for partition in partitions {
        let key = (args.topic.clone(), partition);
        let from = match start {
            Start::At(offset) => offset,
            _ => firsts.get(&key).copied().unwrap_or(0),
        };
        let end = ends.get(&key).copied().unwrap_or(0);
        let room = limit - consumed.len();
        consumed.extend(read_partition(admin, &args.topic, partition, from, end, room).await?);
        if consumed.len() >= limit {
            break;
        }
    }
    Ok(consumed_report(&args.topic, &consumed))
}

async fn read_partition(
    admin: &mut Admin,
    topic: &str,
    partition: i32,
    from: i64,
    end: i64,
    limit: usize,
) -> Result<Vec<Consumed>> {
    let leader = leader_of(admin, topic, partition).await?;
    let connection = admin.broker(leader).await?;
    let mut records = Vec::new();
    let mut offset = from;
    while offset < end && records.len() < limit {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_PARTITION_BYTES)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(FETCH_PARTITION_BYTES)])]);
        let answer = admin.call(&connection, &request).await?;
        check(
            answer.error_code,
            None,
            format!("fetch {topic}-{partition}"),
        )?;
        let data = answer
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| AdminError::Answer(String::from("Fetch answered no partition")))?;
        check(
            data.error_code,
            None,
            format!("fetch {topic}-{partition} at {offset}"),
        )?;
        let bytes = data.records.clone().unwrap_or_default();
        let summary = walk_batch_records(&bytes, offset, |record| {
            if records.len() < limit && record.offset < end {
                records.push(Consumed {
                    partition,
                    offset: record.offset,
                    timestamp_ms: record.timestamp_ms,
                    key: text(record.key),
                    value: text(record.value),
                });
            }
        })?;
        match summary.next_offset {
            // No whole batch: nothing more below the high watermark now.
            None => break,
            Some(next) => offset = next.max(offset + 1),
        }
    }
    Ok(records)
}

fn consumed_report(topic: &str, consumed: &[Consumed]) -> Report {
    let mut table = Table::new(&[
        "TOPIC",
        "PARTITION",
        "OFFSET",
        "TIMESTAMP-MS",
        "KEY",
        "VALUE",
    ]);
    let mut json = Vec::new();
    for record in consumed {
        table.row(vec![
            topic.to_string(),
            record.partition.to_string(),
            record.offset.to_string(),
            record.timestamp_ms.to_string(),
            record.key.clone().unwrap_or_else(|| String::from("-")),
            record.value.clone().unwrap_or_else(|| String::from("-")),
        ]);
        json.push(json!({
            "topic": topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp_ms": record.timestamp_ms,
            "key": record.key,
            "value": record.value,
        }));
    }
    Report::single(table, json.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_is_kafkas() {
        // Kafka's own test vectors (UtilsTest.testMurmur2).
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (data, expected) in cases {
            assert_eq!(murmur2(data), expected, "{}", String::from_utf8_lossy(data));
        }
    }

    #[test]
    fn starts_parse() {
        assert_eq!(parse_start("earliest").unwrap(), Start::Earliest);
        assert_eq!(parse_start("latest").unwrap(), Start::Latest);
        assert_eq!(parse_start("42").unwrap(), Start::At(42));
        assert!(parse_start("-1").is_err());
        assert!(parse_start("first").is_err());
    }
}

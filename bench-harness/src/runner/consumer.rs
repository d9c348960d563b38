//! One consumer with direct partition assignment: it owns a share of the
//! partitions, finds its start offsets with ListOffsets, and runs one fetch
//! loop per leader broker. End-to-end latency is "now" minus the send
//! timestamp the producer put in the first 8 bytes of each value.

use crate::error::{BenchError, Result};
use crate::kafka::batch::walk_batches;
use crate::kafka::client::{
    list_offsets, topic_name, ConnectionPool, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP,
};
use crate::kafka::connection::Connection;
use crate::runner::producer::now_us;
use crate::stats::Recorder;
use crate::workload::{StartOffset, Workload};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const OFFSET_OUT_OF_RANGE: i16 = 1;

/// A partition assigned to a consumer, with its leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub topic: String,
    pub partition: i32,
    pub leader: i32,
}

/// Consumer `index` of `consumers` takes every partition whose position in
/// the flattened (topic, partition) list is `index` modulo `consumers`.
pub fn assign_direct(all: &[Assignment], consumers: usize, index: usize) -> Vec<Assignment> {
    all.iter()
        .enumerate()
        .filter(|(position, _)| consumers > 0 && position % consumers == index)
        .map(|(_, a)| a.clone())
        .collect()
}

pub struct ConsumerSpec {
    pub assignments: Vec<Assignment>,
    pub pool: ConnectionPool,
    pub workload: Arc<Workload>,
    pub recorder: Arc<Recorder>,
    pub stop: Arc<AtomicBool>,
    pub start: StartOffset,
    /// Told once per leader loop when start offsets are known.
    pub ready: mpsc::Sender<()>,
    /// Stop once these offsets are reached (fetch-path drains a topic).
    pub end_offsets: Option<HashMap<(String, i32), i64>>,
}

pub async fn run_consumer(mut spec: ConsumerSpec) -> Result<()> {
    let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for assignment in &spec.assignments {
        by_leader
            .entry(assignment.leader)
            .or_default()
            .push((assignment.topic.clone(), assignment.partition));
    }
    let mut loops = Vec::new();
    for (leader, partitions) in by_leader {
        let connection = spec.pool.get(leader).await?;
        let fetch_loop = FetchLoop {
            connection,
            partitions,
            workload: spec.workload.clone(),
            recorder: spec.recorder.clone(),
            stop: spec.stop.clone(),
            start: spec.start,
            end_offsets: spec.end_offsets.clone(),
        };
        loops.push(tokio::spawn(fetch_loop.run(spec.ready.clone())));
    }
    for handle in loops {
        handle
            .await
            .map_err(|error| BenchError::Other(format!("fetch loop: {error}")))??;
    }
    Ok(())
}

/// One fetch loop: the partitions of one leader, fetched through its
/// connection until `stop` (or until `end_offsets` are reached).
struct FetchLoop {
    connection: Arc<Connection>,
    partitions: Vec<(String, i32)>,
    workload: Arc<Workload>,
    recorder: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    start: StartOffset,
    end_offsets: Option<HashMap<(String, i32), i64>>,
}

impl FetchLoop {
    /// Finds the start offsets, tells `ready`, then fetches until stopped.
    async fn run(self, ready: mpsc::Sender<()>) -> Result<()> {
        let timestamp = match self.start {
            StartOffset::Earliest => EARLIEST_TIMESTAMP,
            StartOffset::Latest => LATEST_TIMESTAMP,
        };
        let mut offsets = list_offsets(&self.connection, &self.partitions, timestamp).await?;
        let _ = ready.send(()).await;
        drop(ready);
        let mut latencies_us: Vec<u64> = Vec::with_capacity(64 * 1024);
        while !self.stop.load(Ordering::Relaxed) {
            if self.reached_end(&offsets) {
                break;
            }
            let request = fetch_request(&self.workload, &self.partitions, &offsets);
            let response = match self.connection.call(&request).await {
                Ok(response) => response,
                Err(error) => {
                    self.recorder.record_error(format!("fetch: {error}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if self.connection.is_closed() {
                        return Err(error);
                    }
                    continue;
                }
            };
            if response.error_code != 0 {
                self.recorder
                    .record_error(format!("fetch: error {}", response.error_code));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            for topic in &response.responses {
                let topic_name = topic.topic.0.as_str();
                for partition in &topic.partitions {
                    self.take_partition(topic_name, partition, &mut offsets, &mut latencies_us)
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// True when every partition with an end offset has reached it.
    fn reached_end(&self, offsets: &HashMap<(String, i32), i64>) -> bool {
        let Some(end) = &self.end_offsets else {
            return false;
        };
        end.iter().all(|(key, end)| match offsets.get(key) {
            Some(at) => at >= end,
            None => true,
        })
    }

    /// Takes one partition's answer: resets an out-of-range offset to the
    /// earliest, records errors, else records its messages and moves on.
    async fn take_partition(
        &self,
        topic_name: &str,
        partition: &PartitionData,
        offsets: &mut HashMap<(String, i32), i64>,
        latencies_us: &mut Vec<u64>,
    ) -> Result<()> {
        let key = (topic_name.to_string(), partition.partition_index);
        if partition.error_code == OFFSET_OUT_OF_RANGE {
            let reset = list_offsets(
                &self.connection,
                std::slice::from_ref(&key),
                EARLIEST_TIMESTAMP,
            )
            .await?;
            offsets.extend(reset);
            self.recorder.record_error(format!(
                "fetch {topic_name}-{}: offset out of range, reset",
                key.1
            ));
            return Ok(());
        }
        if partition.error_code != 0 {
            self.recorder.record_error(format!(
                "fetch {topic_name}-{}: error {}",
                key.1, partition.error_code
            ));
            return Ok(());
        }
        let Some(records) = &partition.records else {
            return Ok(());
        };
        let fetch_offset = offsets.get(&key).copied().unwrap_or(0);
        latencies_us.clear();
        let received_us = now_us();
        let walked = walk_batches(records, fetch_offset, |value| {
            if let Some(prefix) = value.get(0..8) {
                let sent_us = u64::from_be_bytes([
                    prefix[0], prefix[1], prefix[2], prefix[3], prefix[4], prefix[5], prefix[6],
                    prefix[7],
                ]);
                latencies_us.push(received_us.saturating_sub(sent_us));
            }
        });
        match walked {
            Ok(summary) => {
                self.recorder.record_consumed(
                    summary.records,
                    summary.value_bytes,
                    latencies_us.iter().copied(),
                );
                if let Some(next) = summary.next_offset {
                    offsets.insert(key, next.max(fetch_offset));
                }
            }
            Err(error) => {
                self.recorder
                    .record_error(format!("fetch {topic_name}-{}: {error}", key.1));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }
}

pub(crate) fn fetch_request(
    workload: &Workload,
    partitions: &[(String, i32)],
    offsets: &HashMap<(String, i32), i64>,
) -> FetchRequest {
    let mut by_topic: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
    for (topic, partition) in partitions {
        let offset = offsets
            .get(&(topic.clone(), *partition))
            .copied()
            .unwrap_or(0);
        by_topic.entry(topic).or_default().push(
            FetchPartition::default()
                .with_partition(*partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(workload.fetch_partition_max_bytes),
        );
    }
    // Full fetch requests (no fetch session): session id 0, epoch -1.
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(workload.fetch_max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(workload.fetch_max_bytes)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    FetchTopic::default()
                        .with_topic(topic_name(topic))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_assignment_covers_every_partition_once() {
        let all: Vec<Assignment> = (0..10)
            .map(|p| Assignment {
                topic: "t".into(),
                partition: p,
                leader: 0,
            })
            .collect();
        let shares: Vec<Vec<Assignment>> = (0..3).map(|i| assign_direct(&all, 3, i)).collect();
        assert_eq!(
            shares.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![4, 3, 3]
        );
        let mut seen: Vec<i32> = shares.iter().flatten().map(|a| a.partition).collect();
        seen.sort();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn fetch_request_encodes_at_v4_and_v11() {
        use kafka_protocol::protocol::Encodable;
        let workload = Workload::default();
        let partitions = vec![("t".to_string(), 0), ("t".to_string(), 1)];
        let offsets = HashMap::from([(("t".to_string(), 1), 42)]);
        let request = fetch_request(&workload, &partitions, &offsets);
        assert_eq!(request.topics.len(), 1);
        assert_eq!(request.topics[0].partitions[1].fetch_offset, 42);
        assert_eq!(request.topics[0].partitions[0].fetch_offset, 0);
        for version in [4, 11] {
            let mut buf = bytes::BytesMut::new();
            request.encode(&mut buf, version).unwrap();
            assert!(!buf.is_empty());
        }
    }
}

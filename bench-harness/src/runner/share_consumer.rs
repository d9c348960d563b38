//! One member of a share group (KIP-932, `--group-protocol share`): it
//! joins with ShareGroupHeartbeat (v1, a member id of its own), keeps a
//! share session with each leader of its assigned partitions, and with
//! every ShareFetch accepts all the records the previous one acquired
//! there (acknowledgements ride on the fetches, as librdkafka's implicit
//! mode sends them). Only records inside the acquired ranges count. Its
//! assignment is reported once a first fetch returned for it, so the
//! share-partitions exist (at the log end) before the producers start.

use crate::error::{BenchError, Result};
use crate::group::assignor::TopicPartition;
use crate::group::member::find_coordinator;
use crate::kafka::batch::walk_batch_records;
use crate::kafka::client::{connect_any, ConnectionPool};
use crate::kafka::connection::Connection;
use crate::runner::group_consumer::GroupConsumerSpec;
use crate::runner::producer::now_us;
use crate::runner::CONNECT_TIMEOUT;
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::{GroupId, ShareFetchRequest, ShareGroupHeartbeatRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// ShareFetch's wait while nothing can be acquired.
const MAX_WAIT_MS: i32 = 500;
/// Records acquired per fetch at most (librdkafka's default batch).
const MAX_RECORDS: i32 = 2000;
/// Kafka's ACCEPT.
const ACCEPT: i8 = 1;

/// What the member holds with one leader: its share session's next epoch
/// and the ranges acquired by the last fetch, to accept with the next.
#[derive(Default)]
struct Session {
    epoch: i32,
    to_accept: BTreeMap<(Uuid, i32), Vec<(i64, i64)>>,
}

/// The member's identity and assignment.
struct Membership {
    coordinator: Arc<Connection>,
    member_id: String,
    epoch: i32,
    interval: Duration,
    owned: Vec<TopicPartition>,
}

/// Runs one share group member until `spec.stop`.
pub async fn run_share_consumer(spec: GroupConsumerSpec) -> Result<()> {
    let group = spec.settings.group_id.clone();
    let bootstrap = connect_any(&spec.bootstrap, &spec.client_id, CONNECT_TIMEOUT).await?;
    let coordinator_addr = find_coordinator(&bootstrap, &group).await?;
    let mut member = Membership {
        coordinator: Connection::connect(&coordinator_addr, &spec.client_id).await?,
        member_id: Uuid::from_bytes(rand::random()).simple().to_string(),
        epoch: 0,
        interval: spec.settings.heartbeat_interval,
        owned: Vec::new(),
    };
    let mut pool = ConnectionPool::new(spec.client_id.clone(), spec.brokers.clone());
    let mut sessions: HashMap<i32, Session> = HashMap::new();
    let mut next_heartbeat = tokio::time::Instant::now();
    let mut reported = false;
    while !spec.stop.load(Ordering::Relaxed) {
        if tokio::time::Instant::now() >= next_heartbeat {
            let epoch = member.epoch;
            heartbeat(&spec, &mut member, epoch).await?;
            next_heartbeat = tokio::time::Instant::now() + member.interval;
        }
        if member.owned.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        if let Err(error) = fetch_round(&spec, &member, &mut pool, &mut sessions).await {
            spec.recorder.record_error(format!("share fetch: {error}"));
            sessions.clear();
            tokio::time::sleep(Duration::from_millis(100)).await;
        } else if !reported {
            spec.status.report(spec.index, &member.owned);
            reported = true;
        }
    }
    // Accept what the last fetches acquired, close the sessions, leave.
    for (leader, session) in sessions.iter_mut() {
        session.epoch = -1;
        if let Ok(connection) = pool.get(*leader).await {
            let request = share_fetch(&spec, &member, &[], session);
            let _ = connection.call(&request).await;
        }
    }
    heartbeat(&spec, &mut member, -1).await
}

/// One ShareGroupHeartbeat at `epoch` (-1: leave).
async fn heartbeat(spec: &GroupConsumerSpec, member: &mut Membership, epoch: i32) -> Result<()> {
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(
            spec.settings.group_id.clone(),
        )))
        .with_member_id(StrBytes::from_string(member.member_id.clone()))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names((epoch == 0).then(|| {
            (spec.settings.topics.iter())
                .map(|t| TopicName(StrBytes::from_string(t.clone())))
                .collect()
        }));
    let response = member.coordinator.call(&request).await?;
    match response.error_code {
        0 => {}
        // Unknown or fenced: join again as new.
        25 | 110 => {
            member.epoch = 0;
            return Ok(());
        }
        // The coordinator moves or loads: the next heartbeat tries again.
        14..=16 => return Ok(()),
        code => {
            return Err(BenchError::Broker {
                error_code: code,
                context: "share group heartbeat".into(),
            })
        }
    }
    member.epoch = response.member_epoch;
    if response.heartbeat_interval_ms > 0 {
        member.interval = Duration::from_millis(response.heartbeat_interval_ms as u64);
    }
    if let Some(assignment) = response.assignment {
        member.owned = (assignment.topic_partitions.iter())
            .filter_map(|t| {
                let name = spec.settings.topic_ids.get(&t.topic_id)?;
                Some(t.partitions.iter().map(move |p| (name.clone(), *p)))
            })
            .flatten()
            .collect();
    }
    Ok(())
}

/// One ShareFetch to each leader of the owned partitions, at once.
async fn fetch_round(
    spec: &GroupConsumerSpec,
    member: &Membership,
    pool: &mut ConnectionPool,
    sessions: &mut HashMap<i32, Session>,
) -> Result<()> {
    let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    for tp in &member.owned {
        let leader = spec.leaders.get(tp).copied().unwrap_or(-1);
        by_leader.entry(leader).or_default().push(tp.clone());
    }
    let mut pending = Vec::new();
    for (leader, partitions) in &by_leader {
        let connection = pool.get(*leader).await?;
        let session = sessions.entry(*leader).or_default();
        let request = share_fetch(spec, member, partitions, session);
        session.to_accept.clear();
        pending.push((*leader, connection.send(&request).await?));
    }
    for (leader, waiting) in pending {
        let response = waiting.wait().await?;
        let session = sessions.entry(leader).or_default();
        if response.error_code != 0 {
            // A session error: the next fetch opens a new one.
            session.epoch = 0;
            spec.recorder
                .record_error(format!("share fetch: error {}", response.error_code));
            continue;
        }
        session.epoch = session.epoch.checked_add(1).unwrap_or(1);
        for topic in &response.responses {
            for partition in &topic.partitions {
                let ranges: Vec<(i64, i64)> = (partition.acquired_records.iter())
                    .map(|r| (r.first_offset, r.last_offset))
                    .collect();
                if ranges.is_empty() {
                    continue;
                }
                count_acquired(
                    spec,
                    partition.records.as_deref().unwrap_or_default(),
                    &ranges,
                )?;
                session
                    .to_accept
                    .insert((topic.topic_id, partition.partition_index), ranges);
            }
        }
    }
    Ok(())
}

/// Counts the records of `records` inside `ranges`, with their latency.
fn count_acquired(spec: &GroupConsumerSpec, records: &[u8], ranges: &[(i64, i64)]) -> Result<()> {
    let received_us = now_us();
    let (mut count, mut bytes) = (0u64, 0u64);
    let mut latencies_us = Vec::new();
    walk_batch_records(records, 0, |record| {
        if !ranges
            .iter()
            .any(|&(a, b)| (a..=b).contains(&record.offset))
        {
            return;
        }
        let value = record.value.unwrap_or_default();
        count += 1;
        bytes += value.len() as u64;
        if let Some(prefix) = value.get(0..8) {
            let mut sent = [0u8; 8];
            sent.copy_from_slice(prefix);
            latencies_us.push(received_us.saturating_sub(u64::from_be_bytes(sent)));
        }
    })?;
    spec.recorder
        .record_consumed(count, bytes, latencies_us.into_iter());
    Ok(())
}

/// A ShareFetch of `partitions` in `session`, accepting what it holds.
fn share_fetch(
    spec: &GroupConsumerSpec,
    member: &Membership,
    partitions: &[TopicPartition],
    session: &Session,
) -> ShareFetchRequest {
    let ids: HashMap<&str, Uuid> = (spec.settings.topic_ids.iter())
        .map(|(id, name)| (name.as_str(), *id))
        .collect();
    let mut topics: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
    // The session's first fetch names its partitions; later ones only
    // carry acknowledgements.
    if session.epoch == 0 {
        for (topic, partition) in partitions {
            if let Some(id) = ids.get(topic.as_str()) {
                let p = FetchPartition::default().with_partition_index(*partition);
                topics.entry(*id).or_default().push(p);
            }
        }
    }
    for ((id, partition), ranges) in &session.to_accept {
        let batches = (ranges.iter())
            .map(|&(first, last)| {
                AcknowledgementBatch::default()
                    .with_first_offset(first)
                    .with_last_offset(last)
                    .with_acknowledge_types(vec![ACCEPT])
            })
            .collect();
        let entry = topics.entry(*id).or_default();
        match entry.iter_mut().find(|p| p.partition_index == *partition) {
            Some(p) => p.acknowledgement_batches = batches,
            None => entry.push(
                FetchPartition::default()
                    .with_partition_index(*partition)
                    .with_acknowledgement_batches(batches),
            ),
        }
    }
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(StrBytes::from_string(
            spec.settings.group_id.clone(),
        ))))
        .with_member_id(Some(StrBytes::from_string(member.member_id.clone())))
        .with_share_session_epoch(session.epoch)
        .with_max_wait_ms(MAX_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(spec.workload.fetch_max_bytes)
        .with_max_records(MAX_RECORDS)
        .with_batch_size(MAX_RECORDS)
        .with_topics(
            topics
                .into_iter()
                .map(|(id, partitions)| {
                    FetchTopic::default()
                        .with_topic_id(id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

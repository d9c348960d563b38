//! One consumer that is a member of a real consumer group: it finds the
//! coordinator, joins (classic: JoinGroup/SyncGroup with the harness's
//! assignor, heartbeats in a background task; KIP-848: a
//! ConsumerGroupHeartbeat loop adopting what the broker assigns), starts
//! each assigned partition at its committed offset (else the workload's
//! start), fetches, commits offsets every second and on every change of
//! assignment, and leaves the group at the end.

use crate::error::{BenchError, Result};
use crate::group::assignor::TopicPartition;
use crate::group::member::{
    commit_offsets, fetch_committed, find_coordinator, ClassicMember, ConsumerMember,
    GroupSettings, FENCED_MEMBER_EPOCH, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
    STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID,
};
use crate::kafka::batch::walk_batches;
use crate::kafka::client::{
    connect_any, list_offsets, ConnectionPool, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP,
};
use crate::kafka::connection::Connection;
use crate::runner::consumer::fetch_request;
use crate::runner::producer::now_us;
use crate::runner::CONNECT_TIMEOUT;
use crate::stats::Recorder;
use crate::workload::{GroupProtocol, StartOffset, Workload};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const COMMIT_INTERVAL: Duration = Duration::from_secs(1);

/// What every member of the run currently owns, so that the runner can
/// wait for a complete, disjoint assignment before producing.
#[derive(Debug, Default)]
pub struct GroupStatus {
    owned: Mutex<BTreeMap<usize, Vec<TopicPartition>>>,
}

impl GroupStatus {
    pub(crate) fn report(&self, member: usize, owned: &[TopicPartition]) {
        if let Ok(mut map) = self.owned.lock() {
            map.insert(member, owned.to_vec());
        }
    }

    /// True when all `members` have reported and together own each of
    /// `total` partitions exactly once (`shared`: a share group's, at
    /// least once, each member owning some).
    pub fn complete(&self, members: usize, total: usize, shared: bool) -> bool {
        let Ok(map) = self.owned.lock() else {
            return false;
        };
        let mut all: Vec<&TopicPartition> = map.values().flatten().collect();
        let count = all.len();
        all.sort();
        all.dedup();
        let once = if shared {
            map.values().all(|owned| !owned.is_empty())
        } else {
            count == total
        };
        map.len() == members && once && all.len() == total
    }
}

pub struct GroupConsumerSpec {
    pub index: usize,
    pub bootstrap: String,
    pub client_id: String,
    pub brokers: HashMap<i32, String>,
    pub leaders: HashMap<TopicPartition, i32>,
    pub settings: Arc<GroupSettings>,
    pub workload: Arc<Workload>,
    pub recorder: Arc<Recorder>,
    pub stop: Arc<AtomicBool>,
    pub status: Arc<GroupStatus>,
}

enum Member {
    Classic(ClassicMember),
    Consumer(ConsumerMember),
}

impl Member {
    fn coordinator(&self) -> Arc<Connection> {
        match self {
            Member::Classic(m) => m.coordinator().clone(),
            Member::Consumer(m) => m.coordinator().clone(),
        }
    }

    fn identity(&self) -> (String, i32) {
        match self {
            Member::Classic(m) => m.identity(),
            Member::Consumer(m) => m.identity(),
        }
    }
}

struct Positions {
    offsets: HashMap<TopicPartition, i64>,
}

pub async fn run_group_consumer(spec: GroupConsumerSpec) -> Result<()> {
    let group = spec.settings.group_id.clone();
    let bootstrap = connect_any(&spec.bootstrap, &spec.client_id, CONNECT_TIMEOUT).await?;
    let coordinator_addr = find_coordinator(&bootstrap, &group).await?;
    let coordinator = Connection::connect(&coordinator_addr, &spec.client_id).await?;
    let mut pool = ConnectionPool::new(spec.client_id.clone(), spec.brokers.clone());
    let member_stop = Arc::new(AtomicBool::new(false));
    let mut member = match spec.workload.group_protocol {
        GroupProtocol::Classic => {
            Member::Classic(ClassicMember::new(coordinator, spec.settings.clone()))
        }
        GroupProtocol::Consumer | GroupProtocol::Share => {
            if spec.settings.topic_ids.is_empty() {
                return Err(BenchError::Protocol(
                    "group.protocol=consumer needs topic ids (Metadata v10+)".into(),
                ));
            }
            Member::Consumer(ConsumerMember::new(coordinator, spec.settings.clone())?)
        }
    };
    let heartbeats = match &member {
        Member::Classic(m) => Some(m.spawn_heartbeats(member_stop.clone())),
        Member::Consumer(_) => None,
    };
    let mut positions = Positions {
        offsets: HashMap::new(),
    };
    let result = consume_loop(&spec, &mut member, &mut pool, &mut positions).await;
    // Final commit, then leave.
    commit_quietly(&member_commit_view(&member), &group, &positions).await;
    member_stop.store(true, Ordering::Relaxed);
    let left = match &mut member {
        Member::Classic(m) => m.leave().await,
        Member::Consumer(m) => m.leave().await,
    };
    if let Some(handle) = heartbeats {
        match handle.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => spec.recorder.record_error(format!("heartbeat: {error}")),
            Err(error) => spec
                .recorder
                .record_error(format!("heartbeat task: {error}")),
        }
    }
    result?;
    left
}

/// Membership, fetching and periodic commits until `stop`.
async fn consume_loop(
    spec: &GroupConsumerSpec,
    member: &mut Member,
    pool: &mut ConnectionPool,
    positions: &mut Positions,
) -> Result<()> {
    let group = spec.settings.group_id.clone();
    let mut owned: Vec<TopicPartition> = Vec::new();
    let mut last_commit = Instant::now();
    while !spec.stop.load(Ordering::Relaxed) {
        // Membership first: a new assignment replaces the owned set.
        if let Some(assignment) = membership_change(member, &group, &owned, positions).await? {
            adopt_assignment(spec, member, pool, positions, &assignment).await?;
            owned = assignment;
            spec.status.report(spec.index, &owned);
        }
        if owned.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        if let Err(error) = fetch_once(spec, pool, &owned, positions).await {
            spec.recorder.record_error(format!("group fetch: {error}"));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if last_commit.elapsed() >= COMMIT_INTERVAL {
            last_commit = Instant::now();
            commit_positions(spec, member, &group, positions).await;
        }
    }
    Ok(())
}

/// The member's new assignment, if a (re)join or heartbeat brought one:
/// a classic member that must rejoin commits its positions first.
async fn membership_change(
    member: &mut Member,
    group: &str,
    owned: &[TopicPartition],
    positions: &Positions,
) -> Result<Option<Vec<TopicPartition>>> {
    match member {
        Member::Classic(m) => {
            if m.needs_join() {
                let (member_id, generation) = m.identity();
                let view = CommitView {
                    coordinator: m.coordinator().clone(),
                    member_id,
                    generation,
                };
                commit_quietly(&view, group, positions).await;
                Ok(Some(m.join(owned).await?))
            } else {
                Ok(None)
            }
        }
        Member::Consumer(m) => {
            if m.due() {
                m.heartbeat().await
            } else {
                Ok(None)
            }
        }
    }
}

/// Switches the positions to `assignment`: commits and drops the revoked
/// partitions, and starts the added ones where [`start_offsets`] says.
async fn adopt_assignment(
    spec: &GroupConsumerSpec,
    member: &Member,
    pool: &mut ConnectionPool,
    positions: &mut Positions,
    assignment: &[TopicPartition],
) -> Result<()> {
    let group = &spec.settings.group_id;
    // Commit what is being given up, then start the new set.
    let revoked = Positions {
        offsets: positions
            .offsets
            .iter()
            .filter(|(tp, _)| !assignment.contains(tp))
            .map(|(tp, offset)| (tp.clone(), *offset))
            .collect(),
    };
    commit_quietly(&member_commit_view(member), group, &revoked).await;
    positions.offsets.retain(|tp, _| assignment.contains(tp));
    let added: Vec<TopicPartition> = assignment
        .iter()
        .filter(|tp| !positions.offsets.contains_key(*tp))
        .cloned()
        .collect();
    let starts = start_offsets(&member.coordinator(), group, &added, spec, pool).await?;
    positions.offsets.extend(starts);
    Ok(())
}

/// The periodic commit of every position; a refusal because a rebalance
/// is under way is expected and not an error.
async fn commit_positions(
    spec: &GroupConsumerSpec,
    member: &Member,
    group: &str,
    positions: &Positions,
) {
    let (member_id, generation) = member.identity();
    let committed = commit_offsets(
        &member.coordinator(),
        group,
        generation,
        &member_id,
        &positions.offsets,
    )
    .await;
    match committed {
        Ok(()) => {}
        // A rebalance under way refuses commits; the next join commits.
        Err(BenchError::Broker {
            error_code:
                ILLEGAL_GENERATION
                | UNKNOWN_MEMBER_ID
                | REBALANCE_IN_PROGRESS
                | FENCED_MEMBER_EPOCH
                | STALE_MEMBER_EPOCH,
            ..
        }) => {}
        Err(error) => spec.recorder.record_error(format!("commit: {error}")),
    }
}

/// What a commit needs from the member: coordinator, member id, generation.
struct CommitView {
    coordinator: Arc<Connection>,
    member_id: String,
    generation: i32,
}

fn member_commit_view(member: &Member) -> CommitView {
    let (member_id, generation) = member.identity();
    CommitView {
        coordinator: member.coordinator(),
        member_id,
        generation,
    }
}

/// Commits, ignoring failure: used around rebalances, where the broker may
/// refuse a commit of the old generation.
async fn commit_quietly(view: &CommitView, group: &str, positions: &Positions) {
    if view.member_id.is_empty() {
        return;
    }
    let _ = commit_offsets(
        &view.coordinator,
        group,
        view.generation,
        &view.member_id,
        &positions.offsets,
    )
    .await;
}

/// Committed offsets of `added`, else the workload's start offset.
async fn start_offsets(
    coordinator: &Connection,
    group: &str,
    added: &[TopicPartition],
    spec: &GroupConsumerSpec,
    pool: &mut ConnectionPool,
) -> Result<HashMap<TopicPartition, i64>> {
    if added.is_empty() {
        return Ok(HashMap::new());
    }
    let mut starts = fetch_committed(coordinator, group, added).await?;
    let timestamp = match spec.workload.consumer_start {
        StartOffset::Earliest => EARLIEST_TIMESTAMP,
        StartOffset::Latest => LATEST_TIMESTAMP,
    };
    let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    for tp in added.iter().filter(|tp| !starts.contains_key(*tp)) {
        let leader = spec.leaders.get(tp).copied().unwrap_or(-1);
        by_leader.entry(leader).or_default().push(tp.clone());
    }
    for (leader, partitions) in by_leader {
        let connection = pool.get(leader).await?;
        starts.extend(list_offsets(&connection, &partitions, timestamp).await?);
    }
    Ok(starts)
}

/// One fetch round: a request to every leader (pipelined), then the answers.
async fn fetch_once(
    spec: &GroupConsumerSpec,
    pool: &mut ConnectionPool,
    owned: &[TopicPartition],
    positions: &mut Positions,
) -> Result<()> {
    let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    for tp in owned {
        let leader = spec.leaders.get(tp).copied().unwrap_or(-1);
        by_leader.entry(leader).or_default().push(tp.clone());
    }
    let mut pending = Vec::new();
    for (leader, partitions) in &by_leader {
        let connection = pool.get(*leader).await?;
        let request = fetch_request(&spec.workload, partitions, &positions.offsets);
        pending.push(connection.send(&request).await?);
    }
    let mut latencies_us = Vec::new();
    for waiting in pending {
        let response = waiting.wait().await?;
        if response.error_code != 0 {
            spec.recorder
                .record_error(format!("fetch: error {}", response.error_code));
            continue;
        }
        for topic in &response.responses {
            let topic_name = topic.topic.0.as_str();
            for partition in &topic.partitions {
                let key = (topic_name.to_string(), partition.partition_index);
                if partition.error_code != 0 {
                    spec.recorder.record_error(format!(
                        "fetch {topic_name}-{}: error {}",
                        key.1, partition.error_code
                    ));
                    continue;
                }
                let Some(records) = &partition.records else {
                    continue;
                };
                let fetch_offset = positions.offsets.get(&key).copied().unwrap_or(0);
                latencies_us.clear();
                let received_us = now_us();
                let summary = walk_batches(records, fetch_offset, |value| {
                    if let Some(prefix) = value.get(0..8) {
                        let mut sent = [0u8; 8];
                        sent.copy_from_slice(prefix);
                        latencies_us.push(received_us.saturating_sub(u64::from_be_bytes(sent)));
                    }
                })?;
                spec.recorder.record_consumed(
                    summary.records,
                    summary.value_bytes,
                    latencies_us.iter().copied(),
                );
                if let Some(next) = summary.next_offset {
                    positions.offsets.insert(key, next.max(fetch_offset));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_complete_only_for_a_disjoint_full_assignment() {
        let status = GroupStatus::default();
        let tp = |p: i32| ("t".to_string(), p);
        status.report(0, &[tp(0), tp(1), tp(2), tp(3)]);
        assert!(!status.complete(2, 4, false), "second member not reported");
        status.report(1, &[tp(2), tp(3)]);
        assert!(!status.complete(2, 4, false), "overlap during a rebalance");
        status.report(0, &[tp(0), tp(1)]);
        assert!(status.complete(2, 4, false));
        assert!(!status.complete(2, 5, false));
    }

    #[test]
    fn a_share_group_is_complete_when_every_member_owns_some() {
        let status = GroupStatus::default();
        let tp = |p: i32| ("t".to_string(), p);
        status.report(0, &[tp(0)]);
        status.report(1, &[]);
        assert!(!status.complete(2, 1, true), "a member owns nothing yet");
        status.report(1, &[tp(0)]);
        assert!(status.complete(2, 1, true), "one partition, shared");
        assert!(!status.complete(2, 1, false), "not once each");
    }
}

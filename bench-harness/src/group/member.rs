//! Group membership on the wire: FindCoordinator; the classic protocol
//! (JoinGroup with the MEMBER_ID_REQUIRED retry, SyncGroup with the leader
//! running the harness's own assignor, Heartbeat in a background task,
//! LeaveGroup); the KIP-848 protocol (ConsumerGroupHeartbeat, adopting the
//! assignment the broker computes); and OffsetCommit / OffsetFetch.

use crate::error::{BenchError, Result};
use crate::group::assignor::{Assignor, MemberSubscription, TopicPartition};
use crate::group::protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use crate::kafka::client::topic_name;
use crate::kafka::connection::Connection;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest,
    JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;
pub const ILLEGAL_GENERATION: i16 = 22;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const FENCED_MEMBER_EPOCH: i16 = 110;
pub const STALE_MEMBER_EPOCH: i16 = 113;

/// How long membership steps keep retrying retriable errors.
const RETRY_FOR: Duration = Duration::from_secs(60);
const RETRY_PAUSE: Duration = Duration::from_millis(100);

fn retriable(error_code: i16) -> bool {
    matches!(
        error_code,
        COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR
    )
}

fn group_id(name: &str) -> GroupId {
    GroupId(StrBytes::from_string(name.to_string()))
}

fn broker_error(error_code: i16, context: String) -> BenchError {
    BenchError::Broker {
        error_code,
        context,
    }
}

/// Everything a member needs to know about its group and topics.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    pub group_id: String,
    pub topics: Vec<String>,
    /// Topic → partition count.
    pub partitions: BTreeMap<String, i32>,
    /// Topic id → name, for KIP-848 assignments.
    pub topic_ids: HashMap<Uuid, String>,
    pub assignor: Assignor,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub heartbeat_interval: Duration,
}

/// Finds the group coordinator's address through `bootstrap`.
pub async fn find_coordinator(bootstrap: &Connection, group: &str) -> Result<String> {
    let version = bootstrap.version_of::<FindCoordinatorRequest>()?;
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    loop {
        let key = StrBytes::from_string(group.to_string());
        let request = if version >= 4 {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
        } else {
            FindCoordinatorRequest::default().with_key(key)
        };
        let response = bootstrap.call(&request).await?;
        let (error_code, host, port) = if version >= 4 {
            let coordinator = response.coordinators.first().ok_or_else(|| {
                BenchError::Protocol("FindCoordinator: no coordinator in the answer".into())
            })?;
            (
                coordinator.error_code,
                coordinator.host.to_string(),
                coordinator.port,
            )
        } else {
            (
                response.error_code,
                response.host.to_string(),
                response.port,
            )
        };
        if error_code == 0 {
            return Ok(format!("{host}:{port}"));
        }
        if !retriable(error_code) || tokio::time::Instant::now() >= deadline {
            return Err(broker_error(
                error_code,
                format!("find coordinator of {group}"),
            ));
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// Commits `offsets` (the next offset to read, per partition).
pub async fn commit_offsets(
    coordinator: &Connection,
    group: &str,
    generation_or_epoch: i32,
    member_id: &str,
    offsets: &HashMap<TopicPartition, i64>,
) -> Result<()> {
    if offsets.is_empty() {
        return Ok(());
    }
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, partition), &offset) in offsets {
        by_topic.entry(topic.as_str()).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1),
        );
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(generation_or_epoch)
        .with_member_id(StrBytes::from_string(member_id.to_string()))
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
    let response = coordinator.call(&request).await?;
    for topic in &response.topics {
        for partition in &topic.partitions {
            if partition.error_code != 0 {
                return Err(broker_error(
                    partition.error_code,
                    format!(
                        "commit {}-{} for group {group}",
                        topic.name.0.as_str(),
                        partition.partition_index
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Committed offsets of `partitions`; partitions without one are left out.
pub async fn fetch_committed(
    coordinator: &Connection,
    group: &str,
    partitions: &[TopicPartition],
) -> Result<HashMap<TopicPartition, i64>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic.as_str()).or_default().push(*partition);
    }
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(Some(
            by_topic
                .into_iter()
                .map(|(topic, indexes)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partition_indexes(indexes)
                })
                .collect(),
        ));
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    loop {
        let response = coordinator.call(&request).await?;
        if retriable(response.error_code) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(RETRY_PAUSE).await;
            continue;
        }
        if response.error_code != 0 {
            return Err(broker_error(
                response.error_code,
                format!("offset fetch for group {group}"),
            ));
        }
        let mut committed = HashMap::new();
        for topic in &response.topics {
            for partition in &topic.partitions {
                if partition.error_code != 0 {
                    return Err(broker_error(
                        partition.error_code,
                        format!(
                            "offset fetch {}-{}",
                            topic.name.0.as_str(),
                            partition.partition_index
                        ),
                    ));
                }
                if partition.committed_offset >= 0 {
                    committed.insert(
                        (topic.name.0.to_string(), partition.partition_index),
                        partition.committed_offset,
                    );
                }
            }
        }
        return Ok(committed);
    }
}

#[derive(Debug, Clone, Default)]
struct ClassicState {
    member_id: String,
    generation: i32,
}

/// A member of a classic-protocol group.
pub struct ClassicMember {
    coordinator: Arc<Connection>,
    settings: Arc<GroupSettings>,
    state: Arc<Mutex<ClassicState>>,
    /// Set by the heartbeat task when the group is rebalancing.
    rejoin: Arc<AtomicBool>,
}

impl ClassicMember {
    pub fn new(coordinator: Arc<Connection>, settings: Arc<GroupSettings>) -> Self {
        ClassicMember {
            coordinator,
            settings,
            state: Arc::default(),
            rejoin: Arc::new(AtomicBool::new(true)),
        }
    }

    pub fn coordinator(&self) -> &Arc<Connection> {
        &self.coordinator
    }

    /// Whether the member must (re)join before consuming on.
    pub fn needs_join(&self) -> bool {
        self.rejoin.load(Ordering::Relaxed)
    }

    fn state(&self) -> ClassicState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn set_state(&self, member_id: String, generation: i32) {
        if let Ok(mut state) = self.state.lock() {
            state.member_id = member_id;
            state.generation = generation;
        }
    }

    /// `(member id, generation)` for commits.
    pub fn identity(&self) -> (String, i32) {
        let state = self.state();
        (state.member_id, state.generation)
    }

    /// JoinGroup then SyncGroup until both succeed; returns the assignment.
    pub async fn join(&self, owned: &[TopicPartition]) -> Result<Vec<TopicPartition>> {
        let settings = &self.settings;
        let group = settings.group_id.as_str();
        let metadata = encode_subscription(&settings.topics, owned)?;
        let deadline = tokio::time::Instant::now() + RETRY_FOR;
        loop {
            if tokio::time::Instant::now() >= deadline {
                return Err(BenchError::Timeout(format!("joining group {group}")));
            }
            self.rejoin.store(false, Ordering::Relaxed);
            let state = self.state();
            let request = JoinGroupRequest::default()
                .with_group_id(group_id(group))
                .with_session_timeout_ms(settings.session_timeout_ms)
                .with_rebalance_timeout_ms(settings.rebalance_timeout_ms)
                .with_member_id(StrBytes::from_string(state.member_id.clone()))
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(settings.assignor.name()))
                    .with_metadata(metadata.clone())]);
            let joined = self.coordinator.call(&request).await?;
            match joined.error_code {
                0 => {}
                MEMBER_ID_REQUIRED => {
                    // KIP-394: rejoin with the id the coordinator handed out.
                    self.set_state(joined.member_id.to_string(), -1);
                    continue;
                }
                UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION => {
                    self.set_state(String::new(), -1);
                    continue;
                }
                REBALANCE_IN_PROGRESS => continue,
                code if retriable(code) => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
                code => return Err(broker_error(code, format!("join group {group}"))),
            }
            let member_id = joined.member_id.to_string();
            self.set_state(member_id.clone(), joined.generation_id);
            let assignments = if joined.leader.as_str() == member_id {
                self.leader_assignments(&joined.members)?
            } else {
                Vec::new()
            };
            let protocol_name = joined
                .protocol_name
                .clone()
                .unwrap_or_else(|| StrBytes::from_static_str(settings.assignor.name()));
            let request = SyncGroupRequest::default()
                .with_group_id(group_id(group))
                .with_generation_id(joined.generation_id)
                .with_member_id(StrBytes::from_string(member_id.clone()))
                .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                .with_protocol_name(Some(protocol_name))
                .with_assignments(assignments);
            let synced = self.coordinator.call(&request).await?;
            match synced.error_code {
                0 => return decode_assignment(synced.assignment),
                REBALANCE_IN_PROGRESS => continue,
                UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION => {
                    self.set_state(String::new(), -1);
                    continue;
                }
                code if retriable(code) => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
                code => return Err(broker_error(code, format!("sync group {group}"))),
            }
        }
    }

    /// The leader's part: run the assignor over every member's subscription.
    fn leader_assignments(
        &self,
        members: &[kafka_protocol::messages::join_group_response::JoinGroupResponseMember],
    ) -> Result<Vec<SyncGroupRequestAssignment>> {
        let mut subscriptions = Vec::new();
        let mut partitions = BTreeMap::new();
        for member in members {
            let (topics, owned) = decode_subscription(member.metadata.clone())?;
            for topic in &topics {
                if let Some(&count) = self.settings.partitions.get(topic) {
                    partitions.insert(topic.clone(), count);
                }
            }
            subscriptions.push(MemberSubscription {
                member_id: member.member_id.to_string(),
                topics,
                owned,
            });
        }
        let assignment = self.settings.assignor.assign(&subscriptions, &partitions);
        assignment
            .into_iter()
            .map(|(member_id, partitions)| {
                Ok(SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(member_id))
                    .with_assignment(encode_assignment(&partitions)?))
            })
            .collect()
    }

    /// Heartbeats every `heartbeat_interval` until `stop`; a rebalance (or a
    /// fencing) sets the rejoin flag.
    pub fn spawn_heartbeats(&self, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Result<()>> {
        let coordinator = self.coordinator.clone();
        let state = self.state.clone();
        let rejoin = self.rejoin.clone();
        let settings = self.settings.clone();
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(settings.heartbeat_interval).await;
                if rejoin.load(Ordering::Relaxed) {
                    continue; // a join is under way; it is the heartbeat
                }
                let current = state.lock().map(|s| s.clone()).unwrap_or_default();
                if current.member_id.is_empty() {
                    continue;
                }
                let request = HeartbeatRequest::default()
                    .with_group_id(group_id(&settings.group_id))
                    .with_generation_id(current.generation)
                    .with_member_id(StrBytes::from_string(current.member_id));
                let response = coordinator.call(&request).await?;
                match response.error_code {
                    0 => {}
                    REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID => {
                        rejoin.store(true, Ordering::Relaxed)
                    }
                    code if retriable(code) => {}
                    code => return Err(broker_error(code, "heartbeat".into())),
                }
            }
            Ok(())
        })
    }

    /// Leaves the group (best effort is the caller's choice).
    pub async fn leave(&self) -> Result<()> {
        let state = self.state();
        if state.member_id.is_empty() {
            return Ok(());
        }
        let version = self.coordinator.version_of::<LeaveGroupRequest>()?;
        let member_id = StrBytes::from_string(state.member_id);
        let request = if version >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(group_id(&self.settings.group_id))
                .with_members(vec![MemberIdentity::default().with_member_id(member_id)])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(group_id(&self.settings.group_id))
                .with_member_id(member_id)
        };
        let response = self.coordinator.call(&request).await?;
        if response.error_code != 0 && response.error_code != UNKNOWN_MEMBER_ID {
            return Err(broker_error(response.error_code, "leave group".into()));
        }
        Ok(())
    }
}

/// A member of a KIP-848 (`group.protocol=consumer`) group: the broker
/// assigns, the member heartbeats and acknowledges what it owns.
pub struct ConsumerMember {
    coordinator: Arc<Connection>,
    settings: Arc<GroupSettings>,
    member_id: String,
    epoch: i32,
    owned: Vec<TopicPartition>,
    interval: Duration,
    next_at: tokio::time::Instant,
}

impl ConsumerMember {
    pub fn new(coordinator: Arc<Connection>, settings: Arc<GroupSettings>) -> Result<Self> {
        // v1 wants a client-chosen member id; v0 has the broker choose.
        let member_id = if coordinator.version_of::<ConsumerGroupHeartbeatRequest>()? >= 1 {
            Uuid::from_bytes(rand::random()).simple().to_string()
        } else {
            String::new()
        };
        Ok(ConsumerMember {
            coordinator,
            interval: settings.heartbeat_interval,
            settings,
            member_id,
            epoch: 0,
            owned: Vec::new(),
            next_at: tokio::time::Instant::now(),
        })
    }

    pub fn coordinator(&self) -> &Arc<Connection> {
        &self.coordinator
    }

    pub fn identity(&self) -> (String, i32) {
        (self.member_id.clone(), self.epoch)
    }

    /// Whether a heartbeat is due.
    pub fn due(&self) -> bool {
        tokio::time::Instant::now() >= self.next_at
    }

    fn request(&self, epoch: i32) -> ConsumerGroupHeartbeatRequest {
        let mut owned: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in &self.owned {
            owned.entry(topic.as_str()).or_default().push(*partition);
        }
        let ids: HashMap<&str, Uuid> = self
            .settings
            .topic_ids
            .iter()
            .map(|(id, name)| (name.as_str(), *id))
            .collect();
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group_id(&self.settings.group_id))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(self.settings.rebalance_timeout_ms)
            .with_subscribed_topic_names(Some(
                self.settings.topics.iter().map(|t| topic_name(t)).collect(),
            ))
            .with_topic_partitions(Some(
                owned
                    .into_iter()
                    .filter_map(|(topic, partitions)| {
                        Some(
                            TopicPartitions::default()
                                .with_topic_id(*ids.get(topic)?)
                                .with_partitions(partitions),
                        )
                    })
                    .collect(),
            ))
    }

    /// One heartbeat. Returns the new assignment when the broker sent one
    /// that differs from what is owned (or `Some(empty)` when fenced).
    pub async fn heartbeat(&mut self) -> Result<Option<Vec<TopicPartition>>> {
        let response = self.coordinator.call(&self.request(self.epoch)).await?;
        self.next_at = tokio::time::Instant::now() + self.interval;
        match response.error_code {
            0 => {}
            UNKNOWN_MEMBER_ID | FENCED_MEMBER_EPOCH => {
                // Fenced: give everything up and join again as new.
                self.epoch = 0;
                self.next_at = tokio::time::Instant::now();
                if self.owned.is_empty() {
                    return Ok(None);
                }
                self.owned.clear();
                return Ok(Some(Vec::new()));
            }
            code if retriable(code) => return Ok(None),
            code => {
                return Err(broker_error(
                    code,
                    format!(
                        "consumer group heartbeat: {}",
                        response.error_message.as_ref().map_or("", |m| m.as_str())
                    ),
                ))
            }
        }
        if let Some(member_id) = &response.member_id {
            if !member_id.is_empty() {
                self.member_id = member_id.to_string();
            }
        }
        self.epoch = response.member_epoch;
        if response.heartbeat_interval_ms > 0 {
            self.interval = Duration::from_millis(response.heartbeat_interval_ms as u64)
                .min(self.settings.heartbeat_interval);
        }
        let Some(assignment) = response.assignment else {
            return Ok(None);
        };
        let mut partitions = Vec::new();
        for topic in &assignment.topic_partitions {
            let name = self
                .settings
                .topic_ids
                .get(&topic.topic_id)
                .ok_or_else(|| {
                    BenchError::Protocol(format!(
                        "assignment names unknown topic id {}",
                        topic.topic_id
                    ))
                })?;
            partitions.extend(topic.partitions.iter().map(|&p| (name.clone(), p)));
        }
        partitions.sort();
        if partitions == self.owned {
            return Ok(None);
        }
        self.owned = partitions.clone();
        // Acknowledge what we now own at once.
        self.next_at = tokio::time::Instant::now();
        Ok(Some(partitions))
    }

    /// Leaves the group: a heartbeat with epoch -1.
    pub async fn leave(&mut self) -> Result<()> {
        if self.member_id.is_empty() && self.epoch == 0 {
            return Ok(());
        }
        let response = self.coordinator.call(&self.request(-1)).await?;
        if response.error_code != 0 && response.error_code != UNKNOWN_MEMBER_ID {
            return Err(broker_error(
                response.error_code,
                "leave consumer group".into(),
            ));
        }
        Ok(())
    }
}

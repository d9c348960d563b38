//! The group coordinator on the broker. **Per shard**: each shard runs one
//! [`GroupCoordinator`] for the groups whose `__consumer_offsets` partition
//! (`offsets_partition_for(group, partitions)`, Kafka's placement) it owns.
//!
//! - [`call`]: the handlers' entry point. It creates `__consumer_offsets`
//!   (compacted) on first use, finds the owner shard of the group's partition
//!   and runs the call there, directly or over the mesh
//!   ([`ShardMessage::Group`]).
//! - On the owner, [`execute`] steps the pure coordinator, appends the records
//!   it returns (and those of a `tick` right after) to the owned
//!   `__consumer_offsets` partitions, waits until they are durable and only
//!   then answers — the coordinator's contract, so an acknowledged commit or
//!   assignment survives a crash. JoinGroup/SyncGroup answers that come later
//!   wait on a oneshot registered under the call's token.
//! - [`run_timer`]: a per-shard task that calls `tick` at the coordinator's
//!   next deadline (session expiry, rebalance timeouts, offset expiry).
//! - [`replay`]: at start, before the shard serves anything, every record of
//!   the owned `__consumer_offsets` partitions is fed back to the coordinator.

use crate::config::BrokerConfig;
use crate::controller::{self, ControllerRequest};
use crate::group::coordinator::DescribedGroup;
use crate::group::records::{decode_key, RecordKey};
use crate::group::{
    offsets_partition_for, ConsumerGroup, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse,
    FetchedOffset, GroupConfig, GroupCoordinator, GroupResponse, HeartbeatRequest, JoinOutcome,
    JoinRequest, JoinResponse, LeavingMember, ListedGroup, OffsetCommitRequest, Record,
    RequestToken, SyncOutcome, SyncRequest, SyncResponse, TopicInfo, TopicPartition,
};
use crate::mesh::ShardMessage;
use crate::shard::Shard;
use engine::batch::header::Compression;
use engine::batch::{batches, records, BatchBuilder};
use engine::log::ReadMode;
use engine::ErrorCode;
use engine::ReadData;
use futures::channel::oneshot;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Duration;

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Longest sleep of the timer task: a call may create a deadline earlier than
/// the one the timer sleeps towards, and each call also ticks, so this only
/// bounds how late a deadline met by no call fires.
const TIMER_MAX_SLEEP_MS: i64 = 50;

/// Bytes read per step while replaying.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// One coordinator call, sent to the owner shard (all fields `Send`).
#[derive(Debug)]
pub enum GroupRequest {
    /// JoinGroup.
    Join(JoinRequest),
    /// SyncGroup.
    Sync(SyncRequest),
    /// Heartbeat (classic).
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup (batch form).
    Leave {
        /// Group id.
        group_id: String,
        /// Members leaving.
        members: Vec<LeavingMember>,
    },
    /// ConsumerGroupHeartbeat (KIP-848).
    ConsumerHeartbeat(ConsumerHeartbeatRequest),
    /// OffsetCommit.
    Commit(OffsetCommitRequest),
    /// TxnOffsetCommit's membership check, before the offsets join the
    /// transaction: answers [`GroupReply::Code`].
    ValidateTxnCommit(OffsetCommitRequest),
    /// The offsets of a committed transaction, applied without a membership
    /// check (made at TxnOffsetCommit): answers [`GroupReply::Committed`].
    CommitTxn(OffsetCommitRequest),
    /// OffsetFetch of one group (`None`: every committed partition).
    Fetch {
        /// Group id.
        group_id: String,
        /// Partitions asked for.
        partitions: Option<Vec<TopicPartition>>,
    },
    /// OffsetDelete.
    DeleteOffsets {
        /// Group id.
        group_id: String,
        /// Partitions.
        partitions: Vec<TopicPartition>,
    },
    /// DeleteGroups of one group.
    DeleteGroup(String),
    /// DescribeGroups of one group.
    Describe(String),
    /// ConsumerGroupDescribe of one group.
    DescribeConsumer(String),
    /// ListGroups on one shard (the handler asks every shard).
    List(Vec<String>),
}

/// The answer to a [`GroupRequest`], variant by variant.
#[derive(Debug)]
pub enum GroupReply {
    /// The coordinator could not be reached or could not persist: the error
    /// code to answer with (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR...).
    Unavailable(ErrorCode),
    /// JoinGroup.
    Join(JoinResponse),
    /// SyncGroup.
    Sync(SyncResponse),
    /// Heartbeat, DeleteGroup.
    Code(ErrorCode),
    /// LeaveGroup: per member.
    Codes(Vec<ErrorCode>),
    /// ConsumerGroupHeartbeat.
    ConsumerHeartbeat(ConsumerHeartbeatResponse),
    /// OffsetCommit: per partition.
    Committed(Vec<(TopicPartition, ErrorCode)>),
    /// OffsetFetch.
    Fetched(Vec<FetchedOffset>),
    /// OffsetDelete: group error and per partition.
    DeletedOffsets(ErrorCode, Vec<(TopicPartition, ErrorCode)>),
    /// DescribeGroups.
    Described(DescribedGroup),
    /// ConsumerGroupDescribe.
    DescribedConsumer(Result<Box<ConsumerGroup>, ErrorCode>),
    /// ListGroups.
    Listed(Vec<ListedGroup>),
}

/// One shard's coordinator and its waiting JoinGroup/SyncGroup callers.
pub struct GroupRuntime {
    coordinator: RefCell<GroupCoordinator>,
    waiters: RefCell<HashMap<RequestToken, oneshot::Sender<GroupResponse>>>,
    next_token: Cell<RequestToken>,
}

impl GroupRuntime {
    /// An empty runtime; member ids are seeded from the clock and the shard
    /// id so that no two shards or starts hand out the same ids.
    pub fn new(config: &BrokerConfig, shard_id: usize) -> Self {
        let clock_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let group_config = GroupConfig {
            member_id_seed: clock_ns ^ ((shard_id as u64) << 56),
            ..config.group.clone()
        };
        Self {
            coordinator: RefCell::new(GroupCoordinator::new(group_config)),
            waiters: RefCell::new(HashMap::new()),
            next_token: Cell::new(1),
        }
    }

    fn take_token(&self) -> RequestToken {
        let token = self.next_token.get();
        self.next_token.set(token.wrapping_add(1));
        token
    }

    /// Committed offsets of every group this shard coordinates, as
    /// `(group, topic, partition, offset)` (for the lag gauge).
    pub fn committed_offsets(&self) -> Vec<(String, String, i32, i64)> {
        let coordinator = self.coordinator.borrow();
        let store = coordinator.offsets();
        let mut rows = Vec::new();
        for group in store.group_ids() {
            for (tp, value) in store.all(group) {
                rows.push((group.clone(), tp.topic.clone(), tp.partition, value.offset));
            }
        }
        rows
    }
}

/// Milliseconds since the epoch (the coordinator's clock).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The partition count of `__consumer_offsets`, creating it (compacted, with
/// `offsets.topic.num.partitions` partitions) when it does not exist yet.
pub async fn ensure_offsets_topic(shard: &Rc<Shard>) -> Result<i32, ErrorCode> {
    if let Some(entry) = shard.topics.borrow().get(OFFSETS_TOPIC) {
        return Ok(entry.partitions);
    }
    let request = ControllerRequest::CreateTopic {
        name: OFFSETS_TOPIC.to_string(),
        partitions: shard.config.offsets_topic_num_partitions,
        configs: vec![("cleanup.policy".to_string(), "compact".to_string())],
        validate_only: false,
    };
    match controller::submit(shard, request).await {
        Ok(_) | Err((ErrorCode::TopicAlreadyExists, _)) => {}
        Err((code, message)) => {
            tracing::warn!(%code, %message, "cannot create __consumer_offsets");
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
    }
    shard
        .topics
        .borrow()
        .get(OFFSETS_TOPIC)
        .map(|e| e.partitions)
        .ok_or(ErrorCode::CoordinatorNotAvailable)
}

/// The shard coordinating `group_id`, given the partition count.
pub fn coordinator_shard(shard: &Shard, group_id: &str, partitions: i32) -> usize {
    let partition = offsets_partition_for(group_id, partitions);
    shard.owner(&engine::TopicPartition::new(OFFSETS_TOPIC, partition))
}

/// Runs `request` for `group_id` on the group's coordinator shard.
pub async fn call(shard: &Rc<Shard>, group_id: &str, request: GroupRequest) -> GroupReply {
    let partitions = match ensure_offsets_topic(shard).await {
        Ok(partitions) => partitions,
        Err(code) => return GroupReply::Unavailable(code),
    };
    let owner = coordinator_shard(shard, group_id, partitions);
    call_on(shard, owner, request).await
}

/// Runs `request` on shard `owner` (this one or another over the mesh).
pub async fn call_on(shard: &Rc<Shard>, owner: usize, request: GroupRequest) -> GroupReply {
    if owner == shard.id {
        return execute(shard, request).await;
    }
    let (reply, receiver) = oneshot::channel();
    if let Err(e) = shard
        .send_to(owner, ShardMessage::Group { request, reply })
        .await
    {
        tracing::warn!(owner, error = %e, "group request not delivered");
        return GroupReply::Unavailable(ErrorCode::CoordinatorNotAvailable);
    }
    receiver
        .await
        .unwrap_or(GroupReply::Unavailable(ErrorCode::CoordinatorNotAvailable))
}

/// What a call produced before anything is persisted.
enum Immediate {
    Reply(GroupReply),
    Later(oneshot::Receiver<GroupResponse>),
}

/// Owner side: step the coordinator, persist, answer.
pub async fn execute(shard: &Rc<Shard>, request: GroupRequest) -> GroupReply {
    let runtime = &shard.groups;
    let now = now_ms();
    let token = runtime.take_token();
    let is_commit = matches!(
        request,
        GroupRequest::Commit(_) | GroupRequest::CommitTxn(_)
    );
    let (immediate, records, responses) = {
        let table = shard.topics.borrow();
        let topics = |name: &str| {
            table.get(name).map(|e| TopicInfo {
                id: e.topic_id,
                partitions: e.partitions,
            })
        };
        let mut coordinator = runtime.coordinator.borrow_mut();
        let (immediate, mut records) =
            step(&mut coordinator, runtime, now, token, request, &topics);
        records.extend(coordinator.tick(now));
        (immediate, records, coordinator.take_responses())
    };
    let persisted = persist(shard, records).await;
    deliver(runtime, responses);
    let reply = match immediate {
        Immediate::Reply(reply) => reply,
        Immediate::Later(receiver) => match receiver.await {
            Ok(GroupResponse::Join(r)) => GroupReply::Join(r),
            Ok(GroupResponse::Sync(r)) => GroupReply::Sync(r),
            Err(_) => GroupReply::Unavailable(ErrorCode::CoordinatorNotAvailable),
        },
    };
    match (persisted, reply) {
        // A commit that did not reach the log must not be acknowledged.
        (Err(code), GroupReply::Committed(rows)) if is_commit => {
            GroupReply::Committed(rows.into_iter().map(|(tp, _)| (tp, code)).collect())
        }
        (_, reply) => reply,
    }
}

fn step(
    coordinator: &mut GroupCoordinator,
    runtime: &GroupRuntime,
    now: i64,
    token: RequestToken,
    request: GroupRequest,
    topics: &dyn Fn(&str) -> Option<TopicInfo>,
) -> (Immediate, Vec<Record>) {
    let reply = |r: GroupReply| Immediate::Reply(r);
    let wait = || {
        let (sender, receiver) = oneshot::channel();
        runtime.waiters.borrow_mut().insert(token, sender);
        Immediate::Later(receiver)
    };
    match request {
        GroupRequest::Join(req) => match coordinator.join_group(now, token, req) {
            (JoinOutcome::Respond(r), records) => (reply(GroupReply::Join(r)), records),
            (JoinOutcome::Pending, records) => (wait(), records),
        },
        GroupRequest::Sync(req) => match coordinator.sync_group(now, token, req) {
            (SyncOutcome::Respond(r), records) => (reply(GroupReply::Sync(r)), records),
            (SyncOutcome::Pending, records) => (wait(), records),
        },
        GroupRequest::Heartbeat(req) => (
            reply(GroupReply::Code(coordinator.heartbeat(now, &req))),
            Vec::new(),
        ),
        GroupRequest::Leave { group_id, members } => {
            let (codes, records) = coordinator.leave_group(now, &group_id, &members);
            (reply(GroupReply::Codes(codes)), records)
        }
        GroupRequest::ConsumerHeartbeat(req) => {
            let (response, records) = coordinator.consumer_heartbeat(now, &req, topics);
            (reply(GroupReply::ConsumerHeartbeat(response)), records)
        }
        GroupRequest::Commit(req) => {
            let (codes, records) = coordinator.commit_offsets(now, &req);
            (reply(GroupReply::Committed(codes)), records)
        }
        GroupRequest::ValidateTxnCommit(req) => (
            reply(GroupReply::Code(
                coordinator.validate_txn_offset_commit(&req),
            )),
            Vec::new(),
        ),
        GroupRequest::CommitTxn(req) => {
            let (codes, records) = coordinator.commit_txn_offsets(now, &req);
            (reply(GroupReply::Committed(codes)), records)
        }
        GroupRequest::Fetch {
            group_id,
            partitions,
        } => (
            reply(GroupReply::Fetched(
                coordinator.fetch_offsets(&group_id, partitions.as_deref()),
            )),
            Vec::new(),
        ),
        GroupRequest::DeleteOffsets {
            group_id,
            partitions,
        } => {
            let (code, rows, records) = coordinator.delete_offsets(&group_id, &partitions);
            (reply(GroupReply::DeletedOffsets(code, rows)), records)
        }
        GroupRequest::DeleteGroup(group_id) => {
            let (codes, records) = coordinator.delete_groups(std::slice::from_ref(&group_id));
            let code = codes.first().map_or(ErrorCode::UnknownServerError, |c| c.1);
            (reply(GroupReply::Code(code)), records)
        }
        GroupRequest::Describe(group_id) => (
            reply(GroupReply::Described(coordinator.describe_group(&group_id))),
            Vec::new(),
        ),
        GroupRequest::DescribeConsumer(group_id) => (
            reply(GroupReply::DescribedConsumer(
                coordinator
                    .describe_consumer_group(&group_id)
                    .map(|g| Box::new(g.clone())),
            )),
            Vec::new(),
        ),
        GroupRequest::List(states) => (
            reply(GroupReply::Listed(coordinator.list_groups(&states))),
            Vec::new(),
        ),
    }
}

/// Wakes the callers waiting for delayed answers (after their records are durable).
fn deliver(runtime: &GroupRuntime, responses: Vec<(RequestToken, GroupResponse)>) {
    let mut waiters = runtime.waiters.borrow_mut();
    for (token, response) in responses {
        if let Some(sender) = waiters.remove(&token) {
            // The client may have gone; nothing to do then.
            let _ = sender.send(response);
        }
    }
}

/// Appends `records` to the `__consumer_offsets` partitions of their groups
/// (all owned by this shard) and waits until they are durable.
async fn persist(shard: &Rc<Shard>, records: Vec<Record>) -> Result<(), ErrorCode> {
    if records.is_empty() {
        return Ok(());
    }
    let Some(partitions) = shard
        .topics
        .borrow()
        .get(OFFSETS_TOPIC)
        .map(|e| e.partitions)
    else {
        tracing::warn!("__consumer_offsets missing; group records not persisted");
        return Err(ErrorCode::CoordinatorNotAvailable);
    };
    let mut by_partition: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    for record in records {
        let group = match decode_key(&record.0) {
            Ok(RecordKey::OffsetCommit { group, .. }) | Ok(RecordKey::GroupMetadata { group }) => {
                group
            }
            other => {
                // The coordinator only writes the two key kinds above.
                tracing::warn!(?other, "group record with an unexpected key dropped");
                continue;
            }
        };
        by_partition
            .entry(offsets_partition_for(&group, partitions))
            .or_default()
            .push(record);
    }
    let now = now_ms();
    let mut appended = Vec::with_capacity(by_partition.len());
    for (partition, records) in by_partition {
        let tp = engine::TopicPartition::new(OFFSETS_TOPIC, partition);
        let Some(log) = shard.logs.get(&tp) else {
            tracing::warn!(
                partition,
                "__consumer_offsets partition not on its owner shard"
            );
            return Err(ErrorCode::CoordinatorNotAvailable);
        };
        let mut builder = BatchBuilder::new(0, Compression::None);
        for (delta, (key, value)) in records.iter().enumerate() {
            builder.push(delta as i32, now, Some(key), value.as_deref(), &[]);
        }
        let mut batch = builder.build().map_err(|e| {
            tracing::warn!(error = %e, "cannot build a __consumer_offsets batch");
            ErrorCode::UnknownServerError
        })?;
        let result = log
            .append(&mut batch, log.leader_epoch())
            .map_err(|e| e.error_code())?;
        appended.push((log, result.last_offset));
    }
    for (log, last_offset) in appended {
        log.wait_durable(last_offset)
            .await
            .map_err(|e| e.error_code())?;
    }
    Ok(())
}

/// The per-shard timer: ticks the coordinator at its next deadline.
pub async fn run_timer(shard: Rc<Shard>) {
    loop {
        let now = now_ms();
        let deadline = shard.groups.coordinator.borrow().next_deadline_ms();
        let sleep_ms = deadline
            .map_or(TIMER_MAX_SLEEP_MS, |d| d - now)
            .clamp(1, TIMER_MAX_SLEEP_MS);
        glommio::timer::sleep(Duration::from_millis(sleep_ms as u64)).await;
        let now = now_ms();
        let due = shard
            .groups
            .coordinator
            .borrow()
            .next_deadline_ms()
            .is_some_and(|d| d <= now);
        if !due {
            continue;
        }
        let (records, responses) = {
            let mut coordinator = shard.groups.coordinator.borrow_mut();
            let records = coordinator.tick(now);
            (records, coordinator.take_responses())
        };
        if let Err(code) = persist(&shard, records).await {
            tracing::warn!(%code, "group timer records not persisted");
        }
        deliver(&shard.groups, responses);
    }
}

/// Rebuilds this shard's coordinator from its `__consumer_offsets`
/// partitions; run before the shard serves anything.
pub async fn replay(shard: &Rc<Shard>) -> Result<(), String> {
    let owned: Vec<engine::TopicPartition> = shard
        .logs
        .partitions()
        .into_iter()
        .filter(|tp| tp.topic == OFFSETS_TOPIC)
        .collect();
    let mut replayed = 0u64;
    let replay_started = std::time::Instant::now();
    for tp in owned {
        let Some(log) = shard.logs.get(&tp) else {
            continue;
        };
        let mut offset = log.log_start_offset();
        let end = log.high_watermark();
        while offset < end {
            let read = log
                .read(offset, REPLAY_READ_BYTES, ReadMode::Copy)
                .await
                .map_err(|e| format!("replay of {tp:?} at {offset}: {e}"))?;
            let bytes = match read.data {
                ReadData::Bytes(bytes) => bytes,
                ReadData::Empty => break,
                ReadData::Pieces(_) | ReadData::File(_) => {
                    return Err(format!(
                        "replay of {tp:?}: pieces or a file slice from a copy read"
                    ))
                }
            };
            let before = offset;
            for item in batches(&bytes) {
                let (header, range) = item.map_err(|e| format!("replay of {tp:?}: {e}"))?;
                offset = header.base_offset + i64::from(header.last_offset_delta) + 1;
                if header.is_control() {
                    continue;
                }
                let batch = bytes.get(range).unwrap_or_default();
                let decoded = records(batch).map_err(|e| format!("replay of {tp:?}: {e}"))?;
                let mut coordinator = shard.groups.coordinator.borrow_mut();
                for record in decoded {
                    let Some(key) = record.key.as_deref() else {
                        continue;
                    };
                    if let Err(e) = coordinator.replay(key, record.value.as_deref()) {
                        // One bad record must not keep the broker down.
                        tracing::warn!(?tp, error = %e, "group record skipped in replay");
                    }
                    replayed += 1;
                }
            }
            if offset <= before {
                break;
            }
        }
    }
    let now = now_ms();
    let (records, responses) = {
        let mut coordinator = shard.groups.coordinator.borrow_mut();
        coordinator.finish_replay(now);
        (coordinator.tick(now), coordinator.take_responses())
    };
    if let Err(code) = persist(shard, records).await {
        tracing::warn!(%code, "records after replay not persisted");
    }
    deliver(&shard.groups, responses);
    if replayed > 0 {
        tracing::info!(
            shard = shard.id,
            records = replayed,
            elapsed_ms = replay_started.elapsed().as_millis() as u64,
            "groups replayed"
        );
    }
    Ok(())
}

//! The owner side of a group call: step the pure coordinator, persist what
//! it returns, answer (JoinGroup/SyncGroup answers may come later, when the
//! rebalance completes).

use super::persist::persist;
use super::replay::{loaded_lease, unload_lost};
use super::{offsets_partitions, GroupReply, GroupRequest, GroupRuntime};
use coordinators::group::{
    offsets_partition_for, GroupCoordinator, GroupResponse, JoinOutcome, Record, RequestToken,
    SyncOutcome, TopicInfo,
};
use engine::ErrorCode;
use futures::channel::oneshot;
use kernel::shard::Shard;
use std::rc::Rc;

/// What a call produced before anything is persisted.
enum Immediate {
    Reply(GroupReply),
    Later(oneshot::Receiver<GroupResponse>),
}

/// Owner side: check the lease of the group's partition (loading it if
/// needed), step the coordinator, persist, answer.
pub(super) async fn execute(shard: &Rc<Shard>, request: GroupRequest) -> GroupReply {
    let runtime = &*shard.service::<GroupRuntime>();
    let partition = request_partition(shard, &request);
    match partition {
        Some(partition) => {
            if let Err(code) = loaded_lease(shard, runtime, partition).await {
                return GroupReply::Unavailable(code);
            }
        }
        // ListGroups: only groups of partitions still led here.
        None => unload_lost(shard, runtime),
    }
    if let GroupRequest::StageTxn {
        producer_id,
        producer_epoch,
        request: commit,
    } = &request
    {
        if let Some(code) = fenced_producer(shard, &commit.group_id, *producer_id, *producer_epoch)
        {
            let rows = commit.offsets.iter().map(|(tp, ..)| (tp.clone(), code));
            return GroupReply::Committed(rows.collect());
        }
    }
    let (immediate, records, responses) = step_now(shard, runtime, request);
    let unpersisted = persist(shard, runtime, records).await;
    deliver(runtime, responses);
    if let Some(&code) = partition.and_then(|p| unpersisted.get(&p)) {
        // Not written, so not done: the partition was unloaded, and a
        // commit is not acknowledged.
        return match immediate {
            Immediate::Reply(GroupReply::Committed(rows)) => {
                GroupReply::Committed(rows.into_iter().map(|(tp, _)| (tp, code)).collect())
            }
            _ => GroupReply::Unavailable(code),
        };
    }
    match immediate {
        Immediate::Reply(reply) => reply,
        Immediate::Later(receiver) => match receiver.await {
            Ok(GroupResponse::Join(r)) => GroupReply::Join(r),
            Ok(GroupResponse::Sync(r)) => GroupReply::Sync(r),
            // The partition was unloaded while the call waited.
            Err(_) => GroupReply::Unavailable(ErrorCode::NotCoordinator),
        },
    }
}

/// Steps the coordinator with `request` and ticks it; returns the answer
/// (or where it will come), the records to persist and the answers that
/// became ready for other callers.
fn step_now(
    shard: &Shard,
    runtime: &GroupRuntime,
    request: GroupRequest,
) -> (Immediate, Vec<Record>, Vec<(RequestToken, GroupResponse)>) {
    let now = shard.now_ms();
    let token = runtime.take_token();
    let table = shard.topics.borrow();
    let topics = |name: &str| {
        table.get(name).map(|e| TopicInfo {
            id: e.topic_id,
            partitions: e.partitions,
        })
    };
    let mut coordinator = runtime.coordinator.borrow_mut();
    let (immediate, mut records) = step(&mut coordinator, runtime, now, token, request, &topics);
    records.extend(coordinator.tick(now));
    (immediate, records, coordinator.take_responses())
}

/// The `__consumer_offsets` partition `request` acts on (`None`: ListGroups,
/// which spans the shard's partitions, or no `__consumer_offsets` yet).
fn request_partition(shard: &Shard, request: &GroupRequest) -> Option<i32> {
    let group = match request {
        GroupRequest::Join(r) => &r.group_id,
        GroupRequest::Sync(r) => &r.group_id,
        GroupRequest::Heartbeat(r) => &r.group_id,
        GroupRequest::ConsumerHeartbeat(r) => &r.group_id,
        GroupRequest::Commit(r)
        | GroupRequest::ValidateTxnCommit(r)
        | GroupRequest::CommitTxn(r) => &r.group_id,
        GroupRequest::StageTxn { request, .. } => &request.group_id,
        GroupRequest::CompleteTxn { partition, .. } => return Some(*partition),
        GroupRequest::Leave { group_id, .. }
        | GroupRequest::Fetch { group_id, .. }
        | GroupRequest::DeleteOffsets { group_id, .. }
        | GroupRequest::DeleteGroup(group_id)
        | GroupRequest::Describe(group_id)
        | GroupRequest::DescribeConsumer(group_id) => group_id,
        GroupRequest::List(_) => return None,
    };
    offsets_partitions(shard).map(|partitions| offsets_partition_for(group, partitions))
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
    let wait = |group: String| {
        let (sender, receiver) = oneshot::channel();
        runtime.waiters.borrow_mut().insert(token, (group, sender));
        Immediate::Later(receiver)
    };
    match request {
        GroupRequest::Join(req) => {
            let group = req.group_id.clone();
            match coordinator.join_group(now, token, req) {
                (JoinOutcome::Respond(r), records) => (reply(GroupReply::Join(r)), records),
                (JoinOutcome::Pending, records) => (wait(group), records),
            }
        }
        GroupRequest::Sync(req) => {
            let group = req.group_id.clone();
            match coordinator.sync_group(now, token, req) {
                (SyncOutcome::Respond(r), records) => (reply(GroupReply::Sync(r)), records),
                (SyncOutcome::Pending, records) => (wait(group), records),
            }
        }
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
        GroupRequest::StageTxn {
            producer_id,
            request,
            ..
        } => {
            let (codes, records) = coordinator.stage_txn_offsets(now, producer_id, &request);
            (reply(GroupReply::Committed(codes)), records)
        }
        GroupRequest::CompleteTxn {
            partition,
            producer_id,
            commit,
        } => {
            let partitions = topics(super::OFFSETS_TOPIC).map_or(0, |t| t.partitions);
            let in_partition = |group: &str| {
                coordinators::group::offsets_partition_for(group, partitions) == partition
            };
            let records = coordinator.complete_txn(now, producer_id, commit, &in_partition);
            (reply(GroupReply::Code(ErrorCode::None)), records)
        }
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
pub(super) fn deliver(runtime: &GroupRuntime, responses: Vec<(RequestToken, GroupResponse)>) {
    let mut waiters = runtime.waiters.borrow_mut();
    for (token, response) in responses {
        if let Some((_, sender)) = waiters.remove(&token) {
            // The client may have gone; nothing to do then.
            let _ = sender.send(response);
        }
    }
}

/// A TxnOffsetCommit's producer epoch older than the one the group's
/// `__consumer_offsets` partition has seen in a marker: a fenced producer
/// (a zombie of a restarted application) may not stage offsets.
fn fenced_producer(
    shard: &Rc<Shard>,
    group_id: &str,
    producer_id: i64,
    producer_epoch: i16,
) -> Option<ErrorCode> {
    let partitions = shard
        .topics
        .borrow()
        .get(super::OFFSETS_TOPIC)
        .map(|e| e.partitions)?;
    let partition = coordinators::group::offsets_partition_for(group_id, partitions);
    let log = shard.logs.get(&engine::TopicPartition::new(
        super::OFFSETS_TOPIC,
        partition,
    ))?;
    let entry = log.producer_entry(producer_id)?;
    (entry.producer_epoch > producer_epoch).then_some(ErrorCode::ProducerFenced)
}

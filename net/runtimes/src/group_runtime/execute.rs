//! The owner side of a group call: step the pure coordinator, persist what
//! it returns, answer (JoinGroup/SyncGroup answers may come later, when the
//! rebalance completes).

use super::persist::persist;
use super::replay::{led_unloaded, loaded_lease, unload_lost};
use super::{offsets_partitions, GroupReply, GroupRequest, GroupRuntime};
use crate::Shard;
use coordinators::group::{
    offsets_partition_for, GroupCoordinator, GroupResponse, JoinOutcome, JoinRequest, Record,
    RequestToken, SyncOutcome, SyncRequest, TopicInfo, TopicLookups, TopicPartition,
};
use engine::ErrorCode;
use futures::channel::oneshot;
use std::rc::Rc;

/// What a call produced before anything is persisted.
enum Immediate {
    Reply(GroupReply),
    Later(oneshot::Receiver<GroupResponse>),
}

/// Owner side: check the lease of the group's partition (loading it if
/// needed), step the coordinator, persist, answer.
pub(super) async fn execute(shard: &Rc<Shard>, request: GroupRequest) -> GroupReply {
    let runtime = &*shard.runtime().groups;
    let partition = request_partition(shard, &request);
    match partition {
        Some(partition) => {
            if let Err(code) = loaded_lease(shard, runtime, partition).await {
                return GroupReply::Unavailable(code);
            }
        }
        // ListGroups: the groups of the partitions led here, each loaded
        // first (as the timer would, up to its next round later): just
        // after a start or a leadership change the list is whole at once.
        None => {
            unload_lost(shard, runtime);
            for partition in led_unloaded(shard, runtime) {
                // NOT_COORDINATOR or a load in progress: listed without it.
                let _ = loaded_lease(shard, runtime, partition).await;
            }
        }
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
    let matching = |expression: &str| super::regex::matching_topics(&table, expression);
    let mut coordinator = runtime.coordinator.borrow_mut();
    let (immediate, mut records) = step(
        &mut coordinator,
        (runtime, now, token),
        request,
        &topics,
        &matching,
    );
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
        GroupRequest::ShareHeartbeat(r) => &r.group_id,
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
        | GroupRequest::DescribeConsumer(group_id)
        | GroupRequest::DescribeShare(group_id)
        | GroupRequest::ShareTopics(group_id) => group_id,
        GroupRequest::List(_) => return None,
    };
    offsets_partitions(shard).map(|partitions| offsets_partition_for(group, partitions))
}

/// Steps the coordinator with one call: its answer (now, or where it will
/// come) and the records to persist.
fn step(
    coordinator: &mut GroupCoordinator,
    (runtime, now, token): (&GroupRuntime, i64, RequestToken),
    request: GroupRequest,
    topics: &dyn Fn(&str) -> Option<TopicInfo>,
    matching: &dyn Fn(&str) -> Vec<String>,
) -> (Immediate, Vec<Record>) {
    match request {
        GroupRequest::Join(req) => {
            join(coordinator, (runtime, now, token), req, (topics, matching))
        }
        GroupRequest::Sync(req) => sync(coordinator, runtime, now, token, req),
        GroupRequest::Heartbeat(req) => {
            answered(GroupReply::Code(coordinator.heartbeat(now, &req)))
        }
        GroupRequest::Leave { group_id, members } => answered_with(
            coordinator.leave_group(now, &group_id, &members),
            GroupReply::Codes,
        ),
        GroupRequest::ConsumerHeartbeat(req) => answered_with(
            coordinator.consumer_heartbeat_matching(now, &req, topics, matching),
            GroupReply::ConsumerHeartbeat,
        ),
        GroupRequest::ShareHeartbeat(req) => answered_with(
            coordinator.share_heartbeat(now, &req, topics),
            GroupReply::ShareHeartbeat,
        ),
        GroupRequest::ShareTopics(group_id) => answered(GroupReply::ShareTopics(
            (coordinator.share_group_topics(&group_id))
                .cloned()
                .unwrap_or_default(),
        )),
        GroupRequest::Commit(req) => {
            answered_with(coordinator.commit_offsets(now, &req), GroupReply::Committed)
        }
        GroupRequest::ValidateTxnCommit(req) => answered(GroupReply::Code(
            coordinator.validate_txn_offset_commit(&req),
        )),
        GroupRequest::StageTxn {
            producer_id,
            request,
            ..
        } => answered_with(
            coordinator.stage_txn_offsets(now, producer_id, &request),
            GroupReply::Committed,
        ),
        GroupRequest::CompleteTxn {
            partition,
            producer_id,
            commit,
        } => complete_txn(coordinator, now, partition, (producer_id, commit), topics),
        GroupRequest::CommitTxn(req) => answered_with(
            coordinator.commit_txn_offsets(now, &req),
            GroupReply::Committed,
        ),
        GroupRequest::Fetch {
            group_id,
            partitions,
        } => answered(GroupReply::Fetched(
            coordinator.fetch_offsets(&group_id, partitions.as_deref()),
        )),
        GroupRequest::DeleteOffsets {
            group_id,
            partitions,
        } => delete_offsets(coordinator, &group_id, &partitions),
        GroupRequest::DeleteGroup(group_id) => delete_group(coordinator, group_id),
        GroupRequest::Describe(group_id) => {
            answered(GroupReply::Described(coordinator.describe_group(&group_id)))
        }
        GroupRequest::DescribeConsumer(group_id) => describe_consumer(coordinator, &group_id),
        GroupRequest::DescribeShare(group_id) => answered(GroupReply::DescribedShare(
            coordinator
                .describe_share_group(&group_id)
                .map(|g| Box::new(g.clone())),
        )),
        GroupRequest::List(states) => {
            answered(GroupReply::Listed(coordinator.list_groups(&states)))
        }
    }
}

/// An answer ready now, with no records to persist.
fn answered(reply: GroupReply) -> (Immediate, Vec<Record>) {
    (Immediate::Reply(reply), Vec::new())
}

/// An answer ready now (`value` made into a reply by `to_reply`), with the
/// records the call produced.
fn answered_with<T>(
    (value, records): (T, Vec<Record>),
    to_reply: impl FnOnce(T) -> GroupReply,
) -> (Immediate, Vec<Record>) {
    (Immediate::Reply(to_reply(value)), records)
}

/// Registers the call `token` as waiting for an answer of `group` (a
/// JoinGroup or SyncGroup that the rebalance completes).
fn wait_for(runtime: &GroupRuntime, token: RequestToken, group: String) -> Immediate {
    let (sender, receiver) = oneshot::channel();
    runtime.waiters.borrow_mut().insert(token, (group, sender));
    Immediate::Later(receiver)
}

/// JoinGroup: answered now, or once the rebalance completes.
fn join(
    coordinator: &mut GroupCoordinator,
    (runtime, now, token): (&GroupRuntime, i64, RequestToken),
    req: JoinRequest,
    lookups: TopicLookups<'_>,
) -> (Immediate, Vec<Record>) {
    let group = req.group_id.clone();
    match coordinator.join_group(now, token, req, lookups) {
        (JoinOutcome::Respond(r), records) => (Immediate::Reply(GroupReply::Join(r)), records),
        (JoinOutcome::Pending, records) => (wait_for(runtime, token, group), records),
    }
}

/// SyncGroup: answered now, or once the leader's assignment arrives.
fn sync(
    coordinator: &mut GroupCoordinator,
    runtime: &GroupRuntime,
    now: i64,
    token: RequestToken,
    req: SyncRequest,
) -> (Immediate, Vec<Record>) {
    let group = req.group_id.clone();
    match coordinator.sync_group(now, token, req) {
        (SyncOutcome::Respond(r), records) => (Immediate::Reply(GroupReply::Sync(r)), records),
        (SyncOutcome::Pending, records) => (wait_for(runtime, token, group), records),
    }
}

/// A transaction marker on `__consumer_offsets` partition `partition`:
/// commits or drops the offsets `producer_id` staged for the groups of
/// that partition.
fn complete_txn(
    coordinator: &mut GroupCoordinator,
    now: i64,
    partition: i32,
    (producer_id, commit): (i64, bool),
    topics: &dyn Fn(&str) -> Option<TopicInfo>,
) -> (Immediate, Vec<Record>) {
    let partitions = topics(super::OFFSETS_TOPIC).map_or(0, |t| t.partitions);
    let in_partition =
        |group: &str| coordinators::group::offsets_partition_for(group, partitions) == partition;
    let records = coordinator.complete_txn(now, producer_id, commit, &in_partition);
    (Immediate::Reply(GroupReply::Code(ErrorCode::None)), records)
}

/// OffsetDelete: the group's code, each partition's row, and the records.
fn delete_offsets(
    coordinator: &mut GroupCoordinator,
    group_id: &str,
    partitions: &[TopicPartition],
) -> (Immediate, Vec<Record>) {
    let (code, rows, records) = coordinator.delete_offsets(group_id, partitions);
    (
        Immediate::Reply(GroupReply::DeletedOffsets(code, rows)),
        records,
    )
}

/// DeleteGroups for one group: its code (UNKNOWN_SERVER_ERROR when the
/// coordinator answered none) and the records.
fn delete_group(coordinator: &mut GroupCoordinator, group_id: String) -> (Immediate, Vec<Record>) {
    let (codes, records) = coordinator.delete_groups(std::slice::from_ref(&group_id));
    let code = codes.first().map_or(ErrorCode::UnknownServerError, |c| c.1);
    (Immediate::Reply(GroupReply::Code(code)), records)
}

/// ConsumerGroupDescribe of one group.
fn describe_consumer(coordinator: &GroupCoordinator, group_id: &str) -> (Immediate, Vec<Record>) {
    answered(GroupReply::DescribedConsumer(
        coordinator
            .describe_consumer_group(group_id)
            .map(|g| Box::new(g.clone())),
    ))
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

//! Split a request's partition work by owner shard, run it there, join the
//! replies back in request order. The owner side ([`execute_local`]) runs the
//! operations of one message concurrently, so several acks=all appends of one
//! request share a group commit.

use crate::mesh::{
    PartitionOp, PartitionReply, PartitionState, ProduceOutcome, ReadOutcome, SendData,
    ShardMessage,
};
use crate::shard::Shard;
use engine::log::ReadMode;
use engine::ErrorCode;
use engine::{EngineError, ReadData, TopicPartition};
use futures::channel::oneshot;
use futures::future::{join_all, select, select_all, Either};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// Groups item positions by owner shard: `owner -> positions`, positions in order.
pub fn split_by_owner<'a>(
    tps: impl IntoIterator<Item = &'a TopicPartition>,
    shard_count: usize,
) -> BTreeMap<usize, Vec<usize>> {
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (position, tp) in tps.into_iter().enumerate() {
        let owner = engine::shard::shard_of(&tp.topic, tp.partition, shard_count);
        groups.entry(owner).or_default().push(position);
    }
    groups
}

/// Puts per-owner replies back at their positions. A group whose replies are
/// missing (owner gone) gets `fallback(position)`.
pub fn join_by_position<T>(
    total: usize,
    groups: Vec<(Vec<usize>, Option<Vec<T>>)>,
    mut fallback: impl FnMut(usize) -> T,
) -> Vec<T> {
    let mut slots: Vec<Option<T>> = (0..total).map(|_| None).collect();
    for (positions, replies) in groups {
        match replies {
            Some(replies) if replies.len() == positions.len() => {
                for (position, reply) in positions.into_iter().zip(replies) {
                    slots[position] = Some(reply);
                }
            }
            _ => {
                for position in positions {
                    slots[position] = Some(fallback(position));
                }
            }
        }
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(position, slot)| slot.unwrap_or_else(|| fallback(position)))
        .collect()
}

/// Which reply an operation expects (to build an error reply when its owner is gone).
#[derive(Debug, Clone, Copy)]
enum OpKind {
    Produce,
    Read,
    ListOffset,
    DeleteRecords,
    Done,
    Describe,
}

impl OpKind {
    fn of(op: &PartitionOp) -> Self {
        match op {
            PartitionOp::Produce { .. } => OpKind::Produce,
            PartitionOp::Read { .. } => OpKind::Read,
            PartitionOp::ListOffset { .. } => OpKind::ListOffset,
            PartitionOp::DeleteRecords { .. } => OpKind::DeleteRecords,
            PartitionOp::Create { .. }
            | PartitionOp::Delete { .. }
            | PartitionOp::AlterConfig { .. }
            | PartitionOp::WriteMarker { .. } => OpKind::Done,
            PartitionOp::Describe { .. } => OpKind::Describe,
        }
    }

    fn error_reply(self, code: ErrorCode) -> PartitionReply {
        match self {
            OpKind::Produce => PartitionReply::Produce(Err(code)),
            OpKind::Read => PartitionReply::Read(ReadOutcome {
                error_code: code,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                data: SendData::Empty,
                aborted_transactions: None,
            }),
            OpKind::ListOffset => PartitionReply::ListOffset(Err(code)),
            OpKind::DeleteRecords => PartitionReply::DeleteRecords(Err(code)),
            OpKind::Done => PartitionReply::Done(Err(code)),
            OpKind::Describe => PartitionReply::Describe(Err(code)),
        }
    }
}

/// Runs `ops` on their owner shards and returns the replies in the order of `ops`.
pub async fn run_on_owners(shard: &Rc<Shard>, ops: Vec<PartitionOp>) -> Vec<PartitionReply> {
    let total = ops.len();
    let kinds: Vec<OpKind> = ops.iter().map(OpKind::of).collect();
    let groups = split_by_owner(ops.iter().map(PartitionOp::topic_partition), shard.count);
    if groups.len() == 1 && groups.contains_key(&shard.id) {
        // Common single-shard case: no bookkeeping.
        return execute_local(shard, ops).await;
    }
    let mut slots: Vec<Option<PartitionOp>> = ops.into_iter().map(Some).collect();
    let mut pending = Vec::with_capacity(groups.len());
    for (owner, positions) in groups {
        let group_ops: Vec<PartitionOp> =
            positions.iter().filter_map(|&p| slots[p].take()).collect();
        pending.push(run_group(shard, owner, positions, group_ops));
    }
    let groups = join_all(pending).await;
    join_by_position(total, groups, |position| {
        kinds[position].error_reply(ErrorCode::NotLeaderOrFollower)
    })
}

async fn run_group(
    shard: &Rc<Shard>,
    owner: usize,
    positions: Vec<usize>,
    ops: Vec<PartitionOp>,
) -> (Vec<usize>, Option<Vec<PartitionReply>>) {
    if owner == shard.id {
        return (positions, Some(execute_local(shard, ops).await));
    }
    let (reply, receiver) = oneshot::channel();
    if let Err(e) = shard
        .send_to(owner, ShardMessage::Partitions { ops, reply })
        .await
    {
        tracing::warn!(owner, error = %e, "partition work not delivered");
        return (positions, None);
    }
    (positions, receiver.await.ok())
}

/// Executes operations on this (owner) shard, concurrently, replies in order.
pub async fn execute_local(shard: &Rc<Shard>, ops: Vec<PartitionOp>) -> Vec<PartitionReply> {
    join_all(ops.into_iter().map(|op| execute_one(shard, op))).await
}

async fn execute_one(shard: &Rc<Shard>, op: PartitionOp) -> PartitionReply {
    let kind = OpKind::of(&op);
    match op {
        PartitionOp::Create {
            tp,
            topic_id,
            config,
        } => PartitionReply::Done(
            shard
                .logs
                .create_partition(tp, topic_id, config)
                .await
                .map(|_| ())
                .map_err(|e| e.error_code()),
        ),
        PartitionOp::Delete { tp } => PartitionReply::Done(
            shard
                .logs
                .delete_partition(&tp)
                .await
                .map_err(|e| e.error_code()),
        ),
        PartitionOp::AlterConfig { tp, config } => PartitionReply::Done(
            shard
                .logs
                .alter_config(&tp, config)
                .await
                .map_err(|e| e.error_code()),
        ),
        op => {
            let Some(log) = shard.logs.get(op.topic_partition()) else {
                return kind.error_reply(ErrorCode::UnknownTopicOrPartition);
            };
            match op {
                PartitionOp::Produce { records, acks, .. } => {
                    PartitionReply::Produce(produce(&log, records, acks).await)
                }
                PartitionOp::Read {
                    offset,
                    max_bytes,
                    file_slice,
                    read_committed,
                    ..
                } => PartitionReply::Read(
                    read(&log, offset, max_bytes, file_slice, read_committed).await,
                ),
                PartitionOp::ListOffset {
                    timestamp_ms,
                    read_committed,
                    ..
                } => PartitionReply::ListOffset(
                    log.offset_for_timestamp_isolated(timestamp_ms, read_committed)
                        .await
                        .map(|found| (found, log.leader_epoch()))
                        .map_err(|e| e.error_code()),
                ),
                PartitionOp::DeleteRecords { offset, .. } => {
                    let offset = if offset == -1 {
                        log.high_watermark()
                    } else {
                        offset
                    };
                    if offset > log.high_watermark() {
                        return PartitionReply::DeleteRecords(Err(ErrorCode::OffsetOutOfRange));
                    }
                    PartitionReply::DeleteRecords(
                        log.delete_records(offset).await.map_err(|e| e.error_code()),
                    )
                }
                PartitionOp::Describe { .. } => PartitionReply::Describe(Ok(PartitionState {
                    log_start_offset: log.log_start_offset(),
                    log_end_offset: log.log_end_offset(),
                    high_watermark: log.high_watermark(),
                    leader_epoch: log.leader_epoch(),
                    size_bytes: log.size_bytes(),
                })),
                PartitionOp::WriteMarker {
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    ..
                } => PartitionReply::Done(
                    crate::txn_runtime::write_marker_local(
                        &log,
                        producer_id,
                        producer_epoch,
                        commit,
                        coordinator_epoch,
                    )
                    .await,
                ),
                _ => kind.error_reply(ErrorCode::UnknownServerError),
            }
        }
    }
}

async fn produce(
    log: &engine::PartitionLog,
    records: Vec<u8>,
    acks: i16,
) -> Result<ProduceOutcome, ErrorCode> {
    // The records were cut out of the request frame once; the log keeps that buffer.
    let appended = log
        .append_owned(records, log.leader_epoch())
        .map_err(|e| e.error_code())?;
    let waited = match acks {
        -1 => log.wait_durable(appended.last_offset).await,
        1 => log.wait_written(appended.last_offset).await,
        _ => Ok(()),
    };
    waited.map_err(|e| e.error_code())?;
    Ok(ProduceOutcome {
        base_offset: appended.base_offset,
        log_append_time_ms: appended.log_append_time_ms,
        log_start_offset: appended.log_start_offset,
    })
}

async fn read(
    log: &engine::PartitionLog,
    offset: i64,
    max_bytes: usize,
    file_slice: bool,
    read_committed: bool,
) -> ReadOutcome {
    let mode = if file_slice {
        ReadMode::CachedOrFileSlice
    } else {
        ReadMode::CachedPiecesOrCopy
    };
    let outcome = |error_code: ErrorCode, data: SendData| ReadOutcome {
        error_code,
        high_watermark: log.high_watermark(),
        last_stable_offset: log.last_stable_offset(),
        log_start_offset: log.log_start_offset(),
        data,
        aborted_transactions: None,
    };
    let result = if read_committed {
        log.read_committed(offset, max_bytes, mode).await
    } else {
        log.read(offset, max_bytes, mode).await
    };
    match result {
        Ok(result) => {
            let data = match result.data {
                ReadData::Empty => SendData::Empty,
                ReadData::Bytes(bytes) => SendData::Bytes(bytes),
                ReadData::Pieces(pieces) => SendData::Pieces(pieces),
                // The engine's Rc<File> cannot leave the shard; a duplicated
                // descriptor can (one dup per partition read).
                ReadData::File(slice) => match slice.file.try_clone() {
                    Ok(file) => SendData::File {
                        file,
                        position: slice.position,
                        length: slice.length,
                    },
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot duplicate segment descriptor");
                        return outcome(ErrorCode::KafkaStorageError, SendData::Empty);
                    }
                },
            };
            ReadOutcome {
                error_code: ErrorCode::None,
                high_watermark: result.high_watermark,
                last_stable_offset: result.last_stable_offset,
                log_start_offset: result.log_start_offset,
                data,
                aborted_transactions: result.aborted_transactions,
            }
        }
        Err(e @ EngineError::OffsetOutOfRange { .. }) => outcome(e.error_code(), SendData::Empty),
        Err(e) => outcome(e.error_code(), SendData::Empty),
    }
}

/// Long poll: resolves when any of `parts` has data past its offset, or at `timeout`.
pub async fn wait_for_any(shard: &Rc<Shard>, parts: Vec<(TopicPartition, i64)>, timeout: Duration) {
    if parts.is_empty() || timeout.is_zero() {
        return;
    }
    let groups = split_by_owner(parts.iter().map(|(tp, _)| tp), shard.count);
    let mut waits: Vec<futures::future::LocalBoxFuture<'_, ()>> = Vec::new();
    for (owner, positions) in groups {
        let group: Vec<(TopicPartition, i64)> =
            positions.iter().map(|&p| parts[p].clone()).collect();
        if owner == shard.id {
            for (tp, offset) in group {
                if let Some(log) = shard.logs.get(&tp) {
                    waits.push(Box::pin(async move { log.wait_for_data(offset).await }));
                }
            }
        } else {
            let (reply, receiver) = oneshot::channel();
            if shard
                .send_to(
                    owner,
                    ShardMessage::WaitForData {
                        parts: group,
                        reply,
                    },
                )
                .await
                .is_ok()
            {
                waits.push(Box::pin(async move {
                    let _ = receiver.await;
                }));
            }
        }
    }
    if waits.is_empty() {
        return;
    }
    let timer = glommio::timer::sleep(timeout);
    futures::pin_mut!(timer);
    // Dropping the losers cancels local waits and, through the dropped
    // receivers, the waiters on other shards.
    let _ = select(select_all(waits), timer).await;
}

/// Owner side of [`ShardMessage::WaitForData`].
pub async fn serve_wait_for_data(
    shard: Rc<Shard>,
    parts: Vec<(TopicPartition, i64)>,
    mut reply: oneshot::Sender<()>,
) {
    let mut waits: Vec<futures::future::LocalBoxFuture<'_, ()>> = Vec::new();
    for (tp, offset) in parts {
        if let Some(log) = shard.logs.get(&tp) {
            waits.push(Box::pin(async move { log.wait_for_data(offset).await }));
        }
    }
    if waits.is_empty() {
        // Partitions gone: let the fetcher re-read and see the error.
        let _ = reply.send(());
        return;
    }
    let fired = {
        let cancelled = reply.cancellation();
        matches!(select(select_all(waits), cancelled).await, Either::Left(_))
    };
    if fired {
        let _ = reply.send(());
    }
}

/// Checks `(topic, partition)` pairs against the topic table, runs `make_op`
/// for the ones that exist on their owners, and answers per pair in order:
/// the reply, or UNKNOWN_TOPIC_OR_PARTITION.
pub async fn run_checked(
    shard: &Rc<Shard>,
    pairs: &[(String, i32)],
    mut make_op: impl FnMut(TopicPartition, usize) -> PartitionOp,
) -> Vec<Result<PartitionReply, ErrorCode>> {
    let mut ops = Vec::new();
    let mut positions = Vec::with_capacity(pairs.len());
    {
        let table = shard.topics.borrow();
        for (index, (topic, partition)) in pairs.iter().enumerate() {
            let exists = table
                .get(topic)
                .is_some_and(|e| *partition >= 0 && *partition < e.partitions);
            if exists {
                positions.push(Some(ops.len()));
                ops.push(make_op(
                    TopicPartition::new(topic.clone(), *partition),
                    index,
                ));
            } else {
                positions.push(None);
            }
        }
    }
    let mut replies: Vec<Option<PartitionReply>> = run_on_owners(shard, ops)
        .await
        .into_iter()
        .map(Some)
        .collect();
    positions
        .into_iter()
        .map(|position| {
            position
                .and_then(|p| replies.get_mut(p).and_then(Option::take))
                .ok_or(ErrorCode::UnknownTopicOrPartition)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_then_join_restores_request_order() {
        let tps: Vec<TopicPartition> = (0..10).map(|p| TopicPartition::new("t", p)).collect();
        let groups = split_by_owner(tps.iter(), 3);
        assert_eq!(groups.values().map(Vec::len).sum::<usize>(), 10);
        for (owner, positions) in &groups {
            for &p in positions {
                assert_eq!(engine::shard::shard_of("t", tps[p].partition, 3), *owner);
            }
        }
        // Each owner answers with the partition numbers of its positions.
        let answered: Vec<(Vec<usize>, Option<Vec<i32>>)> = groups
            .into_values()
            .map(|positions| {
                let replies = positions.iter().map(|&p| tps[p].partition).collect();
                (positions, Some(replies))
            })
            .collect();
        let joined = join_by_position(10, answered, |_| -1);
        assert_eq!(joined, (0..10).collect::<Vec<i32>>());
    }

    #[test]
    fn a_missing_owner_fails_only_its_positions() {
        let groups = vec![(vec![0, 2], Some(vec!["a", "c"])), (vec![1, 3], None)];
        let joined = join_by_position(4, groups, |_| "gone");
        assert_eq!(joined, vec!["a", "gone", "c", "gone"]);
    }

    #[test]
    fn single_shard_is_one_group() {
        let tps: Vec<TopicPartition> = (0..5).map(|p| TopicPartition::new("x", p)).collect();
        let groups = split_by_owner(tps.iter(), 1);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[&0], vec![0, 1, 2, 3, 4]);
    }
}

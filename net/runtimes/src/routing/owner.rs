//! The owner side of partition work: what the shard that owns a partition
//! does for each [`PartitionOp`], the operations of one message run
//! concurrently so that several acks=all appends of one request share a
//! group commit.

use super::ops::{
    OpKind, PartitionOp, PartitionRead, PartitionReply, PartitionState, ProduceOutcome,
    ProduceRefusal, ReadOptions, ReadOutcome,
};
use crate::replication_runtime;
use crate::replication_runtime::read_replica::{self, ConsumerRead};
use crate::tiered::read::read_remote;
use crate::Shard;
use engine::log::ReadMode;
use engine::ErrorCode;
use engine::ReadData;
use engine::TopicPartition;
use futures::future::join_all;
use std::rc::Rc;
use std::time::Duration;

/// Why a partition has no log here: its files are here but failed to open
/// (KAFKA_STORAGE_ERROR, as for a partition a disk fault took offline), it
/// exists in the cluster on other brokers (NOT_LEADER_OR_FOLLOWER: the
/// client refreshes its metadata and goes to the leader), or it does not
/// exist.
pub(crate) fn missing_partition_error(shard: &Shard, tp: &engine::TopicPartition) -> ErrorCode {
    if shard.logs.failed_to_open(tp) {
        return ErrorCode::KafkaStorageError;
    }
    let exists = shard
        .topics
        .borrow()
        .get(&tp.topic)
        .is_some_and(|entry| (0..entry.partitions).contains(&tp.partition));
    if exists {
        ErrorCode::NotLeaderOrFollower
    } else {
        ErrorCode::UnknownTopicOrPartition
    }
}

/// Executes operations on this (owner) shard, concurrently, replies in order.
pub(super) async fn execute_local(shard: &Rc<Shard>, ops: Vec<PartitionOp>) -> Vec<PartitionReply> {
    join_all(ops.into_iter().map(|op| execute_one(shard, op))).await
}

/// Executes one operation on this (owner) shard.
async fn execute_one(shard: &Rc<Shard>, op: PartitionOp) -> PartitionReply {
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
        PartitionOp::Delete { tp } => {
            let deleted = shard.logs.delete_partition(&tp).await;
            if deleted.is_ok() {
                shard.runtime().replicas.forget_deleted(&tp);
            }
            PartitionReply::Done(deleted.map_err(|e| e.error_code()))
        }
        PartitionOp::MoveToDir { tp, dir_index } => PartitionReply::Done(
            shard
                .logs
                .move_partition(&tp, dir_index)
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
        op => execute_on_log(shard, op).await,
    }
}

/// ListOffsets on a partition's log: a timestamp is looked up in the
/// remote part first when there is one (its records are the oldest), as
/// Kafka's `UnifiedLog.fetchOffsetByTimestamp` does, then locally; the
/// special timestamps (-1 latest, -2 earliest, ...) are the log's. A
/// replicated partition's leader first checks the client's leader epoch
/// (KIP-320), as for a fetch. `asked`: (timestamp, read_committed, the
/// client's leader epoch). Answers with the log's leader epoch.
async fn list_offset(
    shard: &Rc<Shard>,
    (tp, log): (&TopicPartition, &engine::PartitionLog),
    asked: (i64, bool, i32),
) -> Result<(Option<(i64, i64)>, i32), ErrorCode> {
    let (timestamp_ms, read_committed, current_leader_epoch) = asked;
    read_replica::consumer_read(shard, tp, current_leader_epoch, false)?;
    let found = offset_of(shard, log, timestamp_ms, read_committed).await?;
    Ok((found, log.leader_epoch()))
}

/// [`list_offset`]'s lookup, remote segments first where the partition
/// has some (a share group's `by_duration` start uses it too).
pub(crate) async fn offset_of(
    shard: &Rc<Shard>,
    log: &engine::PartitionLog,
    timestamp_ms: i64,
    read_committed: bool,
) -> Result<Option<(i64, i64)>, ErrorCode> {
    if timestamp_ms >= 0 && log.remote_span().start_offset.is_some() {
        let remote = crate::tiered::read::offset_for_timestamp(shard, log, timestamp_ms).await?;
        // Remote offsets are below the local log, so below the last stable
        // offset as well, save a transaction still open across them.
        if let Some(found) =
            remote.filter(|&(offset, _)| !read_committed || offset < log.last_stable_offset())
        {
            return Ok(Some(found));
        }
    }
    log.offset_for_timestamp_isolated(timestamp_ms, read_committed)
        .await
        .map_err(|e| e.error_code())
}

/// Executes an operation on a partition's log held here: the log must
/// exist, and only its leader serves clients (Describe and
/// DescribeProducers answer on any replica, as Kafka's
/// `Partition.activeProducerState` does: a follower keeps the leader's
/// producer state by replaying its batches).
async fn execute_on_log(shard: &Rc<Shard>, op: PartitionOp) -> PartitionReply {
    let kind = OpKind::of(&op);
    let Some(log) = shard.logs.get(op.topic_partition()) else {
        return kind.error_reply(missing_partition_error(shard, op.topic_partition()));
    };
    let tp = op.topic_partition().clone();
    let describe = matches!(
        op,
        PartitionOp::Describe { .. } | PartitionOp::DescribeProducers { .. }
    );
    if !describe && !replication_runtime::serves_clients(shard, &tp) {
        // A follower (or offline) replica: clients go to the leader.
        return kind.error_reply(ErrorCode::NotLeaderOrFollower);
    }
    match op {
        PartitionOp::Produce {
            records,
            acks,
            timeout_ms,
            txn,
            ..
        } => {
            if let Some(join) = &txn {
                if let Err(code) = join_first(shard, &tp, &log, &records, join).await {
                    return PartitionReply::Produce(Err(code.into()));
                }
            }
            PartitionReply::Produce(produce(shard, &tp, &log, records, (acks, timeout_ms)).await)
        }
        PartitionOp::ListOffset {
            timestamp_ms,
            read_committed,
            current_leader_epoch,
            ..
        } => {
            let asked = (timestamp_ms, read_committed, current_leader_epoch);
            PartitionReply::ListOffset(list_offset(shard, (&tp, &log), asked).await)
        }
        PartitionOp::DeleteRecords { offset, .. } => {
            PartitionReply::DeleteRecords(delete_records(&log, offset).await)
        }
        PartitionOp::Describe { .. } => PartitionReply::Describe(Ok(describe_log(&log))),
        PartitionOp::DescribeProducers { .. } => {
            PartitionReply::Producers(Ok(log.active_producers()))
        }
        PartitionOp::EpochEndOffset {
            current_leader_epoch,
            leader_epoch,
            ..
        } => PartitionReply::EpochEndOffset(
            log.end_offset_for_epoch_checked(current_leader_epoch, leader_epoch)
                .map(|found| (found.epoch, found.end_offset))
                .map_err(|e| e.error_code()),
        ),
        PartitionOp::WriteMarker {
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            ..
        } => PartitionReply::Done(
            write_marker(
                shard,
                &tp,
                &log,
                (producer_id, producer_epoch),
                commit,
                coordinator_epoch,
            )
            .await,
        ),
        _ => kind.error_reply(ErrorCode::UnknownServerError),
    }
}

/// DeleteRecords on one partition: moves its log start to `offset` (`-1`:
/// the high watermark); past the high watermark is out of range.
async fn delete_records(log: &engine::PartitionLog, offset: i64) -> Result<i64, ErrorCode> {
    let offset = if offset == -1 {
        log.high_watermark()
    } else {
        offset
    };
    if offset > log.high_watermark() {
        return Err(ErrorCode::OffsetOutOfRange);
    }
    log.delete_records(offset).await.map_err(|e| e.error_code())
}

/// A partition's offsets, epoch, size and dir, as Describe answers them.
fn describe_log(log: &engine::PartitionLog) -> PartitionState {
    PartitionState {
        log_start_offset: log.earliest_offset(),
        log_end_offset: log.log_end_offset(),
        high_watermark: log.high_watermark(),
        leader_epoch: log.leader_epoch(),
        size_bytes: log.size_bytes(),
        log_dir: log.log_dir_index(),
    }
}

/// How long a transaction marker waits for the ISR (Kafka's
/// `request.timeout.ms` default).
const MARKER_TIMEOUT: Duration = Duration::from_secs(30);

/// The in-sync replicas of a partition with one replica: itself.
const SINGLE_REPLICA_ISR_SIZE: i32 = 1;

/// A transaction's first batch here joins its transaction at the
/// coordinator first ([`super::txn_join`]). The answer takes a while, so
/// afterwards the partition must still be this log and led here: an append
/// to a replica that became a follower meanwhile would fork its log.
async fn join_first(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    log: &Rc<engine::PartitionLog>,
    records: &[u8],
    join: &super::TxnJoin,
) -> Result<(), ErrorCode> {
    super::txn_join::before_append(shard, tp, log, records, join).await?;
    let same_log = shard.logs.get(tp).is_some_and(|now| Rc::ptr_eq(&now, log));
    if !same_log || !replication_runtime::serves_clients(shard, tp) {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    Ok(())
}

async fn produce(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    log: &Rc<engine::PartitionLog>,
    records: bytes::BytesMut,
    (acks, timeout_ms): (i16, i32),
) -> Result<ProduceOutcome, ProduceRefusal> {
    // The role the append is made under: an acks=all wait completes only
    // while it lasts.
    let leadership = replication_runtime::leadership(shard, tp);
    // Kafka refuses an acks=all write before appending it when the ISR is
    // smaller than `min.insync.replicas`: the producer learns at once that
    // the durability it asked for cannot be had (acks 0 and 1 still write).
    if acks == -1 {
        match &leadership {
            Some(leading) => leading.acks_all_check()?,
            None if SINGLE_REPLICA_ISR_SIZE < log.min_insync_replicas() => {
                return Err(ErrorCode::NotEnoughReplicas.into())
            }
            None => {}
        }
    }
    // The records are the request frame's own bytes (or one copy of them);
    // the log keeps that buffer.
    let appended = log
        .append_owned_bytes(records, log.leader_epoch())
        .map_err(|e| {
            // The producer takes this as fatal (its idempotence is broken):
            // the operator needs the sequences to tell why.
            if matches!(e, engine::EngineError::OutOfOrderSequence { .. }) {
                tracing::warn!(%tp, error = %e, log_end_offset = log.log_end_offset(), "produce refused");
            }
            ProduceRefusal::from(e)
        })?;
    let waited = match acks {
        -1 => log.wait_durable(appended.last_offset).await,
        1 => log.wait_written(appended.last_offset).await,
        _ => Ok(()),
    };
    waited.map_err(|e| e.error_code())?;
    // acks=0/1 on a replicated partition: the HW still moves with this
    // append once it is durable here, by the role's durable watch
    // (`replication_runtime::run_durable_watch`), which the log wakes.
    if let (-1, Some(leading)) = (acks, leadership) {
        // Replicated: complete once the ISR has it (the HW passed it).
        let timeout = Some(Duration::from_millis(timeout_ms.max(0) as u64));
        replication_runtime::wait_acks_all(shard, tp, log, appended.last_offset, timeout, &leading)
            .await?;
    }
    Ok(ProduceOutcome {
        base_offset: appended.base_offset,
        log_append_time_ms: appended.log_append_time_ms,
        log_start_offset: appended.log_start_offset,
    })
}

/// A fetch's read of a partition held here ([`super::ReadOrWait`]): the
/// log must exist, and only its leader serves clients, save a follower
/// serving a v11+ consumer fetch; a leader may send that one to a
/// follower instead (see [`replication_runtime::read_replica`]).
pub(super) async fn read_partition(
    shard: &Rc<Shard>,
    read: &PartitionRead,
    options: &ReadOptions,
) -> ReadOutcome {
    let Some(log) = shard.logs.get(&read.tp) else {
        return ReadOutcome::error(missing_partition_error(shard, &read.tp));
    };
    let v11 = options.client_rack.is_some();
    let role = read_replica::consumer_read(shard, &read.tp, read.current_leader_epoch, v11);
    match role {
        Err(code) => return ReadOutcome::error(code),
        Ok(ConsumerRead::Leader(state)) => {
            let rack = options.client_rack.as_deref().unwrap_or("");
            let preferred =
                read_replica::preferred_read_replica(shard, &state.borrow(), read.offset, rack);
            if let Some(replica) = preferred {
                count(shard, |c| c.read_replica_redirects += 1);
                return ReadOutcome {
                    preferred_read_replica: replica,
                    ..offsets_only(&log)
                };
            }
        }
        Ok(ConsumerRead::Follower) => count(shard, |c| c.follower_consumer_reads += 1),
        Ok(ConsumerRead::Unreplicated) => {}
    }
    let outcome = read_log(
        &log,
        read.offset,
        read.max_bytes,
        options.file_slice,
        options.read_committed,
    )
    .await;
    if outcome.error_code == ErrorCode::OffsetMovedToTieredStorage {
        // Below the local log, in the remote copy: a consumer reads it
        // from the store (a follower is told, and starts at the local log).
        let (offset, max_bytes) = (read.offset, read.max_bytes);
        let remote = read_remote(shard, &log, offset, max_bytes, options.read_committed).await;
        return match remote {
            Ok(remote) => ReadOutcome {
                data: ReadData::Bytes(remote.data),
                aborted_transactions: remote.aborted_transactions,
                error_code: ErrorCode::None,
                ..outcome
            },
            Err(code) => ReadOutcome::error(code),
        };
    }
    outcome
}

/// Bumps one of the shard's replication counters.
fn count(shard: &Shard, bump: impl FnOnce(&mut kernel::metrics::ReplicationCounters)) {
    bump(&mut shard.runtime().replicas.counters.borrow_mut());
}

/// The log's offsets, no records.
fn offsets_only(log: &engine::PartitionLog) -> ReadOutcome {
    ReadOutcome {
        error_code: ErrorCode::None,
        high_watermark: log.high_watermark(),
        last_stable_offset: log.last_stable_offset(),
        log_start_offset: log.earliest_offset(),
        data: ReadData::Empty,
        aborted_transactions: None,
        preferred_read_replica: -1,
    }
}

async fn read_log(
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
    let result = if read_committed {
        log.read_committed(offset, max_bytes, mode).await
    } else {
        log.read(offset, max_bytes, mode).await
    };
    match result {
        // The engine's read goes to the socket as it is: a file range
        // shares its descriptor across shards.
        Ok(result) => ReadOutcome {
            error_code: ErrorCode::None,
            high_watermark: result.high_watermark,
            last_stable_offset: result.last_stable_offset,
            log_start_offset: result.log_start_offset,
            data: result.data,
            aborted_transactions: result.aborted_transactions,
            preferred_read_replica: -1,
        },
        Err(e) => ReadOutcome {
            error_code: e.error_code(),
            ..offsets_only(log)
        },
    }
}

/// Appends a transaction marker (WriteTxnMarkers, or the transaction
/// coordinator ending a transaction) and waits until it is durable — on
/// every ISR member when the partition is replicated, as Kafka writes
/// markers with acks=all.
async fn write_marker(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    log: &Rc<engine::PartitionLog>,
    (producer_id, producer_epoch): (i64, i16),
    commit: bool,
    coordinator_epoch: i32,
) -> Result<(), ErrorCode> {
    let leadership = replication_runtime::leadership(shard, tp);
    let appended = log
        .append_control(producer_id, producer_epoch, commit, coordinator_epoch)
        .map_err(|e| e.error_code())?;
    super::txn_join::revoke_guards(shard, tp, producer_id);
    log.wait_durable(appended.last_offset)
        .await
        .map_err(|e| e.error_code())?;
    if let Some(leading) = leadership {
        replication_runtime::wait_acks_all(
            shard,
            tp,
            log,
            appended.last_offset,
            Some(MARKER_TIMEOUT),
            &leading,
        )
        .await?;
    }
    super::marker_hooks::MarkerHooks::run(shard, tp, producer_id, commit).await
}

//! Loading a `__transaction_state` partition's transactions into the
//! shard's coordinator under the leadership it was loaded with (its
//! lease), and unloading them when that leadership ends.
//!
//! A coordinator acts for a partition only while the lease it loaded it
//! under is the partition's current one ([`loaded_lease`]): a broker that
//! lost the partition (it follows now, or a newer epoch leads) unloads its
//! transactions at once, so its timers stop and its steps fail with
//! NOT_COORDINATOR; the new leader loads what the log says and finishes it
//! (a PrepareCommit it finds is completed as a commit).

use super::TxnRuntime;
use crate::replication_runtime::{leader_lease, wait_committed_to_end, LeaderLease};
use crate::Shard;
use coordinators::txn::records::{self, TxnLogKey};
use coordinators::txn::{txn_partition_for, TXN_STATE_PARTITIONS, TXN_STATE_TOPIC};
use engine::log::ReadMode;
use engine::{ErrorCode, ReadData, TopicPartition};
use std::rc::Rc;
use std::time::Duration;

/// How long a load waits for the high watermark to reach the log end
/// (see [`wait_committed_to_end`]).
const LOAD_HW_WAIT: Duration = Duration::from_secs(5);

/// A `__transaction_state` partition came to be led here: whatever was
/// loaded for it under an older lease is dropped, and the next request or
/// timer tick loads it again.
pub fn reload_on_leadership(shard: &Shard, tp: &TopicPartition) {
    if tp.topic == TXN_STATE_TOPIC {
        unload(&shard.runtime().txns, tp.partition);
    }
}

/// The lease `partition`'s transactions are loaded under, loading them
/// first when this broker leads it under a lease they were not loaded
/// with. NOT_COORDINATOR when it does not lead the partition (whatever
/// was loaded for it is dropped); COORDINATOR_LOAD_IN_PROGRESS while the
/// load waits for the high watermark.
pub(super) async fn loaded_lease(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    partition: i32,
) -> Result<LeaderLease, ErrorCode> {
    let tp = TopicPartition::new(TXN_STATE_TOPIC, partition);
    let unload = |partition| unload(rt, partition);
    let load = async |lease| load(shard, rt, &tp, lease).await;
    rt.leases.loaded(shard, partition, unload, load).await
}

/// Drops every loaded partition whose lease is no longer current (the
/// timer runs this before each tick).
pub(super) fn unload_lost(shard: &Shard, rt: &TxnRuntime) {
    for (partition, lease) in rt.leases.lost(shard) {
        tracing::info!(
            partition,
            epoch = lease.leader_epoch,
            "transaction coordinator no longer leads its partition; unloaded"
        );
        unload(rt, partition);
    }
}

/// The `__transaction_state` partitions this shard owns.
pub(super) fn owned_partitions(shard: &Shard) -> impl Iterator<Item = i32> + '_ {
    (0..TXN_STATE_PARTITIONS)
        .filter(move |&p| shard.owner(&TopicPartition::new(TXN_STATE_TOPIC, p)) == shard.id)
}

fn unload(rt: &TxnRuntime, partition: i32) {
    rt.leases.forget(partition);
    rt.core
        .borrow_mut()
        .unload(|id| txn_partition_for(id) == partition);
}

/// Replays `tp` into the core once its HW has reached the log end, and
/// records it as loaded under `lease` if that is still current.
async fn load(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    tp: &TopicPartition,
    lease: LeaderLease,
) -> Result<(), ErrorCode> {
    let log = shard.logs.get(tp).ok_or(ErrorCode::NotCoordinator)?;
    wait_committed_to_end(&log, LOAD_HW_WAIT).await?;
    let replayed = replay_partition(&log, rt).await.map_err(|e| {
        tracing::error!(partition = tp.partition, error = %e, "cannot replay __transaction_state");
        unload(rt, tp.partition);
        ErrorCode::CoordinatorNotAvailable
    })?;
    // Only now is the final state of every id known (see
    // `TxnCoordinator::drop_stale_offsets`).
    rt.core.borrow_mut().drop_stale_offsets();
    if leader_lease(shard, tp) != Some(lease) {
        unload(rt, tp.partition);
        return Err(ErrorCode::NotCoordinator);
    }
    rt.leases.record(tp.partition, lease);
    tracing::info!(
        %tp,
        epoch = lease.leader_epoch,
        records = replayed,
        "transaction coordinator partition loaded"
    );
    Ok(())
}

async fn replay_partition(
    log: &engine::PartitionLog,
    rt: &Rc<TxnRuntime>,
) -> Result<usize, engine::EngineError> {
    let mut offset = log.log_start_offset();
    let end = log.high_watermark();
    let mut count = 0;
    while offset < end {
        let read = log.read(offset, 1 << 20, ReadMode::Copy).await?;
        let ReadData::Bytes(bytes) = read.data else {
            break;
        };
        let before = offset;
        for item in engine::batch::batches(&bytes) {
            let Ok((header, range)) = item else { break };
            offset = header.last_offset() + 1;
            if header.is_control() {
                continue;
            }
            let Ok(batch_records) = engine::batch::records(&bytes[range]) else {
                continue;
            };
            for record in batch_records {
                let Some(key) = record.key.as_deref() else {
                    continue;
                };
                let id = match records::decode_log_key(key) {
                    Ok(TxnLogKey::State(id)) => id,
                    Ok(TxnLogKey::PendingOffsets(id)) => {
                        match record.value.as_deref().map(records::decode_offsets_value) {
                            None => rt.core.borrow_mut().apply_offsets(&id, None),
                            Some(Ok(pending)) => {
                                rt.core.borrow_mut().apply_offsets(&id, Some(pending))
                            }
                            Some(Err(e)) => {
                                tracing::warn!(error = %e, transactional_id = %id,
                                    "transaction offsets record skipped");
                                continue;
                            }
                        }
                        count += 1;
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "transaction log key skipped");
                        continue;
                    }
                };
                let meta = match record.value.as_deref().map(records::decode_value) {
                    None => None,
                    Some(Ok(meta)) => Some(meta),
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, transactional_id = %id,
                            "transaction log value skipped");
                        continue;
                    }
                };
                rt.core.borrow_mut().apply(&id, meta);
                count += 1;
            }
        }
        if offset == before {
            break;
        }
    }
    Ok(count)
}

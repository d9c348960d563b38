//! Loading a `__consumer_offsets` partition's groups into the shard's
//! coordinator under the leadership it was loaded with (its lease), and
//! unloading them when that leadership ends.
//!
//! A coordinator acts for a group only while the lease its partition was
//! loaded under is the partition's current one ([`loaded_lease`]). A broker
//! that lost the partition (it follows now, or a newer epoch leads) forgets
//! its groups at once: their timers stop, waiting JoinGroup/SyncGroup calls
//! get NOT_COORDINATOR, and nothing it decided but did not replicate is
//! acted on. The new leader loads what the log says once its high watermark
//! reached the log end, so it sees every committed offset.

use super::{GroupRuntime, OFFSETS_TOPIC, REPLAY_READ_BYTES};
use crate::replication_runtime::{leader_lease, wait_committed_to_end, LeaderLease};
use crate::Shard;
use coordinators::group::offsets_partition_for;
use engine::batch::{batches, records};
use engine::log::ReadMode;
use engine::{ErrorCode, PartitionLog, ReadData, TopicPartition};
use std::rc::Rc;
use std::time::Duration;

/// How long a load waits for the high watermark to reach the log end.
const LOAD_HW_WAIT: Duration = Duration::from_secs(5);

/// A `__consumer_offsets` partition came to be led here: whatever was
/// loaded for it under an older lease is dropped, and the next request or
/// timer tick loads it again.
pub fn reload_on_leadership(shard: &Shard, tp: &TopicPartition) {
    if tp.topic == OFFSETS_TOPIC {
        unload(shard, &shard.runtime().groups, tp.partition);
    }
}

/// The lease `partition`'s groups are loaded under, loading them first
/// when this broker leads it under a lease they were not loaded with.
/// NOT_COORDINATOR when it does not lead the partition (whatever was loaded
/// for it is dropped); COORDINATOR_LOAD_IN_PROGRESS while the load waits
/// for the high watermark.
pub(super) async fn loaded_lease(
    shard: &Rc<Shard>,
    rt: &GroupRuntime,
    partition: i32,
) -> Result<LeaderLease, ErrorCode> {
    let tp = TopicPartition::new(OFFSETS_TOPIC, partition);
    let unload = |partition| unload(shard, rt, partition);
    let load = async |lease| load(shard, rt, &tp, lease).await;
    rt.leases.loaded(shard, partition, unload, load).await
}

/// Drops every loaded partition whose lease is no longer current (the
/// timer runs this before each tick).
pub(super) fn unload_lost(shard: &Shard, rt: &GroupRuntime) {
    for (partition, lease) in rt.leases.lost(shard) {
        tracing::info!(
            partition,
            epoch = lease.leader_epoch,
            "group coordinator no longer leads its partition; unloaded"
        );
        unload(shard, rt, partition);
    }
}

/// The `__consumer_offsets` partitions this shard owns and this broker
/// leads but has not loaded under their current lease.
pub(super) fn led_unloaded(shard: &Shard, rt: &GroupRuntime) -> Vec<i32> {
    let Some(partitions) = super::offsets_partitions(shard) else {
        return Vec::new();
    };
    (0..partitions)
        .map(|p| TopicPartition::new(OFFSETS_TOPIC, p))
        .filter(|tp| shard.owner(tp) == shard.id)
        .filter(|tp| {
            leader_lease(shard, tp).is_some() && rt.leases.current(shard, tp.partition).is_none()
        })
        .map(|tp| tp.partition)
        .collect()
}

/// Forgets `partition`'s groups; their waiting JoinGroup/SyncGroup calls
/// get NOT_COORDINATOR (their answer channels close).
pub(super) fn unload(shard: &Shard, rt: &GroupRuntime, partition: i32) {
    rt.leases.forget(partition);
    let Some(partitions) = super::offsets_partitions(shard) else {
        return;
    };
    let in_partition = |group: &str| offsets_partition_for(group, partitions) == partition;
    rt.coordinator.borrow_mut().unload(&in_partition);
    rt.waiters
        .borrow_mut()
        .retain(|_, (group, _)| !in_partition(group));
}

/// Replays `tp` into the coordinator once its HW has reached the log end,
/// and records it as loaded under `lease` if that is still current.
async fn load(
    shard: &Rc<Shard>,
    rt: &GroupRuntime,
    tp: &TopicPartition,
    lease: LeaderLease,
) -> Result<(), ErrorCode> {
    let log = shard.logs.get(tp).ok_or(ErrorCode::NotCoordinator)?;
    wait_committed_to_end(&log, LOAD_HW_WAIT).await?;
    let started = std::time::Instant::now();
    let replayed = replay_records(rt, &log, tp).await.map_err(|e| {
        tracing::error!(%tp, error = %e, "cannot replay __consumer_offsets");
        unload(shard, rt, tp.partition);
        ErrorCode::CoordinatorNotAvailable
    })?;
    if leader_lease(shard, tp) != Some(lease) {
        unload(shard, rt, tp.partition);
        return Err(ErrorCode::NotCoordinator);
    }
    if let Some(partitions) = super::offsets_partitions(shard) {
        let in_partition = |group: &str| offsets_partition_for(group, partitions) == tp.partition;
        let mut coordinator = rt.coordinator.borrow_mut();
        for (group, error) in coordinator.finish_replay(shard.now_ms(), &in_partition) {
            tracing::warn!(%tp, group, %error, "group membership unreadable; it starts over");
        }
    }
    rt.leases.record(tp.partition, lease);
    tracing::info!(
        %tp,
        epoch = lease.leader_epoch,
        records = replayed,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "group coordinator partition loaded"
    );
    Ok(())
}

/// Applies the group records of one `__consumer_offsets` partition, up to
/// its high watermark, to the coordinator; returns how many were replayed.
async fn replay_records(
    rt: &GroupRuntime,
    log: &PartitionLog,
    tp: &TopicPartition,
) -> Result<u64, String> {
    let mut replayed = 0u64;
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
            let mut coordinator = rt.coordinator.borrow_mut();
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
    Ok(replayed)
}

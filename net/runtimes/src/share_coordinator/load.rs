//! Loading a `__share_group_state` partition into the shard's share
//! coordinator under the leadership it was loaded with (its lease), as the
//! group coordinator loads `__consumer_offsets`: once the high watermark
//! reached the log end, every state record up to it is replayed (the
//! newest of each key wins; a tombstone removes it).

use super::{ShareCoordinator, STATE_TOPIC};
use crate::replication_runtime::{leader_lease, wait_committed_to_end, LeaderLease};
use crate::Shard;
use coordinators::share::state::{decode_key, decode_value};
use engine::batch::{batches, records};
use engine::log::ReadMode;
use engine::{ErrorCode, ReadData, TopicPartition};
use std::rc::Rc;
use std::time::Duration;

/// How long a load waits for the high watermark to reach the log end.
const LOAD_HW_WAIT: Duration = Duration::from_secs(5);
/// Bytes read per replay step.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// The lease `partition` is loaded under, loading it first when this
/// broker leads it under a lease it was not loaded with.
pub(super) async fn loaded_lease(
    shard: &Rc<Shard>,
    rt: &ShareCoordinator,
    partition: i32,
) -> Result<LeaderLease, ErrorCode> {
    let tp = TopicPartition::new(STATE_TOPIC, partition);
    let unload = |partition| unload(shard, rt, partition);
    let load = async |lease| load(shard, rt, &tp, lease).await;
    rt.leases.loaded(shard, partition, unload, load).await
}

/// Forgets the states of `partition`'s keys.
fn unload(shard: &Shard, rt: &ShareCoordinator, partition: i32) {
    rt.leases.forget(partition);
    let Some(partitions) = shard.topics.borrow().get(STATE_TOPIC).map(|e| e.partitions) else {
        return;
    };
    let mine = |key: &coordinators::share::ShareKey| {
        super::state_partition_for(key, partitions) != partition
    };
    rt.states.borrow_mut().retain(|key, _| mine(key));
    rt.fences.borrow_mut().retain(|key, _| mine(key));
}

async fn load(
    shard: &Rc<Shard>,
    rt: &ShareCoordinator,
    tp: &TopicPartition,
    lease: LeaderLease,
) -> Result<(), ErrorCode> {
    let log = shard.logs.get(tp).ok_or(ErrorCode::NotCoordinator)?;
    wait_committed_to_end(&log, LOAD_HW_WAIT).await?;
    let mut offset = log.log_start_offset();
    let end = log.high_watermark();
    let mut replayed = 0u64;
    while offset < end {
        let read = log.read(offset, REPLAY_READ_BYTES, ReadMode::Copy).await;
        let bytes = match read.map(|r| r.data) {
            Ok(ReadData::Bytes(bytes)) => bytes,
            Ok(_) => break,
            Err(e) => {
                tracing::error!(%tp, error = %e, "cannot replay __share_group_state");
                return Err(ErrorCode::CoordinatorNotAvailable);
            }
        };
        let before = offset;
        for (header, range) in batches(&bytes).map_while(Result::ok) {
            offset = header.last_offset() + 1;
            if header.is_control() {
                continue;
            }
            let batch = bytes.get(range).unwrap_or_default();
            for record in records(batch).into_iter().flatten() {
                replayed += 1;
                replay(rt, record.key.as_deref(), record.value.as_deref());
            }
        }
        if offset <= before {
            break;
        }
    }
    if leader_lease(shard, tp) != Some(lease) {
        unload(shard, rt, tp.partition);
        return Err(ErrorCode::NotCoordinator);
    }
    rt.leases.record(tp.partition, lease);
    tracing::info!(%tp, epoch = lease.leader_epoch, records = replayed, "share coordinator partition loaded");
    Ok(())
}

/// Applies one state record; a bad one is skipped (it must not keep the
/// broker down).
fn replay(rt: &ShareCoordinator, key: Option<&[u8]>, value: Option<&[u8]>) {
    let Some(key) = key.map(decode_key) else {
        return;
    };
    let key = match key {
        Ok(key) => key,
        Err(e) => return tracing::warn!(error = %e, "share state record skipped in replay"),
    };
    match value.map(decode_value) {
        None => {
            rt.states.borrow_mut().remove(&key);
        }
        Some(Ok(snapshot)) => {
            rt.states.borrow_mut().insert(key, snapshot);
        }
        Some(Err(e)) => tracing::warn!(error = %e, "share state record skipped in replay"),
    }
}

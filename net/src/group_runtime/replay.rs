//! Rebuilding a shard's group coordinator from its `__consumer_offsets`
//! partitions at start, and loading one partition whose leadership (and so
//! coordinatorship) moved to this broker.

use super::execute::deliver;
use super::persist::persist;
use super::{GroupRuntime, OFFSETS_TOPIC, REPLAY_READ_BYTES};
use crate::shard::Shard;
use engine::batch::{batches, records};
use engine::log::ReadMode;
use engine::ReadData;
use std::rc::Rc;

/// Applies the group records of one `__consumer_offsets` partition to this
/// shard's coordinator; returns how many were replayed.
async fn replay_records(
    shard: &Rc<Shard>,
    runtime: &GroupRuntime,
    tp: &engine::TopicPartition,
) -> Result<u64, String> {
    let mut replayed = 0u64;
    let Some(log) = shard.logs.get(tp) else {
        return Ok(0);
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
            let mut coordinator = runtime.coordinator.borrow_mut();
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

/// Finishes a replay: expires what is due, persists what that decided, and
/// answers the requests that waited for it.
async fn finish_replay(shard: &Rc<Shard>, runtime: &Rc<GroupRuntime>) {
    let now = shard.now_ms();
    let (records, responses) = {
        let mut coordinator = runtime.coordinator.borrow_mut();
        coordinator.finish_replay(now);
        (coordinator.tick(now), coordinator.take_responses())
    };
    if let Err(code) = persist(shard, records).await {
        tracing::warn!(%code, "records after replay not persisted");
    }
    deliver(runtime, responses);
}

/// Loads one `__consumer_offsets` partition this broker has just become
/// the leader of (its coordinator moved here): its groups and committed
/// offsets as the previous leader wrote them.
pub async fn replay_partition(
    shard: &Rc<Shard>,
    tp: &engine::TopicPartition,
) -> Result<(), String> {
    let runtime = shard.service::<GroupRuntime>();
    let replayed = replay_records(shard, &runtime, tp).await?;
    finish_replay(shard, &runtime).await;
    tracing::info!(%tp, records = replayed, "group coordinator partition loaded");
    Ok(())
}

/// Rebuilds this shard's coordinator from its `__consumer_offsets`
/// partitions; run before the shard serves anything.
pub async fn replay(shard: &Rc<Shard>) -> Result<(), String> {
    let runtime = shard.service::<GroupRuntime>();
    let owned: Vec<engine::TopicPartition> = shard
        .logs
        .partitions()
        .into_iter()
        .filter(|tp| tp.topic == OFFSETS_TOPIC)
        .collect();
    let mut replayed = 0u64;
    let replay_started = std::time::Instant::now();
    for tp in owned {
        replayed += replay_records(shard, &runtime, &tp).await?;
    }
    finish_replay(shard, &runtime).await;
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

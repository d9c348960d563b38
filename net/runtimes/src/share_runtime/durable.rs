//! The owner's share-partitions and their durable state: a share-partition
//! is made from what its share coordinator holds the first time a fetch
//! names it under the partition's current role (or from
//! `share.auto.offset.reset` when nothing is held, that start written at
//! once), and written whole after each acknowledgement, stamped with the
//! partition's leader epoch and the next sequence.

use super::persister;
use super::OwnedSharePartition;
use crate::replication_runtime;
use crate::routing::missing_partition_error;
use crate::Shard;
use coordinators::share::{ShareAutoOffsetReset, ShareKey, SharePartition, ShareSnapshot};
use engine::{ErrorCode, PartitionLog, TopicPartition};
use std::rc::Rc;

/// The role generation of `tp` here (0: one replica, no role) and its
/// topic's id (zeros: the topic is gone): a share-partition made under
/// others is stale.
fn incarnation(shard: &Shard, tp: &TopicPartition) -> (u64, [u8; 16]) {
    let generation = (shard.runtime().replicas.role(tp)).map_or(0, |(generation, _)| generation);
    let topic_id = (shard.topics.borrow().get(&tp.topic)).map_or([0; 16], |e| e.topic_id);
    (generation, topic_id)
}

/// The share coordinator's key of the group's share-partition of `tp`.
fn key_of(shard: &Shard, group: &str, tp: &TopicPartition) -> Result<ShareKey, ErrorCode> {
    let topic_id = (shard.topics.borrow().get(&tp.topic))
        .map(|entry| entry.topic_id)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    Ok(ShareKey::new(group.to_string(), topic_id, tp.partition))
}

/// Runs `f` on the group's share-partition of `tp` under the partition's
/// current role: INVALID_RECORD_STATE when there is none (nothing is held
/// there), or an error when this shard does not serve `tp` to clients.
pub(super) fn with_state<T>(
    shard: &Shard,
    group: &str,
    tp: &TopicPartition,
    f: impl FnOnce(&mut SharePartition) -> T,
) -> Result<T, ErrorCode> {
    let Some(log) = shard.logs.get(tp) else {
        return Err(missing_partition_error(shard, tp));
    };
    if !replication_runtime::serves_clients(shard, tp) {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    let now = incarnation(shard, tp);
    let mut partitions = shard.runtime().share.partitions.borrow_mut();
    let key = (group.to_string(), tp.clone());
    match partitions.get_mut(&key) {
        Some(owned) if (owned.generation, owned.topic_id) == now => {
            owned.state.skip_to(log.log_start_offset());
            Ok(f(&mut owned.state))
        }
        _ => Err(ErrorCode::InvalidRecordState),
    }
}

/// Makes the group's share-partition of `tp` when there is none under the
/// partition's current role: from the share coordinator's state, else at
/// the offset `reset` names, that start written first.
/// With `revalidate` (a share session opens), an idle share-partition is
/// read again and replaced when an admin reset changed it meanwhile.
pub(super) async fn ensure_loaded(
    shard: &Rc<Shard>,
    group: &str,
    tp: &TopicPartition,
    reset: ShareAutoOffsetReset,
    revalidate: bool,
) -> Result<(), ErrorCode> {
    let map_key = (group.to_string(), tp.clone());
    let (generation, topic_id) = incarnation(shard, tp);
    // Whether it is held under this role, idle (looked at only when
    // revalidating: it walks the window), and what it last wrote.
    let held = |shard: &Shard| {
        (shard.runtime().share.partitions.borrow().get(&map_key))
            .filter(|owned| (owned.generation, owned.topic_id) == (generation, topic_id))
            .map(|owned| {
                let idle = revalidate && owned.is_idle();
                (idle, owned.state_epoch, owned.next_sequence)
            })
    };
    let Some(log) = shard.logs.get(tp) else {
        return Err(missing_partition_error(shard, tp));
    };
    let written = match held(shard) {
        Some((idle, state_epoch, next)) if revalidate && idle => Some((state_epoch, next)),
        Some(_) => return Ok(()),
        None => None,
    };
    if !replication_runtime::serves_clients(shard, tp) {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    let key = key_of(shard, group, tp)?;
    let leader_epoch = log.leader_epoch();
    let stored = persister::read(shard, &key, leader_epoch).await?;
    if let Some((state_epoch, next)) = written {
        let unchanged = stored
            .as_ref()
            .is_some_and(|s| (s.state_epoch, s.sequence.wrapping_add(1)) == (state_epoch, next));
        if unchanged || held(shard) != Some((true, state_epoch, next)) {
            return Ok(());
        }
        tracing::info!(%tp, group, "share-partition state reset by an admin; read again");
    }
    let start = async || start_offset(shard, &log, reset).await;
    let owned = made(shard, &key, stored, start, leader_epoch).await?;
    if held(shard) == written.map(|(epoch, next)| (true, epoch, next)) {
        let owned = OwnedSharePartition {
            generation,
            topic_id,
            ..owned
        };
        (shard.runtime().share.partitions.borrow_mut()).insert(map_key, owned);
    }
    Ok(())
}

/// The share-partition `stored` holds, or a new one from `start()` (its
/// start written first) when it holds none; its role and topic are
/// filled in by the caller.
async fn made(
    shard: &Rc<Shard>,
    key: &ShareKey,
    stored: Option<ShareSnapshot>,
    start: impl AsyncFnOnce() -> Result<i64, ErrorCode>,
    leader_epoch: i32,
) -> Result<OwnedSharePartition, ErrorCode> {
    let state_epoch = stored.as_ref().map_or(0, |s| s.state_epoch);
    let mut next_sequence = stored.as_ref().map_or(0, |s| s.sequence.wrapping_add(1));
    let state = match stored.filter(ShareSnapshot::holds_state) {
        Some(snapshot) => SharePartition::restore(&snapshot).map_err(|e| {
            tracing::warn!(group = %key.group, partition = key.partition, error = %e, "share-partition state unreadable");
            ErrorCode::CoordinatorNotAvailable
        })?,
        None => {
            let state = SharePartition::new(start().await?);
            let snapshot = ShareSnapshot {
                state_epoch,
                ..state.snapshot(leader_epoch, next_sequence)
            };
            persister::write(shard, key, snapshot).await?;
            next_sequence = next_sequence.wrapping_add(1);
            state
        }
    };
    Ok(OwnedSharePartition {
        generation: 0,
        topic_id: [0; 16],
        state,
        leader_epoch,
        next_sequence,
        state_epoch,
        writes_in_flight: 0,
    })
}

/// Where a share-partition with no state starts: the log start, the high
/// watermark, or (`by_duration`) the first record no older than the
/// duration, remote segments included, as ListOffsets by timestamp finds
/// it; the high watermark when no record is that recent.
async fn start_offset(
    shard: &Rc<Shard>,
    log: &PartitionLog,
    reset: ShareAutoOffsetReset,
) -> Result<i64, ErrorCode> {
    let Some(timestamp_ms) = reset.lookup_timestamp_ms(shard.now_ms()) else {
        return Ok(match reset {
            ShareAutoOffsetReset::Earliest => log.log_start_offset(),
            _ => log.high_watermark(),
        });
    };
    let found = crate::routing::offset_of(shard, log, timestamp_ms, false).await?;
    Ok(found.map_or_else(|| log.high_watermark(), |(offset, _)| offset))
}

/// Writes the group's share-partition of `tp` whole to its share
/// coordinator. A write fenced by an admin reset (FENCED_STATE_EPOCH)
/// drops the share-partition, so the next fetch reads the new state; the
/// acknowledgement it carried is refused (INVALID_RECORD_STATE).
pub(super) async fn persist(
    shard: &Rc<Shard>,
    group: &str,
    tp: &TopicPartition,
) -> Result<(), ErrorCode> {
    let key = key_of(shard, group, tp)?;
    let map_key = (group.to_string(), tp.clone());
    let snapshot = {
        let mut partitions = shard.runtime().share.partitions.borrow_mut();
        let owned = partitions
            .get_mut(&map_key)
            .ok_or(ErrorCode::InvalidRecordState)?;
        let sequence = owned.next_sequence;
        owned.next_sequence = sequence.wrapping_add(1);
        owned.writes_in_flight += 1;
        ShareSnapshot {
            state_epoch: owned.state_epoch,
            ..owned.state.snapshot(owned.leader_epoch, sequence)
        }
    };
    let outcome = persister::write(shard, &key, snapshot.clone()).await;
    let mut partitions = shard.runtime().share.partitions.borrow_mut();
    let same = |owned: &OwnedSharePartition| owned.state_epoch == snapshot.state_epoch;
    if let Some(owned) = partitions.get_mut(&map_key).filter(|owned| same(owned)) {
        owned.writes_in_flight = owned.writes_in_flight.saturating_sub(1);
    }
    match outcome {
        Err(ErrorCode::FencedStateEpoch) => {
            if partitions.get(&map_key).is_some_and(same) {
                partitions.remove(&map_key);
            }
            Err(ErrorCode::InvalidRecordState)
        }
        other => other,
    }
}

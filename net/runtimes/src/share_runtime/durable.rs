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
use coordinators::share::{ShareKey, SharePartition};
use engine::{ErrorCode, TopicPartition};
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
/// the log start (`from_earliest`) or end, that start written first.
pub(super) async fn ensure_loaded(
    shard: &Rc<Shard>,
    group: &str,
    tp: &TopicPartition,
    from_earliest: bool,
) -> Result<(), ErrorCode> {
    let map_key = (group.to_string(), tp.clone());
    let (generation, topic_id) = incarnation(shard, tp);
    let loaded = |shard: &Shard| {
        (shard.runtime().share.partitions.borrow().get(&map_key))
            .is_some_and(|owned| (owned.generation, owned.topic_id) == (generation, topic_id))
    };
    if loaded(shard) {
        return Ok(());
    }
    let log = shard
        .logs
        .get(tp)
        .ok_or_else(|| missing_partition_error(shard, tp))?;
    if !replication_runtime::serves_clients(shard, tp) {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    let key = key_of(shard, group, tp)?;
    let leader_epoch = log.leader_epoch();
    let (state, next_sequence) = match persister::read(shard, &key, leader_epoch).await? {
        Some(snapshot) => {
            let state = SharePartition::restore(&snapshot).map_err(|e| {
                tracing::warn!(%tp, group, error = %e, "share-partition state unreadable");
                ErrorCode::CoordinatorNotAvailable
            })?;
            (state, snapshot.sequence.wrapping_add(1))
        }
        None => {
            let start = if from_earliest {
                log.log_start_offset()
            } else {
                log.high_watermark()
            };
            let state = SharePartition::new(start);
            persister::write(shard, &key, state.snapshot(leader_epoch, 0)).await?;
            (state, 1)
        }
    };
    if !loaded(shard) {
        let owned = OwnedSharePartition {
            generation,
            topic_id,
            state,
            leader_epoch,
            next_sequence,
        };
        shard
            .runtime()
            .share
            .partitions
            .borrow_mut()
            .insert(map_key, owned);
    }
    Ok(())
}

/// Writes the group's share-partition of `tp` whole to its share
/// coordinator.
pub(super) async fn persist(
    shard: &Rc<Shard>,
    group: &str,
    tp: &TopicPartition,
) -> Result<(), ErrorCode> {
    let key = key_of(shard, group, tp)?;
    let snapshot = {
        let mut partitions = shard.runtime().share.partitions.borrow_mut();
        let owned = (partitions.get_mut(&(group.to_string(), tp.clone())))
            .ok_or(ErrorCode::InvalidRecordState)?;
        let sequence = owned.next_sequence;
        owned.next_sequence = sequence.wrapping_add(1);
        owned.state.snapshot(owned.leader_epoch, sequence)
    };
    persister::write(shard, &key, snapshot).await
}

//! Appending the coordinator's records to the owned `__consumer_offsets`
//! partitions, durably, before anything is answered.

use super::OFFSETS_TOPIC;
use crate::group::records::{decode_key, RecordKey};
use crate::group::{offsets_partition_for, Record};
use crate::shard::Shard;
use engine::batch::header::Compression;
use engine::batch::BatchBuilder;
use engine::ErrorCode;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Appends `records` to the `__consumer_offsets` partitions of their groups
/// (all owned by this shard) and waits until they are durable.
pub(super) async fn persist(shard: &Rc<Shard>, records: Vec<Record>) -> Result<(), ErrorCode> {
    if records.is_empty() {
        return Ok(());
    }
    let Some(partitions) = shard
        .topics
        .borrow()
        .get(OFFSETS_TOPIC)
        .map(|e| e.partitions)
    else {
        tracing::warn!("__consumer_offsets missing; group records not persisted");
        return Err(ErrorCode::CoordinatorNotAvailable);
    };
    let mut by_partition: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    for record in records {
        let group = match decode_key(&record.0) {
            Ok(RecordKey::OffsetCommit { group, .. })
            | Ok(RecordKey::GroupMetadata { group })
            | Ok(RecordKey::PendingTxnOffset { group, .. }) => group,
            other => {
                // The coordinator only writes the key kinds above.
                tracing::warn!(?other, "group record with an unexpected key dropped");
                continue;
            }
        };
        by_partition
            .entry(offsets_partition_for(&group, partitions))
            .or_default()
            .push(record);
    }
    let now = shard.now_ms();
    let mut appended = Vec::with_capacity(by_partition.len());
    for (partition, records) in by_partition {
        let tp = engine::TopicPartition::new(OFFSETS_TOPIC, partition);
        let Some(log) = shard.logs.get(&tp) else {
            tracing::warn!(
                partition,
                "__consumer_offsets partition not on its owner shard"
            );
            return Err(ErrorCode::CoordinatorNotAvailable);
        };
        let mut builder = BatchBuilder::new(0, Compression::None);
        for (delta, (key, value)) in records.iter().enumerate() {
            builder.push(delta as i32, now, Some(key), value.as_deref(), &[]);
        }
        let mut batch = builder.build().map_err(|e| {
            tracing::warn!(error = %e, "cannot build a __consumer_offsets batch");
            ErrorCode::UnknownServerError
        })?;
        let result = log
            .append(&mut batch, log.leader_epoch())
            .map_err(|e| e.error_code())?;
        appended.push((log, result.last_offset));
    }
    for (log, last_offset) in appended {
        log.wait_durable(last_offset)
            .await
            .map_err(|e| e.error_code())?;
    }
    Ok(())
}

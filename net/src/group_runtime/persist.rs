//! Appending the coordinator's records to the owned `__consumer_offsets`
//! partitions as their leader (acks=all: a write counts once the high
//! watermark passed it), before anything is answered. A coordinator whose
//! partition is led elsewhere now (it follows, or is cut off and a newer
//! epoch leads) gets NOT_COORDINATOR: its writes never reach a follower's
//! log, and an offset commit is acknowledged only once the ISR has it.

use super::OFFSETS_TOPIC;
use crate::group::records::{decode_key, RecordKey};
use crate::group::{offsets_partition_for, Record};
use crate::replication_runtime::{append_as_leader, coordinator_error, leader_lease};
use crate::shard::Shard;
use engine::batch::header::Compression;
use engine::batch::BatchBuilder;
use engine::ErrorCode;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// Appends `records` to the `__consumer_offsets` partitions of their groups
/// (all owned by this shard), as their leader, and waits until the high
/// watermark passed them.
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
    for (partition, records) in by_partition {
        let tp = engine::TopicPartition::new(OFFSETS_TOPIC, partition);
        let lease = leader_lease(shard, &tp).ok_or(ErrorCode::NotCoordinator)?;
        let mut builder = BatchBuilder::new(0, Compression::None);
        for (delta, (key, value)) in records.iter().enumerate() {
            builder.push(delta as i32, now, Some(key), value.as_deref(), &[]);
        }
        let mut batch = builder.build().map_err(|e| {
            tracing::warn!(error = %e, "cannot build a __consumer_offsets batch");
            ErrorCode::UnknownServerError
        })?;
        append_as_leader(shard, &tp, lease, &mut batch, GROUP_WRITE_TIMEOUT)
            .await
            .map_err(|code| persist_error(partition, code))?;
    }
    Ok(())
}

/// How long a group write may wait for its high watermark: Kafka's
/// `offsets.commit.timeout.ms` default.
const GROUP_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

fn persist_error(partition: i32, code: ErrorCode) -> ErrorCode {
    tracing::warn!(partition, %code, "group records not persisted");
    coordinator_error(code)
}

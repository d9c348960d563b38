//! Appending the coordinator's records to the owned `__consumer_offsets`
//! partitions as their leader (acks=all: a write counts once the high
//! watermark passed it), before anything is answered. A coordinator whose
//! partition is led elsewhere now (it follows, or is cut off and a newer
//! epoch leads) gets NOT_COORDINATOR: its writes never reach a follower's
//! log, and an offset commit is acknowledged only once the ISR has it.
//! A partition whose write fails is unloaded: the coordinator's memory
//! had already taken the step, and only the log may say what happened.

use super::replay::unload;
use super::{offsets_partitions, GroupRuntime, OFFSETS_TOPIC};
use crate::replication_runtime::{append_as_leader, coordinator_error};
use crate::Shard;
use coordinators::group::records::{decode_key, RecordKey};
use coordinators::group::{offsets_partition_for, Record};
use engine::batch::header::Compression;
use engine::batch::BatchBuilder;
use engine::ErrorCode;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// What a persist could not write: the `__consumer_offsets` partitions
/// whose records did not reach the high watermark, with the error for their
/// callers. Each was unloaded (its groups forgotten and reloaded from the
/// log on next use), so the coordinator never acts on what it did not write.
pub(super) type Unpersisted = BTreeMap<i32, ErrorCode>;

/// Appends `records` to the `__consumer_offsets` partitions of their groups
/// (all owned by this shard), as their leader under the lease each was
/// loaded with, and waits until the high watermark passed them.
pub(super) async fn persist(
    shard: &Rc<Shard>,
    rt: &GroupRuntime,
    records: Vec<Record>,
) -> Unpersisted {
    let mut failed = Unpersisted::new();
    if records.is_empty() {
        return failed;
    }
    let Some(partitions) = offsets_partitions(shard) else {
        tracing::warn!("__consumer_offsets missing; group records not persisted");
        return failed;
    };
    let now = shard.now_ms();
    for (partition, records) in by_partition(records, partitions) {
        if let Err(code) = append(shard, rt, partition, now, &records).await {
            tracing::warn!(partition, %code, "group records not persisted; partition unloaded");
            unload(shard, rt, partition);
            failed.insert(partition, code);
        }
    }
    failed
}

/// The records grouped by the `__consumer_offsets` partition of their group.
fn by_partition(records: Vec<Record>, partitions: i32) -> BTreeMap<i32, Vec<Record>> {
    let mut by_partition: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    for record in records {
        let key = decode_key(&record.0);
        let group = match key.as_ref().map(RecordKey::group) {
            Ok(Some(group)) => group,
            other => {
                // The coordinator only writes the key kinds above.
                tracing::warn!(?other, "group record with an unexpected key dropped");
                continue;
            }
        };
        by_partition
            .entry(offsets_partition_for(group, partitions))
            .or_default()
            .push(record);
    }
    by_partition
}

/// Appends one partition's records as its leader under the loaded lease.
async fn append(
    shard: &Rc<Shard>,
    rt: &GroupRuntime,
    partition: i32,
    now_ms: i64,
    records: &[Record],
) -> Result<(), ErrorCode> {
    let tp = engine::TopicPartition::new(OFFSETS_TOPIC, partition);
    let loaded = rt.leases.recorded(partition);
    let lease = loaded.ok_or(ErrorCode::NotCoordinator)?;
    let mut builder = BatchBuilder::new(0, Compression::None);
    for (delta, (key, value)) in records.iter().enumerate() {
        builder.push(delta as i32, now_ms, Some(key), value.as_deref(), &[]);
    }
    let mut batch = builder.build().map_err(|e| {
        tracing::warn!(error = %e, "cannot build a __consumer_offsets batch");
        ErrorCode::UnknownServerError
    })?;
    append_as_leader(shard, &tp, lease, &mut batch, GROUP_WRITE_TIMEOUT)
        .await
        .map(|_| ())
        .map_err(coordinator_error)
}

/// How long a group write may wait for its high watermark: Kafka's
/// `offsets.commit.timeout.ms` default.
const GROUP_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

//! Deleting remote segments, Kafka's expiration task, on the partition's
//! leader: copies left unfinished (a crash, a store error, an older
//! leader), deletions left half done, and finished segments past
//! `retention.ms` / `retention.bytes` (over the whole log, remote and
//! local), wholly below a DeleteRecords, or of a topic whose tiering was
//! turned off with
//! `remote.log.delete.on.disable`. Each goes DeleteSegmentStarted (after
//! which no reader is sent to it), then its objects, then
//! DeleteSegmentFinished. Retention deletes only a prefix, as locally.
//!
//! [`purge_deleted_topics`]: the objects of deleted topics, by the active
//! controller's broker.

use super::upload::{commit, transition, Leading};
use crate::cluster_runtime::ControllerRpc;
use crate::remote_keys::{topic_prefix, SegmentKeys};
use crate::Shard;
use cluster::metadata::{RemoteSegment, RemoteSegmentState};
use engine::PartitionLog;
use remote_storage::RemoteStore;
use std::rc::Rc;

/// The remote segments of `log` to delete now, oldest first.
fn doomed(log: &PartitionLog, segments: &[RemoteSegment], now_ms: i64) -> Vec<RemoteSegment> {
    let config = log.config();
    let remote = &config.remote;
    let drop_all = !remote.storage_enable && remote.delete_on_disable;
    let mut out: Vec<RemoteSegment> = segments
        .iter()
        .filter(|s| s.state != RemoteSegmentState::CopySegmentFinished || drop_all)
        .cloned()
        .collect();
    if drop_all {
        return out;
    }
    let finished: Vec<&RemoteSegment> = segments
        .iter()
        .filter(|s| s.state == RemoteSegmentState::CopySegmentFinished)
        .collect();
    let remote_end = finished.iter().map(|s| s.end_offset).max().unwrap_or(-1);
    let mut total = finished.iter().map(|s| s.size_bytes).sum::<i64>()
        + i64::try_from(log.local_bytes_after(remote_end)).unwrap_or(i64::MAX);
    for segment in finished {
        let by_time = config.retention_ms >= 0
            && segment.max_timestamp_ms >= 0
            && now_ms - segment.max_timestamp_ms > config.retention_ms;
        let by_size =
            config.retention_bytes >= 0 && total - segment.size_bytes >= config.retention_bytes;
        let by_delete_records = segment.end_offset < log.deleted_below();
        if !(by_time || by_size || by_delete_records) {
            break;
        }
        total -= segment.size_bytes;
        out.push(segment.clone());
    }
    out
}

/// Deletes what is due on a partition this broker leads; how many went.
pub(super) async fn expire_partition(
    shard: &Rc<Shard>,
    store: &RemoteStore,
    log: &PartitionLog,
    leading: Leading,
) -> Result<u64, String> {
    let tp = log.topic_partition();
    let segments: Vec<RemoteSegment> = {
        let image = shard.runtime().view.image();
        let all = image.remote_segments(&log.topic_id(), tp.partition);
        all.cloned().collect()
    };
    let mut deleted = 0;
    for segment in doomed(log, &segments, shard.now_ms()) {
        if segment.state != RemoteSegmentState::DeleteSegmentStarted {
            let start = RemoteSegmentState::DeleteSegmentStarted;
            commit(shard, transition(leading, log, segment.segment_id, start)).await?;
        }
        let keys = SegmentKeys::new(
            &tp.topic,
            &log.topic_id(),
            tp.partition,
            segment.base_offset,
            &segment.segment_id,
        );
        store
            .delete(keys.all().to_vec())
            .await
            .map_err(|e| format!("deleting remote segment {}: {e}", keys.log()))?;
        let done = RemoteSegmentState::DeleteSegmentFinished;
        commit(shard, transition(leading, log, segment.segment_id, done)).await?;
        tracing::info!(
            partition = %tp,
            base_offset = segment.base_offset,
            end_offset = segment.end_offset,
            "remote segment deleted"
        );
        deleted += 1;
    }
    Ok(deleted)
}

/// Deletes every object of the deleted topics that had remote segments,
/// then commits that each is gone.
pub(super) async fn purge_deleted_topics(
    shard: &Rc<Shard>,
    store: &RemoteStore,
) -> Result<(), String> {
    let doomed: Vec<([u8; 16], String)> = {
        let image = shard.runtime().view.image();
        let topics = image.remote_topics_to_purge();
        topics.map(|(id, t)| (id, t.name().to_string())).collect()
    };
    for (topic_id, name) in doomed {
        let prefix = topic_prefix(&name, &topic_id);
        let objects = store
            .delete_prefix(prefix.clone())
            .await
            .map_err(|e| format!("purging {prefix}: {e}"))?;
        commit(shard, ControllerRpc::RemoteTopicPurged { topic_id }).await?;
        tracing::info!(topic = %name, objects, "remote data of a deleted topic purged");
    }
    Ok(())
}

//! The remote log manager's round, every
//! `remote.log.manager.task.interval.ms` on every shard, over the logs the
//! shard holds:
//! - every replica of a tiered topic learns how far the committed remote
//!   copy reaches, so its local retention deletes only uploaded segments
//!   and reads below its local log go to the store;
//! - the leader uploads the sealed segments below its last stable offset,
//!   oldest first, then deletes what is due remotely;
//! - on the active controller's broker, the objects of deleted topics go.
//!
//! A partition whose upload or deletion fails waits
//! `remote.log.manager.task.retry.backoff.ms`, doubling up to the max,
//! before its next try; the others go on. Nothing here blocks a produce or
//! a fetch: it is one more task on the shard, awaiting the store's thread.

use super::expire::{expire_partition, purge_deleted_topics};
use super::upload::{upload_segment, Leading};
use super::TieredRuntime;
use crate::cluster_runtime::METADATA_SHARD;
use crate::replication_runtime::serves_clients;
use crate::Shard;
use cluster::metadata::MetadataImage;
use engine::{PartitionLog, RemoteSpan, TopicPartition};
use remote_storage::RemoteStore;
use std::rc::Rc;
use std::time::Duration;

/// Runs the rounds for the life of the shard (when tiered storage is on).
pub async fn run(shard: Rc<Shard>) {
    let tiered = shard.runtime().tiered.clone();
    let Some(store) = tiered.store.clone() else {
        return;
    };
    let interval = Duration::from_millis(shard.config.tiered.task_interval_ms);
    loop {
        glommio::timer::sleep(interval).await;
        round(&shard, &tiered, &store).await;
    }
}

/// One round over the shard's logs.
async fn round(shard: &Rc<Shard>, tiered: &TieredRuntime, store: &RemoteStore) {
    let (mut lag_segments, mut lag_bytes) = (0, 0);
    for tp in shard.logs.partitions() {
        let Some(log) = shard.logs.get(&tp) else {
            continue;
        };
        let image = shard.runtime().view.image();
        if !learn_remote_span(&image, &log) {
            continue;
        }
        let Some(leading) = leading(shard, &image, &log) else {
            continue;
        };
        if !tiered.due(&tp, shard.now_ms()) {
            continue;
        }
        let outcome = lead_partition(shard, tiered, store, &log, leading, &image).await;
        if let Err(error) = &outcome {
            tracing::warn!(partition = %tp, %error, "tiered storage task failed; retrying later");
        }
        tiered.settle(&tp, shard.now_ms(), &shard.config.tiered, outcome.is_ok());
        let end = log.remote_span().end_offset.unwrap_or(-1);
        let (segments, bytes) = log.local_sealed_after(end);
        lag_segments += segments;
        lag_bytes += bytes;
    }
    tiered.counters.upload_lag_segments.set(lag_segments);
    tiered.counters.upload_lag_bytes.set(lag_bytes);
    let controller = shard
        .runtime()
        .quorum
        .as_ref()
        .is_some_and(|q| q.is_leader());
    if shard.id == METADATA_SHARD && controller {
        if let Err(error) = purge_deleted_topics(shard, store).await {
            tracing::warn!(%error, "purging deleted topics from tiered storage failed");
        }
    }
}

/// Tells `log` how far its remote copy reaches; whether the topic is
/// tiered or still has remote segments (else there is nothing to do).
fn learn_remote_span(image: &MetadataImage, log: &PartitionLog) -> bool {
    let topic_id = log.topic_id();
    let partition = log.topic_partition().partition;
    let span = RemoteSpan {
        start_offset: image.remote_log_start_offset(&topic_id, partition),
        end_offset: image.remote_log_end_offset(&topic_id, partition),
    };
    log.set_remote_span(span);
    let has_segments = image.remote_segments(&topic_id, partition).next().is_some();
    log.config().remote.storage_enable || has_segments
}

/// This broker leads the partition, in the epoch its log has taken on.
fn leading(shard: &Shard, image: &MetadataImage, log: &PartitionLog) -> Option<Leading> {
    let tp = log.topic_partition();
    let state = image.partition(&log.topic_id(), tp.partition)?;
    let broker_id = shard.config.broker_id;
    let leads = state.leader == broker_id
        && state.leader_epoch == log.leader_epoch()
        && serves_clients(shard, tp);
    leads.then_some(Leading {
        broker_id,
        leader_epoch: state.leader_epoch,
    })
}

/// Uploads what is ready, then deletes what is due.
async fn lead_partition(
    shard: &Rc<Shard>,
    tiered: &TieredRuntime,
    store: &RemoteStore,
    log: &PartitionLog,
    leading: Leading,
    image: &MetadataImage,
) -> Result<(), String> {
    let remote = log.config().remote;
    if remote.storage_enable && !remote.copy_disable {
        let tp = log.topic_partition();
        // Carried forward here: this shard's image may not show our own
        // last commit yet.
        let mut end = image
            .remote_log_end_offset(&log.topic_id(), tp.partition)
            .unwrap_or(-1);
        loop {
            if tiered.quotas.copy_exceeded() {
                // Kafka's copy quota: the segment waits for a later round.
                bump(&tiered.counters.copy_throttled);
                break;
            }
            let next = log.segment_to_upload(end).await;
            let Some(segment) = next.map_err(|e| e.to_string())? else {
                break;
            };
            let segment_end = segment.end_offset;
            let bytes = upload_segment(shard, store, log, leading, segment).await?;
            tiered.record_upload(bytes);
            end = segment_end;
        }
    }
    let deleted = expire_partition(shard, store, log, leading).await?;
    tiered.record_deleted(deleted);
    Ok(())
}

impl TieredRuntime {
    /// Whether the partition's backoff (after a failure) is over.
    fn due(&self, tp: &TopicPartition, now_ms: i64) -> bool {
        self.backoff
            .borrow()
            .get(tp)
            .is_none_or(|&(_, next_ms)| now_ms >= next_ms)
    }

    /// After a round on the partition: clears its backoff, or doubles it.
    fn settle(
        &self,
        tp: &TopicPartition,
        now_ms: i64,
        config: &kernel::config::tiered::TieredStorageConfig,
        ok: bool,
    ) {
        let mut backoff = self.backoff.borrow_mut();
        if ok {
            backoff.remove(tp);
            return;
        }
        self.counters
            .task_errors
            .set(self.counters.task_errors.get() + 1);
        let wait_ms = backoff
            .get(tp)
            .map_or(config.retry_backoff_ms, |&(wait, _)| wait.saturating_mul(2))
            .min(config.retry_backoff_max_ms);
        let next_ms = now_ms.saturating_add(i64::try_from(wait_ms).unwrap_or(i64::MAX));
        backoff.insert(tp.clone(), (wait_ms, next_ms));
    }

    fn record_upload(&self, bytes: u64) {
        self.quotas.record_copy(bytes);
        let c = &self.counters;
        c.segments_uploaded.set(c.segments_uploaded.get() + 1);
        c.bytes_uploaded.set(c.bytes_uploaded.get() + bytes);
    }

    fn record_deleted(&self, segments: u64) {
        let c = &self.counters;
        c.segments_deleted.set(c.segments_deleted.get() + segments);
    }
}

fn bump(counter: &std::cell::Cell<u64>) {
    counter.set(counter.get() + 1);
}

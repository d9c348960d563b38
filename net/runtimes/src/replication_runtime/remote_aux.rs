//! A follower's start after the remote log (Kafka's
//! `buildRemoteLogAuxState`): a follower whose log ends below its leader's
//! local log start on a tiered topic does not fetch what only the store
//! holds. It starts its log after the committed remote segment holding the
//! offset before the leader's local start, with that segment's uploaded
//! leader epochs and producer snapshot, so that it fences stale epochs and
//! deduplicates idempotent producers as if it had replicated all of it,
//! and it can lead without forgetting a producer that wrote only below.

use crate::remote_keys::SegmentKeys;
use crate::Shard;
use engine::log::epoch_cache::parse_checkpoint;
use engine::log::RemoteAuxState;
use engine::PartitionLog;
use remote_storage::RemoteError;

/// Starts `log` over after the remote segment holding
/// `leader_local_start - 1`, with its state: the offset it now starts at,
/// or `None` when no committed remote segment holds that offset (a topic
/// not tiered, nothing uploaded yet), and the caller starts at the
/// leader's local start with no state, as before tiering.
pub async fn start_after_remote(
    shard: &Shard,
    log: &PartitionLog,
    leader_local_start: i64,
) -> Result<Option<i64>, String> {
    let tiered = shard.runtime().tiered.clone();
    let (Some(store), true) = (tiered.store.as_ref(), leader_local_start > 0) else {
        return Ok(None);
    };
    let tp = log.topic_partition();
    let (keys, next_offset) = {
        let image = shard.runtime().view.image();
        let topic_id = log.topic_id();
        let Some(segment) =
            image.remote_segment_for_offset(&topic_id, tp.partition, leader_local_start - 1)
        else {
            return Ok(None);
        };
        let keys = SegmentKeys::new(
            &tp.topic,
            &topic_id,
            tp.partition,
            segment.base_offset,
            &segment.segment_id,
        );
        (keys, segment.end_offset + 1)
    };
    let epochs_text = store
        .get(keys.leader_epochs())
        .await
        .map_err(|e| format!("reading the remote leader epochs: {e}"))?;
    let epochs = parse_checkpoint(&String::from_utf8_lossy(&epochs_text))
        .map_err(|e| format!("the remote leader epochs do not parse: {e}"))?
        .into_iter()
        .map(|entry| (entry.epoch, entry.start_offset))
        .collect();
    let producer_snapshot = match store.get(keys.producer_snapshot()).await {
        Ok(bytes) => Some(bytes.to_vec()),
        // A segment the leader had no snapshot for.
        Err(RemoteError::NotFound { .. }) => None,
        Err(e) => return Err(format!("reading the remote producer snapshot: {e}")),
    };
    let aux = RemoteAuxState {
        epochs,
        producer_snapshot,
    };
    log.start_after_remote_segment(next_offset, aux)
        .await
        .map_err(|e| format!("starting after the remote log failed: {e}"))?;
    Ok(Some(next_offset))
}

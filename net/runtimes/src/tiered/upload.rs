//! Uploading one sealed segment, Kafka's copier: commit that the copy
//! starts (the controller checks this broker leads at this epoch and that
//! the segment extends the remote log without a gap), write the objects
//! (indexes first, the log last), commit that it finished. Only then does
//! the segment count: readers and local retention see CopySegmentFinished
//! segments only. A crash or a lost leadership in between leaves a
//! CopySegmentStarted segment whose objects may be partial; the next
//! leader's expiry deletes them ([`super::expire`]). The segment id is
//! random per try, so a retry never writes over objects of another.

use crate::cluster_runtime::{call_controller_until_answered, ControllerReply, ControllerRpc};
use crate::remote_keys::SegmentKeys;
use crate::Shard;
use bytes::Bytes;
use cluster::metadata::RemoteSegmentState;
use engine::log::epoch_cache::{encode_checkpoint, EpochEntry};
use engine::{PartitionLog, SealedSegment};
use remote_storage::RemoteStore;
use std::rc::Rc;

/// Who asks: this broker, leading the partition at `leader_epoch`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Leading {
    pub broker_id: i32,
    pub leader_epoch: i32,
}

/// Commits one remote-log change; the controller's refusal as text.
pub(super) async fn commit(shard: &Rc<Shard>, change: ControllerRpc) -> Result<(), String> {
    match call_controller_until_answered(shard, change).await {
        Ok(ControllerReply::Committed { .. }) => Ok(()),
        Ok(other) => Err(format!("unexpected controller answer {other:?}")),
        Err((code, message)) => Err(format!("{code}: {message}")),
    }
}

/// A remote segment's next state, asked by the leader.
pub(super) fn transition(
    leading: Leading,
    log: &PartitionLog,
    segment_id: [u8; 16],
    state: RemoteSegmentState,
) -> ControllerRpc {
    ControllerRpc::RemoteSegmentState {
        broker_id: leading.broker_id,
        leader_epoch: leading.leader_epoch,
        topic_id: log.topic_id(),
        partition: log.topic_partition().partition,
        segment_id,
        state: state.id(),
    }
}

/// Uploads `segment` of `log` and commits it; the log bytes uploaded.
pub(super) async fn upload_segment(
    shard: &Rc<Shard>,
    store: &RemoteStore,
    log: &PartitionLog,
    leading: Leading,
    segment: SealedSegment,
) -> Result<u64, String> {
    let tp = log.topic_partition();
    let segment_id: [u8; 16] = rand::random();
    let start = ControllerRpc::RemoteCopyStarted {
        broker_id: leading.broker_id,
        leader_epoch: leading.leader_epoch,
        topic_id: log.topic_id(),
        partition: tp.partition,
        segment_id,
        base_offset: segment.base_offset,
        end_offset: segment.end_offset,
        max_timestamp_ms: segment.max_timestamp_ms,
        size_bytes: i64::try_from(segment.size_bytes).unwrap_or(i64::MAX),
        segment_leader_epochs: segment.leader_epochs.clone(),
    };
    commit(shard, start).await?;
    let keys = SegmentKeys::new(
        &tp.topic,
        &log.topic_id(),
        tp.partition,
        segment.base_offset,
        &segment_id,
    );
    write_objects(store, &keys, &segment, leading).await?;
    let finished = transition(
        leading,
        log,
        segment_id,
        RemoteSegmentState::CopySegmentFinished,
    );
    commit(shard, finished).await?;
    tracing::info!(
        partition = %tp,
        base_offset = segment.base_offset,
        end_offset = segment.end_offset,
        size_bytes = segment.size_bytes,
        "segment uploaded to tiered storage"
    );
    Ok(segment.size_bytes)
}

/// Writes the segment's objects, the log last.
async fn write_objects(
    store: &RemoteStore,
    keys: &SegmentKeys,
    segment: &SealedSegment,
    leading: Leading,
) -> Result<(), String> {
    let epochs: Vec<EpochEntry> = (segment.epochs_to_end.iter())
        .map(|&(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        })
        .collect();
    let snapshot = (segment.producer_snapshot.clone())
        .map(|bytes| (keys.producer_snapshot(), Bytes::from(bytes)));
    let small = [
        (
            keys.offset_index(),
            Bytes::from(segment.offset_index.clone()),
        ),
        (keys.time_index(), Bytes::from(segment.time_index.clone())),
        (keys.txn_index(), Bytes::from(segment.txn_index.clone())),
        (
            keys.leader_epochs(),
            Bytes::from(encode_checkpoint(&epochs)),
        ),
    ];
    for (key, bytes) in small.into_iter().chain(snapshot) {
        store
            .put_bytes(key.clone(), bytes)
            .await
            .map_err(|e| format!("uploading {key}: {e}"))?;
    }
    crash_if_armed(leading);
    store
        .put_file_prefix(segment.log_path.clone(), segment.size_bytes, keys.log())
        .await
        .map_err(|e| format!("uploading {}: {e}", keys.log()))?;
    Ok(())
}

/// `RILL_FAULT_REMOTE_CRASH_AT_UPLOAD=<n>`: a test's fault point. The
/// first leader (epoch 0) of a partition aborts the process at its `n`th
/// upload, after the indexes and before the log: a crash mid-upload,
/// leaving a copy started and objects half written for the next leader to
/// clean up. Unset in production: one load of a cached value.
pub const FAULT_REMOTE_CRASH_AT_UPLOAD: &str = "RILL_FAULT_REMOTE_CRASH_AT_UPLOAD";

fn crash_if_armed(leading: Leading) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static ARMED: OnceLock<Option<u64>> = OnceLock::new();
    static UPLOADS: AtomicU64 = AtomicU64::new(0);
    let armed = ARMED.get_or_init(|| {
        let value = std::env::var(FAULT_REMOTE_CRASH_AT_UPLOAD).ok()?;
        value.trim().parse().ok()
    });
    let Some(at) = *armed else {
        return;
    };
    if leading.leader_epoch == 0 && UPLOADS.fetch_add(1, Ordering::Relaxed) + 1 == at {
        tracing::error!("{FAULT_REMOTE_CRASH_AT_UPLOAD}: aborting mid-upload");
        std::process::abort();
    }
}

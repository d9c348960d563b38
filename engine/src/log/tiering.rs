//! The log's side of tiered storage (KIP-405). The engine knows nothing of
//! object stores: the broker's remote log manager tells each log how far
//! the remote copy reaches ([`RemoteSpan`], from the committed remote
//! segment metadata), and asks it for the next sealed segment to upload
//! ([`SealedSegment`]). With that:
//! - the log's Kafka-visible start is the remote start
//!   ([`PartitionLog::earliest_offset`]), the local start is Kafka's
//!   `localLogStartOffset`;
//! - a read below the local start that the remote log holds fails with
//!   [`EngineError::OffsetInRemoteStorage`], which the broker serves from
//!   the object store;
//! - retention deletes a local segment only once it is wholly uploaded
//!   (`cleanup.rs`), so a store that is down never costs data.

use super::PartitionLog;
use crate::error::EngineError;
use crate::types::{LeaderEpoch, Offset};
use std::path::PathBuf;

/// The file that keeps [`PartitionLog::deleted_below`].
pub(super) const DELETED_BELOW_FILE: &str = "delete-records-offset";

/// How far the committed remote copy of a partition reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteSpan {
    /// First offset readable from the remote log (`None`: nothing uploaded).
    pub start_offset: Option<Offset>,
    /// Last offset safely uploaded (inclusive).
    pub end_offset: Option<Offset>,
}

/// A sealed segment, ready to upload: what Kafka's
/// `RemoteLogSegmentMetadata` and `LogSegmentData` carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedSegment {
    /// First offset.
    pub base_offset: Offset,
    /// Last offset (inclusive).
    pub end_offset: Offset,
    /// Newest record timestamp (-1: none).
    pub max_timestamp_ms: i64,
    /// Bytes of the log file that hold batches (upload exactly these).
    pub size_bytes: u64,
    /// The `.log` file.
    pub log_path: PathBuf,
    /// The offset index, in Kafka's `.index` format.
    pub offset_index: Vec<u8>,
    /// The time index, in Kafka's `.timeindex` format.
    pub time_index: Vec<u8>,
    /// The aborted transactions of the segment, in Kafka's `.txnindex`
    /// format (empty: none).
    pub txn_index: Vec<u8>,
    /// Leader epoch → first offset, for the epochs the segment holds.
    pub leader_epochs: Vec<(LeaderEpoch, Offset)>,
    /// The log's whole epoch history up to the segment's end (Kafka's
    /// uploaded leader-epoch checkpoint): what a follower starting after
    /// the segment needs.
    pub epochs_to_end: Vec<(LeaderEpoch, Offset)>,
    /// The producer-state snapshot at the segment's end (`end_offset + 1`),
    /// when the log holds one: what a follower starting there needs.
    pub producer_snapshot: Option<Vec<u8>>,
}

/// What a follower takes from the remote log when it starts over after a
/// remote segment (Kafka's `buildRemoteLogAuxState`): the segment's
/// uploaded epoch history and producer snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteAuxState {
    /// Leader epoch → first offset, up to the segment's end.
    pub epochs: Vec<(LeaderEpoch, Offset)>,
    /// The producer-state snapshot at the segment's end + 1.
    pub producer_snapshot: Option<Vec<u8>>,
}

impl PartitionLog {
    /// Sets how far the remote copy reaches (the broker's remote log
    /// manager, from the committed metadata).
    pub fn set_remote_span(&self, span: RemoteSpan) {
        self.remote.set(span);
    }

    /// How far the remote copy reaches, as last set.
    pub fn remote_span(&self) -> RemoteSpan {
        self.remote.get()
    }

    /// Kafka's log start offset: the remote log's start when the remote
    /// copy reaches below the local log, else the local start; never below
    /// what DeleteRecords deleted.
    pub fn earliest_offset(&self) -> Offset {
        let local = self.log_start_offset();
        let earliest = match self.remote.get().start_offset {
            Some(remote) if remote < local => remote,
            _ => local,
        };
        earliest.max(self.deleted_below.get())
    }

    /// What DeleteRecords deleted: no offset below it is read, locally or
    /// remotely (0: nothing). Persisted apart from the local log start,
    /// which also moves when a follower starts over at its leader's local
    /// log, where nothing was deleted.
    pub fn deleted_below(&self) -> Offset {
        self.deleted_below.get()
    }

    /// A truncation to `offset` takes the DeleteRecords point back with
    /// the log start (Kafka's `truncateTo`).
    pub(super) fn lower_deleted_below(&self, offset: Offset) -> Result<(), EngineError> {
        if self.deleted_below.get() > offset {
            self.record_deleted_below(offset)?;
        }
        Ok(())
    }

    /// Records a DeleteRecords up to `offset`, durably, before it applies.
    pub(super) fn record_deleted_below(&self, offset: Offset) -> Result<(), EngineError> {
        crate::segment::write_file_synced(
            &self.dir.join(DELETED_BELOW_FILE),
            format!("{offset}\n").as_bytes(),
        )?;
        self.deleted_below.set(offset);
        Ok(())
    }

    /// The read of `offset` below the local start: remote, or out of range.
    pub(super) fn below_local_start(&self, offset: Offset, end: Offset) -> EngineError {
        let local = self.log_start_offset();
        let visible = offset >= self.deleted_below.get();
        match self.remote.get().start_offset {
            Some(remote) if visible && remote <= offset && offset < local => {
                EngineError::OffsetInRemoteStorage {
                    offset,
                    local_log_start_offset: local,
                }
            }
            _ => EngineError::OffsetOutOfRange {
                offset,
                log_start_offset: self.earliest_offset(),
                log_end_offset: end,
            },
        }
    }

    /// Bytes of the local segments holding offsets after `offset` (the
    /// part of the log not yet in the remote copy), for `retention.bytes`
    /// over the whole tiered log.
    pub fn local_bytes_after(&self, offset: Offset) -> u64 {
        let state = self.state.borrow();
        state
            .segments
            .iter()
            .map(|s| s.meta.borrow())
            .filter(|meta| meta.next_offset > offset + 1)
            .map(|meta| meta.size_bytes)
            .sum()
    }

    /// Sealed segments holding offsets after `offset`, and their bytes:
    /// the upload lag (the active segment is not yet uploadable).
    pub fn local_sealed_after(&self, offset: Offset) -> (u64, u64) {
        let state = self.state.borrow();
        let sealed = state.segments.len().saturating_sub(1);
        state.segments[..sealed]
            .iter()
            .map(|s| s.meta.borrow())
            .filter(|meta| meta.next_offset > offset + 1)
            .fold((0, 0), |(count, bytes), meta| {
                (count + 1, bytes + meta.size_bytes)
            })
    }

    /// ListOffsets' earliest-pending-upload (-5, KIP-1005): the first
    /// offset not yet uploaded; `None` for a topic that is not tiered.
    pub(super) fn earliest_pending_upload(&self) -> Option<Offset> {
        if !self.config.borrow().remote.storage_enable {
            return None;
        }
        let next = self.remote.get().end_offset.map_or(0, |end| end + 1);
        Some(next.max(self.log_start_offset()))
    }

    /// The oldest sealed segment holding offsets after `uploaded_end` (the
    /// remote log's last offset, -1 for none) that lies wholly below the
    /// last stable offset, as Kafka's copier picks it; `None` when there is
    /// none yet (only the active segment, or still being written).
    pub async fn segment_to_upload(
        &self,
        uploaded_end: Offset,
    ) -> Result<Option<SealedSegment>, EngineError> {
        let stable = self.last_stable_offset().min(self.high_watermark.get());
        let candidate = {
            let state = self.state.borrow();
            let sealed = state.segments.len().saturating_sub(1);
            state.segments[..sealed]
                .iter()
                .find(|s| s.meta.borrow().next_offset > uploaded_end + 1)
                .filter(|s| s.meta.borrow().next_offset <= stable)
                .cloned()
        };
        let Some(segment) = candidate else {
            return Ok(None);
        };
        let (offset_index, time_index) = self
            .with_indexes(&segment, |index, time| (index.to_bytes(), time.to_bytes()))
            .await;
        let meta = segment.meta.borrow();
        let end_offset = meta.next_offset - 1;
        let txn_index = crate::txn_index::encode_entries(
            self.txn
                .borrow()
                .aborted
                .segment_entries(segment.base_offset),
        );
        let leader_epochs = self.epochs_in(segment.base_offset, end_offset);
        let epochs_to_end = (self.epochs.borrow().entries().iter())
            .filter(|entry| entry.start_offset <= end_offset)
            .map(|entry| (entry.epoch, entry.start_offset))
            .collect();
        let snapshot_path = self
            .dir
            .join(crate::segment::file_name(end_offset + 1, "snapshot"));
        let producer_snapshot = crate::disk::read(&snapshot_path).ok();
        Ok(Some(SealedSegment {
            base_offset: segment.base_offset,
            end_offset,
            max_timestamp_ms: meta.max_timestamp_ms,
            size_bytes: meta.size_bytes,
            log_path: segment.log_path(),
            offset_index,
            time_index,
            txn_index,
            leader_epochs,
            epochs_to_end,
            producer_snapshot,
        }))
    }

    /// Kafka's `truncateFullyAndStartAt` with `buildRemoteLogAuxState`: a
    /// follower that starts over at `offset`, the end + 1 of a remote
    /// segment, empties its log and starts there with the epochs before it
    /// and the producer state at it from the segment's uploaded copies, as
    /// if it had replicated everything below. A snapshot that does not
    /// decode, or is not at `offset`, is left out (the producers are then
    /// learnt from what the follower fetches, as without tiering).
    pub async fn start_after_remote_segment(
        &self,
        offset: Offset,
        aux: RemoteAuxState,
    ) -> Result<(), EngineError> {
        let producers = aux.producer_snapshot.as_deref().and_then(|bytes| {
            match crate::producer_state::ProducerStateManager::decode_snapshot(bytes) {
                Ok((at, state)) if at == offset => Some(state),
                outcome => {
                    let why = outcome.map(|(at, _)| format!("a snapshot at {at}"));
                    tracing::warn!(partition = %self.tp, offset, ?why,
                        "the remote producer snapshot does not fit; producers are learnt from the fetches");
                    None
                }
            }
        });
        self.truncate_fully_and_start_at(offset).await?;
        {
            let mut epochs = self.epochs.borrow_mut();
            for &(epoch, start) in aux.epochs.iter().filter(|(_, start)| *start < offset) {
                epochs.assign(epoch, start).map_err(|e| {
                    EngineError::io(&self.dir, std::io::Error::other(e.to_string()))
                })?;
            }
        }
        super::epochs::write_checkpoint(&self.dir, &self.epochs.borrow())?;
        if let Some(state) = producers {
            let mut txn = self.txn.borrow_mut();
            txn.producers = state;
            txn.checkpoint(&self.dir, offset, self.snapshots_kept_from(offset))?;
        }
        Ok(())
    }

    /// The producer snapshots a checkpoint keeps besides the newest two:
    /// those at or past this offset. On a tiered topic that uploads, the
    /// snapshots of the local segments not yet uploaded (each goes up with
    /// its segment); elsewhere none.
    pub(crate) fn snapshots_kept_from(&self, log_start: Offset) -> Offset {
        let remote = self.config.borrow().remote;
        if !remote.storage_enable || remote.copy_disable {
            return Offset::MAX;
        }
        let start = log_start;
        self.remote
            .get()
            .end_offset
            .map_or(start, |end| (end + 1).max(start))
    }

    /// The leader epochs with records in `[base, end]`, each with its first
    /// offset there (the epoch in force at `base` starts at `base`).
    fn epochs_in(&self, base: Offset, end: Offset) -> Vec<(LeaderEpoch, Offset)> {
        let epochs = self.epochs.borrow();
        let entries = epochs.entries();
        let mut out = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let next_start = entries.get(i + 1).map_or(Offset::MAX, |e| e.start_offset);
            if next_start <= base || entry.start_offset > end {
                continue;
            }
            out.push((entry.epoch, entry.start_offset.max(base)));
        }
        out
    }
}

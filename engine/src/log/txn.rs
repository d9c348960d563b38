//! The partition log's producer state and transactions: markers, the last
//! stable offset, snapshots, the aborted-transaction index, and keeping all
//! of it consistent across restart, truncation and retention.
//!
//! Durability of this state follows the log, never leads it:
//! - `<offset>.snapshot` is written at each roll (the state as of the new
//!   segment's base offset), after a rebuild at open, and by
//!   [`PartitionLog::checkpoint_producer_state`]. A snapshot above the log
//!   end (its data lost in a crash, or cut by truncation) is ignored and
//!   deleted; the newest one at or below the log end is loaded and the
//!   batches after it are replayed (headers only, plus the one record of
//!   each control batch). Without one, the whole log is replayed.
//! - `.txnindex` files are written before any snapshot that covers their
//!   segment, so at open the files of segments wholly below the snapshot
//!   are trusted and the rest are rebuilt by the replay.
//!
//! These small files are written with blocking I/O on the shard: at a roll
//! (once per `segment.bytes`), at open and at truncation — never per append.

use super::PartitionLog;
use crate::batch::{self, BatchBuilder, BatchHeader, Compression, HEADER_BYTES};
use crate::error::EngineError;
use crate::producer_state::{
    marker_record, parse_marker_key, parse_marker_value, CompletedTxn, DataBatch, ProducerEntry,
    ProducerStateManager,
};
use crate::segment::{file_name, parse_file_name, write_file_synced, Segment};
use crate::txn_index::{self, AbortedTxn, TxnIndex};
use crate::types::{CoordinatorEpoch, Offset, ProducerEpoch, ProducerId};
use std::collections::BTreeSet;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;

/// Snapshots kept in a partition directory; older ones are deleted.
const SNAPSHOTS_KEPT: usize = 2;

/// Producer state, open transactions and aborted transactions of a
/// partition. Shard-local.
#[derive(Debug, Default)]
pub(crate) struct TxnState {
    pub producers: ProducerStateManager,
    pub aborted: TxnIndex,
    /// Segments whose `.txnindex` file lags the in-memory entries.
    pub dirty_segments: BTreeSet<i64>,
}

impl TxnState {
    /// Records the aborts among `completed`, whose markers lie in the
    /// segment based at `segment_base`.
    pub fn record_completed(&mut self, segment_base: i64, completed: &[CompletedTxn]) {
        for txn in completed.iter().filter(|t| t.aborted) {
            let last_stable_offset = self
                .producers
                .first_open_offset_except(txn.producer_id)
                .unwrap_or(txn.last_offset + 1);
            self.aborted.add(
                segment_base,
                AbortedTxn {
                    producer_id: txn.producer_id,
                    first_offset: txn.first_offset,
                    last_offset: txn.last_offset,
                    last_stable_offset,
                },
            );
            self.dirty_segments.insert(segment_base);
        }
    }

    /// Writes the `.txnindex` files that lag; true when none lags any more.
    fn write_dirty_indexes(&mut self, dir: &Path) -> Result<(), EngineError> {
        while let Some(&base) = self.dirty_segments.first() {
            txn_index::write_file(
                &dir.join(file_name(base, "txnindex")),
                self.aborted.segment_entries(base),
            )?;
            self.dirty_segments.remove(&base);
        }
        Ok(())
    }

    /// Writes the lagging `.txnindex` files, then the snapshot at `offset`;
    /// keeps the newest snapshots and those at or past `kept_from`.
    pub fn checkpoint(
        &mut self,
        dir: &Path,
        offset: i64,
        kept_from: i64,
    ) -> Result<(), EngineError> {
        self.write_dirty_indexes(dir)?;
        write_file_synced(
            &dir.join(file_name(offset, "snapshot")),
            &self.producers.encode_snapshot(offset),
        )?;
        prune_snapshots(dir, kept_from)
    }
}

/// Snapshot offsets in `dir`, ascending.
fn snapshot_offsets(dir: &Path) -> Result<Vec<i64>, EngineError> {
    let mut offsets: Vec<i64> = crate::disk::read_dir(dir)
        .map_err(|e| EngineError::io(dir, e))?
        .iter()
        .filter_map(|name| parse_file_name(name, "snapshot"))
        .collect();
    offsets.sort_unstable();
    Ok(offsets)
}

fn remove_snapshot(dir: &Path, offset: i64) -> Result<(), EngineError> {
    let path = dir.join(file_name(offset, "snapshot"));
    match crate::disk::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(EngineError::io(&path, e)),
    }
}

/// Removes every producer-state snapshot (the log restarts empty).
pub(crate) fn remove_all_snapshots(dir: &Path) -> Result<(), EngineError> {
    for offset in snapshot_offsets(dir)? {
        remove_snapshot(dir, offset)?;
    }
    Ok(())
}

fn prune_snapshots(dir: &Path, kept_from: i64) -> Result<(), EngineError> {
    let offsets = snapshot_offsets(dir)?;
    for &offset in offsets
        .iter()
        .take(offsets.len().saturating_sub(SNAPSHOTS_KEPT))
        .filter(|&&offset| offset < kept_from)
    {
        remove_snapshot(dir, offset)?;
    }
    Ok(())
}

/// Deletes the snapshots above `offset` and loads the newest remaining one
/// that parses: `(offset, state)`, or `None` when there is none.
fn load_snapshot_at_or_below(
    dir: &Path,
    offset: i64,
) -> Result<Option<(i64, ProducerStateManager)>, EngineError> {
    let offsets = snapshot_offsets(dir)?;
    for &snapshot in offsets.iter().rev() {
        if snapshot > offset {
            remove_snapshot(dir, snapshot)?;
            continue;
        }
        let path = dir.join(file_name(snapshot, "snapshot"));
        let bytes = crate::disk::read(&path).map_err(|e| EngineError::io(&path, e))?;
        match ProducerStateManager::decode_snapshot(&bytes) {
            Ok((at, state)) if at == snapshot => return Ok(Some((at, state))),
            Ok((at, _)) => {
                tracing::warn!(path = %path.display(), at, "snapshot names another offset; ignored")
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unusable producer snapshot; ignored")
            }
        }
        remove_snapshot(dir, snapshot)?;
    }
    Ok(None)
}

/// What a replayed batch says: a producer's data batch or a marker.
enum Replayed {
    Data(DataBatch),
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
    },
}

/// Reads the batches of `segment` with offsets in `[from_offset, end_offset)`
/// through plain buffered reads (open and truncation run before or between
/// appends; the page cache is coherent with the O_DIRECT writes), and calls
/// `visit` for each producer batch and marker.
fn replay_segment(
    segment: &Segment,
    from_offset: i64,
    end_offset: i64,
    mut visit: impl FnMut(i64, Replayed),
) -> Result<(), EngineError> {
    let (size_bytes, start_position) = {
        let meta = segment.meta.borrow();
        let position = if from_offset > segment.base_offset {
            let relative = (from_offset - segment.base_offset).min(i64::from(u32::MAX)) as u32;
            u64::from(meta.index.lookup(relative).1)
        } else {
            0
        };
        (meta.size_bytes, position)
    };
    let path = segment.log_path();
    let file = crate::disk::open_reader(&path).map_err(|e| EngineError::io(&path, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    reader
        .seek(SeekFrom::Start(start_position))
        .map_err(|e| EngineError::io(&path, e))?;
    let mut position = start_position;
    while position + HEADER_BYTES as u64 <= size_bytes {
        let mut head = [0u8; HEADER_BYTES];
        reader
            .read_exact(&mut head)
            .map_err(|e| EngineError::io(&path, e))?;
        let header = BatchHeader::parse(&head)?;
        let total = header.total_bytes();
        if position + total as u64 > size_bytes || header.base_offset >= end_offset {
            break;
        }
        position += total as u64;
        let wanted = header.last_offset() >= from_offset && header.producer_id >= 0;
        if wanted && header.is_control() {
            let mut bytes = vec![0u8; total];
            bytes[..HEADER_BYTES].copy_from_slice(&head);
            reader
                .read_exact(&mut bytes[HEADER_BYTES..])
                .map_err(|e| EngineError::io(&path, e))?;
            match parse_marker_batch(&bytes) {
                Some((commit, coordinator_epoch)) => visit(
                    header.base_offset,
                    Replayed::Marker {
                        producer_id: header.producer_id,
                        producer_epoch: header.producer_epoch,
                        coordinator_epoch,
                        commit,
                    },
                ),
                None => tracing::warn!(path = %path.display(), offset = header.base_offset,
                    "control batch without a transaction marker; ignored"),
            }
            continue;
        }
        reader
            .seek_relative((total - HEADER_BYTES) as i64)
            .map_err(|e| EngineError::io(&path, e))?;
        if wanted {
            visit(
                header.base_offset,
                Replayed::Data(data_batch(&header, header.base_offset)),
            );
        }
    }
    Ok(())
}

/// The producer fields of a data batch whose first offset is `first_offset`.
pub(crate) fn data_batch(header: &BatchHeader, first_offset: i64) -> DataBatch {
    DataBatch {
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        base_sequence: header.base_sequence,
        last_offset_delta: header.last_offset_delta,
        first_offset,
        transactional: header.is_transactional(),
    }
}

/// A control batch's marker: `(commit, coordinator_epoch)`.
pub(crate) fn parse_marker_batch(bytes: &[u8]) -> Option<(bool, i32)> {
    let records = batch::records(bytes).ok()?;
    let record = records.first()?;
    let commit = parse_marker_key(record.key.as_deref()?)?;
    let coordinator_epoch = record
        .value
        .as_deref()
        .and_then(parse_marker_value)
        .unwrap_or(-1);
    Some((commit, coordinator_epoch))
}

/// Replays `[from_offset, end_offset)` of `segments` into `txn`: producer
/// state always, aborted transactions into the index when `index_aborts`.
/// Replayed producers count as last seen at `now_ms` (the clock at open or
/// truncation).
fn replay(
    txn: &mut TxnState,
    segments: &[Rc<Segment>],
    from_offset: i64,
    end_offset: i64,
    index_aborts: bool,
    now_ms: i64,
) -> Result<(), EngineError> {
    for segment in segments {
        if segment.meta.borrow().next_offset <= from_offset || segment.base_offset >= end_offset {
            continue;
        }
        let base = segment.base_offset;
        replay_segment(segment, from_offset, end_offset, |offset, replayed| {
            let mut append = txn.producers.begin(now_ms);
            match replayed {
                Replayed::Data(batch) => append.recovered_data_batch(&batch),
                Replayed::Marker {
                    producer_id,
                    producer_epoch,
                    coordinator_epoch,
                    commit,
                } => {
                    // Unchecked: the log is the truth; a marker already appended stands.
                    let _ = append.marker(
                        producer_id,
                        producer_epoch,
                        coordinator_epoch,
                        commit,
                        offset,
                        false,
                    );
                }
            }
            let updates = append.into_updates();
            let completed = updates.completed().to_vec();
            txn.producers.apply(updates);
            if index_aborts {
                txn.record_completed(base, &completed);
            }
        })?;
    }
    Ok(())
}

/// Rebuilds the transaction state of a log being opened: the newest
/// snapshot at or below `log_end_offset`, the `.txnindex` files of the
/// segments it covers, and a replay of the rest. Writes the rebuilt indexes
/// and, when it replayed anything, a snapshot at the log end, so the next
/// open starts there.
pub(crate) fn rebuild_at_open(
    dir: &Path,
    segments: &[Rc<Segment>],
    log_end_offset: i64,
    now_ms: i64,
) -> Result<TxnState, EngineError> {
    let mut txn = TxnState::default();
    let from_offset = match load_snapshot_at_or_below(dir, log_end_offset)? {
        Some((offset, producers)) => {
            txn.producers = producers;
            offset
        }
        None => -1,
    };
    for segment in segments {
        let base = segment.base_offset;
        let path = segment.path("txnindex");
        let loaded = txn_index::load_file(&path)?;
        let trusted: Vec<AbortedTxn> = loaded
            .iter()
            .copied()
            .filter(|e| e.last_offset < from_offset)
            .collect();
        if trusted.len() != loaded.len() || segment.meta.borrow().next_offset > from_offset {
            // The replay below rewrites what the file says past the snapshot.
            txn.dirty_segments.insert(base);
        }
        txn.aborted.set_segment(base, trusted);
    }
    replay(
        &mut txn,
        segments,
        from_offset,
        log_end_offset,
        true,
        now_ms,
    )?;
    // The high watermark opens at the log end: every replayed marker is visible.
    txn.producers.prune_stable(log_end_offset);
    // A snapshot only when batches were replayed: a partition that opens at
    // its snapshot (or empty) costs no fsync, which matters with thousands
    // of idle partitions per shard.
    let replayed =
        from_offset < log_end_offset && segments.iter().any(|s| s.meta.borrow().size_bytes > 0);
    if replayed {
        // Nothing pruned at open, where the topic's tiering is not known:
        // the next checkpoint prunes by the log's own rule.
        txn.checkpoint(dir, log_end_offset, 0)?;
    } else {
        txn.write_dirty_indexes(dir)?;
    }
    Ok(txn)
}

impl PartitionLog {
    /// Last stable offset: the high watermark, or the first offset of the
    /// earliest transaction that is still open (or whose marker is not yet
    /// below the high watermark), whichever is lower — never below the log
    /// start. `read_committed` readers stop here.
    pub fn last_stable_offset(&self) -> Offset {
        let hw = self.high_watermark.get();
        let start = self.state.borrow().log_start_offset;
        let unstable = self.txn.borrow().producers.first_unstable_offset(hw);
        let lso = unstable.map_or(hw, |first| first.min(hw)).max(start);
        assert!(
            lso <= hw,
            "last stable offset {lso} above the high watermark {hw}"
        );
        lso
    }

    /// ListOffsets `-1`: the last stable offset for `read_committed`, the
    /// high watermark otherwise.
    pub fn latest_offset(&self, read_committed: bool) -> Offset {
        if read_committed {
            self.last_stable_offset()
        } else {
            self.high_watermark.get()
        }
    }

    /// Appends a transaction marker (a control batch of one record: key
    /// `version 0, type` 0 ABORT / 1 COMMIT; value `version 0,
    /// coordinator_epoch`) for `producer_id`, ending its open transaction.
    /// Checked like Kafka: an older producer epoch is `InvalidProducerEpoch`,
    /// an older coordinator epoch `TransactionCoordinatorFenced`. A marker
    /// for a producer with no open transaction is appended and ends nothing.
    pub fn append_control(
        &self,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        commit: bool,
        coordinator_epoch: CoordinatorEpoch,
    ) -> Result<super::AppendResult, EngineError> {
        if producer_id < 0 {
            return Err(batch::BatchError::InvalidRecord {
                reason: "a transaction marker needs a producer id",
            }
            .into());
        }
        let (key, value) = marker_record(commit, coordinator_epoch);
        let mut builder = BatchBuilder::new(0, Compression::None)
            .producer(producer_id, producer_epoch, -1, true)
            .control(true);
        builder.push(0, self.now_ms(), Some(&key), Some(&value), &[]);
        let bytes = builder.build()?;
        let leader_epoch = self.leader_epoch();
        self.append_control_batch(bytes, leader_epoch)
    }

    /// What this partition knows of a producer.
    pub fn producer_entry(&self, producer_id: ProducerId) -> Option<ProducerEntry> {
        self.txn.borrow().producers.producer(producer_id).cloned()
    }

    /// Every producer this partition knows, by id (DescribeProducers).
    pub fn active_producers(&self) -> Vec<crate::producer_state::ActiveProducer> {
        self.txn.borrow().producers.active_producers()
    }

    /// Open transactions as `(producer_id, first_offset)`, by first offset.
    pub fn open_transactions(&self) -> Vec<(ProducerId, Offset)> {
        self.txn.borrow().producers.open_transactions()
    }

    /// Every aborted transaction in the index, in marker order.
    pub fn aborted_transactions(&self) -> Vec<AbortedTxn> {
        self.txn.borrow().aborted.all()
    }

    /// The aborted transactions overlapping `[fetch_offset, upper_offset]`
    /// as `(producer_id, first_offset)`.
    pub fn aborted_transactions_in(&self, fetch_offset: i64, upper_offset: i64) -> Vec<(i64, i64)> {
        self.txn
            .borrow()
            .aborted
            .overlapping(fetch_offset, upper_offset)
    }

    /// Drops producers idle longer than `producer_id_expiration_ms` (the
    /// retention tick calls it). Returns how many were dropped.
    pub fn expire_producers(&self, now_ms: i64) -> usize {
        let expiration_ms = self.ctx.config.producer_id_expiration_ms;
        self.txn
            .borrow_mut()
            .producers
            .remove_expired(now_ms, expiration_ms)
    }

    /// Writes the lagging `.txnindex` files and a producer-state snapshot at
    /// the log end. Call at clean shutdown (after the last flush) so that
    /// the next open replays nothing.
    pub fn checkpoint_producer_state(&self) -> Result<(), EngineError> {
        let (start, end) = {
            let state = self.state.borrow();
            (state.log_start_offset, state.log_end_offset)
        };
        let kept_from = self.snapshots_kept_from(start);
        self.txn.borrow_mut().checkpoint(&self.dir, end, kept_from)
    }

    /// At a roll, before the payload that rolls is applied: the producer
    /// state is then exactly that of `offset`, the new segment's base. A
    /// failure is logged, not returned: the snapshot only shortens the next
    /// open's replay, and a missing one is rebuilt from the log.
    pub(crate) fn checkpoint_at_roll(&self, offset: i64, log_start: i64) {
        let kept_from = self.snapshots_kept_from(log_start);
        if let Err(e) = self
            .txn
            .borrow_mut()
            .checkpoint(&self.dir, offset, kept_from)
        {
            tracing::warn!(partition = %self.tp, offset, error = %e,
                "producer state snapshot at roll failed; the next open replays more of the log");
        }
    }

    /// After a truncation to `offset`: drops the aborted transactions whose
    /// marker is cut, and rebuilds the producer state from the newest
    /// snapshot at or below `offset` plus a replay up to it.
    pub(crate) fn truncate_transactions(&self, offset: i64) -> Result<(), EngineError> {
        let segments = self.state.borrow().segments.clone();
        let mut txn = self.txn.borrow_mut();
        let changed = txn.aborted.truncate_from(offset);
        txn.aborted
            .retain_segments(|base| segments.iter().any(|s| s.base_offset == base));
        let present: BTreeSet<i64> = segments.iter().map(|s| s.base_offset).collect();
        txn.dirty_segments.retain(|base| present.contains(base));
        txn.dirty_segments
            .extend(changed.into_iter().filter(|base| present.contains(base)));
        let (from_offset, producers) = match load_snapshot_at_or_below(&self.dir, offset)? {
            Some(found) => found,
            None => (-1, ProducerStateManager::new()),
        };
        txn.producers = producers;
        // The index keeps the aborts below the cut; the replay restores the
        // producers and the open transactions only.
        replay(
            &mut txn,
            &segments,
            from_offset,
            offset,
            false,
            self.now_ms(),
        )?;
        txn.producers.prune_stable(self.high_watermark.get());
        txn.write_dirty_indexes(&self.dir)
    }

    /// After segments were deleted (retention, delete-records): forgets
    /// their aborted transactions.
    pub(crate) fn forget_deleted_segments(&self) {
        let bases: BTreeSet<i64> = self
            .state
            .borrow()
            .segments
            .iter()
            .map(|s| s.base_offset)
            .collect();
        let mut txn = self.txn.borrow_mut();
        txn.aborted.retain_segments(|base| bases.contains(&base));
        txn.dirty_segments.retain(|base| bases.contains(base));
    }
}

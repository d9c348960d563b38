//! Appends: validate every batch, check the producers' epochs and
//! sequences, assign offsets in place, roll, queue for the flusher.
//!
//! One path serves the three origins of a payload ([`Origin`]): a client's
//! produce and the log's own transaction markers get their offsets, leader
//! epoch and (LogAppendTime) timestamps here; a follower's copy of its
//! leader's batches (`replica.rs`) keeps all three as the leader wrote them.
//!
//! A client's batches are also where the topic's `compression.type` applies:
//! one in another codec is rewritten ([`crate::batch::recompress`]) before
//! anything else looks at it, so the new bytes are what is offset, indexed,
//! cached, written and replicated (followers copy them as they are).

use super::record_checks::{self, TimestampBounds};
use super::txn::{data_batch, parse_marker_batch};
use super::{AppendResult, LogState, PartitionLog, PendingChunk};
use crate::batch::{self, BatchError, BatchHeader, Compression, CompressionLevels};
use crate::error::EngineError;
use crate::placement::PlacementHint;
use crate::producer_state::{
    increment_sequence, BatchMetadata, ProducerStateManager, ProducerUpdates,
};
use crate::segment::Segment;
use crate::types::LeaderEpoch;
use bytes::{Bytes, BytesMut};
use std::rc::Rc;

/// Appends up to this size count towards streaming their round's blocks
/// early (see [`crate::stream_writer`]).
const STREAM_APPEND_MAX_BYTES: usize = 4 << 10;

/// Where an appended payload comes from, which decides what the log writes
/// into its batches and what it checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// A producer's batches: offsets, the leader epoch and timestamps are
    /// assigned; control batches are refused; producers are checked.
    Client { leader_epoch: LeaderEpoch },
    /// A control batch the log built itself (a transaction marker).
    Control { leader_epoch: LeaderEpoch },
    /// A leader's batches copied by a follower: offsets, epochs and
    /// timestamps stay as the leader wrote them, and the producer state
    /// follows them unchecked, as the replay at open does (the leader's log
    /// is the truth; a check failing here would stop the follower for good).
    Replica,
}

impl Origin {
    fn allows_control(self) -> bool {
        !matches!(self, Origin::Client { .. })
    }
}

/// A produce payload, lent or handed over.
pub(super) enum Payload<'a> {
    /// The caller keeps the buffer; the log copies the batches.
    Borrowed(&'a mut [u8]),
    /// The log keeps the buffer (a `BytesMut`, so a region cut out of a
    /// request frame is kept without a copy).
    Owned(BytesMut),
}

/// A `Vec` as a `BytesMut`, without a copy (`Bytes::from` keeps the
/// allocation; a unique `Bytes` turns back into `BytesMut` in place).
pub(super) fn owned(bytes: Vec<u8>) -> Payload<'static> {
    Payload::Owned(BytesMut::from(Bytes::from(bytes)))
}

impl Payload<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Payload::Borrowed(bytes) => bytes,
            Payload::Owned(bytes) => bytes,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            Payload::Borrowed(bytes) => bytes,
            Payload::Owned(bytes) => bytes,
        }
    }

    /// The first `length` bytes as an owned buffer; a copy is placed for
    /// file position `position`, so the appender writes it as it lies
    /// (see [`crate::placement`]).
    fn into_owned(self, length: usize, position: u64) -> BytesMut {
        match self {
            Payload::Borrowed(bytes) => crate::placement::placed_copy(&bytes[..length], position),
            Payload::Owned(mut bytes) => {
                bytes.truncate(length);
                bytes
            }
        }
    }
}

/// The topic settings one append reads.
struct AppendSettings {
    max_message_bytes: u64,
    log_append_time: bool,
    segment_bytes: u64,
    segment_ms: i64,
    segment_index_bytes: u64,
    index_interval_bytes: u64,
    /// `compression.type` when it names a codec; `None` for `producer`.
    compression: Option<Compression>,
    compression_levels: CompressionLevels,
    /// `cleanup.policy` includes `compact`: every record needs a key.
    compact: bool,
    /// `message.timestamp.before.max.ms` and `.after.max.ms` (CreateTime).
    timestamp_before_max_ms: i64,
    timestamp_after_max_ms: i64,
}

/// One validated batch of a produce payload.
struct Validated {
    range: std::ops::Range<usize>,
    record_count: i64,
    last_offset_delta: i64,
    max_timestamp_ms: i64,
    header: BatchHeader,
    /// `(commit, coordinator_epoch)` of a transaction marker.
    marker: Option<(bool, i32)>,
}

/// Where an append's batches went, once their offsets are written.
struct Placed {
    base_offset: i64,
    /// The offset after the last batch.
    next_offset: i64,
    total_bytes: usize,
    /// The append's one clock read.
    now_ms: i64,
    /// The LogAppendTime written into the batches, or -1.
    log_append_time_ms: i64,
}

/// What the producer checks of a payload decided.
enum Checked {
    /// Append; these are the producer state changes.
    Append(ProducerUpdates),
    /// Every producer batch is a resend: the first and last originals.
    Duplicate(BatchMetadata, BatchMetadata),
}

impl PartitionLog {
    /// Validates the batches of a produce payload (one or more RecordBatch v2)
    /// and appends them, writing base offsets and `leader_epoch` into their
    /// headers. The bytes are queued for the flusher when this returns; use
    /// [`PartitionLog::wait_durable`] / [`PartitionLog::wait_written`] to wait.
    /// Either every batch is appended or none is.
    ///
    /// Batches with a producer id are checked against the producer state
    /// (see [`crate::producer_state`]): an old epoch is
    /// `InvalidProducerEpoch`, a sequence gap `OutOfOrderSequence`. A payload
    /// whose every producer batch resends one of the producer's last five is
    /// not appended: the result has `duplicate` set and the original
    /// offsets. A payload mixing resent and new batches is refused with
    /// `OutOfOrderSequence` (a Kafka client sends one batch per partition,
    /// so this does not happen with real clients). Control batches are
    /// refused here: markers come from [`PartitionLog::append_control`].
    pub fn append(
        &self,
        records: &mut [u8],
        leader_epoch: i32,
    ) -> Result<AppendResult, EngineError> {
        self.append_inner(Payload::Borrowed(records), Origin::Client { leader_epoch })
    }

    /// [`PartitionLog::append`] of a payload the caller hands over: the log
    /// keeps the buffer itself instead of copying it (the produce path, where
    /// the records were already cut out of the request frame).
    pub fn append_owned(
        &self,
        records: Vec<u8>,
        leader_epoch: i32,
    ) -> Result<AppendResult, EngineError> {
        self.append_inner(owned(records), Origin::Client { leader_epoch })
    }

    /// [`PartitionLog::append_owned`] of a `BytesMut`: the produce path hands
    /// over each partition's region of the request frame itself when the
    /// frame had no other user (no copy at all).
    pub fn append_owned_bytes(
        &self,
        records: BytesMut,
        leader_epoch: i32,
    ) -> Result<AppendResult, EngineError> {
        let address = records.as_ptr() as usize;
        let result = self.append_inner(Payload::Owned(records), Origin::Client { leader_epoch });
        // Refused or a duplicate: the records' reservation goes (an append
        // took it off as it published the new end).
        if result.as_ref().map_or(true, |r| r.duplicate) {
            if let Some(hint) = self.placement.get() {
                hint.release(address);
            }
        }
        result
    }

    /// Appends a control batch built by the log itself (a transaction
    /// marker, see [`PartitionLog::append_control`]): the one way in for
    /// control batches, which [`PartitionLog::append`] refuses.
    pub(crate) fn append_control_batch(
        &self,
        batch: Vec<u8>,
        leader_epoch: i32,
    ) -> Result<AppendResult, EngineError> {
        self.append_inner(owned(batch), Origin::Control { leader_epoch })
    }

    /// [`PartitionLog::append`] of a payload of any [`Origin`].
    ///
    /// The steps, in order: refuse on a closed or failed log; validate the
    /// payload; rewrite a client's batches in the topic's codec when
    /// `compression.type` asks (and validate them again); check that a
    /// replica's payload starts at the log end and is contiguous; check the
    /// producers (a refused or duplicate payload
    /// leaves no trace); note a new leader epoch; write offsets into the
    /// batches (not a replica's); roll when due; index the batches in the
    /// active segment; apply the producer changes; queue the bytes for the
    /// flusher.
    pub(super) fn append_inner(
        &self,
        payload: Payload<'_>,
        origin: Origin,
    ) -> Result<AppendResult, EngineError> {
        self.admit_append(payload.as_slice().len(), origin)?;
        // Where the records were received (and reserved their place, see
        // `crate::placement`), before a rewrite may move them.
        let received_at = payload.as_slice().as_ptr() as usize;
        let config = self.append_settings();
        // One clock read serves the whole append (≈50 ns each on this VM).
        let now_ms = self.now_ms();
        let (mut payload, validated) = self.validated_payload(payload, origin, &config, now_ms)?;
        let records = payload.as_mut_slice();
        let log_append_time_ms = if config.log_append_time && origin != Origin::Replica {
            now_ms
        } else {
            -1
        };

        let mut state = self.state.borrow_mut();
        let base_offset = self.append_base_offset(&state, origin, &validated)?;
        // Producer checks come before any change: a refused payload leaves no trace.
        let producer_updates =
            match self.check_payload_producers(&validated, base_offset, now_ms, origin)? {
                Checked::Append(updates) => updates,
                Checked::Duplicate(first, last) => {
                    return Ok(duplicate_result(first, last, state.log_start_offset));
                }
            };
        let next_offset = self.place_batches(
            records,
            &validated,
            origin,
            base_offset,
            state.leader_epoch,
            log_append_time_ms,
        )?;
        let placed = Placed {
            base_offset,
            next_offset,
            total_bytes: validated.last().map(|v| v.range.end).unwrap_or(0),
            now_ms,
            log_append_time_ms,
        };
        let (segment, position) =
            self.index_in_active(&mut state, &validated, &placed, origin, &config);
        self.apply_producer_updates(segment.base_offset, producer_updates);
        self.placement
            .get_or_init(|| PlacementHint::register(&self.tp))
            .appended(position + placed.total_bytes as u64, received_at);
        state.pending.push_back(PendingChunk {
            segment,
            position,
            first_offset: base_offset,
            next_offset,
            batch_count: validated.len() as u64,
            bytes: payload.into_owned(placed.total_bytes, position),
        });
        state.log_end_offset = next_offset;
        self.count_stream_due(&mut state, placed.total_bytes);
        let log_start_offset = state.log_start_offset;
        drop(state);
        self.kick_flusher();
        Ok(AppendResult {
            base_offset,
            last_offset: next_offset - 1,
            log_append_time_ms,
            log_start_offset,
            record_count: validated.iter().map(|v| v.record_count).sum(),
            size_bytes: placed.total_bytes,
            duplicate: false,
        })
    }

    /// The checks before an append looks at its payload: the log is open,
    /// healthy and (but for a replica's payload) leading, and the log dir
    /// has room for `payload_bytes`. The log is marked mutated once past the
    /// leader check, even when the space check then refuses.
    fn admit_append(&self, payload_bytes: usize, origin: Origin) -> Result<(), EngineError> {
        self.check_appendable()?;
        if origin != Origin::Replica && !self.leading.get() {
            return Err(EngineError::NotLeader);
        }
        self.mutated.set(true);
        // Below the free-space reserve nothing new is taken (a truncation,
        // which frees space, still may be); the payload is counted against
        // the shard's estimate before it is taken (see `crate::disk_space`).
        let space = self.ctx.space_of(self.log_dir_index());
        if !space.admits(payload_bytes as u64, self.space_allowance()) {
            return Err(EngineError::DiskFull {
                free_bytes: space.free_bytes(),
                min_free_bytes: space.reserve_bytes(),
            });
        }
        Ok(())
    }

    /// The payload's batches validated against `max.message.bytes` (not a
    /// replica's) and, on a compacted topic, for keys (a client's), then
    /// rewritten in the topic's codec when `compression.type` names one.
    fn validated_payload<'a>(
        &self,
        payload: Payload<'a>,
        origin: Origin,
        config: &AppendSettings,
        now_ms: i64,
    ) -> Result<(Payload<'a>, Vec<Validated>), EngineError> {
        // Kafka's follower ignores `max.message.bytes` too: its leader took
        // the batch, maybe before the limit was lowered, and a follower
        // refusing it could never catch up.
        let max_batch_bytes = match origin {
            Origin::Replica => usize::MAX,
            Origin::Client { .. } | Origin::Control { .. } => config.max_message_bytes as usize,
        };
        let validated =
            validate_payload(payload.as_slice(), max_batch_bytes, origin.allows_control())?;
        if matches!(origin, Origin::Client { .. }) {
            check_records(payload.as_slice(), &validated, config, now_ms)?;
        }
        match (origin, config.compression) {
            (Origin::Client { .. }, Some(target)) => {
                self.recompressed(payload, validated, target, config, max_batch_bytes)
            }
            _ => Ok((payload, validated)),
        }
    }

    /// The offset the payload's first batch gets: the log end, or for a
    /// replica the leader's offset (checked to start at or past the log end
    /// and be contiguous).
    fn append_base_offset(
        &self,
        state: &LogState,
        origin: Origin,
        validated: &[Validated],
    ) -> Result<i64, EngineError> {
        // A replica's batches keep the leader's offsets, which may start
        // past the log end (compaction left a gap there).
        let base_offset = match (origin, validated.first()) {
            (Origin::Replica, Some(first)) => first.header.base_offset.max(state.log_end_offset),
            _ => state.log_end_offset,
        };
        if origin == Origin::Replica {
            self.check_replica_offsets(
                base_offset,
                validated
                    .iter()
                    .map(|v| (v.header.base_offset, v.header.last_offset())),
            )?;
        }
        Ok(base_offset)
    }

    /// [`check_producers`] against the producer state, pruned first of
    /// producers stable below the high watermark.
    fn check_payload_producers(
        &self,
        validated: &[Validated],
        base_offset: i64,
        now_ms: i64,
        origin: Origin,
    ) -> Result<Checked, EngineError> {
        let mut txn = self.txn.borrow_mut();
        txn.producers.prune_stable(self.high_watermark.get());
        check_producers(&txn.producers, validated, base_offset, now_ms, origin)
    }

    /// Rolls when due, then indexes the placed batches in the active
    /// segment. Returns that segment and the position the batches start at.
    fn index_in_active(
        &self,
        state: &mut LogState,
        validated: &[Validated],
        placed: &Placed,
        origin: Origin,
        config: &AppendSettings,
    ) -> (Rc<Segment>, u64) {
        if needs_roll(
            state,
            config,
            placed.total_bytes,
            placed.next_offset,
            placed.now_ms,
        ) {
            self.roll(state, placed.base_offset, placed.now_ms);
        }
        let segment = match state.segments.last() {
            Some(s) => s.clone(),
            None => unreachable!("a segment was just ensured"),
        };
        let position = segment.meta.borrow().size_bytes;
        index_batches(
            &segment,
            position,
            placed.base_offset,
            validated,
            origin == Origin::Replica,
            placed.log_append_time_ms,
            config.index_interval_bytes,
        );
        (segment, position)
    }

    /// The payload with every data batch whose codec is not `target`
    /// rewritten in `target` (the topic's `compression.type`), validated
    /// again — `max.message.bytes` included, as Kafka checks the batch it
    /// stores. A payload with nothing to rewrite is handed back as it came.
    fn recompressed<'a>(
        &self,
        payload: Payload<'a>,
        validated: Vec<Validated>,
        target: Compression,
        config: &AppendSettings,
        max_batch_bytes: usize,
    ) -> Result<(Payload<'a>, Vec<Validated>), EngineError> {
        let rewrite_count = validated
            .iter()
            .filter(|v| batch::needs_recompression(&v.header, target))
            .count();
        if rewrite_count == 0 {
            return Ok((payload, validated));
        }
        let bytes = payload.as_slice();
        let mut rewritten = Vec::with_capacity(bytes.len());
        for v in &validated {
            let original = &bytes[v.range.clone()];
            if batch::needs_recompression(&v.header, target) {
                rewritten.extend_from_slice(&batch::recompress(
                    original,
                    target,
                    &config.compression_levels,
                )?);
            } else {
                rewritten.extend_from_slice(original);
            }
        }
        let revalidated = validate_payload(&rewritten, max_batch_bytes, false)?;
        debug_assert_eq!(revalidated.len(), validated.len());
        let counter = &self.ctx.recompressed_batches;
        counter.set(counter.get() + rewrite_count as u64);
        Ok((owned(rewritten), revalidated))
    }

    /// Notes a new leader epoch in the epoch cache, durable before its first
    /// batch is in the log (the last step of an append that may refuse),
    /// and writes the offsets, epoch and timestamps into the batches — but
    /// a replica's, which keep the leader's. Returns the offset after the
    /// last batch.
    fn place_batches(
        &self,
        records: &mut [u8],
        validated: &[Validated],
        origin: Origin,
        base_offset: i64,
        log_leader_epoch: LeaderEpoch,
        log_append_time_ms: i64,
    ) -> Result<i64, EngineError> {
        match origin {
            Origin::Client { leader_epoch } | Origin::Control { leader_epoch } => {
                let batch_leader_epoch = leader_epoch.max(log_leader_epoch);
                self.check_epoch_not_older(batch_leader_epoch)?;
                self.note_append_epoch(batch_leader_epoch, base_offset)?;
                Ok(assign_offsets(
                    records,
                    validated,
                    base_offset,
                    batch_leader_epoch,
                    log_append_time_ms,
                ))
            }
            Origin::Replica => {
                self.note_replicated_epochs(
                    validated
                        .iter()
                        .map(|v| (v.header.partition_leader_epoch, v.header.base_offset)),
                )?;
                Ok(validated
                    .last()
                    .map_or(base_offset, |v| v.header.last_offset() + 1))
            }
        }
    }

    /// Refuses appends to a closed log or one whose disk writes failed.
    pub(super) fn check_appendable(&self) -> Result<(), EngineError> {
        if self.closed.get() {
            return Err(EngineError::Closed);
        }
        if self.truncating.get() {
            return Err(EngineError::Truncating);
        }
        if self.failed.get() {
            return Err(EngineError::io(
                &self.dir,
                std::io::Error::other("partition offline after a disk error"),
            ));
        }
        if self.stalled.get() {
            // Transient (`WouldBlock`): the partition stays online.
            return Err(EngineError::io(
                &self.dir,
                std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    "writes are being retried after a transient error",
                ),
            ));
        }
        Ok(())
    }

    /// The scalar settings this append needs (the config holds strings).
    fn append_settings(&self) -> AppendSettings {
        let c = self.config.borrow();
        AppendSettings {
            max_message_bytes: c.max_message_bytes,
            log_append_time: c.log_append_time,
            segment_bytes: c.segment_bytes,
            segment_ms: c.segment_ms,
            segment_index_bytes: c.segment_index_bytes,
            index_interval_bytes: c.index_interval_bytes,
            compression: Compression::from_name(&c.compression_type),
            compression_levels: c.compression_levels,
            compact: c.cleanup_policy.compact,
            timestamp_before_max_ms: c.timestamp_before_max_ms,
            timestamp_after_max_ms: c.timestamp_after_max_ms,
        }
    }

    /// Starts a new active segment at `base_offset`, snapshotting the
    /// producer state first: it is that of `base_offset` until the payload
    /// that rolls is applied.
    fn roll(&self, state: &mut LogState, base_offset: i64, now_ms: i64) {
        self.checkpoint_at_roll(base_offset, state.log_start_offset);
        let segment = Rc::new(Segment::new(
            &self.dir,
            base_offset,
            Segment::empty_meta(base_offset, now_ms),
            0,
        ));
        state.segments.push(segment);
    }

    /// Applies the checked producer changes, indexing the transactions they
    /// abort in the segment based at `segment_base`.
    fn apply_producer_updates(&self, segment_base: i64, updates: ProducerUpdates) {
        let mut txn = self.txn.borrow_mut();
        let completed = if updates.completed().is_empty() {
            Vec::new()
        } else {
            updates.completed().to_vec()
        };
        txn.producers.apply(updates);
        if !completed.is_empty() {
            txn.record_completed(segment_base, &completed);
        }
    }

    /// Small appends accumulate for the writer; once `stream_min_bytes` of
    /// them wait, their whole blocks are streamed. Big ones are written well
    /// enough on their own.
    fn count_stream_due(&self, state: &mut LogState, total_bytes: usize) {
        let stream_min_bytes = self.ctx.config.stream_min_bytes;
        if stream_min_bytes > 0 && total_bytes < STREAM_APPEND_MAX_BYTES {
            state.stream_due_bytes += total_bytes;
            if state.stream_due_bytes >= stream_min_bytes {
                state.stream_due_bytes = 0;
                self.stream_pending(state);
            }
        }
    }
}

/// The answer to a payload that resends batches already in the log: the
/// offsets of the originals, nothing appended.
fn duplicate_result(
    first: BatchMetadata,
    last: BatchMetadata,
    log_start_offset: i64,
) -> AppendResult {
    AppendResult {
        base_offset: first.first_offset,
        last_offset: last.last_offset,
        log_append_time_ms: -1,
        log_start_offset,
        record_count: 0,
        size_bytes: 0,
        duplicate: true,
    }
}

/// Writes each batch's base offset, partition leader epoch and (under
/// LogAppendTime, when `log_append_time_ms >= 0`) timestamp into its
/// header. Returns the offset after the last batch.
fn assign_offsets(
    records: &mut [u8],
    validated: &[Validated],
    base_offset: i64,
    leader_epoch: i32,
    log_append_time_ms: i64,
) -> i64 {
    let mut next_offset = base_offset;
    for v in validated {
        let bytes = &mut records[v.range.clone()];
        batch::set_base_offset(bytes, next_offset);
        batch::set_partition_leader_epoch(bytes, leader_epoch);
        if log_append_time_ms >= 0 {
            batch::set_log_append_time(bytes, log_append_time_ms);
        }
        next_offset += v.last_offset_delta + 1;
    }
    next_offset
}

/// Whether the payload must start a new segment: it would not fit, the
/// active segment is older than `segment.ms`, its index is full, or the
/// payload's offsets would not fit its 32-bit relative offsets. An empty
/// active segment never rolls. (The meta is only borrowed: it holds the
/// segment's whole index.)
fn needs_roll(
    state: &LogState,
    config: &AppendSettings,
    total_bytes: usize,
    next_offset: i64,
    now_ms: i64,
) -> bool {
    match state.segments.last() {
        None => true,
        Some(active) => {
            let meta = active.meta.borrow();
            meta.size_bytes > 0
                && (meta.size_bytes + total_bytes as u64 > config.segment_bytes
                    || now_ms - meta.created_ms >= config.segment_ms
                    || meta.index.size_bytes() + 8 > config.segment_index_bytes
                    || meta.time_index.size_bytes() + 12 > config.segment_index_bytes
                    || next_offset - 1 - active.base_offset > i64::from(u32::MAX))
        }
    }
}

/// Records the payload's batches, laid out from `position` with offsets
/// from `base_offset`, in the segment's size, offsets and indexes.
fn index_batches(
    segment: &Segment,
    position: u64,
    base_offset: i64,
    validated: &[Validated],
    leaders_offsets: bool,
    log_append_time_ms: i64,
    index_interval_bytes: u64,
) {
    let mut batch_position = position;
    let mut batch_base = base_offset;
    for v in validated {
        if leaders_offsets {
            // A replica's batches are indexed where the leader put them,
            // gaps (compacted-away offsets) included.
            batch_base = v.header.base_offset;
        }
        let max_ts = if log_append_time_ms >= 0 {
            log_append_time_ms
        } else {
            v.max_timestamp_ms
        };
        segment.record_append(
            batch_position,
            batch_base,
            batch_base + v.last_offset_delta,
            max_ts,
            v.range.len() as u64,
            index_interval_bytes,
        );
        batch_position += v.range.len() as u64;
        batch_base += v.last_offset_delta + 1;
    }
}

/// Checks every batch of a payload against the producer state, in order,
/// on an overlay: the changes are returned, not applied.
fn check_producers(
    producers: &ProducerStateManager,
    validated: &[Validated],
    base_offset: i64,
    now_ms: i64,
    origin: Origin,
) -> Result<Checked, EngineError> {
    if origin == Origin::Replica {
        return Ok(Checked::Append(replay_producers(
            producers, validated, now_ms,
        )));
    }
    let mut append = producers.begin(now_ms);
    let mut duplicates: Vec<(i64, i32, BatchMetadata)> = Vec::new();
    let mut fresh_count = 0usize;
    let mut next_offset = base_offset;
    for v in validated {
        let header = &v.header;
        if let Some((commit, coordinator_epoch)) = v.marker {
            append.marker(
                header.producer_id,
                header.producer_epoch,
                coordinator_epoch,
                commit,
                next_offset,
                true,
            )?;
        } else if header.producer_id >= 0 {
            let batch = data_batch(header, next_offset);
            if let Some(original) = append.duplicate_of(&batch) {
                duplicates.push((header.producer_id, header.base_sequence, original));
                continue;
            }
            append.data_batch(&batch)?;
        }
        fresh_count += 1;
        next_offset += v.last_offset_delta + 1;
    }
    match (duplicates.first(), duplicates.last()) {
        (Some(&(producer_id, received, first)), Some(&(_, _, last))) => {
            if fresh_count > 0 {
                let expected = producers
                    .producer(producer_id)
                    .map(|entry| increment_sequence(entry.last_sequence(), 1))
                    .unwrap_or(0);
                return Err(EngineError::OutOfOrderSequence {
                    producer_id,
                    expected,
                    received,
                });
            }
            Ok(Checked::Duplicate(first, last))
        }
        _ => Ok(Checked::Append(append.into_updates())),
    }
}

/// A leader's batches as producer state changes, recorded unchecked at the
/// offsets the leader gave them (see [`Origin::Replica`]), as the replay
/// at open records the log's own batches.
fn replay_producers(
    producers: &ProducerStateManager,
    validated: &[Validated],
    now_ms: i64,
) -> ProducerUpdates {
    let mut append = producers.begin(now_ms);
    for v in validated {
        let header = &v.header;
        if let Some((commit, coordinator_epoch)) = v.marker {
            // Unchecked, it cannot fail: the marker stands as the leader wrote it.
            let _ = append.marker(
                header.producer_id,
                header.producer_epoch,
                coordinator_epoch,
                commit,
                header.base_offset,
                false,
            );
        } else if header.producer_id >= 0 {
            append.recovered_data_batch(&data_batch(header, header.base_offset));
        }
    }
    append.into_updates()
}

/// The producer fields a client may not get wrong, and a control batch's marker.
fn check_producer_fields(
    bytes: &[u8],
    header: &BatchHeader,
    allow_control: bool,
) -> Result<Option<(bool, i32)>, BatchError> {
    if header.is_control() {
        if !allow_control {
            return Err(BatchError::InvalidRecord {
                reason: "control batches are written by the transaction coordinator only",
            });
        }
        if header.producer_id < 0 {
            return Err(BatchError::InvalidRecord {
                reason: "a control batch without a producer id",
            });
        }
        return parse_marker_batch(bytes)
            .map(Some)
            .ok_or(BatchError::InvalidRecord {
                reason: "a control batch without a transaction marker record",
            });
    }
    if header.producer_id < 0 && header.is_transactional() {
        return Err(BatchError::InvalidRecord {
            reason: "a transactional batch without a producer id",
        });
    }
    if header.producer_id >= 0 && header.base_sequence < 0 {
        return Err(BatchError::InvalidRecord {
            reason: "an idempotent batch without a sequence number",
        });
    }
    Ok(None)
}

/// What the produce path accepts of a payload, without a log: each batch's
/// range and header after the same checks as an append (for
/// [`crate::fuzzing`], which feeds it arbitrary bytes).
pub(crate) fn validated_batches(
    records: &[u8],
    max_message_bytes: usize,
    allow_control: bool,
) -> Result<Vec<(std::ops::Range<usize>, BatchHeader)>, EngineError> {
    Ok(validate_payload(records, max_message_bytes, allow_control)?
        .into_iter()
        .map(|v| (v.range, v.header))
        .collect())
}

/// A client's records checked one by one ([`record_checks`]): keys on a
/// compacted topic, CreateTime timestamps against the topic's bounds.
fn check_records(
    payload: &[u8],
    validated: &[Validated],
    config: &AppendSettings,
    now_ms: i64,
) -> Result<(), BatchError> {
    let batches = || validated.iter().map(|v| (&v.range, &v.header));
    if config.compact {
        record_checks::require_keys(payload, batches())?;
    }
    if !config.log_append_time {
        let bounds = TimestampBounds {
            now_ms,
            before_max_ms: config.timestamp_before_max_ms,
            after_max_ms: config.timestamp_after_max_ms,
        };
        record_checks::check_timestamps(payload, batches(), bounds)?;
    }
    Ok(())
}

fn validate_payload(
    records: &[u8],
    max_message_bytes: usize,
    allow_control: bool,
) -> Result<Vec<Validated>, EngineError> {
    let mut validated = Vec::new();
    let mut iter = batch::batches(records);
    for item in iter.by_ref() {
        let (_, range) = item?;
        let bytes = &records[range.clone()];
        let header = batch::validate_batch(bytes, max_message_bytes)?;
        let marker = check_producer_fields(bytes, &header, allow_control)?;
        validated.push(Validated {
            range,
            record_count: i64::from(header.records_count),
            last_offset_delta: i64::from(header.last_offset_delta),
            max_timestamp_ms: header.max_timestamp,
            header,
            marker,
        });
    }
    if iter.remainder_bytes() > 0 {
        return Err(BatchError::Corrupt {
            reason: "produce payload ends with a partial batch",
        }
        .into());
    }
    if validated.is_empty() {
        return Err(BatchError::Corrupt {
            reason: "produce payload holds no record batch",
        }
        .into());
    }
    Ok(validated)
}

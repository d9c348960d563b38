//! Idempotent and transactional producer state of one partition, as Kafka's
//! `ProducerStateManager` keeps it. Shard-local, owned by the partition log.
//!
//! For each producer id: its epoch, the coordinator epoch of its last
//! transaction marker, the sequence and offset ranges of its last
//! [`BATCHES_PER_PRODUCER`] batches (a resent batch is answered from them),
//! and the first offset of its open transaction. Beside them, the
//! transactions that are not yet *stable* — open, or ended by a marker that
//! readers cannot see yet — which hold the last stable offset back.
//!
//! Rules of an append (the order Kafka applies them in):
//! 1. a batch whose epoch and sequence range equal one of the last five is a
//!    duplicate: it is not appended, the original offsets are returned;
//! 2. an epoch older than the known one is refused (`INVALID_PRODUCER_EPOCH`);
//! 3. a newer epoch must start at sequence 0 (`OUT_OF_ORDER_SEQUENCE_NUMBER`);
//! 4. the same epoch must continue at last sequence + 1, wrapping from
//!    `i32::MAX` to 0; an epoch without batches (bumped by a marker) at 0;
//! 5. a producer this partition does not know is accepted at any sequence —
//!    Kafka's behaviour since 2.5 (KIP-360): its state may have been expired
//!    or removed with old segments, and refusing would fence a live producer.
//!
//! Appends are checked batch by batch on a [`ProducerAppend`] overlay, and
//! applied only when every batch of the payload passed ([`ProducerUpdates`]),
//! so a refused payload leaves no trace.
//!
//! Persistence: [`ProducerStateManager::encode_snapshot`] writes the whole
//! state as of an offset into `<offset, 20 digits>.snapshot` (rill's own
//! format, CRC32C-checked); at open the newest snapshot at or below the log
//! end is loaded and the batches after it are replayed with
//! [`ProducerAppend::recovered_data_batch`] / [`ProducerAppend::marker`].

use crate::error::EngineError;
use crate::types::{CoordinatorEpoch, Offset, ProducerEpoch, ProducerId, Sequence, TimestampMs};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Batches remembered per producer for duplicate detection (Kafka's 5, the
/// most a client may have in flight with idempotence).
pub const BATCHES_PER_PRODUCER: usize = 5;

/// Sequence and offset range of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of the first record.
    pub first_sequence: Sequence,
    /// Sequence of the last record.
    pub last_sequence: Sequence,
    /// Offset of the first record.
    pub first_offset: Offset,
    /// Offset of the last record.
    pub last_offset: Offset,
}

/// What the partition knows of one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// Current epoch (-1 when only seen without one).
    pub producer_epoch: ProducerEpoch,
    /// Coordinator epoch of the last marker (-1 before any).
    pub coordinator_epoch: CoordinatorEpoch,
    /// The last batches, oldest first, at most [`BATCHES_PER_PRODUCER`].
    pub batches: VecDeque<BatchMetadata>,
    /// Broker wall clock of the last append, for `producer_id_expiration_ms`.
    pub last_seen_ms: TimestampMs,
    /// First offset of the open transaction, if one is open.
    pub current_txn_first_offset: Option<Offset>,
}

impl ProducerEntry {
    fn new(producer_epoch: i16, now_ms: i64) -> Self {
        ProducerEntry {
            producer_epoch,
            coordinator_epoch: -1,
            batches: VecDeque::new(),
            last_seen_ms: now_ms,
            current_txn_first_offset: None,
        }
    }

    /// Sequence of the last batch of the current epoch, -1 when none.
    pub fn last_sequence(&self) -> i32 {
        self.batches.back().map(|b| b.last_sequence).unwrap_or(-1)
    }

    fn duplicate_of(&self, batch: &DataBatch) -> Option<BatchMetadata> {
        if batch.producer_epoch != self.producer_epoch {
            return None;
        }
        let last_sequence = batch.last_sequence();
        self.batches
            .iter()
            .find(|b| b.first_sequence == batch.base_sequence && b.last_sequence == last_sequence)
            .copied()
    }

    /// A new epoch forgets the sequences of the old one.
    fn set_epoch(&mut self, producer_epoch: i16) {
        if producer_epoch != self.producer_epoch {
            self.producer_epoch = producer_epoch;
            self.batches.clear();
        }
    }
}

/// One producer as DescribeProducers reports it (Kafka's
/// `ProducerStateManager.activeProducers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    /// Producer id.
    pub producer_id: ProducerId,
    /// Current epoch.
    pub producer_epoch: ProducerEpoch,
    /// Sequence of the last record of the last batch, -1 when none.
    pub last_sequence: Sequence,
    /// This replica's clock at the last append (a follower's at its copy).
    /// Kafka reports the last batch's max timestamp; rill keeps only the
    /// append time (close to it, equal on a leader under LogAppendTime),
    /// which is what producer expiry is measured from.
    pub last_timestamp_ms: TimestampMs,
    /// Coordinator epoch of the last marker, -1 before any.
    pub coordinator_epoch: CoordinatorEpoch,
    /// First offset of the open transaction, -1 when none is open.
    pub current_txn_start_offset: Offset,
}

/// The producer fields of a data batch being appended or replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataBatch {
    /// Producer id (>= 0).
    pub producer_id: ProducerId,
    /// Producer epoch.
    pub producer_epoch: ProducerEpoch,
    /// Sequence of the first record.
    pub base_sequence: Sequence,
    /// Offset of the last record relative to the first.
    pub last_offset_delta: i32,
    /// Offset given to the first record.
    pub first_offset: Offset,
    /// Part of a transaction.
    pub transactional: bool,
}

impl DataBatch {
    /// Sequence of the last record, wrapping from `i32::MAX` to 0 as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.first_offset + i64::from(self.last_offset_delta)
    }
}

/// `sequence + increment`, wrapping past `i32::MAX` to 0.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// A transaction ended by a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    /// Producer id.
    pub producer_id: ProducerId,
    /// First offset of the transaction's data.
    pub first_offset: Offset,
    /// Offset of the marker.
    pub last_offset: Offset,
    /// ABORT (true) or COMMIT (false).
    pub aborted: bool,
}

/// What a data batch turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchCheck {
    /// New: append it.
    Append,
    /// A resend of a batch already in the log, at these offsets.
    Duplicate(BatchMetadata),
}

/// A transaction that holds the last stable offset back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UnstableTxn {
    producer_id: i64,
    /// Offset of the ending marker, once appended.
    marker_offset: Option<i64>,
}

/// The producer state of one partition. Shard-local.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: BTreeMap<i64, ProducerEntry>,
    /// Transactions by first offset: open, or ended by a marker that is not
    /// yet below the high watermark.
    unstable: BTreeMap<i64, UnstableTxn>,
}

impl ProducerStateManager {
    /// Empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The entry of a producer.
    pub fn producer(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Number of producers known.
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// Every producer known, by producer id.
    pub fn active_producers(&self) -> Vec<ActiveProducer> {
        self.producers
            .iter()
            .map(|(&producer_id, entry)| ActiveProducer {
                producer_id,
                producer_epoch: entry.producer_epoch,
                last_sequence: entry.last_sequence(),
                last_timestamp_ms: entry.last_seen_ms,
                coordinator_epoch: entry.coordinator_epoch,
                current_txn_start_offset: entry.current_txn_first_offset.unwrap_or(-1),
            })
            .collect()
    }

    /// Starts checking an append against this state.
    pub fn begin(&self, now_ms: i64) -> ProducerAppend<'_> {
        ProducerAppend {
            state: self,
            now_ms,
            touched: HashMap::new(),
            started: Vec::new(),
            completed: Vec::new(),
        }
    }

    /// Applies what a fully checked append changed.
    pub fn apply(&mut self, updates: ProducerUpdates) {
        for (producer_id, entry) in updates.touched {
            self.producers.insert(producer_id, entry);
        }
        for (first_offset, producer_id) in updates.started {
            let previous = self.unstable.insert(
                first_offset,
                UnstableTxn {
                    producer_id,
                    marker_offset: None,
                },
            );
            assert!(
                previous.is_none(),
                "two transactions start at offset {first_offset}"
            );
        }
        for txn in updates.completed {
            if let Some(unstable) = self.unstable.get_mut(&txn.first_offset) {
                assert_eq!(
                    unstable.producer_id, txn.producer_id,
                    "a marker ends another producer's transaction"
                );
                unstable.marker_offset = Some(txn.last_offset);
            }
        }
    }

    /// First offset of the earliest transaction that readers of committed
    /// data may not pass: open, or whose marker is not below `high_watermark`.
    pub fn first_unstable_offset(&self, high_watermark: i64) -> Option<i64> {
        self.unstable
            .iter()
            .find(|(_, txn)| !matches!(txn.marker_offset, Some(marker) if marker < high_watermark))
            .map(|(&first, _)| first)
    }

    /// Forgets ended transactions whose marker is below `high_watermark`.
    pub fn prune_stable(&mut self, high_watermark: i64) {
        self.unstable
            .retain(|_, txn| !matches!(txn.marker_offset, Some(marker) if marker < high_watermark));
    }

    /// First offsets of the open transactions other than `producer_id`'s,
    /// the earliest first: Kafka's last stable offset of a completed
    /// transaction, written into the aborted-transaction index.
    pub fn first_open_offset_except(&self, producer_id: i64) -> Option<i64> {
        self.unstable
            .iter()
            .find(|(_, txn)| txn.producer_id != producer_id && txn.marker_offset.is_none())
            .map(|(&first, _)| first)
    }

    /// Open transactions as `(producer_id, first_offset)`, by first offset.
    pub fn open_transactions(&self) -> Vec<(i64, i64)> {
        self.unstable
            .iter()
            .filter(|(_, txn)| txn.marker_offset.is_none())
            .map(|(&first, txn)| (txn.producer_id, first))
            .collect()
    }

    /// Drops producers idle for `expiration_ms` or more that have no open
    /// transaction (Kafka's `producer.id.expiration.ms`). Returns how many.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            entry.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(entry.last_seen_ms) < expiration_ms
        });
        before - self.producers.len()
    }

    /// The snapshot file bytes of this state, taken at `offset` (everything
    /// below `offset` is reflected, nothing at or above).
    ///
    /// Layout, big-endian: `version i16 = 1`, `crc32c u32` of what follows,
    /// `offset i64`, `producer_count i32`, then per producer `producer_id
    /// i64`, `epoch i16`, `coordinator_epoch i32`, `last_seen_ms i64`,
    /// `txn_first_offset i64` (-1: none), `batch_count i8`, and per batch
    /// `first_sequence i32`, `last_sequence i32`, `first_offset i64`,
    /// `last_offset i64`.
    pub fn encode_snapshot(&self, offset: i64) -> Vec<u8> {
        let mut body = Vec::with_capacity(12 + self.producers.len() * 64);
        body.extend_from_slice(&offset.to_be_bytes());
        body.extend_from_slice(&(self.producers.len() as i32).to_be_bytes());
        for (producer_id, entry) in &self.producers {
            body.extend_from_slice(&producer_id.to_be_bytes());
            body.extend_from_slice(&entry.producer_epoch.to_be_bytes());
            body.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
            body.extend_from_slice(&entry.last_seen_ms.to_be_bytes());
            body.extend_from_slice(&entry.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
            assert!(entry.batches.len() <= BATCHES_PER_PRODUCER);
            body.push(entry.batches.len() as u8);
            for b in &entry.batches {
                body.extend_from_slice(&b.first_sequence.to_be_bytes());
                body.extend_from_slice(&b.last_sequence.to_be_bytes());
                body.extend_from_slice(&b.first_offset.to_be_bytes());
                body.extend_from_slice(&b.last_offset.to_be_bytes());
            }
        }
        let mut out = Vec::with_capacity(6 + body.len());
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc_fast::crc32_iscsi(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parses a snapshot: `(offset, state)`. Open transactions come back
    /// from the entries; a transaction ended below the offset is stable by
    /// then (the high watermark at open is the log end).
    pub fn decode_snapshot(bytes: &[u8]) -> Result<(i64, ProducerStateManager), SnapshotError> {
        let mut reader = Reader { bytes, at: 0 };
        let version = reader.i16()?;
        if version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version(version));
        }
        let crc = reader.i32()? as u32;
        let body = &bytes[reader.at..];
        if crc_fast::crc32_iscsi(body) != crc {
            return Err(SnapshotError::Crc);
        }
        let offset = reader.i64()?;
        let count = reader.i32()?;
        if count < 0 {
            return Err(SnapshotError::Truncated);
        }
        let mut state = ProducerStateManager::new();
        for _ in 0..count {
            let producer_id = reader.i64()?;
            let mut entry = ProducerEntry::new(reader.i16()?, 0);
            entry.coordinator_epoch = reader.i32()?;
            entry.last_seen_ms = reader.i64()?;
            let txn_first_offset = reader.i64()?;
            let batch_count = reader.u8()? as usize;
            if batch_count > BATCHES_PER_PRODUCER {
                return Err(SnapshotError::Truncated);
            }
            for _ in 0..batch_count {
                entry.batches.push_back(BatchMetadata {
                    first_sequence: reader.i32()?,
                    last_sequence: reader.i32()?,
                    first_offset: reader.i64()?,
                    last_offset: reader.i64()?,
                });
            }
            if txn_first_offset >= 0 {
                entry.current_txn_first_offset = Some(txn_first_offset);
                state.unstable.insert(
                    txn_first_offset,
                    UnstableTxn {
                        producer_id,
                        marker_offset: None,
                    },
                );
            }
            state.producers.insert(producer_id, entry);
        }
        if reader.at != bytes.len() {
            return Err(SnapshotError::Truncated);
        }
        Ok((offset, state))
    }
}

const SNAPSHOT_VERSION: i16 = 1;

/// Why a snapshot file was not usable (the state is then rebuilt from the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Unknown format version.
    #[error("unknown snapshot version {0}")]
    Version(i16),
    /// The CRC does not match.
    #[error("snapshot CRC mismatch")]
    Crc,
    /// The bytes end early or have extra bytes.
    #[error("snapshot truncated or malformed")]
    Truncated,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let slice = self
            .bytes
            .get(self.at..self.at + N)
            .ok_or(SnapshotError::Truncated)?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        self.at += N;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.take::<1>()?[0])
    }
    fn i16(&mut self) -> Result<i16, SnapshotError> {
        Ok(i16::from_be_bytes(self.take()?))
    }
    fn i32(&mut self) -> Result<i32, SnapshotError> {
        Ok(i32::from_be_bytes(self.take()?))
    }
    fn i64(&mut self) -> Result<i64, SnapshotError> {
        Ok(i64::from_be_bytes(self.take()?))
    }
}

/// One append being checked: changes stay in this overlay until
/// [`ProducerAppend::into_updates`] hands them to [`ProducerStateManager::apply`].
pub struct ProducerAppend<'a> {
    state: &'a ProducerStateManager,
    now_ms: i64,
    touched: HashMap<i64, ProducerEntry>,
    started: Vec<(i64, i64)>,
    completed: Vec<CompletedTxn>,
}

/// The changes of a checked append, owned.
#[derive(Debug, Default)]
pub struct ProducerUpdates {
    touched: HashMap<i64, ProducerEntry>,
    started: Vec<(i64, i64)>,
    completed: Vec<CompletedTxn>,
}

impl ProducerUpdates {
    /// The transactions that markers of this append ended.
    pub fn completed(&self) -> &[CompletedTxn] {
        &self.completed
    }
}

impl ProducerAppend<'_> {
    fn entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.touched
            .get(&producer_id)
            .or_else(|| self.state.producers.get(&producer_id))
    }

    fn entry_mut(&mut self, producer_id: i64, producer_epoch: i16) -> &mut ProducerEntry {
        let now_ms = self.now_ms;
        let state = self.state;
        self.touched.entry(producer_id).or_insert_with(|| {
            state
                .producers
                .get(&producer_id)
                .cloned()
                .unwrap_or_else(|| ProducerEntry::new(producer_epoch, now_ms))
        })
    }

    /// Is `batch` a resend of one of the producer's last batches?
    pub fn duplicate_of(&self, batch: &DataBatch) -> Option<BatchMetadata> {
        self.entry(batch.producer_id)?.duplicate_of(batch)
    }

    /// Checks a produced data batch (not a duplicate: ask
    /// [`ProducerAppend::duplicate_of`] first) and records it.
    pub fn data_batch(&mut self, batch: &DataBatch) -> Result<(), EngineError> {
        if let Some(entry) = self.entry(batch.producer_id) {
            if batch.producer_epoch < entry.producer_epoch {
                return Err(EngineError::InvalidProducerEpoch {
                    producer_id: batch.producer_id,
                    epoch: batch.producer_epoch,
                    current_epoch: entry.producer_epoch,
                });
            }
            let expected = if batch.producer_epoch != entry.producer_epoch {
                0
            } else {
                increment_sequence(entry.last_sequence(), 1)
            };
            // An entry with epoch -1 was created without sequences: like an
            // unknown producer, any sequence starts it.
            if batch.base_sequence != expected && entry.producer_epoch >= 0 {
                return Err(EngineError::OutOfOrderSequence {
                    producer_id: batch.producer_id,
                    expected,
                    received: batch.base_sequence,
                });
            }
            if !batch.transactional && entry.current_txn_first_offset.is_some() {
                return Err(EngineError::InvalidTxnState {
                    producer_id: batch.producer_id,
                    reason: "a non-transactional batch while the producer's transaction is open",
                });
            }
        }
        self.recovered_data_batch(batch);
        Ok(())
    }

    /// Records a data batch without checking it (replay of the log at open).
    pub fn recovered_data_batch(&mut self, batch: &DataBatch) {
        let now_ms = self.now_ms;
        let entry = self.entry_mut(batch.producer_id, batch.producer_epoch);
        entry.set_epoch(batch.producer_epoch);
        entry.batches.push_back(BatchMetadata {
            first_sequence: batch.base_sequence,
            last_sequence: batch.last_sequence(),
            first_offset: batch.first_offset,
            last_offset: batch.last_offset(),
        });
        while entry.batches.len() > BATCHES_PER_PRODUCER {
            entry.batches.pop_front();
        }
        entry.last_seen_ms = now_ms;
        let starts_txn = batch.transactional && entry.current_txn_first_offset.is_none();
        if starts_txn {
            entry.current_txn_first_offset = Some(batch.first_offset);
            self.started.push((batch.first_offset, batch.producer_id));
        }
    }

    /// Checks (when `check`) and records a transaction marker at `offset`.
    /// Returns the transaction it ends, if the producer had one open.
    pub fn marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
        offset: i64,
        check: bool,
    ) -> Result<Option<CompletedTxn>, EngineError> {
        if check {
            if let Some(entry) = self.entry(producer_id) {
                if producer_epoch < entry.producer_epoch {
                    return Err(EngineError::InvalidProducerEpoch {
                        producer_id,
                        epoch: producer_epoch,
                        current_epoch: entry.producer_epoch,
                    });
                }
                if coordinator_epoch < entry.coordinator_epoch {
                    return Err(EngineError::TransactionCoordinatorFenced {
                        producer_id,
                        coordinator_epoch,
                        current_coordinator_epoch: entry.coordinator_epoch,
                    });
                }
            }
        }
        let now_ms = self.now_ms;
        let entry = self.entry_mut(producer_id, producer_epoch);
        entry.set_epoch(producer_epoch);
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_seen_ms = now_ms;
        let completed = entry
            .current_txn_first_offset
            .take()
            .map(|first_offset| CompletedTxn {
                producer_id,
                first_offset,
                last_offset: offset,
                aborted: !commit,
            });
        if let Some(txn) = completed {
            self.completed.push(txn);
        }
        Ok(completed)
    }

    /// The changes, ready for [`ProducerStateManager::apply`].
    pub fn into_updates(self) -> ProducerUpdates {
        ProducerUpdates {
            touched: self.touched,
            started: self.started,
            completed: self.completed,
        }
    }
}

/// A control record's key: `version i16, type i16` (0 ABORT, 1 COMMIT).
/// Returns `Some(commit)` for a well-formed marker key.
pub fn parse_marker_key(key: &[u8]) -> Option<bool> {
    if key.len() < 4 {
        return None;
    }
    let version = i16::from_be_bytes([key[0], key[1]]);
    let kind = i16::from_be_bytes([key[2], key[3]]);
    match (version, kind) {
        (0, 0) => Some(false),
        (0, 1) => Some(true),
        _ => None,
    }
}

/// A control record's value: `version i16, coordinator_epoch i32`.
pub fn parse_marker_value(value: &[u8]) -> Option<i32> {
    let bytes: [u8; 4] = value.get(2..6)?.try_into().ok()?;
    Some(i32::from_be_bytes(bytes))
}

/// The key and value of a marker record.
pub fn marker_record(commit: bool, coordinator_epoch: i32) -> ([u8; 4], [u8; 6]) {
    let mut key = [0u8; 4];
    key[2..4].copy_from_slice(&i16::from(commit).to_be_bytes());
    let mut value = [0u8; 6];
    value[2..6].copy_from_slice(&coordinator_epoch.to_be_bytes());
    (key, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(producer_id: i64, epoch: i16, seq: i32, count: i32, offset: i64) -> DataBatch {
        DataBatch {
            producer_id,
            producer_epoch: epoch,
            base_sequence: seq,
            last_offset_delta: count - 1,
            first_offset: offset,
            transactional: false,
        }
    }

    fn append(state: &mut ProducerStateManager, b: DataBatch) -> Result<BatchCheck, EngineError> {
        let mut append = state.begin(0);
        if let Some(dup) = append.duplicate_of(&b) {
            return Ok(BatchCheck::Duplicate(dup));
        }
        append.data_batch(&b)?;
        let updates = append.into_updates();
        state.apply(updates);
        Ok(BatchCheck::Append)
    }

    #[test]
    fn active_producers_report_sequence_epoch_and_open_transaction() {
        let mut s = ProducerStateManager::new();
        assert!(s.active_producers().is_empty());
        append(&mut s, batch(7, 2, 0, 3, 0)).unwrap();
        let mut txn = batch(9, 1, 0, 2, 3);
        txn.transactional = true;
        append(&mut s, txn).unwrap();
        let listed = s.active_producers();
        assert_eq!(listed.len(), 2);
        assert_eq!((listed[0].producer_id, listed[0].producer_epoch), (7, 2));
        assert_eq!(listed[0].last_sequence, 2);
        assert_eq!(listed[0].current_txn_start_offset, -1);
        assert_eq!(listed[0].coordinator_epoch, -1);
        assert_eq!(listed[1].producer_id, 9);
        assert_eq!(listed[1].last_sequence, 1);
        assert_eq!(listed[1].current_txn_start_offset, 3);
        // The commit marker closes the transaction and records the
        // coordinator's epoch.
        let mut marker = s.begin(0);
        marker.marker(9, 1, 4, true, 5, true).unwrap();
        let updates = marker.into_updates();
        s.apply(updates);
        let after = s.active_producers();
        assert_eq!(after[1].current_txn_start_offset, -1);
        assert_eq!(after[1].coordinator_epoch, 4);
        assert_eq!(after[1].last_sequence, 1);
    }

    #[test]
    fn sequences_duplicates_and_epochs() {
        let mut s = ProducerStateManager::new();
        assert_eq!(
            append(&mut s, batch(1, 0, 0, 3, 0)).unwrap(),
            BatchCheck::Append
        );
        assert_eq!(
            append(&mut s, batch(1, 0, 3, 2, 3)).unwrap(),
            BatchCheck::Append
        );
        assert_eq!(
            append(&mut s, batch(1, 0, 0, 3, 99)).unwrap(),
            BatchCheck::Duplicate(BatchMetadata {
                first_sequence: 0,
                last_sequence: 2,
                first_offset: 0,
                last_offset: 2
            })
        );
        assert_eq!(
            append(&mut s, batch(1, 0, 7, 1, 5))
                .unwrap_err()
                .error_code()
                .code(),
            45
        );
        assert_eq!(
            append(&mut s, batch(1, 1, 3, 1, 5))
                .unwrap_err()
                .error_code()
                .code(),
            45
        );
        assert_eq!(
            append(&mut s, batch(1, 1, 0, 1, 5)).unwrap(),
            BatchCheck::Append
        );
        assert_eq!(
            append(&mut s, batch(1, 0, 5, 1, 6))
                .unwrap_err()
                .error_code()
                .code(),
            47
        );
        // Unknown producers start anywhere (Kafka since 2.5).
        assert_eq!(
            append(&mut s, batch(2, 0, 40, 1, 6)).unwrap(),
            BatchCheck::Append
        );
        // Only the last five batches are remembered.
        for i in 0..6 {
            append(&mut s, batch(3, 0, i, 1, 10 + i64::from(i))).unwrap();
        }
        assert_eq!(s.producer(3).unwrap().batches.len(), BATCHES_PER_PRODUCER);
        assert_eq!(
            append(&mut s, batch(3, 0, 0, 1, 20))
                .unwrap_err()
                .error_code()
                .code(),
            45
        );
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        let mut s = ProducerStateManager::new();
        append(&mut s, batch(1, 0, 0, 1, 0)).unwrap();
        s.producers
            .get_mut(&1)
            .unwrap()
            .batches
            .back_mut()
            .unwrap()
            .last_sequence = i32::MAX;
        assert_eq!(
            append(&mut s, batch(1, 0, 0, 1, 1)).unwrap(),
            BatchCheck::Append
        );
    }

    #[test]
    fn transactions_hold_the_stable_offset() {
        let mut s = ProducerStateManager::new();
        let mut b = batch(1, 0, 0, 2, 10);
        b.transactional = true;
        append(&mut s, b).unwrap();
        assert_eq!(s.first_unstable_offset(100), Some(10));
        assert_eq!(s.open_transactions(), vec![(1, 10)]);
        let mut a = s.begin(0);
        let done = a.marker(1, 0, 3, false, 12, true).unwrap();
        assert_eq!(
            done,
            Some(CompletedTxn {
                producer_id: 1,
                first_offset: 10,
                last_offset: 12,
                aborted: true
            })
        );
        let u = a.into_updates();
        s.apply(u);
        assert_eq!(
            s.first_unstable_offset(12),
            Some(10),
            "marker not yet visible"
        );
        assert_eq!(s.first_unstable_offset(13), None);
        s.prune_stable(13);
        assert!(s.unstable.is_empty());
        // A fenced coordinator and an old epoch are refused.
        let mut a = s.begin(0);
        assert_eq!(
            a.marker(1, 0, 2, true, 13, true)
                .unwrap_err()
                .error_code()
                .code(),
            52
        );
        assert_eq!(
            a.marker(1, -1, 3, true, 13, true)
                .unwrap_err()
                .error_code()
                .code(),
            47
        );
    }

    #[test]
    fn snapshot_round_trips_and_detects_damage() {
        let mut s = ProducerStateManager::new();
        append(&mut s, batch(1, 2, 0, 3, 0)).unwrap();
        let mut b = batch(9, 0, 0, 1, 3);
        b.transactional = true;
        append(&mut s, b).unwrap();
        let bytes = s.encode_snapshot(4);
        let (offset, back) = ProducerStateManager::decode_snapshot(&bytes).unwrap();
        assert_eq!(offset, 4);
        assert_eq!(back, s);
        let mut damaged = bytes.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        assert_eq!(
            ProducerStateManager::decode_snapshot(&damaged),
            Err(SnapshotError::Crc)
        );
        assert_eq!(
            ProducerStateManager::decode_snapshot(&bytes[..3]),
            Err(SnapshotError::Truncated)
        );
    }

    #[test]
    fn expiry_keeps_open_transactions() {
        let mut s = ProducerStateManager::new();
        append(&mut s, batch(1, 0, 0, 1, 0)).unwrap();
        let mut b = batch(2, 0, 0, 1, 1);
        b.transactional = true;
        append(&mut s, b).unwrap();
        assert_eq!(s.remove_expired(10, 10), 1);
        assert!(s.producer(1).is_none() && s.producer(2).is_some());
    }

    #[test]
    fn marker_records_round_trip() {
        let (key, value) = marker_record(true, 7);
        assert_eq!(parse_marker_key(&key), Some(true));
        assert_eq!(parse_marker_value(&value), Some(7));
        let (key, _) = marker_record(false, 7);
        assert_eq!(parse_marker_key(&key), Some(false));
        assert_eq!(parse_marker_key(&[0, 1, 0, 0]), None);
        assert_eq!(parse_marker_key(&[0]), None);
    }
}

//! The durable state of a share-partition, as `__share_group_state` keeps
//! it: the start offset, and the state and delivery count of every offset
//! of the window, in runs. Acquired records are kept as available (a lock
//! does not outlive its leader), with their delivery count.
//!
//! Each write is the whole state (the topic is compacted: the newest state
//! of a key is all a new leader reads). A write carries the partition
//! leader's epoch, the state epoch it was read at and a sequence number,
//! so that the share coordinator refuses a stale leader's write (a lower
//! leader epoch), a write made before an admin reset of the state (a
//! lower state epoch: AlterShareGroupOffsets, DeleteShareGroupOffsets) and
//! a write overtaken by a newer one (the same epochs, a lower sequence).
//! A reset state with start offset -1 holds nothing: the share-partition
//! starts again by `share.auto.offset.reset`.
//!
//! Encodings (big-endian, version byte first):
//! - key (version 0): group (u16 length + UTF-8), topic id (16 bytes),
//!   partition (i32);
//! - value (version 1; version 0 lacks the state epoch, read as 0): leader
//!   epoch (i32), sequence (i32), state epoch (i32), start offset (i64),
//!   runs (u32 count, then each: first offset i64, last offset i64, state
//!   u8 as Kafka's `RecordState` numbers (0 available, 2 acknowledged, 4
//!   archived), delivery count i16).

use super::partition::{SharePartition, Slot, State};
use std::collections::BTreeMap;
use thiserror::Error;

/// Why bytes are not a share state key or value.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum StateError {
    /// Cut short, or a length past the end.
    #[error("share state record truncated")]
    Truncated,
    /// A version this broker does not know.
    #[error("share state record version {0} is unknown")]
    Version(u8),
    /// A state number Kafka does not define for stored records.
    #[error("share state record holds an unknown record state {0}")]
    RecordState(u8),
    /// The group id is not UTF-8.
    #[error("share state key's group id is not UTF-8")]
    Utf8,
}

/// Which share-partition a state belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShareKey {
    /// Share group.
    pub group: String,
    /// Topic id.
    pub topic_id: [u8; 16],
    /// Partition.
    pub partition: i32,
}

impl ShareKey {
    /// The key of `group`'s share-partition of partition `partition` of
    /// topic `topic_id`.
    pub fn new(group: impl Into<String>, topic_id: [u8; 16], partition: i32) -> Self {
        Self {
            group: group.into(),
            topic_id,
            partition,
        }
    }
}

/// One run of offsets with the same state and delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateRun {
    /// First offset.
    pub first_offset: i64,
    /// Last offset.
    pub last_offset: i64,
    /// Kafka's `RecordState` number: 0 available, 2 acknowledged, 4 archived.
    pub state: u8,
    /// Deliveries so far.
    pub delivery_count: i16,
}

/// A share-partition's durable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareSnapshot {
    /// The partition leader's epoch when it wrote this.
    pub leader_epoch: i32,
    /// Orders one leader's writes (a new leader continues from the last);
    /// on the wire, a tagged field of rill's.
    pub sequence: i32,
    /// Raised by each admin reset of the state (Kafka's `state_epoch`).
    pub state_epoch: i32,
    /// The share-partition start offset.
    pub start_offset: i64,
    /// The window's offsets, in runs, in order.
    pub runs: Vec<StateRun>,
}

/// The value layout written.
const VALUE_VERSION: u8 = 1;

const AVAILABLE: u8 = 0;
const ACKNOWLEDGED: u8 = 2;
const ARCHIVED: u8 = 4;

impl SharePartition {
    /// The durable state now, stamped with `leader_epoch` and `sequence`
    /// (state epoch 0: the owner stamps its own).
    pub fn snapshot(&self, leader_epoch: i32, sequence: i32) -> ShareSnapshot {
        let mut runs: Vec<StateRun> = Vec::new();
        for (&offset, slot) in self.slots() {
            let state = match slot.state {
                State::Available | State::Acquired { .. } => AVAILABLE,
                State::Acknowledged => ACKNOWLEDGED,
                State::Archived => ARCHIVED,
            };
            match runs.last_mut() {
                Some(run)
                    if run.last_offset + 1 == offset
                        && run.state == state
                        && run.delivery_count == slot.delivery_count =>
                {
                    run.last_offset = offset
                }
                _ => runs.push(StateRun {
                    first_offset: offset,
                    last_offset: offset,
                    state,
                    delivery_count: slot.delivery_count,
                }),
            }
        }
        ShareSnapshot {
            leader_epoch,
            sequence,
            state_epoch: 0,
            start_offset: self.start_offset(),
            runs,
        }
    }

    /// The share-partition a snapshot describes (nothing acquired).
    pub fn restore(snapshot: &ShareSnapshot) -> Result<SharePartition, StateError> {
        let mut slots = BTreeMap::new();
        for run in &snapshot.runs {
            let state = match run.state {
                AVAILABLE => State::Available,
                ACKNOWLEDGED => State::Acknowledged,
                ARCHIVED => State::Archived,
                other => return Err(StateError::RecordState(other)),
            };
            for offset in run.first_offset.max(snapshot.start_offset)..=run.last_offset {
                let slot = Slot {
                    state: state.clone(),
                    delivery_count: run.delivery_count,
                };
                slots.insert(offset, slot);
            }
        }
        Ok(SharePartition::from_slots(snapshot.start_offset, slots))
    }
}

impl ShareSnapshot {
    /// The state an admin reset leaves at `state_epoch`: the window empty
    /// from `start_offset`, or nothing at all (-1: the share-partition
    /// starts again by `share.auto.offset.reset`).
    pub fn reset(leader_epoch: i32, state_epoch: i32, start_offset: i64) -> Self {
        Self {
            leader_epoch,
            sequence: 0,
            state_epoch,
            start_offset: start_offset.max(-1),
            runs: Vec::new(),
        }
    }

    /// Whether it holds a state (not a reset to nothing).
    pub fn holds_state(&self) -> bool {
        self.start_offset >= 0
    }
}

/// The record key of `key`.
pub fn encode_key(key: &ShareKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 2 + key.group.len() + 16 + 4);
    out.push(0);
    let group = key.group.as_bytes();
    out.extend_from_slice(&(group.len().min(u16::MAX as usize) as u16).to_be_bytes());
    out.extend_from_slice(&group[..group.len().min(u16::MAX as usize)]);
    out.extend_from_slice(&key.topic_id);
    out.extend_from_slice(&key.partition.to_be_bytes());
    out
}

/// The record value of `snapshot`.
pub fn encode_value(snapshot: &ShareSnapshot) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 4 + 4 + 4 + 8 + 4 + snapshot.runs.len() * 19);
    out.push(VALUE_VERSION);
    out.extend_from_slice(&snapshot.leader_epoch.to_be_bytes());
    out.extend_from_slice(&snapshot.sequence.to_be_bytes());
    out.extend_from_slice(&snapshot.state_epoch.to_be_bytes());
    out.extend_from_slice(&snapshot.start_offset.to_be_bytes());
    out.extend_from_slice(&(snapshot.runs.len() as u32).to_be_bytes());
    for run in &snapshot.runs {
        out.extend_from_slice(&run.first_offset.to_be_bytes());
        out.extend_from_slice(&run.last_offset.to_be_bytes());
        out.push(run.state);
        out.extend_from_slice(&run.delivery_count.to_be_bytes());
    }
    out
}

/// A cursor over a record's bytes.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], StateError> {
        let (head, rest) = self.0.split_at_checked(N).ok_or(StateError::Truncated)?;
        self.0 = rest;
        head.try_into().map_err(|_| StateError::Truncated)
    }

    /// The version byte, if at most `newest`.
    fn version(&mut self, newest: u8) -> Result<u8, StateError> {
        match self.take::<1>()?[0] {
            version if version <= newest => Ok(version),
            other => Err(StateError::Version(other)),
        }
    }
}

/// The key a record key holds.
pub fn decode_key(bytes: &[u8]) -> Result<ShareKey, StateError> {
    let mut r = Reader(bytes);
    r.version(0)?;
    let length = u16::from_be_bytes(r.take()?) as usize;
    let (group, rest) = r.0.split_at_checked(length).ok_or(StateError::Truncated)?;
    r.0 = rest;
    let group = std::str::from_utf8(group)
        .map_err(|_| StateError::Utf8)?
        .to_owned();
    let topic_id = r.take::<16>()?;
    let partition = i32::from_be_bytes(r.take()?);
    Ok(ShareKey {
        group,
        topic_id,
        partition,
    })
}

/// The snapshot a record value holds.
pub fn decode_value(bytes: &[u8]) -> Result<ShareSnapshot, StateError> {
    let mut r = Reader(bytes);
    let version = r.version(VALUE_VERSION)?;
    let leader_epoch = i32::from_be_bytes(r.take()?);
    let sequence = i32::from_be_bytes(r.take()?);
    let state_epoch = match version {
        0 => 0,
        _ => i32::from_be_bytes(r.take()?),
    };
    let start_offset = i64::from_be_bytes(r.take()?);
    let count = u32::from_be_bytes(r.take()?) as usize;
    // Each run is 19 bytes: a count past what is left is a bad record.
    if count > r.0.len() / 19 {
        return Err(StateError::Truncated);
    }
    let mut runs = Vec::with_capacity(count);
    for _ in 0..count {
        runs.push(StateRun {
            first_offset: i64::from_be_bytes(r.take()?),
            last_offset: i64::from_be_bytes(r.take()?),
            state: r.take::<1>()?[0],
            delivery_count: i16::from_be_bytes(r.take()?),
        });
    }
    Ok(ShareSnapshot {
        leader_epoch,
        sequence,
        state_epoch,
        start_offset,
        runs,
    })
}

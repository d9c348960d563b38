//! One share-partition (KIP-932): which records of a topic partition a
//! share group has delivered, to whom, how often, and which are done.
//!
//! The window runs from the share-partition start offset (SPSO: every
//! offset below it is done) to the end offset (SPEO: offsets from it on
//! were never acquired). Each offset inside has a state:
//!
//! - *available*: may be acquired (again);
//! - *acquired* by one member until its lock runs out
//!   (`group.share.record.lock.duration.ms`);
//! - *acknowledged* (ACCEPT) or *archived* (REJECT, or a release or lock
//!   expiry once `group.share.delivery.count.limit` deliveries were
//!   made, or an offset with no record: a gap or a control batch).
//!
//! The start moves past every leading offset that is acknowledged or
//! archived. The window holds at most `max_in_flight` offsets
//! (`group.share.partition.max.record.locks`) before whole batches are
//! no longer taken on. A pure state machine: time comes in as `now_ms`.

use engine::ErrorCode;
use std::collections::BTreeMap;

/// How a member acknowledges a record (the wire's `AcknowledgeTypes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    /// An offset with no record (the client saw none there).
    Gap,
    /// Processed: never delivered again.
    Accept,
    /// Given back: delivered again, to any member.
    Release,
    /// Unprocessable: never delivered again.
    Reject,
}

impl AckType {
    /// From the wire's byte; `None` for a value Kafka does not define.
    pub fn from_wire(value: i8) -> Option<AckType> {
        match value {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release),
            3 => Some(AckType::Reject),
            _ => None,
        }
    }
}

/// The settings a share-partition runs with (group or broker configs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareSettings {
    /// `group.share.record.lock.duration.ms`.
    pub lock_duration_ms: i64,
    /// `group.share.delivery.count.limit`.
    pub delivery_limit: i16,
    /// `group.share.partition.max.record.locks`.
    pub max_in_flight: usize,
}

impl Default for ShareSettings {
    fn default() -> Self {
        Self {
            lock_duration_ms: 30_000,
            delivery_limit: 5,
            max_in_flight: 2_000,
        }
    }
}

/// One batch of the log, as the partition's reader found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSpan {
    /// Offset of its first record.
    pub first_offset: i64,
    /// Offset of its last record.
    pub last_offset: i64,
    /// A control batch (a transaction marker): never delivered.
    pub control: bool,
    /// Records of an aborted transaction, under read_committed: never
    /// delivered.
    pub aborted: bool,
}

/// Offsets acquired by one fetch, with how many times they have been
/// delivered (this delivery included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRange {
    /// First offset.
    pub first_offset: i64,
    /// Last offset.
    pub last_offset: i64,
    /// Deliveries so far, this one included.
    pub delivery_count: i16,
}

/// The state of one offset of the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum State {
    Available,
    Acquired { member: String, deadline_ms: i64 },
    Acknowledged,
    Archived,
}

/// One offset of the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Slot {
    pub(super) state: State,
    pub(super) delivery_count: i16,
}

impl Slot {
    fn done(&self) -> bool {
        matches!(self.state, State::Acknowledged | State::Archived)
    }
}

/// The delivery state of one topic partition for one share group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartition {
    start_offset: i64,
    end_offset: i64,
    /// Every offset of `start_offset..end_offset`, with its state.
    slots: BTreeMap<i64, Slot>,
}

impl SharePartition {
    /// A share-partition whose first record to deliver is at `start_offset`.
    pub fn new(start_offset: i64) -> Self {
        Self {
            start_offset,
            end_offset: start_offset,
            slots: BTreeMap::new(),
        }
    }

    /// A share-partition of `slots` from `start_offset` (a restored state):
    /// offsets missing between start and the last are archived (no record).
    pub(super) fn from_slots(start_offset: i64, mut slots: BTreeMap<i64, Slot>) -> Self {
        let end_offset = slots.last_key_value().map_or(start_offset, |(&o, _)| o + 1);
        for offset in start_offset..end_offset {
            slots.entry(offset).or_insert(Slot {
                state: State::Archived,
                delivery_count: 0,
            });
        }
        let mut restored = Self {
            start_offset,
            end_offset,
            slots,
        };
        restored.advance_start();
        restored
    }

    /// Every offset of the window, with its state.
    pub(super) fn slots(&self) -> &BTreeMap<i64, Slot> {
        &self.slots
    }

    /// The share-partition start offset (SPSO).
    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// The share-partition end offset (SPEO).
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// Offsets between start and end (delivered and not yet done, or
    /// done behind one that is not).
    pub fn in_flight(&self) -> usize {
        self.slots.len()
    }

    /// Where a read for the next acquisition starts: the first available
    /// offset, or the end when none is.
    pub fn next_read_offset(&self) -> i64 {
        self.slots
            .iter()
            .find(|(_, slot)| slot.state == State::Available)
            .map_or(self.end_offset, |(&offset, _)| offset)
    }

    /// Whether a fetch could acquire anything without reading past the end.
    pub fn has_available(&self) -> bool {
        self.slots.values().any(|s| s.state == State::Available)
    }

    /// Whether the window has room for new records.
    pub fn has_room(&self, settings: &ShareSettings) -> bool {
        self.slots.len() < settings.max_in_flight
    }

    /// The log's start moved (retention, DeleteRecords) past the window's:
    /// what was below it is gone, so it counts as done.
    pub fn skip_to(&mut self, log_start_offset: i64) {
        if log_start_offset <= self.start_offset {
            return;
        }
        self.slots = self.slots.split_off(&log_start_offset);
        self.start_offset = log_start_offset;
        self.end_offset = self.end_offset.max(log_start_offset);
    }

    /// Acquires for `member` what `batches` (read from the log at
    /// [`Self::next_read_offset`]) hold that is available, then new
    /// records past the end, batch by batch until `max_records` are
    /// acquired or the window is full (a batch that starts in a full
    /// window is not taken on).
    ///
    /// `max_records` is a soft limit, as Kafka's ShareFetch v1 has it (its
    /// `batch_optimized` acquire mode): a batch once begun is acquired
    /// whole, so one acquisition ends at a batch boundary and may pass the
    /// limit. The client gets whole batches, each record of them acquired.
    /// Kafka 4.2's `record_limit` mode, which splits batches, is asked for
    /// with ShareFetch v2 only.
    pub fn acquire(
        &mut self,
        member: &str,
        batches: &[BatchSpan],
        max_records: usize,
        now_ms: i64,
        settings: &ShareSettings,
    ) -> Vec<AcquiredRange> {
        self.expire(now_ms, settings);
        let deadline_ms = now_ms + settings.lock_duration_ms;
        let mut acquired: Vec<(i64, i16)> = Vec::new();
        for batch in batches {
            if acquired.len() >= max_records {
                break;
            }
            if batch.last_offset >= self.end_offset && !self.has_room(settings) {
                break;
            }
            for offset in batch.first_offset.max(self.start_offset)..=batch.last_offset {
                if offset >= self.end_offset {
                    self.extend_to(offset);
                    let never = batch.control || batch.aborted;
                    let state = if never {
                        State::Archived
                    } else {
                        State::Available
                    };
                    self.slots.insert(
                        offset,
                        Slot {
                            state,
                            delivery_count: 0,
                        },
                    );
                    self.end_offset = offset + 1;
                }
                let Some(slot) = self.slots.get_mut(&offset) else {
                    continue;
                };
                if slot.state == State::Available {
                    slot.state = State::Acquired {
                        member: member.to_string(),
                        deadline_ms,
                    };
                    slot.delivery_count = slot.delivery_count.saturating_add(1);
                    acquired.push((offset, slot.delivery_count));
                }
            }
        }
        self.advance_start();
        coalesce(&acquired)
    }

    /// Offsets skipped between the end and `offset` (compacted away, or
    /// aborted under read_committed) hold no record: archived.
    fn extend_to(&mut self, offset: i64) {
        for gap in self.end_offset..offset {
            self.slots.insert(
                gap,
                Slot {
                    state: State::Archived,
                    delivery_count: 0,
                },
            );
        }
        self.end_offset = self.end_offset.max(offset);
    }

    /// Applies `member`'s acknowledgement of `first..=last`: one type for
    /// the whole range, or one per offset. Nothing changes unless every
    /// offset is acquired by `member` (INVALID_RECORD_STATE otherwise);
    /// call [`Self::expire`] first, so that a lock that ran out counts.
    pub fn acknowledge(
        &mut self,
        member: &str,
        (first_offset, last_offset): (i64, i64),
        types: &[AckType],
        settings: &ShareSettings,
    ) -> Result<(), ErrorCode> {
        let count = last_offset - first_offset + 1;
        let per_offset = types.len() > 1;
        if count <= 0 || types.is_empty() || per_offset && types.len() as i64 != count {
            return Err(ErrorCode::InvalidRequest);
        }
        let held = (first_offset..=last_offset).all(|offset| {
            matches!(
                self.slots.get(&offset).map(|s| &s.state),
                Some(State::Acquired { member: owner, .. }) if owner == member
            )
        });
        if !held {
            return Err(ErrorCode::InvalidRecordState);
        }
        for (index, offset) in (first_offset..=last_offset).enumerate() {
            let ack = if per_offset { types[index] } else { types[0] };
            if let Some(slot) = self.slots.get_mut(&offset) {
                slot.state = match ack {
                    AckType::Accept => State::Acknowledged,
                    AckType::Gap | AckType::Reject => State::Archived,
                    AckType::Release => released(slot.delivery_count, settings),
                };
            }
        }
        self.advance_start();
        Ok(())
    }

    /// Gives back every record `member` holds (its share session ended).
    pub fn release_member(&mut self, member: &str, settings: &ShareSettings) {
        for slot in self.slots.values_mut() {
            if matches!(&slot.state, State::Acquired { member: owner, .. } if owner == member) {
                slot.state = released(slot.delivery_count, settings);
            }
        }
        self.advance_start();
    }

    /// Gives back the records whose lock ran out by `now_ms`.
    pub fn expire(&mut self, now_ms: i64, settings: &ShareSettings) {
        for slot in self.slots.values_mut() {
            if matches!(slot.state, State::Acquired { deadline_ms, .. } if deadline_ms <= now_ms) {
                slot.state = released(slot.delivery_count, settings);
            }
        }
        self.advance_start();
    }

    /// The earliest lock deadline, if any record is acquired.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.slots
            .values()
            .filter_map(|s| match s.state {
                State::Acquired { deadline_ms, .. } => Some(deadline_ms),
                _ => None,
            })
            .min()
    }

    /// Moves the start past every leading offset that is done.
    fn advance_start(&mut self) {
        while let Some(entry) = self.slots.first_entry() {
            if !entry.get().done() {
                break;
            }
            entry.remove();
        }
        self.start_offset = self
            .slots
            .first_key_value()
            .map_or(self.end_offset, |(&first, _)| first);
    }
}

/// What a record given back becomes: available again, or archived once
/// it was delivered `delivery_limit` times.
fn released(delivery_count: i16, settings: &ShareSettings) -> State {
    if delivery_count >= settings.delivery_limit {
        State::Archived
    } else {
        State::Available
    }
}

/// Contiguous offsets with the same delivery count, as ranges.
fn coalesce(acquired: &[(i64, i16)]) -> Vec<AcquiredRange> {
    let mut ranges: Vec<AcquiredRange> = Vec::new();
    for &(offset, delivery_count) in acquired {
        match ranges.last_mut() {
            Some(r) if r.last_offset + 1 == offset && r.delivery_count == delivery_count => {
                r.last_offset = offset;
            }
            _ => ranges.push(AcquiredRange {
                first_offset: offset,
                last_offset: offset,
                delivery_count,
            }),
        }
    }
    ranges
}

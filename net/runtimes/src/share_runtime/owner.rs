//! What a partition's owner does for share groups: acknowledge, release
//! and acquire records of the partitions it leads ([`ShareWork`]), and
//! wait until one of them has records to give ([`ShareWait`]).

use super::durable::{ensure_loaded, persist, with_state};
use crate::routing::missing_partition_error;
use crate::Shard;
use bytes::Bytes;
use coordinators::share::{AckType, AcquiredRange, BatchSpan, ShareAutoOffsetReset, ShareSettings};
use engine::log::ReadMode;
use engine::{ErrorCode, ReadData, TopicPartition};
use futures::future::{select, select_all, LocalBoxFuture};
use kernel::call::OwnerCall;
use std::ops::Range;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// One acknowledged range of offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    /// First offset.
    pub first_offset: i64,
    /// Last offset.
    pub last_offset: i64,
    /// One type for the range, or one per offset.
    pub types: Vec<AckType>,
}

/// A member's acknowledgements of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionAcks {
    /// Partition.
    pub tp: TopicPartition,
    /// The ranges.
    pub batches: Vec<AckBatch>,
}

/// What one partition gave a share fetch.
#[derive(Debug)]
pub struct ShareReadOutcome {
    /// Partition.
    pub tp: TopicPartition,
    /// Error code (the partition is not led here, say).
    pub error_code: ErrorCode,
    /// The batches that hold the acquired records.
    pub records: Option<Bytes>,
    /// The acquired offsets.
    pub acquired: Vec<AcquiredRange>,
    /// The partition's leader epoch here.
    pub leader_epoch: i32,
}

impl ShareReadOutcome {
    fn error(tp: TopicPartition, error_code: ErrorCode) -> Self {
        Self {
            tp,
            error_code,
            records: None,
            acquired: Vec::new(),
            leader_epoch: -1,
        }
    }
}

/// Who fetches, and how: the same for every owner of one share fetch.
#[derive(Debug, Clone)]
pub struct ShareParams {
    /// Share group.
    pub group: String,
    /// Member.
    pub member: String,
    /// Records to acquire at most (whole batches may go past it).
    pub max_records: usize,
    /// Bytes to read per partition at most.
    pub max_bytes: usize,
    /// `share.auto.offset.reset`: where a new share-partition starts.
    pub reset: ShareAutoOffsetReset,
    /// A share session opens: an idle share-partition is read again from
    /// its share coordinator, in case an admin reset it.
    pub revalidate: bool,
    /// `share.isolation.level=read_committed`: read up to the last stable
    /// offset, and never deliver an aborted transaction's records.
    pub read_committed: bool,
    /// The group's locks, attempt limit and window.
    pub settings: ShareSettings,
}

/// One owner's part of a share fetch or acknowledgement: acknowledgements
/// first, then releases, then acquisitions.
#[derive(Debug)]
pub struct ShareWork {
    /// Who fetches, and how.
    pub params: ShareParams,
    /// Acknowledgements.
    pub acks: Vec<PartitionAcks>,
    /// Partitions whose records held by the member go back.
    pub release: Vec<TopicPartition>,
    /// Partitions to acquire records of.
    pub reads: Vec<TopicPartition>,
}

/// The answer to a [`ShareWork`].
#[derive(Debug, Default)]
pub struct ShareWorkReply {
    /// Each acknowledged partition's outcome.
    pub acks: Vec<(TopicPartition, ErrorCode)>,
    /// Each read partition's outcome.
    pub reads: Vec<ShareReadOutcome>,
}

impl OwnerCall<crate::ShardRuntime> for ShareWork {
    type Reply = ShareWorkReply;

    async fn run(self, shard: Rc<Shard>) -> ShareWorkReply {
        let settings = self.params.settings;
        // Acknowledgements and releases change the states at once; their
        // state writes then run while the reads acquire, and the answer
        // waits for both (an acknowledgement counts once it is durable).
        let applied: Vec<(TopicPartition, ErrorCode)> = (self.acks.iter())
            .map(|acks| (acks.tp.clone(), self.acknowledge(&shard, acks, &settings)))
            .collect();
        for tp in &self.release {
            tracing::debug!(group = %self.params.group, member = %self.params.member, ?tp, "share records released");
            let _ = with_state(&shard, &self.params.group, tp, |state| {
                state.release_member(&self.params.member, &settings)
            });
        }
        let (acks, reads) = futures::join!(
            self.persist_acknowledged(&shard, applied),
            self.acquire_all(&shard, &settings)
        );
        ShareWorkReply { acks, reads }
    }
}

impl ShareWork {
    /// Writes the state of each partition whose acknowledgements applied:
    /// each partition's outcome, an acknowledgement failing with its write.
    async fn persist_acknowledged(
        &self,
        shard: &Rc<Shard>,
        applied: Vec<(TopicPartition, ErrorCode)>,
    ) -> Vec<(TopicPartition, ErrorCode)> {
        let mut outcomes = Vec::with_capacity(applied.len());
        for (tp, mut code) in applied {
            if code == ErrorCode::None {
                // Answered once durable: a new leader must not deliver
                // again what was accepted.
                code = (persist(shard, &self.params.group, &tp).await)
                    .err()
                    .unwrap_or(code);
            }
            tracing::debug!(group = %self.params.group, member = %self.params.member, ?tp, ?code, "share acknowledgement");
            outcomes.push((tp, code));
        }
        outcomes
    }

    /// Acquires on each read partition in turn, within `max_records` in all.
    async fn acquire_all(
        &self,
        shard: &Rc<Shard>,
        settings: &ShareSettings,
    ) -> Vec<ShareReadOutcome> {
        let mut budget = self.params.max_records;
        let mut reads = Vec::with_capacity(self.reads.len());
        for tp in &self.reads {
            let outcome = self.acquire(shard, tp, budget, settings).await;
            let count: i64 = (outcome.acquired.iter())
                .map(|r| r.last_offset - r.first_offset + 1)
                .sum();
            budget = budget.saturating_sub(count as usize);
            reads.push(outcome);
        }
        reads
    }

    fn acknowledge(
        &self,
        shard: &Shard,
        acks: &PartitionAcks,
        settings: &ShareSettings,
    ) -> ErrorCode {
        let now_ms = shard.now_ms();
        let outcome = with_state(shard, &self.params.group, &acks.tp, |state| {
            // A lock that ran out before its acknowledgement came took the
            // record back: the late acknowledgement is refused.
            state.expire(now_ms, settings);
            let mut code = ErrorCode::None;
            for batch in &acks.batches {
                let range = (batch.first_offset, batch.last_offset);
                if let Err(e) =
                    state.acknowledge(&self.params.member, range, &batch.types, settings)
                {
                    code = e;
                }
            }
            code
        });
        outcome.unwrap_or_else(|code| code)
    }

    /// Makes sure the group's share-partition of `tp` is held here; the
    /// read's answer when it cannot be.
    async fn loaded(&self, shard: &Rc<Shard>, tp: &TopicPartition) -> Result<(), ShareReadOutcome> {
        let params = &self.params;
        let revalidate = params.revalidate;
        match ensure_loaded(shard, &params.group, tp, params.reset, revalidate).await {
            Ok(()) => Ok(()),
            // The share coordinator moves or loads: nothing this time (the
            // client fetches again); librdkafka surfaces these to the
            // application as errors.
            Err(
                ErrorCode::CoordinatorNotAvailable
                | ErrorCode::CoordinatorLoadInProgress
                | ErrorCode::NotCoordinator,
            ) => Err(ShareReadOutcome::error(tp.clone(), ErrorCode::None)),
            Err(code) => Err(ShareReadOutcome::error(tp.clone(), code)),
        }
    }

    /// Reads from the first available offset and acquires what it can.
    async fn acquire(
        &self,
        shard: &Rc<Shard>,
        tp: &TopicPartition,
        max_records: usize,
        settings: &ShareSettings,
    ) -> ShareReadOutcome {
        if let Err(outcome) = self.loaded(shard, tp).await {
            return outcome;
        }
        let now_ms = shard.now_ms();
        let from = with_state(shard, &self.params.group, tp, |state| {
            state.expire(now_ms, settings);
            (state.has_available() || state.has_room(settings)).then(|| state.next_read_offset())
        });
        let from = match from {
            Ok(Some(from)) if max_records > 0 => from,
            Ok(_) => return ShareReadOutcome::error(tp.clone(), ErrorCode::None),
            Err(code) => return ShareReadOutcome::error(tp.clone(), code),
        };
        let Some(log) = shard.logs.get(tp) else {
            return ShareReadOutcome::error(tp.clone(), missing_partition_error(shard, tp));
        };
        let leader_epoch = log.leader_epoch();
        if from >= log.high_watermark() {
            return ShareReadOutcome {
                leader_epoch,
                ..ShareReadOutcome::error(tp.clone(), ErrorCode::None)
            };
        }
        let read = if self.params.read_committed {
            log.read_committed(from, self.params.max_bytes, ReadMode::Copy)
                .await
        } else {
            log.read(from, self.params.max_bytes, ReadMode::Copy).await
        };
        let (bytes, aborted) = match read {
            Ok(read) => match read.data {
                ReadData::Bytes(bytes) => (bytes, read.aborted_transactions.unwrap_or_default()),
                _ => (Bytes::new(), Vec::new()),
            },
            Err(e) if e.error_code() == ErrorCode::OffsetOutOfRange => {
                // The log start moved past the window: skip to it.
                let start = log.log_start_offset();
                let _ = with_state(shard, &self.params.group, tp, |state| state.skip_to(start));
                (Bytes::new(), Vec::new())
            }
            Err(e) => return ShareReadOutcome::error(tp.clone(), e.error_code()),
        };
        let spans = batch_spans(&bytes, &aborted);
        let now_ms = shard.now_ms();
        let acquired = with_state(shard, &self.params.group, tp, |state| {
            let batches: Vec<BatchSpan> = spans.iter().map(|(span, _)| *span).collect();
            state.acquire(&self.params.member, &batches, max_records, now_ms, settings)
        })
        .unwrap_or_default();
        if !acquired.is_empty() {
            tracing::debug!(group = %self.params.group, member = %self.params.member, ?tp, ?acquired, "share records acquired");
        }
        let records = covering(&bytes, &spans, &acquired);
        ShareReadOutcome {
            tp: tp.clone(),
            error_code: ErrorCode::None,
            records,
            acquired,
            leader_epoch,
        }
    }
}

/// The batches in `bytes` (whole ones), with their byte ranges. A
/// transactional batch is aborted when an aborted transaction of its
/// producer (`aborted`: producer id, first offset, as a read_committed
/// read lists them) began at or before it and its abort marker is not
/// passed yet: the consumer's rule in Kafka's fetcher.
fn batch_spans(bytes: &[u8], aborted: &[(i64, i64)]) -> Vec<(BatchSpan, Range<usize>)> {
    let mut pending: Vec<(i64, i64)> = aborted.to_vec();
    pending.sort_by_key(|&(_, first_offset)| first_offset);
    let mut open: std::collections::HashSet<i64> = std::collections::HashSet::new();
    let mut next = 0;
    let mut spans = Vec::new();
    for (header, range) in engine::batch::batches(bytes).map_while(Result::ok) {
        while next < pending.len() && pending[next].1 <= header.last_offset() {
            open.insert(pending[next].0);
            next += 1;
        }
        let transactional = header.is_transactional();
        let in_aborted = transactional && open.contains(&header.producer_id);
        if header.is_control() && transactional {
            // A marker ends its producer's transaction either way.
            open.remove(&header.producer_id);
        }
        let span = BatchSpan {
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            control: header.is_control(),
            aborted: in_aborted && !header.is_control(),
        };
        spans.push((span, range));
    }
    spans
}

/// The bytes from the first batch holding an acquired offset to the last.
fn covering(
    bytes: &Bytes,
    spans: &[(BatchSpan, Range<usize>)],
    acquired: &[AcquiredRange],
) -> Option<Bytes> {
    let holds = |span: &BatchSpan| {
        acquired
            .iter()
            .any(|r| r.first_offset <= span.last_offset && span.first_offset <= r.last_offset)
    };
    let first = spans.iter().find(|(span, _)| holds(span))?;
    let last = spans.iter().rev().find(|(span, _)| holds(span))?;
    Some(bytes.slice(first.1.start..last.1.end))
}

/// How long a fetch waits before it tries again to load a share-partition
/// whose share coordinator could not answer.
const STATE_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Waits until one of `tps` has records the group could acquire (new
/// data, or records given back), a lock runs out, or the deadline.
/// Changes nothing, so it is dropped when the asker stops waiting.
#[derive(Debug)]
pub struct ShareWait {
    /// Share group.
    pub group: String,
    /// Partitions, all this shard's.
    pub tps: Vec<TopicPartition>,
    /// When to give up.
    pub deadline: Instant,
}

impl OwnerCall<crate::ShardRuntime> for ShareWait {
    type Reply = ();
    const CANCEL_WHEN_ASKER_GONE: bool = true;

    async fn run(self, shard: Rc<Shard>) {
        let settings = shard.config.group.share.records;
        let now_ms = shard.now_ms();
        let mut waits: Vec<LocalBoxFuture<'static, ()>> = Vec::new();
        let mut wake_ms = i64::MAX;
        for tp in &self.tps {
            let (Some(log), Some(owned)) = (
                shard.logs.get(tp),
                shard
                    .runtime()
                    .share
                    .partitions
                    .borrow()
                    .get(&(self.group.clone(), tp.clone()))
                    .map(|o| {
                        (
                            o.state.has_available(),
                            o.state.has_room(&settings),
                            o.state.end_offset(),
                            o.state.next_deadline_ms(),
                        )
                    }),
            ) else {
                if shard.logs.get(tp).is_none() {
                    // Gone: the next acquisition round answers the error.
                    return;
                }
                // Its state is not loaded yet (its share coordinator moves
                // or loads): a short pause before the next round tries.
                let pause = self.deadline.saturating_duration_since(Instant::now());
                glommio::timer::sleep(pause.min(STATE_RETRY_PAUSE)).await;
                return;
            };
            let (available, room, end_offset, deadline_ms) = owned;
            if available {
                return;
            }
            if room {
                waits.push(Box::pin(async move { log.wait_for_data(end_offset).await }));
            }
            wake_ms = wake_ms.min(deadline_ms.unwrap_or(i64::MAX));
        }
        let until_lock = Duration::from_millis(wake_ms.saturating_sub(now_ms).max(0) as u64);
        let left = self
            .deadline
            .saturating_duration_since(Instant::now())
            .min(until_lock);
        if left.is_zero() {
            return;
        }
        let timer = glommio::timer::sleep(left);
        futures::pin_mut!(timer);
        if waits.is_empty() {
            timer.await;
        } else {
            let _ = select(select_all(waits), timer).await;
        }
    }
}

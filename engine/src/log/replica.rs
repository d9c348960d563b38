//! The storage half of partition replication, Kafka-style.
//!
//! Why this file: with more than one replica, a partition's log plays two
//! roles the single-node log never had to.
//! - A **follower** copies its leader's log byte for byte
//!   ([`PartitionLog::append_replicated`]): the batches keep the base
//!   offsets, partition leader epochs and timestamps the leader wrote, so
//!   that every replica holds the same log and a leader-epoch lookup
//!   (KIP-101) finds the same history everywhere. The producer state and the
//!   leader-epoch cache follow the copied batches as they followed the
//!   leader's appends. A follower acknowledges only what it made durable:
//!   its fetcher calls [`PartitionLog::wait_durable`] on the last offset
//!   before it reports its new log end to the leader.
//! - A **leader** shows its readers only what the in-sync replicas have
//!   (the high watermark): the replication layer caps the high watermark
//!   with [`PartitionLog::set_replication_limit`], and acks=all produce
//!   requests wait in [`PartitionLog::wait_high_watermark_past`].
//!
//! The high watermark rule. Readers see `max(hw, min(published, limit))`,
//! recomputed whenever either moves, where `published` is what this replica
//! has made readable (durable under `fsync`, written under `interval` and
//! `os`) and `limit` the last cap set:
//! - `None` (the default: a single replica) is no cap: the high watermark
//!   is `published`, exactly as before replication.
//! - `Some(limit)`: the leader's ISR high watermark on a leader, the
//!   leader's high watermark on a follower (a follower's is then Kafka's
//!   `min(leader HW, own LEO)`, with its durable end as its LEO).
//! - The visible high watermark never moves back, whatever the cap does
//!   (Kafka's leader rule: a consumer never sees an offset disappear).
//!   Only a truncation lowers it ([`PartitionLog::truncate_to`]). A cap
//!   below it is accepted and holds it where it is until the cap passes it:
//!   a new leader whose ISR lags its log end, or a follower told an older
//!   leader's value, need no special call. A log opens with its high
//!   watermark at its log end (`open.rs`); the cap cannot hide what that
//!   already shows.

use super::append::{owned, Origin, Payload};
use super::epoch_cache::LeaderEpochCache;
use super::{AppendResult, PartitionLog, ReadMode, ReadResult};
use crate::config::FlushPolicy;
use crate::error::EngineError;
use crate::types::{LeaderEpoch, Offset};

impl PartitionLog {
    /// A follower's append of batches fetched from its leader (one or more
    /// RecordBatch v2, data and control, any producers), kept exactly as
    /// the leader wrote them: base offsets, partition leader epochs and
    /// timestamps are not rewritten.
    ///
    /// Checked like a produce (framing, CRC32C, record counts; not
    /// `max.message.bytes`, which the leader already applied), and no batch
    /// may start below the log end or the previous batch's end: an overlap
    /// is [`EngineError::ReplicaOffsetMismatch`]. A gap is taken as it
    /// comes (Kafka's follower rule): the leader's compaction removed the
    /// offsets in it, and the log end moves past them. Either every batch is
    /// appended or none is, and a refused payload leaves no trace.
    ///
    /// Like an append, it rolls, indexes, records the producers (markers
    /// included, unchecked: the leader's log is the truth), starts a
    /// leader-epoch cache entry for each batch of a newer epoch than the
    /// cache's latest (durable before the batch is in the log), and queues
    /// the bytes for the flusher. The caller waits with
    /// [`PartitionLog::wait_durable`] on `last_offset` before acknowledging.
    pub fn append_replicated(&self, records: Vec<u8>) -> Result<AppendResult, EngineError> {
        self.append_inner(owned(records), Origin::Replica)
    }

    /// [`PartitionLog::append_replicated`] of a copy of `records` (a slice of
    /// a fetch response), placed for where it will lie in the segment file
    /// (`crate::placement`), so the appender writes it without a second
    /// copy.
    pub fn append_replicated_copy(&self, records: &[u8]) -> Result<AppendResult, EngineError> {
        let position = self.next_append_position();
        let placed = crate::placement::placed_copy(records, position);
        self.append_inner(Payload::Owned(placed), Origin::Replica)
    }

    /// Where the next append will start in the active segment's file
    /// (0 when there is none yet, as in a new segment).
    pub fn next_append_position(&self) -> u64 {
        let state = self.state.borrow();
        let active = state.segments.last();
        active.map_or(0, |segment| segment.meta.borrow().size_bytes)
    }

    /// A leader's read for a follower's fetch: like [`PartitionLog::read`]
    /// but up to what is published here rather than the high watermark
    /// (Kafka serves followers past it: that is how it moves). The result's
    /// `high_watermark` is still the capped one the follower must adopt.
    pub async fn read_replica(
        &self,
        offset: Offset,
        max_bytes: usize,
        mode: ReadMode,
    ) -> Result<ReadResult, EngineError> {
        let published = self.published_offset();
        Ok(self
            .read_bounded(offset, max_bytes, mode, published)
            .await?
            .0)
    }

    /// Caps the high watermark for replication (see the module doc for the
    /// rule): `None` for a single replica, `Some(offset)` for the ISR's (on
    /// a leader) or the leader's (on a follower) high watermark. The high
    /// watermark is recomputed at once, and waiters on it
    /// ([`PartitionLog::wait_for_data`],
    /// [`PartitionLog::wait_high_watermark_past`]) wake when it moves.
    pub fn set_replication_limit(&self, limit: Option<Offset>) {
        self.commit.borrow_mut().replication_limit = limit;
        self.raise_high_watermark(self.published_offset());
        self.check_offsets();
    }

    /// The replication cap in force (`None`: a single replica).
    pub fn replication_limit(&self) -> Option<Offset> {
        self.commit.borrow().replication_limit
    }

    /// Everything below this offset is readable on this replica: what the
    /// high watermark would be without a replication cap.
    ///
    /// Why the flush policy's offset is exactly that: a round becomes
    /// readable in the same synchronous step that moves `durable` (under
    /// `fsync`) or `written` (otherwise), and a truncation lowers both, so no
    /// task ever sees them apart.
    pub fn published_offset(&self) -> Offset {
        match self.ctx.config.flush_policy {
            FlushPolicy::Fsync => self.durable.get(),
            FlushPolicy::Interval | FlushPolicy::Os => self.written.get(),
        }
    }

    /// Resolves once the high watermark is past `offset` (an acks=all
    /// produce whose last offset is `offset` is then committed). Ends with
    /// [`EngineError::Closed`] when the log closes and with an I/O error
    /// when its disk writes fail, like [`PartitionLog::wait_durable`]. A
    /// truncation that lowers the high watermark does not end the wait: the
    /// caller's timeout does.
    pub async fn wait_high_watermark_past(&self, offset: Offset) -> Result<(), EngineError> {
        // The high watermark's watch is never failed (long polls only wake
        // on it), so a disk failure is taken from `durable`, whose wait past
        // `Offset::MAX` can only end that way or by a close.
        let reached = self.wait_on(&self.high_watermark, offset);
        let failed = self.wait_on(&self.durable, Offset::MAX);
        futures_lite::future::or(reached, failed).await
    }

    /// Refuses a replicated payload whose batches, as `(base_offset,
    /// last_offset)`, start below `log_end_offset` or below the previous
    /// batch's end (gaps, left by the leader's compaction, are fine).
    pub(super) fn check_replica_offsets(
        &self,
        log_end_offset: Offset,
        batches: impl Iterator<Item = (Offset, Offset)>,
    ) -> Result<(), EngineError> {
        let mut expected = log_end_offset;
        for (base_offset, last_offset) in batches {
            if base_offset < expected || last_offset < base_offset {
                return Err(EngineError::ReplicaOffsetMismatch {
                    expected,
                    got: base_offset,
                });
            }
            expected = last_offset + 1;
        }
        Ok(())
    }

    /// Before a replicated payload whose batches, as `(partition leader
    /// epoch, base_offset)`, are appended: each batch of an epoch newer than
    /// the cache's latest starts an entry (Kafka's follower rule; `-1`
    /// starts none). The new entries are made durable in one checkpoint
    /// write before any batch is in the log; nothing changes when the write
    /// fails (the append is then refused).
    pub(super) fn note_replicated_epochs(
        &self,
        batches: impl Iterator<Item = (LeaderEpoch, Offset)>,
    ) -> Result<(), EngineError> {
        let mut next: Option<LeaderEpochCache> = None;
        for (epoch, base_offset) in batches {
            let latest = match &next {
                Some(cache) => cache.latest_epoch(),
                None => self.epochs.borrow().latest_epoch(),
            };
            if epoch < 0 || latest.is_some_and(|latest| epoch <= latest) {
                continue;
            }
            let cache = next.get_or_insert_with(|| self.epochs.borrow().clone());
            if let Err(e) = cache.assign(epoch, base_offset) {
                // Unreachable with a newer epoch at a growing offset; refuse, not panic.
                return Err(EngineError::io(
                    self.dir.join(super::LEADER_EPOCH_CHECKPOINT_FILE_NAME),
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()),
                ));
            }
        }
        if let Some(next) = next {
            super::epochs::write_checkpoint(&self.dir, &next)?;
            *self.epochs.borrow_mut() = next;
        }
        Ok(())
    }
}

//! The per-shard transaction coordinator: the transitions of Kafka's
//! `TransactionCoordinator`, pure. Each step answers with what to persist;
//! nothing changes until the runtime hands the persisted record back through
//! [`TxnCoordinator::apply`].
//!
//! Fencing: a producer names itself by `(producer_id, producer_epoch)`. A
//! different id is `INVALID_PRODUCER_ID_MAPPING`; a different epoch is
//! `PRODUCER_FENCED` (the handlers turn it into `INVALID_PRODUCER_EPOCH` for
//! versions older than KIP-588). Re-initializing a transactional id and
//! aborting a transaction on timeout both bump the epoch, so the old
//! producer — a zombie — is fenced on its next request, and its late
//! produce requests are refused by the partitions (the markers carry the new
//! epoch).
//!
//! Offsets sent with TxnOffsetCommit are held here until the transaction
//! ends: on commit the runtime forwards them to the group coordinator, on
//! abort they are dropped, so OffsetFetch sees them only after a commit.
//! They are durable: each TxnOffsetCommit persists the transaction's whole
//! set ([`PendingOffsets`], a rill record on `__transaction_state`) before
//! it is answered, and the replay restores it, so a crash anywhere between
//! TxnOffsetCommit and the Complete state loses no offsets — a transaction
//! found in PrepareCommit after a restart forwards them before it completes.
//! (Kafka instead writes them to `__consumer_offsets` at once and lets the
//! COMMIT marker there apply them; keeping them with the transaction keeps
//! the group core unaware of transactions.)

use super::{Tv2Fields, TxnMetadata, TxnState, TRANSACTION_VERSION_2, TXN_MAX_TIMEOUT_MS};
use engine::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

/// One offset committed inside a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The next offset to consume.
    pub offset: i64,
    /// Leader epoch of the last consumed record, -1 when unknown.
    pub leader_epoch: i32,
    /// Client metadata.
    pub metadata: Option<String>,
}

/// The offsets of one transaction, by group, with the transaction they
/// belong to: `(producer_id, producer_epoch, start_ms)` of its metadata, so
/// a record left over from an earlier transaction is recognized and dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOffsets {
    /// The transaction's producer id.
    pub producer_id: i64,
    /// The transaction's producer epoch.
    pub producer_epoch: i16,
    /// The transaction's start time ([`TxnMetadata::start_ms`]).
    pub start_ms: i64,
    /// Group → offsets, one per partition.
    pub groups: BTreeMap<String, Vec<PendingOffset>>,
}

impl PendingOffsets {
    /// Whether these offsets belong to the transaction `meta` describes.
    /// A transaction being ended may carry the next epoch already (the
    /// epoch bump of transactions v2, or an abort that fences).
    fn belongs_to(&self, meta: &TxnMetadata) -> bool {
        let epoch_matches = self.producer_epoch == meta.producer_epoch
            || (meta.state.is_prepare()
                && self.producer_epoch.checked_add(1) == Some(meta.producer_epoch));
        self.producer_id == meta.producer_id && epoch_matches && self.start_ms == meta.start_ms
    }
}

/// What InitProducerId has to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitStep {
    /// Persist this (state Empty) and answer with its id and epoch.
    Ready(TxnMetadata),
    /// A transaction is ongoing: persist this PrepareAbort (epoch bumped, so
    /// the old producer is fenced), write the abort markers, complete it,
    /// then run InitProducerId again.
    AbortFirst(TxnMetadata),
}

/// What EndTxn has to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndStep {
    /// A retry of an EndTxn already completed: answer success.
    AlreadyDone,
    /// Persist this Prepare state, write the markers, then persist
    /// [`TxnCoordinator::complete`] of it.
    Prepare(TxnMetadata),
}

/// The transactions of one shard's `__transaction_state` partitions.
#[derive(Debug, Default)]
pub struct TxnCoordinator {
    txns: BTreeMap<String, TxnMetadata>,
    /// Offsets of ongoing and committing transactions, by id.
    pending_offsets: BTreeMap<String, PendingOffsets>,
}

impl TxnCoordinator {
    /// An empty coordinator.
    pub fn new() -> Self {
        Self::default()
    }

    /// A persisted (or replayed) record: the new state, or `None` for a tombstone.
    pub fn apply(&mut self, transactional_id: &str, meta: Option<TxnMetadata>) {
        match meta {
            Some(meta) => {
                if !matches!(meta.state, TxnState::Ongoing) {
                    // Pending offsets live only as long as the transaction.
                    if !meta.state.is_prepare() {
                        self.pending_offsets.remove(transactional_id);
                    }
                }
                self.txns.insert(transactional_id.to_string(), meta);
            }
            None => {
                self.txns.remove(transactional_id);
                self.pending_offsets.remove(transactional_id);
            }
        }
    }

    /// The state of a transactional id.
    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id)
    }

    /// Every transactional id with its state, by id.
    pub fn all(&self) -> impl Iterator<Item = (&String, &TxnMetadata)> {
        self.txns.iter()
    }

    /// InitProducerId with a transactional id. `new_producer_id` is used when
    /// the id is new or its epoch is exhausted. `expected` is the KIP-360
    /// `(producer_id, epoch)` a producer sends to bump its own epoch.
    pub fn init_producer_id(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        new_producer_id: i64,
        now_ms: i64,
    ) -> Result<InitStep, ErrorCode> {
        if timeout_ms <= 0 || timeout_ms > TXN_MAX_TIMEOUT_MS {
            return Err(ErrorCode::InvalidTransactionTimeout);
        }
        let Some(current) = self.txns.get(transactional_id) else {
            return Ok(InitStep::Ready(TxnMetadata {
                producer_id: new_producer_id,
                producer_epoch: 0,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                last_update_ms: now_ms,
                start_ms: -1,
                tv2: Tv2Fields::default(),
            }));
        };
        if let Some((producer_id, epoch)) = expected {
            // KIP-360: only the current producer may bump its own epoch.
            if producer_id != current.producer_id || epoch != current.producer_epoch {
                return Err(ErrorCode::ProducerFenced);
            }
        }
        match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                Err(ErrorCode::ConcurrentTransactions)
            }
            TxnState::Ongoing => {
                let mut abort = self.bumped(current, now_ms);
                abort.state = TxnState::PrepareAbort;
                Ok(InitStep::AbortFirst(abort))
            }
            TxnState::Empty
            | TxnState::CompleteCommit
            | TxnState::CompleteAbort
            | TxnState::Dead => {
                let mut ready = self.bumped(current, now_ms);
                if ready.producer_epoch == current.producer_epoch {
                    // Epoch exhausted: a new producer id restarts at 0.
                    ready.producer_id = new_producer_id;
                    ready.producer_epoch = 0;
                }
                ready.state = TxnState::Empty;
                ready.timeout_ms = timeout_ms;
                ready.partitions.clear();
                ready.start_ms = -1;
                Ok(InitStep::Ready(ready))
            }
        }
    }

    /// `current` with the epoch one higher (unchanged at the limit).
    fn bumped(&self, current: &TxnMetadata, now_ms: i64) -> TxnMetadata {
        let mut next = current.clone();
        if current.producer_epoch < i16::MAX - 1 {
            next.producer_epoch = current.producer_epoch + 1;
        }
        next.last_update_ms = now_ms;
        next
    }

    /// Checks that `(producer_id, epoch)` is the current producer of an id.
    fn check_producer(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&TxnMetadata, ErrorCode> {
        let current = self
            .txns
            .get(transactional_id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if current.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if current.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        Ok(current)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn with the group's offsets
    /// partition): the Ongoing state to persist, or `None` when every
    /// partition is already in the transaction.
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> Result<Option<TxnMetadata>, ErrorCode> {
        let current = self.check_producer(transactional_id, producer_id, producer_epoch)?;
        if current.state.is_prepare() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        if current.state == TxnState::Dead {
            return Err(ErrorCode::InvalidTxnState);
        }
        let ongoing = current.state == TxnState::Ongoing;
        if ongoing && partitions.iter().all(|p| current.partitions.contains(p)) {
            return Ok(None);
        }
        let mut next = current.clone();
        if !ongoing {
            next.partitions.clear();
            next.start_ms = now_ms;
        }
        next.state = TxnState::Ongoing;
        next.partitions.extend(partitions.iter().cloned());
        next.last_update_ms = now_ms;
        Ok(Some(next))
    }

    /// [`Self::add_partitions`] for a client of `client_version`: a
    /// transaction that a client of transactions v2 starts (its partition
    /// leader adding for it) records the version, so that after a timeout
    /// aborts it under the next epoch, the client's own EndTxn is taken as
    /// the retry it is rather than fenced.
    pub fn add_partitions_as(
        &self,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        partitions: &[(String, i32)],
        client_version: i16,
        now_ms: i64,
    ) -> Result<Option<TxnMetadata>, ErrorCode> {
        let step = self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            now_ms,
        )?;
        Ok(step.map(|mut next| {
            if client_version >= TRANSACTION_VERSION_2 {
                next.tv2.client_version = client_version;
            }
            next
        }))
    }

    /// AddPartitionsToTxn v4+ `verify_only`: whether each partition is in
    /// the ongoing transaction.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, ErrorCode> {
        let current = self.check_producer(transactional_id, producer_id, producer_epoch)?;
        Ok(partitions
            .iter()
            .map(|p| current.state == TxnState::Ongoing && current.partitions.contains(p))
            .collect())
    }

    /// TxnOffsetCommit: the transaction's whole set of offsets with these
    /// added, to persist and then hand to [`Self::apply_offsets`].
    pub fn add_offsets(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group: &str,
        offsets: Vec<PendingOffset>,
    ) -> Result<PendingOffsets, ErrorCode> {
        let current = self.check_producer(transactional_id, producer_id, producer_epoch)?;
        if current.state != TxnState::Ongoing {
            return Err(ErrorCode::InvalidTxnState);
        }
        let mut next = match self.pending_offsets.get(transactional_id) {
            Some(p) if p.belongs_to(current) => p.clone(),
            _ => PendingOffsets {
                producer_id,
                producer_epoch,
                start_ms: current.start_ms,
                groups: BTreeMap::new(),
            },
        };
        let pending = next.groups.entry(group.to_string()).or_default();
        for offset in offsets {
            // A later commit of the same partition replaces the earlier one.
            pending.retain(|p| !(p.topic == offset.topic && p.partition == offset.partition));
            pending.push(offset);
        }
        Ok(next)
    }

    /// A persisted (or replayed) pending-offsets record, `None` for its
    /// tombstone.
    pub fn apply_offsets(&mut self, transactional_id: &str, pending: Option<PendingOffsets>) {
        match pending {
            Some(p) => {
                self.pending_offsets.insert(transactional_id.to_string(), p);
            }
            None => {
                self.pending_offsets.remove(transactional_id);
            }
        }
    }

    /// The offsets of a transaction, if it has any.
    pub fn offsets(&self, transactional_id: &str) -> Option<&PendingOffsets> {
        let pending = self.pending_offsets.get(transactional_id)?;
        let meta = self.txns.get(transactional_id)?;
        pending.belongs_to(meta).then_some(pending)
    }

    /// Forgets every id `unloaded` names (those of a `__transaction_state`
    /// partition this coordinator no longer leads): its state now lives
    /// with the partition's new leader, and nothing here may act on it.
    pub fn unload(&mut self, unloaded: impl Fn(&str) -> bool) {
        self.txns.retain(|id, _| !unloaded(id));
        self.pending_offsets.retain(|id, _| !unloaded(id));
    }

    /// After a replay: drops pending offsets that do not belong to the
    /// current transaction of their id, or whose transaction is not going
    /// to commit. Compaction can keep a pending-offsets record while
    /// removing the state records around it, so the order of the replay
    /// alone does not tell; the transaction's identity does.
    pub fn drop_stale_offsets(&mut self) {
        let txns = &self.txns;
        self.pending_offsets.retain(|id, pending| {
            txns.get(id).is_some_and(|meta| {
                matches!(meta.state, TxnState::Ongoing | TxnState::PrepareCommit)
                    && pending.belongs_to(meta)
            })
        });
    }

    /// Whether an EndTxn of transactions v2 by this producer would move it
    /// to a new producer id (its epoch reaches the limit), so the runtime
    /// must hand [`Self::end_txn`] one.
    pub fn end_needs_producer_id(&self, transactional_id: &str, producer_epoch: i16) -> bool {
        self.txns
            .get(transactional_id)
            .is_some_and(|m| m.producer_epoch == producer_epoch)
            && producer_epoch >= i16::MAX - 1
    }

    /// EndTxn. With `client_version` 2 (EndTxn v5, transactions v2) the
    /// transaction ends under the next epoch, which the producer uses from
    /// then on: a late produce of the ended transaction carries the old
    /// epoch and is fenced by the markers. At the epoch limit the producer
    /// moves to `new_producer_id` instead, epoch 0.
    pub fn end_txn(
        &self,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        commit: bool,
        (client_version, new_producer_id): (i16, i64),
        now_ms: i64,
    ) -> Result<EndStep, ErrorCode> {
        if client_version >= TRANSACTION_VERSION_2 {
            let producer = (producer_id, producer_epoch);
            let ids = (client_version, new_producer_id);
            return self.end_txn_v2(transactional_id, producer, commit, ids, now_ms);
        }
        let current = self.check_producer(transactional_id, producer_id, producer_epoch)?;
        match (current.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut next = current.clone();
                next.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                next.last_update_ms = now_ms;
                Ok(EndStep::Prepare(next))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok(EndStep::AlreadyDone)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(ErrorCode::ConcurrentTransactions)
            }
            _ => Err(ErrorCode::InvalidTxnState),
        }
    }

    /// EndTxn of transactions v2 (see [`Self::end_txn`]).
    fn end_txn_v2(
        &self,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        commit: bool,
        (client_version, new_producer_id): (i16, i64),
        now_ms: i64,
    ) -> Result<EndStep, ErrorCode> {
        let current = self
            .txns
            .get(transactional_id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if ended_by(current, producer_id, producer_epoch) {
            // A retry of the EndTxn that gave the producer its new epoch.
            return match (current.state, commit) {
                (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                    Ok(EndStep::AlreadyDone)
                }
                (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                    Err(ErrorCode::ConcurrentTransactions)
                }
                _ => Err(ErrorCode::InvalidTxnState),
            };
        }
        let current = self.check_producer(transactional_id, producer_id, producer_epoch)?;
        let idle = matches!(
            current.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        );
        match current.state {
            TxnState::Ongoing => {}
            // A producer may abort when nothing was added (its first
            // produce failed): the abort still gives it the next epoch.
            _ if idle && !commit => {}
            state if state.is_prepare() => return Err(ErrorCode::ConcurrentTransactions),
            _ => return Err(ErrorCode::InvalidTxnState),
        }
        let mut next = current.clone();
        if idle {
            next.partitions.clear();
        }
        next.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        next.producer_epoch = producer_epoch.saturating_add(1);
        if next.producer_epoch == i16::MAX {
            next.tv2.next_producer_id = new_producer_id;
        }
        next.tv2.client_version = client_version;
        next.last_update_ms = now_ms;
        Ok(EndStep::Prepare(next))
    }

    /// The Complete state that follows a Prepare state once every marker
    /// is durable (under a new producer id when transactions v2 ran out of
    /// epochs).
    pub fn complete(prepared: &TxnMetadata, now_ms: i64) -> TxnMetadata {
        let mut next = prepared.clone();
        next.state = match prepared.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            _ => TxnState::CompleteAbort,
        };
        next.partitions.clear();
        next.last_update_ms = now_ms;
        if prepared.tv2.next_producer_id >= 0 {
            next.tv2.previous_producer_id = prepared.producer_id;
            next.producer_id = prepared.tv2.next_producer_id;
            next.producer_epoch = 0;
            next.tv2.next_producer_id = -1;
        }
        next
    }

    /// Ongoing transactions past their timeout, by id.
    pub fn expired(&self, now_ms: i64) -> Vec<String> {
        self.txns
            .iter()
            .filter(|(_, m)| {
                m.state == TxnState::Ongoing
                    && m.start_ms >= 0
                    && m.start_ms + i64::from(m.timeout_ms) <= now_ms
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The PrepareAbort that ends a timed-out transaction, with the epoch
    /// bumped so the zombie producer is fenced; `None` when it is no longer
    /// ongoing or not yet expired.
    pub fn timeout_abort(&self, transactional_id: &str, now_ms: i64) -> Option<TxnMetadata> {
        let current = self.txns.get(transactional_id)?;
        let expired = current.state == TxnState::Ongoing
            && current.start_ms + i64::from(current.timeout_ms) <= now_ms;
        if !expired {
            return None;
        }
        let mut abort = self.bumped(current, now_ms);
        abort.state = TxnState::PrepareAbort;
        Some(abort)
    }

    /// Transactions decided but not finished (after a restart or a failed
    /// marker write): their markers must be (re)sent.
    pub fn unfinished(&self) -> Vec<(String, TxnMetadata)> {
        self.txns
            .iter()
            .filter(|(_, m)| matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect()
    }
}

/// Whether `current` is the state an EndTxn of transactions v2 by
/// `(producer_id, producer_epoch)` left behind: the next epoch of the same
/// id, or epoch 0 of the id it moved to at the epoch limit.
fn ended_by(current: &TxnMetadata, producer_id: i64, producer_epoch: i16) -> bool {
    if current.tv2.client_version < TRANSACTION_VERSION_2 || !current_is_ending_or_ended(current) {
        return false;
    }
    let next_epoch = producer_epoch.checked_add(1);
    let same_id = current.producer_id == producer_id && next_epoch == Some(current.producer_epoch);
    let moved_id = current.tv2.previous_producer_id == producer_id
        && current.producer_epoch == 0
        && next_epoch == Some(i16::MAX);
    same_id || moved_id
}

fn current_is_ending_or_ended(current: &TxnMetadata) -> bool {
    matches!(
        current.state,
        TxnState::PrepareCommit
            | TxnState::PrepareAbort
            | TxnState::CompleteCommit
            | TxnState::CompleteAbort
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn ready(step: Result<InitStep, ErrorCode>) -> TxnMetadata {
        match step {
            Ok(InitStep::Ready(meta)) => meta,
            other => panic!("expected Ready, got {other:?}"),
        }
    }

    /// A coordinator where transactional id "t" has producer id 5, epoch 0,
    /// with the given transaction timeout.
    fn initialized(timeout_ms: i32) -> TxnCoordinator {
        let mut c = TxnCoordinator::new();
        c.apply(
            "t",
            Some(ready(c.init_producer_id("t", timeout_ms, None, 5, NOW))),
        );
        c
    }

    fn tp(topic: &str, partition: i32) -> (String, i32) {
        (topic.to_string(), partition)
    }

    /// Runs a transaction of `id` through commit or abort, applying each step.
    fn end(c: &mut TxnCoordinator, id: &str, commit: bool) {
        let meta = c.get(id).cloned().expect("known");
        match c.end_txn(
            id,
            (meta.producer_id, meta.producer_epoch),
            commit,
            (0, -1),
            NOW,
        ) {
            Ok(EndStep::Prepare(prepared)) => {
                c.apply(id, Some(prepared.clone()));
                c.apply(id, Some(TxnCoordinator::complete(&prepared, NOW)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn init_then_reinit_bumps_the_epoch_and_keeps_the_id() {
        let mut c = TxnCoordinator::new();
        let first = ready(c.init_producer_id("t", 60_000, None, 42, NOW));
        assert_eq!((first.producer_id, first.producer_epoch), (42, 0));
        c.apply("t", Some(first));
        let second = ready(c.init_producer_id("t", 60_000, None, 99, NOW));
        assert_eq!((second.producer_id, second.producer_epoch), (42, 1));
        c.apply("t", Some(second));
        // The old epoch is fenced.
        assert_eq!(
            c.add_partitions("t", 42, 0, &[tp("a", 0)], NOW),
            Err(ErrorCode::ProducerFenced)
        );
        assert_eq!(
            c.add_partitions("t", 7, 1, &[tp("a", 0)], NOW),
            Err(ErrorCode::InvalidProducerIdMapping)
        );
    }

    #[test]
    fn a_full_commit_cycle() {
        let mut c = initialized(60_000);
        let ongoing = c
            .add_partitions("t", 5, 0, &[tp("a", 0), tp("a", 1)], NOW)
            .expect("add")
            .expect("changed");
        assert_eq!(ongoing.state, TxnState::Ongoing);
        assert_eq!(ongoing.start_ms, NOW);
        c.apply("t", Some(ongoing));
        // Adding a partition already there persists nothing.
        assert_eq!(c.add_partitions("t", 5, 0, &[tp("a", 1)], NOW), Ok(None));
        let prepared = match c.end_txn("t", (5, 0), true, (0, -1), NOW) {
            Ok(EndStep::Prepare(p)) => p,
            other => panic!("{other:?}"),
        };
        assert_eq!(prepared.state, TxnState::PrepareCommit);
        assert_eq!(prepared.partitions.len(), 2);
        c.apply("t", Some(prepared.clone()));
        assert_eq!(c.unfinished().len(), 1);
        assert_eq!(
            c.end_txn("t", (5, 0), true, (0, -1), NOW),
            Err(ErrorCode::ConcurrentTransactions)
        );
        let done = TxnCoordinator::complete(&prepared, NOW);
        assert_eq!(done.state, TxnState::CompleteCommit);
        assert!(done.partitions.is_empty());
        c.apply("t", Some(done));
        // A retried commit succeeds; an abort now is a state error.
        assert_eq!(
            c.end_txn("t", (5, 0), true, (0, -1), NOW),
            Ok(EndStep::AlreadyDone)
        );
        assert_eq!(
            c.end_txn("t", (5, 0), false, (0, -1), NOW),
            Err(ErrorCode::InvalidTxnState)
        );
        // The next transaction starts afresh.
        let next = c
            .add_partitions("t", 5, 0, &[tp("b", 0)], NOW + 5)
            .expect("add")
            .expect("changed");
        assert_eq!(next.partitions.len(), 1);
        assert_eq!(next.start_ms, NOW + 5);
    }

    #[test]
    fn reinit_during_a_transaction_aborts_it_first() {
        let mut c = initialized(60_000);
        let ongoing = c.add_partitions("t", 5, 0, &[tp("a", 0)], NOW).unwrap();
        c.apply("t", ongoing);
        let abort = match c.init_producer_id("t", 60_000, None, 6, NOW) {
            Ok(InitStep::AbortFirst(abort)) => abort,
            other => panic!("{other:?}"),
        };
        assert_eq!(abort.state, TxnState::PrepareAbort);
        assert_eq!(abort.producer_epoch, 1);
        c.apply("t", Some(abort.clone()));
        assert_eq!(
            c.init_producer_id("t", 60_000, None, 6, NOW),
            Err(ErrorCode::ConcurrentTransactions)
        );
        c.apply("t", Some(TxnCoordinator::complete(&abort, NOW)));
        let again = ready(c.init_producer_id("t", 60_000, None, 6, NOW));
        assert_eq!((again.producer_id, again.producer_epoch), (5, 2));
    }

    #[test]
    fn timeouts_abort_and_fence() {
        let mut c = initialized(2_000);
        c.apply(
            "t",
            c.add_partitions("t", 5, 0, &[tp("a", 0)], NOW).unwrap(),
        );
        assert!(c.expired(NOW + 1_999).is_empty());
        assert_eq!(c.expired(NOW + 2_000), vec![String::from("t")]);
        assert_eq!(c.timeout_abort("t", NOW + 1), None);
        let abort = c.timeout_abort("t", NOW + 2_000).expect("expired");
        assert_eq!(abort.state, TxnState::PrepareAbort);
        assert_eq!(abort.producer_epoch, 1);
        c.apply("t", Some(abort.clone()));
        c.apply("t", Some(TxnCoordinator::complete(&abort, NOW + 2_001)));
        assert_eq!(
            c.end_txn("t", (5, 0), true, (0, -1), NOW + 3_000),
            Err(ErrorCode::ProducerFenced)
        );
    }

    #[test]
    fn offsets_wait_for_the_end_of_the_transaction() {
        let mut c = initialized(60_000);
        let offset = PendingOffset {
            topic: String::from("in"),
            partition: 0,
            offset: 10,
            leader_epoch: -1,
            metadata: None,
        };
        assert_eq!(
            c.add_offsets("t", 5, 0, "g", vec![offset.clone()]),
            Err(ErrorCode::InvalidTxnState)
        );
        c.apply(
            "t",
            c.add_partitions("t", 5, 0, &[tp("__consumer_offsets", 3)], NOW)
                .unwrap(),
        );
        let first = c.add_offsets("t", 5, 0, "g", vec![offset.clone()]).unwrap();
        // Nothing changes until the record is persisted and applied.
        assert!(c.offsets("t").is_none());
        c.apply_offsets("t", Some(first));
        let later = PendingOffset {
            offset: 20,
            ..offset
        };
        let second = c.add_offsets("t", 5, 0, "g", vec![later.clone()]).unwrap();
        c.apply_offsets("t", Some(second));
        assert_eq!(
            c.offsets("t").and_then(|p| p.groups.get("g")),
            Some(&vec![later])
        );
        // Prepare keeps them (they are forwarded then); Complete ends them.
        let prepared = match c.end_txn("t", (5, 0), true, (0, -1), NOW) {
            Ok(EndStep::Prepare(p)) => p,
            other => panic!("{other:?}"),
        };
        c.apply("t", Some(prepared.clone()));
        assert!(c.offsets("t").is_some());
        c.apply("t", Some(TxnCoordinator::complete(&prepared, NOW)));
        assert!(c.offsets("t").is_none());
    }

    #[test]
    fn a_replay_keeps_only_the_offsets_of_the_current_transaction() {
        let offset = PendingOffset {
            topic: String::from("in"),
            partition: 0,
            offset: 10,
            leader_epoch: -1,
            metadata: None,
        };
        let mut c = initialized(60_000);
        let first_txn = c.add_partitions("t", 5, 0, &[tp("a", 0)], NOW).unwrap();
        c.apply("t", first_txn);
        let stale = c.add_offsets("t", 5, 0, "g", vec![offset.clone()]).unwrap();
        // A replay after compaction: the stale offsets record survives, then
        // the state of a later transaction (another start time).
        let mut replayed = TxnCoordinator::new();
        replayed.apply_offsets("t", Some(stale.clone()));
        let mut later = c.get("t").cloned().unwrap();
        later.start_ms = NOW + 10;
        replayed.apply("t", Some(later.clone()));
        replayed.drop_stale_offsets();
        assert!(replayed.offsets("t").is_none());
        // The same record with its own transaction in PrepareCommit is kept.
        let mut replayed = TxnCoordinator::new();
        replayed.apply_offsets("t", Some(stale.clone()));
        let mut prepared = c.get("t").cloned().unwrap();
        prepared.state = TxnState::PrepareCommit;
        replayed.apply("t", Some(prepared.clone()));
        replayed.drop_stale_offsets();
        assert_eq!(replayed.offsets("t"), Some(&stale));
        // In PrepareAbort they will never be forwarded.
        prepared.state = TxnState::PrepareAbort;
        replayed.apply("t", Some(prepared));
        replayed.drop_stale_offsets();
        assert!(replayed.offsets("t").is_none());
    }

    #[test]
    fn abort_drops_pending_offsets() {
        let mut c = initialized(60_000);
        c.apply(
            "t",
            c.add_partitions("t", 5, 0, &[tp("a", 0)], NOW).unwrap(),
        );
        let offset = PendingOffset {
            topic: String::from("in"),
            partition: 0,
            offset: 10,
            leader_epoch: -1,
            metadata: None,
        };
        let pending = c.add_offsets("t", 5, 0, "g", vec![offset]).unwrap();
        c.apply_offsets("t", Some(pending.clone()));
        assert_eq!(c.offsets("t"), Some(&pending), "staged before the abort");
        end(&mut c, "t", false);
        assert!(c.offsets("t").is_none());
    }

    #[test]
    fn bad_timeouts_and_kip360_mismatch_are_refused() {
        let mut c = TxnCoordinator::new();
        assert_eq!(
            c.init_producer_id("t", 0, None, 5, NOW),
            Err(ErrorCode::InvalidTransactionTimeout)
        );
        assert_eq!(
            c.init_producer_id("t", TXN_MAX_TIMEOUT_MS + 1, None, 5, NOW),
            Err(ErrorCode::InvalidTransactionTimeout)
        );
        c.apply(
            "t",
            Some(ready(c.init_producer_id("t", 60_000, None, 5, NOW))),
        );
        assert_eq!(
            c.init_producer_id("t", 60_000, Some((5, 3)), 6, NOW),
            Err(ErrorCode::ProducerFenced)
        );
        let bumped = ready(c.init_producer_id("t", 60_000, Some((5, 0)), 6, NOW));
        assert_eq!(bumped.producer_epoch, 1);
    }

    #[test]
    fn an_exhausted_epoch_takes_a_new_producer_id() {
        let mut c = TxnCoordinator::new();
        let mut meta = ready(c.init_producer_id("t", 60_000, None, 5, NOW));
        meta.producer_epoch = i16::MAX - 1;
        c.apply("t", Some(meta));
        let fresh = ready(c.init_producer_id("t", 60_000, None, 77, NOW));
        assert_eq!((fresh.producer_id, fresh.producer_epoch), (77, 0));
    }

    #[test]
    fn tombstones_forget_the_id() {
        let mut c = initialized(60_000);
        c.apply("t", None);
        assert!(c.get("t").is_none());
        assert_eq!(c.all().count(), 0);
    }
}

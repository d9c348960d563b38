//! A partition leader's side of a transaction (KIP-890): before the first
//! batch of a transaction is appended to a partition, the leader asks the
//! transaction's coordinator, on this broker or another, either to add the
//! partition to the transaction (transactions v2: Produce v12, whose client
//! sends no AddPartitionsToTxn) or to confirm that it is in the ongoing
//! transaction already (part 1, for older clients,
//! `transaction.partition.verification.enable`). A batch of a transaction
//! that has ended is refused there, so it cannot open a transaction on the
//! partition that no marker will ever end (a hanging transaction, which
//! holds back the last stable offset and every read_committed consumer).
//!
//! Only a transaction's first batch on the partition asks: once the
//! producer's transaction is open here, the coordinator has the partition
//! and its marker will close it.
//!
//! The answer can be overtaken: the transaction may end, its marker
//! written here, between the coordinator's answer and the append. So the
//! leader takes a guard before asking, the producer's marker revokes it
//! ([`revoke_guards`]), and the append goes ahead only with the guard
//! still there (Kafka's `VerificationGuard`). Under transactions v2 the
//! marker carries the next epoch as well, which fences the batch anyway.
//!
//! Asking is the transaction runtime's (`txn_runtime::join`), above
//! routing: it is installed as this shard's [`CoordinatorAsk`].

use crate::Shard;
use engine::batch::BatchHeader;
use engine::{ErrorCode, TopicPartition};
use futures::future::LocalBoxFuture;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// What a produce request asks of the partition leader for its
/// transaction (carried with the partition's records to its owner shard).
#[derive(Debug, Clone)]
pub struct TxnJoin {
    /// The transactional id the request names.
    pub transactional_id: String,
    /// Add the partition (transactions v2) rather than only verify it.
    pub add: bool,
}

/// Asks the coordinator of `join`'s transaction to add (or verify) one
/// partition for `(producer id, epoch)`: its error code.
pub type CoordinatorAsk =
    Rc<dyn Fn(Rc<Shard>, TxnJoin, (i64, i16), (String, i32)) -> LocalBoxFuture<'static, ErrorCode>>;

/// A shard's pending checks, by partition and producer id: the guard and
/// how many batches wait on it (a producer's pipelined batches share one),
/// and how the shard asks.
#[derive(Default)]
pub struct JoinGuards {
    pending: RefCell<HashMap<(TopicPartition, i64), (u64, usize)>>,
    next: Cell<u64>,
    ask: RefCell<Option<CoordinatorAsk>>,
}

impl JoinGuards {
    /// Installs how this shard asks a transaction's coordinator.
    pub fn set_ask(&self, ask: CoordinatorAsk) {
        *self.ask.borrow_mut() = Some(ask);
    }

    /// The guard of `key`'s check in flight, or a new one: one more
    /// batch waits on it.
    fn take(&self, key: &(TopicPartition, i64)) -> u64 {
        let mut pending = self.pending.borrow_mut();
        if let Some((guard, waiting)) = pending.get_mut(key) {
            *waiting += 1;
            return *guard;
        }
        let guard = self.next.get().wrapping_add(1);
        self.next.set(guard);
        pending.insert(key.clone(), (guard, 1));
        guard
    }

    /// A batch stops waiting on `guard`: whether it still holds (no marker
    /// of the producer came in between). The last one out removes it.
    fn release(&self, key: &(TopicPartition, i64), guard: u64) -> bool {
        let mut pending = self.pending.borrow_mut();
        match pending.get_mut(key) {
            Some((current, waiting)) if *current == guard => {
                *waiting -= 1;
                if *waiting == 0 {
                    pending.remove(key);
                }
                true
            }
            // Revoked, and perhaps a newer check begun since.
            _ => false,
        }
    }
}

/// Before `records` are appended to `tp` on its leader: the coordinator's
/// word when they open the producer's transaction there; `Err` with the
/// code to refuse the produce with.
pub(super) async fn before_append(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    log: &engine::PartitionLog,
    records: &[u8],
    join: &TxnJoin,
) -> Result<(), ErrorCode> {
    // A batch that does not parse is the append's to refuse.
    let Ok(header) = BatchHeader::parse(records) else {
        return Ok(());
    };
    if !header.is_transactional() {
        return Ok(());
    }
    let producer = (header.producer_id, header.producer_epoch);
    let open_here = log.producer_entry(producer.0).is_some_and(|entry| {
        entry.producer_epoch == producer.1 && entry.current_txn_first_offset.is_some()
    });
    if open_here {
        return Ok(());
    }
    let guards = &shard.runtime().join_guards;
    // Never append unchecked: a shard without the coordinator's hook
    // answers as a coordinator that cannot be reached.
    let Some(ask) = guards.ask.borrow().clone() else {
        return Err(ErrorCode::NotEnoughReplicas);
    };
    let key = (tp.clone(), producer.0);
    let guard = guards.take(&key);
    let partition = (tp.topic.to_string(), tp.partition);
    let code = ask(shard.clone(), join.clone(), producer, partition).await;
    let kept = guards.release(&key, guard);
    match code {
        ErrorCode::None if kept => Ok(()),
        // A marker ended the transaction while the coordinator answered.
        ErrorCode::None => Err(ErrorCode::InvalidTxnState),
        code => Err(produce_code(code)),
    }
}

/// A marker of `producer_id` was written to `tp`: the checks in flight for
/// it no longer hold.
pub(super) fn revoke_guards(shard: &Shard, tp: &TopicPartition, producer_id: i64) {
    let guards = &shard.runtime().join_guards;
    guards
        .pending
        .borrow_mut()
        .remove(&(tp.clone(), producer_id));
}

/// What a producer understands of the coordinator's answer: its fencing
/// as INVALID_PRODUCER_EPOCH, a partition outside the transaction as
/// INVALID_TXN_STATE, and a coordinator that cannot answer now as
/// NOT_ENOUGH_REPLICAS, which every client retries (Kafka's mapping).
fn produce_code(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => {
            ErrorCode::InvalidProducerEpoch
        }
        ErrorCode::NotCoordinator
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::ConcurrentTransactions
        | ErrorCode::RequestTimedOut
        | ErrorCode::OperationNotAttempted => ErrorCode::NotEnoughReplicas,
        code => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelined_batches_share_a_guard_and_a_marker_voids_it_for_all() {
        let guards = JoinGuards::default();
        let key = (TopicPartition::new("t", 0), 7);
        let first = guards.take(&key);
        assert_eq!(
            guards.take(&key),
            first,
            "the second batch waits on the same check"
        );
        assert!(guards.release(&key, first));
        assert!(
            guards.release(&key, first),
            "the first answer kept it for the second"
        );
        assert!(
            guards.pending.borrow().is_empty(),
            "the last one out removes it"
        );
        // A marker between the question and the answer voids the answer,
        // and a check begun after the marker is not mistaken for it.
        let old = guards.take(&key);
        guards.pending.borrow_mut().remove(&key);
        let new = guards.take(&key);
        assert_ne!(old, new);
        assert!(!guards.release(&key, old));
        assert!(guards.release(&key, new));
    }
}

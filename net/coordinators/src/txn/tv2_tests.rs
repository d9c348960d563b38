//! Transactions v2 (KIP-890 part 2) in the coordinator: a new epoch at
//! every EndTxn, retries recognized, a new producer id at the epoch limit.

use super::coordinator::{EndStep, InitStep, PendingOffset};
use super::{TxnCoordinator, TxnMetadata, TxnState, TRANSACTION_VERSION_2};
use engine::ErrorCode;

const NOW: i64 = 1_000_000;
const V2: (i16, i64) = (TRANSACTION_VERSION_2, -1);

fn tp(topic: &str, partition: i32) -> (String, i32) {
    (topic.to_string(), partition)
}

/// "t" with producer id 5 at `epoch`, a transaction on a-0 ongoing.
fn ongoing(epoch: i16) -> TxnCoordinator {
    let mut c = TxnCoordinator::new();
    let mut meta = match c.init_producer_id("t", 60_000, None, 5, NOW) {
        Ok(InitStep::Ready(meta)) => meta,
        other => panic!("{other:?}"),
    };
    meta.producer_epoch = epoch;
    c.apply("t", Some(meta));
    let next = c
        .add_partitions("t", 5, epoch, &[tp("a", 0)], NOW)
        .expect("add")
        .expect("changed");
    c.apply("t", Some(next));
    c
}

fn prepared(step: Result<EndStep, ErrorCode>) -> TxnMetadata {
    match step {
        Ok(EndStep::Prepare(meta)) => meta,
        other => panic!("expected Prepare, got {other:?}"),
    }
}

#[test]
fn every_end_gives_the_next_epoch_and_a_retry_is_recognized() {
    let mut c = ongoing(3);
    let prepare = prepared(c.end_txn("t", (5, 3), true, V2, NOW));
    assert_eq!(prepare.state, TxnState::PrepareCommit);
    assert_eq!(prepare.producer_epoch, 4, "markers carry the new epoch");
    assert_eq!(prepare.partitions.len(), 1);
    c.apply("t", Some(prepare.clone()));
    // Retried while the markers are written: come back later.
    assert_eq!(
        c.end_txn("t", (5, 3), true, V2, NOW),
        Err(ErrorCode::ConcurrentTransactions)
    );
    let done = TxnCoordinator::complete(&prepare, NOW);
    assert_eq!((done.producer_id, done.producer_epoch), (5, 4));
    c.apply("t", Some(done));
    assert_eq!(
        c.end_txn("t", (5, 3), true, V2, NOW),
        Ok(EndStep::AlreadyDone)
    );
    assert_eq!(
        c.end_txn("t", (5, 3), false, V2, NOW),
        Err(ErrorCode::InvalidTxnState)
    );
    // The old epoch is fenced for a new transaction; the new one starts it.
    assert_eq!(
        c.add_partitions("t", 5, 3, &[tp("a", 0)], NOW),
        Err(ErrorCode::ProducerFenced)
    );
    assert!(c.add_partitions("t", 5, 4, &[tp("a", 0)], NOW).is_ok());
    // An epoch two behind is no retry.
    assert_eq!(
        c.end_txn("t", (5, 2), true, V2, NOW),
        Err(ErrorCode::ProducerFenced)
    );
}

#[test]
fn an_abort_with_nothing_added_still_bumps_and_a_commit_is_refused() {
    let mut c = ongoing(0);
    let prepare = prepared(c.end_txn("t", (5, 0), true, V2, NOW));
    c.apply("t", Some(prepare.clone()));
    c.apply("t", Some(TxnCoordinator::complete(&prepare, NOW)));
    assert_eq!(
        c.end_txn("t", (5, 1), true, V2, NOW),
        Err(ErrorCode::InvalidTxnState)
    );
    let abort = prepared(c.end_txn("t", (5, 1), false, V2, NOW));
    assert_eq!(abort.state, TxnState::PrepareAbort);
    assert!(abort.partitions.is_empty(), "no markers to write");
    assert_eq!(abort.producer_epoch, 2);
}

#[test]
fn at_the_epoch_limit_the_producer_moves_to_a_new_id() {
    let mut c = ongoing(i16::MAX - 1);
    assert!(c.end_needs_producer_id("t", i16::MAX - 1));
    assert!(!c.end_needs_producer_id("t", 3));
    let prepare = prepared(c.end_txn("t", (5, i16::MAX - 1), true, (2, 88), NOW));
    assert_eq!(prepare.producer_epoch, i16::MAX);
    assert_eq!(prepare.producer_id, 5, "markers under the old id");
    c.apply("t", Some(prepare.clone()));
    let done = TxnCoordinator::complete(&prepare, NOW);
    assert_eq!((done.producer_id, done.producer_epoch), (88, 0));
    assert_eq!(done.tv2.previous_producer_id, 5);
    assert_eq!(done.tv2.next_producer_id, -1);
    c.apply("t", Some(done));
    assert_eq!(
        c.end_txn("t", (5, i16::MAX - 1), true, V2, NOW),
        Ok(EndStep::AlreadyDone)
    );
    assert!(c.add_partitions("t", 88, 0, &[tp("a", 0)], NOW).is_ok());
}

#[test]
fn offsets_committed_before_the_bump_are_kept_for_the_commit() {
    let mut c = ongoing(7);
    let offset = PendingOffset {
        topic: String::from("in"),
        partition: 0,
        offset: 10,
        leader_epoch: -1,
        metadata: None,
    };
    let pending = c
        .add_offsets("t", 5, 7, "g", vec![offset])
        .expect("offsets");
    c.apply_offsets("t", Some(pending));
    let prepare = prepared(c.end_txn("t", (5, 7), true, V2, NOW));
    c.apply("t", Some(prepare));
    assert!(c.offsets("t").is_some(), "the commit forwards them");
}

#[test]
fn version_1_ends_keep_the_epoch() {
    let c = ongoing(3);
    let prepare = prepared(c.end_txn("t", (5, 3), true, (0, -1), NOW));
    assert_eq!(prepare.producer_epoch, 3);
    assert_eq!(prepare.tv2.client_version, 0);
}

#[test]
fn a_timeout_abort_of_a_v2_transaction_is_taken_as_done_by_its_end() {
    let mut c = TxnCoordinator::new();
    let meta = match c.init_producer_id("t", 1_000, None, 5, NOW) {
        Ok(InitStep::Ready(meta)) => meta,
        other => panic!("{other:?}"),
    };
    c.apply("t", Some(meta));
    // Started by the partition leader for a client of transactions v2.
    let started = c
        .add_partitions_as("t", (5, 0), &[tp("a", 0)], TRANSACTION_VERSION_2, NOW)
        .expect("add")
        .expect("changed");
    assert_eq!(started.tv2.client_version, TRANSACTION_VERSION_2);
    c.apply("t", Some(started));
    let abort = c.timeout_abort("t", NOW + 1_000).expect("expired");
    c.apply("t", Some(abort.clone()));
    c.apply("t", Some(TxnCoordinator::complete(&abort, NOW + 1_000)));
    // The client aborts too, with the epoch it had: done, at the new one.
    assert_eq!(
        c.end_txn("t", (5, 0), false, V2, NOW),
        Ok(EndStep::AlreadyDone)
    );
    assert_eq!(c.get("t").map(|m| m.producer_epoch), Some(1));
    // A commit of it cannot be had.
    assert_eq!(
        c.end_txn("t", (5, 0), true, V2, NOW),
        Err(ErrorCode::InvalidTxnState)
    );
}

//! Each check fed a hand-made history that holds its anomaly (so each is
//! proven able to fail), and a clean history that holds none.

use super::*;
use crate::verify::history::{PolledRecord, SendOutcome, TxnOutcome};

fn send(process: &str, partition: i32, value: &str, offset: i64) -> Op {
    Op::Send {
        process: process.into(),
        partition,
        value: value.into(),
        start_ms: 0,
        end_ms: 1,
        outcome: SendOutcome::Ok { offset },
        txn: None,
    }
}

fn send_info(process: &str, partition: i32, value: &str) -> Op {
    Op::Send {
        process: process.into(),
        partition,
        value: value.into(),
        start_ms: 0,
        end_ms: 1,
        outcome: SendOutcome::Info {
            error: "timed out".into(),
        },
        txn: None,
    }
}

fn poll(process: &str, mode: ConsumerMode, records: &[(i32, i64, &str)]) -> Op {
    Op::Poll {
        process: process.into(),
        mode,
        start_ms: 2,
        end_ms: 3,
        records: records
            .iter()
            .map(|&(partition, offset, value)| PolledRecord {
                partition,
                offset,
                value: value.into(),
            })
            .collect(),
    }
}

fn assigned(process: &str, records: &[(i32, i64, &str)]) -> Op {
    poll(process, ConsumerMode::Assign, records)
}

fn classes(history: &[Op]) -> Vec<&'static str> {
    check(history).iter().map(|a| a.class).collect()
}

/// Three acknowledged values, read in order by an assign consumer and a
/// group consumer; an `info` send nobody read.
fn clean() -> Vec<Op> {
    vec![
        send("p0", 0, "p0/0", 0),
        send("p0", 0, "p0/1", 1),
        send_info("p0", 0, "p0/2"),
        send("p1", 0, "p1/0", 2),
        assigned("a0", &[(0, 0, "p0/0"), (0, 1, "p0/1")]),
        assigned("a0", &[(0, 2, "p1/0")]),
        poll(
            "g0",
            ConsumerMode::Subscribe,
            &[(0, 1, "p0/1"), (0, 2, "p1/0")],
        ),
    ]
}

#[test]
fn a_clean_history_has_no_anomaly() {
    assert_eq!(check(&clean()), vec![]);
}

#[test]
fn an_acknowledged_value_read_past_but_never_read_is_a_lost_write() {
    let history = vec![
        send("p0", 0, "p0/0", 0),
        send("p0", 0, "p0/1", 1),
        assigned("a0", &[(0, 1, "p0/1")]),
    ];
    assert_eq!(classes(&history), vec![LOST_WRITE]);
}

#[test]
fn an_acknowledged_value_not_read_past_is_unseen() {
    let history = vec![
        send("p0", 0, "p0/0", 0),
        send("p0", 0, "p0/1", 1),
        assigned("a0", &[(0, 0, "p0/0")]),
    ];
    assert_eq!(classes(&history), vec![UNSEEN]);
}

#[test]
fn one_value_at_two_offsets_is_a_duplicate() {
    let history = vec![
        send("p0", 0, "p0/0", 0),
        assigned("a0", &[(0, 0, "p0/0"), (0, 1, "p0/0")]),
    ];
    assert_eq!(classes(&history), vec![DUPLICATE]);
}

#[test]
fn two_values_at_one_offset_are_inconsistent_offsets() {
    let history = vec![
        send("p0", 0, "p0/0", 0),
        send("p1", 0, "p1/0", 1),
        assigned("a0", &[(0, 0, "p0/0")]),
        assigned("a1", &[(0, 0, "p1/0")]),
    ];
    // p1/0 is also at two offsets (its acknowledgement said 1).
    assert_eq!(classes(&history), vec![INCONSISTENT_OFFSETS, DUPLICATE]);
}

#[test]
fn an_assign_consumer_jumping_over_a_known_value_is_a_poll_skip() {
    let history = vec![
        send("p0", 0, "p0/0", 0),
        send("p0", 0, "p0/1", 1),
        send("p0", 0, "p0/2", 2),
        assigned("a0", &[(0, 0, "p0/0")]),
        assigned("a0", &[(0, 2, "p0/2")]),
        assigned("a1", &[(0, 1, "p0/1")]),
    ];
    assert_eq!(classes(&history), vec![POLL_SKIP]);
}

#[test]
fn a_gap_over_offsets_nobody_saw_is_not_a_skip() {
    // Offset 1 may be a control record or an unread `info` send.
    let history = vec![
        send("p0", 0, "p0/0", 0),
        send("p0", 0, "p0/2", 2),
        assigned("a0", &[(0, 0, "p0/0"), (0, 2, "p0/2")]),
    ];
    assert_eq!(classes(&history), Vec::<&str>::new());
}

#[test]
fn an_assign_consumer_going_back_is_a_nonmonotonic_poll() {
    let history = vec![
        send("p0", 0, "p0/0", 0),
        send("p0", 0, "p0/1", 1),
        assigned("a0", &[(0, 0, "p0/0"), (0, 1, "p0/1")]),
        assigned("a0", &[(0, 0, "p0/0")]),
    ];
    assert_eq!(classes(&history), vec![NONMONOTONIC_POLL]);
}

#[test]
fn a_group_consumer_going_back_after_a_rebalance_is_allowed() {
    let history = vec![
        send("p0", 0, "p0/0", 0),
        send("p0", 0, "p0/1", 1),
        poll(
            "g0",
            ConsumerMode::Subscribe,
            &[(0, 0, "p0/0"), (0, 1, "p0/1")],
        ),
        poll("g0", ConsumerMode::Subscribe, &[(0, 0, "p0/0")]),
    ];
    assert_eq!(classes(&history), Vec::<&str>::new());
}

#[test]
fn a_producer_acknowledged_lower_in_one_partition_is_a_nonmonotonic_send() {
    let history = vec![
        send("p0", 0, "p0/0", 1),
        send("p0", 0, "p0/1", 0),
        assigned("a0", &[(0, 0, "p0/1"), (0, 1, "p0/0")]),
    ];
    assert_eq!(classes(&history), vec![NONMONOTONIC_SEND]);
}

fn commit(end_ms: u64, offset: i64, ok: bool) -> Op {
    Op::Commit {
        process: "g0".into(),
        start_ms: end_ms - 1,
        end_ms,
        offsets: vec![(0, offset)],
        ok,
    }
}

fn committed_read(start_ms: u64, offset: i64) -> Op {
    Op::CommittedRead {
        process: "g1".into(),
        start_ms,
        end_ms: start_ms + 1,
        offsets: vec![(0, offset)],
    }
}

#[test]
fn a_successful_commit_read_back_lower_is_a_lost_commit() {
    let history = vec![commit(10, 5, true), committed_read(20, 3)];
    assert_eq!(classes(&history), vec![LOST_COMMIT]);
}

#[test]
fn a_failed_or_concurrent_commit_read_back_lower_is_not_lost() {
    let history = vec![
        commit(10, 5, false),
        commit(30, 9, true),
        committed_read(20, 3),
        committed_read(40, 9),
    ];
    assert_eq!(classes(&history), Vec::<&str>::new());
}

fn txn_send(process: &str, value: &str, offset: i64, txn: &str) -> Op {
    Op::Send {
        process: process.into(),
        partition: 0,
        value: value.into(),
        start_ms: 0,
        end_ms: 1,
        outcome: SendOutcome::Ok { offset },
        txn: Some(txn.into()),
    }
}

fn txn_end(txn: &str, start_ms: u64, outcome: TxnOutcome) -> Op {
    Op::TxnEnd {
        process: "p0".into(),
        txn: txn.into(),
        start_ms,
        end_ms: start_ms + 1,
        outcome,
    }
}

#[test]
fn transactions_read_after_commit_and_aborted_ones_unread_are_clean() {
    let history = vec![
        txn_send("p0", "p0/0", 0, "t0"),
        txn_end("t0", 1, TxnOutcome::Committed),
        // Aborted at offset 1 (and its marker at 2): never read, not lost,
        // and the jump from 0 to 3 skips nothing a consumer may read.
        txn_send("p0", "p0/1", 1, "t1"),
        txn_end("t1", 1, TxnOutcome::Aborted),
        txn_send("p0", "p0/2", 3, "t2"),
        txn_end("t2", 1, TxnOutcome::Committed),
        assigned("a0", &[(0, 0, "p0/0"), (0, 3, "p0/2")]),
    ];
    assert_eq!(classes(&history), Vec::<&str>::new());
}

#[test]
fn a_polled_value_of_an_aborted_transaction_is_g1a() {
    let history = vec![
        txn_send("p0", "p0/0", 0, "t0"),
        txn_end("t0", 1, TxnOutcome::Aborted),
        assigned("a0", &[(0, 0, "p0/0")]),
    ];
    assert_eq!(classes(&history), vec![G1A]);
}

#[test]
fn a_value_polled_before_its_commit_began_is_a_precommitted_read() {
    // The poll ends at 3; the commit was only asked for at 10.
    let history = vec![
        txn_send("p0", "p0/0", 0, "t0"),
        assigned("a0", &[(0, 0, "p0/0")]),
        txn_end("t0", 10, TxnOutcome::Committed),
    ];
    assert_eq!(classes(&history), vec![PRECOMMITTED_READ]);
}

#[test]
fn a_committed_value_never_read_is_still_lost() {
    let history = vec![
        txn_send("p0", "p0/0", 0, "t0"),
        txn_send("p0", "p0/1", 1, "t0"),
        txn_end("t0", 1, TxnOutcome::Committed),
        assigned("a0", &[(0, 1, "p0/1")]),
    ];
    assert_eq!(classes(&history), vec![LOST_WRITE]);
}

//! The checker: a pure function from a recorded history to its anomalies,
//! named as Jepsen's `jepsen.tests.kafka` names them (plus `lost-commit`).
//! It does no I/O and reads no clock, so every check is unit-tested below
//! with a hand-made history that holds exactly that anomaly.
//!
//! What counts as a value's position: the offset its acknowledgement gave
//! and every offset a poll returned it at. Sends that failed (`info`) may
//! or may not have been written; they are neither expected nor forbidden.

use super::history::{ConsumerMode, Op, SendOutcome, TxnOutcome};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Acknowledged, at an offset below one a consumer read, and never read.
pub const LOST_WRITE: &str = "lost-write";
/// One value at two offsets.
pub const DUPLICATE: &str = "duplicate";
/// Two values at one offset.
pub const INCONSISTENT_OFFSETS: &str = "inconsistent-offsets";
/// An `assign` consumer's next record skipped an offset known to hold one.
pub const POLL_SKIP: &str = "poll-skip";
/// An `assign` consumer's next record was at or below its last one.
pub const NONMONOTONIC_POLL: &str = "nonmonotonic-poll";
/// One producer's acknowledged offsets in a partition went backwards.
pub const NONMONOTONIC_SEND: &str = "nonmonotonic-send";
/// Acknowledged, never read, and no consumer read past it by the end.
pub const UNSEEN: &str = "unseen";
/// A successful group commit later read back lower.
pub const LOST_COMMIT: &str = "lost-commit";
/// Aborted read: a value of an aborted transaction was polled.
pub const G1A: &str = "G1a";
/// A value polled before its transaction was even asked to commit.
pub const PRECOMMITTED_READ: &str = "precommitted-read";

/// Every class, in the order the result lists them.
pub const CLASSES: [&str; 10] = [
    LOST_WRITE,
    DUPLICATE,
    INCONSISTENT_OFFSETS,
    POLL_SKIP,
    NONMONOTONIC_POLL,
    NONMONOTONIC_SEND,
    UNSEEN,
    LOST_COMMIT,
    G1A,
    PRECOMMITTED_READ,
];

/// One anomaly: its class and what was seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    pub class: &'static str,
    pub partition: i32,
    pub detail: String,
}

/// Where each value was seen and what each offset held.
#[derive(Default)]
struct Positions {
    /// `(partition, offset)` to the values seen there.
    values_at: BTreeMap<(i32, i64), BTreeSet<String>>,
    /// Value to every `(partition, offset)` it was seen at.
    offsets_of: HashMap<String, BTreeSet<(i32, i64)>>,
    /// Values some poll returned.
    polled: HashSet<String>,
    /// The highest offset any poll returned, by partition.
    read_max: HashMap<i32, i64>,
}

impl Positions {
    fn see(&mut self, partition: i32, offset: i64, value: &str) {
        self.values_at
            .entry((partition, offset))
            .or_default()
            .insert(value.to_string());
        self.offsets_of
            .entry(value.to_string())
            .or_default()
            .insert((partition, offset));
    }

    fn of(history: &[Op]) -> Positions {
        let mut positions = Positions::default();
        for op in history {
            match op {
                Op::Send {
                    partition,
                    value,
                    outcome: SendOutcome::Ok { offset },
                    ..
                } => positions.see(*partition, *offset, value),
                Op::Poll { records, .. } => {
                    for record in records {
                        positions.see(record.partition, record.offset, &record.value);
                        positions.polled.insert(record.value.clone());
                        let max = positions.read_max.entry(record.partition).or_insert(-1);
                        *max = (*max).max(record.offset);
                    }
                }
                _ => {}
            }
        }
        positions
    }
}

/// `history` with the sends of transactions that did not surely commit
/// turned into `info`: what counts as acknowledged.
pub fn settle(history: &[Op]) -> Vec<Op> {
    settled(history, &txn_fates(history))
}

/// Every anomaly of `history`; empty when it is consistent.
pub fn check(history: &[Op]) -> Vec<Anomaly> {
    let fates = txn_fates(history);
    let settled = settled(history, &fates);
    let positions = Positions::of(&settled);
    let mut anomalies = check_positions(&positions);
    anomalies.extend(check_acknowledged(&settled, &positions));
    anomalies.extend(check_assigned_polls(&settled, &positions));
    anomalies.extend(check_sends(&settled));
    anomalies.extend(check_commits(&settled));
    anomalies.extend(check_transactions(history, &fates));
    anomalies
}

/// Each transaction's end: when its commit or abort began, and the outcome.
fn txn_fates(history: &[Op]) -> HashMap<&str, (u64, &TxnOutcome)> {
    history
        .iter()
        .filter_map(|op| match op {
            Op::TxnEnd {
                txn,
                start_ms,
                outcome,
                ..
            } => Some((txn.as_str(), (*start_ms, outcome))),
            _ => None,
        })
        .collect()
}

/// The history with each send of a transaction that did not surely commit
/// turned into `info`: the checks above then expect only committed
/// values, and an aborted one neither counts as lost nor as a known value
/// a `read_committed` consumer may not skip.
fn settled(history: &[Op], fates: &HashMap<&str, (u64, &TxnOutcome)>) -> Vec<Op> {
    history
        .iter()
        .map(|op| match op {
            Op::Send {
                txn: Some(txn),
                outcome: SendOutcome::Ok { .. },
                ..
            } if !matches!(fates.get(txn.as_str()), Some((_, TxnOutcome::Committed))) => {
                let mut op = op.clone();
                if let Op::Send { outcome, .. } = &mut op {
                    *outcome = SendOutcome::Info {
                        error: format!("transaction {txn} did not surely commit"),
                    };
                }
                op
            }
            _ => op.clone(),
        })
        .collect()
}

/// `G1a` (a polled value of an aborted transaction) and
/// `precommitted-read` (a poll that ended before the commit of the
/// value's transaction began).
fn check_transactions(history: &[Op], fates: &HashMap<&str, (u64, &TxnOutcome)>) -> Vec<Anomaly> {
    let txn_of: HashMap<&str, &str> = history
        .iter()
        .filter_map(|op| match op {
            Op::Send {
                value,
                txn: Some(txn),
                ..
            } => Some((value.as_str(), txn.as_str())),
            _ => None,
        })
        .collect();
    let mut anomalies = Vec::new();
    for op in history {
        let Op::Poll {
            process,
            end_ms,
            records,
            ..
        } = op
        else {
            continue;
        };
        for record in records {
            let Some(txn) = txn_of.get(record.value.as_str()) else {
                continue;
            };
            let class = match fates.get(txn) {
                Some((_, TxnOutcome::Aborted)) => G1A,
                Some((commit_ms, _)) if end_ms < commit_ms => PRECOMMITTED_READ,
                _ => continue,
            };
            anomalies.push(Anomaly {
                class,
                partition: record.partition,
                detail: format!(
                    "{process} read {} (transaction {txn}) at offset {}",
                    record.value, record.offset
                ),
            });
        }
    }
    anomalies
}

/// `inconsistent-offsets` and `duplicate`.
fn check_positions(positions: &Positions) -> Vec<Anomaly> {
    let mut anomalies = Vec::new();
    for ((partition, offset), values) in &positions.values_at {
        if values.len() > 1 {
            anomalies.push(Anomaly {
                class: INCONSISTENT_OFFSETS,
                partition: *partition,
                detail: format!("offset {offset} holds {values:?}"),
            });
        }
    }
    let mut duplicates: Vec<(&String, &BTreeSet<(i32, i64)>)> = positions
        .offsets_of
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .collect();
    duplicates.sort();
    for (value, at) in duplicates {
        anomalies.push(Anomaly {
            class: DUPLICATE,
            partition: at.first().map_or(-1, |(partition, _)| *partition),
            detail: format!("{value} at (partition, offset) {at:?}"),
        });
    }
    anomalies
}

/// `lost-write` and `unseen`: acknowledged values no poll returned.
fn check_acknowledged(history: &[Op], positions: &Positions) -> Vec<Anomaly> {
    let mut anomalies = Vec::new();
    for op in history {
        let Op::Send {
            partition,
            value,
            outcome: SendOutcome::Ok { offset },
            ..
        } = op
        else {
            continue;
        };
        if positions.polled.contains(value) {
            continue;
        }
        let read_max = positions.read_max.get(partition).copied().unwrap_or(-1);
        let (class, detail) = if read_max > *offset {
            (
                LOST_WRITE,
                format!("{value} acknowledged at {offset}, consumers read up to {read_max}"),
            )
        } else {
            (
                UNSEEN,
                format!("{value} acknowledged at {offset}, consumers read up to {read_max}"),
            )
        };
        anomalies.push(Anomaly {
            class,
            partition: *partition,
            detail,
        });
    }
    anomalies
}

/// `poll-skip` and `nonmonotonic-poll` of each `assign` consumer: its
/// assignment never changes, so its offsets per partition must run on by
/// one. A gap is a skip only if the offsets jumped over held a value some
/// client saw (a gap of nothing known is not evidence).
fn check_assigned_polls(history: &[Op], positions: &Positions) -> Vec<Anomaly> {
    let mut anomalies = Vec::new();
    let mut last: HashMap<(&str, i32), i64> = HashMap::new();
    for op in history {
        let Op::Poll {
            process,
            mode: ConsumerMode::Assign,
            records,
            ..
        } = op
        else {
            continue;
        };
        for record in records {
            let key = (process.as_str(), record.partition);
            if let Some(&previous) = last.get(&key) {
                let detail = format!("{process}: offset {previous} then {}", record.offset);
                if record.offset <= previous {
                    anomalies.push(Anomaly {
                        class: NONMONOTONIC_POLL,
                        partition: record.partition,
                        detail,
                    });
                } else if positions
                    .values_at
                    .range((record.partition, previous + 1)..(record.partition, record.offset))
                    .next()
                    .is_some()
                {
                    anomalies.push(Anomaly {
                        class: POLL_SKIP,
                        partition: record.partition,
                        detail,
                    });
                }
            }
            last.insert(key, record.offset);
        }
    }
    anomalies
}

/// `nonmonotonic-send`: a producer sends one record at a time, so its
/// acknowledged offsets in one partition must rise in history order.
fn check_sends(history: &[Op]) -> Vec<Anomaly> {
    let mut anomalies = Vec::new();
    let mut last: HashMap<(&str, i32), (i64, &str)> = HashMap::new();
    for op in history {
        let Op::Send {
            process,
            partition,
            value,
            outcome: SendOutcome::Ok { offset },
            ..
        } = op
        else {
            continue;
        };
        let key = (process.as_str(), *partition);
        if let Some(&(previous, previous_value)) = last.get(&key) {
            if *offset <= previous {
                anomalies.push(Anomaly {
                    class: NONMONOTONIC_SEND,
                    partition: *partition,
                    detail: format!(
                        "{process}: {previous_value} at {previous}, then {value} at {offset}"
                    ),
                });
            }
        }
        last.insert(key, (*offset, value));
    }
    anomalies
}

/// `lost-commit`: a read of the committed offsets that began after a
/// commit succeeded must not be below what that commit stored (commits of
/// one group only move forward: a new owner starts from the committed
/// offset, and a fenced member's commit fails).
fn check_commits(history: &[Op]) -> Vec<Anomaly> {
    let mut anomalies = Vec::new();
    for op in history {
        let Op::CommittedRead {
            process,
            start_ms,
            offsets,
            ..
        } = op
        else {
            continue;
        };
        for &(partition, read) in offsets {
            let committed = history
                .iter()
                .filter_map(|op| match op {
                    Op::Commit {
                        end_ms,
                        offsets,
                        ok: true,
                        ..
                    } if end_ms < start_ms => offsets
                        .iter()
                        .find(|(p, _)| *p == partition)
                        .map(|(_, offset)| *offset),
                    _ => None,
                })
                .max();
            if let Some(committed) = committed.filter(|committed| read < *committed) {
                anomalies.push(Anomaly {
                    class: LOST_COMMIT,
                    partition,
                    detail: format!("{process} read {read} after a commit of {committed}"),
                });
            }
        }
    }
    anomalies
}

#[cfg(test)]
#[path = "checker_tests.rs"]
mod tests;

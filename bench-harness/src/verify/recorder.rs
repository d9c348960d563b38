//! The shared, append-only log the clients write their operations to,
//! with the run's clock: every timestamp is milliseconds since the run
//! began, so the history, the fault windows and the availability figures
//! are on one time line.

use super::history::{Op, SendOutcome, TxnOutcome};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// How far the consumers have to read: what the drain waits for.
#[derive(Default)]
struct Progress {
    /// Highest offset that must be read, by partition: acknowledged sends
    /// outside transactions, and those of committed transactions.
    must_read: HashMap<i32, i64>,
    /// Acknowledged `(partition, offset)`s of transactions not yet ended.
    pending: HashMap<String, Vec<(i32, i64)>>,
    /// Highest offset any poll returned, by partition.
    polled: HashMap<i32, i64>,
}

impl Progress {
    fn must_read(&mut self, partition: i32, offset: i64) {
        let max = self.must_read.entry(partition).or_insert(offset);
        *max = (*max).max(offset);
    }

    fn note(&mut self, op: &Op) {
        match op {
            Op::Send {
                partition,
                outcome: SendOutcome::Ok { offset },
                txn,
                ..
            } => match txn {
                None => self.must_read(*partition, *offset),
                Some(txn) => self
                    .pending
                    .entry(txn.clone())
                    .or_default()
                    .push((*partition, *offset)),
            },
            Op::TxnEnd { txn, outcome, .. } => {
                let sent = self.pending.remove(txn).unwrap_or_default();
                if *outcome == TxnOutcome::Committed {
                    for (partition, offset) in sent {
                        self.must_read(partition, offset);
                    }
                }
            }
            Op::Poll { records, .. } => {
                for record in records {
                    let max = self.polled.entry(record.partition).or_insert(record.offset);
                    *max = (*max).max(record.offset);
                }
            }
            _ => {}
        }
    }

    fn caught_up(&self) -> bool {
        self.must_read.iter().all(|(partition, offset)| {
            self.polled
                .get(partition)
                .is_some_and(|read| read >= offset)
        })
    }
}

#[derive(Default)]
struct Log {
    ops: Vec<Op>,
    progress: Progress,
}

/// Operations in the order they completed.
pub struct Recorder {
    started: Instant,
    log: Mutex<Log>,
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            started: Instant::now(),
            log: Mutex::new(Log::default()),
        }
    }

    /// Milliseconds since the run began.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        // A client thread that panicked mid-push leaves a whole Vec: the
        // history before it is still good, so poisoning is not fatal.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn push(&self, op: Op) {
        let mut log = self.log();
        log.progress.note(&op);
        log.ops.push(op);
    }

    /// Whether, in every partition, some consumer has read up to the
    /// highest offset acknowledged (and committed) so far.
    pub fn caught_up(&self) -> bool {
        self.log().progress.caught_up()
    }

    /// Everything recorded so far, in completion order.
    pub fn snapshot(&self) -> Vec<Op> {
        self.log().ops.clone()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::history::PolledRecord;

    fn send(offset: i64, txn: Option<&str>) -> Op {
        Op::Send {
            process: "p0".into(),
            partition: 0,
            value: format!("p0/{offset}"),
            start_ms: 0,
            end_ms: 0,
            outcome: SendOutcome::Ok { offset },
            txn: txn.map(String::from),
        }
    }

    fn poll(offset: i64) -> Op {
        Op::Poll {
            process: "c0".into(),
            mode: crate::verify::history::ConsumerMode::Assign,
            start_ms: 0,
            end_ms: 0,
            records: vec![PolledRecord {
                partition: 0,
                offset,
                value: String::new(),
            }],
        }
    }

    fn end(txn: &str, outcome: TxnOutcome) -> Op {
        Op::TxnEnd {
            process: "p0".into(),
            txn: txn.into(),
            start_ms: 0,
            end_ms: 0,
            outcome,
        }
    }

    #[test]
    fn caught_up_once_the_highest_committed_offset_is_read() {
        let recorder = Recorder::new();
        assert!(recorder.caught_up());
        recorder.push(send(0, None));
        recorder.push(send(1, None));
        assert!(!recorder.caught_up());
        recorder.push(poll(0));
        assert!(!recorder.caught_up());
        recorder.push(poll(1));
        assert!(recorder.caught_up());
        // An aborted transaction's offsets are never read: not waited for.
        recorder.push(send(2, Some("t0")));
        recorder.push(end("t0", TxnOutcome::Aborted));
        assert!(recorder.caught_up());
        recorder.push(send(4, Some("t1")));
        assert!(recorder.caught_up());
        recorder.push(end("t1", TxnOutcome::Committed));
        assert!(!recorder.caught_up());
        recorder.push(poll(4));
        assert!(recorder.caught_up());
    }
}

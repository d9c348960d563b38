//! The shared, append-only log the clients write their operations to,
//! with the run's clock: every timestamp is milliseconds since the run
//! began, so the history, the fault windows and the availability figures
//! are on one time line.

use super::history::Op;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Operations in the order they completed.
pub struct Recorder {
    started: Instant,
    ops: Mutex<Vec<Op>>,
    /// Records returned by polls so far: the drain watches this, not the
    /// op count, which commits keep raising when nothing new arrives.
    records_polled: AtomicU64,
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            started: Instant::now(),
            ops: Mutex::new(Vec::new()),
            records_polled: AtomicU64::new(0),
        }
    }

    /// Milliseconds since the run began.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn push(&self, op: Op) {
        if let Op::Poll { records, .. } = &op {
            self.records_polled
                .fetch_add(records.len() as u64, Ordering::SeqCst);
        }
        // A client thread that panicked mid-push leaves a whole Vec: the
        // history before it is still good, so poisoning is not fatal.
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(op);
    }

    /// How many records the polls have returned so far.
    pub fn records_polled(&self) -> u64 {
        self.records_polled.load(Ordering::SeqCst)
    }

    /// Everything recorded so far, in completion order.
    pub fn snapshot(&self) -> Vec<Op> {
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

//! The shared, append-only log the clients write their operations to,
//! with the run's clock: every timestamp is milliseconds since the run
//! began, so the history, the fault windows and the availability figures
//! are on one time line.

use super::history::Op;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Operations in the order they completed.
pub struct Recorder {
    started: Instant,
    ops: Mutex<Vec<Op>>,
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            started: Instant::now(),
            ops: Mutex::new(Vec::new()),
        }
    }

    /// Milliseconds since the run began.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn push(&self, op: Op) {
        // A client thread that panicked mid-push leaves a whole Vec: the
        // history before it is still good, so poisoning is not fatal.
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(op);
    }

    /// How many operations are recorded.
    pub fn len(&self) -> usize {
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

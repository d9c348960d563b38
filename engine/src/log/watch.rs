//! A shard-local watched offset: tasks wait until it passes a target.
//!
//! The flusher advances `written`, `durable` and the high watermark; produce
//! requests (acks) and long-polling fetches wait on them. Every advance wakes
//! all waiters, which re-check their own target: an advance covers a whole
//! group commit, so nearly every waiter it wakes is done. A waiter polled
//! again without having been woken (a combinator re-polling it) does not
//! register twice; it remembers the wake generation it registered in, so
//! registering stays O(1) with hundreds of producers waiting on one sync.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

/// An offset that only grows, with waiters. Shard-local.
#[derive(Debug)]
pub struct OffsetWatch {
    value: Cell<i64>,
    failed: Cell<bool>,
    closed: Cell<bool>,
    wakers: RefCell<Vec<Waker>>,
    /// Incremented by every wake-up of all waiters.
    generation: Cell<u64>,
}

/// Why a wait ended without reaching its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// The disk failed; the data may not be durable.
    Failed,
    /// The log was closed.
    Closed,
}

impl OffsetWatch {
    /// A watch starting at `value`.
    pub fn new(value: i64) -> Self {
        OffsetWatch {
            value: Cell::new(value),
            failed: Cell::new(false),
            closed: Cell::new(false),
            wakers: RefCell::new(Vec::new()),
            generation: Cell::new(0),
        }
    }

    /// The current value.
    pub fn get(&self) -> i64 {
        self.value.get()
    }

    /// Sets the value (growing or, on truncation, shrinking) and wakes waiters.
    pub fn set(&self, value: i64) {
        self.value.set(value);
        self.wake_all();
    }

    /// Marks a failure: every waiter returns `Failed`.
    pub fn fail(&self) {
        self.failed.set(true);
        self.wake_all();
    }

    /// Marks the log closed: every waiter returns `Closed`.
    pub fn close(&self) {
        self.closed.set(true);
        self.wake_all();
    }

    fn wake_all(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for waker in wakers {
            waker.wake();
        }
    }

    /// Waits until the value is greater than `target`.
    pub async fn wait_past(&self, target: i64) -> Result<(), WatchEnd> {
        // The generation and waker this wait is registered with, if any.
        let mut registered: Option<(u64, Waker)> = None;
        poll_fn(|cx| {
            if self.value.get() > target {
                return Poll::Ready(Ok(()));
            }
            if self.failed.get() {
                return Poll::Ready(Err(WatchEnd::Failed));
            }
            if self.closed.get() {
                return Poll::Ready(Err(WatchEnd::Closed));
            }
            let generation = self.generation.get();
            if let Some((g, waker)) = &registered {
                if *g == generation && waker.will_wake(cx.waker()) {
                    return Poll::Pending;
                }
            }
            self.wakers.borrow_mut().push(cx.waker().clone());
            registered = Some((generation, cx.waker().clone()));
            Poll::Pending
        })
        .await
    }
}

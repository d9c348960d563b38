//! What travels between shards over glommio's channel mesh: an [`Envelope`],
//! a boxed job that the receiving shard opens on its own executor.
//!
//! The mesh knows no service. A service (routing, the topic controller, the
//! group and transaction coordinators, later replication and cluster
//! metadata) defines its own typed request and reply and implements
//! [`crate::call::OwnerCall`] for the request; [`crate::call`] packs it with
//! a reply slot into an envelope. So adding a service adds a request type,
//! never a case here, and this file imports nothing of the crate.
//!
//! Everything in an envelope is `Send`: owned bytes, owned file descriptors,
//! and a `futures::channel::oneshot` reply slot (its waker may be on another
//! core; glommio forwards foreign wakes to the owning executor).

use std::rc::Rc;

/// A job for the receiving shard, given its context.
type Job<C> = Box<dyn FnOnce(&Rc<C>) + Send>;

/// One message from one shard to another: a job run on the receiver with its
/// shard-local context `C` (the receiving shard).
pub struct Envelope<C: 'static> {
    job: Job<C>,
}

impl<C: 'static> Envelope<C> {
    /// Wraps a job. It runs on the receiving shard's receive loop, so it must
    /// not block: jobs that wait spawn a task (as [`crate::call`] does).
    pub fn new(job: impl FnOnce(&Rc<C>) + Send + 'static) -> Self {
        Envelope { job: Box::new(job) }
    }

    /// Runs the job on the receiving shard.
    pub fn open(self, context: &Rc<C>) {
        (self.job)(context)
    }
}

impl<C: 'static> std::fmt::Debug for Envelope<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Envelope")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn an_envelope_runs_its_job_with_the_receivers_context() {
        let context = Rc::new(Cell::new(1));
        let envelope: Envelope<Cell<i32>> = Envelope::new(|c: &Rc<Cell<i32>>| c.set(c.get() + 41));
        // The envelope is Send: it crosses cores before it is opened.
        let envelope = std::thread::spawn(move || envelope).join().expect("thread");
        envelope.open(&context);
        assert_eq!(context.get(), 42);
    }
}

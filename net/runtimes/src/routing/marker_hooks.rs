//! [`MarkerHooks`]: what runs on a partition's owner shard once a
//! transaction marker is durable there. The group coordinator resolves the
//! transactional offsets staged under the marker's producer id when the
//! partition is one of `__consumer_offsets` (a hook, so that routing does
//! not depend on the coordinators above it).

use crate::Shard;
use engine::{ErrorCode, TopicPartition};
use futures::future::LocalBoxFuture;
use std::cell::RefCell;
use std::rc::Rc;

/// A hook: (shard, partition, producer id, commit) → done, or the error
/// that makes the marker's writer send it again.
pub type MarkerHook = Rc<
    dyn Fn(Rc<Shard>, TopicPartition, i64, bool) -> LocalBoxFuture<'static, Result<(), ErrorCode>>,
>;

/// The hooks of one shard.
#[derive(Default)]
pub struct MarkerHooks {
    hooks: RefCell<Vec<MarkerHook>>,
}

impl MarkerHooks {
    /// Adds a hook, run after every marker this shard writes.
    pub fn add(&self, hook: MarkerHook) {
        self.hooks.borrow_mut().push(hook);
    }

    /// Runs every hook for a durable marker, in order; the first error stops.
    pub(super) async fn run(
        shard: &Rc<Shard>,
        tp: &TopicPartition,
        producer_id: i64,
        commit: bool,
    ) -> Result<(), ErrorCode> {
        let hooks = shard.runtime().marker_hooks.hooks.borrow().clone();
        for hook in hooks {
            hook(shard.clone(), tp.clone(), producer_id, commit).await?;
        }
        Ok(())
    }
}

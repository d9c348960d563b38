//! Fetch long polls: wait until any of a fetch's partitions has data past
//! the fetcher's offset, on the partitions' owner shards.

use super::split::split_by_owner;
use crate::Shard;
use engine::TopicPartition;
use futures::future::{select, select_all};
use kernel::call::OwnerCall;
use std::rc::Rc;
use std::time::Duration;

/// Long poll: resolves when any of `parts` has data past its offset, or at `timeout`.
pub async fn wait_for_any(shard: &Rc<Shard>, parts: Vec<(TopicPartition, i64)>, timeout: Duration) {
    if parts.is_empty() || timeout.is_zero() {
        return;
    }
    let groups = split_by_owner(parts.iter().map(|(tp, _)| tp), shard.count);
    let mut waits: Vec<futures::future::LocalBoxFuture<'_, ()>> = Vec::new();
    for (owner, positions) in groups {
        let parts: Vec<(TopicPartition, i64)> =
            positions.iter().map(|&p| parts[p].clone()).collect();
        let shard = shard.clone();
        waits.push(Box::pin(async move {
            // A failed call (owner gone) ends the wait early: the fetch is
            // answered with what there is, which is what a timeout does too.
            let _ = shard.call(owner, WaitForData { parts }).await;
        }));
    }
    let timer = glommio::timer::sleep(timeout);
    futures::pin_mut!(timer);
    // Dropping the losers cancels local waits and, through the dropped
    // reply slots, the waiters on other shards.
    let _ = select(select_all(waits), timer).await;
}

/// Resolves once any partition has data past its offset. The owner stops
/// waiting when the fetcher stops (fetch answered by another partition or
/// by its timeout).
#[derive(Debug)]
pub struct WaitForData {
    /// (partition, offset the fetcher waits past).
    pub parts: Vec<(TopicPartition, i64)>,
}

impl OwnerCall<crate::ShardRuntime> for WaitForData {
    type Reply = ();
    const CANCEL_WHEN_ASKER_GONE: bool = true;

    async fn run(self, shard: Rc<Shard>) -> () {
        let mut waits: Vec<futures::future::LocalBoxFuture<'static, ()>> = Vec::new();
        for (tp, offset) in self.parts {
            // `wait_for_any` groups the partitions by `shard_of` over the
            // same shard count, and the call runs on the shard it was sent to.
            assert_eq!(
                shard.owner(&tp),
                shard.id,
                "a long poll waits on the partition's owner: {tp:?} is shard {}'s, waited on shard {}",
                shard.owner(&tp),
                shard.id
            );
            if let Some(log) = shard.logs.get(&tp) {
                waits.push(Box::pin(async move { log.wait_for_data(offset).await }));
            }
        }
        if waits.is_empty() {
            // Partitions gone: let the fetcher re-read and see the error.
            return;
        }
        let _ = select_all(waits).await;
    }
}

//! Routing: split a request's partition work by owner shard, run it there,
//! join the replies back in request order. A service: handlers, the topic
//! controller and the coordinators call it; it calls the shard runtime
//! ([`Shard::call`]) and the engine.
//!
//! - [`ops`]: the partition operations and their replies (all `Send`).
//! - [`split`]: split by owner, join by position (pure).
//! - [`owner`]: what the owner shard does for each operation.
//! - [`long_poll`]: fetch reads, and their long polls, on the owners.
//! - `marker_hooks.rs`: what runs once a transaction marker is durable.
//! - [`txn_join`]: a transaction's first batch on a partition joins (or is
//!   checked in) its transaction at the coordinator before the append.

mod long_poll;
mod marker_hooks;
mod ops;
mod owner;
mod split;
pub mod txn_join;

pub use long_poll::{read_or_wait, ReadOrWait};
pub use marker_hooks::{MarkerHook, MarkerHooks};
pub use ops::{
    PartitionOp, PartitionRead, PartitionReply, PartitionState, ProduceOutcome, ProduceRefusal,
    ReadOptions, ReadOutcome,
};
pub(crate) use owner::{missing_partition_error, offset_of};
pub use split::{join_by_position, split_by_owner};
pub use txn_join::{CoordinatorAsk, JoinGuards, TxnJoin};

use crate::Shard;
use engine::ErrorCode;
use engine::TopicPartition;
use futures::future::join_all;
use kernel::call::OwnerCall;
use ops::OpKind;
use std::rc::Rc;

/// Partition work for one owner shard; replies in the order of `ops`.
#[derive(Debug)]
pub struct PartitionWork {
    /// The operations, all on partitions the receiving shard owns.
    pub ops: Vec<PartitionOp>,
}

impl OwnerCall<crate::ShardRuntime> for PartitionWork {
    type Reply = Vec<PartitionReply>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        // `run_on_owners` groups the operations by `shard_of` over the same
        // shard count, and the call runs on the shard it was sent to.
        for op in &self.ops {
            let tp = op.topic_partition();
            assert_eq!(
                shard.owner(tp),
                shard.id,
                "partition work runs on the partition's owner: {tp:?} is shard {}'s, run on shard {}",
                shard.owner(tp),
                shard.id
            );
        }
        owner::execute_local(&shard, self.ops).await
    }
}

/// Runs `ops` on their owner shards and returns the replies in the order of `ops`.
pub async fn run_on_owners(shard: &Rc<Shard>, ops: Vec<PartitionOp>) -> Vec<PartitionReply> {
    let total = ops.len();
    let kinds: Vec<OpKind> = ops.iter().map(OpKind::of).collect();
    let groups = split_by_owner(ops.iter().map(PartitionOp::topic_partition), shard.count);
    if groups.len() == 1 && groups.contains_key(&shard.id) {
        // Common single-shard case: no bookkeeping.
        let replies = owner::execute_local(shard, ops).await;
        assert_eq!(
            replies.len(),
            total,
            "partition work answers each operation once: {} replies to {total} operations",
            replies.len()
        );
        return replies;
    }
    let mut slots: Vec<Option<PartitionOp>> = ops.into_iter().map(Some).collect();
    let mut pending = Vec::with_capacity(groups.len());
    for (owner, positions) in groups {
        let ops: Vec<PartitionOp> = positions.iter().filter_map(|&p| slots[p].take()).collect();
        pending.push(async move {
            match shard.call(owner, PartitionWork { ops }).await {
                Ok(replies) => (positions, Some(replies)),
                Err(e) => {
                    tracing::warn!(owner, error = %e, "partition work not delivered");
                    (positions, None)
                }
            }
        });
    }
    let groups = join_all(pending).await;
    join_by_position(total, groups, |position| {
        kinds[position].error_reply(ErrorCode::NotLeaderOrFollower)
    })
}

/// Checks `(topic, partition)` pairs against the topic table, runs `make_op`
/// for the ones that exist on their owners, and answers per pair in order:
/// the reply, or UNKNOWN_TOPIC_OR_PARTITION.
pub async fn run_checked(
    shard: &Rc<Shard>,
    pairs: &[(String, i32)],
    make_op: impl FnMut(TopicPartition, usize) -> PartitionOp,
) -> Vec<Result<PartitionReply, ErrorCode>> {
    run_authorized(shard, pairs, |_| true, make_op).await
}

/// [`run_checked`] for a caller who may act only on the topics
/// `authorized` accepts (its ACLs): the others are answered
/// TOPIC_AUTHORIZATION_FAILED, whether they exist or not, as Kafka does.
pub async fn run_authorized(
    shard: &Rc<Shard>,
    pairs: &[(String, i32)],
    authorized: impl Fn(&str) -> bool,
    mut make_op: impl FnMut(TopicPartition, usize) -> PartitionOp,
) -> Vec<Result<PartitionReply, ErrorCode>> {
    let mut ops = Vec::new();
    let mut positions = Vec::with_capacity(pairs.len());
    let mut refused = vec![false; pairs.len()];
    {
        let table = shard.topics.borrow();
        for (index, (topic, partition)) in pairs.iter().enumerate() {
            if !authorized(topic) {
                refused[index] = true;
                positions.push(None);
                continue;
            }
            let exists = table
                .get(topic)
                .is_some_and(|e| *partition >= 0 && *partition < e.partitions);
            if exists {
                positions.push(Some(ops.len()));
                ops.push(make_op(
                    TopicPartition::new(topic.clone(), *partition),
                    index,
                ));
            } else {
                positions.push(None);
            }
        }
    }
    let asked = ops.len();
    let mut replies: Vec<Option<PartitionReply>> = run_on_owners(shard, ops)
        .await
        .into_iter()
        .map(Some)
        .collect();
    assert_eq!(
        replies.len(),
        asked,
        "the owners answer each partition asked once: {} replies to {asked} operations",
        replies.len()
    );
    positions
        .into_iter()
        .zip(refused)
        .map(|(position, refused)| {
            if refused {
                return Err(ErrorCode::TopicAuthorizationFailed);
            }
            position
                .and_then(|p| replies.get_mut(p).and_then(Option::take))
                .ok_or(ErrorCode::UnknownTopicOrPartition)
        })
        .collect()
}

//! Fetch reads and long polls: each owner shard of a fetch's partitions
//! gets one call, [`ReadOrWait`], that reads its partitions and — when they
//! hold less than the fetch still needs — waits on them for new data (or the
//! deadline) and reads again, all on the owner. A long poll that wakes is
//! then one cross-shard round trip, not three (read, wait, read again).
//!
//! `min_bytes` counts over the whole fetch, whose partitions may live on
//! several owners. With one owner (every partition on one shard) that owner
//! decides alone. With several, the asker first reads them all without
//! waiting (one call each, in parallel); if that is short, each owner waits
//! for what the others do not already give (`min_bytes` less their bytes)
//! and answers when it has that, or when it woke with something new, so
//! the asker can sum again. The fetch is answered as soon as the sum is
//! reached (the owners still waiting are cancelled, and their partitions
//! are answered with their last read), and at the deadline with each
//! owner's last read, made at the deadline.

use super::ops::{PartitionRead, ReadOptions, ReadOutcome};
use super::owner::read_partition;
use super::split::split_by_owner;
use crate::Shard;
use engine::ErrorCode;
use engine::TopicPartition;
use futures::future::{join_all, select, select_all};
use futures::stream::{FuturesUnordered, StreamExt};
use kernel::call::OwnerCall;
use std::rc::Rc;
use std::time::Instant;

/// Reads `reads` on their owners; while they hold fewer than `min_bytes`
/// in all, none failed and `deadline` is ahead, waits for new data on any
/// of them. The outcomes are in the order of `reads`.
pub async fn read_or_wait(
    shard: &Rc<Shard>,
    reads: Vec<PartitionRead>,
    options: ReadOptions,
    min_bytes: usize,
    deadline: Instant,
) -> Vec<ReadOutcome> {
    let groups: Vec<(usize, Vec<usize>)> = split_by_owner(reads.iter().map(|r| &r.tp), shard.count)
        .into_iter()
        .collect();
    let mut poll = Poll {
        shard,
        outcomes: (0..reads.len()).map(|_| None).collect(),
        reads,
        options,
        min_bytes,
        deadline,
    };
    // One owner decides alone; several are first read without a wait, so
    // that what they hold together is known before any of them waits.
    let first_min_bytes = if groups.len() == 1 { min_bytes } else { 0 };
    let first = join_all(
        groups
            .iter()
            .enumerate()
            .map(|(index, (owner, positions))| {
                poll.call(index, *owner, positions, first_min_bytes)
            }),
    )
    .await;
    for (index, outcomes) in first {
        poll.fill(&groups[index].1, outcomes);
    }
    if !poll.satisfied() && Instant::now() < deadline {
        poll.wait_rounds(&groups).await;
    }
    // Every read is in one group, and each group's first answer filled
    // all of its reads (`Poll::fill` checks the count).
    poll.outcomes
        .into_iter()
        .enumerate()
        .map(|(position, outcome)| match outcome {
            Some(outcome) => outcome,
            None => panic!("a fetch read is answered by its owner: read {position} was not"),
        })
        .collect()
}

/// The asker's view of a fetch's long poll.
struct Poll<'a> {
    shard: &'a Rc<Shard>,
    reads: Vec<PartitionRead>,
    options: ReadOptions,
    min_bytes: usize,
    deadline: Instant,
    /// The last outcome of each read, in the order of `reads`.
    outcomes: Vec<Option<ReadOutcome>>,
}

impl Poll<'_> {
    fn fill(&mut self, positions: &[usize], outcomes: Vec<ReadOutcome>) {
        assert_eq!(
            positions.len(),
            outcomes.len(),
            "an owner answers each read once: {} outcomes for {} reads",
            outcomes.len(),
            positions.len()
        );
        for (&position, outcome) in positions.iter().zip(outcomes) {
            self.outcomes[position] = Some(outcome);
        }
    }

    /// Bytes ready at `positions`.
    fn ready_at(&self, positions: &[usize]) -> usize {
        positions
            .iter()
            .filter_map(|&p| self.outcomes[p].as_ref())
            .map(|o| o.data.len())
            .sum()
    }

    /// Enough data, or a partition that failed or was sent to another
    /// replica: answer now.
    fn satisfied(&self) -> bool {
        let ready: usize = self.outcomes.iter().flatten().map(|o| o.data.len()).sum();
        let answered = self.outcomes.iter().flatten().any(ReadOutcome::ends_poll);
        ready >= self.min_bytes || answered
    }

    /// What the owner at `positions` must bring for the fetch to be
    /// answered: `min_bytes` less what the other owners already hold.
    fn owed_by(&self, positions: &[usize]) -> usize {
        let all: usize = self.outcomes.iter().flatten().map(|o| o.data.len()).sum();
        let others = all - self.ready_at(positions);
        self.min_bytes.saturating_sub(others)
    }

    /// Every owner waits for its share; an owner that answers short of the
    /// sum before the deadline is called again. Ends when the sum is there
    /// (dropping the other calls cancels their waits) or every owner has
    /// answered at the deadline.
    async fn wait_rounds(&mut self, groups: &[(usize, Vec<usize>)]) {
        let mut pending = FuturesUnordered::new();
        for (index, (owner, positions)) in groups.iter().enumerate() {
            let owed = self.owed_by(positions);
            pending.push(self.call(index, *owner, positions, owed));
        }
        while let Some((index, outcomes)) = pending.next().await {
            let (owner, positions) = &groups[index];
            self.fill(positions, outcomes);
            if self.satisfied() {
                return;
            }
            if Instant::now() < self.deadline {
                let owed = self.owed_by(positions);
                pending.push(self.call(index, *owner, positions, owed));
            }
        }
    }

    /// One owner's call for the reads at `positions`, its answer tagged
    /// with the group (`index`) it is for. A failed call (the owner gone)
    /// answers them NOT_LEADER_OR_FOLLOWER, as a read there would. Owns
    /// what it sends, so it does not borrow `self` while pending.
    fn call(
        &self,
        index: usize,
        owner: usize,
        positions: &[usize],
        min_bytes: usize,
    ) -> futures::future::LocalBoxFuture<'static, (usize, Vec<ReadOutcome>)> {
        let shard = self.shard.clone();
        let count = positions.len();
        let call = ReadOrWait {
            reads: positions.iter().map(|&p| self.reads[p].clone()).collect(),
            options: self.options.clone(),
            min_bytes,
            deadline: self.deadline,
        };
        Box::pin(async move {
            let outcomes = match shard.call(owner, call).await {
                Ok(outcomes) => outcomes,
                Err(e) => {
                    tracing::warn!(owner, error = %e, "fetch read not delivered");
                    (0..count)
                        .map(|_| ReadOutcome::error(ErrorCode::NotLeaderOrFollower))
                        .collect()
                }
            };
            (index, outcomes)
        })
    }
}

/// Reads partitions this shard owns; when they hold fewer than `min_bytes`,
/// none failed and the deadline is ahead, waits for data past what was read
/// (or the deadline) and reads again. Changes nothing, so the owner drops
/// it when the asker stops waiting (fetch answered by another owner).
#[derive(Debug)]
pub struct ReadOrWait {
    /// The reads, all of partitions the receiving shard owns.
    pub reads: Vec<PartitionRead>,
    /// How to read.
    pub options: ReadOptions,
    /// Bytes that make waiting needless (0: never wait).
    pub min_bytes: usize,
    /// When a wait ends without data.
    pub deadline: Instant,
}

impl ReadOrWait {
    async fn read_all(&self, shard: &Rc<Shard>) -> Vec<ReadOutcome> {
        join_all(
            self.reads
                .iter()
                .map(|read| read_partition(shard, read, &self.options)),
        )
        .await
    }

    /// Waits until any read partition has data past what `outcomes` gave
    /// (its high watermark, or the fetch offset if further), or the deadline.
    async fn wait_past(&self, shard: &Rc<Shard>, outcomes: &[ReadOutcome]) {
        let mut waits: Vec<futures::future::LocalBoxFuture<'static, ()>> = Vec::new();
        for (read, outcome) in self.reads.iter().zip(outcomes) {
            // The offset after the ready data is not known here (a file
            // range is not parsed), so wait on the high watermark.
            let offset = read.offset.max(outcome.high_watermark);
            if let Some(log) = shard.logs.get(&read.tp) {
                waits.push(Box::pin(async move { log.wait_for_data(offset).await }));
            }
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        if waits.is_empty() || left.is_zero() {
            // Partitions gone: read again and answer the error.
            return;
        }
        let timer = glommio::timer::sleep(left);
        futures::pin_mut!(timer);
        let _ = select(select_all(waits), timer).await;
    }
}

impl OwnerCall<crate::ShardRuntime> for ReadOrWait {
    type Reply = Vec<ReadOutcome>;
    const CANCEL_WHEN_ASKER_GONE: bool = true;

    async fn run(self, shard: Rc<Shard>) -> Vec<ReadOutcome> {
        // `read_or_wait` groups the reads by `shard_of` over the same shard
        // count, and the call runs on the shard it was sent to.
        for read in &self.reads {
            assert_owned(&shard, &read.tp);
        }
        let outcomes = self.read_all(&shard).await;
        let ready: usize = outcomes.iter().map(|o| o.data.len()).sum();
        let answered = outcomes.iter().any(ReadOutcome::ends_poll);
        if ready >= self.min_bytes || answered || Instant::now() >= self.deadline {
            return outcomes;
        }
        self.wait_past(&shard, &outcomes).await;
        drop(outcomes);
        self.read_all(&shard).await
    }
}

fn assert_owned(shard: &Shard, tp: &TopicPartition) {
    assert_eq!(
        shard.owner(tp),
        shard.id,
        "a fetch reads on the partition's owner: {tp:?} is shard {}'s, read on shard {}",
        shard.owner(tp),
        shard.id
    );
}

//! The asker's side of a share fetch: one [`ShareWork`] per owner shard,
//! at once; while nothing was acquired, a [`ShareWait`] on every owner
//! until the first wakes (the others are dropped), then another round.

use super::owner::{ShareParams, ShareWait, ShareWork, ShareWorkReply};
use super::{PartitionAcks, ShareReadOutcome};
use crate::Shard;
use coordinators::share::ShareAutoOffsetReset;
use engine::{ErrorCode, TopicPartition};
use futures::future::{join_all, select, select_all};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

/// A share fetch (or, with no reads, an acknowledgement) of one member.
#[derive(Debug, Clone)]
pub struct FetchRound {
    /// Who fetches, and how.
    pub params: ShareParams,
    /// Acknowledgements to apply first.
    pub acks: Vec<PartitionAcks>,
    /// Partitions whose records the member holds go back (forgotten, or
    /// its session ended).
    pub release: Vec<TopicPartition>,
    /// Partitions to acquire records of.
    pub reads: Vec<TopicPartition>,
    /// When a fetch with nothing acquired is answered.
    pub deadline: Instant,
}

/// Runs `round`: its acknowledgement outcomes, and what each read gave.
pub async fn share_fetch(
    shard: &Rc<Shard>,
    round: FetchRound,
) -> (Vec<(TopicPartition, ErrorCode)>, Vec<ShareReadOutcome>) {
    let first = run_round(shard, &round).await;
    let acks = first.acks;
    let mut reads = first.reads;
    let nothing = |reads: &[ShareReadOutcome]| {
        reads
            .iter()
            .all(|r| r.acquired.is_empty() && r.error_code == ErrorCode::None)
    };
    let waiting = FetchRound {
        acks: Vec::new(),
        release: Vec::new(),
        ..round
    };
    while !waiting.reads.is_empty() && nothing(&reads) && Instant::now() < waiting.deadline {
        wait_any(shard, &waiting).await;
        reads = run_round(shard, &waiting).await.reads;
    }
    (acks, reads)
}

/// Applies acknowledgements (ShareAcknowledge): each partition's outcome.
pub async fn acknowledge(
    shard: &Rc<Shard>,
    group: &str,
    member: &str,
    acks: Vec<PartitionAcks>,
    release: Vec<TopicPartition>,
) -> Vec<(TopicPartition, ErrorCode)> {
    let round = FetchRound {
        params: ShareParams {
            group: group.to_string(),
            member: member.to_string(),
            max_records: 0,
            max_bytes: 0,
            reset: ShareAutoOffsetReset::Latest,
            revalidate: false,
            read_committed: false,
            settings: shard.config.group.share.records,
        },
        acks,
        release,
        reads: Vec::new(),
        deadline: Instant::now(),
    };
    run_round(shard, &round).await.acks
}

/// Ends the share sessions `connection` opened on this shard: their
/// members' records go back (the connection closed).
pub async fn connection_closed(shard: &Rc<Shard>, connection: usize) {
    let ended = shard
        .runtime()
        .share
        .sessions
        .borrow_mut()
        .close_connection(connection);
    for ((group, member), tps) in ended {
        release(shard, &group, &member, tps).await;
    }
}

/// Gives back the records `member` holds of `tps` (its session ended).
pub async fn release(shard: &Rc<Shard>, group: &str, member: &str, tps: Vec<TopicPartition>) {
    if !tps.is_empty() {
        acknowledge(shard, group, member, Vec::new(), tps).await;
    }
}

/// One [`ShareWork`] on each owner, at once; the replies joined.
async fn run_round(shard: &Rc<Shard>, round: &FetchRound) -> ShareWorkReply {
    let mut work: BTreeMap<usize, ShareWork> = BTreeMap::new();
    fn part<'a>(
        work: &'a mut BTreeMap<usize, ShareWork>,
        owner: usize,
        round: &FetchRound,
    ) -> &'a mut ShareWork {
        work.entry(owner).or_insert_with(|| ShareWork {
            params: round.params.clone(),
            acks: Vec::new(),
            release: Vec::new(),
            reads: Vec::new(),
        })
    }
    for acks in &round.acks {
        part(&mut work, shard.owner(&acks.tp), round)
            .acks
            .push(acks.clone());
    }
    for tp in &round.release {
        part(&mut work, shard.owner(tp), round)
            .release
            .push(tp.clone());
    }
    for tp in &round.reads {
        part(&mut work, shard.owner(tp), round)
            .reads
            .push(tp.clone());
    }
    let calls = work.into_iter().map(|(owner, work)| {
        let acked: Vec<TopicPartition> = work.acks.iter().map(|a| a.tp.clone()).collect();
        let read = work.reads.clone();
        async move {
            match shard.call(owner, work).await {
                Ok(reply) => reply,
                // The owner is stopping with the process.
                Err(_) => ShareWorkReply {
                    acks: acked
                        .into_iter()
                        .map(|tp| (tp, ErrorCode::NotLeaderOrFollower))
                        .collect(),
                    reads: read
                        .into_iter()
                        .map(|tp| ShareReadOutcome {
                            tp,
                            error_code: ErrorCode::NotLeaderOrFollower,
                            records: None,
                            acquired: Vec::new(),
                            leader_epoch: -1,
                        })
                        .collect(),
                },
            }
        }
    });
    let mut joined = ShareWorkReply::default();
    for reply in join_all(calls).await {
        joined.acks.extend(reply.acks);
        joined.reads.extend(reply.reads);
    }
    joined
}

/// Waits on every owner of `round`'s reads until the first has something
/// (or the deadline); the other waits are dropped.
async fn wait_any(shard: &Rc<Shard>, round: &FetchRound) {
    let mut by_owner: BTreeMap<usize, Vec<TopicPartition>> = BTreeMap::new();
    for tp in &round.reads {
        by_owner
            .entry(shard.owner(tp))
            .or_default()
            .push(tp.clone());
    }
    let waits = by_owner.into_iter().map(|(owner, tps)| {
        let wait = ShareWait {
            group: round.params.group.clone(),
            tps,
            deadline: round.deadline,
        };
        Box::pin(async move {
            let _ = shard.call(owner, wait).await;
        })
    });
    let left = round.deadline.saturating_duration_since(Instant::now());
    let timer = glommio::timer::sleep(left);
    futures::pin_mut!(timer);
    let _ = select(select_all(waits), timer).await;
}

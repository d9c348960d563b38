//! A consumer's read of a replicated partition held here (KIP-392): who
//! may serve it, and where its leader sends it.
//!
//! - The leader serves any consumer fetch. When the broker has a
//!   `replica.selector.class` and the fetch names the consumer's rack
//!   (Fetch v11+), the leader may answer with no records and a
//!   `preferred_read_replica` instead: a follower in that rack, in the
//!   ISR, alive, holding the fetch offset (the choice is `rill-cluster`'s
//!   pure `select_read_replica`).
//! - A follower serves a consumer fetch of v11 or later (Kafka's
//!   "client metadata": only such a client knows to come back to the
//!   leader), up to its own high watermark, which it learns from the
//!   leader's answers, and for `read_committed` up to its own last stable
//!   offset (it replays the transaction markers). An older fetch gets
//!   NOT_LEADER_OR_FOLLOWER, as before.
//! - Both check the fetch's `current_leader_epoch` against the epoch they
//!   know (KIP-320): older is FENCED_LEADER_EPOCH (the consumer refreshes
//!   its metadata), newer is UNKNOWN_LEADER_EPOCH (this replica has not
//!   heard of it yet; the consumer retries).

use super::roles::Role;
use crate::Shard;
use cluster::replication::{select_read_replica, LeaderState, ReadReplica, ReplicaSelector};
use engine::{ErrorCode, TopicPartition};
use std::cell::RefCell;
use std::rc::Rc;

/// How this replica takes a consumer's read of a partition.
pub enum ConsumerRead {
    /// Not replicated: the single-node rules.
    Unreplicated,
    /// This broker leads it, in this state.
    Leader(Rc<RefCell<LeaderState>>),
    /// This broker follows it and serves the read from its own log.
    Follower,
}

/// Whether a consumer's read of `tp` is served here, after the fetch's
/// `current_leader_epoch` check; `v11`: the fetch carries client metadata
/// (a follower may serve it).
pub fn consumer_read(
    shard: &Shard,
    tp: &TopicPartition,
    current_leader_epoch: i32,
    v11: bool,
) -> Result<ConsumerRead, ErrorCode> {
    let (known_epoch, read) = match shard.runtime().replicas.role(tp) {
        None => return Ok(ConsumerRead::Unreplicated),
        Some((_, Role::Offline)) => return Err(ErrorCode::NotLeaderOrFollower),
        Some((_, Role::Follower { .. })) if !v11 => return Err(ErrorCode::NotLeaderOrFollower),
        Some((_, Role::Follower { leader_epoch, .. })) => (leader_epoch, ConsumerRead::Follower),
        Some((_, Role::Leader(state))) => {
            let epoch = state.borrow().leader_epoch();
            (epoch, ConsumerRead::Leader(state))
        }
    };
    match current_leader_epoch {
        epoch if epoch >= 0 && epoch < known_epoch => Err(ErrorCode::FencedLeaderEpoch),
        epoch if epoch > known_epoch => Err(ErrorCode::UnknownLeaderEpoch),
        _ => Ok(read),
    }
}

/// The follower a consumer in `client_rack` fetching `fetch_offset` should
/// read from instead of this leader, if the broker's selector picks one.
pub fn preferred_read_replica(
    shard: &Shard,
    state: &LeaderState,
    fetch_offset: i64,
    client_rack: &str,
) -> Option<i32> {
    let selector = shard.config.cluster.replica_selector;
    if selector == ReplicaSelector::Leader || client_rack.is_empty() {
        return None;
    }
    let image = shard.runtime().view.image();
    let own = shard.config.broker_id;
    let leader = ReadReplica {
        id: own,
        rack: shard.config.cluster.rack.clone(),
        log_end_offset: state.log_end_offset(),
        since_caught_up_ms: 0,
    };
    let followers: Vec<ReadReplica> = state
        .read_replica_candidates(fetch_offset, shard.now_ms())
        .into_iter()
        .filter_map(|(id, log_end_offset, since_caught_up_ms)| {
            let broker = image.brokers().get(&id).filter(|b| !b.fenced)?;
            Some(ReadReplica {
                id,
                rack: broker.rack.clone(),
                log_end_offset,
                since_caught_up_ms,
            })
        })
        .collect();
    let chosen = select_read_replica(selector, client_rack, &leader, &followers);
    (chosen != own).then_some(chosen)
}

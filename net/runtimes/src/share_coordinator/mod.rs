//! The share coordinator (KIP-932): the durable state of share-partitions,
//! kept in `__share_group_state` by the leader of the partition each
//! share-partition's key hashes to, as Kafka keeps it.
//!
//! A partition leader reads a share-partition's state when it starts
//! serving it (ReadShareGroupState) and writes the whole state after each
//! acknowledgement (WriteShareGroupState), through [`call`] here when this
//! broker leads the state partition, or over the wire to the broker that
//! does (`share_runtime::persister`). The coordinator appends each write
//! as the state partition's leader with acks=all (like the group and
//! transaction coordinators, under the lease it loaded the partition
//! with), and keeps the newest state of each key in memory; the topic is
//! compacted, so a new leader replays little.
//!
//! Writes are fenced: one carrying an older partition leader epoch than the
//! key's last read or write is FENCED_LEADER_EPOCH (a deposed partition
//! leader), one read before the key's last reset is FENCED_STATE_EPOCH
//! (its leader then reads the state again), one with the same epochs and a
//! lower sequence is overtaken and skipped.
//!
//! A reset (InitializeShareGroupState, DeleteShareGroupState: what
//! AlterShareGroupOffsets and DeleteShareGroupOffsets ask) raises the
//! key's state epoch and empties its window from a new start offset, or
//! to nothing.
//!
//! - `load.rs`: loading a state partition under its lease, replaying it.

mod load;

use crate::admin_changes;
use crate::replication_runtime::{append_as_leader, coordinator_error, LeaderLease, LeaseTable};
use crate::Shard;
use coordinators::group::offsets_partition_for;
use coordinators::share::state::{encode_key, encode_value};
use coordinators::share::{ShareKey, ShareSnapshot};
use engine::batch::header::Compression;
use engine::batch::BatchBuilder;
use engine::{ErrorCode, TopicPartition};
use kernel::call::OwnerCall;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

/// Kafka's internal topic of share-partition states.
pub const STATE_TOPIC: &str = "__share_group_state";
/// Kafka's `share.coordinator.state.topic.num.partitions` default.
pub const STATE_TOPIC_PARTITIONS: i32 = 50;
/// How long a state write may wait for its high watermark.
const STATE_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// One shard's share coordinator: the states of the keys of the state
/// partitions it owns and leads.
#[derive(Debug)]
pub struct ShareCoordinator {
    states: RefCell<HashMap<ShareKey, ShareSnapshot>>,
    /// The highest partition leader epoch seen per key (reads included).
    fences: RefCell<HashMap<ShareKey, i32>>,
    leases: LeaseTable,
}

impl Default for ShareCoordinator {
    fn default() -> Self {
        Self {
            states: RefCell::default(),
            fences: RefCell::default(),
            leases: LeaseTable::new(STATE_TOPIC),
        }
    }
}

/// What a partition leader asks of the share coordinator.
#[derive(Debug, Clone)]
pub enum StateRequest {
    /// The key's state (`None`: never written), fencing leaders older than
    /// `leader_epoch`.
    Read {
        /// The share-partition.
        key: ShareKey,
        /// The reading partition leader's epoch.
        leader_epoch: i32,
    },
    /// Replace the key's state.
    Write {
        /// The share-partition.
        key: ShareKey,
        /// Its whole state.
        snapshot: ShareSnapshot,
    },
    /// Start the key's state again at a higher state epoch: the window
    /// empty from `start_offset`, or nothing (-1). Answers the new state.
    Reset {
        /// The share-partition.
        key: ShareKey,
        /// The new state epoch (`None`: one above the key's); lower than
        /// the key's is FENCED_STATE_EPOCH.
        state_epoch: Option<i32>,
        /// The new start offset, or -1.
        start_offset: i64,
    },
}

impl StateRequest {
    /// The share-partition asked about.
    pub fn key(&self) -> &ShareKey {
        match self {
            StateRequest::Read { key, .. }
            | StateRequest::Write { key, .. }
            | StateRequest::Reset { key, .. } => key,
        }
    }
}

/// The `__share_group_state` partition of `key`: Java's hash of
/// `groupId:topicId:partition` (Kafka's coordinator key; the topic id in
/// hex here), as the group coordinator places groups.
pub fn state_partition_for(key: &ShareKey, partitions: i32) -> i32 {
    let topic_id: String = key.topic_id.iter().map(|b| format!("{b:02x}")).collect();
    offsets_partition_for(
        &format!("{}:{topic_id}:{}", key.group, key.partition),
        partitions,
    )
}

/// The partition count of `__share_group_state`, creating it (compacted)
/// when it does not exist yet.
pub async fn ensure_state_topic(shard: &Rc<Shard>) -> Result<i32, ErrorCode> {
    let configs = vec![("cleanup.policy".to_string(), "compact".to_string())];
    admin_changes::ensure_internal_topic(shard, STATE_TOPIC, STATE_TOPIC_PARTITIONS, configs).await
}

/// Runs `request` on this broker's share coordinator of its key: the
/// state read (`None` for a write, or a key never written).
/// NOT_COORDINATOR when another broker leads the key's state partition.
pub async fn call(
    shard: &Rc<Shard>,
    request: StateRequest,
) -> Result<Option<ShareSnapshot>, ErrorCode> {
    let partitions = ensure_state_topic(shard).await?;
    let partition = state_partition_for(request.key(), partitions);
    let owner = shard.owner(&TopicPartition::new(STATE_TOPIC, partition));
    let call = StateCall { partition, request };
    shard
        .call(owner, call)
        .await
        .map_err(|_| ErrorCode::CoordinatorNotAvailable)?
}

/// A [`StateRequest`] on the owner shard of its state partition.
#[derive(Debug)]
struct StateCall {
    partition: i32,
    request: StateRequest,
}

impl OwnerCall<crate::ShardRuntime> for StateCall {
    type Reply = Result<Option<ShareSnapshot>, ErrorCode>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let rt = &shard.runtime().share_coordinator;
        let lease = load::loaded_lease(&shard, rt, self.partition).await?;
        match self.request {
            StateRequest::Read { key, leader_epoch } => {
                let mut fences = rt.fences.borrow_mut();
                let fence = fences.entry(key.clone()).or_insert(leader_epoch);
                *fence = (*fence).max(leader_epoch);
                Ok(rt.states.borrow().get(&key).cloned())
            }
            StateRequest::Write { key, snapshot } => {
                if !admits(rt, &key, &snapshot)? {
                    return Ok(None);
                }
                append_state(&shard, self.partition, lease, &key, &snapshot).await?;
                // Another write may have passed this one while it waited.
                if admits(rt, &key, &snapshot)? {
                    rt.fences
                        .borrow_mut()
                        .insert(key.clone(), snapshot.leader_epoch);
                    rt.states.borrow_mut().insert(key, snapshot);
                }
                Ok(None)
            }
            StateRequest::Reset {
                key,
                state_epoch,
                start_offset,
            } => {
                let snapshot = reset_state(rt, &key, state_epoch, start_offset)?;
                append_state(&shard, self.partition, lease, &key, &snapshot).await?;
                let current = reset_state(rt, &key, Some(snapshot.state_epoch), start_offset);
                if current.is_ok() {
                    rt.states.borrow_mut().insert(key, snapshot.clone());
                }
                Ok(Some(snapshot))
            }
        }
    }
}

/// Appends `snapshot` as the newest state of `key` to its state partition,
/// as its leader under `lease`, acks=all.
async fn append_state(
    shard: &Rc<Shard>,
    partition: i32,
    lease: LeaderLease,
    key: &ShareKey,
    snapshot: &ShareSnapshot,
) -> Result<(), ErrorCode> {
    let tp = TopicPartition::new(STATE_TOPIC, partition);
    let mut builder = BatchBuilder::new(0, Compression::None);
    let value = encode_value(snapshot);
    builder.push(0, shard.now_ms(), Some(&encode_key(key)), Some(&value), &[]);
    let mut batch = builder.build().map_err(|e| {
        tracing::warn!(error = %e, "cannot build a __share_group_state batch");
        ErrorCode::UnknownServerError
    })?;
    append_as_leader(shard, &tp, lease, &mut batch, STATE_WRITE_TIMEOUT)
        .await
        .map(drop)
        .map_err(coordinator_error)
}

/// The state a reset of `key` to `start_offset` at `state_epoch` (`None`:
/// one above the key's) leaves: FENCED_STATE_EPOCH below the key's epoch.
/// It carries the highest leader epoch seen, so the partition leader's
/// writes after it pass the fence.
fn reset_state(
    rt: &ShareCoordinator,
    key: &ShareKey,
    state_epoch: Option<i32>,
    start_offset: i64,
) -> Result<ShareSnapshot, ErrorCode> {
    let states = rt.states.borrow();
    let current = states.get(key);
    let current_epoch = current.map_or(-1, |s| s.state_epoch);
    let state_epoch = state_epoch.unwrap_or(current_epoch.saturating_add(1));
    if state_epoch < current_epoch {
        return Err(ErrorCode::FencedStateEpoch);
    }
    let fence = rt.fences.borrow().get(key).copied().unwrap_or(-1);
    let leader_epoch = fence.max(current.map_or(-1, |s| s.leader_epoch));
    Ok(ShareSnapshot::reset(
        leader_epoch,
        state_epoch,
        start_offset,
    ))
}

/// Whether `snapshot` may replace the key's state: FENCED_LEADER_EPOCH
/// from a leader older than the key's fence; `false` when a newer write of
/// the same leader is already there.
fn admits(
    rt: &ShareCoordinator,
    key: &ShareKey,
    snapshot: &ShareSnapshot,
) -> Result<bool, ErrorCode> {
    let fence = rt.fences.borrow().get(key).copied().unwrap_or(i32::MIN);
    if snapshot.leader_epoch < fence {
        return Err(ErrorCode::FencedLeaderEpoch);
    }
    let states = rt.states.borrow();
    Ok(match states.get(key) {
        Some(old) if snapshot.state_epoch < old.state_epoch => {
            return Err(ErrorCode::FencedStateEpoch)
        }
        Some(old)
            if (old.leader_epoch, old.state_epoch)
                == (snapshot.leader_epoch, snapshot.state_epoch) =>
        {
            old.sequence < snapshot.sequence
        }
        _ => true,
    })
}

//! The group coordinator on the broker. **Per shard**: each shard runs one
//! [`GroupCoordinator`] for the groups whose `__consumer_offsets` partition
//! (`offsets_partition_for(group, partitions)`, Kafka's placement) it owns.
//!
//! - [`call`]: the handlers' entry point. It creates `__consumer_offsets`
//!   (compacted) on first use, finds the owner shard of the group's partition
//!   and runs the call there with the shard's owner call
//!   ([`Shard::call`]; a [`GroupRequest`] is an [`OwnerCall`]).
//! - On the owner, `execute` steps the pure coordinator, appends the records
//!   it returns (and those of a `tick` right after) to the owned
//!   `__consumer_offsets` partitions, waits until they are durable and only
//!   then answers — the coordinator's contract, so an acknowledged commit or
//!   assignment survives a crash. JoinGroup/SyncGroup answers that come later
//!   wait on a oneshot registered under the call's token.
//! - [`run_timer`] (`timer.rs`): a per-shard task that calls `tick` at the coordinator's
//!   next deadline (session expiry, rebalance timeouts, offset expiry).
//! - `replay.rs`: a coordinator acts for a group only while this broker
//!   leads the group's `__consumer_offsets` partition in the epoch it was
//!   loaded under (its lease). A partition is loaded on the first call or
//!   timer tick after it comes to be led here, once its high watermark
//!   reached the log end, and unloaded (groups forgotten, waiting calls
//!   answered NOT_COORDINATOR) as soon as that leadership ends.

//! - `persist.rs`: appending a step's records as the partition's leader
//!   (acks=all) under the loaded lease; a partition whose write fails is
//!   unloaded, so memory never holds what the log does not.
//!
//! The [`GroupRuntime`] is one per shard, a field of the shard's runtimes
//! (`shard.runtime().groups`).

mod execute;
mod persist;
pub mod regex;
mod replay;
mod timer;

pub use replay::reload_on_leadership;
pub use timer::run_timer;

use crate::admin_changes;
use crate::replication_runtime::LeaseTable;
use crate::Shard;
use coordinators::group::coordinator::DescribedGroup;
use coordinators::group::{
    offsets_partition_for, ConsumerGroup, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse,
    FetchedOffset, GroupConfig, GroupCoordinator, GroupResponse, HeartbeatRequest, JoinRequest,
    JoinResponse, LeavingMember, ListedGroup, OffsetCommitRequest, RequestToken, ShareGroup,
    ShareHeartbeatRequest, ShareHeartbeatResponse, SyncRequest, SyncResponse, TopicPartition,
};
use engine::ErrorCode;
use futures::channel::oneshot;
use kernel::call::OwnerCall;
use kernel::config::BrokerConfig;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Longest sleep of the timer task: a call may create a deadline earlier than
/// the one the timer sleeps towards, and each call also ticks, so this only
/// bounds how late a deadline met by no call fires.
const TIMER_MAX_SLEEP_MS: i64 = 50;

/// Bytes read per step while replaying.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// One coordinator call, sent to the owner shard (all fields `Send`).
#[derive(Debug)]
pub enum GroupRequest {
    /// JoinGroup.
    Join(JoinRequest),
    /// SyncGroup.
    Sync(SyncRequest),
    /// Heartbeat (classic).
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup (batch form).
    Leave {
        /// Group id.
        group_id: String,
        /// Members leaving.
        members: Vec<LeavingMember>,
    },
    /// ConsumerGroupHeartbeat (KIP-848).
    ConsumerHeartbeat(ConsumerHeartbeatRequest),
    /// ShareGroupHeartbeat (KIP-932).
    ShareHeartbeat(ShareHeartbeatRequest),
    /// OffsetCommit.
    Commit(OffsetCommitRequest),
    /// TxnOffsetCommit's membership check, before the offsets join the
    /// transaction: answers [`GroupReply::Code`].
    ValidateTxnCommit(OffsetCommitRequest),
    /// The offsets of a committed transaction, applied without a membership
    /// check (made at TxnOffsetCommit): answers [`GroupReply::Committed`].
    CommitTxn(OffsetCommitRequest),
    /// TxnOffsetCommit when the transaction's coordinator is another
    /// broker: the offsets wait here for the transaction's marker. Answers
    /// [`GroupReply::Committed`].
    StageTxn {
        /// The transaction's producer id.
        producer_id: i64,
        /// Its epoch (an older one than the partition has seen is fenced).
        producer_epoch: i16,
        /// The group, member and offsets.
        request: OffsetCommitRequest,
    },
    /// A transaction marker reached `__consumer_offsets` partition
    /// `partition`: its staged offsets are committed or dropped. Answers
    /// [`GroupReply::Code`].
    CompleteTxn {
        /// The `__consumer_offsets` partition.
        partition: i32,
        /// The transaction's producer id.
        producer_id: i64,
        /// Commit (or abort).
        commit: bool,
    },
    /// OffsetFetch of one group (`None`: every committed partition).
    Fetch {
        /// Group id.
        group_id: String,
        /// Partitions asked for.
        partitions: Option<Vec<TopicPartition>>,
    },
    /// OffsetDelete.
    DeleteOffsets {
        /// Group id.
        group_id: String,
        /// Partitions.
        partitions: Vec<TopicPartition>,
    },
    /// DeleteGroups of one group.
    DeleteGroup(String),
    /// DescribeGroups of one group.
    Describe(String),
    /// ConsumerGroupDescribe of one group.
    DescribeConsumer(String),
    /// ShareGroupDescribe of one group.
    DescribeShare(String),
    /// The topics a share group has had assigned (where its share-partition
    /// states are).
    ShareTopics(String),
    /// ListGroups on one shard (the handler asks every shard).
    List(Vec<String>),
}

/// The answer to a [`GroupRequest`], variant by variant.
#[derive(Debug)]
pub enum GroupReply {
    /// The coordinator could not be reached or could not persist: the error
    /// code to answer with (ErrorCode::CoordinatorNotAvailable, NOT_COORDINATOR...).
    Unavailable(ErrorCode),
    /// JoinGroup.
    Join(JoinResponse),
    /// SyncGroup.
    Sync(SyncResponse),
    /// Heartbeat, DeleteGroup.
    Code(ErrorCode),
    /// LeaveGroup: per member.
    Codes(Vec<ErrorCode>),
    /// ConsumerGroupHeartbeat.
    ConsumerHeartbeat(ConsumerHeartbeatResponse),
    /// ShareGroupHeartbeat.
    ShareHeartbeat(ShareHeartbeatResponse),
    /// OffsetCommit: per partition.
    Committed(Vec<(TopicPartition, ErrorCode)>),
    /// OffsetFetch.
    Fetched(Vec<FetchedOffset>),
    /// OffsetDelete: group error and per partition.
    DeletedOffsets(ErrorCode, Vec<(TopicPartition, ErrorCode)>),
    /// DescribeGroups.
    Described(DescribedGroup),
    /// ConsumerGroupDescribe.
    DescribedConsumer(Result<Box<ConsumerGroup>, ErrorCode>),
    /// ShareGroupDescribe.
    DescribedShare(Result<Box<ShareGroup>, ErrorCode>),
    /// A share group's topics (empty: none).
    ShareTopics(std::collections::BTreeSet<String>),
    /// ListGroups.
    Listed(Vec<ListedGroup>),
}

/// One shard's coordinator and its waiting JoinGroup/SyncGroup callers.
pub struct GroupRuntime {
    coordinator: RefCell<GroupCoordinator>,
    /// Callers waiting for a JoinGroup/SyncGroup answer, with their group
    /// (dropped, so answered NOT_COORDINATOR, when its partition unloads).
    waiters: RefCell<HashMap<RequestToken, (String, oneshot::Sender<GroupResponse>)>>,
    next_token: Cell<RequestToken>,
    /// The `__consumer_offsets` partitions loaded into `coordinator`, each
    /// with the leadership it was loaded under (see `replay.rs`).
    leases: LeaseTable,
}

impl GroupRuntime {
    /// An empty runtime; member ids are seeded from 56 random bits and the
    /// shard id, so that no two shards hand out the same ids and no two
    /// starts (almost surely) either. Randomness rather than the clock: a
    /// test's manual clock would repeat seeds across restarts.
    pub fn new(config: &BrokerConfig, shard_id: usize) -> Self {
        let random_bits = rand::random::<u64>() & ((1 << 56) - 1);
        let group_config = GroupConfig {
            member_id_seed: random_bits | ((shard_id as u64) << 56),
            ..config.group.clone()
        };
        Self {
            coordinator: RefCell::new(GroupCoordinator::new(group_config)),
            waiters: RefCell::new(HashMap::new()),
            next_token: Cell::new(1),
            leases: LeaseTable::new(OFFSETS_TOPIC),
        }
    }
}

impl GroupRuntime {
    fn take_token(&self) -> RequestToken {
        let token = self.next_token.get();
        self.next_token.set(token.wrapping_add(1));
        token
    }

    /// Committed offsets of every group this shard coordinates, as
    /// `(group, topic, partition, offset)` (for the lag gauge).
    pub fn committed_offsets(&self) -> Vec<(String, String, i32, i64)> {
        let coordinator = self.coordinator.borrow();
        let store = coordinator.offsets();
        let mut rows = Vec::new();
        for group in store.group_ids() {
            for (tp, value) in store.all(group) {
                rows.push((group.clone(), tp.topic.clone(), tp.partition, value.offset));
            }
        }
        rows
    }
}

/// The partition count of `__consumer_offsets`, creating it (compacted, with
/// `offsets.topic.num.partitions` partitions) when it does not exist yet.
pub async fn ensure_offsets_topic(shard: &Rc<Shard>) -> Result<i32, ErrorCode> {
    let configs = vec![
        ("cleanup.policy".to_string(), "compact".to_string()),
        // Kafka's offsets.topic.segment.bytes: with the 1 GiB topic
        // default a partition's segment would rarely seal, so rarely
        // be compacted.
        (
            "segment.bytes".to_string(),
            shard.config.offsets_topic_segment_bytes.to_string(),
        ),
    ];
    let partitions = shard.config.offsets_topic_num_partitions;
    admin_changes::ensure_internal_topic(shard, OFFSETS_TOPIC, partitions, configs).await
}

/// The partition count of `__consumer_offsets`, once it exists.
fn offsets_partitions(shard: &Shard) -> Option<i32> {
    shard
        .topics
        .borrow()
        .get(OFFSETS_TOPIC)
        .map(|e| e.partitions)
}

/// The shard coordinating `group_id`, given the partition count.
pub fn coordinator_shard(shard: &Shard, group_id: &str, partitions: i32) -> usize {
    let partition = offsets_partition_for(group_id, partitions);
    shard.owner(&engine::TopicPartition::new(OFFSETS_TOPIC, partition))
}

/// Runs `request` for `group_id` on the group's coordinator shard.
pub async fn call(shard: &Rc<Shard>, group_id: &str, request: GroupRequest) -> GroupReply {
    let partitions = match ensure_offsets_topic(shard).await {
        Ok(partitions) => partitions,
        Err(code) => return GroupReply::Unavailable(code),
    };
    let partition = offsets_partition_for(group_id, partitions);
    if !crate::cluster_runtime::leads(shard, OFFSETS_TOPIC, partition) {
        // Another broker leads this group's partition: the client finds it.
        return GroupReply::Unavailable(ErrorCode::NotCoordinator);
    }
    let owner = coordinator_shard(shard, group_id, partitions);
    call_on(shard, owner, request).await
}

/// Runs `request` on shard `owner` (this one or another over the mesh).
pub async fn call_on(shard: &Rc<Shard>, owner: usize, request: GroupRequest) -> GroupReply {
    match shard.call(owner, request).await {
        Ok(reply) => reply,
        Err(e) => {
            tracing::warn!(owner, error = %e, "group request not delivered");
            GroupReply::Unavailable(ErrorCode::CoordinatorNotAvailable)
        }
    }
}

impl OwnerCall<crate::ShardRuntime> for GroupRequest {
    type Reply = GroupReply;

    async fn run(self, shard: Rc<Shard>) -> GroupReply {
        execute::execute(&shard, self).await
    }
}

/// A transaction marker is durable on `tp` (a [`crate::routing::MarkerHook`],
/// on its owner shard): on a `__consumer_offsets` partition, the offsets
/// staged under `producer_id` for its groups are committed or dropped.
pub async fn on_txn_marker(
    shard: Rc<Shard>,
    tp: engine::TopicPartition,
    producer_id: i64,
    commit: bool,
) -> Result<(), ErrorCode> {
    if tp.topic != OFFSETS_TOPIC {
        return Ok(());
    }
    let request = GroupRequest::CompleteTxn {
        partition: tp.partition,
        producer_id,
        commit,
    };
    match execute::execute(&shard, request).await {
        GroupReply::Code(ErrorCode::None) => Ok(()),
        GroupReply::Code(code) | GroupReply::Unavailable(code) => Err(code),
        other => {
            tracing::warn!(reply = ?other, "unexpected answer to a transaction marker");
            Err(ErrorCode::UnknownServerError)
        }
    }
}

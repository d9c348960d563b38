//! One shard's group coordinator: many groups, their committed offsets, the
//! outbox of delayed answers, and replay of `__consumer_offsets`.
//!
//! Contract with the caller (the Kafka handlers):
//! - every method that changes durable state returns the records to append to
//!   the group's `__consumer_offsets` partition; append them before sending any
//!   answer produced by the same call (including ones in the outbox), so an
//!   acknowledged commit or assignment survives a crash;
//! - after each call, drain [`GroupCoordinator::take_responses`] and wake the
//!   waiters registered for those tokens;
//! - call [`GroupCoordinator::tick`] at [`GroupCoordinator::next_deadline_ms`];
//! - at start, feed every record of the owned partitions to
//!   [`GroupCoordinator::replay`], then call [`GroupCoordinator::finish_replay`].

use engine::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

use super::classic::{
    ClassicGroup, ClassicState, HeartbeatRequest, JoinRequest, JoinResponse, LeavingMember, Step,
    SyncRequest, SyncResponse,
};
use super::consumer::{
    ConsumerGroup, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse, TopicInfo, TopicLookups,
};
use super::error::RecordError;
use super::membership::{Members, MembershipLog, Restored};
use super::offsets::{OffsetStore, Record};
use super::records::{self, OffsetCommitValue, RecordKey};
use super::share::{ShareGroup, ShareHeartbeatRequest, ShareHeartbeatResponse};
use super::share_topics::ShareTopics;
use super::{GroupConfig, GroupResponse, IdGenerator, RequestToken, TopicPartition};

/// A group of either protocol. Both share one namespace of group ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Group {
    /// Classic protocol.
    Classic(ClassicGroup),
    /// KIP-848 consumer protocol.
    Consumer(ConsumerGroup),
    /// KIP-932 share group.
    Share(ShareGroup),
}

impl Group {
    /// The state name ListGroups shows.
    pub fn state_name(&self) -> &'static str {
        match self {
            Group::Classic(g) => g.state.name(),
            Group::Consumer(g) => g.state().name(),
            Group::Share(g) => g.state_name(),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Group::Classic(g) => g.is_empty(),
            Group::Consumer(g) => g.members.is_empty(),
            Group::Share(g) => g.members.is_empty(),
        }
    }
}

/// The answer to a JoinGroup: now, or later through the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinOutcome {
    /// Answer now.
    Respond(JoinResponse),
    /// The answer will come out of [`GroupCoordinator::take_responses`].
    Pending,
}

/// The answer to a SyncGroup: now, or later through the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncOutcome {
    /// Answer now.
    Respond(SyncResponse),
    /// The answer will come out of [`GroupCoordinator::take_responses`].
    Pending,
}

/// An OffsetCommit for one group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    /// Group id.
    pub group_id: String,
    /// Generation id (classic) or member epoch (consumer); -1 for simple commits.
    pub generation_id_or_member_epoch: i32,
    /// Member id; empty for simple commits.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// Partition, offset, leader epoch, metadata, commit timestamp
    /// (OffsetCommit v1's per-partition one; -1: the time of the commit).
    pub offsets: Vec<(TopicPartition, i64, i32, String, i64)>,
    /// OffsetCommit v2–v4's `retention_time_ms`: the offsets expire that
    /// long after the commit; -1 (and every other version): the broker's
    /// `offsets.retention.minutes` applies.
    pub retention_ms: i64,
}

/// One partition's answer to OffsetFetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    /// Partition.
    pub partition: TopicPartition,
    /// Committed offset, -1 when none.
    pub offset: i64,
    /// Leader epoch, -1 when unknown.
    pub leader_epoch: i32,
    /// Metadata.
    pub metadata: String,
}

/// One row of ListGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// Group id.
    pub group_id: String,
    /// Protocol type (`consumer` for KIP-848 groups).
    pub protocol_type: String,
    /// State name.
    pub state: String,
    /// `classic` or `consumer`.
    pub group_type: String,
}

/// A classic group as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    /// Error code.
    pub error_code: ErrorCode,
    /// Group id.
    pub group_id: String,
    /// State name (`Dead` for an unknown group, as Kafka answers).
    pub state: String,
    /// Protocol type.
    pub protocol_type: String,
    /// Selected protocol.
    pub protocol: String,
    /// Members.
    pub members: Vec<DescribedMember>,
}

/// One member in DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Metadata of the selected protocol.
    pub metadata: Vec<u8>,
    /// Assignment.
    pub assignment: Vec<u8>,
}

/// The group coordinator of one shard.
#[derive(Debug)]
pub struct GroupCoordinator {
    pub(super) config: GroupConfig,
    pub(super) groups: BTreeMap<String, Group>,
    offsets: OffsetStore,
    outbox: Vec<(RequestToken, GroupResponse)>,
    pub(super) ids: IdGenerator,
    next_expiry_check_ms: i64,
    /// Transactional offset commits waiting for their transaction's marker,
    /// by producer id (see [`Self::stage_txn_offsets`]).
    pending_txn: BTreeMap<i64, BTreeMap<(String, TopicPartition), OffsetCommitValue>>,
    /// The topics each share group has had assigned.
    share_topics: ShareTopics,
    /// The membership records of KIP-848 and share groups.
    membership: MembershipLog,
}

impl GroupCoordinator {
    /// An empty coordinator.
    pub fn new(config: GroupConfig) -> Self {
        let ids = IdGenerator::new(config.member_id_seed);
        Self {
            config,
            groups: BTreeMap::new(),
            offsets: OffsetStore::default(),
            outbox: Vec::new(),
            ids,
            next_expiry_check_ms: i64::MIN,
            pending_txn: BTreeMap::new(),
            share_topics: ShareTopics::default(),
            membership: MembershipLog::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// A group by id.
    pub fn group(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id)
    }

    /// A classic group by id.
    pub fn classic_group(&self, group_id: &str) -> Option<&ClassicGroup> {
        match self.groups.get(group_id) {
            Some(Group::Classic(g)) => Some(g),
            _ => None,
        }
    }

    /// The committed offsets.
    pub fn offsets(&self) -> &OffsetStore {
        &self.offsets
    }

    /// Answers that became ready; wake the waiter of each token.
    pub fn take_responses(&mut self) -> Vec<(RequestToken, GroupResponse)> {
        std::mem::take(&mut self.outbox)
    }

    /// Runs `f` on a classic group with a step context; returns the records.
    pub(super) fn step_classic<R>(
        &mut self,
        now_ms: i64,
        group_id: &str,
        f: impl FnOnce(&mut ClassicGroup, &mut Step<'_>) -> R,
    ) -> Option<(R, Vec<Record>)> {
        let Some(Group::Classic(group)) = self.groups.get_mut(group_id) else {
            return None;
        };
        let mut records = Vec::new();
        let mut step = Step {
            config: &self.config,
            now_ms,
            outbox: &mut self.outbox,
            records: &mut records,
            ids: &mut self.ids,
        };
        let r = f(group, &mut step);
        Some((r, records))
    }

    /// Pulls the answer for `token` out of the outbox if it is already there.
    fn take_own(&mut self, token: RequestToken, from: usize) -> Option<GroupResponse> {
        let pos = self.outbox[from..].iter().position(|(t, _)| *t == token)?;
        Some(self.outbox.remove(from + pos).1)
    }

    // ------------------------------------------------------------ classic

    /// Handles a JoinGroup; `lookups` serve a classic member joining a
    /// KIP-848 group, which assigns it at once.
    pub fn join_group(
        &mut self,
        now_ms: i64,
        token: RequestToken,
        req: JoinRequest,
        lookups: TopicLookups<'_>,
    ) -> (JoinOutcome, Vec<Record>) {
        let immediate = |code: ErrorCode, req: &JoinRequest| {
            (
                JoinOutcome::Respond(JoinResponse::error(code, &req.member_id)),
                Vec::new(),
            )
        };
        if req.group_id.is_empty() {
            return immediate(ErrorCode::InvalidGroupId, &req);
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return immediate(ErrorCode::InvalidSessionTimeout, &req);
        }
        match self.groups.get(&req.group_id) {
            None if !req.member_id.is_empty() => {
                return immediate(ErrorCode::UnknownMemberId, &req)
            }
            None => {
                self.groups.insert(
                    req.group_id.clone(),
                    Group::Classic(ClassicGroup::new(&req.group_id, now_ms)),
                );
            }
            Some(Group::Consumer(g)) if g.members.is_empty() => {
                // An empty KIP-848 group turns classic, as Kafka converts it.
                let g = ClassicGroup::new(&req.group_id, now_ms);
                self.groups.insert(req.group_id.clone(), Group::Classic(g));
            }
            Some(Group::Consumer(_)) => return self.classic_join_consumer(now_ms, &req, lookups),
            Some(Group::Share(_)) => return immediate(ErrorCode::InconsistentGroupProtocol, &req),
            Some(Group::Classic(_)) => {}
        }
        let from = self.outbox.len();
        let group_id = req.group_id.clone();
        let records = self
            .step_classic(now_ms, &group_id, |g, step| g.join(step, token, req))
            .map(|(_, r)| r)
            .unwrap_or_default();
        self.drop_if_unused_empty(&group_id);
        // An empty KIP-848 group that turned classic leaves no membership.
        let mut records = records;
        records.extend(self.sync_membership(&group_id));
        match self.take_own(token, from) {
            Some(GroupResponse::Join(r)) => (JoinOutcome::Respond(r), records),
            _ => (JoinOutcome::Pending, records),
        }
    }

    /// A group created by a join that ended in an immediate error (say
    /// MEMBER_ID_REQUIRED) is kept: it holds the pending member. Only a group
    /// with no members, no pending state and no offsets created for nothing is
    /// dropped, so failed joins do not leak groups.
    fn drop_if_unused_empty(&mut self, group_id: &str) {
        let unused = matches!(
            self.groups.get(group_id),
            Some(Group::Classic(g)) if g.state == ClassicState::Empty && g.generation == 0
                && g.is_empty() && g.next_deadline_ms().is_none()
        );
        if unused && !self.offsets.has_offsets(group_id) {
            self.groups.remove(group_id);
        }
    }

    /// Handles a SyncGroup.
    pub fn sync_group(
        &mut self,
        now_ms: i64,
        token: RequestToken,
        req: SyncRequest,
    ) -> (SyncOutcome, Vec<Record>) {
        match self.groups.get_mut(&req.group_id) {
            Some(Group::Classic(_)) => {}
            Some(Group::Consumer(g)) if !g.members.is_empty() => {
                return (
                    SyncOutcome::Respond(g.classic_sync(now_ms, &req)),
                    Vec::new(),
                )
            }
            _ => {
                return (
                    SyncOutcome::Respond(SyncResponse::error(ErrorCode::UnknownMemberId)),
                    Vec::new(),
                )
            }
        }
        let from = self.outbox.len();
        let group_id = req.group_id.clone();
        let records = self
            .step_classic(now_ms, &group_id, |g, step| g.sync(step, token, req))
            .map(|(_, r)| r)
            .unwrap_or_default();
        match self.take_own(token, from) {
            Some(GroupResponse::Sync(r)) => (SyncOutcome::Respond(r), records),
            _ => (SyncOutcome::Pending, records),
        }
    }

    /// Handles a Heartbeat; returns its error code.
    pub fn heartbeat(&mut self, now_ms: i64, req: &HeartbeatRequest) -> ErrorCode {
        match self.groups.get_mut(&req.group_id) {
            Some(Group::Classic(g)) => g.heartbeat(now_ms, req),
            Some(Group::Consumer(g)) => g.classic_heartbeat(now_ms, req),
            _ => ErrorCode::UnknownMemberId,
        }
    }

    /// Handles a LeaveGroup; one error code per leaving member.
    pub fn leave_group(
        &mut self,
        now_ms: i64,
        group_id: &str,
        leaving: &[LeavingMember],
    ) -> (Vec<ErrorCode>, Vec<Record>) {
        if let Some(Group::Consumer(g)) = self.groups.get_mut(group_id) {
            let codes = g.classic_leave(now_ms, leaving);
            return (codes, self.after_consumer_step(now_ms, group_id));
        }
        self.step_classic(now_ms, group_id, |g, step| g.leave(step, leaving))
            .unwrap_or_else(|| (vec![ErrorCode::UnknownMemberId; leaving.len()], Vec::new()))
    }

    // ------------------------------------------------------------ KIP-848

    /// Handles a ConsumerGroupHeartbeat, with the records of the membership
    /// it changed. `topics` resolves a topic name to its id and partition
    /// count.
    pub fn consumer_heartbeat(
        &mut self,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
        topics: &dyn Fn(&str) -> Option<TopicInfo>,
    ) -> (ConsumerHeartbeatResponse, Vec<Record>) {
        self.consumer_heartbeat_matching(now_ms, req, topics, &|_| Vec::new())
    }

    /// [`Self::consumer_heartbeat`] for groups whose members may subscribe
    /// by a regular expression: `matching` gives the topics one matches.
    pub fn consumer_heartbeat_matching(
        &mut self,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
        topics: &dyn Fn(&str) -> Option<TopicInfo>,
        matching: &dyn Fn(&str) -> Vec<String>,
    ) -> (ConsumerHeartbeatResponse, Vec<Record>) {
        let (response, mut records) = match self.upgrade_for(now_ms, req) {
            Ok(records) => {
                let response = self.consumer_heartbeat_step(now_ms, req, (topics, matching));
                (response, records)
            }
            Err(code) => (
                ConsumerHeartbeatResponse::error(code, &req.member_id, req.member_epoch),
                Vec::new(),
            ),
        };
        records.extend(self.after_consumer_step(now_ms, &req.group_id));
        (response, records)
    }

    fn consumer_heartbeat_step(
        &mut self,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
        (topics, matching): TopicLookups<'_>,
    ) -> ConsumerHeartbeatResponse {
        let error = |code: ErrorCode| ConsumerHeartbeatResponse {
            error_code: code,
            member_id: req.member_id.clone(),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        if req.group_id.is_empty() {
            return error(ErrorCode::InvalidGroupId);
        }
        match self.groups.get(&req.group_id) {
            // Kafka answers GROUP_ID_NOT_FOUND here, which is fatal to
            // librdkafka's consumer and to Java's; UNKNOWN_MEMBER_ID makes a
            // member whose group is gone (deleted, or expired) join again.
            None if req.member_epoch != 0 => return error(ErrorCode::UnknownMemberId),
            None => {
                let g = ConsumerGroup::new(&req.group_id, now_ms);
                self.groups.insert(req.group_id.clone(), Group::Consumer(g));
            }
            Some(Group::Classic(g)) if g.is_empty() && req.member_epoch == 0 => {
                let g = ConsumerGroup::new(&req.group_id, now_ms);
                self.groups.insert(req.group_id.clone(), Group::Consumer(g));
            }
            // Offsets of a group whose membership is gone (as above).
            Some(Group::Classic(g)) if g.is_empty() => return error(ErrorCode::UnknownMemberId),
            Some(Group::Classic(_) | Group::Share(_)) => return error(ErrorCode::GroupIdNotFound),
            Some(Group::Consumer(_)) => {}
        }
        let Some(Group::Consumer(g)) = self.groups.get_mut(&req.group_id) else {
            return error(ErrorCode::GroupIdNotFound);
        };
        g.heartbeat(&self.config, &mut self.ids, now_ms, req, topics, matching)
    }

    /// The records that bring `group_id`'s membership in the log to what it
    /// is now (see [`super::membership`]): none for a classic group, and
    /// tombstones when a KIP-848 or share group went or changed type.
    pub(super) fn sync_membership(&mut self, group_id: &str) -> Vec<Record> {
        let members = match self.groups.get(group_id) {
            Some(Group::Consumer(g)) => Members::Consumer(g),
            Some(Group::Share(g)) => Members::Share(g),
            _ => Members::None,
        };
        self.membership.sync(group_id, members)
    }

    /// The KIP-848 group for ConsumerGroupDescribe, or GROUP_ID_NOT_FOUND.
    pub fn describe_consumer_group(&self, group_id: &str) -> Result<&ConsumerGroup, ErrorCode> {
        match self.groups.get(group_id) {
            Some(Group::Consumer(g)) => Ok(g),
            _ => Err(ErrorCode::GroupIdNotFound),
        }
    }

    // ------------------------------------------------------------ share

    /// Handles a ShareGroupHeartbeat, with the records of the membership
    /// it changed and of the group's topics when it is assigned a new one. A group id held by a
    /// non-empty group of another type is GROUP_ID_NOT_FOUND, as in Kafka.
    pub fn share_heartbeat(
        &mut self,
        now_ms: i64,
        req: &ShareHeartbeatRequest,
        topics: &dyn Fn(&str) -> Option<TopicInfo>,
    ) -> (ShareHeartbeatResponse, Vec<Record>) {
        let response = self.share_heartbeat_step(now_ms, req, topics);
        let assigned = match self.groups.get(&req.group_id) {
            Some(Group::Share(g)) => g.topic_partitions.keys().cloned().collect(),
            _ => BTreeSet::new(),
        };
        let topics = (!assigned.is_empty())
            .then(|| self.share_topics.note(&req.group_id, assigned))
            .flatten();
        let mut records = self.sync_membership(&req.group_id);
        records.extend(topics);
        (response, records)
    }

    /// The topics share group `group_id` has had assigned (`None`: none).
    pub fn share_group_topics(&self, group_id: &str) -> Option<&BTreeSet<String>> {
        self.share_topics.of(group_id)
    }

    fn share_heartbeat_step(
        &mut self,
        now_ms: i64,
        req: &ShareHeartbeatRequest,
        topics: &dyn Fn(&str) -> Option<TopicInfo>,
    ) -> ShareHeartbeatResponse {
        let error = |code: ErrorCode| ShareHeartbeatResponse {
            error_code: code,
            member_id: req.member_id.clone(),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        if req.group_id.is_empty() {
            return error(ErrorCode::InvalidGroupId);
        }
        let other_type = match self.groups.get(&req.group_id) {
            None => false,
            Some(Group::Share(_)) => false,
            Some(g) => !g.is_empty() || self.offsets.has_offsets(&req.group_id),
        };
        if other_type {
            return error(ErrorCode::GroupIdNotFound);
        }
        if !matches!(self.groups.get(&req.group_id), Some(Group::Share(_))) {
            let g = ShareGroup::new(&req.group_id, now_ms);
            self.groups.insert(req.group_id.clone(), Group::Share(g));
        }
        match self.groups.get_mut(&req.group_id) {
            Some(Group::Share(g)) => g.heartbeat(&self.config.share, now_ms, req, topics),
            _ => error(ErrorCode::GroupIdNotFound),
        }
    }

    /// The share group for ShareGroupDescribe, or GROUP_ID_NOT_FOUND.
    pub fn describe_share_group(&self, group_id: &str) -> Result<&ShareGroup, ErrorCode> {
        match self.groups.get(group_id) {
            Some(Group::Share(g)) => Ok(g),
            _ => Err(ErrorCode::GroupIdNotFound),
        }
    }

    // ------------------------------------------------------------ offsets

    /// Handles an OffsetCommit: one error code per partition, and the records.
    pub fn commit_offsets(
        &mut self,
        now_ms: i64,
        req: &OffsetCommitRequest,
    ) -> (Vec<(TopicPartition, ErrorCode)>, Vec<Record>) {
        let all = |code: ErrorCode| -> Vec<(TopicPartition, ErrorCode)> {
            req.offsets
                .iter()
                .map(|(tp, ..)| (tp.clone(), code))
                .collect()
        };
        if req.group_id.is_empty() {
            return (all(ErrorCode::InvalidGroupId), Vec::new());
        }
        let generation = req.generation_id_or_member_epoch;
        let verdict = match self.groups.get(&req.group_id) {
            None if generation < 0 => {
                // A group used only to store offsets.
                let g = ClassicGroup::new(&req.group_id, now_ms);
                self.groups.insert(req.group_id.clone(), Group::Classic(g));
                Ok(())
            }
            None => Err(ErrorCode::IllegalGeneration),
            Some(Group::Classic(g)) => g.validate_offset_commit(
                &req.member_id,
                req.group_instance_id.as_deref(),
                generation,
            ),
            Some(Group::Consumer(g)) => g.validate_offset_commit(&req.member_id, generation),
            // A share group keeps no consumer offsets (Kafka: GROUP_ID_NOT_FOUND).
            Some(Group::Share(_)) => Err(ErrorCode::GroupIdNotFound),
        };
        if let Err(code) = verdict {
            return (all(code), Vec::new());
        }
        let records = self.record_commits(now_ms, req);
        (all(ErrorCode::None), records)
    }

    /// Stores every offset of `req` and returns the records that persist them.
    fn record_commits(&mut self, now_ms: i64, req: &OffsetCommitRequest) -> Vec<Record> {
        req.offsets
            .iter()
            .map(
                |(tp, offset, leader_epoch, metadata, commit_timestamp_ms)| {
                    let value = OffsetCommitValue {
                        offset: *offset,
                        leader_epoch: *leader_epoch,
                        metadata: metadata.clone(),
                        // Kafka keeps a timestamp the client gave; it is where a
                        // simple group's retention counts from.
                        commit_timestamp_ms: if *commit_timestamp_ms == -1 {
                            now_ms
                        } else {
                            *commit_timestamp_ms
                        },
                        expire_timestamp_ms: (req.retention_ms != -1)
                            .then(|| now_ms.saturating_add(req.retention_ms)),
                    };
                    self.offsets.commit(&req.group_id, tp.clone(), value)
                },
            )
            .collect()
    }

    /// TxnOffsetCommit's membership check (Kafka's `validateOffsetCommit`
    /// with `isTransactional`): a commit naming a member must come from the
    /// current generation, so a zombie consumer's transaction cannot move
    /// the group's offsets (KIP-447); one with no membership (v0–v2, or a
    /// producer outside group management) is not checked. The offsets are
    /// checked here, when they join the transaction, because they are
    /// applied later by [`Self::commit_txn_offsets`] without a check.
    pub fn validate_txn_offset_commit(&self, req: &OffsetCommitRequest) -> ErrorCode {
        if req.group_id.is_empty() {
            return ErrorCode::InvalidGroupId;
        }
        let generation = req.generation_id_or_member_epoch;
        if generation < 0 && req.member_id.is_empty() && req.group_instance_id.is_none() {
            return ErrorCode::None;
        }
        let verdict = match self.groups.get(&req.group_id) {
            None => Err(ErrorCode::IllegalGeneration),
            Some(Group::Classic(g)) => g.validate_offset_commit(
                &req.member_id,
                req.group_instance_id.as_deref(),
                generation,
            ),
            Some(Group::Consumer(g)) => g.validate_offset_commit(&req.member_id, generation),
            Some(Group::Share(_)) => Err(ErrorCode::GroupIdNotFound),
        };
        verdict.err().unwrap_or(ErrorCode::None)
    }

    /// Applies the offsets of a committed transaction (Kafka applies them
    /// when the COMMIT marker reaches `__consumer_offsets`). No membership
    /// check: it was made at TxnOffsetCommit, and the transaction is
    /// decided, so a rebalance or a restart since then must not drop them.
    /// Applying the same offsets twice is harmless: the transaction
    /// coordinator re-sends them after a crash until it records the end.
    pub fn commit_txn_offsets(
        &mut self,
        now_ms: i64,
        req: &OffsetCommitRequest,
    ) -> (Vec<(TopicPartition, ErrorCode)>, Vec<Record>) {
        if req.group_id.is_empty() {
            let rows = req
                .offsets
                .iter()
                .map(|(tp, ..)| (tp.clone(), ErrorCode::InvalidGroupId));
            return (rows.collect(), Vec::new());
        }
        if !self.groups.contains_key(&req.group_id) {
            // A group used only to store offsets, as for a simple commit.
            let g = ClassicGroup::new(&req.group_id, now_ms);
            self.groups.insert(req.group_id.clone(), Group::Classic(g));
        }
        let records = self.record_commits(now_ms, req);
        let rows = req
            .offsets
            .iter()
            .map(|(tp, ..)| (tp.clone(), ErrorCode::None));
        (rows.collect(), records)
    }

    /// TxnOffsetCommit when the transaction's coordinator is another broker
    /// (Kafka's way): the offsets wait here, persisted under the producer
    /// id, until the transaction's marker reaches this group's
    /// `__consumer_offsets` partition ([`Self::complete_txn`]). The
    /// membership check is [`Self::validate_txn_offset_commit`]'s.
    pub fn stage_txn_offsets(
        &mut self,
        now_ms: i64,
        producer_id: i64,
        req: &OffsetCommitRequest,
    ) -> (Vec<(TopicPartition, ErrorCode)>, Vec<Record>) {
        let code = self.validate_txn_offset_commit(req);
        let rows = |code: ErrorCode| {
            req.offsets
                .iter()
                .map(|(tp, ..)| (tp.clone(), code))
                .collect::<Vec<_>>()
        };
        if code != ErrorCode::None {
            return (rows(code), Vec::new());
        }
        let pending = self.pending_txn.entry(producer_id).or_default();
        let mut records = Vec::with_capacity(req.offsets.len());
        for (tp, offset, leader_epoch, metadata, _) in &req.offsets {
            let value = OffsetCommitValue {
                offset: *offset,
                leader_epoch: *leader_epoch,
                metadata: metadata.clone(),
                commit_timestamp_ms: now_ms,
                expire_timestamp_ms: None,
            };
            let key = records::encode_pending_txn_offset_key(
                producer_id,
                &req.group_id,
                &tp.topic,
                tp.partition,
            );
            records.push((key, Some(records::encode_offset_commit_value(&value))));
            pending.insert((req.group_id.clone(), tp.clone()), value);
        }
        (rows(ErrorCode::None), records)
    }

    /// The marker of `producer_id`'s transaction reached the partition of
    /// the groups `in_partition` accepts: on commit its staged offsets
    /// become the groups' committed offsets (no membership check: the
    /// transaction is decided), on abort they are dropped; either way the
    /// staged records are deleted. A marker with nothing staged (the
    /// transaction's coordinator is on this broker, or a resent marker)
    /// changes nothing.
    pub fn complete_txn(
        &mut self,
        now_ms: i64,
        producer_id: i64,
        commit: bool,
        in_partition: &dyn Fn(&str) -> bool,
    ) -> Vec<Record> {
        let Some(pending) = self.pending_txn.get_mut(&producer_id) else {
            return Vec::new();
        };
        let done: Vec<(String, TopicPartition)> = pending
            .keys()
            .filter(|(group, _)| in_partition(group))
            .cloned()
            .collect();
        let mut records = Vec::with_capacity(2 * done.len());
        for (group, tp) in done {
            let Some(value) = pending.remove(&(group.clone(), tp.clone())) else {
                continue;
            };
            records.push((
                records::encode_pending_txn_offset_key(
                    producer_id,
                    &group,
                    &tp.topic,
                    tp.partition,
                ),
                None,
            ));
            if commit {
                if !self.groups.contains_key(&group) {
                    // A group used only to store offsets, as for a simple commit.
                    let g = ClassicGroup::new(&group, now_ms);
                    self.groups.insert(group.clone(), Group::Classic(g));
                }
                records.push(self.offsets.commit(&group, tp, value));
            }
        }
        if pending.is_empty() {
            self.pending_txn.remove(&producer_id);
        }
        records
    }

    /// Staged transactional offsets of a producer, for tests and metrics.
    pub fn pending_txn_offsets(&self, producer_id: i64) -> usize {
        self.pending_txn.get(&producer_id).map_or(0, BTreeMap::len)
    }

    /// Handles an OffsetFetch: the listed partitions (-1 when none committed)
    /// or, with `None`, every committed partition of the group.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Vec<FetchedOffset> {
        let row = |tp: &TopicPartition, v: Option<&OffsetCommitValue>| FetchedOffset {
            partition: tp.clone(),
            offset: v.map_or(-1, |v| v.offset),
            leader_epoch: v.map_or(-1, |v| v.leader_epoch),
            metadata: v.map(|v| v.metadata.clone()).unwrap_or_default(),
        };
        match partitions {
            Some(list) => list
                .iter()
                .map(|tp| row(tp, self.offsets.get(group_id, tp)))
                .collect(),
            None => self
                .offsets
                .all(group_id)
                .map(|(tp, v)| row(tp, Some(v)))
                .collect(),
        }
    }

    /// Handles an OffsetDelete: a group error code, per-partition codes, records.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> (ErrorCode, Vec<(TopicPartition, ErrorCode)>, Vec<Record>) {
        let subscribed = match self.groups.get(group_id) {
            None => return (ErrorCode::GroupIdNotFound, Vec::new(), Vec::new()),
            Some(Group::Classic(g)) if g.state == ClassicState::Dead => {
                return (ErrorCode::GroupIdNotFound, Vec::new(), Vec::new())
            }
            Some(Group::Classic(g)) => match g.subscribed_topics() {
                Some(topics) => topics,
                // Kafka: a non-empty group of another protocol type cannot
                // say what it consumes, so nothing may be deleted.
                None if !g.is_empty() => return (ErrorCode::NonEmptyGroup, Vec::new(), Vec::new()),
                None => Default::default(),
            },
            Some(Group::Consumer(g)) => g.subscribed_topics(),
            Some(Group::Share(_)) => return (ErrorCode::GroupIdNotFound, Vec::new(), Vec::new()),
        };
        let mut codes = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for tp in partitions {
            if subscribed.contains(&tp.topic) {
                codes.push((tp.clone(), ErrorCode::GroupSubscribedToTopic));
                continue;
            }
            records.extend(self.offsets.delete(group_id, tp));
            codes.push((tp.clone(), ErrorCode::None));
        }
        (ErrorCode::None, codes, records)
    }

    /// Handles DeleteGroups: one error code per group, and the tombstones.
    pub fn delete_groups(
        &mut self,
        group_ids: &[String],
    ) -> (Vec<(String, ErrorCode)>, Vec<Record>) {
        let mut codes = Vec::with_capacity(group_ids.len());
        let mut records = Vec::new();
        for id in group_ids {
            let code = match self.groups.get(id) {
                // A share group known by its topics only (from a log
                // written before share groups' membership was kept).
                None if self.share_topics.of(id).is_some() => {
                    records.extend(self.remove_group(id));
                    ErrorCode::None
                }
                None => ErrorCode::GroupIdNotFound,
                Some(g) if !g.is_empty() => ErrorCode::NonEmptyGroup,
                Some(Group::Classic(g)) if g.state != ClassicState::Empty => {
                    ErrorCode::NonEmptyGroup
                }
                Some(_) => {
                    records.extend(self.remove_group(id));
                    ErrorCode::None
                }
            };
            codes.push((id.clone(), code));
        }
        (codes, records)
    }

    /// Removes a group and its offsets, returning the tombstones.
    fn remove_group(&mut self, group_id: &str) -> Vec<Record> {
        let mut records = self.offsets.delete_group(group_id);
        if let Some(Group::Classic(_)) = self.groups.remove(group_id) {
            records.push((records::encode_group_metadata_key(group_id), None));
        }
        records.extend(self.share_topics.forget(group_id));
        records.extend(self.sync_membership(group_id));
        records
    }

    /// Handles ListGroups; an empty filter lists every state.
    pub fn list_groups(&self, states_filter: &[String]) -> Vec<ListedGroup> {
        self.groups
            .iter()
            .filter(|(_, g)| {
                states_filter.is_empty()
                    || states_filter
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(g.state_name()))
            })
            .map(|(id, g)| match g {
                Group::Classic(c) => ListedGroup {
                    group_id: id.clone(),
                    protocol_type: c.protocol_type.clone().unwrap_or_default(),
                    state: c.state.name().to_string(),
                    group_type: "classic".to_string(),
                },
                Group::Consumer(c) => ListedGroup {
                    group_id: id.clone(),
                    protocol_type: "consumer".to_string(),
                    state: c.state().name().to_string(),
                    group_type: "consumer".to_string(),
                },
                Group::Share(g) => ListedGroup {
                    group_id: id.clone(),
                    protocol_type: "share".to_string(),
                    state: g.state_name().to_string(),
                    group_type: "share".to_string(),
                },
            })
            .collect()
    }

    /// Handles DescribeGroups for one classic group.
    pub fn describe_group(&self, group_id: &str) -> DescribedGroup {
        let mut out = DescribedGroup {
            error_code: ErrorCode::None,
            group_id: group_id.to_string(),
            state: ClassicState::Dead.name().to_string(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        };
        match self.groups.get(group_id) {
            Some(Group::Classic(g)) => {
                out.state = g.state.name().to_string();
                out.protocol_type = g.protocol_type.clone().unwrap_or_default();
                // Kafka names the protocol only once it is settled.
                if g.state == ClassicState::Stable {
                    out.protocol = g.protocol.clone().unwrap_or_default();
                }
                let protocol = g.protocol.as_deref().unwrap_or_default();
                out.members = g
                    .members
                    .values()
                    .map(|m| DescribedMember {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        metadata: m.metadata(protocol).to_vec(),
                        assignment: m.assignment.clone(),
                    })
                    .collect();
            }
            Some(Group::Consumer(_) | Group::Share(_)) => {
                out.error_code = ErrorCode::GroupIdNotFound
            }
            None => {}
        }
        out
    }

    // ------------------------------------------------------------ time

    /// Drives every timer: joins, syncs, sessions, offset expiry.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Record> {
        let mut records = Vec::new();
        let mut stepped = Vec::new();
        for (id, group) in self.groups.iter_mut() {
            match group {
                Group::Classic(g) => {
                    if g.next_deadline_ms().is_some_and(|d| d <= now_ms) {
                        let mut step = Step {
                            config: &self.config,
                            now_ms,
                            outbox: &mut self.outbox,
                            records: &mut records,
                            ids: &mut self.ids,
                        };
                        g.tick(&mut step);
                    }
                }
                Group::Consumer(g) if g.next_deadline_ms().is_some_and(|d| d <= now_ms) => {
                    g.tick(now_ms);
                    stepped.push(id.clone());
                }
                Group::Share(g) if g.next_deadline_ms().is_some_and(|d| d <= now_ms) => {
                    g.tick(now_ms);
                    stepped.push(id.clone());
                }
                Group::Consumer(_) | Group::Share(_) => {}
            }
        }
        for id in stepped {
            records.extend(self.after_consumer_step(now_ms, &id));
        }
        if now_ms >= self.next_expiry_check_ms {
            self.next_expiry_check_ms = now_ms + self.config.offsets_retention_check_interval_ms;
            records.extend(self.expire_offsets(now_ms));
        }
        records
    }

    /// Expires the offsets of empty groups after `offsets.retention.minutes`,
    /// and removes groups left with neither members nor offsets.
    fn expire_offsets(&mut self, now_ms: i64) -> Vec<Record> {
        let retention_ms = self.config.offsets_retention_ms;
        let mut records = Vec::new();
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for id in ids {
            let base: Option<Option<i64>> = match self.groups.get(&id) {
                Some(Group::Classic(g)) if g.state == ClassicState::Empty => {
                    // A simple (offsets-only) group counts from each commit;
                    // a consumer group from the moment it became empty.
                    Some(
                        g.protocol_type
                            .as_ref()
                            .map(|_| g.state_timestamp_ms)
                            .filter(|t| *t >= 0),
                    )
                }
                Some(Group::Consumer(g)) if g.members.is_empty() => Some(Some(g.empty_since_ms)),
                _ => None,
            };
            let Some(base) = base else { continue };
            records.extend(self.offsets.expire(&id, now_ms, retention_ms, |v| {
                base.unwrap_or(v.commit_timestamp_ms)
            }));
            // An empty classic group may hold a member between its
            // MEMBER_ID_REQUIRED and its second join (a deadline): it stays,
            // or that join would find no group (UNKNOWN_MEMBER_ID).
            let waiting = matches!(self.groups.get(&id),
                Some(Group::Classic(g)) if g.next_deadline_ms().is_some());
            if !self.offsets.has_offsets(&id) && !waiting {
                records.extend(self.remove_group(&id));
            }
        }
        records
    }

    /// The earliest time [`GroupCoordinator::tick`] has something to do.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let groups = self.groups.values().filter_map(|g| match g {
            Group::Classic(c) => c.next_deadline_ms(),
            Group::Consumer(c) => c.next_deadline_ms(),
            Group::Share(g) => g.next_deadline_ms(),
        });
        let expiry = (!self.groups.is_empty()).then_some(self.next_expiry_check_ms.max(0));
        groups.chain(expiry).min()
    }

    // ------------------------------------------------------------ replay

    /// Applies one `__consumer_offsets` record (`None` value = tombstone).
    /// Records of schemas not replayed (Kafka's KIP-848 ones) are skipped.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), RecordError> {
        match records::decode_key(key)? {
            RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            } => {
                let tp = TopicPartition::new(topic, partition);
                let value = value.map(records::decode_offset_commit_value).transpose()?;
                if value.is_some() && !self.groups.contains_key(&group) {
                    // Offsets without group metadata: a simple group.
                    let mut g = ClassicGroup::new(&group, -1);
                    g.state_timestamp_ms = -1;
                    self.groups.insert(group.clone(), Group::Classic(g));
                }
                self.offsets.apply(&group, tp, value);
            }
            RecordKey::GroupMetadata { group } => match value {
                Some(v) => {
                    let v = records::decode_group_metadata_value(v)?;
                    self.groups.insert(
                        group.clone(),
                        Group::Classic(ClassicGroup::from_record(&group, &v)),
                    );
                }
                None => {
                    if let Some(Group::Classic(_)) = self.groups.get(&group) {
                        self.groups.remove(&group);
                    }
                }
            },
            RecordKey::PendingTxnOffset {
                producer_id,
                group,
                topic,
                partition,
            } => {
                let key = (group, TopicPartition::new(topic, partition));
                match value.map(records::decode_offset_commit_value).transpose()? {
                    Some(value) => {
                        self.pending_txn
                            .entry(producer_id)
                            .or_default()
                            .insert(key, value);
                    }
                    None => {
                        if let Some(pending) = self.pending_txn.get_mut(&producer_id) {
                            pending.remove(&key);
                            if pending.is_empty() {
                                self.pending_txn.remove(&producer_id);
                            }
                        }
                    }
                }
            }
            RecordKey::ShareGroupTopics { group } => {
                let topics = value.map(records::decode_share_group_topics_value);
                self.share_topics.replay(group, topics.transpose()?);
            }
            RecordKey::MembershipHead { group } | RecordKey::MembershipMember { group, .. } => {
                self.membership.replay(group, key, value)?;
            }
            RecordKey::Other { .. } => {}
        }
        Ok(())
    }

    /// Ends the replay of the groups `loaded` selects (those of one
    /// `__consumer_offsets` partition): KIP-848 and share groups are rebuilt
    /// from their membership records, every member gets a full session from
    /// `now_ms`, and offset-only groups whose offsets were all deleted are
    /// dropped. Other groups are left as they are. Returns the groups whose
    /// membership could not be rebuilt (replay checked each record, so
    /// none is expected), which start over empty.
    pub fn finish_replay(
        &mut self,
        now_ms: i64,
        loaded: &dyn Fn(&str) -> bool,
    ) -> Vec<(String, RecordError)> {
        let mut unreadable = Vec::new();
        for id in self.membership.groups(loaded) {
            // A classic group of the same id (offsets only, or one whose
            // metadata came after) keeps the id; the next sync deletes
            // the membership records it shadows.
            let shadowed = matches!(self.groups.get(&id),
                Some(Group::Classic(g)) if g.protocol_type.is_some() || !g.is_empty());
            if shadowed {
                continue;
            }
            match self.membership.restore(&id, &self.config, now_ms) {
                Ok(Some(Restored::Consumer(g))) => {
                    self.groups.insert(id, Group::Consumer(g));
                }
                Ok(Some(Restored::Share(g))) => {
                    self.groups.insert(id, Group::Share(g));
                }
                Ok(None) => {}
                Err(e) => unreadable.push((id, e)),
            }
        }
        let offsets = &self.offsets;
        self.groups.retain(|id, g| match g {
            Group::Classic(c) if loaded(id) => {
                c.start_session_timers(now_ms);
                !(c.is_empty() && c.protocol_type.is_none() && !offsets.has_offsets(id))
            }
            _ => true,
        });
        unreadable
    }

    /// Forgets every group `unloaded` selects (those of a `__consumer_offsets`
    /// partition this broker no longer leads): its members, committed
    /// offsets and staged transactional offsets. Nothing is written: the
    /// log, now the new leader's, keeps them. Their timers stop with them.
    pub fn unload(&mut self, unloaded: &dyn Fn(&str) -> bool) {
        self.groups.retain(|id, _| !unloaded(id));
        self.offsets.forget(unloaded);
        self.membership.forget(unloaded);
        self.pending_txn.retain(|_, staged| {
            staged.retain(|(group, _), _| !unloaded(group));
            !staged.is_empty()
        });
    }
}

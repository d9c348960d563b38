//! The KIP-848 consumer group protocol (ConsumerGroupHeartbeat) as a state
//! machine with no I/O.
//!
//! The broker owns the assignment: a membership or subscription change (or a
//! change of a subscribed topic's partition count) bumps the group epoch; the
//! target assignment for that epoch is computed by a server-side assignor; then
//! each member is reconciled towards its target one heartbeat at a time. A
//! partition is given to a member only once no other member owns it (assigned
//! or pending revocation), so no partition is ever owned twice. A member moves
//! to the target epoch once it has nothing left to revoke.

use engine::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

use super::assignor::{
    Assignor, GroupAssignment, MemberAssignment, MemberSubscription, TopicPartition,
};
use super::migration::ClassicMemberMetadata;
use super::{GroupConfig, IdGenerator, MemberTimeouts};

/// Member epoch of a member leaving the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// Member epoch of a static member leaving, to rejoin soon with the same instance.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// Metadata of one topic, as the caller's topic table knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic id.
    pub id: [u8; 16],
    /// Partition count.
    pub partitions: i32,
}

/// How a heartbeat or a join sees the topics: by name, and by a regular
/// expression (the names of the topics it matches).
pub type TopicLookups<'a> = (
    &'a dyn Fn(&str) -> Option<TopicInfo>,
    &'a dyn Fn(&str) -> Vec<String>,
);

/// A ConsumerGroupHeartbeat request. `None` fields mean "unchanged".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerHeartbeatRequest {
    /// Group id.
    pub group_id: String,
    /// Member id; empty on a first join (the broker generates one).
    pub member_id: String,
    /// 0 to join, -1 to leave, -2 for a static member's temporary leave.
    pub member_epoch: i32,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// Rack id.
    pub rack_id: Option<String>,
    /// Rebalance timeout, -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// A regular expression the subscribed topics match (RE2/J syntax,
    /// whole names); an empty one drops it.
    pub subscribed_topic_regex: Option<String>,
    /// Server assignor name.
    pub server_assignor: Option<String>,
    /// Partitions the member owns now (names resolved by the handler).
    pub owned_partitions: Option<Vec<TopicPartition>>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// The group's own `consumer.session.timeout.ms` and
    /// `consumer.heartbeat.interval.ms`, resolved by the caller; `None`:
    /// the broker's.
    pub timeouts: Option<MemberTimeouts>,
}

impl ConsumerHeartbeatRequest {
    /// The member's timeouts: the group's, else the broker's.
    fn timeouts(&self, config: &GroupConfig) -> MemberTimeouts {
        self.timeouts.unwrap_or_else(|| config.consumer_timeouts())
    }
}

/// A ConsumerGroupHeartbeat answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatResponse {
    /// Error code.
    pub error_code: ErrorCode,
    /// The member id (generated on first join).
    pub member_id: String,
    /// The member's epoch.
    pub member_epoch: i32,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The member's full assignment, when it changed; the handler maps topic
    /// names to ids.
    pub assignment: Option<Vec<TopicPartition>>,
}

impl ConsumerHeartbeatResponse {
    pub(super) fn error(error_code: ErrorCode, member_id: &str, member_epoch: i32) -> Self {
        Self {
            error_code,
            member_id: member_id.to_string(),
            member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

/// Where a member is in reconciling towards its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Owns its whole target at the group's assignment epoch.
    Stable,
    /// Must revoke partitions before moving to the new epoch.
    UnrevokedPartitions,
    /// At the new epoch, waiting for others to release partitions.
    UnreleasedPartitions,
}

/// One member of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// Rack id.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Member epoch.
    pub member_epoch: i32,
    /// The epoch before the last bump (a lost response is tolerated).
    pub previous_member_epoch: i32,
    /// Reconciliation state.
    pub state: MemberState,
    /// Subscribed topics.
    pub subscribed_topics: BTreeSet<String>,
    /// The regular expression it subscribes with, if any.
    pub subscribed_regex: Option<String>,
    /// The topics that expression matched when last resolved.
    pub regex_topics: BTreeSet<String>,
    /// Server assignor the member asked for.
    pub server_assignor: Option<String>,
    /// Rebalance timeout (bounds a revocation).
    pub rebalance_timeout_ms: i32,
    /// Partitions the member owns.
    pub assigned: MemberAssignment,
    /// Partitions the member must give up.
    pub pending_revocation: MemberAssignment,
    /// Set for a classic member the group hosts (see [`super::migration`]).
    pub classic: Option<ClassicMemberMetadata>,
    pub(super) session_deadline_ms: i64,
    /// By when the member must act or be removed, bounded by its rebalance
    /// timeout: revoke what it must give up; a hosted classic member, also
    /// join again when told to, and sync after it joined (Kafka's join and
    /// sync timeouts).
    pub(super) rebalance_deadline_ms: Option<i64>,
}

impl ConsumerMember {
    /// A member that owns nothing yet, at epoch 0, subscribed to nothing.
    pub(super) fn new(
        member_id: &str,
        instance_id: Option<String>,
        (client_id, client_host): (&str, &str),
        session_deadline_ms: i64,
    ) -> Self {
        Self {
            member_id: member_id.to_string(),
            instance_id,
            rack_id: None,
            client_id: client_id.to_string(),
            client_host: client_host.to_string(),
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            subscribed_topics: BTreeSet::new(),
            subscribed_regex: None,
            regex_topics: BTreeSet::new(),
            server_assignor: None,
            rebalance_timeout_ms: 0,
            assigned: MemberAssignment::new(),
            pending_revocation: MemberAssignment::new(),
            classic: None,
            session_deadline_ms,
            rebalance_deadline_ms: None,
        }
    }

    /// Every topic it subscribes to: by name, and by its expression.
    pub fn topics(&self) -> impl Iterator<Item = String> + '_ {
        self.subscribed_topics
            .iter()
            .chain(self.regex_topics.iter())
            .cloned()
    }
}

/// Group state, derived as in Kafka's `ConsumerGroup.State`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The target assignment is behind the group epoch.
    Assigning,
    /// Some member has not reached the target.
    Reconciling,
    /// Every member owns its target at the current epoch.
    Stable,
}

impl ConsumerGroupState {
    /// The name used by ListGroups and ConsumerGroupDescribe.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Assigning => "Assigning",
            Self::Reconciling => "Reconciling",
            Self::Stable => "Stable",
        }
    }
}

/// One KIP-848 consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// Group id.
    pub group_id: String,
    /// Bumped on every membership, subscription or topic-size change.
    pub group_epoch: i32,
    /// The epoch the target assignment was computed for.
    pub assignment_epoch: i32,
    /// Members by id.
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment at `assignment_epoch`.
    pub target: GroupAssignment,
    /// Partition counts of the subscribed topics, as last seen.
    pub topic_partitions: BTreeMap<String, i32>,
    /// Assignor used for the last target.
    pub assignor: Assignor,
    /// When the group last became empty (offset expiry counts from there).
    pub empty_since_ms: i64,
}

impl ConsumerGroup {
    /// A new, empty group.
    pub fn new(group_id: &str, now_ms: i64) -> Self {
        Self {
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: GroupAssignment::new(),
            topic_partitions: BTreeMap::new(),
            assignor: Assignor::Uniform,
            empty_since_ms: now_ms,
        }
    }

    /// The derived state.
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.member_epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    /// Topics any member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(ConsumerMember::topics)
            .collect()
    }

    /// Resolves every member's regular expression again with `matching`
    /// (topic creations and deletions change what it matches); true when
    /// a member's topics changed, which bumps the group epoch.
    ///
    /// Each distinct expression is matched once: a group's members mostly
    /// share one, and matching walks every topic.
    pub(super) fn resolve_regexes(&mut self, matching: &dyn Fn(&str) -> Vec<String>) -> bool {
        let mut resolved: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut changed = false;
        for m in self.members.values_mut() {
            let topics: BTreeSet<String> = match &m.subscribed_regex {
                Some(regex) => resolved
                    .entry(regex.clone())
                    .or_insert_with(|| matching(regex).into_iter().collect())
                    .clone(),
                None => BTreeSet::new(),
            };
            if topics != m.regex_topics {
                m.regex_topics = topics;
                changed = true;
            }
        }
        changed
    }

    /// Handles one ConsumerGroupHeartbeat.
    pub fn heartbeat(
        &mut self,
        config: &GroupConfig,
        ids: &mut IdGenerator,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
        topics: &dyn Fn(&str) -> Option<TopicInfo>,
        matching: &dyn Fn(&str) -> Vec<String>,
    ) -> ConsumerHeartbeatResponse {
        if let Some(name) = &req.server_assignor {
            if Assignor::from_name(name).is_none() {
                return ConsumerHeartbeatResponse::error(
                    ErrorCode::UnsupportedAssignor,
                    &req.member_id,
                    req.member_epoch,
                );
            }
        }
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
            || req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
        {
            return self.leave(now_ms, req);
        }
        let member_id = match self.heartbeat_member_id(config, ids, now_ms, req) {
            Ok(member_id) => member_id,
            Err(response) => return response,
        };
        let (before_epoch, before_assigned) = match self.heartbeat_member_before(&member_id, req) {
            Ok(before) => before,
            Err(response) => return response,
        };
        if self.heartbeat_update_member(config, now_ms, &member_id, req) {
            self.group_epoch += 1;
        }
        if self.resolve_regexes(matching) {
            self.group_epoch += 1;
        }
        self.refresh_topics(topics);
        self.maybe_compute_target();
        self.reconcile(&member_id, req.owned_partitions.as_deref(), now_ms);
        self.heartbeat_response(config, req, &member_id, before_epoch, &before_assigned)
    }

    /// The member a heartbeat is for: a new one on a join (epoch 0), else
    /// the one the request names; `Err` is the response refusing it.
    fn heartbeat_member_id(
        &mut self,
        config: &GroupConfig,
        ids: &mut IdGenerator,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
    ) -> Result<String, ConsumerHeartbeatResponse> {
        if req.member_epoch == 0 {
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return Err(ConsumerHeartbeatResponse::error(
                    ErrorCode::InvalidRequest,
                    &req.member_id,
                    0,
                ));
            }
            match self.join(config, ids, now_ms, req) {
                Ok(id) => Ok(id),
                Err(code) => Err(ConsumerHeartbeatResponse::error(code, &req.member_id, 0)),
            }
        } else if req.member_id.is_empty() {
            Err(ConsumerHeartbeatResponse::error(
                ErrorCode::UnknownMemberId,
                "",
                req.member_epoch,
            ))
        } else {
            Ok(req.member_id.clone())
        }
    }

    /// The member's epoch and assignment before this heartbeat, once its
    /// epoch and owned partitions check out; `Err` is the response refusing
    /// the heartbeat.
    fn heartbeat_member_before(
        &self,
        member_id: &str,
        req: &ConsumerHeartbeatRequest,
    ) -> Result<(i32, MemberAssignment), ConsumerHeartbeatResponse> {
        let Some(member) = self.members.get(member_id) else {
            return Err(ConsumerHeartbeatResponse::error(
                ErrorCode::UnknownMemberId,
                member_id,
                req.member_epoch,
            ));
        };
        if req.member_epoch != 0 {
            if let Err(code) =
                check_member_epoch(member, req.member_epoch, req.owned_partitions.as_deref())
            {
                return Err(ConsumerHeartbeatResponse::error(
                    code,
                    member_id,
                    req.member_epoch,
                ));
            }
        }
        Ok((member.member_epoch, member.assigned.clone()))
    }

    /// Takes the heartbeat's changes into the member and extends its
    /// session; true when its subscription or assignor changed, which bumps
    /// the group epoch.
    fn heartbeat_update_member(
        &mut self,
        config: &GroupConfig,
        now_ms: i64,
        member_id: &str,
        req: &ConsumerHeartbeatRequest,
    ) -> bool {
        let mut bump = false;
        if let Some(m) = self.members.get_mut(member_id) {
            if let Some(names) = &req.subscribed_topic_names {
                let names: BTreeSet<String> = names.iter().cloned().collect();
                if names != m.subscribed_topics {
                    m.subscribed_topics = names;
                    bump = true;
                }
            }
            if req.subscribed_topic_regex.is_some() {
                let regex = regex_of(req);
                if regex != m.subscribed_regex {
                    m.subscribed_regex = regex;
                    bump = true;
                }
            }
            if req.server_assignor.is_some() && req.server_assignor != m.server_assignor {
                m.server_assignor = req.server_assignor.clone();
                bump = true;
            }
            if req.rebalance_timeout_ms > 0 {
                m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            }
            if req.rack_id.is_some() {
                m.rack_id = req.rack_id.clone();
            }
            m.session_deadline_ms = now_ms + req.timeouts(config).session_timeout_ms;
        }
        bump
    }

    /// The answer after reconciliation: the assignment is sent on a join,
    /// when the member's epoch or assignment changed, or when the client's
    /// owned partitions differ from it.
    fn heartbeat_response(
        &self,
        config: &GroupConfig,
        req: &ConsumerHeartbeatRequest,
        member_id: &str,
        before_epoch: i32,
        before_assigned: &MemberAssignment,
    ) -> ConsumerHeartbeatResponse {
        let Some(member) = self.members.get(member_id) else {
            return ConsumerHeartbeatResponse::error(
                ErrorCode::UnknownMemberId,
                member_id,
                req.member_epoch,
            );
        };
        let owned_differs = req
            .owned_partitions
            .as_ref()
            .is_some_and(|o| o.iter().cloned().collect::<BTreeSet<_>>() != member.assigned);
        let send_assignment = req.member_epoch == 0
            || member.member_epoch != before_epoch
            || member.assigned != *before_assigned
            || owned_differs;
        ConsumerHeartbeatResponse {
            error_code: ErrorCode::None,
            member_id: member_id.to_string(),
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: req.timeouts(config).heartbeat_interval_ms,
            assignment: send_assignment.then(|| member.assigned.iter().cloned().collect()),
        }
    }

    fn join(
        &mut self,
        config: &GroupConfig,
        ids: &mut IdGenerator,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
    ) -> Result<String, ErrorCode> {
        let member_id = if req.member_id.is_empty() {
            ids.uuid_string()
        } else {
            req.member_id.clone()
        };
        // A static member coming back takes over its previous incarnation's
        // assignment if that one left with epoch -2; otherwise the instance id
        // is still in use.
        let mut inherited: Option<ConsumerMember> = None;
        if let Some(instance) = &req.instance_id {
            let holder = self
                .members
                .values()
                .find(|m| m.instance_id.as_deref() == Some(instance) && m.member_id != member_id)
                .map(|m| (m.member_id.clone(), m.member_epoch));
            if let Some((old_id, old_epoch)) = holder {
                if old_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                    return Err(ErrorCode::UnreleasedInstanceId);
                }
                inherited = self.members.remove(&old_id);
                if let Some(a) = self.target.remove(&old_id) {
                    self.target.insert(member_id.clone(), a);
                }
            }
        }
        let session_deadline_ms = now_ms + req.timeouts(config).session_timeout_ms;
        let regex = regex_of(req);
        let subscribed: BTreeSet<String> = req
            .subscribed_topic_names
            .iter()
            .flatten()
            .cloned()
            .collect();
        let member = match inherited {
            Some(mut m) => {
                m.member_id = member_id.clone();
                m.member_epoch = m.previous_member_epoch;
                if m.subscribed_topics != subscribed || m.subscribed_regex != regex {
                    self.group_epoch += 1;
                }
                m.subscribed_topics = subscribed;
                m.subscribed_regex = regex;
                m.session_deadline_ms = session_deadline_ms;
                m
            }
            None => {
                // A new member, or a fenced one rejoining: starts owning nothing.
                self.group_epoch += 1;
                let mut m = ConsumerMember::new(
                    &member_id,
                    req.instance_id.clone(),
                    (&req.client_id, &req.client_host),
                    session_deadline_ms,
                );
                m.rack_id = req.rack_id.clone();
                m.subscribed_topics = subscribed;
                m.subscribed_regex = regex;
                m.server_assignor = req.server_assignor.clone();
                m.rebalance_timeout_ms = req.rebalance_timeout_ms.max(0);
                m
            }
        };
        self.members.insert(member_id.clone(), member);
        Ok(member_id)
    }

    fn leave(&mut self, now_ms: i64, req: &ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
        let Some(member) = self.members.get_mut(&req.member_id) else {
            return ConsumerHeartbeatResponse::error(
                ErrorCode::UnknownMemberId,
                &req.member_id,
                req.member_epoch,
            );
        };
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH && member.instance_id.is_some() {
            // Keep the assignment for the instance's next incarnation; the
            // session timeout still bounds how long it is held.
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
        } else {
            self.remove_member(&req.member_id, now_ms);
        }
        ConsumerHeartbeatResponse::error(ErrorCode::None, &req.member_id, req.member_epoch)
    }

    /// Removes a member (leave, expiry, fencing) and bumps the group epoch.
    pub fn remove_member(&mut self, member_id: &str, now_ms: i64) {
        if self.members.remove(member_id).is_some() {
            self.target.remove(member_id);
            self.group_epoch += 1;
            if self.members.is_empty() {
                self.empty_since_ms = now_ms;
            }
            self.maybe_compute_target();
        }
    }

    pub(super) fn refresh_topics(&mut self, topics: &dyn Fn(&str) -> Option<TopicInfo>) {
        let seen: BTreeMap<String, i32> = self
            .subscribed_topics()
            .into_iter()
            .filter_map(|t| topics(&t).map(|info| (t, info.partitions)))
            .collect();
        if seen != self.topic_partitions {
            self.topic_partitions = seen;
            self.group_epoch += 1;
        }
    }

    /// The most requested assignor; the configured default when none is named.
    fn choose_assignor(&self) -> Assignor {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .iter()
            .max_by_key(|(name, v)| (**v, std::cmp::Reverse(**name)))
            .and_then(|(name, _)| Assignor::from_name(name))
            .unwrap_or(Assignor::Uniform)
    }

    pub(super) fn maybe_compute_target(&mut self) {
        if self.group_epoch <= self.assignment_epoch {
            return;
        }
        self.assignor = self.choose_assignor();
        let subs: BTreeMap<String, MemberSubscription> = self
            .members
            .iter()
            .map(|(id, m)| {
                (
                    id.clone(),
                    MemberSubscription {
                        topics: m.topics().collect(),
                    },
                )
            })
            .collect();
        self.target = self
            .assignor
            .assign(&subs, &self.topic_partitions, &self.target);
        self.assignment_epoch = self.group_epoch;
    }

    /// Moves one member one step towards its target (Kafka's
    /// `CurrentAssignmentBuilder`): revoke first, then take only partitions no
    /// other member still owns.
    pub(super) fn reconcile(
        &mut self,
        member_id: &str,
        owned: Option<&[TopicPartition]>,
        now_ms: i64,
    ) {
        let owned_by_others: BTreeSet<TopicPartition> = self
            .members
            .iter()
            .filter(|(id, _)| id.as_str() != member_id)
            .flat_map(|(_, m)| {
                m.assigned
                    .iter()
                    .chain(m.pending_revocation.iter())
                    .cloned()
            })
            .collect();
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let assignment_epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        if m.state == MemberState::UnrevokedPartitions {
            let still_owned = match owned {
                Some(owned) => owned.iter().any(|tp| m.pending_revocation.contains(tp)),
                None => true,
            };
            if still_owned {
                return;
            }
            m.pending_revocation.clear();
            m.rebalance_deadline_ms = None;
            m.state = MemberState::Stable;
        }
        if m.member_epoch == assignment_epoch
            && m.state == MemberState::Stable
            && m.assigned == target
        {
            return;
        }
        let to_revoke: MemberAssignment = m.assigned.difference(&target).cloned().collect();
        if !to_revoke.is_empty() {
            m.assigned = m.assigned.intersection(&target).cloned().collect();
            m.pending_revocation = to_revoke;
            m.state = MemberState::UnrevokedPartitions;
            m.rebalance_deadline_ms = Some(now_ms + i64::from(m.rebalance_timeout_ms));
            return;
        }
        let mut unreleased = false;
        for tp in target.difference(&m.assigned.clone()) {
            if owned_by_others.contains(tp) {
                unreleased = true;
            } else {
                m.assigned.insert(tp.clone());
            }
        }
        if m.member_epoch != assignment_epoch {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = assignment_epoch;
        }
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
    }

    /// Expires members whose session or revocation deadline passed.
    pub fn tick(&mut self, now_ms: i64) {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline_ms <= now_ms
                    || m.rebalance_deadline_ms.is_some_and(|d| d <= now_ms)
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            self.remove_member(&id, now_ms);
        }
    }

    /// The earliest time [`ConsumerGroup::tick`] has something to do.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.members
            .values()
            .flat_map(|m| std::iter::once(m.session_deadline_ms).chain(m.rebalance_deadline_ms))
            .min()
    }

    /// Whether an OffsetCommit with this member id and epoch may commit.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), ErrorCode> {
        // Admin tools and consumers without group management commit with -1,
        // allowed only while nobody consumes.
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let member = self
            .members
            .get(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        // A classic member commits under its generation, which is its
        // member epoch; a mismatch is the classic protocol's error.
        if member.classic.is_some() && member_epoch != member.member_epoch {
            return Err(ErrorCode::IllegalGeneration);
        }
        if member_epoch > member.member_epoch {
            return Err(ErrorCode::FencedMemberEpoch);
        }
        if member_epoch < member.member_epoch {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(())
    }
}

/// The regular expression a heartbeat subscribes with (an empty one is
/// none; an absent one leaves a known member's as it was).
fn regex_of(req: &ConsumerHeartbeatRequest) -> Option<String> {
    (req.subscribed_topic_regex.as_deref())
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

/// Kafka's `throwIfMemberEpochIsInvalid`: an epoch ahead is fenced; one behind
/// is accepted only if it is the previous epoch and the member owns a subset of
/// its current assignment (the answer carrying the bump was lost).
fn check_member_epoch(
    member: &ConsumerMember,
    epoch: i32,
    owned: Option<&[TopicPartition]>,
) -> Result<(), ErrorCode> {
    if epoch > member.member_epoch {
        return Err(ErrorCode::FencedMemberEpoch);
    }
    if epoch < member.member_epoch {
        let subset = owned.is_some_and(|o| o.iter().all(|tp| member.assigned.contains(tp)));
        if epoch != member.previous_member_epoch || !subset {
            return Err(ErrorCode::FencedMemberEpoch);
        }
    }
    Ok(())
}

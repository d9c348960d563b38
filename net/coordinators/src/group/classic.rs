//! The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as
//! a state machine with no I/O, after Kafka's `GroupCoordinator`.
//!
//! States: `Empty → PreparingRebalance → CompletingRebalance → Stable`, back to
//! `PreparingRebalance` on any membership change, `Dead` once removed.
//!
//! JoinGroup and SyncGroup answers are often delayed (a join waits for the other
//! members, a follower's sync waits for the leader's). Every answer, immediate
//! or not, is pushed to an outbox keyed by the request's [`RequestToken`]; the
//! coordinator hands the caller its own answer directly when it is already there
//! and the rest are drained by [`super::GroupCoordinator::take_responses`].
//! Time only moves through the `now_ms` arguments and [`ClassicGroup::tick`].

use engine::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

use super::assignor::MemberAssignment;
use super::consumer_protocol::encode_assignment;
use super::offsets::Record;
use super::records::{self, GroupMetadataValue, MemberMetadataValue};
use super::{GroupConfig, GroupResponse, IdGenerator, RequestToken};

/// The state of a classic group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicState {
    /// No members; may still hold committed offsets.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Assignment distributed; members heartbeat.
    Stable,
    /// Removed.
    Dead,
}

impl ClassicState {
    /// The name Kafka uses in ListGroups and DescribeGroups.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
            Self::Dead => "Dead",
        }
    }
}

/// A JoinGroup request, for one group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinRequest {
    /// Group id.
    pub group_id: String,
    /// Member id; empty on a first join.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// Client id (prefix of generated member ids).
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Rebalance timeout (v0 clients: the session timeout).
    pub rebalance_timeout_ms: i32,
    /// Protocol type, `consumer` for consumers.
    pub protocol_type: String,
    /// Protocols in preference order, with their metadata.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// Whether the client handles MEMBER_ID_REQUIRED (JoinGroup v4+).
    pub require_known_member_id: bool,
    /// Whether the answer may carry `skip_assignment` (JoinGroup v9+,
    /// KIP-814): how a rejoining static leader is told it leads.
    pub supports_skip_assignment: bool,
}

/// A member as listed to the leader in a JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// The member's metadata for the selected protocol.
    pub metadata: Vec<u8>,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    /// Error code.
    pub error_code: ErrorCode,
    /// Generation id, -1 on error.
    pub generation_id: i32,
    /// Protocol type.
    pub protocol_type: Option<String>,
    /// Selected protocol.
    pub protocol_name: Option<String>,
    /// Leader member id.
    pub leader: String,
    /// The leader need not compute an assignment (static leader rejoin).
    pub skip_assignment: bool,
    /// The member's id (the generated one on MEMBER_ID_REQUIRED).
    pub member_id: String,
    /// All members, for the leader only.
    pub members: Vec<JoinMember>,
}

impl JoinResponse {
    pub(crate) fn error(error_code: ErrorCode, member_id: &str) -> Self {
        Self {
            error_code,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

/// A SyncGroup request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncRequest {
    /// Group id.
    pub group_id: String,
    /// Generation id.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// Protocol type (v5+), checked when present.
    pub protocol_type: Option<String>,
    /// Protocol name (v5+), checked when present.
    pub protocol_name: Option<String>,
    /// The leader's assignment, member id → bytes; empty from followers.
    pub assignments: Vec<(String, Vec<u8>)>,
}

/// A SyncGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    /// Error code.
    pub error_code: ErrorCode,
    /// Protocol type.
    pub protocol_type: Option<String>,
    /// Protocol name.
    pub protocol_name: Option<String>,
    /// This member's assignment.
    pub assignment: Vec<u8>,
}

impl SyncResponse {
    pub(crate) fn error(error_code: ErrorCode) -> Self {
        Self {
            error_code,
            protocol_type: None,
            protocol_name: None,
            assignment: Vec::new(),
        }
    }
}

/// A Heartbeat request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeartbeatRequest {
    /// Group id.
    pub group_id: String,
    /// Generation id.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
}

/// One member leaving, in a (batch) LeaveGroup request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeavingMember {
    /// Member id (may be empty for a static member named by instance id).
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
}

/// One member of a classic group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Supported protocols with metadata, in preference order.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// Assignment from the last completed sync.
    pub assignment: Vec<u8>,
    join_waiter: Option<RequestToken>,
    sync_waiter: Option<RequestToken>,
    heartbeat_deadline_ms: i64,
    join_sequence: u64,
}

impl ClassicMember {
    /// The metadata for `protocol`, empty when the member does not support it.
    pub fn metadata(&self, protocol: &str) -> &[u8] {
        self.protocols
            .iter()
            .find(|(p, _)| p == protocol)
            .map_or(&[][..], |(_, m)| m.as_slice())
    }

    fn vote(&self, candidates: &BTreeSet<&str>) -> Option<&str> {
        self.protocols
            .iter()
            .map(|(p, _)| p.as_str())
            .find(|p| candidates.contains(p))
    }

    /// Whether a JoinGroup request is waiting on this member.
    pub fn is_awaiting_join(&self) -> bool {
        self.join_waiter.is_some()
    }

    /// A member carried over from a KIP-848 group that turns classic (see
    /// [`super::conversion`]), with nothing assigned yet: `timeouts_ms` is
    /// its session and rebalance timeout.
    pub fn carried(
        member_id: &str,
        group_instance_id: Option<String>,
        (client_id, client_host): (&str, &str),
        (session_timeout_ms, rebalance_timeout_ms): (i32, i32),
        protocols: Vec<(String, Vec<u8>)>,
    ) -> Self {
        Self {
            member_id: member_id.to_string(),
            group_instance_id,
            client_id: client_id.to_string(),
            client_host: client_host.to_string(),
            session_timeout_ms,
            rebalance_timeout_ms,
            protocols,
            assignment: Vec::new(),
            join_waiter: None,
            sync_waiter: None,
            heartbeat_deadline_ms: i64::MAX,
            join_sequence: 0,
        }
    }
}

/// Everything a state-machine step needs besides the group itself.
pub(crate) struct Step<'a> {
    pub config: &'a GroupConfig,
    pub now_ms: i64,
    pub outbox: &'a mut Vec<(RequestToken, GroupResponse)>,
    pub records: &'a mut Vec<Record>,
    pub ids: &'a mut IdGenerator,
}

impl Step<'_> {
    fn join(&mut self, token: RequestToken, response: JoinResponse) {
        self.outbox.push((token, GroupResponse::Join(response)));
    }
    fn sync(&mut self, token: RequestToken, response: SyncResponse) {
        self.outbox.push((token, GroupResponse::Sync(response)));
    }
}

/// One classic group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicGroup {
    /// Group id.
    pub group_id: String,
    /// Current state.
    pub state: ClassicState,
    /// When the group entered `state`.
    pub state_timestamp_ms: i64,
    /// Generation id.
    pub generation: i32,
    /// Protocol type, set by the first member.
    pub protocol_type: Option<String>,
    /// Selected protocol.
    pub protocol: Option<String>,
    /// Leader member id.
    pub leader: Option<String>,
    /// Members by id.
    pub members: BTreeMap<String, ClassicMember>,
    static_members: BTreeMap<String, String>,
    /// Members told MEMBER_ID_REQUIRED, with the deadline to come back.
    pending_members: BTreeMap<String, i64>,
    join_deadline_ms: Option<i64>,
    /// While the initial rebalance delay runs: the rebalance time still left.
    initial_delay_remaining_ms: Option<i64>,
    new_member_added: bool,
    sync_deadline_ms: Option<i64>,
    next_join_sequence: u64,
}

impl ClassicGroup {
    /// A new, empty group.
    pub fn new(group_id: &str, now_ms: i64) -> Self {
        Self {
            group_id: group_id.to_string(),
            state: ClassicState::Empty,
            state_timestamp_ms: now_ms,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            join_deadline_ms: None,
            initial_delay_remaining_ms: None,
            new_member_added: false,
            sync_deadline_ms: None,
            next_join_sequence: 0,
        }
    }

    fn transition(&mut self, state: ClassicState, now_ms: i64) {
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The member id a static instance id maps to.
    pub fn static_member(&self, instance_id: &str) -> Option<&str> {
        self.static_members.get(instance_id).map(String::as_str)
    }

    /// The group's rebalance timeout: the largest of its members'.
    fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.join_waiter.is_some())
    }

    /// Whether `protocols` of `protocol_type` fit the group (Kafka's
    /// `supportsProtocols`): some protocol must be supported by every member.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Vec<u8>)]) -> bool {
        if self.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(p, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(q, _)| q == p))
            })
    }

    /// Kafka's `selectProtocol`: among the protocols every member supports,
    /// the one most members list first; ties go to the leader's preference.
    fn select_protocol(&self) -> Option<String> {
        let mut candidates: Option<BTreeSet<&str>> = None;
        for m in self.members.values() {
            let theirs: BTreeSet<&str> = m.protocols.iter().map(|(p, _)| p.as_str()).collect();
            candidates = Some(match candidates {
                None => theirs,
                Some(c) => c.intersection(&theirs).copied().collect(),
            });
        }
        let candidates = candidates?;
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(p) = m.vote(&candidates) {
                *votes.entry(p).or_default() += 1;
            }
        }
        let most = votes.values().copied().max()?;
        let leader_order: Vec<&str> = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .map(|m| m.protocols.iter().map(|(p, _)| p.as_str()).collect())
            .unwrap_or_default();
        let winners: Vec<&str> = votes
            .iter()
            .filter(|(_, v)| **v == most)
            .map(|(p, _)| *p)
            .collect();
        winners
            .iter()
            .min_by_key(|p| {
                leader_order
                    .iter()
                    .position(|q| q == *p)
                    .unwrap_or(usize::MAX)
            })
            .map(|p| p.to_string())
    }

    fn member_list(&self) -> Vec<JoinMember> {
        let protocol = self.protocol.as_deref().unwrap_or_default();
        let mut members: Vec<&ClassicMember> = self.members.values().collect();
        members.sort_by_key(|m| m.join_sequence);
        members
            .into_iter()
            .map(|m| JoinMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol).to_vec(),
            })
            .collect()
    }

    fn current_join_response(&self, member_id: &str, skip_assignment: bool) -> JoinResponse {
        let is_leader = self.leader.as_deref() == Some(member_id);
        JoinResponse {
            error_code: ErrorCode::None,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: is_leader && skip_assignment,
            member_id: member_id.to_string(),
            members: if is_leader {
                self.member_list()
            } else {
                Vec::new()
            },
        }
    }

    /// A static member's rejoin answered without `skip_assignment`
    /// (JoinGroup before v9), as Kafka answers it: no member list, and a
    /// leader that rejoined is named by its old member id, so it takes
    /// itself for a follower and syncs for its assignment rather than
    /// assigning (which a stable group would not pass on).
    fn static_rejoin_before_v9(&self, member_id: &str, old_id: &str) -> JoinResponse {
        let mut response = self.current_join_response(member_id, false);
        if self.leader.as_deref() == Some(member_id) {
            response.leader = old_id.to_string();
        }
        response.members = Vec::new();
        response
    }

    /// The persisted form of the group.
    pub fn to_record_value(&self) -> GroupMetadataValue {
        let protocol = self.protocol.as_deref().unwrap_or_default();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp_ms: self.state_timestamp_ms,
            members: self
                .members
                .values()
                .map(|m| MemberMetadataValue {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(protocol).to_vec(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    fn persist(&self, step: &mut Step<'_>) {
        step.records.push((
            records::encode_group_metadata_key(&self.group_id),
            Some(records::encode_group_metadata_value(
                &self.to_record_value(),
            )),
        ));
    }

    /// Rebuilds a group from its record. Members come back `Stable` with no
    /// heartbeat deadline until [`ClassicGroup::start_session_timers`] runs.
    pub fn from_record(group_id: &str, value: &GroupMetadataValue) -> Self {
        let mut group = Self::new(group_id, value.current_state_timestamp_ms);
        group.generation = value.generation;
        group.protocol_type = Some(value.protocol_type.clone()).filter(|p| !p.is_empty());
        group.protocol = value.protocol.clone();
        group.leader = value.leader.clone();
        let protocol = value.protocol.clone().unwrap_or_default();
        for (i, m) in value.members.iter().enumerate() {
            if let Some(instance) = &m.group_instance_id {
                group
                    .static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            group.members.insert(
                m.member_id.clone(),
                ClassicMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: vec![(protocol.clone(), m.subscription.clone())],
                    assignment: m.assignment.clone(),
                    join_waiter: None,
                    sync_waiter: None,
                    heartbeat_deadline_ms: i64::MAX,
                    join_sequence: i as u64,
                },
            );
        }
        group.next_join_sequence = value.members.len() as u64;
        group.state = if group.members.is_empty() {
            ClassicState::Empty
        } else {
            ClassicState::Stable
        };
        group
    }

    /// A Stable group at `generation` of members carried over from a KIP-848
    /// group, each with the partitions it holds: the first is the leader,
    /// the protocol is the one they vote for, and each holds its partitions
    /// encoded in that protocol's version; every member gets a full session
    /// from `now_ms`.
    pub fn from_carried(
        group_id: &str,
        generation: i32,
        members: Vec<(ClassicMember, MemberAssignment)>,
        now_ms: i64,
    ) -> Self {
        let mut group = Self::new(group_id, now_ms);
        group.generation = generation;
        group.protocol_type = Some("consumer".to_string());
        let mut assigned = BTreeMap::new();
        for (i, (mut m, partitions)) in members.into_iter().enumerate() {
            if let Some(instance) = &m.group_instance_id {
                (group.static_members).insert(instance.clone(), m.member_id.clone());
            }
            m.join_sequence = i as u64;
            m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
            assigned.insert(m.member_id.clone(), partitions);
            group.members.insert(m.member_id.clone(), m);
        }
        group.next_join_sequence = group.members.len() as u64;
        group.leader = (group.members.values())
            .min_by_key(|m| m.join_sequence)
            .map(|m| m.member_id.clone());
        group.protocol = group.select_protocol();
        let protocol = group.protocol.clone().unwrap_or_default();
        for m in group.members.values_mut() {
            let partitions = assigned.remove(&m.member_id).unwrap_or_default();
            m.assignment = encode_assignment(m.metadata(&protocol), &partitions);
        }
        if !group.members.is_empty() {
            group.state = ClassicState::Stable;
        }
        group
    }

    /// Answers every JoinGroup and SyncGroup still waiting with `code`
    /// (the group is about to change protocol).
    pub(crate) fn answer_waiters(&mut self, step: &mut Step<'_>, code: ErrorCode) {
        for m in self.members.values_mut() {
            if let Some(t) = m.join_waiter.take() {
                step.join(t, JoinResponse::error(code, &m.member_id));
            }
            if let Some(t) = m.sync_waiter.take() {
                step.sync(t, SyncResponse::error(code));
            }
        }
    }

    /// Starts a rebalance now (a group that just turned classic).
    pub(crate) fn start_rebalance(&mut self, step: &mut Step<'_>) {
        self.prepare_rebalance(step);
    }

    /// After replay: every loaded member gets a full session from `now_ms`.
    pub fn start_session_timers(&mut self, now_ms: i64) {
        for m in self.members.values_mut() {
            m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
        }
    }

    // ------------------------------------------------------------ JoinGroup

    /// Handles a JoinGroup. The answer (now or later) goes to the outbox.
    pub(crate) fn join(&mut self, step: &mut Step<'_>, token: RequestToken, req: JoinRequest) {
        if self.state == ClassicState::Dead {
            return step.join(
                token,
                JoinResponse::error(ErrorCode::CoordinatorNotAvailable, &req.member_id),
            );
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            return step.join(
                token,
                JoinResponse::error(ErrorCode::InconsistentGroupProtocol, &req.member_id),
            );
        }
        if req.member_id.is_empty() {
            self.join_unknown_member(step, token, req)
        } else {
            self.join_known_member(step, token, req)
        }
    }

    fn join_unknown_member(&mut self, step: &mut Step<'_>, token: RequestToken, req: JoinRequest) {
        let new_id = step.ids.member_id(&req.client_id);
        if let Some(instance) = req.group_instance_id.clone() {
            if let Some(old_id) = self.static_members.get(&instance).cloned() {
                return self.replace_static_member(step, token, req, &old_id, new_id);
            }
            if self.members.len() >= step.config.group_max_size {
                return step.join(
                    token,
                    JoinResponse::error(ErrorCode::GroupMaxSizeReached, ""),
                );
            }
            // Static members skip MEMBER_ID_REQUIRED: the instance id names them.
            return self.add_member_and_rebalance(step, token, req, new_id);
        }
        if self.members.len() + self.pending_members.len() >= step.config.group_max_size {
            return step.join(
                token,
                JoinResponse::error(ErrorCode::GroupMaxSizeReached, ""),
            );
        }
        if req.require_known_member_id {
            // The member must come back with this id; until then it blocks the
            // join for at most its session timeout, like Kafka's pending members.
            let deadline = step.now_ms + i64::from(req.session_timeout_ms);
            self.pending_members.insert(new_id.clone(), deadline);
            return step.join(
                token,
                JoinResponse::error(ErrorCode::MemberIdRequired, &new_id),
            );
        }
        self.add_member_and_rebalance(step, token, req, new_id)
    }

    fn join_known_member(&mut self, step: &mut Step<'_>, token: RequestToken, req: JoinRequest) {
        let member_id = req.member_id.clone();
        if self.pending_members.contains_key(&member_id) {
            return self.add_member_and_rebalance(step, token, req, member_id);
        }
        if let Some(code) = self.fenced_or_unknown(&member_id, req.group_instance_id.as_deref()) {
            return step.join(token, JoinResponse::error(code, &member_id));
        }
        let Some(member) = self.members.get(&member_id) else {
            return step.join(
                token,
                JoinResponse::error(ErrorCode::UnknownMemberId, &member_id),
            );
        };
        let same_metadata = member.protocols == req.protocols;
        let is_leader = self.leader.as_deref() == Some(member_id.as_str());
        match self.state {
            ClassicState::PreparingRebalance => self.update_member_and_rebalance(step, token, req),
            ClassicState::CompletingRebalance if same_metadata => {
                // The join answer was lost: repeat it.
                let response = self.current_join_response(&member_id, false);
                step.join(token, response)
            }
            ClassicState::Stable if same_metadata && !is_leader => {
                let response = self.current_join_response(&member_id, false);
                step.join(token, response)
            }
            ClassicState::CompletingRebalance | ClassicState::Stable => {
                self.update_member_and_rebalance(step, token, req)
            }
            ClassicState::Empty | ClassicState::Dead => step.join(
                token,
                JoinResponse::error(ErrorCode::UnknownMemberId, &member_id),
            ),
        }
    }

    /// FENCED_INSTANCE_ID when the instance id now belongs to another member
    /// id, UNKNOWN_MEMBER_ID when the member id is not in the group.
    fn fenced_or_unknown(&self, member_id: &str, instance_id: Option<&str>) -> Option<ErrorCode> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                Some(owner) if owner != member_id => return Some(ErrorCode::FencedInstanceId),
                Some(_) => return None,
                None => {}
            }
        }
        (!self.members.contains_key(member_id)).then_some(ErrorCode::UnknownMemberId)
    }

    fn add_member_and_rebalance(
        &mut self,
        step: &mut Step<'_>,
        token: RequestToken,
        req: JoinRequest,
        member_id: String,
    ) {
        self.pending_members.remove(&member_id);
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.group_instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member_id.clone());
        }
        let member = ClassicMember {
            member_id: member_id.clone(),
            group_instance_id: req.group_instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocols: req.protocols,
            assignment: Vec::new(),
            join_waiter: Some(token),
            sync_waiter: None,
            heartbeat_deadline_ms: step.now_ms + i64::from(req.session_timeout_ms),
            join_sequence: self.next_join_sequence,
        };
        self.next_join_sequence += 1;
        self.members.insert(member_id, member);
        if self.initial_delay_remaining_ms.is_some() {
            self.new_member_added = true;
        }
        self.maybe_prepare_rebalance(step);
        self.try_complete_join(step);
    }

    fn update_member_and_rebalance(
        &mut self,
        step: &mut Step<'_>,
        token: RequestToken,
        req: JoinRequest,
    ) {
        if let Some(m) = self.members.get_mut(&req.member_id) {
            m.protocols = req.protocols;
            m.session_timeout_ms = req.session_timeout_ms;
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            m.client_id = req.client_id;
            m.client_host = req.client_host;
            m.heartbeat_deadline_ms = step.now_ms + i64::from(req.session_timeout_ms);
            if let Some(old) = m.join_waiter.replace(token) {
                // A second join from the same member supersedes the first.
                step.join(
                    old,
                    JoinResponse::error(ErrorCode::UnknownMemberId, &req.member_id),
                );
            }
        }
        self.maybe_prepare_rebalance(step);
        self.try_complete_join(step);
    }

    /// A static member came back with a new member id: the old id is fenced,
    /// and when nothing about it changed the group keeps its generation and
    /// assignment (no rebalance), as in Kafka's `updateStaticMemberAndRebalance`.
    fn replace_static_member(
        &mut self,
        step: &mut Step<'_>,
        token: RequestToken,
        req: JoinRequest,
        old_id: &str,
        new_id: String,
    ) {
        let Some(mut member) = self.members.remove(old_id) else {
            return;
        };
        if let Some(old) = member.join_waiter.take() {
            step.join(
                old,
                JoinResponse::error(ErrorCode::FencedInstanceId, old_id),
            );
        }
        if let Some(old) = member.sync_waiter.take() {
            step.sync(old, SyncResponse::error(ErrorCode::FencedInstanceId));
        }
        let unchanged = member.protocols == req.protocols;
        let supports_skip_assignment = req.supports_skip_assignment;
        member.member_id = new_id.clone();
        member.protocols = req.protocols;
        member.session_timeout_ms = req.session_timeout_ms;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.client_id = req.client_id;
        member.client_host = req.client_host;
        member.heartbeat_deadline_ms = step.now_ms + i64::from(req.session_timeout_ms);
        member.join_waiter = Some(token);
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        if let Some(instance) = &req.group_instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        self.members.insert(new_id.clone(), member);
        match self.state {
            ClassicState::Stable if unchanged && self.select_protocol() == self.protocol => {
                if let Some(m) = self.members.get_mut(&new_id) {
                    m.join_waiter = None;
                }
                self.persist(step);
                let response = if supports_skip_assignment {
                    self.current_join_response(&new_id, true)
                } else {
                    self.static_rejoin_before_v9(&new_id, old_id)
                };
                step.join(token, response);
            }
            ClassicState::PreparingRebalance => self.try_complete_join(step),
            _ => self.prepare_rebalance(step),
        }
    }

    fn maybe_prepare_rebalance(&mut self, step: &mut Step<'_>) {
        if matches!(
            self.state,
            ClassicState::Stable | ClassicState::CompletingRebalance | ClassicState::Empty
        ) {
            self.prepare_rebalance(step);
        }
    }

    fn prepare_rebalance(&mut self, step: &mut Step<'_>) {
        if self.state == ClassicState::CompletingRebalance {
            // Followers blocked in SyncGroup learn the assignment is void.
            for m in self.members.values_mut() {
                m.assignment.clear();
                if let Some(t) = m.sync_waiter.take() {
                    step.sync(t, SyncResponse::error(ErrorCode::RebalanceInProgress));
                }
            }
        }
        let rebalance_timeout_ms = self.rebalance_timeout_ms();
        if self.state == ClassicState::Empty && step.config.initial_rebalance_delay_ms > 0 {
            // group.initial.rebalance.delay.ms: let a starting fleet join in one
            // rebalance; extended while members keep arriving, capped by the
            // rebalance timeout.
            let delay_ms = step
                .config
                .initial_rebalance_delay_ms
                .min(rebalance_timeout_ms);
            self.initial_delay_remaining_ms =
                Some((rebalance_timeout_ms - step.config.initial_rebalance_delay_ms).max(0));
            self.new_member_added = false;
            self.join_deadline_ms = Some(step.now_ms + delay_ms);
        } else {
            self.initial_delay_remaining_ms = None;
            self.join_deadline_ms = Some(step.now_ms + rebalance_timeout_ms);
        }
        self.sync_deadline_ms = None;
        self.transition(ClassicState::PreparingRebalance, step.now_ms);
        self.try_complete_join(step);
    }

    fn try_complete_join(&mut self, step: &mut Step<'_>) {
        if self.state == ClassicState::PreparingRebalance
            && self.initial_delay_remaining_ms.is_none()
            && self.all_members_joined()
        {
            self.complete_join(step);
        }
    }

    fn complete_join(&mut self, step: &mut Step<'_>) {
        // Dynamic members that did not rejoin are gone; static ones stay until
        // their session expires (Kafka keeps them so a restart does not rebalance).
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in gone {
            self.remove_member_quietly(&id, step);
        }
        self.join_deadline_ms = None;
        self.initial_delay_remaining_ms = None;
        self.new_member_added = false;
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.transition(ClassicState::Empty, step.now_ms);
            self.persist(step);
            return;
        }
        // The leader must be a member that rejoined.
        let leader_joined = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .is_some_and(|m| m.join_waiter.is_some());
        if !leader_joined {
            self.leader = self
                .members
                .values()
                .filter(|m| m.join_waiter.is_some())
                .min_by_key(|m| m.join_sequence)
                .map(|m| m.member_id.clone());
        }
        self.protocol = self.select_protocol();
        self.transition(ClassicState::CompletingRebalance, step.now_ms);
        self.sync_deadline_ms = Some(step.now_ms + self.rebalance_timeout_ms());
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let response = self.current_join_response(&id, false);
            if let Some(m) = self.members.get_mut(&id) {
                m.heartbeat_deadline_ms = step.now_ms + i64::from(m.session_timeout_ms);
                if let Some(t) = m.join_waiter.take() {
                    step.join(t, response);
                }
            }
        }
    }

    /// Removes a member without deciding what the group does next.
    fn remove_member_quietly(&mut self, member_id: &str, step: &mut Step<'_>) {
        let Some(m) = self.members.remove(member_id) else {
            return;
        };
        if let Some(t) = m.join_waiter {
            step.join(
                t,
                JoinResponse::error(ErrorCode::UnknownMemberId, member_id),
            );
        }
        if let Some(t) = m.sync_waiter {
            step.sync(t, SyncResponse::error(ErrorCode::UnknownMemberId));
        }
        if let Some(instance) = &m.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self
                .members
                .values()
                .min_by_key(|m| m.join_sequence)
                .map(|m| m.member_id.clone());
        }
    }

    /// Removes a member and rebalances (leave, session expiry).
    fn remove_member_and_update(&mut self, member_id: &str, step: &mut Step<'_>) {
        self.remove_member_quietly(member_id, step);
        match self.state {
            ClassicState::Stable | ClassicState::CompletingRebalance => {
                self.prepare_rebalance(step)
            }
            ClassicState::PreparingRebalance => self.try_complete_join(step),
            ClassicState::Empty | ClassicState::Dead => {}
        }
    }

    // ------------------------------------------------------------ SyncGroup

    /// Handles a SyncGroup. The answer (now or later) goes to the outbox.
    pub(crate) fn sync(&mut self, step: &mut Step<'_>, token: RequestToken, req: SyncRequest) {
        if self.state == ClassicState::Dead {
            return step.sync(
                token,
                SyncResponse::error(ErrorCode::CoordinatorNotAvailable),
            );
        }
        if let Some(code) = self.fenced_or_unknown(&req.member_id, req.group_instance_id.as_deref())
        {
            return step.sync(token, SyncResponse::error(code));
        }
        if req.generation_id != self.generation {
            return step.sync(token, SyncResponse::error(ErrorCode::IllegalGeneration));
        }
        let type_mismatch = req.protocol_type.is_some() && req.protocol_type != self.protocol_type;
        let name_mismatch = req.protocol_name.is_some() && req.protocol_name != self.protocol;
        if type_mismatch || name_mismatch {
            return step.sync(
                token,
                SyncResponse::error(ErrorCode::InconsistentGroupProtocol),
            );
        }
        match self.state {
            ClassicState::Empty | ClassicState::Dead => {
                step.sync(token, SyncResponse::error(ErrorCode::UnknownMemberId))
            }
            ClassicState::PreparingRebalance => {
                step.sync(token, SyncResponse::error(ErrorCode::RebalanceInProgress))
            }
            ClassicState::Stable => {
                let response = self.sync_response(&req.member_id);
                self.touch(&req.member_id, step.now_ms);
                step.sync(token, response)
            }
            ClassicState::CompletingRebalance => {
                self.touch(&req.member_id, step.now_ms);
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    if let Some(old) = m.sync_waiter.replace(token) {
                        step.sync(old, SyncResponse::error(ErrorCode::UnknownMemberId));
                    }
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    self.complete_sync(step, req.assignments);
                }
            }
        }
    }

    fn sync_response(&self, member_id: &str) -> SyncResponse {
        SyncResponse {
            error_code: ErrorCode::None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }

    /// The leader's assignment arrived: store it, persist the group, answer
    /// every member waiting in SyncGroup, and go Stable.
    fn complete_sync(&mut self, step: &mut Step<'_>, assignments: Vec<(String, Vec<u8>)>) {
        let mut by_member: BTreeMap<String, Vec<u8>> = assignments.into_iter().collect();
        for (id, m) in self.members.iter_mut() {
            m.assignment = by_member.remove(id).unwrap_or_default();
        }
        self.transition(ClassicState::Stable, step.now_ms);
        self.sync_deadline_ms = None;
        self.persist(step);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let response = self.sync_response(&id);
            if let Some(t) = self.members.get_mut(&id).and_then(|m| m.sync_waiter.take()) {
                step.sync(t, response);
            }
        }
    }

    fn touch(&mut self, member_id: &str, now_ms: i64) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
        }
    }

    // ------------------------------------------------------ Heartbeat, Leave

    /// Handles a Heartbeat; returns its error code.
    pub(crate) fn heartbeat(&mut self, now_ms: i64, req: &HeartbeatRequest) -> ErrorCode {
        if self.state == ClassicState::Dead {
            return ErrorCode::CoordinatorNotAvailable;
        }
        if let Some(code) = self.fenced_or_unknown(&req.member_id, req.group_instance_id.as_deref())
        {
            return code;
        }
        if req.generation_id != self.generation {
            return ErrorCode::IllegalGeneration;
        }
        match self.state {
            ClassicState::Empty | ClassicState::Dead => ErrorCode::UnknownMemberId,
            ClassicState::PreparingRebalance => {
                self.touch(&req.member_id, now_ms);
                ErrorCode::RebalanceInProgress
            }
            ClassicState::CompletingRebalance | ClassicState::Stable => {
                self.touch(&req.member_id, now_ms);
                ErrorCode::None
            }
        }
    }

    /// Handles a LeaveGroup for several members; one error code each.
    pub(crate) fn leave(
        &mut self,
        step: &mut Step<'_>,
        leaving: &[LeavingMember],
    ) -> Vec<ErrorCode> {
        let mut codes = Vec::with_capacity(leaving.len());
        for l in leaving {
            let member_id = match &l.group_instance_id {
                Some(instance) => match self.static_members.get(instance) {
                    None => {
                        codes.push(ErrorCode::UnknownMemberId);
                        continue;
                    }
                    Some(owner) if !l.member_id.is_empty() && *owner != l.member_id => {
                        codes.push(ErrorCode::FencedInstanceId);
                        continue;
                    }
                    Some(owner) => owner.clone(),
                },
                None => l.member_id.clone(),
            };
            if self.pending_members.remove(&member_id).is_some() {
                codes.push(ErrorCode::None);
                self.try_complete_join(step);
                continue;
            }
            if !self.members.contains_key(&member_id) {
                codes.push(ErrorCode::UnknownMemberId);
                continue;
            }
            self.remove_member_and_update(&member_id, step);
            codes.push(ErrorCode::None);
        }
        codes
    }

    // ------------------------------------------------------------ time

    /// Drives the group's timers: join and sync timeouts, session expiry.
    pub(crate) fn tick(&mut self, step: &mut Step<'_>) {
        let now_ms = step.now_ms;
        let expired_pending: Vec<String> = self
            .pending_members
            .iter()
            .filter(|(_, d)| **d <= now_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired_pending {
            self.pending_members.remove(&id);
            self.try_complete_join(step);
        }
        // Members blocked in JoinGroup or SyncGroup are not expired: those
        // requests are bounded by the join and sync deadlines instead.
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.heartbeat_deadline_ms <= now_ms
                    && m.join_waiter.is_none()
                    && m.sync_waiter.is_none()
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            self.remove_member_and_update(&id, step);
        }
        if self.state == ClassicState::PreparingRebalance
            && self.join_deadline_ms.is_some_and(|d| d <= now_ms)
        {
            match self.initial_delay_remaining_ms {
                Some(remaining_ms) if self.new_member_added && remaining_ms > 0 => {
                    let delay_ms = step.config.initial_rebalance_delay_ms.min(remaining_ms);
                    self.initial_delay_remaining_ms = Some((remaining_ms - delay_ms).max(0));
                    self.new_member_added = false;
                    self.join_deadline_ms = Some(now_ms + delay_ms);
                }
                _ => self.complete_join(step),
            }
        }
        if self.state == ClassicState::CompletingRebalance
            && self.sync_deadline_ms.is_some_and(|d| d <= now_ms)
        {
            // Members that never sent SyncGroup (the leader, most often) are
            // removed and the rest rebalance, as Kafka's pending-sync timeout.
            let missing: Vec<String> = self
                .members
                .values()
                .filter(|m| m.sync_waiter.is_none())
                .map(|m| m.member_id.clone())
                .collect();
            for id in missing {
                self.remove_member_quietly(&id, step);
            }
            self.prepare_rebalance(step);
        }
    }

    /// The earliest time [`ClassicGroup::tick`] has something to do.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let members = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none() && m.sync_waiter.is_none())
            .map(|m| m.heartbeat_deadline_ms);
        let join = self
            .join_deadline_ms
            .filter(|_| self.state == ClassicState::PreparingRebalance);
        let sync = self
            .sync_deadline_ms
            .filter(|_| self.state == ClassicState::CompletingRebalance);
        members
            .chain(self.pending_members.values().copied())
            .chain(join)
            .chain(sync)
            .min()
    }

    // ------------------------------------------------------------ offsets

    /// Whether an OffsetCommit with this identity may commit; the error otherwise.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ErrorCode> {
        match self.state {
            ClassicState::Dead => return Err(ErrorCode::CoordinatorNotAvailable),
            // A group used only to store offsets (no membership).
            _ if generation_id < 0 && self.state == ClassicState::Empty => return Ok(()),
            ClassicState::CompletingRebalance => return Err(ErrorCode::RebalanceInProgress),
            _ => {}
        }
        if let Some(code) = self.fenced_or_unknown(member_id, instance_id) {
            return Err(code);
        }
        if generation_id != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        Ok(())
    }

    /// Topics the members subscribe to, read from the `consumer` protocol's
    /// subscription metadata; `None` when the group does not use it.
    pub fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol.as_deref()?;
        let mut topics = BTreeSet::new();
        for m in self.members.values() {
            topics.extend(parse_subscription_topics(m.metadata(protocol)));
        }
        Some(topics)
    }
}

/// The topics of a ConsumerProtocol `Subscription` (version int16, then an
/// int32-counted array of int16-prefixed strings); stops at the first bad byte.
pub fn parse_subscription_topics(metadata: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    if metadata.len() < 6 {
        return out;
    }
    let count = i32::from_be_bytes([metadata[2], metadata[3], metadata[4], metadata[5]]);
    let mut at = 6usize;
    for _ in 0..count.max(0) {
        let Some(len_bytes) = metadata.get(at..at + 2) else {
            break;
        };
        let len = i16::from_be_bytes([len_bytes[0], len_bytes[1]]);
        if len < 0 {
            break;
        }
        let Some(name) = metadata.get(at + 2..at + 2 + len as usize) else {
            break;
        };
        match std::str::from_utf8(name) {
            Ok(s) => out.push(s.to_string()),
            Err(_) => break,
        }
        at += 2 + len as usize;
    }
    out
}

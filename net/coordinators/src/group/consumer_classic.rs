//! Classic members hosted by a KIP-848 group (see [`super::migration`]):
//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup answered from the
//! group's KIP-848 state, after Kafka's `classicGroup*ToConsumerGroup`.
//!
//! A classic member is reconciled only when it joins: its JoinGroup brings
//! its subscription and the partitions it still owns, the answer's
//! generation is its member epoch, and SyncGroup hands it what it owns
//! now (it has no leader to assign for it). Its heartbeats tell it to
//! join again (REBALANCE_IN_PROGRESS) when the group moved past its epoch,
//! when it has partitions to give up, or when the partitions it waits for
//! have been released. Nothing here hands a partition to two members: a
//! classic member takes part in the same reconciliation as the others.

use engine::ErrorCode;

use super::classic::{
    HeartbeatRequest, JoinRequest, JoinResponse, LeavingMember, SyncRequest, SyncResponse,
};
use super::consumer::{ConsumerGroup, ConsumerMember, MemberState, TopicLookups};
use super::consumer_protocol::{encode_assignment, parse_subscription, Subscription};
use super::migration::ClassicMemberMetadata;
use super::IdGenerator;

/// The protocol type every classic member of a KIP-848 group uses.
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

impl ConsumerGroup {
    /// Kafka's `supportsClassicProtocols`: some protocol of the joining
    /// member is one every classic member supports.
    fn supports_classic_protocols(&self, protocols: &[(String, Vec<u8>)]) -> bool {
        let classic: Vec<&ClassicMemberMetadata> = self
            .members
            .values()
            .filter_map(|m| m.classic.as_ref())
            .collect();
        protocols.iter().any(|(name, _)| {
            classic
                .iter()
                .all(|c| c.protocols.iter().any(|(p, _)| p == name))
        })
    }

    /// Handles a JoinGroup of a classic member; answered at once.
    pub(super) fn classic_join(
        &mut self,
        ids: &mut IdGenerator,
        now_ms: i64,
        req: &JoinRequest,
        (topics, matching): TopicLookups<'_>,
    ) -> JoinResponse {
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE
            || req.protocols.is_empty()
            || !self.supports_classic_protocols(&req.protocols)
        {
            return JoinResponse::error(ErrorCode::InconsistentGroupProtocol, &req.member_id);
        }
        let Some(subscription) = parse_subscription(&req.protocols[0].1) else {
            return JoinResponse::error(ErrorCode::InconsistentGroupProtocol, &req.member_id);
        };
        let unknown = req.member_id.is_empty();
        let member_id = if unknown {
            ids.uuid_string()
        } else {
            req.member_id.clone()
        };
        if unknown && req.require_known_member_id && req.group_instance_id.is_none() {
            return JoinResponse::error(ErrorCode::MemberIdRequired, &member_id);
        }
        if let Err(code) = self.classic_member_for_join(&member_id, unknown, req, now_ms) {
            return JoinResponse::error(code, &req.member_id);
        }
        if self.classic_update_member(&member_id, req, &subscription, now_ms) {
            self.group_epoch += 1;
        }
        if self.resolve_regexes(matching) {
            self.group_epoch += 1;
        }
        self.refresh_topics(topics);
        self.maybe_compute_target();
        self.reconcile(&member_id, Some(&subscription.owned), now_ms);
        let Some(member) = self.members.get_mut(&member_id) else {
            return JoinResponse::error(ErrorCode::UnknownMemberId, &member_id);
        };
        // Kafka's sync timeout: it must sync within its rebalance timeout.
        if member.rebalance_deadline_ms.is_none() {
            member.rebalance_deadline_ms = Some(now_ms + i64::from(member.rebalance_timeout_ms));
        }
        JoinResponse {
            error_code: ErrorCode::None,
            generation_id: member.member_epoch,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
            protocol_name: Some(req.protocols[0].0.clone()),
            // No leader: the group assigns, so every member only syncs.
            leader: String::new(),
            skip_assignment: false,
            member_id,
            members: Vec::new(),
        }
    }

    /// Finds or makes the member a classic JoinGroup is for: a new dynamic
    /// member is created at epoch 0; a static member coming back under a
    /// new member id takes over its previous incarnation (its assignment
    /// and epoch), as in Kafka's static member replacement.
    fn classic_member_for_join(
        &mut self,
        member_id: &str,
        unknown: bool,
        req: &JoinRequest,
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        let holder = (req.group_instance_id.as_deref()).and_then(|instance| {
            (self.members.values())
                .find(|m| m.instance_id.as_deref() == Some(instance))
                .map(|m| m.member_id.clone())
        });
        match holder {
            Some(old) if old == member_id => {}
            Some(old) if unknown => {
                if let Some(mut m) = self.members.remove(&old) {
                    m.member_id = member_id.to_string();
                    self.members.insert(member_id.to_string(), m);
                }
                if let Some(a) = self.target.remove(&old) {
                    self.target.insert(member_id.to_string(), a);
                }
            }
            Some(_) => return Err(ErrorCode::FencedInstanceId),
            None if req.group_instance_id.is_some() && !unknown => {
                return Err(ErrorCode::UnknownMemberId)
            }
            None => match self.members.get(member_id) {
                // A KIP-848 member's id is not a classic member's to use.
                Some(m) if m.classic.is_none() => return Err(ErrorCode::UnknownMemberId),
                Some(_) => {}
                None => {
                    let deadline_ms = now_ms + i64::from(req.session_timeout_ms);
                    let member = ConsumerMember::new(
                        member_id,
                        req.group_instance_id.clone(),
                        (&req.client_id, &req.client_host),
                        deadline_ms,
                    );
                    self.members.insert(member_id.to_string(), member);
                    self.group_epoch += 1;
                }
            },
        }
        Ok(())
    }

    /// Takes a classic JoinGroup into its member and extends its session;
    /// true when its subscription changed, which bumps the group epoch.
    fn classic_update_member(
        &mut self,
        member_id: &str,
        req: &JoinRequest,
        subscription: &Subscription,
        now_ms: i64,
    ) -> bool {
        let Some(m) = self.members.get_mut(member_id) else {
            return false;
        };
        let changed = m.subscribed_topics != subscription.topics
            || m.subscribed_regex.is_some()
            || m.server_assignor.is_some();
        m.subscribed_topics = subscription.topics.clone();
        m.subscribed_regex = None;
        m.regex_topics.clear();
        m.server_assignor = None;
        if subscription.rack_id.is_some() {
            m.rack_id = subscription.rack_id.clone();
        }
        if req.rebalance_timeout_ms > 0 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        m.classic = Some(ClassicMemberMetadata {
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols.clone(),
        });
        m.session_deadline_ms = now_ms + i64::from(req.session_timeout_ms);
        // It joined: the join timeout is over; a revocation keeps its own.
        if m.state != MemberState::UnrevokedPartitions {
            m.rebalance_deadline_ms = None;
        }
        changed
    }

    /// The classic member a SyncGroup, Heartbeat or LeaveGroup names: by
    /// instance id when it has one (FENCED_INSTANCE_ID when another member
    /// id holds it), else by member id.
    fn classic_member(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<&mut ConsumerMember, ErrorCode> {
        let id = match instance_id {
            Some(instance) => {
                let holder = (self.members.values())
                    .find(|m| m.instance_id.as_deref() == Some(instance))
                    .ok_or(ErrorCode::UnknownMemberId)?;
                if holder.member_id != member_id {
                    return Err(ErrorCode::FencedInstanceId);
                }
                holder.member_id.clone()
            }
            None => member_id.to_string(),
        };
        match self.members.get_mut(&id) {
            Some(m) if m.classic.is_some() => Ok(m),
            _ => Err(ErrorCode::UnknownMemberId),
        }
    }

    /// Handles a SyncGroup of a classic member: its assignment is what it
    /// owns now, in its subscription's version.
    pub(super) fn classic_sync(&mut self, now_ms: i64, req: &SyncRequest) -> SyncResponse {
        let group_epoch = self.group_epoch;
        let member = match self.classic_member(&req.member_id, req.group_instance_id.as_deref()) {
            Ok(m) => m,
            Err(code) => return SyncResponse::error(code),
        };
        if req.generation_id != member.member_epoch {
            return SyncResponse::error(ErrorCode::IllegalGeneration);
        }
        let Some(classic) = member.classic.as_ref() else {
            return SyncResponse::error(ErrorCode::UnknownMemberId);
        };
        let type_differs =
            (req.protocol_type.as_deref()).is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE);
        let name_differs =
            (req.protocol_name.as_deref()).is_some_and(|n| n != classic.first_protocol());
        if type_differs || name_differs {
            return SyncResponse::error(ErrorCode::InconsistentGroupProtocol);
        }
        // A member still revoking syncs at its old epoch to learn what to
        // give up; any other member behind the group must join again.
        if group_epoch > member.member_epoch && member.state != MemberState::UnrevokedPartitions {
            return SyncResponse::error(ErrorCode::RebalanceInProgress);
        }
        let response = SyncResponse {
            error_code: ErrorCode::None,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
            protocol_name: Some(classic.first_protocol().to_string()),
            assignment: encode_assignment(classic.first_metadata(), &member.assigned),
        };
        member.session_deadline_ms = now_ms + i64::from(classic.session_timeout_ms);
        // It synced: the sync timeout is over; a revocation keeps its own.
        if member.state != MemberState::UnrevokedPartitions {
            member.rebalance_deadline_ms = None;
        }
        response
    }

    /// Handles a Heartbeat of a classic member.
    pub(super) fn classic_heartbeat(&mut self, now_ms: i64, req: &HeartbeatRequest) -> ErrorCode {
        let group_epoch = self.group_epoch;
        let waiting = self.waiting_on_unreleased(&req.member_id);
        let member = match self.classic_member(&req.member_id, req.group_instance_id.as_deref()) {
            Ok(m) => m,
            Err(code) => return code,
        };
        if req.generation_id != member.member_epoch {
            return ErrorCode::IllegalGeneration;
        }
        if let Some(classic) = &member.classic {
            member.session_deadline_ms = now_ms + i64::from(classic.session_timeout_ms);
        }
        let rejoin = member.member_epoch < group_epoch
            || member.state == MemberState::UnrevokedPartitions
            || (member.state == MemberState::UnreleasedPartitions && !waiting);
        if !rejoin {
            return ErrorCode::None;
        }
        // Kafka's join timeout: a member told to join again that does not
        // within its rebalance timeout is removed, or it could hold the
        // partitions others wait for while it keeps heartbeating.
        if member.rebalance_deadline_ms.is_none() {
            member.rebalance_deadline_ms = Some(now_ms + i64::from(member.rebalance_timeout_ms));
        }
        ErrorCode::RebalanceInProgress
    }

    /// Whether some partition of the member's target that it does not own
    /// yet is still owned by another member.
    fn waiting_on_unreleased(&self, member_id: &str) -> bool {
        let (Some(member), Some(target)) =
            (self.members.get(member_id), self.target.get(member_id))
        else {
            return false;
        };
        target
            .iter()
            .filter(|tp| !member.assigned.contains(*tp))
            .any(|tp| {
                (self.members.values())
                    .filter(|m| m.member_id != member_id)
                    .any(|m| m.assigned.contains(tp) || m.pending_revocation.contains(tp))
            })
    }

    /// Handles a LeaveGroup; one error code per leaving member. An admin
    /// may remove any static member by its instance id alone; a member
    /// naming itself must be a classic member.
    pub(super) fn classic_leave(
        &mut self,
        now_ms: i64,
        leaving: &[LeavingMember],
    ) -> Vec<ErrorCode> {
        let mut codes = Vec::with_capacity(leaving.len());
        for l in leaving {
            let found = match (&l.group_instance_id, l.member_id.is_empty()) {
                (Some(instance), true) => (self.members.values())
                    .find(|m| m.instance_id.as_deref() == Some(instance.as_str()))
                    .map(|m| m.member_id.clone())
                    .ok_or(ErrorCode::UnknownMemberId),
                (instance, _) => self
                    .classic_member(&l.member_id, instance.as_deref())
                    .map(|m| m.member_id.clone()),
            };
            codes.push(match found {
                Ok(id) => {
                    self.remove_member(&id, now_ms);
                    ErrorCode::None
                }
                Err(code) => code,
            });
        }
        codes
    }
}

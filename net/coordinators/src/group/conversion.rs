//! The conversions of online migration (see [`super::migration`]): a
//! classic group into a KIP-848 one and back, and the coordinator's steps
//! around them. The conversions themselves are pure; the coordinator
//! writes the records (the classic group's tombstone and the membership
//! records, or the other way round) and answers the classic requests
//! still waiting.

use super::assignor::MemberAssignment;
use super::classic::{ClassicGroup, ClassicMember, ClassicState, JoinRequest, JoinResponse};
use super::consumer::{
    ConsumerGroup, ConsumerHeartbeatRequest, ConsumerMember, MemberState, TopicLookups,
};
use super::consumer_protocol::{parse_assignment, parse_subscription};
use super::coordinator::{Group, GroupCoordinator, JoinOutcome};
use super::migration::{ClassicMemberMetadata, MigrationPolicy};
use super::offsets::Record;
use super::records;
use engine::ErrorCode;
use std::collections::BTreeSet;

/// The KIP-848 group a classic group becomes, or `None` when it cannot:
/// it does not use the `consumer` protocol type, a member's subscription
/// or assignment does not decode (or carries a custom assignor's data),
/// or two members own one partition.
pub fn consumer_group_of(classic: &ClassicGroup, now_ms: i64) -> Option<ConsumerGroup> {
    if classic.protocol_type.as_deref() != Some("consumer") || classic.state == ClassicState::Dead {
        return None;
    }
    let epoch = classic.generation;
    let mut group = ConsumerGroup::new(&classic.group_id, now_ms);
    group.group_epoch = epoch;
    group.assignment_epoch = epoch;
    let mut owned = BTreeSet::new();
    for m in classic.members.values() {
        // A group that never completed a join has no protocol yet.
        let metadata = match classic.protocol.as_deref() {
            Some(protocol) => m.metadata(protocol),
            None => m.protocols.first().map_or(&[][..], |(_, md)| md.as_slice()),
        };
        let subscription = parse_subscription(metadata)?;
        let assigned: MemberAssignment = parse_assignment(&m.assignment)?;
        if assigned.iter().any(|tp| !owned.insert(tp.clone())) {
            return None;
        }
        let classic_metadata = ClassicMemberMetadata {
            session_timeout_ms: m.session_timeout_ms,
            protocols: m.protocols.clone(),
        };
        let mut member = ConsumerMember::new(
            &m.member_id,
            m.group_instance_id.clone(),
            (&m.client_id, &m.client_host),
            now_ms + i64::from(m.session_timeout_ms),
        );
        member.rack_id = subscription.rack_id;
        member.member_epoch = epoch;
        member.previous_member_epoch = epoch;
        member.state = MemberState::Stable;
        member.subscribed_topics = subscription.topics;
        member.rebalance_timeout_ms = m.rebalance_timeout_ms;
        member.assigned = assigned.clone();
        member.classic = Some(classic_metadata);
        group.target.insert(m.member_id.clone(), assigned);
        group.members.insert(m.member_id.clone(), member);
    }
    Some(group)
}

/// Whether `group` is one to turn classic: it has members and every one
/// of them is a classic member.
pub fn all_classic(group: &ConsumerGroup) -> bool {
    !group.members.is_empty() && group.members.values().all(|m| m.classic.is_some())
}

/// The classic group a KIP-848 group of classic members becomes (Kafka's
/// `ClassicGroup.fromConsumerGroup`): Stable at generation = group epoch,
/// each member holding its target assignment. The caller starts a
/// rebalance at once, so that every member joins again.
pub fn classic_group_of(group: &ConsumerGroup, now_ms: i64) -> ClassicGroup {
    let members = (group.members.values())
        .filter_map(|m| {
            let classic = m.classic.as_ref()?;
            let member = ClassicMember::carried(
                &m.member_id,
                m.instance_id.clone(),
                (&m.client_id, &m.client_host),
                (classic.session_timeout_ms, m.rebalance_timeout_ms),
                classic.protocols.clone(),
            );
            let target = group.target.get(&m.member_id).cloned().unwrap_or_default();
            Some((member, target))
        })
        .collect();
    ClassicGroup::from_carried(&group.group_id, group.group_epoch, members, now_ms)
}

impl GroupCoordinator {
    /// A classic JoinGroup into a KIP-848 group with members: answered at
    /// once from the group's state, unless the policy is `disabled`
    /// (INCONSISTENT_GROUP_PROTOCOL, as Kafka answers since KAFKA-20640).
    pub(super) fn classic_join_consumer(
        &mut self,
        now_ms: i64,
        req: &JoinRequest,
        lookups: TopicLookups<'_>,
    ) -> (JoinOutcome, Vec<Record>) {
        let refused = |code| JoinOutcome::Respond(JoinResponse::error(code, &req.member_id));
        if self.config.migration_policy == MigrationPolicy::Disabled {
            return (refused(ErrorCode::InconsistentGroupProtocol), Vec::new());
        }
        let Some(Group::Consumer(g)) = self.groups.get_mut(&req.group_id) else {
            return (refused(ErrorCode::UnknownMemberId), Vec::new());
        };
        let response = g.classic_join(&mut self.ids, now_ms, req, lookups);
        let records = self.after_consumer_step(now_ms, &req.group_id);
        (JoinOutcome::Respond(response), records)
    }

    /// Turns a non-empty classic group into a KIP-848 one for a member
    /// joining it with ConsumerGroupHeartbeat; the records delete the
    /// classic group's metadata (the membership records follow from the
    /// step). Nothing to do for another group or request; `Err` is the
    /// heartbeat's error when the group may not or cannot turn
    /// (GROUP_ID_NOT_FOUND, as Kafka answers).
    pub(super) fn upgrade_for(
        &mut self,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
    ) -> Result<Vec<Record>, ErrorCode> {
        let Some(Group::Classic(classic)) = self.groups.get(&req.group_id) else {
            return Ok(Vec::new());
        };
        let joins = req.member_epoch == 0
            && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some());
        if classic.is_empty() || !joins {
            return Ok(Vec::new());
        }
        if !self.config.migration_policy.allows_upgrade() {
            return Err(ErrorCode::GroupIdNotFound);
        }
        let consumer = consumer_group_of(classic, now_ms).ok_or(ErrorCode::GroupIdNotFound)?;
        let group_id = req.group_id.clone();
        let (_, mut records) = (self.step_classic(now_ms, &group_id, |g, step| {
            g.answer_waiters(step, ErrorCode::RebalanceInProgress)
        }))
        .unwrap_or_default();
        self.groups
            .insert(group_id.clone(), Group::Consumer(consumer));
        records.push((records::encode_group_metadata_key(&group_id), None));
        Ok(records)
    }

    /// After a KIP-848 group changed: turns it classic if only classic
    /// members are left and the policy allows it, then brings its
    /// membership records up to date.
    pub(super) fn after_consumer_step(&mut self, now_ms: i64, group_id: &str) -> Vec<Record> {
        let mut records = Vec::new();
        let downgrade = self.config.migration_policy.allows_downgrade()
            && matches!(self.groups.get(group_id), Some(Group::Consumer(g)) if all_classic(g));
        if downgrade {
            if let Some(Group::Consumer(g)) = self.groups.get(group_id) {
                let classic = classic_group_of(g, now_ms);
                records.push((
                    records::encode_group_metadata_key(group_id),
                    Some(records::encode_group_metadata_value(
                        &classic.to_record_value(),
                    )),
                ));
                self.groups
                    .insert(group_id.to_string(), Group::Classic(classic));
                let rebalance = self.step_classic(now_ms, group_id, ClassicGroup::start_rebalance);
                records.extend(rebalance.map(|(_, r)| r).unwrap_or_default());
            }
        }
        records.extend(self.sync_membership(group_id));
        records
    }
}

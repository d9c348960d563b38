//! Share groups (KIP-932) at the coordinator: membership and assignment
//! (ShareGroupHeartbeat, ShareGroupDescribe) as a state machine with no I/O.
//!
//! A share group has no reconciliation: a partition may be assigned to
//! several members at once, because the partition's leader hands each
//! record to one member only (see [`crate::share`]). So a membership or
//! subscription change bumps the group epoch, the assignment is computed
//! again, and every member moves to the new epoch with its next heartbeat.
//!
//! The assignment is Kafka's simple assignor in spirit: with no more
//! members than partitions each partition goes to one member, round
//! robin; with more members, each member gets one partition and the
//! partitions are shared evenly between them.

use engine::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

use super::assignor::TopicPartition;
use super::consumer::{TopicInfo, LEAVE_GROUP_MEMBER_EPOCH};
use super::timeouts::{MemberTimeouts, MsRange, TimeoutBounds};
use crate::share::ShareSettings;

/// A ShareGroupHeartbeat request. `None` fields mean "unchanged".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareHeartbeatRequest {
    /// Group id.
    pub group_id: String,
    /// Member id, chosen by the client (a random UUID).
    pub member_id: String,
    /// 0 to join, -1 to leave, else the epoch the member is at.
    pub member_epoch: i32,
    /// Rack id.
    pub rack_id: Option<String>,
    /// Subscribed topic names.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// The group's own `share.session.timeout.ms` and
    /// `share.heartbeat.interval.ms`, resolved by the caller; `None`: the
    /// broker's.
    pub timeouts: Option<MemberTimeouts>,
}

/// A ShareGroupHeartbeat answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatResponse {
    /// Error code.
    pub error_code: ErrorCode,
    /// The member id.
    pub member_id: String,
    /// The member's epoch.
    pub member_epoch: i32,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The member's whole assignment (names; the handler maps them to ids).
    pub assignment: Option<Vec<TopicPartition>>,
}

/// One member of a share group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    /// Member id.
    pub member_id: String,
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
    /// Subscribed topics.
    pub subscribed_topics: BTreeSet<String>,
    /// Assigned partitions.
    pub assignment: Vec<TopicPartition>,
    /// When the member is dropped unless it heartbeats again.
    pub session_deadline_ms: i64,
}

/// Settings of share groups (broker configs, Kafka's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareGroupConfig {
    /// `group.share.session.timeout.ms`.
    pub session_timeout_ms: i64,
    /// `group.share.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.share.min/max.session.timeout.ms` and
    /// `group.share.min/max.heartbeat.interval.ms`: what a group's own
    /// `share.*` configs may be.
    pub bounds: TimeoutBounds,
    /// `group.share.min.record.lock.duration.ms` to
    /// `group.share.max.record.lock.duration.ms` (15 s to 60 s): what a
    /// group's `share.record.lock.duration.ms` may be.
    pub lock_duration_bounds_ms: MsRange,
    /// `group.share.max.size`.
    pub max_size: usize,
    /// `group.share.max.share.sessions`: share sessions per broker.
    pub max_sessions: usize,
    /// How partition leaders deliver the records.
    pub records: ShareSettings,
}

impl ShareGroupConfig {
    /// A member's timeouts when its group sets none of its own.
    pub fn timeouts(&self) -> MemberTimeouts {
        MemberTimeouts {
            session_timeout_ms: self.session_timeout_ms,
            heartbeat_interval_ms: self.heartbeat_interval_ms,
        }
    }
}

impl Default for ShareGroupConfig {
    fn default() -> Self {
        Self {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            bounds: TimeoutBounds::default(),
            lock_duration_bounds_ms: MsRange::new(15_000, 60_000),
            max_size: 200,
            max_sessions: 2_000,
            records: ShareSettings::default(),
        }
    }
}

/// A share group: its members, epoch and assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroup {
    /// Group id.
    pub group_id: String,
    /// Bumped by every change of membership, subscription or partitions.
    pub group_epoch: i32,
    /// Members by id.
    pub members: BTreeMap<String, ShareMember>,
    /// Partition counts of the subscribed topics at the last assignment.
    pub topic_partitions: BTreeMap<String, i32>,
    /// When the last member left (or the group was made).
    pub empty_since_ms: i64,
}

impl ShareGroup {
    /// An empty group.
    pub fn new(group_id: &str, now_ms: i64) -> Self {
        Self {
            group_id: group_id.to_string(),
            group_epoch: 0,
            members: BTreeMap::new(),
            topic_partitions: BTreeMap::new(),
            empty_since_ms: now_ms,
        }
    }

    /// Kafka's state names: Empty or Stable (share groups never rebalance).
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    /// Every topic a member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed_topics.iter().cloned())
            .collect()
    }

    /// Steps one heartbeat.
    pub fn heartbeat(
        &mut self,
        config: &ShareGroupConfig,
        now_ms: i64,
        req: &ShareHeartbeatRequest,
        topics: &dyn Fn(&str) -> Option<TopicInfo>,
    ) -> ShareHeartbeatResponse {
        let timeouts = req.timeouts.unwrap_or_else(|| config.timeouts());
        let error = |code: ErrorCode| ShareHeartbeatResponse {
            error_code: code,
            member_id: req.member_id.clone(),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: timeouts.heartbeat_interval_ms,
            assignment: None,
        };
        if req.member_id.is_empty() {
            return error(ErrorCode::InvalidRequest);
        }
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH {
            if self.members.remove(&req.member_id).is_some() {
                let partitions = self.current_partitions(topics);
                self.reassign(now_ms, partitions);
            }
            return ShareHeartbeatResponse {
                assignment: None,
                ..error(ErrorCode::None)
            };
        }
        let mut changed = match self.admit(config, req) {
            Ok(joined) => joined,
            Err(code) => return error(code),
        };
        let Some(member) = self.members.get_mut(&req.member_id) else {
            return error(ErrorCode::UnknownMemberId);
        };
        member.session_deadline_ms = now_ms + timeouts.session_timeout_ms;
        if let Some(names) = &req.subscribed_topic_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            if names != member.subscribed_topics {
                member.subscribed_topics = names;
                changed = true;
            }
        }
        let partitions = self.current_partitions(topics);
        if changed || partitions != self.topic_partitions {
            self.reassign(now_ms, partitions);
        }
        let Some(member) = self.members.get(&req.member_id) else {
            return error(ErrorCode::UnknownMemberId);
        };
        ShareHeartbeatResponse {
            error_code: ErrorCode::None,
            member_id: member.member_id.clone(),
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: timeouts.heartbeat_interval_ms,
            // The whole assignment every time, as librdkafka's own mock
            // broker answers: the client applies it only when it differs.
            assignment: Some(member.assignment.clone()),
        }
    }

    /// Checks the member's epoch, and adds it on a join (epoch 0): whether
    /// it joined.
    fn admit(
        &mut self,
        config: &ShareGroupConfig,
        req: &ShareHeartbeatRequest,
    ) -> Result<bool, ErrorCode> {
        match self.members.get(&req.member_id) {
            None if req.member_epoch != 0 => Err(ErrorCode::UnknownMemberId),
            None if self.members.len() >= config.max_size => Err(ErrorCode::GroupMaxSizeReached),
            None => {
                self.members.insert(req.member_id.clone(), new_member(req));
                Ok(true)
            }
            Some(m) if req.member_epoch == 0 => {
                // A rejoin with the same id: it starts over.
                let subscribed = m.subscribed_topics.clone();
                let mut fresh = new_member(req);
                if req.subscribed_topic_names.is_none() {
                    fresh.subscribed_topics = subscribed;
                }
                self.members.insert(req.member_id.clone(), fresh);
                Ok(true)
            }
            Some(m)
                if req.member_epoch != m.member_epoch
                    && req.member_epoch != m.previous_member_epoch =>
            {
                Err(ErrorCode::FencedMemberEpoch)
            }
            Some(_) => Ok(false),
        }
    }

    /// The partition counts of the subscribed topics that exist.
    fn current_partitions(
        &self,
        topics: &dyn Fn(&str) -> Option<TopicInfo>,
    ) -> BTreeMap<String, i32> {
        self.subscribed_topics()
            .into_iter()
            .filter_map(|name| topics(&name).map(|t| (name, t.partitions)))
            .collect()
    }

    /// A new epoch and assignment, given to every member at once.
    fn reassign(&mut self, now_ms: i64, topic_partitions: BTreeMap<String, i32>) {
        self.topic_partitions = topic_partitions;
        self.group_epoch += 1;
        if self.members.is_empty() {
            self.empty_since_ms = now_ms;
        }
        let assignment = assign(&self.members, &self.topic_partitions);
        for member in self.members.values_mut() {
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = self.group_epoch;
            member.assignment = assignment
                .get(&member.member_id)
                .cloned()
                .unwrap_or_default();
        }
    }

    /// Drops the members whose session ran out; their partitions go to
    /// the others (over the partitions known at the last assignment; the
    /// next heartbeat catches up with any change since).
    pub fn tick(&mut self, now_ms: i64) {
        let before = self.members.len();
        self.members.retain(|_, m| m.session_deadline_ms > now_ms);
        if self.members.len() != before {
            let subscribed = self.subscribed_topics();
            let mut partitions = std::mem::take(&mut self.topic_partitions);
            partitions.retain(|topic, _| subscribed.contains(topic));
            self.reassign(now_ms, partitions);
        }
    }

    /// The earliest session deadline.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.members.values().map(|m| m.session_deadline_ms).min()
    }
}

fn new_member(req: &ShareHeartbeatRequest) -> ShareMember {
    ShareMember {
        member_id: req.member_id.clone(),
        rack_id: req.rack_id.clone(),
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        member_epoch: 0,
        previous_member_epoch: 0,
        subscribed_topics: req
            .subscribed_topic_names
            .iter()
            .flatten()
            .cloned()
            .collect(),
        assignment: Vec::new(),
        session_deadline_ms: 0,
    }
}

/// Each topic's partitions over the members subscribed to it: round robin
/// while there are no more members than partitions, else each member one
/// partition, the partitions shared evenly.
pub fn assign(
    members: &BTreeMap<String, ShareMember>,
    topic_partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut out: BTreeMap<String, Vec<TopicPartition>> = BTreeMap::new();
    for (topic, &partitions) in topic_partitions {
        let subscribers: Vec<&String> = members
            .values()
            .filter(|m| m.subscribed_topics.contains(topic))
            .map(|m| &m.member_id)
            .collect();
        if subscribers.is_empty() || partitions <= 0 {
            continue;
        }
        let count = subscribers.len();
        let total = partitions as usize;
        if count <= total {
            for partition in 0..total {
                let member = subscribers[partition % count];
                out.entry(member.clone())
                    .or_default()
                    .push(TopicPartition::new(topic.clone(), partition as i32));
            }
        } else {
            for (index, member) in subscribers.iter().enumerate() {
                out.entry((*member).clone())
                    .or_default()
                    .push(TopicPartition::new(topic.clone(), (index % total) as i32));
            }
        }
    }
    out
}

//! KIP-848 and share groups' membership, kept in `__consumer_offsets` so
//! that it outlives its coordinator: after a failover or a restart the
//! members go on at their epochs with what they own, as in Kafka, instead
//! of joining again (a rebalance of the whole group for every coordinator
//! move).
//!
//! The coordinator steps its groups in memory; after each step it asks
//! [`MembershipLog::sync`] for the records of what changed, comparing each
//! group's records with the ones last written (a heartbeat that changes
//! nothing durable writes nothing; session deadlines are not kept: a
//! restored member gets a full session). Replay fills the same table, and
//! [`MembershipLog::restore`] rebuilds the groups from it.

use super::consumer::{ConsumerGroup, ConsumerMember, MemberState};
use super::error::RecordError;
use super::membership_records::{
    decode_head_value, decode_member_value, encode_head_key, encode_head_value, encode_member_key,
    encode_member_value, GroupKind, HeadValue, MemberValue,
};
use super::offsets::Record;
use super::records::{decode_key, RecordKey};
use super::share::{ShareGroup, ShareMember};
use super::{Assignor, GroupConfig};
use std::collections::BTreeMap;

/// The group whose membership is synced: one of the kinds that have
/// membership records, or none (no group, or a classic one).
#[derive(Debug, Clone, Copy)]
pub enum Members<'a> {
    /// No membership records: the group is gone or classic.
    None,
    /// A KIP-848 group.
    Consumer(&'a ConsumerGroup),
    /// A share group.
    Share(&'a ShareGroup),
}

/// A group rebuilt from its membership records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// A KIP-848 group.
    Consumer(ConsumerGroup),
    /// A share group.
    Share(ShareGroup),
}

/// A group's membership records as last written: key → value.
type Written = BTreeMap<Vec<u8>, Vec<u8>>;

/// The membership records last written (or replayed) for each group.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MembershipLog {
    written: BTreeMap<String, Written>,
}

impl MembershipLog {
    /// The records that bring the log to `group`'s membership now: changed
    /// heads and members, and tombstones for what is gone.
    pub fn sync(&mut self, group_id: &str, group: Members<'_>) -> Vec<Record> {
        let now = records_of(group_id, group);
        let before = self.written.remove(group_id).unwrap_or_default();
        let mut out: Vec<Record> = (now.iter())
            .filter(|(key, value)| before.get(*key) != Some(*value))
            .map(|(key, value)| (key.clone(), Some(value.clone())))
            .collect();
        out.extend(
            (before.into_keys())
                .filter(|key| !now.contains_key(key))
                .map(|key| (key, None)),
        );
        if !now.is_empty() {
            self.written.insert(group_id.to_string(), now);
        }
        out
    }

    /// Replays one membership record of `group` (`None`: a tombstone),
    /// refusing one that does not decode.
    pub fn replay(
        &mut self,
        group: String,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), RecordError> {
        let Some(value) = value else {
            if let Some(written) = self.written.get_mut(&group) {
                written.remove(key);
                if written.is_empty() {
                    self.written.remove(&group);
                }
            }
            return Ok(());
        };
        match decode_key(key)? {
            RecordKey::MembershipHead { .. } => decode_head_value(value).map(drop)?,
            _ => decode_member_value(value).map(drop)?,
        }
        let written = self.written.entry(group).or_default();
        written.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    /// The groups with membership records that `loaded` selects.
    pub fn groups(&self, loaded: &dyn Fn(&str) -> bool) -> Vec<String> {
        (self.written.keys())
            .filter(|id| loaded(id))
            .cloned()
            .collect()
    }

    /// The group the records of `group_id` hold, its members given a full
    /// session from `now_ms`; `None` without a head. Members of another
    /// kind than the head are left out (the next sync deletes them).
    pub fn restore(
        &self,
        group_id: &str,
        config: &GroupConfig,
        now_ms: i64,
    ) -> Result<Option<Restored>, RecordError> {
        let Some(written) = self.written.get(group_id) else {
            return Ok(None);
        };
        let head_key = encode_head_key(group_id);
        let Some(head) = written.get(&head_key) else {
            return Ok(None);
        };
        let head = decode_head_value(head)?;
        let mut members = Vec::new();
        for (key, value) in written.iter().filter(|(key, _)| **key != head_key) {
            if let RecordKey::MembershipMember { member, .. } = decode_key(key)? {
                let value = decode_member_value(value)?;
                if value.kind == head.kind {
                    members.push((member, value));
                }
            }
        }
        Ok(Some(match head.kind {
            GroupKind::Consumer => {
                let deadline = now_ms + config.consumer_session_timeout_ms;
                Restored::Consumer(consumer_group(group_id, head, members, deadline, now_ms))
            }
            GroupKind::Share => {
                let deadline = now_ms + config.share.session_timeout_ms;
                Restored::Share(share_group(group_id, head, members, deadline))
            }
        }))
    }

    /// Forgets the groups `unloaded` selects (their partition moved away).
    pub fn forget(&mut self, unloaded: &dyn Fn(&str) -> bool) {
        self.written.retain(|id, _| !unloaded(id));
    }
}

/// The membership records of `group`.
fn records_of(group_id: &str, group: Members<'_>) -> Written {
    let (head, members): (HeadValue, Vec<(&String, MemberValue)>) = match group {
        Members::None => return Written::new(),
        Members::Consumer(g) => (
            consumer_head(g),
            (g.members.iter())
                .map(|(id, m)| (id, consumer_member(g, m)))
                .collect(),
        ),
        Members::Share(g) => (
            share_head(g),
            (g.members.iter())
                .map(|(id, m)| (id, share_member(m)))
                .collect(),
        ),
    };
    let mut out = Written::new();
    out.insert(encode_head_key(group_id), encode_head_value(&head));
    for (member_id, value) in members {
        out.insert(
            encode_member_key(group_id, member_id),
            encode_member_value(&value),
        );
    }
    out
}

fn consumer_head(g: &ConsumerGroup) -> HeadValue {
    HeadValue {
        kind: GroupKind::Consumer,
        group_epoch: g.group_epoch,
        assignment_epoch: g.assignment_epoch,
        assignor: g.assignor.name().to_string(),
        empty_since_ms: g.empty_since_ms,
        topic_partitions: g.topic_partitions.clone(),
    }
}

fn consumer_member(g: &ConsumerGroup, m: &ConsumerMember) -> MemberValue {
    MemberValue {
        kind: GroupKind::Consumer,
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topics: m.subscribed_topics.clone(),
        server_assignor: m.server_assignor.clone(),
        subscribed_regex: m.subscribed_regex.clone(),
        regex_topics: m.regex_topics.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        member_epoch: m.member_epoch,
        previous_member_epoch: m.previous_member_epoch,
        state: match m.state {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
        },
        assigned: m.assigned.clone(),
        pending_revocation: m.pending_revocation.clone(),
        target: g.target.get(&m.member_id).cloned().unwrap_or_default(),
        classic: m.classic.clone(),
    }
}

fn share_head(g: &ShareGroup) -> HeadValue {
    HeadValue {
        kind: GroupKind::Share,
        group_epoch: g.group_epoch,
        assignment_epoch: g.group_epoch,
        assignor: String::new(),
        empty_since_ms: g.empty_since_ms,
        topic_partitions: g.topic_partitions.clone(),
    }
}

fn share_member(m: &ShareMember) -> MemberValue {
    MemberValue {
        kind: GroupKind::Share,
        instance_id: None,
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topics: m.subscribed_topics.clone(),
        server_assignor: None,
        subscribed_regex: None,
        regex_topics: Default::default(),
        rebalance_timeout_ms: 0,
        member_epoch: m.member_epoch,
        previous_member_epoch: m.previous_member_epoch,
        state: 0,
        assigned: m.assignment.iter().cloned().collect(),
        pending_revocation: Default::default(),
        target: Default::default(),
        classic: None,
    }
}

/// A KIP-848 group from its records; a member still revoking gets its
/// whole rebalance timeout again.
fn consumer_group(
    group_id: &str,
    head: HeadValue,
    members: Vec<(String, MemberValue)>,
    session_deadline_ms: i64,
    now_ms: i64,
) -> ConsumerGroup {
    let mut g = ConsumerGroup::new(group_id, head.empty_since_ms);
    g.group_epoch = head.group_epoch;
    g.assignment_epoch = head.assignment_epoch;
    g.assignor = Assignor::from_name(&head.assignor).unwrap_or(Assignor::Uniform);
    g.topic_partitions = head.topic_partitions;
    for (member_id, v) in members {
        let state = match v.state {
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Stable,
        };
        let revoking = state == MemberState::UnrevokedPartitions;
        // A classic member's session is its own.
        let session_deadline_ms = match &v.classic {
            Some(c) => now_ms + i64::from(c.session_timeout_ms),
            None => session_deadline_ms,
        };
        g.target.insert(member_id.clone(), v.target);
        let member = ConsumerMember {
            member_id: member_id.clone(),
            instance_id: v.instance_id,
            rack_id: v.rack_id,
            client_id: v.client_id,
            client_host: v.client_host,
            member_epoch: v.member_epoch,
            previous_member_epoch: v.previous_member_epoch,
            state,
            subscribed_topics: v.subscribed_topics,
            server_assignor: v.server_assignor,
            subscribed_regex: v.subscribed_regex,
            regex_topics: v.regex_topics,
            rebalance_timeout_ms: v.rebalance_timeout_ms,
            assigned: v.assigned,
            pending_revocation: v.pending_revocation,
            classic: v.classic,
            session_deadline_ms,
            rebalance_deadline_ms: revoking.then(|| now_ms + i64::from(v.rebalance_timeout_ms)),
        };
        g.members.insert(member_id, member);
    }
    g
}

fn share_group(
    group_id: &str,
    head: HeadValue,
    members: Vec<(String, MemberValue)>,
    session_deadline_ms: i64,
) -> ShareGroup {
    let mut g = ShareGroup::new(group_id, head.empty_since_ms);
    g.group_epoch = head.group_epoch;
    g.topic_partitions = head.topic_partitions;
    for (member_id, v) in members {
        let member = ShareMember {
            member_id: member_id.clone(),
            rack_id: v.rack_id,
            client_id: v.client_id,
            client_host: v.client_host,
            member_epoch: v.member_epoch,
            previous_member_epoch: v.previous_member_epoch,
            subscribed_topics: v.subscribed_topics,
            assignment: v.assigned.into_iter().collect(),
            session_deadline_ms,
        };
        g.members.insert(member_id, member);
    }
    g
}

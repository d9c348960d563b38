//! The harness's own client-side partition assignors for the classic group
//! protocol: the group leader runs one of these over every member's
//! subscription and sends the result in SyncGroup. Pure functions.
//!
//! - `range`: per topic, its subscribers in member-id order each take a
//!   contiguous run of partitions; the first `partitions % members` take one
//!   more (Kafka's `RangeAssignor`).
//! - `roundrobin`: every (topic, partition) in order dealt to the members in
//!   a circle, skipping members not subscribed to the topic (Kafka's
//!   `RoundRobinAssignor`).
//! - `sticky`: keep what each member owned (still subscribed, still there,
//!   up to a fair share), give the rest to the least-loaded subscriber, then
//!   move partitions from the most- to the least-loaded while that evens the
//!   counts out.

use crate::error::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A (topic, partition) pair.
pub type TopicPartition = (String, i32);

/// Member id → the partitions it is assigned, sorted.
pub type GroupAssignment = BTreeMap<String, Vec<TopicPartition>>;

/// Which assignor the group leader runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Assignor {
    #[default]
    Range,
    #[serde(rename = "roundrobin")]
    RoundRobin,
    Sticky,
}

impl Assignor {
    /// The protocol name sent in JoinGroup.
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Range => "range",
            Assignor::RoundRobin => "roundrobin",
            Assignor::Sticky => "sticky",
        }
    }

    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "range" => Ok(Assignor::Range),
            "roundrobin" => Ok(Assignor::RoundRobin),
            "sticky" => Ok(Assignor::Sticky),
            other => Err(BenchError::Workload(format!(
                "unknown assignor {other:?}; known: range, roundrobin, sticky"
            ))),
        }
    }

    /// Assigns `partitions` (topic → partition count) to `members`.
    pub fn assign(
        self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) -> GroupAssignment {
        match self {
            Assignor::Range => assign_range(members, partitions),
            Assignor::RoundRobin => assign_round_robin(members, partitions),
            Assignor::Sticky => assign_sticky(members, partitions),
        }
    }
}

/// One member's subscription as the leader sees it in JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSubscription {
    pub member_id: String,
    pub topics: Vec<String>,
    /// What it owned before this rebalance (used by `sticky`).
    pub owned: Vec<TopicPartition>,
}

fn empty(members: &[MemberSubscription]) -> GroupAssignment {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect()
}

fn sorted(members: &[MemberSubscription]) -> Vec<&MemberSubscription> {
    let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
    sorted.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    sorted
}

fn finish(mut assignment: GroupAssignment) -> GroupAssignment {
    for partitions in assignment.values_mut() {
        partitions.sort();
    }
    assignment
}

/// Kafka's range assignor.
pub fn assign_range(
    members: &[MemberSubscription],
    partitions: &BTreeMap<String, i32>,
) -> GroupAssignment {
    let mut assignment = empty(members);
    let members = sorted(members);
    for (topic, &count) in partitions {
        let subscribers: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .map(|m| m.member_id.as_str())
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        let share = count as usize / subscribers.len();
        let extra = count as usize % subscribers.len();
        let mut next = 0i32;
        for (index, member) in subscribers.iter().enumerate() {
            let take = share + usize::from(index < extra);
            let entry = assignment.entry(member.to_string()).or_default();
            for _ in 0..take {
                entry.push((topic.clone(), next));
                next += 1;
            }
        }
    }
    finish(assignment)
}

/// Kafka's round-robin assignor.
pub fn assign_round_robin(
    members: &[MemberSubscription],
    partitions: &BTreeMap<String, i32>,
) -> GroupAssignment {
    let mut assignment = empty(members);
    let members = sorted(members);
    if members.is_empty() {
        return assignment;
    }
    let mut cursor = 0usize;
    for (topic, &count) in partitions {
        if !members.iter().any(|m| m.topics.contains(topic)) {
            continue;
        }
        for partition in 0..count {
            while !members[cursor % members.len()].topics.contains(topic) {
                cursor += 1;
            }
            let member = &members[cursor % members.len()].member_id;
            cursor += 1;
            assignment
                .entry(member.clone())
                .or_default()
                .push((topic.clone(), partition));
        }
    }
    finish(assignment)
}

/// A balanced assignor that keeps as much of the previous ownership as it
/// can.
pub fn assign_sticky(
    members: &[MemberSubscription],
    partitions: &BTreeMap<String, i32>,
) -> GroupAssignment {
    let members = sorted(members);
    let mut assignment = empty(&members.iter().map(|m| (*m).clone()).collect::<Vec<_>>());
    let assignable: Vec<TopicPartition> = partitions
        .iter()
        .filter(|(topic, _)| !subscribers(&members, topic).is_empty())
        .flat_map(|(topic, &count)| (0..count).map(move |p| (topic.clone(), p)))
        .collect();
    if members.is_empty() {
        return assignment;
    }
    let fair_share = assignable.len().div_ceil(members.len());
    // 1. Keep valid previous ownership, up to a fair share, first claim wins.
    let taken = keep_owned(&members, partitions, fair_share, &mut assignment);
    // 2. The rest, most constrained first, to the least-loaded subscriber.
    let mut rest: Vec<&TopicPartition> = assignable
        .iter()
        .filter(|tp| !taken.contains(*tp))
        .collect();
    rest.sort_by_key(|tp| (subscribers(&members, &tp.0).len(), (*tp).clone()));
    for tp in rest {
        let least = subscribers(&members, &tp.0)
            .into_iter()
            .min_by_key(|m| (assignment.get(*m).map_or(0, Vec::len), m.to_string()));
        if let Some(member) = least {
            assignment
                .entry(member.to_string())
                .or_default()
                .push(tp.clone());
        }
    }
    // 3. Even out: move from the most loaded to a less loaded subscriber
    // while the difference is above one.
    even_out(&members, &mut assignment);
    finish(assignment)
}

/// The ids of the members subscribed to `topic`.
fn subscribers<'m>(members: &[&'m MemberSubscription], topic: &str) -> Vec<&'m str> {
    members
        .iter()
        .filter(|m| m.topics.iter().any(|t| t == topic))
        .map(|m| m.member_id.as_str())
        .collect()
}

/// Gives each member what it owned and may keep (still subscribed, still
/// there, up to `fair_share`, not claimed by an earlier member); returns
/// every partition so kept.
fn keep_owned(
    members: &[&MemberSubscription],
    partitions: &BTreeMap<String, i32>,
    fair_share: usize,
    assignment: &mut GroupAssignment,
) -> BTreeSet<TopicPartition> {
    let mut taken: BTreeSet<TopicPartition> = BTreeSet::new();
    for member in members {
        let mut kept = Vec::new();
        for owned in &member.owned {
            let valid = member.topics.contains(&owned.0)
                && partitions
                    .get(&owned.0)
                    .is_some_and(|&count| owned.1 >= 0 && owned.1 < count);
            if valid && kept.len() < fair_share && taken.insert(owned.clone()) {
                kept.push(owned.clone());
            }
        }
        assignment.insert(member.member_id.clone(), kept);
    }
    taken
}

/// Evens the assignment out: moves a partition from the most loaded to a
/// less loaded subscriber while the difference is above one.
fn even_out(members: &[&MemberSubscription], assignment: &mut GroupAssignment) {
    // Each move lowers the sum of squared loads, so this ends.
    loop {
        let mut best: Option<(String, String, TopicPartition)> = None;
        let mut best_gap = 1usize;
        for (from, owned) in assignment.iter() {
            for tp in owned {
                for to in subscribers(members, &tp.0) {
                    let to_load = assignment.get(to).map_or(0, Vec::len);
                    if owned.len() > to_load + 1 && owned.len() - to_load > best_gap {
                        best_gap = owned.len() - to_load;
                        best = Some((from.clone(), to.to_string(), tp.clone()));
                    }
                }
            }
        }
        let Some((from, to, tp)) = best else {
            break;
        };
        if let Some(owned) = assignment.get_mut(&from) {
            owned.retain(|owned| owned != &tp);
        }
        assignment.entry(to).or_default().push(tp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            owned: Vec::new(),
        }
    }

    fn tps(items: &[(&str, i32)]) -> Vec<TopicPartition> {
        items.iter().map(|(t, p)| (t.to_string(), *p)).collect()
    }

    fn counts(items: &[(&str, i32)]) -> BTreeMap<String, i32> {
        items.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    /// Every partition of a subscribed topic exactly once, only to subscribers.
    fn assert_complete(
        assignment: &GroupAssignment,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) {
        let mut seen = BTreeSet::new();
        for (member, owned) in assignment {
            let subscription = members.iter().find(|m| &m.member_id == member).unwrap();
            for tp in owned {
                assert!(subscription.topics.contains(&tp.0), "{member} got {tp:?}");
                assert!(seen.insert(tp.clone()), "{tp:?} twice");
            }
        }
        let expected: usize = partitions
            .iter()
            .filter(|(t, _)| members.iter().any(|m| m.topics.contains(t)))
            .map(|(_, &n)| n as usize)
            .sum();
        assert_eq!(seen.len(), expected);
    }

    /// a: [t1], b: [t1, t2], c: [t2]; t1 has 3 partitions, t2 has 2.
    fn uneven() -> (Vec<MemberSubscription>, BTreeMap<String, i32>) {
        (
            vec![
                member("c", &["t2"]),
                member("a", &["t1"]),
                member("b", &["t1", "t2"]),
            ],
            counts(&[("t1", 3), ("t2", 2), ("unsubscribed", 4)]),
        )
    }

    #[test]
    fn range_uneven_subscriptions() {
        let (members, partitions) = uneven();
        let assignment = assign_range(&members, &partitions);
        assert_complete(&assignment, &members, &partitions);
        assert_eq!(assignment["a"], tps(&[("t1", 0), ("t1", 1)]));
        assert_eq!(assignment["b"], tps(&[("t1", 2), ("t2", 0)]));
        assert_eq!(assignment["c"], tps(&[("t2", 1)]));
    }

    #[test]
    fn round_robin_uneven_subscriptions() {
        let (members, partitions) = uneven();
        let assignment = assign_round_robin(&members, &partitions);
        assert_complete(&assignment, &members, &partitions);
        assert_eq!(assignment["a"], tps(&[("t1", 0), ("t1", 2)]));
        assert_eq!(assignment["b"], tps(&[("t1", 1), ("t2", 0)]));
        assert_eq!(assignment["c"], tps(&[("t2", 1)]));
    }

    #[test]
    fn sticky_uneven_subscriptions() {
        let (members, partitions) = uneven();
        let assignment = assign_sticky(&members, &partitions);
        assert_complete(&assignment, &members, &partitions);
        let loads: Vec<usize> = assignment.values().map(Vec::len).collect();
        assert_eq!(loads.iter().sum::<usize>(), 5);
        assert!(
            loads.iter().all(|&l| (1..=2).contains(&l)),
            "{assignment:?}"
        );
    }

    #[test]
    fn homogeneous_members_are_balanced_by_every_assignor() {
        let members: Vec<_> = ["m1", "m2", "m3"]
            .iter()
            .map(|id| member(id, &["x", "y"]))
            .collect();
        let partitions = counts(&[("x", 4), ("y", 3)]);
        for assignor in [Assignor::Range, Assignor::RoundRobin, Assignor::Sticky] {
            let assignment = assignor.assign(&members, &partitions);
            assert_complete(&assignment, &members, &partitions);
            let loads: Vec<usize> = assignment.values().map(Vec::len).collect();
            let spread = loads.iter().max().unwrap() - loads.iter().min().unwrap();
            assert!(spread <= 1, "{assignor:?}: {assignment:?}");
        }
    }

    #[test]
    fn sticky_keeps_ownership_when_a_member_joins() {
        let partitions = counts(&[("t", 6)]);
        let before = assign_sticky(&[member("a", &["t"]), member("b", &["t"])], &partitions);
        let with_owned = |id: &str| MemberSubscription {
            owned: before.get(id).cloned().unwrap_or_default(),
            ..member(id, &["t"])
        };
        let members = vec![with_owned("a"), with_owned("b"), with_owned("c")];
        let after = assign_sticky(&members, &partitions);
        assert_complete(&after, &members, &partitions);
        assert!(after.values().all(|owned| owned.len() == 2), "{after:?}");
        // Only the two partitions c needs moved; a and b kept the rest.
        for id in ["a", "b"] {
            assert!(after[id].iter().all(|tp| before[id].contains(tp)), "{id}");
        }
        // Range, by contrast, reshuffles: b's partitions change.
        let range = assign_range(&members, &partitions);
        assert_ne!(range["b"], tps(&[("t", 3), ("t", 4)]));
    }

    #[test]
    fn no_members_or_no_subscribers() {
        let partitions = counts(&[("t", 3)]);
        for assignor in [Assignor::Range, Assignor::RoundRobin, Assignor::Sticky] {
            assert!(assignor.assign(&[], &partitions).is_empty());
            let lonely = [member("a", &["other"])];
            assert_eq!(assignor.assign(&lonely, &partitions)["a"], Vec::new());
        }
        assert_eq!(Assignor::from_name("sticky").unwrap(), Assignor::Sticky);
        assert!(Assignor::from_name("cooperative").is_err());
    }
}

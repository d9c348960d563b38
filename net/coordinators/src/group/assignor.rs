//! Server-side assignors of the KIP-848 consumer protocol: `range`,
//! `roundrobin` (alias `simple`) and `uniform` (sticky).
//!
//! Each is a pure function from the members' subscriptions, the topics'
//! partition counts and (for stickiness) the previous target assignment to a
//! new target assignment. Members and topics are `BTreeMap`s so the result is
//! deterministic: every replica of the coordinator computes the same answer.

use std::collections::{BTreeMap, BTreeSet};

/// One partition of one topic: the engine's shared type.
pub use engine::TopicPartition;

/// The partitions given to one member.
pub type MemberAssignment = BTreeSet<TopicPartition>;
/// Member id → its partitions.
pub type GroupAssignment = BTreeMap<String, MemberAssignment>;

/// What an assignor knows about one member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberSubscription {
    /// Topics the member subscribes to.
    pub topics: BTreeSet<String>,
}

/// The server-side assignors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    /// Per topic, contiguous ranges; the first members get the remainder.
    Range,
    /// All partitions dealt in turn to the subscribed members.
    RoundRobin,
    /// Balanced and sticky: as few moves as possible from the previous target.
    Uniform,
}

impl Assignor {
    /// The assignor a member names, or `None` when unknown.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "range" => Some(Self::Range),
            "roundrobin" | "simple" => Some(Self::RoundRobin),
            "uniform" => Some(Self::Uniform),
            _ => None,
        }
    }

    /// The name the assignor is known by.
    pub fn name(self) -> &'static str {
        match self {
            Self::Range => "range",
            Self::RoundRobin => "roundrobin",
            Self::Uniform => "uniform",
        }
    }

    /// Computes a target assignment. `topics` holds the partition count of
    /// every subscribed topic that exists; subscriptions to other topics are
    /// ignored. Every member appears in the result, possibly with nothing.
    pub fn assign(
        self,
        members: &BTreeMap<String, MemberSubscription>,
        topics: &BTreeMap<String, i32>,
        previous: &GroupAssignment,
    ) -> GroupAssignment {
        match self {
            Self::Range => assign_range(members, topics),
            Self::RoundRobin => assign_round_robin(members, topics),
            Self::Uniform => assign_uniform(members, topics, previous),
        }
    }
}

fn empty_assignment(members: &BTreeMap<String, MemberSubscription>) -> GroupAssignment {
    members
        .keys()
        .map(|m| (m.clone(), MemberAssignment::new()))
        .collect()
}

/// All partitions of the topics at least one member subscribes to, sorted.
fn subscribed_partitions(
    members: &BTreeMap<String, MemberSubscription>,
    topics: &BTreeMap<String, i32>,
) -> Vec<TopicPartition> {
    let subscribed: BTreeSet<&String> = members.values().flat_map(|m| &m.topics).collect();
    let mut out = Vec::new();
    for (topic, count) in topics {
        if subscribed.contains(topic) {
            out.extend((0..*count).map(|p| TopicPartition::new(topic.clone(), p)));
        }
    }
    out
}

/// Range: per topic, the subscribed members sorted by id each take a
/// contiguous run; the first `partitions % members` take one extra.
pub fn assign_range(
    members: &BTreeMap<String, MemberSubscription>,
    topics: &BTreeMap<String, i32>,
) -> GroupAssignment {
    let mut out = empty_assignment(members);
    for (topic, count) in topics {
        let subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, s)| s.topics.contains(topic))
            .map(|(id, _)| id)
            .collect();
        if subscribers.is_empty() || *count <= 0 {
            continue;
        }
        let n = subscribers.len() as i32;
        let (per_member, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, member) in subscribers.iter().enumerate() {
            let take = per_member + i32::from((i as i32) < extra);
            let slot = out.entry((*member).clone()).or_default();
            slot.extend((next..next + take).map(|p| TopicPartition::new(topic.clone(), p)));
            next += take;
        }
    }
    out
}

/// Round robin: partitions in (topic, partition) order are dealt to the
/// members in a circle, skipping members not subscribed to the topic.
pub fn assign_round_robin(
    members: &BTreeMap<String, MemberSubscription>,
    topics: &BTreeMap<String, i32>,
) -> GroupAssignment {
    let mut out = empty_assignment(members);
    let ids: Vec<(&String, &MemberSubscription)> = members.iter().collect();
    if ids.is_empty() {
        return out;
    }
    let mut cursor = 0usize;
    for tp in subscribed_partitions(members, topics) {
        // At most one full turn of the circle: some member subscribes to it.
        for _ in 0..ids.len() {
            let (id, sub) = ids[cursor % ids.len()];
            cursor = (cursor + 1) % ids.len();
            if sub.topics.contains(&tp.topic) {
                out.entry(id.clone()).or_default().insert(tp);
                break;
            }
        }
    }
    out
}

/// Uniform (sticky): keep every previous assignment that is still valid, give
/// unassigned partitions to the least-loaded subscribed member, then move
/// partitions from the most- to the least-loaded member while the two differ
/// by more than one. Each move strictly reduces the spread, so the number of
/// moves is the fewest that reaches balance for homogeneous subscriptions.
///
/// Cost: O(moves × partitions × members); fine for groups of hundreds of
/// members and thousands of partitions, which is what one coordinator serves.
pub fn assign_uniform(
    members: &BTreeMap<String, MemberSubscription>,
    topics: &BTreeMap<String, i32>,
    previous: &GroupAssignment,
) -> GroupAssignment {
    let mut out = empty_assignment(members);
    let all = subscribed_partitions(members, topics);
    let valid: BTreeSet<&TopicPartition> = all.iter().collect();
    let mut taken: BTreeSet<TopicPartition> = BTreeSet::new();
    // 1. Stickiness: keep what each member had, if still valid and unclaimed.
    for (id, sub) in members {
        if let Some(prev) = previous.get(id) {
            for tp in prev {
                if valid.contains(tp) && sub.topics.contains(&tp.topic) && taken.insert(tp.clone())
                {
                    out.entry(id.clone()).or_default().insert(tp.clone());
                }
            }
        }
    }
    // 2. Give each unassigned partition to the least-loaded eligible member.
    for tp in &all {
        if taken.contains(tp) {
            continue;
        }
        let target = members
            .iter()
            .filter(|(_, s)| s.topics.contains(&tp.topic))
            .min_by_key(|(id, _)| (out.get(*id).map_or(0, |a| a.len()), (*id).clone()))
            .map(|(id, _)| id.clone());
        if let Some(id) = target {
            out.entry(id).or_default().insert(tp.clone());
            taken.insert(tp.clone());
        }
    }
    // 3. Balance: move one partition at a time from a member to an eligible
    // member holding at least two fewer. Bounded: each move lowers the sum of
    // squared loads, so there are at most partitions² moves.
    let bound = all.len() * all.len() + 1;
    for _ in 0..bound {
        let Some((from, to, tp)) = best_move(members, &out) else {
            break;
        };
        if let Some(a) = out.get_mut(&from) {
            a.remove(&tp);
        }
        out.entry(to).or_default().insert(tp);
    }
    out
}

/// The move with the largest load gap (at least 2), preferring the most loaded
/// donor and the least loaded receiver; ties broken by ids and partition order.
fn best_move(
    members: &BTreeMap<String, MemberSubscription>,
    out: &GroupAssignment,
) -> Option<(String, String, TopicPartition)> {
    let load = |id: &String| out.get(id).map_or(0, |a| a.len());
    let mut donors: Vec<&String> = members.keys().collect();
    donors.sort_by_key(|id| std::cmp::Reverse(load(id)));
    let mut receivers: Vec<&String> = members.keys().collect();
    receivers.sort_by_key(|id| load(id));
    let mut best: Option<(usize, String, String, TopicPartition)> = None;
    for from in &donors {
        let from_load = load(from);
        for to in &receivers {
            let to_load = load(to);
            if from_load < to_load + 2 {
                break;
            }
            let to_sub = &members[*to];
            let candidate = out
                .get(*from)
                .and_then(|a| a.iter().rev().find(|tp| to_sub.topics.contains(&tp.topic)));
            if let Some(tp) = candidate {
                let gap = from_load - to_load;
                if best.as_ref().is_none_or(|b| gap > b.0) {
                    best = Some((gap, (*from).clone(), (*to).clone(), tp.clone()));
                }
                break;
            }
        }
    }
    best.map(|(_, from, to, tp)| (from, to, tp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }
    fn set(items: &[(&str, i32)]) -> MemberAssignment {
        items.iter().map(|(t, p)| tp(t, *p)).collect()
    }
    fn subs(spec: &[(&str, &[&str])]) -> BTreeMap<String, MemberSubscription> {
        spec.iter()
            .map(|(id, topics)| {
                (
                    id.to_string(),
                    MemberSubscription {
                        topics: topics.iter().map(|t| t.to_string()).collect(),
                    },
                )
            })
            .collect()
    }
    fn uneven() -> (BTreeMap<String, MemberSubscription>, BTreeMap<String, i32>) {
        let members = subs(&[
            ("C0", &["t0"]),
            ("C1", &["t0", "t1"]),
            ("C2", &["t0", "t1", "t2"]),
        ]);
        let topics = [("t0", 1), ("t1", 2), ("t2", 3)]
            .iter()
            .map(|(t, n)| (t.to_string(), *n))
            .collect();
        (members, topics)
    }

    #[test]
    fn range_uneven_case() {
        // t0 (1 partition): C0,C1,C2 subscribe; 1/3 = 0 each, 1%3 = 1 extra → C0 t0-0.
        // t1 (2): C1,C2; 1 each → C1 t1-0, C2 t1-1.
        // t2 (3): only C2 → t2-0,1,2.
        let (members, topics) = uneven();
        let a = Assignor::Range.assign(&members, &topics, &GroupAssignment::new());
        assert_eq!(a["C0"], set(&[("t0", 0)]));
        assert_eq!(a["C1"], set(&[("t1", 0)]));
        assert_eq!(a["C2"], set(&[("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]));
    }

    #[test]
    fn round_robin_uneven_case() {
        // Sorted partitions t0-0, t1-0, t1-1, t2-0, t2-1, t2-2; circle C0→C1→C2→C0.
        // t0-0: cursor at C0, subscribed → C0, cursor C1.
        // t1-0: C1 subscribes t1 → C1, cursor C2.
        // t1-1: C2 subscribes t1 → C2, cursor C0.
        // t2-0: C0 no, C1 no, C2 yes → C2, cursor C0.
        // t2-1: same walk → C2. t2-2: same → C2.
        let (members, topics) = uneven();
        let a = Assignor::RoundRobin.assign(&members, &topics, &GroupAssignment::new());
        assert_eq!(a["C0"], set(&[("t0", 0)]));
        assert_eq!(a["C1"], set(&[("t1", 0)]));
        assert_eq!(a["C2"], set(&[("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]));
        assert_eq!(Assignor::from_name("simple"), Some(Assignor::RoundRobin));
    }

    #[test]
    fn uniform_uneven_case_respects_subscriptions() {
        // Fill: t0-0 → C0 (all at 0, lowest id); t1-0 → C1; t1-1 → C2 (C2 has 0,
        // C1 has 1); t2-* → C2 (only subscriber). Loads 1,1,4.
        // Balance: C2 (4) gives C1 (1) the one partition C1 can take, t1-1 →
        // loads 1,2,3. C2 holds only t2 now, which nobody else can take: done.
        let (members, topics) = uneven();
        let a = Assignor::Uniform.assign(&members, &topics, &GroupAssignment::new());
        assert_eq!(a["C0"], set(&[("t0", 0)]));
        assert_eq!(a["C1"], set(&[("t1", 0), ("t1", 1)]));
        assert_eq!(a["C2"], set(&[("t2", 0), ("t2", 1), ("t2", 2)]));
        assert_no_duplicates_and_complete(&a, 6);
    }

    fn assert_no_duplicates_and_complete(a: &GroupAssignment, total: usize) {
        let mut seen = BTreeSet::new();
        for parts in a.values() {
            for tp in parts {
                assert!(seen.insert(tp.clone()), "{tp:?} assigned twice");
            }
        }
        assert_eq!(seen.len(), total);
    }

    fn moved(before: &GroupAssignment, after: &GroupAssignment) -> usize {
        after
            .iter()
            .map(|(id, parts)| {
                let old = before.get(id).cloned().unwrap_or_default();
                parts.difference(&old).count()
            })
            .sum()
    }

    #[test]
    fn uniform_adding_a_member_moves_the_minimum() {
        let topics: BTreeMap<String, i32> = [("t".to_string(), 6), ("u".to_string(), 3)].into();
        let two = subs(&[("A", &["t", "u"]), ("B", &["t", "u"])]);
        let first = Assignor::Uniform.assign(&two, &topics, &GroupAssignment::new());
        let loads: Vec<usize> = first.values().map(|a| a.len()).collect();
        assert!(loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1);
        assert_no_duplicates_and_complete(&first, 9);

        let three = subs(&[("A", &["t", "u"]), ("B", &["t", "u"]), ("C", &["t", "u"])]);
        let second = Assignor::Uniform.assign(&three, &topics, &first);
        assert_no_duplicates_and_complete(&second, 9);
        assert!(second.values().all(|a| a.len() == 3));
        // 9 partitions over 3 members: C needs 3, so exactly 3 move, all to C.
        assert_eq!(moved(&first, &second), 3);
        assert_eq!(second["C"].len(), 3);
        for id in ["A", "B"] {
            assert!(second[id].is_subset(&first[id]), "{id} gained a partition");
        }
    }

    #[test]
    fn uniform_removing_a_member_moves_only_its_partitions() {
        let topics: BTreeMap<String, i32> = [("t".to_string(), 6)].into();
        let three = subs(&[("A", &["t"]), ("B", &["t"]), ("C", &["t"])]);
        let first = Assignor::Uniform.assign(&three, &topics, &GroupAssignment::new());
        assert!(first.values().all(|a| a.len() == 2));
        let two = subs(&[("A", &["t"]), ("B", &["t"])]);
        let second = Assignor::Uniform.assign(&two, &topics, &first);
        assert_no_duplicates_and_complete(&second, 6);
        for id in ["A", "B"] {
            assert!(first[id].is_subset(&second[id]), "{id} lost a partition");
            assert_eq!(second[id].len(), 3);
        }
        assert_eq!(moved(&first, &second), 2);
    }

    #[test]
    fn range_and_round_robin_balance_homogeneous_members() {
        let topics: BTreeMap<String, i32> = [("t".to_string(), 5)].into();
        let m = subs(&[("A", &["t"]), ("B", &["t"])]);
        let r = assign_range(&m, &topics);
        assert_eq!(r["A"], set(&[("t", 0), ("t", 1), ("t", 2)]));
        assert_eq!(r["B"], set(&[("t", 3), ("t", 4)]));
        let rr = assign_round_robin(&m, &topics);
        assert_eq!(rr["A"], set(&[("t", 0), ("t", 2), ("t", 4)]));
        assert_eq!(rr["B"], set(&[("t", 1), ("t", 3)]));
    }
}

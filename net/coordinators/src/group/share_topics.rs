//! The topics each share group has had assigned, kept in
//! `__consumer_offsets` (rill's record, key version 32001) so that they
//! outlive the group's members and its coordinator: where the group's
//! share-partition states are, which DeleteGroups must drop (Kafka keeps
//! the like in its ShareGroupStatePartitionMetadata record).

use super::offsets::Record;
use super::records;
use std::collections::{BTreeMap, BTreeSet};

/// Share group → the topics it has had assigned.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ShareTopics {
    by_group: BTreeMap<String, BTreeSet<String>>,
}

impl ShareTopics {
    /// Adds `assigned` to `group`'s topics: the record of the whole set
    /// when one is new.
    pub fn note(&mut self, group: &str, assigned: BTreeSet<String>) -> Option<Record> {
        let known = self.by_group.entry(group.to_string()).or_default();
        if assigned.is_subset(known) {
            return None;
        }
        known.extend(assigned);
        Some((
            records::encode_share_group_topics_key(group),
            Some(records::encode_share_group_topics_value(known.iter())),
        ))
    }

    /// `group`'s topics, if it has any.
    pub fn of(&self, group: &str) -> Option<&BTreeSet<String>> {
        self.by_group.get(group)
    }

    /// Forgets `group`'s topics: the tombstone when it had some.
    pub fn forget(&mut self, group: &str) -> Option<Record> {
        self.by_group
            .remove(group)
            .map(|_| (records::encode_share_group_topics_key(group), None))
    }

    /// Replays a record of `group`'s topics (`None`: its tombstone).
    pub fn replay(&mut self, group: String, topics: Option<Vec<String>>) {
        match topics {
            Some(topics) => {
                self.by_group.insert(group, topics.into_iter().collect());
            }
            None => {
                self.by_group.remove(&group);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(topics: &[&str]) -> BTreeSet<String> {
        topics.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn new_topics_are_recorded_once_and_replay_to_the_same_set() {
        let mut topics = ShareTopics::default();
        let (key, value) = topics.note("g", set(&["a"])).expect("a new topic");
        assert_eq!(topics.note("g", set(&["a"])), None);
        let (_, grown) = topics.note("g", set(&["b"])).expect("another");
        assert_eq!(topics.of("g"), Some(&set(&["a", "b"])));
        let mut replayed = ShareTopics::default();
        match records::decode_key(&key) {
            Ok(records::RecordKey::ShareGroupTopics { group }) => {
                let value = grown
                    .as_deref()
                    .map(records::decode_share_group_topics_value);
                replayed.replay(group, value.transpose().expect("decodes"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(replayed, topics);
        assert!(value.is_some());
        assert_eq!(topics.forget("g").map(|r| r.1), Some(None));
        assert_eq!(topics.of("g"), None);
        assert_eq!(topics.forget("g"), None);
        assert!(records::decode_share_group_topics_value(&[0, 0, 0x7f, 0, 0, 0]).is_err());
    }
}

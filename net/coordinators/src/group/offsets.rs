//! Committed offsets of every group this shard coordinates, and their expiry.
//!
//! The store is the in-memory image of the offset-commit records of the
//! `__consumer_offsets` partitions this shard owns. Every mutation goes through
//! a method that also returns the records to append, so the image and the log
//! cannot drift apart; [`OffsetStore::apply`] is the one way replay writes.

use std::collections::BTreeMap;

use super::assignor::TopicPartition;
use super::records::{self, OffsetCommitValue};

/// A record to append to `__consumer_offsets`: key, and value or tombstone.
pub type Record = (Vec<u8>, Option<Vec<u8>>);

/// The committed offsets of all groups.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OffsetStore {
    groups: BTreeMap<String, BTreeMap<TopicPartition, OffsetCommitValue>>,
}

impl OffsetStore {
    /// Records the commit and returns the record that persists it.
    pub fn commit(&mut self, group: &str, tp: TopicPartition, value: OffsetCommitValue) -> Record {
        let key = records::encode_offset_commit_key(group, &tp.topic, tp.partition);
        let bytes = records::encode_offset_commit_value(&value);
        self.apply(group, tp, Some(value));
        (key, Some(bytes))
    }

    /// Sets (or with `None` removes) one offset; used by commit and by replay.
    pub fn apply(&mut self, group: &str, tp: TopicPartition, value: Option<OffsetCommitValue>) {
        match value {
            Some(v) => {
                self.groups
                    .entry(group.to_string())
                    .or_default()
                    .insert(tp, v);
            }
            None => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.remove(&tp);
                    if g.is_empty() {
                        self.groups.remove(group);
                    }
                }
            }
        }
    }

    /// The committed offset of one partition.
    pub fn get(&self, group: &str, tp: &TopicPartition) -> Option<&OffsetCommitValue> {
        self.groups.get(group).and_then(|g| g.get(tp))
    }

    /// All committed offsets of a group, in partition order.
    pub fn all(&self, group: &str) -> impl Iterator<Item = (&TopicPartition, &OffsetCommitValue)> {
        self.groups.get(group).into_iter().flat_map(|g| g.iter())
    }

    /// Whether the group has any committed offset.
    pub fn has_offsets(&self, group: &str) -> bool {
        self.groups.get(group).is_some_and(|g| !g.is_empty())
    }

    /// Drops the offsets of every group `forgotten` selects, writing
    /// nothing (a coordinator unloading a partition it no longer leads).
    pub fn forget(&mut self, forgotten: &dyn Fn(&str) -> bool) {
        self.groups.retain(|group, _| !forgotten(group));
    }

    /// Group ids that have offsets.
    pub fn group_ids(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }

    /// Removes one offset, returning its tombstone if it existed.
    pub fn delete(&mut self, group: &str, tp: &TopicPartition) -> Option<Record> {
        let existed = self.groups.get(group).is_some_and(|g| g.contains_key(tp));
        if !existed {
            return None;
        }
        self.apply(group, tp.clone(), None);
        Some((
            records::encode_offset_commit_key(group, &tp.topic, tp.partition),
            None,
        ))
    }

    /// Removes every offset of a group, returning the tombstones.
    pub fn delete_group(&mut self, group: &str) -> Vec<Record> {
        let Some(g) = self.groups.remove(group) else {
            return Vec::new();
        };
        g.keys()
            .map(|tp| {
                (
                    records::encode_offset_commit_key(group, &tp.topic, tp.partition),
                    None,
                )
            })
            .collect()
    }

    /// Expires the offsets of `group` whose base timestamp plus retention has
    /// passed, or whose own expiry (OffsetCommit v2–v4) has. `base_timestamp_ms` maps an offset to the time its retention
    /// counts from: Kafka counts from the moment the group became empty when
    /// that is known, else from the commit.
    pub fn expire(
        &mut self,
        group: &str,
        now_ms: i64,
        retention_ms: i64,
        base_timestamp_ms: impl Fn(&OffsetCommitValue) -> i64,
    ) -> Vec<Record> {
        let expired: Vec<TopicPartition> = self
            .all(group)
            .filter(|(_, v)| match v.expire_timestamp_ms {
                // An expiry the commit asked for (OffsetCommit v2–v4).
                Some(expire_ms) => now_ms >= expire_ms,
                None => now_ms - base_timestamp_ms(v) >= retention_ms,
            })
            .map(|(tp, _)| tp.clone())
            .collect();
        expired
            .iter()
            .filter_map(|tp| self.delete(group, tp))
            .collect()
    }

    /// The earliest time an offset of `group` could expire.
    pub fn next_expiry_ms(
        &self,
        group: &str,
        retention_ms: i64,
        base_timestamp_ms: impl Fn(&OffsetCommitValue) -> i64,
    ) -> Option<i64> {
        self.all(group)
            .map(|(_, v)| {
                v.expire_timestamp_ms
                    .unwrap_or_else(|| base_timestamp_ms(v).saturating_add(retention_ms))
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(offset: i64, at_ms: i64) -> OffsetCommitValue {
        OffsetCommitValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: at_ms,
            expire_timestamp_ms: None,
        }
    }

    #[test]
    fn an_expiry_set_by_the_commit_wins_over_the_retention() {
        let mut s = OffsetStore::default();
        let mut early = value(1, 0);
        early.expire_timestamp_ms = Some(30);
        s.commit("g", TopicPartition::new("t", 0), early);
        s.commit("g", TopicPartition::new("t", 1), value(1, 0));
        assert_eq!(
            s.next_expiry_ms("g", 100, |v| v.commit_timestamp_ms),
            Some(30)
        );
        assert_eq!(s.expire("g", 30, 100, |v| v.commit_timestamp_ms).len(), 1);
        assert!(s.get("g", &TopicPartition::new("t", 0)).is_none());
        assert!(s.get("g", &TopicPartition::new("t", 1)).is_some());
    }

    #[test]
    fn commit_fetch_delete() {
        let mut s = OffsetStore::default();
        let (key, v) = s.commit("g", TopicPartition::new("t", 0), value(5, 10));
        assert!(v.is_some());
        assert_eq!(
            s.get("g", &TopicPartition::new("t", 0)).map(|v| v.offset),
            Some(5)
        );
        let tomb = s.delete("g", &TopicPartition::new("t", 0));
        assert_eq!(tomb, Some((key, None)));
        assert!(!s.has_offsets("g"));
        assert_eq!(s.delete("g", &TopicPartition::new("t", 0)), None);
    }

    #[test]
    fn expiry_counts_from_the_base_timestamp() {
        let mut s = OffsetStore::default();
        s.commit("g", TopicPartition::new("t", 0), value(1, 0));
        s.commit("g", TopicPartition::new("t", 1), value(1, 50));
        assert_eq!(
            s.next_expiry_ms("g", 100, |v| v.commit_timestamp_ms),
            Some(100)
        );
        assert!(s.expire("g", 99, 100, |v| v.commit_timestamp_ms).is_empty());
        let gone = s.expire("g", 100, 100, |v| v.commit_timestamp_ms);
        assert_eq!(gone.len(), 1);
        assert!(gone[0].1.is_none());
        assert!(s.get("g", &TopicPartition::new("t", 1)).is_some());
    }
}

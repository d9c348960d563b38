//! The topic table: names, ids, partition counts and configs. **Per shard**:
//! every shard keeps its own copy, changed only by [`TopicUpdate`]s that the
//! controller (shard 0) broadcasts. Each entry carries the controller's
//! version, so an update that arrives late (a reply and a broadcast race on
//! different channels) never overwrites a newer one.

use engine::TopicConfig;
use std::collections::{BTreeMap, HashMap};

/// One topic as the broker knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicEntry {
    /// Topic name.
    pub name: String,
    /// Random id given at creation.
    pub topic_id: [u8; 16],
    /// Number of partitions.
    pub partitions: i32,
    /// Effective config (defaults with the topic's overrides).
    pub config: TopicConfig,
    /// Controller version of this entry.
    pub version: u64,
}

/// A change of the topic table, sent from the controller to every shard.
#[derive(Debug, Clone)]
pub enum TopicUpdate {
    /// Created, grown or reconfigured.
    Upsert(TopicEntry),
    /// Deleted.
    Delete {
        /// Topic name.
        name: String,
        /// Controller version of the deletion.
        version: u64,
    },
}

impl TopicUpdate {
    /// Controller version of the change (0: a validate-only answer, never applied).
    pub fn version(&self) -> u64 {
        match self {
            TopicUpdate::Upsert(entry) => entry.version,
            TopicUpdate::Delete { version, .. } => *version,
        }
    }
}

/// One shard's copy of the topic table.
#[derive(Debug, Default)]
pub struct TopicTable {
    by_name: BTreeMap<String, TopicEntry>,
    by_id: HashMap<[u8; 16], String>,
    /// Last version applied per name, kept after deletion so that a late
    /// upsert of a deleted topic is recognised as stale.
    versions: HashMap<String, u64>,
}

impl TopicTable {
    /// A table from the topics found on disk at start (version 0).
    pub fn from_entries(entries: impl IntoIterator<Item = TopicEntry>) -> Self {
        let mut table = TopicTable::default();
        for entry in entries {
            table.insert(entry);
        }
        table
    }

    fn insert(&mut self, entry: TopicEntry) {
        if let Some(old) = self.by_name.get(&entry.name) {
            self.by_id.remove(&old.topic_id);
        }
        self.by_id.insert(entry.topic_id, entry.name.clone());
        self.versions.insert(entry.name.clone(), entry.version);
        self.by_name.insert(entry.name.clone(), entry);
    }

    /// Applies an update unless a newer one for the same topic was applied; returns whether it changed the table.
    pub fn apply(&mut self, update: &TopicUpdate) -> bool {
        let (name, version) = match update {
            TopicUpdate::Upsert(entry) => (&entry.name, entry.version),
            TopicUpdate::Delete { name, version } => (name, *version),
        };
        if self
            .versions
            .get(name)
            .is_some_and(|&applied| applied >= version)
        {
            return false;
        }
        match update {
            TopicUpdate::Upsert(entry) => {
                // Every entry of a version past 0 is the committed metadata's
                // (the reconciler's copy of its image at that offset), and a
                // topic's partitions there are only ever added, never removed;
                // a topic deleted and created again has another id. Entries
                // found on disk (version 0) are left out: the disk may say
                // anything.
                if let Some(old) = self.by_name.get(name) {
                    if old.version > 0 && old.topic_id == entry.topic_id {
                        assert!(
                            entry.partitions >= old.partitions,
                            "a topic's partition count only grows: {name} had {} partitions at \
                             version {}, the update of version {version} has {}",
                            old.partitions,
                            old.version,
                            entry.partitions
                        );
                    }
                }
                self.insert(entry.clone())
            }
            TopicUpdate::Delete { name, version } => {
                if let Some(old) = self.by_name.remove(name) {
                    self.by_id.remove(&old.topic_id);
                }
                self.versions.insert(name.clone(), *version);
            }
        }
        true
    }

    /// A topic by name.
    pub fn get(&self, name: &str) -> Option<&TopicEntry> {
        self.by_name.get(name)
    }

    /// A topic by id.
    pub fn by_id(&self, topic_id: &[u8; 16]) -> Option<&TopicEntry> {
        self.by_id
            .get(topic_id)
            .and_then(|name| self.by_name.get(name))
    }

    /// All topics in name order.
    pub fn iter(&self) -> impl Iterator<Item = &TopicEntry> {
        self.by_name.values()
    }

    /// Number of topics.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are no topics.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Highest version seen (the controller continues from here).
    pub fn max_version(&self) -> u64 {
        self.versions.values().copied().max().unwrap_or(0)
    }
}

/// Kafka's topic name rule: 1..=249 of `[a-zA-Z0-9._-]`, not `.` or `..`
/// (the engine's, which also names partition directories by it).
pub use engine::types::is_valid_topic_name as valid_topic_name;

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, id: u8, partitions: i32, version: u64) -> TopicEntry {
        TopicEntry {
            name: name.into(),
            topic_id: [id; 16],
            partitions,
            config: TopicConfig::default(),
            version,
        }
    }

    #[test]
    fn stale_updates_are_ignored() {
        let mut table = TopicTable::default();
        assert!(table.apply(&TopicUpdate::Upsert(entry("a", 1, 2, 5))));
        assert!(!table.apply(&TopicUpdate::Upsert(entry("a", 1, 1, 4))));
        assert_eq!(table.get("a").unwrap().partitions, 2);
        assert!(table.apply(&TopicUpdate::Delete {
            name: "a".into(),
            version: 6
        }));
        assert!(!table.apply(&TopicUpdate::Upsert(entry("a", 1, 2, 5))));
        assert!(table.get("a").is_none());
        assert!(table.by_id(&[1; 16]).is_none());
        assert!(table.apply(&TopicUpdate::Upsert(entry("a", 2, 3, 7))));
        assert_eq!(table.by_id(&[2; 16]).unwrap().partitions, 3);
    }

    #[test]
    fn topic_names_follow_kafka() {
        assert!(valid_topic_name("orders_v2.eu-1"));
        assert!(!valid_topic_name(""));
        assert!(!valid_topic_name(".."));
        assert!(!valid_topic_name("a/b"));
        assert!(!valid_topic_name(&"x".repeat(250)));
    }
}

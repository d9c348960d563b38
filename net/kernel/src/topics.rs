//! The topic table: names, ids, partition counts and configs. **Per shard**,
//! and **derived**: the one source of truth for topics is the committed
//! metadata image; each shard builds its table from the image it holds
//! ([`TopicTable::derive`], run when the shard's copy of the image changes)
//! and the table carries that image's offset as its one version. Nothing
//! else writes a table: a new image makes a new table, and a shard swaps
//! its table whole, so a reader never sees half of a change.
//!
//! One thing the image may not know yet: the topics found on disk at start
//! (a single node's data from before it kept metadata). The table keeps
//! their on-disk descriptions and, while the broker adopts them into its
//! metadata log, serves those the image does not name; the image's entry
//! wins as soon as it has one by that name. Outside an adoption they are
//! not served (their files stay for an operator to look at).

use cluster::metadata::{MetadataImage, TopicImage};
use engine::TopicConfig;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

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
}

impl TopicEntry {
    /// The entry of `topic` under the broker defaults `defaults`, or, when
    /// the topic's overrides cannot be applied here, the entry with the
    /// defaults and why.
    pub fn of_image(topic: &TopicImage, defaults: &TopicConfig) -> (TopicEntry, Option<String>) {
        let overrides = topic.configs.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let (config, unusable) = match defaults.with_overrides(overrides) {
            Ok(config) => (config, None),
            Err(e) => (defaults.clone(), Some(e.to_string())),
        };
        let entry = TopicEntry {
            name: topic.name.clone(),
            topic_id: topic.topic_id,
            partitions: topic.partition_count(),
            config,
        };
        (entry, unusable)
    }
}

/// The offset of a table derived from no image yet (the image before its
/// first record has the same).
pub const NO_IMAGE: i64 = -1;

/// One shard's topic table, derived from one metadata image.
#[derive(Debug)]
pub struct TopicTable {
    by_name: BTreeMap<String, TopicEntry>,
    by_id: HashMap<[u8; 16], String>,
    /// The metadata offset of the image this table is derived from.
    offset: i64,
    /// The topics found on disk at start, as their files describe them.
    found_on_disk: Arc<[TopicEntry]>,
    /// The names in `by_name` served from `found_on_disk` (the image does
    /// not name them).
    served_from_disk: BTreeSet<String>,
    /// Whether `found_on_disk` is served where the image has no entry.
    serving_found_on_disk: bool,
}

impl Default for TopicTable {
    /// No image, no topic.
    fn default() -> Self {
        TopicTable {
            by_name: BTreeMap::new(),
            by_id: HashMap::new(),
            offset: NO_IMAGE,
            found_on_disk: Arc::from(Vec::new()),
            served_from_disk: BTreeSet::new(),
            serving_found_on_disk: false,
        }
    }
}

impl TopicTable {
    /// The table before any image: the topics found on disk at start, all
    /// served (a shard does not serve clients before its image has caught
    /// up with the node's metadata log, which replaces this table).
    pub fn found_on_disk(entries: Arc<[TopicEntry]>) -> Self {
        let mut table = TopicTable {
            found_on_disk: entries,
            serving_found_on_disk: true,
            ..TopicTable::default()
        };
        table.add_found_on_disk();
        table
    }

    /// The table of `image`, with `defaults` (the broker's topic defaults in
    /// force under that image) under each topic's overrides; the topics
    /// found on disk that the image does not name are served only with
    /// `serve_found_on_disk` (an adoption under way). A topic whose
    /// overrides cannot be applied gets the defaults; `report` logs that.
    ///
    /// # Panics
    /// When `image` is older than the image of `self`, or a topic has fewer
    /// partitions than in it: images only move forward, and a topic's
    /// partitions are only ever added.
    pub fn derive(
        &self,
        image: &MetadataImage,
        defaults: &TopicConfig,
        serve_found_on_disk: bool,
        report: bool,
    ) -> TopicTable {
        let offset = image.last_applied_offset();
        assert!(
            offset >= self.offset,
            "a topic table is derived from an image at offset {offset}, older than its \
             previous one at {}",
            self.offset
        );
        let mut table = TopicTable {
            offset,
            found_on_disk: self.found_on_disk.clone(),
            serving_found_on_disk: serve_found_on_disk,
            ..TopicTable::default()
        };
        for topic in image.topics().values() {
            let (entry, unusable) = TopicEntry::of_image(topic, defaults);
            if let (true, Some(error)) = (report, unusable) {
                tracing::warn!(topic = %topic.name, %error, "topic config not usable here; broker defaults apply");
            }
            self.assert_grown_from(&entry);
            table.by_id.insert(entry.topic_id, entry.name.clone());
            table.by_name.insert(entry.name.clone(), entry);
        }
        assert_eq!(table.by_name.len(), table.by_id.len());
        if serve_found_on_disk {
            table.add_found_on_disk();
        }
        table
    }

    /// Asserts that `entry`, from an image, has at least the partitions
    /// this table's image gave its topic (the same id; entries served from
    /// disk are left out: the disk may say anything).
    fn assert_grown_from(&self, entry: &TopicEntry) {
        let Some(old) = self.by_name.get(&entry.name) else {
            return;
        };
        if old.topic_id == entry.topic_id && !self.served_from_disk.contains(&entry.name) {
            assert!(
                entry.partitions >= old.partitions,
                "a topic's partition count only grows: {} had {} partitions at offset {}, \
                 the image has {}",
                entry.name,
                old.partitions,
                self.offset,
                entry.partitions
            );
        }
    }

    /// Adds the topics found on disk whose name (and id) no entry has yet.
    fn add_found_on_disk(&mut self) {
        for entry in self.found_on_disk.iter() {
            if self.by_name.contains_key(&entry.name) {
                continue;
            }
            // Old data dirs may have no id (all zeros) for several topics:
            // the first keeps the id, as an image's topic always does.
            self.by_id
                .entry(entry.topic_id)
                .or_insert_with(|| entry.name.clone());
            self.served_from_disk.insert(entry.name.clone());
            self.by_name.insert(entry.name.clone(), entry.clone());
        }
    }

    /// The metadata offset of the image this table is derived from
    /// ([`NO_IMAGE`] before the first).
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// The topics found on disk at start, served or not.
    pub fn found_on_disk_entries(&self) -> &[TopicEntry] {
        &self.found_on_disk
    }

    /// Whether the topics found on disk that the image does not name are
    /// served.
    pub fn serves_found_on_disk(&self) -> bool {
        self.serving_found_on_disk
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
}

/// Kafka's topic name rule: 1..=249 of `[a-zA-Z0-9._-]`, not `.` or `..`
/// (the engine's, which also names partition directories by it).
pub use engine::types::is_valid_topic_name as valid_topic_name;

#[cfg(test)]
mod tests {
    use super::*;
    use cluster::metadata::{MetadataRecord, PartitionRecord, NO_LEADER};

    struct Images {
        image: MetadataImage,
        offset: i64,
    }

    impl Images {
        fn new() -> Self {
            Images {
                image: MetadataImage::new(),
                offset: 0,
            }
        }

        fn apply(&mut self, record: MetadataRecord) {
            self.offset += 1;
            self.image.apply(self.offset, &record).unwrap();
        }

        fn create(&mut self, name: &str, id: u8, partitions: i32) {
            self.apply(MetadataRecord::Topic {
                name: name.into(),
                topic_id: [id; 16],
                configs: BTreeMap::new(),
            });
            self.grow([id; 16], 0, partitions);
        }

        fn grow(&mut self, topic_id: [u8; 16], from: i32, to: i32) {
            for partition in from..to {
                self.apply(MetadataRecord::Partition(PartitionRecord {
                    topic_id,
                    partition,
                    replicas: vec![1],
                    isr: vec![1],
                    // No leader: the image then needs no registered broker.
                    leader: NO_LEADER,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    eligible_leader_replicas: Vec::new(),
                    last_known_elr: Vec::new(),
                }));
            }
        }
    }

    fn on_disk(name: &str, id: u8, partitions: i32) -> TopicEntry {
        TopicEntry {
            name: name.into(),
            topic_id: [id; 16],
            partitions,
            config: TopicConfig::default(),
        }
    }

    #[test]
    fn a_table_is_its_image_at_the_image_offset() {
        let defaults = TopicConfig::default();
        let mut images = Images::new();
        images.create("a", 1, 2);
        let table = TopicTable::default().derive(&images.image, &defaults, false, false);
        assert_eq!(table.offset(), images.image.last_applied_offset());
        assert_eq!(table.get("a").unwrap().partitions, 2);
        assert_eq!(table.by_id(&[1; 16]).unwrap().name, "a");

        images.grow([1; 16], 2, 3);
        images.apply(MetadataRecord::ConfigChange {
            topic: "a".into(),
            key: "retention.ms".into(),
            value: Some("1000".into()),
        });
        let table = table.derive(&images.image, &defaults, false, false);
        let entry = table.get("a").unwrap();
        assert_eq!((entry.partitions, entry.config.retention_ms), (3, 1000));
        assert_eq!(table.offset(), images.offset);

        // Deleted, then created again under another id.
        images.apply(MetadataRecord::RemoveTopic { topic_id: [1; 16] });
        let table = table.derive(&images.image, &defaults, false, false);
        assert!(table.get("a").is_none() && table.by_id(&[1; 16]).is_none());
        images.create("a", 2, 1);
        let table = table.derive(&images.image, &defaults, false, false);
        assert_eq!(table.by_id(&[2; 16]).unwrap().partitions, 1);
        assert!(table.by_id(&[1; 16]).is_none());
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn topics_found_on_disk_are_served_only_in_an_adoption() {
        let defaults = TopicConfig::default();
        let found: Arc<[TopicEntry]> = vec![on_disk("old", 7, 4), on_disk("both", 8, 1)].into();
        let start = TopicTable::found_on_disk(found);
        assert_eq!(start.offset(), NO_IMAGE);
        assert!(start.serves_found_on_disk());
        assert_eq!(start.get("old").unwrap().partitions, 4);

        // The image's entry wins over the disk's by name.
        let mut images = Images::new();
        images.create("both", 9, 2);
        let adopting = start.derive(&images.image, &defaults, true, false);
        assert_eq!(adopting.get("old").unwrap().partitions, 4);
        assert_eq!(adopting.by_id(&[7; 16]).unwrap().name, "old");
        assert_eq!(adopting.get("both").unwrap().topic_id, [9; 16]);
        assert!(adopting.by_id(&[8; 16]).is_none());

        // Past the adoption only the image's topics are served; the disk's
        // are still known.
        let after = adopting.derive(&images.image, &defaults, false, false);
        assert!(after.get("old").is_none() && after.by_id(&[7; 16]).is_none());
        assert_eq!(after.len(), 1);
        assert_eq!(after.found_on_disk_entries().len(), 2);

        // An adopted topic has fewer partitions in the image than on disk
        // here: no growth is asserted against a disk entry.
        images.create("old", 7, 1);
        let adopted = adopting.derive(&images.image, &defaults, true, false);
        assert_eq!(adopted.get("old").unwrap().partitions, 1);
    }

    #[test]
    #[should_panic(expected = "only grows")]
    fn a_topic_losing_partitions_is_a_bug() {
        let defaults = TopicConfig::default();
        let mut images = Images::new();
        images.create("a", 1, 2);
        let table = TopicTable::default().derive(&images.image, &defaults, false, false);
        let mut shrunk = Images::new();
        shrunk.create("a", 1, 1);
        shrunk.offset = images.offset;
        shrunk.create("b", 2, 1);
        let _ = table.derive(&shrunk.image, &defaults, false, false);
    }

    #[test]
    fn unusable_overrides_fall_back_to_the_defaults() {
        let defaults = TopicConfig::default();
        let mut images = Images::new();
        images.create("a", 1, 1);
        images.apply(MetadataRecord::ConfigChange {
            topic: "a".into(),
            key: "retention.ms".into(),
            value: Some("soon".into()),
        });
        let topic = images.image.topic_by_name("a").unwrap();
        let (entry, unusable) = TopicEntry::of_image(topic, &defaults);
        assert!(unusable.is_some());
        assert_eq!(entry.config, defaults);
        let table = TopicTable::default().derive(&images.image, &defaults, false, true);
        assert_eq!(table.get("a").unwrap().config, defaults);
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

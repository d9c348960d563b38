//! Plain types shared across the engine (and by the `net/` crates through `engine::`):
//! the topic-partition key and the names of Kafka's numeric ids.
//!
//! The ids are type aliases, not newtypes: they name what a number means in
//! a signature without changing a single caller in `net/`, which passes the
//! raw integers it decodes from the wire. A newtype can replace an alias
//! later, one at a time, where mixing two of them up becomes a real risk.
//!
//! This module depends on nothing else in the crate, so every module may
//! use it without making an import cycle.

/// An offset in a partition log (Kafka's `int64` offsets; `-1` where Kafka
/// means "none" or "latest").
pub type Offset = i64;
/// A producer id (`-1`: not an idempotent producer).
pub type ProducerId = i64;
/// A producer epoch (`-1`: none).
pub type ProducerEpoch = i16;
/// A producer's sequence number of a batch (`-1`: none).
pub type Sequence = i32;
/// The partition leader epoch written into every batch header.
pub type LeaderEpoch = i32;
/// The epoch of the transaction coordinator that wrote a marker.
pub type CoordinatorEpoch = i32;
/// Kafka's topic UUID, as its 16 bytes.
pub type TopicId = [u8; 16];
/// Milliseconds since the Unix epoch (wall-clock time).
pub type TimestampMs = i64;

/// A topic and one of its partitions.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic-partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// `<topic>-<partition>`, the directory name Kafka uses.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a directory name back (the partition follows the last `-`).
    pub fn parse_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty() || !is_valid_topic_name(topic) {
            return None;
        }
        let partition: i32 = partition.parse().ok()?;
        (partition >= 0 && partition.to_string() == name[topic.len() + 1..])
            .then(|| TopicPartition::new(topic, partition))
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// The directory of the metadata quorum's log in a data dir (KRaft's name):
/// never opened as a partition.
pub const CLUSTER_METADATA_DIR: &str = "__cluster_metadata-0";

/// Kafka's rule: 1–249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn is_valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_names_round_trip() {
        let tp = TopicPartition::new("my-topic", 12);
        assert_eq!(tp.dir_name(), "my-topic-12");
        assert_eq!(TopicPartition::parse_dir_name("my-topic-12"), Some(tp));
        assert_eq!(TopicPartition::parse_dir_name("my-topic-x"), None);
        assert_eq!(TopicPartition::parse_dir_name("t-012"), None);
        assert_eq!(TopicPartition::parse_dir_name("-1"), None);
        assert!(!is_valid_topic_name("a/b"));
        assert!(is_valid_topic_name("__consumer_offsets"));
    }
}

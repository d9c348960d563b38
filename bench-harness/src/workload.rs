//! Workload definitions in the style of the OpenMessaging Benchmark: how many
//! topics and partitions, message sizes and keys, producers and consumers,
//! rate, acks, compression, batching and durations. A workload comes from a
//! named built-in, a YAML or TOML file, and command-line overrides, applied in
//! that order.

use crate::error::{BenchError, Result};
pub use crate::group::Assignor;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Size of each message value. The first 8 bytes of every value carry the
/// send timestamp, so sizes below 8 are rejected by [`Workload::validate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageSize {
    /// Every message has this many bytes.
    Fixed(u32),
    /// Uniformly distributed in `min_bytes..=max_bytes`.
    Uniform { min_bytes: u32, max_bytes: u32 },
}

impl MessageSize {
    /// The largest value this distribution can produce.
    pub fn max_bytes(&self) -> u32 {
        match self {
            MessageSize::Fixed(bytes) => *bytes,
            MessageSize::Uniform { max_bytes, .. } => *max_bytes,
        }
    }

    /// The smallest value this distribution can produce.
    pub fn min_bytes(&self) -> u32 {
        match self {
            MessageSize::Fixed(bytes) => *bytes,
            MessageSize::Uniform { min_bytes, .. } => *min_bytes,
        }
    }

    /// Parses `1024`, `1kb`, or `100..2000` (uniform).
    pub fn parse(text: &str) -> Result<Self> {
        if let Some((low, high)) = text.split_once("..") {
            return Ok(MessageSize::Uniform {
                min_bytes: parse_bytes(low)? as u32,
                max_bytes: parse_bytes(high)? as u32,
            });
        }
        Ok(MessageSize::Fixed(parse_bytes(text)? as u32))
    }
}

/// How message keys, and through them partitions, are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyDistribution {
    /// No key; a sticky partitioner fills one partition's batch, then moves on.
    None,
    /// Keys 0, 1, 2, ... and partition `key % partitions`.
    RoundRobin,
    /// Uniformly random key out of `key_space`.
    Random,
    /// Zipf-distributed key out of `key_space` (a few hot keys).
    Zipf,
}

/// Record batch compression codec, as numbered in the Kafka batch attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// The codec id stored in the low 3 bits of the batch attributes.
    pub fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// Where consumers start reading when they are first assigned a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartOffset {
    Earliest,
    Latest,
}

/// Which consumer group protocol consumers speak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupProtocol {
    /// JoinGroup / SyncGroup / Heartbeat, the leader assigns client-side.
    #[default]
    Classic,
    /// KIP-848 ConsumerGroupHeartbeat, the broker assigns.
    Consumer,
    /// KIP-932 share group: ShareGroupHeartbeat and ShareFetch, every
    /// record accepted; a partition may be shared by several consumers.
    Share,
}

/// One benchmark workload. Field names follow OMB where there is an
/// equivalent; units are last in each name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    pub topics: u32,
    pub partitions_per_topic: u32,
    /// Replicas of each partition; -1 leaves it to the broker's default.
    pub replication_factor: i16,
    /// Topic config `min.insync.replicas` sent with CreateTopics; unset
    /// leaves the broker's default.
    pub min_insync_replicas: Option<u32>,
    pub message_size: MessageSize,
    pub key_distribution: KeyDistribution,
    /// Number of distinct keys for `random` and `zipf`.
    pub key_space: u64,
    pub zipf_exponent: f64,
    pub producers_per_topic: u32,
    pub consumers_per_topic: u32,
    /// Total target rate over all producers; 0 means as fast as possible.
    pub producer_rate_msgs_per_s: u64,
    /// -1 (all), 0 or 1.
    pub acks: i16,
    pub compression: Compression,
    pub batch_size_bytes: u32,
    pub linger_ms: u64,
    /// Produce requests in flight per producer before it waits.
    pub max_in_flight_per_producer: u32,
    pub warmup_duration_s: u64,
    pub test_duration_s: u64,
    /// When non-zero, consumers wait until this much is produced, then drain.
    pub consumer_backlog_size_mb: u64,
    pub consumer_start: StartOffset,
    pub fetch_max_wait_ms: i32,
    pub fetch_max_bytes: i32,
    pub fetch_partition_max_bytes: i32,
    pub topic_prefix: String,
    /// Consumers join this group instead of splitting partitions directly.
    pub consumer_group: Option<String>,
    /// Client-side assignor of a classic group.
    pub assignor: Assignor,
    pub group_protocol: GroupProtocol,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            name: "custom".to_string(),
            topics: 1,
            partitions_per_topic: 16,
            replication_factor: 1,
            min_insync_replicas: None,
            message_size: MessageSize::Fixed(1024),
            key_distribution: KeyDistribution::None,
            key_space: 10_000,
            zipf_exponent: 1.0,
            producers_per_topic: 1,
            consumers_per_topic: 1,
            producer_rate_msgs_per_s: 50_000,
            acks: -1,
            compression: Compression::None,
            batch_size_bytes: 128 * 1024,
            linger_ms: 1,
            max_in_flight_per_producer: 32,
            warmup_duration_s: 5,
            test_duration_s: 30,
            consumer_backlog_size_mb: 0,
            consumer_start: StartOffset::Latest,
            fetch_max_wait_ms: 100,
            fetch_max_bytes: 64 * 1024 * 1024,
            fetch_partition_max_bytes: 4 * 1024 * 1024,
            topic_prefix: "rill-bench".to_string(),
            consumer_group: None,
            assignor: Assignor::Range,
            group_protocol: GroupProtocol::Classic,
        }
    }
}

/// Names of the built-in workloads, for `--help` and error messages.
pub const BUILTIN_NAMES: [&str; 3] = [
    "1-topic-16-partitions-1kb",
    "max-rate-100b",
    "backlog-drain",
];

impl Workload {
    /// A named built-in workload.
    pub fn builtin(name: &str) -> Result<Workload> {
        let base = Workload {
            name: name.to_string(),
            ..Workload::default()
        };
        let workload = match name {
            // OMB's classic: 1 topic, 16 partitions, 1 KiB, 50k msg/s.
            "1-topic-16-partitions-1kb" => Workload {
                warmup_duration_s: 10,
                test_duration_s: 60,
                ..base
            },
            // Saturation: small messages, as fast as the broker takes them.
            "max-rate-100b" => Workload {
                message_size: MessageSize::Fixed(100),
                producers_per_topic: 4,
                consumers_per_topic: 4,
                producer_rate_msgs_per_s: 0,
                warmup_duration_s: 10,
                test_duration_s: 60,
                ..base
            },
            // Build a 1 GiB backlog with consumers paused, then drain it while
            // producers keep producing.
            "backlog-drain" => Workload {
                consumers_per_topic: 4,
                producer_rate_msgs_per_s: 100_000,
                consumer_backlog_size_mb: 1024,
                consumer_start: StartOffset::Earliest,
                warmup_duration_s: 0,
                test_duration_s: 120,
                ..base
            },
            other => {
                return Err(BenchError::Workload(format!(
                    "unknown built-in workload {other:?}; known: {}",
                    BUILTIN_NAMES.join(", ")
                )))
            }
        };
        Ok(workload)
    }

    /// Parses YAML or TOML text. TOML is chosen by `format_hint == "toml"`.
    pub fn parse(text: &str, format_hint: &str) -> Result<Workload> {
        let workload: Workload = if format_hint.eq_ignore_ascii_case("toml") {
            toml::from_str(text).map_err(|error| BenchError::Workload(error.to_string()))?
        } else {
            serde_yaml::from_str(text).map_err(|error| BenchError::Workload(error.to_string()))?
        };
        workload.validate()?;
        Ok(workload)
    }

    /// Reads a `.yaml`/`.yml`/`.toml` workload file.
    pub fn from_file(path: &Path) -> Result<Workload> {
        let text = std::fs::read_to_string(path)?;
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("yaml");
        Workload::parse(&text, extension).map_err(|error| BenchError::WorkloadFile {
            path: path.display().to_string(),
            message: error.to_string(),
        })
    }

    /// Topic configs CreateTopics sends for this workload.
    pub fn topic_configs(&self) -> Vec<(String, String)> {
        self.min_insync_replicas
            .map(|n| ("min.insync.replicas".to_string(), n.to_string()))
            .into_iter()
            .collect()
    }

    /// Checks the invariants the load generator relies on.
    pub fn validate(&self) -> Result<()> {
        let fail = |message: &str| Err(BenchError::Workload(message.to_string()));
        if self.topics == 0 || self.partitions_per_topic == 0 {
            return fail("topics and partitions_per_topic must be at least 1");
        }
        if self.message_size.min_bytes() < 8 {
            return fail("message_size must be at least 8 bytes (the send timestamp)");
        }
        if self.message_size.min_bytes() > self.message_size.max_bytes() {
            return fail("message_size: min_bytes > max_bytes");
        }
        if self.message_size.max_bytes() > 16 * 1024 * 1024 {
            return fail("message_size above 16 MiB");
        }
        if self.replication_factor == 0 || self.replication_factor < -1 {
            return fail("replication_factor must be at least 1 (or -1, the broker's default)");
        }
        if self.min_insync_replicas == Some(0) {
            return fail("min_insync_replicas must be at least 1");
        }
        if !matches!(self.acks, -1..=1) {
            return fail("acks must be -1 (all), 0 or 1");
        }
        if self.producers_per_topic == 0 && self.consumers_per_topic == 0 {
            return fail("need at least one producer or consumer");
        }
        if self.max_in_flight_per_producer == 0 {
            return fail("max_in_flight_per_producer must be at least 1");
        }
        if self.key_space == 0 || self.key_space > 10_000_000 {
            return fail("key_space must be in 1..=10000000");
        }
        if self.zipf_exponent <= 0.0 || !self.zipf_exponent.is_finite() {
            return fail("zipf_exponent must be positive");
        }
        if self.batch_size_bytes < self.message_size.max_bytes() {
            return fail("batch_size_bytes must hold at least one message");
        }
        if self.consumer_group.as_deref().is_some_and(str::is_empty) {
            return fail("consumer_group must not be empty");
        }
        if self.test_duration_s == 0 {
            return fail("test_duration_s must be at least 1");
        }
        Ok(())
    }
}

/// Parses a byte count with an optional `b`, `kb`/`k`, `mb`/`m`, `gb`/`g`
/// suffix (binary multiples: `1kb` is 1024).
pub fn parse_bytes(text: &str) -> Result<u64> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, multiplier) = if let Some(rest) = lower
        .strip_suffix("kib")
        .or(lower.strip_suffix("kb"))
        .or(lower.strip_suffix('k'))
    {
        (rest, 1024)
    } else if let Some(rest) = lower
        .strip_suffix("mib")
        .or(lower.strip_suffix("mb"))
        .or(lower.strip_suffix('m'))
    {
        (rest, 1024 * 1024)
    } else if let Some(rest) = lower
        .strip_suffix("gib")
        .or(lower.strip_suffix("gb"))
        .or(lower.strip_suffix('g'))
    {
        (rest, 1024 * 1024 * 1024)
    } else if let Some(rest) = lower.strip_suffix('b') {
        (rest, 1)
    } else {
        (lower.as_str(), 1)
    };
    digits
        .trim()
        .parse::<u64>()
        .map(|value| value * multiplier)
        .map_err(|_| BenchError::Workload(format!("not a byte count: {text:?}")))
}

/// Parses `all`, `-1`, `0`, `1`.
pub fn parse_acks(text: &str) -> Result<i16> {
    match text {
        "all" | "-1" => Ok(-1),
        "0" => Ok(0),
        "1" => Ok(1),
        other => Err(BenchError::Workload(format!(
            "acks must be all, 0 or 1, not {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid() {
        for name in BUILTIN_NAMES {
            let workload = Workload::builtin(name).unwrap();
            workload.validate().unwrap();
            assert_eq!(workload.name, name);
        }
        assert_eq!(
            Workload::builtin("max-rate-100b")
                .unwrap()
                .producer_rate_msgs_per_s,
            0
        );
        assert_eq!(
            Workload::builtin("backlog-drain")
                .unwrap()
                .consumer_backlog_size_mb,
            1024
        );
        assert!(Workload::builtin("nope").is_err());
    }

    #[test]
    fn parses_yaml_with_defaults() {
        let text = "name: y\ntopics: 2\npartitions_per_topic: 4\nmessage_size: 512\nkey_distribution: zipf\nacks: 1\ncompression: lz4\n";
        let workload = Workload::parse(text, "yaml").unwrap();
        assert_eq!(workload.topics, 2);
        assert_eq!(workload.partitions_per_topic, 4);
        assert_eq!(workload.message_size, MessageSize::Fixed(512));
        assert_eq!(workload.key_distribution, KeyDistribution::Zipf);
        assert_eq!(workload.compression, Compression::Lz4);
        assert_eq!(workload.acks, 1);
        // Unset fields keep their defaults.
        assert_eq!(workload.linger_ms, Workload::default().linger_ms);
    }

    #[test]
    fn parses_toml_with_uniform_size() {
        let text = "name = \"t\"\nproducers_per_topic = 3\nproducer_rate_msgs_per_s = 0\n[message_size]\nmin_bytes = 100\nmax_bytes = 2000\n";
        let workload = Workload::parse(text, "toml").unwrap();
        assert_eq!(workload.producers_per_topic, 3);
        assert_eq!(workload.producer_rate_msgs_per_s, 0);
        assert_eq!(
            workload.message_size,
            MessageSize::Uniform {
                min_bytes: 100,
                max_bytes: 2000
            }
        );
    }

    #[test]
    fn rejects_bad_workloads() {
        assert!(Workload::parse("message_size: 4\n", "yaml").is_err());
        assert!(Workload::parse("acks: 7\n", "yaml").is_err());
        assert!(Workload::parse("no_such_field: 1\n", "yaml").is_err());
        assert!(Workload::parse("topics: 0\n", "yaml").is_err());
        assert!(Workload::parse("replication_factor: 0\n", "yaml").is_err());
        assert!(Workload::parse("min_insync_replicas: 0\n", "yaml").is_err());
    }

    #[test]
    fn parses_group_fields() {
        let text = "consumer_group: g1\nassignor: roundrobin\ngroup_protocol: consumer\n";
        let workload = Workload::parse(text, "yaml").unwrap();
        assert_eq!(workload.consumer_group.as_deref(), Some("g1"));
        assert_eq!(workload.assignor, Assignor::RoundRobin);
        assert_eq!(workload.group_protocol, GroupProtocol::Consumer);
        let text = "consumer_group = \"g2\"\nassignor = \"sticky\"\n";
        let workload = Workload::parse(text, "toml").unwrap();
        assert_eq!(workload.assignor, Assignor::Sticky);
        assert_eq!(workload.group_protocol, GroupProtocol::Classic);
        assert_eq!(Workload::default().consumer_group, None);
        assert!(Workload::parse("assignor: cooperative\n", "yaml").is_err());
        let share = Workload::parse("group_protocol: share\n", "yaml").unwrap();
        assert_eq!(share.group_protocol, GroupProtocol::Share);
        assert!(Workload::parse("consumer_group: ''\n", "yaml").is_err());
    }

    #[test]
    fn replication_fields_and_topic_configs() {
        let workload =
            Workload::parse("replication_factor: 3\nmin_insync_replicas: 2\n", "yaml").unwrap();
        assert_eq!(workload.replication_factor, 3);
        assert_eq!(
            workload.topic_configs(),
            vec![("min.insync.replicas".to_string(), "2".to_string())]
        );
        assert!(Workload::default().topic_configs().is_empty());
    }

    #[test]
    fn yaml_round_trip() {
        let workload = Workload::builtin("backlog-drain").unwrap();
        let text = serde_yaml::to_string(&workload).unwrap();
        assert_eq!(Workload::parse(&text, "yaml").unwrap(), workload);
    }

    #[test]
    fn shipped_workload_files_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        let mut seen = 0;
        // Files only: `workloads/omb/` holds OMB's format (the omb module's
        // tests read it).
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                continue;
            }
            let workload = Workload::from_file(&path).unwrap();
            workload.validate().unwrap();
            seen += 1;
        }
        assert!(seen >= 2);
        let classic = Workload::from_file(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/1-topic-16-partitions-1kb.yaml"),
        )
        .unwrap();
        assert_eq!(
            classic,
            Workload::builtin("1-topic-16-partitions-1kb").unwrap()
        );
    }

    #[test]
    fn parses_sizes_and_acks() {
        assert_eq!(parse_bytes("1kb").unwrap(), 1024);
        assert_eq!(parse_bytes("4k").unwrap(), 4096);
        assert_eq!(parse_bytes("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("2g").unwrap(), 2 << 30);
        assert_eq!(parse_bytes("1GB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("100").unwrap(), 100);
        assert!(parse_bytes("x").is_err());
        assert_eq!(
            MessageSize::parse("100..200").unwrap(),
            MessageSize::Uniform {
                min_bytes: 100,
                max_bytes: 200
            }
        );
        assert_eq!(parse_acks("all").unwrap(), -1);
        assert!(parse_acks("2").is_err());
    }
}

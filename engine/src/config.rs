//! Settings: per-topic configs with Kafka's names and defaults, and engine-wide settings.

use crate::batch::CompressionLevels;
use crate::clock::Clock;
use crate::error::EngineError;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub mod kafka_topic_configs;

use kafka_topic_configs::spec_of;

/// How appends become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// An append resolves after an fdatasync that covers it (the default: an
    /// acknowledged message survives power loss).
    Fsync,
    /// Kafka's `flush.ms` / `flush.messages`: sync when either is reached; an
    /// append resolves once written.
    Interval,
    /// No fsync at all (Kafka's default); an append resolves once written.
    Os,
}

impl std::str::FromStr for FlushPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fsync" => Ok(FlushPolicy::Fsync),
            "interval" => Ok(FlushPolicy::Interval),
            "os" => Ok(FlushPolicy::Os),
            other => Err(format!(
                "unknown flush policy '{other}' (expected fsync, interval or os)"
            )),
        }
    }
}

impl std::fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FlushPolicy::Fsync => "fsync",
            FlushPolicy::Interval => "interval",
            FlushPolicy::Os => "os",
        })
    }
}

/// Engine-wide settings of one broker (the same on every shard).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Root of the partition directories: the first of Kafka's `log.dirs`,
    /// which also keeps the broker-wide files.
    pub data_dir: PathBuf,
    /// The other data dirs of `log.dirs` (JBOD), in order: partitions are
    /// spread over `data_dir` and these (see [`crate::log_dirs`]).
    pub more_data_dirs: Vec<PathBuf>,
    /// Partitions per data dir, shared by the shards (placement).
    pub dir_load: crate::log_dirs::DirLoad,
    /// Durability policy of appends.
    pub flush_policy: FlushPolicy,
    /// Defaults for topics that do not override a setting.
    pub topic_defaults: TopicConfig,
    /// Bytes of recent batches each shard keeps in memory for tailing
    /// readers (`rill.batch_cache_bytes`); see `batch_cache_max_bytes`.
    pub batch_cache_bytes: usize,
    /// `rill.cache.batch.max.bytes`: the same cap for the whole broker,
    /// split evenly across the shards; when set it wins over the per-shard
    /// `batch_cache_bytes`.
    pub batch_cache_max_bytes: Option<u64>,
    /// `rill.cache.index.max.bytes` (default 64 MiB): bytes of sealed
    /// segments' indexes the broker keeps in memory, split evenly across
    /// the shards (see [`crate::index_cache`]).
    pub index_cache_bytes: u64,
    /// How many partitions a shard opens concurrently at start.
    pub open_concurrency: usize,
    /// Preallocation step of the segment files, in bytes.
    pub preallocate_bytes: u64,
    /// `rill.segment.recycle.max`: how many deleted segments' files each
    /// partition keeps for its next segments (`recycle.rs`); 0 turns
    /// recycling off.
    pub segment_recycle_max: usize,
    /// How often the retention/compaction task runs, in ms (Kafka's `log.retention.check.interval.ms`).
    pub retention_check_interval_ms: u64,
    /// Kafka's `producer.id.expiration.ms` (default 1 day): a partition
    /// forgets an idempotent producer idle this long (one with an open
    /// transaction is kept), checked on the retention tick.
    pub producer_id_expiration_ms: i64,
    /// Streamed writes (see `stream_writer`): once this many bytes of small
    /// appends wait for the writer, their whole blocks are written at once
    /// from the shard's stream-writer thread. 0 turns streaming off.
    pub stream_min_bytes: usize,
    /// Where the engine's wall-clock time comes from (see [`crate::clock`]):
    /// the system clock, or a manual one a test moves.
    pub clock: Clock,
    /// Appends are refused (`KAFKA_STORAGE_ERROR`) while the data dir's
    /// file system has less free space than this (see
    /// [`crate::disk_space`]); `None`: 1 GiB capped at 5% of the file
    /// system; `Some(0)`: never.
    pub min_free_bytes: Option<u64>,
    /// Kafka's `log.cleaner.dedupe.buffer.size` (default 128 MiB): the
    /// memory of one compaction pass's key map (see
    /// [`crate::compaction::offset_map`]); each shard runs one pass at a time.
    pub cleaner_dedupe_buffer_bytes: usize,
    /// Kafka's `log.cleaner.io.max.bytes.per.second`: the cleaner's rate
    /// of bytes read plus bytes written, at most (`None`: unthrottled,
    /// Kafka's default).
    pub cleaner_io_max_bytes_per_second: Option<f64>,
    /// The I/O sizes in use (see [`crate::io_sizing`]): the shard's
    /// in-flight write budget and the fetch scan's read size; the stream
    /// chunk is `stream_min_bytes`, set from the same derivation by `rill
    /// serve` unless `rill.stream_min_bytes` is given.
    pub io: crate::io_sizing::IoSizing,
}

impl EngineConfig {
    /// Every data dir, `data_dir` first.
    pub fn data_dirs(&self) -> Vec<PathBuf> {
        std::iter::once(self.data_dir.clone())
            .chain(self.more_data_dirs.iter().cloned())
            .collect()
    }

    /// Defaults for a data dir.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        EngineConfig {
            data_dir: data_dir.into(),
            more_data_dirs: Vec::new(),
            dir_load: crate::log_dirs::DirLoad::default(),
            flush_policy: FlushPolicy::Fsync,
            topic_defaults: TopicConfig::default(),
            batch_cache_bytes: 64 << 20,
            batch_cache_max_bytes: None,
            index_cache_bytes: 64 << 20,
            open_concurrency: 16,
            preallocate_bytes: 32 << 20,
            segment_recycle_max: 2,
            retention_check_interval_ms: 300_000,
            producer_id_expiration_ms: 86_400_000,
            stream_min_bytes: crate::io_sizing::defaults::STREAM_CHUNK_BYTES,
            clock: Clock::system(),
            min_free_bytes: None,
            cleaner_dedupe_buffer_bytes: 128 << 20,
            cleaner_io_max_bytes_per_second: None,
            io: crate::io_sizing::IoSizing::default(),
        }
    }
}

/// `cleanup.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// `delete`: old segments are removed by time/size.
    pub delete: bool,
    /// `compact`: the newest record per key is kept.
    pub compact: bool,
    /// Whether the value listed `compact` before `delete`: Kafka keeps a
    /// list config as it was given and describes it so (an APPEND of
    /// `compact` to `delete` reads `delete,compact`).
    pub compact_first: bool,
}

/// A topic's tiered-storage settings (KIP-405, Kafka's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteLogSettings {
    /// `remote.storage.enable`: sealed segments are uploaded to the object
    /// store, and the local log keeps only `local.retention.*`.
    pub storage_enable: bool,
    /// `remote.log.copy.disable` (KIP-950): uploads stop; what is remote
    /// stays readable, and local segments go by `retention.*` again.
    pub copy_disable: bool,
    /// `remote.log.delete.on.disable`: turning `remote.storage.enable` off
    /// deletes the remote data (Kafka refuses turning it off without it).
    pub delete_on_disable: bool,
    /// `local.retention.ms` (-2: `retention.ms`).
    pub local_retention_ms: i64,
    /// `local.retention.bytes` (-2: `retention.bytes`).
    pub local_retention_bytes: i64,
}

impl Default for RemoteLogSettings {
    fn default() -> Self {
        RemoteLogSettings {
            storage_enable: false,
            copy_disable: false,
            delete_on_disable: false,
            local_retention_ms: -2,
            local_retention_bytes: -2,
        }
    }
}

/// Per-topic settings, Kafka's names in [`TopicConfig::NAMES`].
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    /// `segment.bytes` (default 1 GiB).
    pub segment_bytes: u64,
    /// `segment.ms` (default 7 days).
    pub segment_ms: i64,
    /// `segment.index.bytes` (default 10 MiB): a full index rolls the segment.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes` (default 4096).
    pub index_interval_bytes: u64,
    /// `retention.ms` (default 7 days; -1 keeps forever).
    pub retention_ms: i64,
    /// `retention.bytes` (default -1: no limit).
    pub retention_bytes: i64,
    /// `cleanup.policy` (default delete).
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms` (default 1 day): how long tombstones survive compaction.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms` (default 0): data younger than this is not
    /// compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms` (default Long.MAX): dirty data older than
    /// this is compacted whatever the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio` (default 0.5): a log is compacted once
    /// this share of its cleanable bytes is dirty.
    pub min_cleanable_dirty_ratio: f64,
    /// `max.message.bytes` (default 1048588).
    pub max_message_bytes: u64,
    /// `flush.messages` (interval policy).
    pub flush_messages: u64,
    /// `flush.ms` (interval policy).
    pub flush_ms: u64,
    /// `message.timestamp.type`: CreateTime (false) or LogAppendTime (true).
    pub log_append_time: bool,
    /// `message.timestamp.before.max.ms` (default Long.MAX): how far in the
    /// past a CreateTime record's timestamp may lie (KIP-937).
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms` (default 1 hour since Kafka 4.0,
    /// KIP-1030): how far in the future a CreateTime record's timestamp may lie.
    pub timestamp_after_max_ms: i64,
    /// `compression.type`: producer, uncompressed, gzip, snappy, lz4, zstd.
    /// A codec makes the log rewrite producers' batches in another codec.
    pub compression_type: String,
    /// KIP-390 `compression.gzip.level`, `compression.lz4.level` and
    /// `compression.zstd.level`, used when the log recompresses.
    pub compression_levels: CompressionLevels,
    /// `min.insync.replicas` (default 1).
    pub min_insync_replicas: i32,
    /// `unclean.leader.election.enable` (default false).
    pub unclean_leader_election_enable: bool,
    /// Tiered storage (KIP-405): `remote.storage.enable` and what stays local.
    pub remote: RemoteLogSettings,
    /// `leader.replication.throttled.replicas` and
    /// `follower.replication.throttled.replicas` (KIP-73): `*` or
    /// `partition:broker` pairs, normalized; the brokers' replication
    /// throttles apply to the partitions they name.
    pub throttled_replicas: ThrottledReplicas,
    /// The configs rill accepts but does not act on (see
    /// [`kafka_topic_configs`]), by name, every one present with its value.
    pub inert: BTreeMap<&'static str, String>,
}

/// A topic's replication-throttled replicas, each list as its config
/// holds it (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThrottledReplicas {
    /// `leader.replication.throttled.replicas`.
    pub leader: String,
    /// `follower.replication.throttled.replicas`.
    pub follower: String,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3_600_000,
            segment_index_bytes: 10 << 20,
            index_interval_bytes: 4096,
            retention_ms: 7 * 24 * 3_600_000,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy {
                delete: true,
                compact: false,
                compact_first: false,
            },
            delete_retention_ms: 24 * 3_600_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            max_message_bytes: 1_048_588,
            flush_messages: i64::MAX as u64,
            flush_ms: i64::MAX as u64,
            log_append_time: false,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: 3_600_000,
            compression_type: String::from("producer"),
            compression_levels: CompressionLevels::default(),
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            remote: RemoteLogSettings::default(),
            throttled_replicas: ThrottledReplicas::default(),
            inert: kafka_topic_configs::SPECS
                .iter()
                .filter(|s| !s.applied)
                .map(|s| (s.name, s.default.to_string()))
                .collect(),
        }
    }
}

fn parse_num<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, EngineError> {
    value
        .trim()
        .parse::<T>()
        .map_err(|_| invalid(name, value, "not a number"))
}

fn invalid(name: &str, value: &str, reason: &str) -> EngineError {
    EngineError::InvalidConfig {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

impl TopicConfig {
    /// Every topic-level config name of Kafka 4.x, sorted (the table is
    /// [`kafka_topic_configs::SPECS`]); those rill does not act on are
    /// accepted and described all the same.
    pub const NAMES: &'static [&'static str] = &kafka_topic_configs::NAMES;

    /// Sets one config by its Kafka name, validating the value.
    /// Every name is first checked against Kafka's type and range; an
    /// unknown name is refused (Kafka answers INVALID_CONFIG too).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), EngineError> {
        let Some(spec) = spec_of(name) else {
            return Err(invalid(name, value, "unknown topic config"));
        };
        let value = kafka_topic_configs::validate(spec, value)?;
        let value = value.as_str();
        if !spec.applied {
            kafka_topic_configs::warn_inert_once(spec, value);
            self.inert.insert(spec.name, value.to_string());
            return Ok(());
        }
        match name {
            "leader.replication.throttled.replicas" => {
                self.throttled_replicas.leader = value.to_string()
            }
            "follower.replication.throttled.replicas" => {
                self.throttled_replicas.follower = value.to_string()
            }
            "segment.bytes" => self.segment_bytes = at_least(name, value, 14u64)?,
            "segment.ms" => self.segment_ms = positive(name, value)?,
            "segment.index.bytes" => self.segment_index_bytes = at_least(name, value, 8u64)?,
            "index.interval.bytes" => self.index_interval_bytes = parse_num(name, value)?,
            "retention.ms" => self.retention_ms = at_least_minus_one(name, value)?,
            "retention.bytes" => self.retention_bytes = at_least_minus_one(name, value)?,
            "cleanup.policy" => self.cleanup_policy = cleanup_policy(name, value)?,
            "delete.retention.ms" => self.delete_retention_ms = non_negative(name, value)?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = non_negative(name, value)?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = positive(name, value)?,
            "min.cleanable.dirty.ratio" => self.min_cleanable_dirty_ratio = ratio(name, value)?,
            "max.message.bytes" => self.max_message_bytes = parse_num(name, value)?,
            "flush.messages" => self.flush_messages = parse_num(name, value)?,
            "flush.ms" => self.flush_ms = parse_num(name, value)?,
            "message.timestamp.type" => self.log_append_time = log_append_time(name, value)?,
            "message.timestamp.before.max.ms" => {
                self.timestamp_before_max_ms = non_negative(name, value)?
            }
            "message.timestamp.after.max.ms" => {
                self.timestamp_after_max_ms = non_negative(name, value)?
            }
            "compression.type" => self.compression_type = compression_type(name, value)?,
            "compression.gzip.level" => self.compression_levels.gzip = gzip_level(name, value)?,
            "compression.lz4.level" => {
                self.compression_levels.lz4 = in_range(name, value, CompressionLevels::LZ4_RANGE)?
            }
            "compression.zstd.level" => {
                self.compression_levels.zstd = in_range(name, value, CompressionLevels::ZSTD_RANGE)?
            }
            "min.insync.replicas" => self.min_insync_replicas = at_least(name, value, 1i32)?,
            "unclean.leader.election.enable" => {
                self.unclean_leader_election_enable = parse_num(name, value)?
            }
            "remote.storage.enable" => self.remote.storage_enable = parse_num(name, value)?,
            "remote.log.copy.disable" => self.remote.copy_disable = parse_num(name, value)?,
            "remote.log.delete.on.disable" => {
                self.remote.delete_on_disable = parse_num(name, value)?
            }
            "local.retention.ms" => self.remote.local_retention_ms = parse_num(name, value)?,
            "local.retention.bytes" => self.remote.local_retention_bytes = parse_num(name, value)?,
            _ => return Err(invalid(name, value, "unknown topic config")),
        }
        Ok(())
    }

    /// The current value of a config by its Kafka name.
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "segment.index.bytes" => self.segment_index_bytes.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "cleanup.policy" => {
                let policy = self.cleanup_policy;
                let mut parts = Vec::new();
                if policy.delete {
                    parts.push("delete");
                }
                if policy.compact {
                    let at = if policy.compact_first { 0 } else { parts.len() };
                    parts.insert(at, "compact");
                }
                parts.join(",")
            }
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "max.compaction.lag.ms" => self.max_compaction_lag_ms.to_string(),
            "min.cleanable.dirty.ratio" => self.min_cleanable_dirty_ratio.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "flush.messages" => self.flush_messages.to_string(),
            "flush.ms" => self.flush_ms.to_string(),
            "message.timestamp.type" => if self.log_append_time {
                "LogAppendTime"
            } else {
                "CreateTime"
            }
            .to_string(),
            "message.timestamp.before.max.ms" => self.timestamp_before_max_ms.to_string(),
            "message.timestamp.after.max.ms" => self.timestamp_after_max_ms.to_string(),
            "compression.type" => self.compression_type.clone(),
            "leader.replication.throttled.replicas" => self.throttled_replicas.leader.clone(),
            "follower.replication.throttled.replicas" => self.throttled_replicas.follower.clone(),
            "compression.gzip.level" => self.compression_levels.gzip.to_string(),
            "compression.lz4.level" => self.compression_levels.lz4.to_string(),
            "compression.zstd.level" => self.compression_levels.zstd.to_string(),
            "min.insync.replicas" => self.min_insync_replicas.to_string(),
            "unclean.leader.election.enable" => self.unclean_leader_election_enable.to_string(),
            "remote.storage.enable" => self.remote.storage_enable.to_string(),
            "remote.log.copy.disable" => self.remote.copy_disable.to_string(),
            "remote.log.delete.on.disable" => self.remote.delete_on_disable.to_string(),
            "local.retention.ms" => self.remote.local_retention_ms.to_string(),
            "local.retention.bytes" => self.remote.local_retention_bytes.to_string(),
            _ => return self.inert.get(name).cloned(),
        })
    }

    /// Applies `overrides` on top of `self`, in order.
    pub fn with_overrides<'a>(
        &self,
        overrides: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<TopicConfig, EngineError> {
        let mut config = self.clone();
        for (name, value) in overrides {
            config.set(name, value)?;
        }
        Ok(config)
    }

    /// The configs whose value differs from `defaults`, as `name=value` pairs
    /// (what is persisted beside a partition).
    pub fn overrides_against(&self, defaults: &TopicConfig) -> Vec<(String, String)> {
        Self::NAMES
            .iter()
            .filter_map(|name| {
                let mine = self.get(name)?;
                (defaults.get(name).as_deref() != Some(mine.as_str()))
                    .then(|| (name.to_string(), mine))
            })
            .collect()
    }
}

fn positive(name: &str, value: &str) -> Result<i64, EngineError> {
    let v: i64 = parse_num(name, value)?;
    if v < 1 {
        return Err(invalid(name, value, "must be positive"));
    }
    Ok(v)
}

fn non_negative(name: &str, value: &str) -> Result<i64, EngineError> {
    let v: i64 = parse_num(name, value)?;
    if v < 0 {
        return Err(invalid(name, value, "must not be negative"));
    }
    Ok(v)
}

fn in_range(
    name: &str,
    value: &str,
    range: std::ops::RangeInclusive<i32>,
) -> Result<i32, EngineError> {
    let v: i32 = parse_num(name, value)?;
    if !range.contains(&v) {
        let reason = format!("must be in {}..={}", range.start(), range.end());
        return Err(invalid(name, value, &reason));
    }
    Ok(v)
}

/// A number of at least `min`.
fn at_least<T>(name: &str, value: &str, min: T) -> Result<T, EngineError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    let v: T = parse_num(name, value)?;
    if v < min {
        return Err(invalid(name, value, &format!("must be at least {min}")));
    }
    Ok(v)
}

/// `cleanup.policy`: `delete` and/or `compact`, comma-separated.
fn cleanup_policy(name: &str, value: &str) -> Result<CleanupPolicy, EngineError> {
    let mut policy = CleanupPolicy {
        delete: false,
        compact: false,
        compact_first: false,
    };
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part {
            "delete" => policy.delete = true,
            "compact" => {
                policy.compact_first = !policy.delete;
                policy.compact = true;
            }
            _ => return Err(invalid(name, value, "expected delete and/or compact")),
        }
    }
    Ok(policy)
}

/// A ratio, between 0 and 1 inclusive.
fn ratio(name: &str, value: &str) -> Result<f64, EngineError> {
    let v: f64 = parse_num(name, value)?;
    if !(0.0..=1.0).contains(&v) {
        return Err(invalid(name, value, "must be between 0 and 1"));
    }
    Ok(v)
}

/// `message.timestamp.type`: whether it is `LogAppendTime`.
fn log_append_time(name: &str, value: &str) -> Result<bool, EngineError> {
    match value {
        "CreateTime" => Ok(false),
        "LogAppendTime" => Ok(true),
        _ => Err(invalid(name, value, "expected CreateTime or LogAppendTime")),
    }
}

/// `compression.type`: `producer`, `uncompressed` or a codec's name.
fn compression_type(name: &str, value: &str) -> Result<String, EngineError> {
    match value {
        "producer" | "uncompressed" | "gzip" | "snappy" | "lz4" | "zstd" => Ok(value.to_string()),
        _ => Err(invalid(name, value, "unknown compression type")),
    }
}

/// `compression.gzip.level`: -1 (the codec's default) or 1..=9.
fn gzip_level(name: &str, value: &str) -> Result<i32, EngineError> {
    let v: i32 = parse_num(name, value)?;
    if !CompressionLevels::gzip_level_valid(v) {
        return Err(invalid(name, value, "must be -1 or 1..=9"));
    }
    Ok(v)
}

fn at_least_minus_one(name: &str, value: &str) -> Result<i64, EngineError> {
    let v: i64 = parse_num(name, value)?;
    if v < -1 {
        return Err(invalid(name, value, "must be -1 or more"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        let config = TopicConfig::default();
        for name in TopicConfig::NAMES {
            let value = config.get(name).unwrap();
            let mut copy = config.clone();
            copy.set(name, &value).unwrap();
            assert_eq!(copy, config, "{name}");
        }
    }

    #[test]
    fn overrides_are_only_the_differences() {
        let defaults = TopicConfig::default();
        let config = defaults
            .with_overrides([
                ("cleanup.policy", "compact,delete"),
                ("retention.ms", "1000"),
            ])
            .unwrap();
        assert!(config.cleanup_policy.compact && config.cleanup_policy.delete);
        let mut o = config.overrides_against(&defaults);
        o.sort();
        assert_eq!(
            o,
            vec![
                ("cleanup.policy".into(), "compact,delete".into()),
                ("retention.ms".into(), "1000".into())
            ]
        );
    }

    #[test]
    fn cleanup_policy_is_described_in_the_order_given() {
        let mut c = TopicConfig::default();
        for value in ["delete,compact", "compact,delete", "compact", "delete", ""] {
            c.set("cleanup.policy", value).unwrap();
            assert_eq!(c.get("cleanup.policy").as_deref(), Some(value));
        }
        c.set("cleanup.policy", " compact , delete ").unwrap();
        assert_eq!(c.get("cleanup.policy").as_deref(), Some("compact,delete"));
    }

    #[test]
    fn compression_levels_follow_kip_390() {
        let mut c = TopicConfig::default();
        assert_eq!(c.get("compression.gzip.level").as_deref(), Some("-1"));
        assert_eq!(c.get("compression.lz4.level").as_deref(), Some("9"));
        assert_eq!(c.get("compression.zstd.level").as_deref(), Some("3"));
        c.set("compression.gzip.level", "9").unwrap();
        c.set("compression.lz4.level", "17").unwrap();
        c.set("compression.zstd.level", "-131072").unwrap();
        assert_eq!(
            c.compression_levels,
            CompressionLevels {
                gzip: 9,
                lz4: 17,
                zstd: -131_072
            }
        );
    }

    #[test]
    fn inert_configs_are_stored_and_persisted_as_overrides() {
        let defaults = TopicConfig::default();
        let config = defaults
            .with_overrides([
                ("local.retention.ms", "1000"),
                ("message.timestamp.before.max.ms", "60000"),
            ])
            .unwrap();
        assert_eq!(config.get("local.retention.ms").unwrap(), "1000");
        assert_eq!(config.get("preallocate").unwrap(), "false");
        let mut o = config.overrides_against(&defaults);
        o.sort();
        assert_eq!(
            o,
            vec![
                ("local.retention.ms".into(), "1000".into()),
                ("message.timestamp.before.max.ms".into(), "60000".into())
            ]
        );
        let back = defaults
            .with_overrides(o.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap();
        assert_eq!(back, config);
    }

    #[test]
    fn throttled_replica_lists_are_kept_and_persisted() {
        let defaults = TopicConfig::default();
        let config = defaults
            .with_overrides([
                ("leader.replication.throttled.replicas", "0:1, 1:2"),
                ("follower.replication.throttled.replicas", "*"),
            ])
            .unwrap();
        assert_eq!(config.throttled_replicas.leader, "0:1,1:2");
        assert_eq!(config.throttled_replicas.follower, "*");
        let o = config.overrides_against(&defaults);
        let back = defaults
            .with_overrides(o.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap();
        assert_eq!(back, config);
        assert_eq!(
            defaults
                .get("leader.replication.throttled.replicas")
                .unwrap(),
            ""
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let mut c = TopicConfig::default();
        assert!(c.set("segment.bytes", "x").is_err());
        assert!(c.set("cleanup.policy", "forever").is_err());
        assert!(c.set("no.such.thing", "1").is_err());
        assert!(c.set("retention.ms", "-2").is_err());
        for (name, bad) in [
            ("compression.gzip.level", "0"),
            ("compression.gzip.level", "10"),
            ("compression.lz4.level", "0"),
            ("compression.lz4.level", "18"),
            ("compression.zstd.level", "23"),
            ("compression.zstd.level", "-131073"),
            ("compression.zstd.level", "x"),
        ] {
            assert!(c.set(name, bad).is_err(), "{name}={bad}");
        }
        assert!(c.set("min.cleanable.dirty.ratio", "2").is_err());
        assert!(c.set("message.timestamp.difference.max.ms", "1").is_err());
        assert_eq!(c, TopicConfig::default());
    }
}

//! Kafka 4.x's topic configs as data: each name with its type and range (as
//! Kafka's `LogConfig` validates them), its default, the broker key that sets
//! the broker-wide default, and whether rill acts on it.
//!
//! Configs rill does not act on ("inert") are still accepted, validated,
//! stored, persisted and described, so that tools written for Kafka
//! (Terraform providers, Strimzi, kafka-configs.sh, Debezium's topic creation)
//! do not fail on them; the first non-default value of each is logged once
//! as "accepted but not applied". The list of inert ones is in
//! docs/configuration.md (generated from this table).

use crate::error::EngineError;
use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};

/// How a config's value is checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConfigKind {
    /// A 64-bit integer in `min..=i64::MAX` (Kafka's LONG with `atLeast`).
    Long {
        /// Smallest value allowed.
        min: i64,
    },
    /// A 32-bit integer in `min..=max` (Kafka's INT).
    Int {
        /// Smallest value allowed.
        min: i32,
        /// Largest value allowed.
        max: i32,
    },
    /// A floating-point number in `min..=max` (Kafka's DOUBLE with `between`).
    Double {
        /// Smallest value allowed.
        min: f64,
        /// Largest value allowed.
        max: f64,
    },
    /// `true` or `false` (any case, as Kafka's BOOLEAN).
    Bool,
    /// One of the given strings.
    OneOf(&'static [&'static str]),
    /// A comma list of the given strings (Kafka's LIST with `ValidList.in`).
    ListOf(&'static [&'static str]),
    /// `compression.gzip.level`: -1 (zlib's default) or 1..=9.
    GzipLevel,
    /// `*`, empty, or a comma list of `partition:broker` (Kafka's
    /// `ThrottledReplicaListValidator`).
    ThrottledReplicas,
}

/// One topic config.
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigSpec {
    /// Kafka's topic-level name.
    pub name: &'static str,
    /// Type and range.
    pub kind: ConfigKind,
    /// Kafka 4.x's default, as DescribeConfigs shows it.
    pub default: &'static str,
    /// The broker setting that gives the broker-wide default (Kafka's
    /// `ServerTopicConfigSynonyms`), if any.
    pub broker_name: Option<&'static str>,
    /// Whether rill acts on the value (false: accepted but inert).
    pub applied: bool,
}

const fn spec(
    name: &'static str,
    kind: ConfigKind,
    default: &'static str,
    broker_name: Option<&'static str>,
    applied: bool,
) -> TopicConfigSpec {
    TopicConfigSpec {
        name,
        kind,
        default,
        broker_name,
        applied,
    }
}

const LONG_MAX: &str = "9223372036854775807";
const INT_MAX: i32 = i32::MAX;

/// Every topic config of Kafka 4.x, sorted by name (Kafka's
/// `LogConfig.configNames()`; `message.downconversion.enable`,
/// `message.format.version` and `message.timestamp.difference.max.ms` were
/// removed in 4.0 and are refused as Kafka 4 refuses them).
pub const SPECS: [TopicConfigSpec; 33] = {
    use ConfigKind::*;
    [
        spec(
            "cleanup.policy",
            ListOf(&["compact", "delete"]),
            "delete",
            Some("log.cleanup.policy"),
            true,
        ),
        spec(
            "compression.gzip.level",
            GzipLevel,
            "-1",
            Some("compression.gzip.level"),
            true,
        ),
        spec(
            "compression.lz4.level",
            Int { min: 1, max: 17 },
            "9",
            Some("compression.lz4.level"),
            true,
        ),
        // Typed fields of `TopicConfig`, which the broker-side
        // recompression reads (with the levels above and below; lz4_flex
        // has one level, so the lz4 one is stored and described only).
        spec(
            "compression.type",
            OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
            "producer",
            Some("compression.type"),
            true,
        ),
        spec(
            "compression.zstd.level",
            Int {
                min: -131_072,
                max: 22,
            },
            "3",
            Some("compression.zstd.level"),
            true,
        ),
        spec(
            "delete.retention.ms",
            Long { min: 0 },
            "86400000",
            Some("log.cleaner.delete.retention.ms"),
            true,
        ),
        spec(
            "file.delete.delay.ms",
            Long { min: 0 },
            "60000",
            Some("log.segment.delete.delay.ms"),
            false,
        ),
        spec(
            "flush.messages",
            Long { min: 1 },
            LONG_MAX,
            Some("log.flush.interval.messages"),
            true,
        ),
        spec(
            "flush.ms",
            Long { min: 0 },
            LONG_MAX,
            Some("log.flush.interval.ms"),
            true,
        ),
        spec(
            "follower.replication.throttled.replicas",
            ThrottledReplicas,
            "",
            None,
            true,
        ),
        spec(
            "index.interval.bytes",
            Int {
                min: 0,
                max: INT_MAX,
            },
            "4096",
            Some("log.index.interval.bytes"),
            true,
        ),
        spec(
            "leader.replication.throttled.replicas",
            ThrottledReplicas,
            "",
            None,
            true,
        ),
        spec(
            "local.retention.bytes",
            Long { min: -2 },
            "-2",
            Some("log.local.retention.bytes"),
            true,
        ),
        spec(
            "local.retention.ms",
            Long { min: -2 },
            "-2",
            Some("log.local.retention.ms"),
            true,
        ),
        spec(
            "max.compaction.lag.ms",
            Long { min: 1 },
            LONG_MAX,
            Some("log.cleaner.max.compaction.lag.ms"),
            true,
        ),
        spec(
            "max.message.bytes",
            Int {
                min: 0,
                max: INT_MAX,
            },
            "1048588",
            Some("message.max.bytes"),
            true,
        ),
        // Kafka 4.0 (KIP-1030) lowered this default from Long.MAX to 1 hour.
        spec(
            "message.timestamp.after.max.ms",
            Long { min: 0 },
            "3600000",
            Some("log.message.timestamp.after.max.ms"),
            true,
        ),
        spec(
            "message.timestamp.before.max.ms",
            Long { min: 0 },
            LONG_MAX,
            Some("log.message.timestamp.before.max.ms"),
            true,
        ),
        spec(
            "message.timestamp.type",
            OneOf(&["CreateTime", "LogAppendTime"]),
            "CreateTime",
            Some("log.message.timestamp.type"),
            true,
        ),
        spec(
            "min.cleanable.dirty.ratio",
            Double { min: 0.0, max: 1.0 },
            "0.5",
            Some("log.cleaner.min.cleanable.ratio"),
            true,
        ),
        spec(
            "min.compaction.lag.ms",
            Long { min: 0 },
            "0",
            Some("log.cleaner.min.compaction.lag.ms"),
            true,
        ),
        spec(
            "min.insync.replicas",
            Int {
                min: 1,
                max: INT_MAX,
            },
            "1",
            Some("min.insync.replicas"),
            true,
        ),
        // rill always preallocates its segments (see DESIGN.md: appends never
        // extend a file), whatever this says.
        spec("preallocate", Bool, "false", Some("log.preallocate"), false),
        spec("remote.log.copy.disable", Bool, "false", None, true),
        spec("remote.log.delete.on.disable", Bool, "false", None, true),
        // Refused with `true` where the broker has no tiered storage
        // (remote.log.storage.system.enable=false), as Kafka refuses it; the
        // broker checks that, this table only the type.
        spec("remote.storage.enable", Bool, "false", None, true),
        // Kafka puts no lower bound on retention.bytes (any negative is "no limit").
        spec(
            "retention.bytes",
            Long { min: i64::MIN },
            "-1",
            Some("log.retention.bytes"),
            true,
        ),
        spec(
            "retention.ms",
            Long { min: -1 },
            "604800000",
            Some("log.retention.ms"),
            true,
        ),
        // Kafka 4.0 refuses segments under 1 MiB (KIP-1030); rill keeps its
        // older floor of 14 bytes because small segments are how its tests
        // exercise rolling and retention.
        spec(
            "segment.bytes",
            Int {
                min: 14,
                max: INT_MAX,
            },
            "1073741824",
            Some("log.segment.bytes"),
            true,
        ),
        // Kafka allows 4; rill's offset index entries are 8 bytes.
        spec(
            "segment.index.bytes",
            Int {
                min: 8,
                max: INT_MAX,
            },
            "10485760",
            Some("log.index.size.max.bytes"),
            true,
        ),
        spec(
            "segment.jitter.ms",
            Long { min: 0 },
            "0",
            Some("log.roll.jitter.ms"),
            false,
        ),
        spec(
            "segment.ms",
            Long { min: 1 },
            "604800000",
            Some("log.roll.ms"),
            true,
        ),
        spec(
            "unclean.leader.election.enable",
            Bool,
            "false",
            Some("unclean.leader.election.enable"),
            true,
        ),
    ]
};

/// The names of [`SPECS`], in the same order.
pub const NAMES: [&str; SPECS.len()] = {
    let mut out = [""; SPECS.len()];
    let mut i = 0;
    while i < SPECS.len() {
        out[i] = SPECS[i].name;
        i += 1;
    }
    out
};

/// The spec of a topic config by its Kafka name.
pub fn spec_of(name: &str) -> Option<&'static TopicConfigSpec> {
    SPECS.iter().find(|s| s.name == name)
}

/// The spec whose broker-wide default is set by `broker_name` (e.g.
/// `log.cleaner.min.cleanable.ratio`).
pub fn spec_of_broker_name(broker_name: &str) -> Option<&'static TopicConfigSpec> {
    SPECS.iter().find(|s| s.broker_name == Some(broker_name))
}

fn invalid(name: &str, value: &str, reason: &str) -> EngineError {
    EngineError::InvalidConfig {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Checks `value` against the spec and returns it as Kafka would describe it
/// (trimmed; booleans lower case; integers without leading zeros or `+`).
pub fn validate(spec: &TopicConfigSpec, value: &str) -> Result<String, EngineError> {
    let name = spec.name;
    let value = value.trim();
    let refuse = |reason: &str| invalid(name, value, reason);
    match spec.kind {
        ConfigKind::Long { min } => {
            let v: i64 = value.parse().map_err(|_| refuse("not a 64-bit integer"))?;
            if v < min {
                return Err(refuse(&format!("must be at least {min}")));
            }
            Ok(v.to_string())
        }
        ConfigKind::Int { min, max } => {
            let v: i32 = value.parse().map_err(|_| refuse("not a 32-bit integer"))?;
            if v < min || v > max {
                return Err(refuse(&format!("must be in {min}..={max}")));
            }
            Ok(v.to_string())
        }
        ConfigKind::Double { min, max } => {
            let v: f64 = value.parse().map_err(|_| refuse("not a number"))?;
            if !(min..=max).contains(&v) {
                return Err(refuse(&format!("must be in [{min}, {max}]")));
            }
            Ok(value.to_string())
        }
        ConfigKind::Bool => match value.to_ascii_lowercase().as_str() {
            "true" => Ok("true".into()),
            "false" => Ok("false".into()),
            _ => Err(refuse("expected true or false")),
        },
        ConfigKind::OneOf(allowed) => {
            if allowed.contains(&value) {
                Ok(value.to_string())
            } else {
                Err(refuse(&format!("expected one of {}", allowed.join(", "))))
            }
        }
        ConfigKind::ListOf(allowed) => validate_list_of(value, allowed, refuse),
        ConfigKind::GzipLevel => {
            let v: i32 = value.parse().map_err(|_| refuse("not an integer"))?;
            if v == -1 || (1..=9).contains(&v) {
                Ok(v.to_string())
            } else {
                Err(refuse("must be -1 or in 1..=9"))
            }
        }
        ConfigKind::ThrottledReplicas => validate_throttled_replicas(value, refuse),
    }
}

/// [`validate`] of a [`ConfigKind::ListOf`]: a comma-separated list of
/// `allowed` names, returned without blanks.
fn validate_list_of(
    value: &str,
    allowed: &[&str],
    refuse: impl Fn(&str) -> EngineError,
) -> Result<String, EngineError> {
    let items: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(bad) = items.iter().find(|i| !allowed.contains(i)) {
        return Err(refuse(&format!(
            "'{bad}' is not one of {}",
            allowed.join(", ")
        )));
    }
    Ok(items.join(","))
}

/// [`validate`] of a [`ConfigKind::ThrottledReplicas`]: `*` or a
/// comma-separated list of `partition:broker`, returned without blanks.
fn validate_throttled_replicas(
    value: &str,
    refuse: impl Fn(&str) -> EngineError,
) -> Result<String, EngineError> {
    let items: Vec<&str> = value.split(',').map(str::trim).collect();
    let entry_ok = |item: &str| {
        item.is_empty()
            || item
                .split_once(':')
                .is_some_and(|(p, b)| p.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
    };
    if value == "*" || items.iter().all(|i| entry_ok(i)) {
        Ok(items
            .into_iter()
            .filter(|i| !i.is_empty())
            .collect::<Vec<_>>()
            .join(","))
    } else {
        Err(refuse("expected * or a list of partition:broker"))
    }
}

/// Logs, once per config name and process, that an inert config was given a
/// value rill does not act on.
pub fn warn_inert_once(spec: &'static TopicConfigSpec, value: &str) {
    static WARNED: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    if spec.applied || value == spec.default {
        return;
    }
    let first = WARNED
        .get_or_init(Default::default)
        .lock()
        .map(|mut names| names.insert(spec.name))
        .unwrap_or(false);
    if first {
        tracing::warn!(
            config = spec.name,
            value,
            default = spec.default,
            "topic config accepted but not applied: rill stores and describes it, \
             its behaviour is not implemented"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_sorted_unique_and_defaults_valid() {
        for pair in SPECS.windows(2) {
            assert!(pair[0].name < pair[1].name, "{}", pair[1].name);
        }
        for spec in &SPECS {
            assert_eq!(validate(spec, spec.default).unwrap(), spec.default);
        }
    }

    #[test]
    fn kafka_ranges_are_enforced() {
        let check = |name: &str, value: &str| validate(spec_of(name).unwrap(), value);
        assert!(check("min.cleanable.dirty.ratio", "1.5").is_err());
        assert_eq!(check("min.cleanable.dirty.ratio", " 0.25").unwrap(), "0.25");
        assert!(check("max.compaction.lag.ms", "0").is_err());
        assert!(check("local.retention.ms", "-3").is_err());
        assert!(check("compression.gzip.level", "0").is_err());
        assert_eq!(check("compression.gzip.level", "-1").unwrap(), "-1");
        assert!(check("compression.zstd.level", "23").is_err());
        assert_eq!(check("preallocate", "TRUE").unwrap(), "true");
        assert!(check("preallocate", "yes").is_err());
        assert_eq!(
            check("leader.replication.throttled.replicas", "0:1, 1:2").unwrap(),
            "0:1,1:2"
        );
        assert!(check("leader.replication.throttled.replicas", "0-1").is_err());
        assert!(check("message.timestamp.type", "Now").is_err());
        assert_eq!(check("remote.storage.enable", "True").unwrap(), "true");
        assert_eq!(check("remote.storage.enable", "FALSE").unwrap(), "false");
        assert!(spec_of("message.downconversion.enable").is_none());
        assert_eq!(
            spec_of_broker_name("log.cleaner.min.cleanable.ratio").map(|s| s.name),
            Some("min.cleanable.dirty.ratio")
        );
    }
}

//! Group configs: how IncrementalAlterConfigs (and AlterConfigs) on a GROUP
//! resource edit a group's configs, checked here; [`super::named_configs`]
//! commits them (ConfigRecords of that resource type). The share groups of
//! KIP-932 read theirs at each ShareFetch (`share_runtime`), and both
//! KIP-848 and share groups read their timeouts at each heartbeat.
//!
//! The keys are those of Kafka 4.x's `GroupConfig`:
//! - `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`: a
//!   KIP-848 group's own, within the broker's
//!   `group.consumer.min/max.session.timeout.ms` and
//!   `group.consumer.min/max.heartbeat.interval.ms`;
//! - `share.session.timeout.ms` and `share.heartbeat.interval.ms`: a share
//!   group's own, within `group.share.min/max.*` likewise;
//! - `share.auto.offset.reset`: `latest` (the default), `earliest` or
//!   `by_duration:<ISO-8601 duration>`, where a share group starts on a
//!   partition it has no state for;
//! - `share.isolation.level`: `read_uncommitted` (the default) or
//!   `read_committed`;
//! - `share.record.lock.duration.ms`: the group's record lock, within
//!   `group.share.min/max.record.lock.duration.ms` (15 s to 60 s).
//!
//! A group's heartbeat interval must stay below its session timeout. Each
//! key the group does not set takes the broker's value, which is also what
//! DescribeConfigs shows as its default.

use super::config_ops::ConfigOpKind;
use coordinators::group::{GroupConfig, MemberTimeouts};
use coordinators::share::ShareAutoOffsetReset;
use engine::ErrorCode;
use std::collections::BTreeMap;

/// `consumer.session.timeout.ms`.
pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
/// `consumer.heartbeat.interval.ms`.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
/// `share.session.timeout.ms`.
pub const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
/// `share.heartbeat.interval.ms`.
pub const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
/// `share.auto.offset.reset`.
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
/// `share.isolation.level`.
pub const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";
/// `share.record.lock.duration.ms`.
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";

/// Every group config rill knows, with its default: the broker's value.
pub fn group_config_defaults(broker: &GroupConfig) -> [(&'static str, String); 7] {
    [
        (
            CONSUMER_SESSION_TIMEOUT_MS,
            broker.consumer_session_timeout_ms.to_string(),
        ),
        (
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            broker.consumer_heartbeat_interval_ms.to_string(),
        ),
        (
            SHARE_SESSION_TIMEOUT_MS,
            broker.share.session_timeout_ms.to_string(),
        ),
        (
            SHARE_HEARTBEAT_INTERVAL_MS,
            broker.share.heartbeat_interval_ms.to_string(),
        ),
        (SHARE_AUTO_OFFSET_RESET, "latest".to_owned()),
        (SHARE_ISOLATION_LEVEL, "read_uncommitted".to_owned()),
        (
            SHARE_RECORD_LOCK_DURATION_MS,
            broker.share.records.lock_duration_ms.to_string(),
        ),
    ]
}

/// Why a group config value is refused on its own; `None` when it is good.
/// The bounds that involve the broker's settings are [`bounds_refusal`]'s.
fn refusal(key: &str, value: &str) -> Option<String> {
    let at_least = |min: i64| value.parse::<i32>().is_ok_and(|ms| i64::from(ms) >= min);
    let good = match key {
        CONSUMER_SESSION_TIMEOUT_MS
        | CONSUMER_HEARTBEAT_INTERVAL_MS
        | SHARE_SESSION_TIMEOUT_MS
        | SHARE_HEARTBEAT_INTERVAL_MS => at_least(1),
        SHARE_AUTO_OFFSET_RESET => ShareAutoOffsetReset::parse(value).is_some(),
        SHARE_ISOLATION_LEVEL => matches!(value, "read_uncommitted" | "read_committed"),
        SHARE_RECORD_LOCK_DURATION_MS => at_least(1_000),
        _ => return Some(format!("unknown group config: {key}")),
    };
    (!good).then(|| format!("invalid value {value:?} for group config {key}"))
}

/// A millisecond config of the group, else the broker's value.
fn ms_of(configs: Option<&BTreeMap<String, String>>, key: &str, broker: i64) -> i64 {
    (configs.and_then(|c| c.get(key)))
        .and_then(|v| v.parse().ok())
        .unwrap_or(broker)
}

/// A KIP-848 member's timeouts in a group with `configs`.
pub fn consumer_timeouts(
    configs: Option<&BTreeMap<String, String>>,
    broker: &GroupConfig,
) -> MemberTimeouts {
    let own = broker.consumer_timeouts();
    timeouts_of(
        configs,
        (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
        own,
    )
}

/// A share group member's timeouts in a group with `configs`.
pub fn share_timeouts(
    configs: Option<&BTreeMap<String, String>>,
    broker: &GroupConfig,
) -> MemberTimeouts {
    let own = broker.share.timeouts();
    timeouts_of(
        configs,
        (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
        own,
    )
}

fn timeouts_of(
    configs: Option<&BTreeMap<String, String>>,
    (session_key, heartbeat_key): (&str, &str),
    broker: MemberTimeouts,
) -> MemberTimeouts {
    let heartbeat = ms_of(configs, heartbeat_key, broker.heartbeat_interval_ms.into());
    MemberTimeouts {
        session_timeout_ms: ms_of(configs, session_key, broker.session_timeout_ms),
        heartbeat_interval_ms: i32::try_from(heartbeat).unwrap_or(broker.heartbeat_interval_ms),
    }
}

/// Why a group's whole set of configs breaks the broker's bounds, in
/// Kafka's words; `None` when it keeps them.
fn bounds_refusal(configs: &BTreeMap<String, String>, broker: &GroupConfig) -> Option<String> {
    let consumer = consumer_timeouts(Some(configs), broker);
    let share = share_timeouts(Some(configs), broker);
    let lock_ms = ms_of(
        Some(configs),
        SHARE_RECORD_LOCK_DURATION_MS,
        broker.share.records.lock_duration_ms,
    );
    let lock_bounds = broker.share.lock_duration_bounds_ms;
    (consumer.refusal(&broker.consumer_bounds, ("consumer", "group.consumer")))
        .or_else(|| share.refusal(&broker.share.bounds, ("share", "group.share")))
        .or_else(|| {
            let key = ("group.share", "record.lock.duration.ms");
            lock_bounds.refusal(SHARE_RECORD_LOCK_DURATION_MS, lock_ms, key)
        })
        .map(|refusal| refusal.reason)
}

/// The configs of a group after `ops` (pure). SET checks the value; DELETE
/// returns the key to its default; no group config is a list, so APPEND
/// and SUBTRACT are refused.
pub fn altered_group_configs(
    current: &BTreeMap<String, String>,
    ops: &[(String, Option<String>, ConfigOpKind)],
    broker: &GroupConfig,
) -> Result<BTreeMap<String, String>, (ErrorCode, String)> {
    let mut configs = current.clone();
    for (key, value, kind) in ops {
        let value = value.as_deref().unwrap_or_default().trim();
        match kind {
            ConfigOpKind::Delete => {
                if let Some(reason) = refusal(key, "").filter(|r| r.starts_with("unknown")) {
                    return Err((ErrorCode::InvalidConfig, reason));
                }
                configs.remove(key);
            }
            ConfigOpKind::Set => {
                if let Some(reason) = refusal(key, value) {
                    return Err((ErrorCode::InvalidConfig, reason));
                }
                configs.insert(key.clone(), value.to_owned());
            }
            ConfigOpKind::Append | ConfigOpKind::Subtract => {
                return Err((
                    ErrorCode::InvalidConfig,
                    format!("config value append or subtract is not allowed for config key: {key}"),
                ))
            }
        }
    }
    match bounds_refusal(&configs, broker) {
        Some(reason) => Err((ErrorCode::InvalidConfig, reason)),
        None => Ok(configs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinators::group::MsRange;

    fn op(
        key: &str,
        value: Option<&str>,
        kind: ConfigOpKind,
    ) -> (String, Option<String>, ConfigOpKind) {
        (key.to_owned(), value.map(str::to_owned), kind)
    }

    fn set(key: &str, value: &str) -> (String, Option<String>, ConfigOpKind) {
        op(key, Some(value), ConfigOpKind::Set)
    }

    fn refusal_of(ops: &[(String, Option<String>, ConfigOpKind)], broker: &GroupConfig) -> String {
        let refused = altered_group_configs(&BTreeMap::new(), ops, broker).unwrap_err();
        assert_eq!(refused.0, ErrorCode::InvalidConfig, "{ops:?}");
        refused.1
    }

    #[test]
    fn group_configs_are_checked_and_edited() {
        let broker = GroupConfig::default();
        let none = BTreeMap::new();
        let ops = [
            set(SHARE_AUTO_OFFSET_RESET, "earliest"),
            set(SHARE_RECORD_LOCK_DURATION_MS, "20000"),
            set(CONSUMER_SESSION_TIMEOUT_MS, "50000"),
        ];
        let set_once = altered_group_configs(&none, &ops, &broker).unwrap();
        assert_eq!(set_once[SHARE_AUTO_OFFSET_RESET], "earliest");
        assert_eq!(set_once[CONSUMER_SESSION_TIMEOUT_MS], "50000");
        let delete = [op(SHARE_AUTO_OFFSET_RESET, None, ConfigOpKind::Delete)];
        let deleted = altered_group_configs(&set_once, &delete, &broker).unwrap();
        assert!(!deleted.contains_key(SHARE_AUTO_OFFSET_RESET));
        for bad in [
            set(SHARE_AUTO_OFFSET_RESET, "newest"),
            set(SHARE_ISOLATION_LEVEL, "read_some"),
            set(SHARE_RECORD_LOCK_DURATION_MS, "10"),
            set(SHARE_SESSION_TIMEOUT_MS, "soon"),
            set("share.colour", "red"),
            op("share.colour", None, ConfigOpKind::Delete),
            op(
                SHARE_AUTO_OFFSET_RESET,
                Some("earliest"),
                ConfigOpKind::Append,
            ),
        ] {
            refusal_of(std::slice::from_ref(&bad), &broker);
        }
    }

    #[test]
    fn timeouts_keep_the_brokers_bounds_in_kafkas_words() {
        let broker = GroupConfig::default();
        for (ops, reason) in [
            (
                vec![set(CONSUMER_SESSION_TIMEOUT_MS, "6000")],
                "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
            ),
            (
                vec![set(SHARE_HEARTBEAT_INTERVAL_MS, "20000")],
                "share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms",
            ),
            (
                vec![set(SHARE_RECORD_LOCK_DURATION_MS, "2000")],
                "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms",
            ),
        ] {
            assert_eq!(refusal_of(&ops, &broker), reason);
        }
        // Lowered bounds let the same values through, but a heartbeat must
        // stay below the session.
        let mut low = GroupConfig::default();
        low.consumer_bounds.session_timeout_ms = MsRange::new(1_000, 60_000);
        low.consumer_bounds.heartbeat_interval_ms = MsRange::new(1_000, 15_000);
        low.share.lock_duration_bounds_ms = MsRange::new(1_000, 60_000);
        let ops = [
            set(CONSUMER_SESSION_TIMEOUT_MS, "6000"),
            set(SHARE_RECORD_LOCK_DURATION_MS, "2000"),
        ];
        assert!(altered_group_configs(&BTreeMap::new(), &ops, &low).is_ok());
        let ops = [
            set(CONSUMER_SESSION_TIMEOUT_MS, "6000"),
            set(CONSUMER_HEARTBEAT_INTERVAL_MS, "6000"),
        ];
        assert_eq!(
            refusal_of(&ops, &low),
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        );
    }

    #[test]
    fn a_groups_own_timeouts_win_over_the_brokers() {
        let broker = GroupConfig::default();
        let own = BTreeMap::from([(SHARE_HEARTBEAT_INTERVAL_MS.to_owned(), "7000".to_owned())]);
        let share = share_timeouts(Some(&own), &broker);
        assert_eq!(share.heartbeat_interval_ms, 7_000);
        assert_eq!(share.session_timeout_ms, broker.share.session_timeout_ms);
        assert_eq!(
            consumer_timeouts(Some(&own), &broker),
            broker.consumer_timeouts()
        );
        assert_eq!(consumer_timeouts(None, &broker), broker.consumer_timeouts());
        let defaults = group_config_defaults(&broker);
        assert!(defaults.contains(&(CONSUMER_HEARTBEAT_INTERVAL_MS, "5000".to_owned())));
    }
}

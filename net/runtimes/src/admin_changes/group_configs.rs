//! Group configs: how IncrementalAlterConfigs (and AlterConfigs) on a GROUP
//! resource edit a group's configs, checked here; [`super::named_configs`]
//! commits them (ConfigRecords of that resource type). The share groups of
//! KIP-932 read them at each ShareFetch (`share_runtime`).
//!
//! The keys are those of Kafka's `GroupConfig` that rill applies:
//! - `share.auto.offset.reset`: `latest` (the default) or `earliest`, where
//!   a share group starts on a partition it has no state for;
//! - `share.isolation.level`: `read_uncommitted` (the default) or
//!   `read_committed`;
//! - `share.record.lock.duration.ms`: the group's record lock, from 1,000
//!   to 3,600,000 ms (the broker's `group.share.record.lock.duration.ms`
//!   otherwise).

use super::config_ops::ConfigOpKind;
use engine::ErrorCode;
use std::collections::BTreeMap;

/// `share.auto.offset.reset`.
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
/// `share.isolation.level`.
pub const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";
/// `share.record.lock.duration.ms`.
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";

/// Every group config rill knows, with its default.
pub const GROUP_CONFIGS: [(&str, &str); 3] = [
    (SHARE_AUTO_OFFSET_RESET, "latest"),
    (SHARE_ISOLATION_LEVEL, "read_uncommitted"),
    (SHARE_RECORD_LOCK_DURATION_MS, "30000"),
];

/// Why a group config value is refused; `None` when it is good.
fn refusal(key: &str, value: &str) -> Option<String> {
    let good = match key {
        SHARE_AUTO_OFFSET_RESET => matches!(value, "latest" | "earliest"),
        SHARE_ISOLATION_LEVEL => matches!(value, "read_uncommitted" | "read_committed"),
        SHARE_RECORD_LOCK_DURATION_MS => value
            .parse::<i64>()
            .is_ok_and(|ms| (1_000..=3_600_000).contains(&ms)),
        _ => return Some(format!("unknown group config: {key}")),
    };
    (!good).then(|| format!("invalid value {value:?} for group config {key}"))
}

/// The configs of a group after `ops` (pure). SET checks the value; DELETE
/// returns the key to its default; no group config is a list, so APPEND
/// and SUBTRACT are refused.
pub fn altered_group_configs(
    current: &BTreeMap<String, String>,
    ops: &[(String, Option<String>, ConfigOpKind)],
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
    Ok(configs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(
        key: &str,
        value: Option<&str>,
        kind: ConfigOpKind,
    ) -> (String, Option<String>, ConfigOpKind) {
        (key.to_owned(), value.map(str::to_owned), kind)
    }

    #[test]
    fn group_configs_are_checked_and_edited() {
        let none = BTreeMap::new();
        let set = altered_group_configs(
            &none,
            &[
                op(SHARE_AUTO_OFFSET_RESET, Some("earliest"), ConfigOpKind::Set),
                op(
                    SHARE_RECORD_LOCK_DURATION_MS,
                    Some("2000"),
                    ConfigOpKind::Set,
                ),
            ],
        )
        .unwrap();
        assert_eq!(set[SHARE_AUTO_OFFSET_RESET], "earliest");
        let deleted = altered_group_configs(
            &set,
            &[op(SHARE_AUTO_OFFSET_RESET, None, ConfigOpKind::Delete)],
        )
        .unwrap();
        assert!(!deleted.contains_key(SHARE_AUTO_OFFSET_RESET));
        for bad in [
            op(SHARE_AUTO_OFFSET_RESET, Some("newest"), ConfigOpKind::Set),
            op(SHARE_ISOLATION_LEVEL, Some("read_some"), ConfigOpKind::Set),
            op(SHARE_RECORD_LOCK_DURATION_MS, Some("10"), ConfigOpKind::Set),
            op("share.colour", Some("red"), ConfigOpKind::Set),
            op("share.colour", None, ConfigOpKind::Delete),
            op(
                SHARE_AUTO_OFFSET_RESET,
                Some("earliest"),
                ConfigOpKind::Append,
            ),
        ] {
            let refused = altered_group_configs(&none, std::slice::from_ref(&bad)).unwrap_err();
            assert_eq!(refused.0, ErrorCode::InvalidConfig, "{bad:?}");
        }
    }
}

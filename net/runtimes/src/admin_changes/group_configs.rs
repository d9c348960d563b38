//! Group configs as this broker asks them of the cluster: IncrementalAlterConfigs
//! (and AlterConfigs) on a GROUP resource, checked here, committed by the
//! active controller as ConfigRecords of that resource type, and answered
//! once every shard's image holds them. The share groups of KIP-932 read
//! them at each ShareFetch (`share_runtime`).
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
use super::CONTROLLER_SHARD;
use crate::cluster_runtime::ControllerRpc;
use crate::Shard;
use engine::ErrorCode;
use kernel::call::OwnerCall;
use std::collections::BTreeMap;
use std::rc::Rc;

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

/// IncrementalAlterConfigs / AlterConfigs on one GROUP resource, run on
/// the controller shard.
#[derive(Debug, Clone)]
pub struct AlterGroupConfigs {
    /// The group id.
    pub group: String,
    /// The changes.
    pub ops: Vec<(String, Option<String>, ConfigOpKind)>,
    /// AlterConfigs semantics: the given set replaces every config.
    pub replace_all: bool,
    /// Only check.
    pub validate_only: bool,
}

impl OwnerCall<crate::ShardRuntime> for AlterGroupConfigs {
    type Reply = Result<(), (ErrorCode, String)>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        super::one_at_a_time(&shard, self.apply(&shard)).await
    }
}

impl AlterGroupConfigs {
    /// The change, decided on the current image and committed.
    async fn apply(self, shard: &Rc<Shard>) -> Result<(), (ErrorCode, String)> {
        if self.group.is_empty() {
            return Err((
                ErrorCode::InvalidRequest,
                String::from("a group resource needs a group id"),
            ));
        }
        let image = shard.runtime().view.image();
        let current = (image.group_configs().get(&self.group))
            .cloned()
            .unwrap_or_default();
        let start = if self.replace_all {
            BTreeMap::new()
        } else {
            current.clone()
        };
        let configs = altered_group_configs(&start, &self.ops)?;
        if self.validate_only || configs == current {
            return Ok(());
        }
        let request = ControllerRpc::SetGroupConfigs {
            group: self.group,
            configs: configs.into_iter().collect(),
        };
        super::commit::commit_here(shard, request).await.map(|_| ())
    }
}

/// Asks the controller shard for a group config change, from any shard.
pub async fn submit(
    shard: &Rc<Shard>,
    request: AlterGroupConfigs,
) -> Result<(), (ErrorCode, String)> {
    shard
        .call(CONTROLLER_SHARD, request)
        .await
        .map_err(|e| (ErrorCode::NotLeaderOrFollower, e.to_string()))?
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

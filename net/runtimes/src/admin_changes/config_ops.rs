//! Topic config edits, as AlterConfigs and IncrementalAlterConfigs ask them
//! (pure).

use engine::ErrorCode;
use engine::TopicConfig;

/// How one config is changed (IncrementalAlterConfigs' operations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigOpKind {
    /// Set the value.
    Set,
    /// Back to the broker default.
    Delete,
    /// Add to a list value.
    Append,
    /// Remove from a list value.
    Subtract,
}

/// Applies config operations to a topic's config (pure; used by both alter APIs).
pub fn altered_config(
    defaults: &TopicConfig,
    current: &TopicConfig,
    ops: &[(String, Option<String>, ConfigOpKind)],
    replace_all: bool,
) -> Result<TopicConfig, (ErrorCode, String)> {
    let invalid = |e: engine::EngineError| (ErrorCode::InvalidConfig, e.to_string());
    let mut config = if replace_all {
        defaults.clone()
    } else {
        current.clone()
    };
    for (name, value, kind) in ops {
        if !TopicConfig::NAMES.contains(&name.as_str()) {
            return Err((
                ErrorCode::InvalidConfig,
                format!("unknown topic config '{name}'"),
            ));
        }
        match kind {
            ConfigOpKind::Set => {
                let value = value.as_deref().unwrap_or_default();
                config.set(name, value).map_err(invalid)?
            }
            ConfigOpKind::Delete => {
                let default = defaults.get(name).unwrap_or_default();
                config.set(name, &default).map_err(invalid)?
            }
            ConfigOpKind::Append | ConfigOpKind::Subtract => {
                let current = config.get(name).unwrap_or_default();
                let edited = edit_list(name, &current, value.as_deref(), *kind)?;
                config.set(name, &edited).map_err(invalid)?
            }
        }
    }
    Ok(config)
}

/// APPEND or SUBTRACT on a LIST config (`cleanup.policy` and the throttled
/// replica lists): `current` with `given`'s items added (once each) or
/// removed. Kafka refuses both on any other type with INVALID_CONFIG.
pub fn edit_list(
    name: &str,
    current: &str,
    given: Option<&str>,
    kind: ConfigOpKind,
) -> Result<String, (ErrorCode, String)> {
    use engine::config::kafka_topic_configs::{spec_of, ConfigKind};
    let is_list = spec_of(name).is_some_and(|spec| {
        matches!(
            spec.kind,
            ConfigKind::ListOf(_) | ConfigKind::ThrottledReplicas
        )
    });
    if !is_list {
        return Err((
            ErrorCode::InvalidConfig,
            format!("config value append or subtract is not allowed for config key: {name}"),
        ));
    }
    let items = |text: &str| -> Vec<String> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let mut list = items(current);
    let given = items(given.unwrap_or_default());
    if kind == ConfigOpKind::Append {
        for item in given {
            if !list.contains(&item) {
                list.push(item);
            }
        }
    } else {
        list.retain(|i| !given.contains(i));
    }
    Ok(list.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_ops_edit_list_values() {
        let defaults = TopicConfig::default();
        let set = [(
            "retention.ms".to_string(),
            Some("1000".to_string()),
            ConfigOpKind::Set,
        )];
        let c = altered_config(&defaults, &defaults, &set, false).unwrap();
        assert_eq!(c.retention_ms, 1000);
        let append = [(
            "cleanup.policy".to_string(),
            Some("compact".to_string()),
            ConfigOpKind::Append,
        )];
        let c = altered_config(&defaults, &c, &append, false).unwrap();
        assert!(c.cleanup_policy.compact && c.cleanup_policy.delete);
        // Appended at the end, as Kafka keeps the list.
        assert_eq!(c.get("cleanup.policy").as_deref(), Some("delete,compact"));
        assert_eq!(c.retention_ms, 1000);
        let subtract = [(
            "cleanup.policy".to_string(),
            Some("delete".to_string()),
            ConfigOpKind::Subtract,
        )];
        let compact_only = altered_config(&defaults, &c, &subtract, false).unwrap();
        assert!(compact_only.cleanup_policy.compact && !compact_only.cleanup_policy.delete);
        let not_a_list = [(
            "retention.ms".to_string(),
            Some("5".to_string()),
            ConfigOpKind::Append,
        )];
        assert_eq!(
            altered_config(&defaults, &c, &not_a_list, false)
                .unwrap_err()
                .0,
            ErrorCode::InvalidConfig
        );
        let reset = [("retention.ms".to_string(), None, ConfigOpKind::Delete)];
        let c = altered_config(&defaults, &c, &reset, false).unwrap();
        assert_eq!(c.retention_ms, defaults.retention_ms);
        let bad = [(
            "no.such".to_string(),
            Some("1".to_string()),
            ConfigOpKind::Set,
        )];
        assert_eq!(
            altered_config(&defaults, &c, &bad, false).unwrap_err().0,
            ErrorCode::InvalidConfig
        );
    }

    #[test]
    fn alter_configs_replaces_every_override() {
        let defaults = TopicConfig::default();
        let current = defaults.with_overrides([("retention.ms", "5")]).unwrap();
        let ops = [(
            "segment.bytes".to_string(),
            Some("1048576".to_string()),
            ConfigOpKind::Set,
        )];
        let c = altered_config(&defaults, &current, &ops, true).unwrap();
        assert_eq!(c.retention_ms, defaults.retention_ms);
        assert_eq!(c.segment_bytes, 1_048_576);
    }
}

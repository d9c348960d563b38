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
                let mut items: Vec<String> = current
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                let given: Vec<&str> = value
                    .as_deref()
                    .unwrap_or_default()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .collect();
                if *kind == ConfigOpKind::Append {
                    for item in given {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    }
                } else {
                    items.retain(|i| !given.contains(&i.as_str()));
                }
                config.set(name, &items.join(",")).map_err(invalid)?
            }
        }
    }
    Ok(config)
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
        assert_eq!(c.retention_ms, 1000);
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

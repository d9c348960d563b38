//! Client-metrics subscriptions (KIP-714): how IncrementalAlterConfigs
//! (and AlterConfigs) on a CLIENT_METRICS resource edit a subscription's
//! configs, checked here; [`super::named_configs`] commits them (Kafka's
//! ConfigRecords of that resource type), so the client's next
//! GetTelemetrySubscriptions, on any shard, sees the change. Edits run one
//! at a time, so that two APPENDs to `metrics` do not lose one.

use super::config_ops::ConfigOpKind;
use crate::telemetry::subscription::{
    self, list_items, SubscriptionError, CONFIGS, MATCH, METRICS,
};
use engine::ErrorCode;
use std::collections::BTreeMap;

/// The configs of a subscription after `ops` (pure). SET checks the value;
/// DELETE returns the key to its default; APPEND and SUBTRACT edit the two
/// list configs (`metrics`, `match`), item by item.
pub fn altered_client_metrics_configs(
    current: &BTreeMap<String, String>,
    ops: &[(String, Option<String>, ConfigOpKind)],
) -> Result<BTreeMap<String, String>, (ErrorCode, String)> {
    let invalid = |e: SubscriptionError| (ErrorCode::InvalidConfig, e.to_string());
    let mut configs = current.clone();
    for (key, value, kind) in ops {
        if !CONFIGS.contains(&key.as_str()) {
            return Err(invalid(SubscriptionError::UnknownConfig(key.clone())));
        }
        let value = value.as_deref().unwrap_or_default();
        let edited = match kind {
            ConfigOpKind::Set => value.trim().to_owned(),
            ConfigOpKind::Delete => {
                configs.remove(key);
                continue;
            }
            ConfigOpKind::Append | ConfigOpKind::Subtract => {
                if key != METRICS && key != MATCH {
                    return Err((
                        ErrorCode::InvalidConfig,
                        format!(
                            "config value append or subtract is not allowed for config key: {key}"
                        ),
                    ));
                }
                let mut items = list_items(configs.get(key).map_or("", String::as_str));
                let given = list_items(value);
                if *kind == ConfigOpKind::Append {
                    items.extend(
                        given
                            .into_iter()
                            .filter(|g| !items.contains(g))
                            .collect::<Vec<_>>(),
                    );
                } else {
                    items.retain(|item| !given.contains(item));
                }
                items.join(",")
            }
        };
        subscription::check(key, &edited).map_err(invalid)?;
        configs.insert(key.clone(), edited);
    }
    Ok(configs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::subscription::INTERVAL_MS;

    fn op(
        key: &str,
        value: Option<&str>,
        kind: ConfigOpKind,
    ) -> (String, Option<String>, ConfigOpKind) {
        (key.to_owned(), value.map(str::to_owned), kind)
    }

    #[test]
    fn subscriptions_are_edited_as_kafka_configs_edits_them() {
        let none = BTreeMap::new();
        let c = altered_client_metrics_configs(
            &none,
            &[
                op(
                    METRICS,
                    Some("org.apache.kafka.producer."),
                    ConfigOpKind::Set,
                ),
                op(INTERVAL_MS, Some("1000"), ConfigOpKind::Set),
                op(MATCH, Some("client_id=app-.*"), ConfigOpKind::Set),
            ],
        )
        .unwrap();
        assert_eq!(c[INTERVAL_MS], "1000");
        let c = altered_client_metrics_configs(
            &c,
            &[
                op(
                    METRICS,
                    Some("org.apache.kafka.consumer.,org.apache.kafka.producer."),
                    ConfigOpKind::Append,
                ),
                op(MATCH, Some("client_id=app-.*"), ConfigOpKind::Subtract),
                op(INTERVAL_MS, None, ConfigOpKind::Delete),
            ],
        )
        .unwrap();
        assert_eq!(
            c[METRICS],
            "org.apache.kafka.producer.,org.apache.kafka.consumer."
        );
        assert_eq!(c[MATCH], "");
        assert!(!c.contains_key(INTERVAL_MS));
    }

    #[test]
    fn bad_keys_and_values_are_invalid_config() {
        let none = BTreeMap::new();
        for ops in [
            vec![op("interval", Some("5"), ConfigOpKind::Set)],
            vec![op(INTERVAL_MS, Some("5"), ConfigOpKind::Set)],
            vec![op(MATCH, Some("client_color=red"), ConfigOpKind::Set)],
            vec![op(MATCH, Some("client_id=(("), ConfigOpKind::Append)],
            vec![op(INTERVAL_MS, Some("500"), ConfigOpKind::Append)],
        ] {
            let refused = altered_client_metrics_configs(&none, &ops).unwrap_err();
            assert_eq!(
                refused.0,
                ErrorCode::InvalidConfig,
                "{ops:?}: {}",
                refused.1
            );
        }
    }
}

//! The topic defaults in force on a broker: the config file's `log.*`
//! settings, then the cluster-wide dynamic broker configs (resource `""`),
//! then this broker's own (Kafka's precedence; a topic's override comes on
//! top). Pure: the caller passes the dynamic configs of the image it holds
//! (the topic tables derived from it, the reconciler, DescribeConfigs).

use crate::config::BrokerConfig;
use engine::config::kafka_topic_configs::spec_of_broker_name;
use engine::TopicConfig;
use std::collections::BTreeMap;

/// Dynamic configs by resource name, as the metadata image keeps them.
pub type BrokerConfigs = BTreeMap<String, BTreeMap<String, String>>;

/// The topic defaults in force on broker `config.broker_id`: the file's,
/// then the cluster-wide dynamic ones, then this broker's own.
pub fn effective_topic_defaults(config: &BrokerConfig, dynamic: &BrokerConfigs) -> TopicConfig {
    let mut defaults = config.topic_defaults().clone();
    for resource in [String::new(), config.broker_id.to_string()] {
        for (key, value) in dynamic.get(&resource).into_iter().flatten() {
            let Some(spec) = spec_of_broker_name(key) else {
                continue;
            };
            if let Err(e) = defaults.set(spec.name, value) {
                tracing::warn!(key, value, error = %e, "dynamic broker config not usable; ignored");
            }
        }
    }
    defaults
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_is_file_then_cluster_default_then_broker() {
        let mut config = BrokerConfig::defaults();
        config.broker_id = 3;
        let mut dynamic = BrokerConfigs::new();
        dynamic.insert(
            String::new(),
            BTreeMap::from([
                ("log.retention.ms".to_string(), "1000".to_string()),
                ("log.segment.bytes".to_string(), "1048576".to_string()),
            ]),
        );
        dynamic.insert(
            "3".into(),
            BTreeMap::from([("log.retention.ms".to_string(), "2000".to_string())]),
        );
        dynamic.insert(
            "4".into(),
            BTreeMap::from([("log.retention.ms".to_string(), "4000".to_string())]),
        );
        let d = effective_topic_defaults(&config, &dynamic);
        assert_eq!(d.retention_ms, 2000);
        assert_eq!(d.segment_bytes, 1_048_576);
    }
}

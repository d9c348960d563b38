//! Dynamic broker configs (IncrementalAlterConfigs on a BROKER resource):
//! the broker-wide topic defaults Kafka lets an operator change at runtime
//! (`log.retention.ms`, `log.segment.bytes`, `log.cleaner.*`, ... — every
//! broker synonym of a topic config), kept in the metadata log like Kafka's
//! ConfigRecords, so they hold for every broker and across restarts.
//!
//! Precedence, as Kafka: a topic's own override, then this broker's dynamic
//! config, then the cluster-wide dynamic default (resource name `""`), then
//! the config file, then Kafka's default. The reconciler recomputes every
//! topic's config when the metadata changes, so a new default reaches the
//! partitions that do not override it.

use super::config_ops::{edit_list, ConfigOpKind};
use super::CONTROLLER_SHARD;
use crate::cluster_runtime::ControllerRpc;
use crate::quotas::replication;
use crate::Shard;
use engine::config::kafka_topic_configs::spec_of_broker_name;
use engine::{ErrorCode, TopicConfig};
use kernel::call::OwnerCall;
use kernel::cordon::CORDONED_LOG_DIRS;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Broker synonyms of topic configs the active controller's elections
/// read (`cluster::metadata::controller::elr`): one value must hold for the
/// whole cluster, so they change only on the cluster-wide resource (`""`),
/// never per broker. Kafka 4.1 refuses a per-broker `min.insync.replicas`
/// for the same reason: a leader advancing its high watermark under another
/// minimum than the controller's would let an eligible leader replica miss
/// committed records.
pub const CLUSTER_WIDE_ONLY: &[&str] = &["unclean.leader.election.enable", "min.insync.replicas"];

/// Whether `key` is a broker config rill changes at runtime: the broker
/// synonyms of topic configs, `cordoned.log.dirs` (KIP-1066) and the
/// replication throttles' rates (KIP-73).
pub fn is_dynamic(key: &str) -> bool {
    key == CORDONED_LOG_DIRS || is_throttle_rate(key) || spec_of_broker_name(key).is_some()
}

fn is_throttle_rate(key: &str) -> bool {
    key == replication::LEADER_RATE || key == replication::FOLLOWER_RATE
}

/// Whether `ops` may change the dynamic configs of resource `broker`
/// (`""`: cluster-wide); the refusal if not.
pub fn check_resource(
    broker: &str,
    ops: &[(String, Option<String>, ConfigOpKind)],
) -> Result<(), (ErrorCode, String)> {
    match ops
        .iter()
        .find(|(key, _, _)| !broker.is_empty() && CLUSTER_WIDE_ONLY.contains(&key.as_str()))
    {
        Some((key, _, _)) => Err((
            ErrorCode::InvalidConfig,
            format!(
                "broker config '{key}' is cluster-wide in rill: set it on the default broker \
                 resource (an empty name), not on broker {broker}"
            ),
        )),
        None => Ok(()),
    }
}

/// The new set of dynamic configs of a resource after `ops` (pure).
/// `static_value` gives a key's value where no dynamic one is set (the
/// config file's, or Kafka's default): APPEND and SUBTRACT edit that, as
/// Kafka's do.
pub fn altered_broker_configs(
    current: &BTreeMap<String, String>,
    ops: &[(String, Option<String>, ConfigOpKind)],
    static_value: impl Fn(&str) -> String,
) -> Result<BTreeMap<String, String>, (ErrorCode, String)> {
    let mut configs = current.clone();
    for (key, value, kind) in ops {
        if key == CORDONED_LOG_DIRS {
            set_cordoned_log_dirs(&mut configs, value.as_deref(), *kind)?;
            continue;
        }
        if is_throttle_rate(key) {
            set_throttle_rate(&mut configs, key, value.as_deref(), *kind)?;
            continue;
        }
        let Some(spec) = spec_of_broker_name(key).filter(|_| is_dynamic(key)) else {
            return Err((
                ErrorCode::InvalidRequest,
                format!("broker config '{key}' cannot be changed at runtime in rill"),
            ));
        };
        match (kind, value) {
            (ConfigOpKind::Set, Some(value)) => {
                TopicConfig::default()
                    .set(spec.name, value)
                    .map_err(|e| (ErrorCode::InvalidConfig, format!("{key}: {e}")))?;
                configs.insert(key.clone(), value.trim().to_string());
            }
            (ConfigOpKind::Set, None) => {
                return Err((ErrorCode::InvalidConfig, format!("{key}: no value")));
            }
            (ConfigOpKind::Delete, _) => {
                configs.remove(key);
            }
            (ConfigOpKind::Append | ConfigOpKind::Subtract, given) => {
                let base = configs
                    .get(key)
                    .cloned()
                    .unwrap_or_else(|| static_value(spec.name));
                let edited = edit_list(spec.name, &base, given.as_deref(), *kind)?;
                TopicConfig::default()
                    .set(spec.name, &edited)
                    .map_err(|e| (ErrorCode::InvalidConfig, format!("{key}: {e}")))?;
                configs.insert(key.clone(), edited);
            }
        }
    }
    Ok(configs)
}

/// The cluster-level `min.insync.replicas` (which the active controller
/// writes once: `Controller::cluster_min_insync_replicas`) may be changed
/// but not removed, as Kafka refuses with the ELR on: the brokers and the
/// controller would fall back to their own files' values, which may differ.
/// A legacy AlterConfigs of `""` that leaves it out removes it too.
fn keeps_cluster_min_isr(
    broker: &str,
    current: &BTreeMap<String, String>,
    configs: &BTreeMap<String, String>,
) -> Result<(), (ErrorCode, String)> {
    const MIN_ISR: &str = "min.insync.replicas";
    if broker.is_empty() && current.contains_key(MIN_ISR) && !configs.contains_key(MIN_ISR) {
        return Err((
            ErrorCode::InvalidConfig,
            format!("Cluster-level {MIN_ISR} cannot be removed while ELR is enabled."),
        ));
    }
    Ok(())
}

/// A replication throttle's rate: set (bytes/s, a whole number) or
/// deleted (back to the file's); it is no list to append to.
fn set_throttle_rate(
    configs: &mut BTreeMap<String, String>,
    key: &str,
    value: Option<&str>,
    kind: ConfigOpKind,
) -> Result<(), (ErrorCode, String)> {
    match (kind, value) {
        (ConfigOpKind::Set, Some(value)) => match replication::parse_rate(value) {
            Some(rate) => {
                configs.insert(key.to_owned(), rate.to_string());
            }
            None => {
                let why = format!("{key}: '{value}' is not a rate in bytes/s (a whole number)");
                return Err((ErrorCode::InvalidConfig, why));
            }
        },
        (ConfigOpKind::Delete, _) => {
            configs.remove(key);
        }
        _ => {
            let why = format!("{key}: only SET and DELETE apply to it");
            return Err((ErrorCode::InvalidConfig, why));
        }
    }
    Ok(())
}

/// `cordoned.log.dirs`: set (a comma list of paths, `*`, or empty to
/// cordon nothing and override the file) or deleted (back to the file's).
fn set_cordoned_log_dirs(
    configs: &mut BTreeMap<String, String>,
    value: Option<&str>,
    kind: ConfigOpKind,
) -> Result<(), (ErrorCode, String)> {
    match (kind, value) {
        (ConfigOpKind::Set, Some(value)) => {
            let list = kernel::cordon::parse_list(value).join(",");
            configs.insert(CORDONED_LOG_DIRS.to_owned(), list);
        }
        (ConfigOpKind::Delete, _) => {
            configs.remove(CORDONED_LOG_DIRS);
        }
        (ConfigOpKind::Set, None) => {
            return Err((
                ErrorCode::InvalidConfig,
                format!("{CORDONED_LOG_DIRS}: no value"),
            ));
        }
        (ConfigOpKind::Append | ConfigOpKind::Subtract, _) => {
            return Err((
                ErrorCode::InvalidConfig,
                format!("{CORDONED_LOG_DIRS}: set the whole list (append and subtract are not supported)"),
            ));
        }
    }
    Ok(())
}

/// IncrementalAlterConfigs on a BROKER resource, run on the controller
/// shard one at a time with the topic changes.
#[derive(Debug, Clone)]
pub struct AlterBrokerConfigs {
    /// `""` or a broker id.
    pub broker: String,
    /// The changes.
    pub ops: Vec<(String, Option<String>, ConfigOpKind)>,
    /// AlterConfigs semantics: the given set replaces every dynamic config
    /// of the resource.
    pub replace_all: bool,
    /// Only check.
    pub validate_only: bool,
}

impl OwnerCall<crate::ShardRuntime> for AlterBrokerConfigs {
    type Reply = Result<(), (ErrorCode, String)>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        super::one_at_a_time(&shard, self.apply(&shard)).await
    }
}

impl AlterBrokerConfigs {
    /// The change, decided on the current image and committed.
    async fn apply(self, shard: &Rc<Shard>) -> Result<(), (ErrorCode, String)> {
        check_resource(&self.broker, &self.ops)?;
        let image = shard.runtime().view.image();
        let current = image
            .broker_configs()
            .get(&self.broker)
            .cloned()
            .unwrap_or_default();
        let start = if self.replace_all {
            BTreeMap::new()
        } else {
            current.clone()
        };
        let file_defaults = &shard.config.engine.topic_defaults;
        let configs = altered_broker_configs(&start, &self.ops, |name| {
            file_defaults.get(name).unwrap_or_default()
        })?;
        keeps_cluster_min_isr(&self.broker, &current, &configs)?;
        if self.validate_only || configs == current {
            return Ok(());
        }
        let request = ControllerRpc::SetBrokerConfigs {
            broker: self.broker,
            configs: configs.into_iter().collect(),
        };
        super::commit::commit_here(shard, request).await.map(|_| ())
    }
}

/// Asks the controller shard for a broker config change, from any shard.
pub async fn submit(
    shard: &Rc<Shard>,
    request: AlterBrokerConfigs,
) -> Result<(), (ErrorCode, String)> {
    shard
        .call(CONTROLLER_SHARD, request)
        .await
        .map_err(|e| (ErrorCode::NotLeaderOrFollower, e.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> String {
        String::new()
    }

    #[test]
    fn append_and_subtract_edit_lists_from_the_static_value() {
        let op = |k: &str, v: &str, kind| (k.to_string(), Some(v.to_string()), kind);
        let file = |name: &str| {
            assert_eq!(name, "cleanup.policy");
            "delete".to_string()
        };
        let current = BTreeMap::new();
        let c = altered_broker_configs(
            &current,
            &[op("log.cleanup.policy", "compact", ConfigOpKind::Append)],
            file,
        )
        .unwrap();
        assert_eq!(c["log.cleanup.policy"], "delete,compact");
        let c = altered_broker_configs(
            &c,
            &[op("log.cleanup.policy", "delete", ConfigOpKind::Subtract)],
            file,
        )
        .unwrap();
        assert_eq!(c["log.cleanup.policy"], "compact");
        let refused = altered_broker_configs(
            &c,
            &[op("log.cleanup.policy", "bogus", ConfigOpKind::Append)],
            file,
        );
        assert_eq!(refused.unwrap_err().0, ErrorCode::InvalidConfig);
        let not_a_list = altered_broker_configs(
            &c,
            &[op("log.retention.ms", "5", ConfigOpKind::Append)],
            none,
        );
        assert_eq!(not_a_list.unwrap_err().0, ErrorCode::InvalidConfig);
    }

    #[test]
    fn only_dynamic_keys_with_valid_values_change() {
        let set = |k: &str, v: &str| (k.to_string(), Some(v.to_string()), ConfigOpKind::Set);
        let current = BTreeMap::new();
        let c = altered_broker_configs(&current, &[set("log.retention.ms", "1000")], none).unwrap();
        assert_eq!(c["log.retention.ms"], "1000");
        let c = altered_broker_configs(
            &c,
            &[("log.retention.ms".into(), None, ConfigOpKind::Delete)],
            none,
        )
        .unwrap();
        assert!(c.is_empty());
        assert_eq!(
            altered_broker_configs(&current, &[set("log.retention.ms", "-5")], none)
                .unwrap_err()
                .0,
            ErrorCode::InvalidConfig
        );
        assert_eq!(
            altered_broker_configs(&current, &[set("num.io.threads", "4")], none)
                .unwrap_err()
                .0,
            ErrorCode::InvalidRequest
        );
        let c = altered_broker_configs(
            &current,
            &[set("unclean.leader.election.enable", "true")],
            none,
        )
        .unwrap();
        assert_eq!(c["unclean.leader.election.enable"], "true");
    }

    #[test]
    fn replication_throttle_rates_are_whole_bytes_per_second() {
        let op = |v: Option<&str>, kind| {
            let key = replication::LEADER_RATE.to_string();
            (key, v.map(str::to_string), kind)
        };
        let current = BTreeMap::new();
        let c = altered_broker_configs(&current, &[op(Some(" 1000 "), ConfigOpKind::Set)], none);
        assert_eq!(c.unwrap()[replication::LEADER_RATE], "1000");
        for (value, kind) in [
            (Some("fast"), ConfigOpKind::Set),
            (Some("-1"), ConfigOpKind::Set),
            (Some("5"), ConfigOpKind::Append),
        ] {
            let refused = altered_broker_configs(&current, &[op(value, kind)], none);
            assert_eq!(
                refused.unwrap_err().0,
                ErrorCode::InvalidConfig,
                "{value:?}"
            );
        }
        assert!(is_dynamic(replication::FOLLOWER_RATE));
    }

    #[test]
    fn election_configs_change_only_cluster_wide() {
        let set = |k: &str, v: &str| (k.to_string(), Some(v.to_string()), ConfigOpKind::Set);
        for key in CLUSTER_WIDE_ONLY {
            assert_eq!(check_resource("", &[set(key, "2")]), Ok(()));
            let refused = check_resource("3", &[set("log.retention.ms", "5"), set(key, "2")]);
            assert_eq!(refused.unwrap_err().0, ErrorCode::InvalidConfig);
        }
        assert_eq!(check_resource("3", &[set("log.retention.ms", "5")]), Ok(()));
    }

    #[test]
    fn the_cluster_minimum_isr_may_change_but_not_go() {
        let with = |value: &str| BTreeMap::from([("min.insync.replicas".to_owned(), value.into())]);
        let none = BTreeMap::new();
        assert!(keeps_cluster_min_isr("", &with("1"), &with("2")).is_ok());
        assert!(keeps_cluster_min_isr("", &none, &none).is_ok());
        let refused = keeps_cluster_min_isr("", &with("1"), &none).unwrap_err();
        assert_eq!(refused.0, ErrorCode::InvalidConfig);
        assert_eq!(
            refused.1,
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
        );
    }
}

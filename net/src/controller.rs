//! Topic create / delete / grow / reconfigure. Every change runs on shard 0,
//! one at a time, like Kafka's controller: it validates against its topic
//! table, has the owner shards create or change the partitions, then
//! broadcasts the new entry to every shard. The asking shard also applies the
//! returned update itself, so its own next request sees the change even if the
//! broadcast is still in a queue.

use crate::mesh::{PartitionOp, PartitionReply, ShardMessage};
use crate::routing::run_on_owners;
use crate::shard::Shard;
use crate::topics::{valid_topic_name, TopicEntry, TopicUpdate};
use engine::ErrorCode;
use engine::{TopicConfig, TopicPartition};
use futures::channel::oneshot;
use std::cell::Cell;
use std::rc::Rc;

/// The shard that runs the controller.
pub const CONTROLLER_SHARD: usize = 0;

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

/// A change asked of the controller.
#[derive(Debug, Clone)]
pub enum ControllerRequest {
    /// CreateTopics (or auto-creation).
    CreateTopic {
        /// Name.
        name: String,
        /// Partitions (-1: `num.partitions`).
        partitions: i32,
        /// Topic config overrides.
        configs: Vec<(String, String)>,
        /// Only check.
        validate_only: bool,
    },
    /// DeleteTopics.
    DeleteTopic {
        /// Name.
        name: String,
    },
    /// CreatePartitions: grow to `count`.
    CreatePartitions {
        /// Name.
        name: String,
        /// New total.
        count: i32,
        /// Only check.
        validate_only: bool,
    },
    /// AlterConfigs (`replace_all`) or IncrementalAlterConfigs.
    AlterConfigs {
        /// Name.
        name: String,
        /// The changes.
        ops: Vec<(String, Option<String>, ConfigOpKind)>,
        /// AlterConfigs semantics: the given set replaces every override.
        replace_all: bool,
        /// Only check.
        validate_only: bool,
    },
}

/// The controller's answer: the applied update, or a Kafka error with a message.
pub type ControllerReply = Result<TopicUpdate, (ErrorCode, String)>;

/// Controller bookkeeping (meaningful on shard 0).
#[derive(Debug)]
pub struct ControllerState {
    next_version: Cell<u64>,
    lock: glommio::sync::Semaphore,
}

impl ControllerState {
    /// Starts numbering after the versions already in the table.
    pub fn new(first_version: u64) -> Self {
        ControllerState {
            next_version: Cell::new(first_version.max(1)),
            lock: glommio::sync::Semaphore::new(1),
        }
    }

    fn take_version(&self) -> u64 {
        let version = self.next_version.get();
        self.next_version.set(version + 1);
        version
    }
}

/// Asks the controller for a change, from any shard, and applies the result locally.
pub async fn submit(shard: &Rc<Shard>, request: ControllerRequest) -> ControllerReply {
    let reply = if shard.id == CONTROLLER_SHARD {
        execute(shard, request).await
    } else {
        let (reply, receiver) = oneshot::channel();
        shard
            .send_to(
                CONTROLLER_SHARD,
                ShardMessage::Controller { request, reply },
            )
            .await
            .map_err(|e| (ErrorCode::NotLeaderOrFollower, e.to_string()))?;
        receiver.await.map_err(|_| {
            (
                ErrorCode::NotLeaderOrFollower,
                String::from("controller gone"),
            )
        })?
    };
    // Validate-only answers carry version 0 and must not change any table.
    if let Ok(update) = &reply {
        if update.version() > 0 {
            shard.apply_update(update);
        }
    }
    reply
}

/// Runs a change on the controller shard (serialized).
pub async fn execute(shard: &Rc<Shard>, request: ControllerRequest) -> ControllerReply {
    let _permit = shard
        .controller
        .lock
        .acquire_permit(1)
        .await
        .map_err(|e| (ErrorCode::UnknownServerError, e.to_string()))?;
    match request {
        ControllerRequest::CreateTopic {
            name,
            partitions,
            configs,
            validate_only,
        } => create_topic(shard, name, partitions, configs, validate_only).await,
        ControllerRequest::DeleteTopic { name } => delete_topic(shard, name).await,
        ControllerRequest::CreatePartitions {
            name,
            count,
            validate_only,
        } => create_partitions(shard, name, count, validate_only).await,
        ControllerRequest::AlterConfigs {
            name,
            ops,
            replace_all,
            validate_only,
        } => alter_configs(shard, name, ops, replace_all, validate_only).await,
    }
}

fn random_topic_id() -> [u8; 16] {
    let mut id: [u8; 16] = rand::random();
    // Kafka reserves the all-zero id (and ids starting with zero bits are fine).
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

async fn create_topic(
    shard: &Rc<Shard>,
    name: String,
    partitions: i32,
    configs: Vec<(String, String)>,
    validate_only: bool,
) -> ControllerReply {
    if !valid_topic_name(&name) {
        return Err((
            ErrorCode::InvalidTopicException,
            format!("illegal topic name '{name}'"),
        ));
    }
    if shard.topics.borrow().get(&name).is_some() {
        return Err((
            ErrorCode::TopicAlreadyExists,
            format!("topic '{name}' already exists"),
        ));
    }
    let partitions = if partitions == -1 {
        shard.config.num_partitions
    } else {
        partitions
    };
    if partitions < 1 {
        return Err((
            ErrorCode::InvalidPartitions,
            format!("partitions must be at least 1, got {partitions}"),
        ));
    }
    let config = shard
        .config
        .topic_defaults()
        .with_overrides(configs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| (ErrorCode::InvalidConfig, e.to_string()))?;
    let entry = TopicEntry {
        name: name.clone(),
        topic_id: random_topic_id(),
        partitions,
        config,
        version: 0,
    };
    if validate_only {
        return Ok(TopicUpdate::Upsert(entry));
    }
    let ops = (0..partitions)
        .map(|p| PartitionOp::Create {
            tp: TopicPartition::new(name.clone(), p),
            topic_id: entry.topic_id,
            config: entry.config.clone(),
        })
        .collect();
    first_error(run_on_owners(shard, ops).await)?;
    let update = TopicUpdate::Upsert(TopicEntry {
        version: shard.controller.take_version(),
        ..entry
    });
    shard.broadcast_update(update.clone()).await;
    tracing::info!(topic = %name, partitions, "topic created");
    Ok(update)
}

async fn delete_topic(shard: &Rc<Shard>, name: String) -> ControllerReply {
    if !shard.config.delete_topic_enable {
        return Err((
            ErrorCode::TopicDeletionDisabled,
            String::from("delete.topic.enable is false"),
        ));
    }
    let Some(entry) = shard.topics.borrow().get(&name).cloned() else {
        return Err((
            ErrorCode::UnknownTopicOrPartition,
            format!("unknown topic '{name}'"),
        ));
    };
    let ops = (0..entry.partitions)
        .map(|p| PartitionOp::Delete {
            tp: TopicPartition::new(name.clone(), p),
        })
        .collect();
    let replies = run_on_owners(shard, ops).await;
    // A partition already gone is what we wanted.
    for reply in replies {
        if let PartitionReply::Done(Err(code)) = reply {
            if code != ErrorCode::UnknownTopicOrPartition {
                return Err((code, format!("deleting '{name}' failed")));
            }
        }
    }
    let update = TopicUpdate::Delete {
        name: name.clone(),
        version: shard.controller.take_version(),
    };
    shard.broadcast_update(update.clone()).await;
    tracing::info!(topic = %name, "topic deleted");
    Ok(update)
}

async fn create_partitions(
    shard: &Rc<Shard>,
    name: String,
    count: i32,
    validate_only: bool,
) -> ControllerReply {
    let Some(entry) = shard.topics.borrow().get(&name).cloned() else {
        return Err((
            ErrorCode::UnknownTopicOrPartition,
            format!("unknown topic '{name}'"),
        ));
    };
    if count <= entry.partitions {
        return Err((
            ErrorCode::InvalidPartitions,
            format!(
                "topic has {} partitions; the new count {count} must be larger",
                entry.partitions
            ),
        ));
    }
    let grown = TopicEntry {
        partitions: count,
        ..entry.clone()
    };
    if validate_only {
        return Ok(TopicUpdate::Upsert(TopicEntry {
            version: 0,
            ..grown
        }));
    }
    let ops = (entry.partitions..count)
        .map(|p| PartitionOp::Create {
            tp: TopicPartition::new(name.clone(), p),
            topic_id: entry.topic_id,
            config: entry.config.clone(),
        })
        .collect();
    first_error(run_on_owners(shard, ops).await)?;
    let update = TopicUpdate::Upsert(TopicEntry {
        version: shard.controller.take_version(),
        ..grown
    });
    shard.broadcast_update(update.clone()).await;
    Ok(update)
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

async fn alter_configs(
    shard: &Rc<Shard>,
    name: String,
    ops: Vec<(String, Option<String>, ConfigOpKind)>,
    replace_all: bool,
    validate_only: bool,
) -> ControllerReply {
    let Some(entry) = shard.topics.borrow().get(&name).cloned() else {
        return Err((
            ErrorCode::UnknownTopicOrPartition,
            format!("unknown topic '{name}'"),
        ));
    };
    let config = altered_config(
        shard.config.topic_defaults(),
        &entry.config,
        &ops,
        replace_all,
    )?;
    if validate_only {
        return Ok(TopicUpdate::Upsert(TopicEntry {
            config,
            version: 0,
            ..entry
        }));
    }
    let ops = (0..entry.partitions)
        .map(|p| PartitionOp::AlterConfig {
            tp: TopicPartition::new(name.clone(), p),
            config: config.clone(),
        })
        .collect();
    first_error(run_on_owners(shard, ops).await)?;
    let update = TopicUpdate::Upsert(TopicEntry {
        config,
        version: shard.controller.take_version(),
        ..entry
    });
    shard.broadcast_update(update.clone()).await;
    Ok(update)
}

fn first_error(replies: Vec<PartitionReply>) -> Result<(), (ErrorCode, String)> {
    for reply in replies {
        if let PartitionReply::Done(Err(code)) = reply {
            return Err((code, String::from("partition operation failed")));
        }
    }
    Ok(())
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

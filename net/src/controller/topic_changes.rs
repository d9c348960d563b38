//! The topic changes the controller makes: create, delete, grow, reconfigure.
//! Each validates against the controller shard's topic table, has the owner
//! shards create or change the partitions, then broadcasts the new entry.

use super::config_ops::{altered_config, ConfigOpKind};
use super::{broadcast_update, ControllerReply, ControllerState};
use crate::routing::{run_on_owners, PartitionOp, PartitionReply};
use crate::shard::Shard;
use crate::topics::{valid_topic_name, TopicEntry, TopicUpdate};
use engine::ErrorCode;
use engine::TopicPartition;
use std::rc::Rc;

fn random_topic_id() -> [u8; 16] {
    let mut id: [u8; 16] = rand::random();
    // Kafka reserves the all-zero id (and ids starting with zero bits are fine).
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

pub(super) async fn create_topic(
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
    let update = create_then_publish(shard, 0..partitions, entry).await?;
    tracing::info!(topic = %name, partitions, "topic created");
    Ok(update)
}

pub(super) async fn delete_topic(shard: &Rc<Shard>, name: String) -> ControllerReply {
    if !shard.config.delete_topic_enable {
        return Err((
            ErrorCode::TopicDeletionDisabled,
            String::from("delete.topic.enable is false"),
        ));
    }
    let entry = existing_topic(shard, &name)?;
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
        version: shard.service::<ControllerState>().take_version(),
    };
    broadcast_update(shard, update.clone()).await;
    tracing::info!(topic = %name, "topic deleted");
    Ok(update)
}

pub(super) async fn create_partitions(
    shard: &Rc<Shard>,
    name: String,
    count: i32,
    validate_only: bool,
) -> ControllerReply {
    let entry = existing_topic(shard, &name)?;
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
    create_then_publish(shard, entry.partitions..count, grown).await
}

pub(super) async fn alter_configs(
    shard: &Rc<Shard>,
    name: String,
    ops: Vec<(String, Option<String>, ConfigOpKind)>,
    replace_all: bool,
    validate_only: bool,
) -> ControllerReply {
    let entry = existing_topic(shard, &name)?;
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
        version: shard.service::<ControllerState>().take_version(),
        ..entry
    });
    broadcast_update(shard, update.clone()).await;
    Ok(update)
}

/// Has the owners create `partitions` of `entry`'s topic, then gives the
/// entry its version and broadcasts it (CreateTopics, CreatePartitions).
async fn create_then_publish(
    shard: &Rc<Shard>,
    partitions: std::ops::Range<i32>,
    entry: TopicEntry,
) -> ControllerReply {
    let ops = partitions
        .map(|p| PartitionOp::Create {
            tp: TopicPartition::new(entry.name.clone(), p),
            topic_id: entry.topic_id,
            config: entry.config.clone(),
        })
        .collect();
    first_error(run_on_owners(shard, ops).await)?;
    let update = TopicUpdate::Upsert(TopicEntry {
        version: shard.service::<ControllerState>().take_version(),
        ..entry
    });
    broadcast_update(shard, update.clone()).await;
    Ok(update)
}

/// The topic's entry, or UNKNOWN_TOPIC_OR_PARTITION.
fn existing_topic(shard: &Shard, name: &str) -> Result<TopicEntry, (ErrorCode, String)> {
    shard.topics.borrow().get(name).cloned().ok_or_else(|| {
        (
            ErrorCode::UnknownTopicOrPartition,
            format!("unknown topic '{name}'"),
        )
    })
}

fn first_error(replies: Vec<PartitionReply>) -> Result<(), (ErrorCode, String)> {
    for reply in replies {
        if let PartitionReply::Done(Err(code)) = reply {
            return Err((code, String::from("partition operation failed")));
        }
    }
    Ok(())
}

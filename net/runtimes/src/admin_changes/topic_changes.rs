//! The topic changes a broker asks of the cluster: create, delete, grow,
//! reconfigure. Each is validated here against the broker's settings and
//! topic table (so a bad request is refused without a round trip), then
//! sent to the active controller, which decides the records (placement,
//! ids) and commits them through the metadata quorum. The answer waits
//! until this broker's reconciler has applied that commit and every shard's
//! topic table is derived from it, so the client's next request sees the
//! change on any shard.

use super::config_ops::{altered_config, ConfigOpKind};
use super::reconcile::wait_reconciled;
use super::tiered_configs::check_tiering;
use super::topic_id::random_topic_id;
use super::{ControllerReply, TopicChange, DEFAULT_REPLICATION, INTERNAL_REPLICATION};
use crate::cluster_runtime::{call_controller_until_answered, ControllerRpc};
use crate::Shard;
use cluster::placement::{internal_topic_replication_factor, PlacementError};
use engine::ErrorCode;
use kernel::topics::{valid_topic_name, TopicEntry};
use std::rc::Rc;

/// The metadata log's name, which no topic may take.
const METADATA_TOPIC: &str = "__cluster_metadata";

/// Where a new topic's partitions go.
pub(super) struct Placement {
    /// Partition count (-1: `num.partitions`), when not assigned.
    pub partitions: i32,
    /// Replicas per partition, or [`DEFAULT_REPLICATION`] / [`INTERNAL_REPLICATION`].
    pub replication_factor: i16,
    /// Explicit (partition, replicas); empty: placed.
    pub assignment: Vec<(i32, Vec<i32>)>,
}

/// CreateTopics of one topic: validated here, then (unless `validate_only`)
/// created by the controller; answers once this broker has applied it.
pub(super) async fn create_topic(
    shard: &Rc<Shard>,
    name: String,
    placement: Placement,
    configs: Vec<(String, String)>,
    validate_only: bool,
) -> ControllerReply {
    let Placement {
        partitions,
        replication_factor,
        assignment,
    } = placement;
    check_new_topic_name(shard, &name)?;
    let partitions = partition_count(shard, partitions, &assignment);
    let replication_factor = effective_replication_factor(shard, replication_factor);
    if assignment.is_empty() && replication_factor < 1 {
        return Err((
            ErrorCode::InvalidReplicationFactor,
            format!("replication factor must be at least 1, got {replication_factor}"),
        ));
    }
    if partitions < 1 {
        return Err((
            ErrorCode::InvalidPartitions,
            format!("partitions must be at least 1, got {partitions}"),
        ));
    }
    let defaults = &super::topic_defaults::topic_defaults(shard);
    let config = defaults
        .with_overrides(configs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| (ErrorCode::InvalidConfig, e.to_string()))?;
    check_tiering(shard, &config, None)?;
    let entry = TopicEntry {
        name: name.clone(),
        topic_id: random_topic_id(),
        partitions,
        config,
    };
    if validate_only {
        return Ok(TopicChange::Upsert(Box::new(entry)));
    }
    let request = ControllerRpc::CreateTopic {
        name: name.clone(),
        topic_id: entry.topic_id,
        partitions,
        replication_factor,
        assignment,
        configs: entry.config.overrides_against(defaults),
    };
    let update = commit_then_read(shard, request, &name).await?;
    tracing::info!(topic = %name, partitions, "topic created");
    Ok(update)
}

/// Refuses a name no new topic may take: an illegal one, the metadata
/// log's, or one a topic already has.
fn check_new_topic_name(shard: &Shard, name: &str) -> Result<(), (ErrorCode, String)> {
    if !valid_topic_name(name) {
        return Err((
            ErrorCode::InvalidTopicException,
            format!("illegal topic name '{name}'"),
        ));
    }
    if name == METADATA_TOPIC {
        return Err((
            ErrorCode::InvalidRequest,
            format!("creation of the internal topic {METADATA_TOPIC} is prohibited"),
        ));
    }
    if shard.topics.borrow().get(name).is_some() {
        return Err((
            ErrorCode::TopicAlreadyExists,
            format!("topic '{name}' already exists"),
        ));
    }
    Ok(())
}

/// A new topic's partition count: the explicit assignment's, else the
/// one asked for (`-1`: `num.partitions`).
fn partition_count(shard: &Shard, partitions: i32, assignment: &[(i32, Vec<i32>)]) -> i32 {
    if !assignment.is_empty() {
        i32::try_from(assignment.len()).unwrap_or(i32::MAX)
    } else if partitions == -1 {
        shard.config.num_partitions
    } else {
        partitions
    }
}

/// The replication factor asked for, with [`DEFAULT_REPLICATION`] made
/// `default.replication.factor` and [`INTERNAL_REPLICATION`] the internal
/// topics' factor for the brokers not fenced now.
fn effective_replication_factor(shard: &Shard, replication_factor: i16) -> i16 {
    match replication_factor {
        DEFAULT_REPLICATION => shard.config.default_replication_factor,
        INTERNAL_REPLICATION => {
            let live = shard
                .runtime()
                .view
                .clone()
                .image()
                .brokers()
                .values()
                .filter(|b| !b.fenced)
                .count();
            internal_topic_replication_factor(
                shard.config.internal_topics_replication_factor.max(1),
                live,
            )
        }
        factor => factor,
    }
}

pub(super) async fn delete_topic(shard: &Rc<Shard>, name: String) -> ControllerReply {
    if !shard.config.delete_topic_enable {
        return Err((
            ErrorCode::TopicDeletionDisabled,
            String::from("delete.topic.enable is false"),
        ));
    }
    let entry = existing_topic(shard, &name)?;
    let request = ControllerRpc::DeleteTopic {
        name: name.clone(),
        topic_id: entry.topic_id,
    };
    commit(shard, request).await?;
    tracing::info!(topic = %name, "topic deleted");
    Ok(TopicChange::Delete { name })
}

/// CreatePartitions of one topic: grown to `count`, the new partitions
/// placed or, with an `assignment`, on the brokers it lists (checked by
/// the controller against the registered brokers and the topic's
/// replication factor, as KRaft does).
pub(super) async fn create_partitions(
    shard: &Rc<Shard>,
    name: String,
    count: i32,
    assignment: Vec<Vec<i32>>,
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
    // The controller checks this too; here it also answers `validate_only`.
    let added = count - entry.partitions;
    if !assignment.is_empty() && usize::try_from(added).ok() != Some(assignment.len()) {
        let mismatch = PlacementError::AssignmentCountMismatch {
            added,
            assignments: assignment.len(),
        };
        return Err((mismatch.error_code(), mismatch.to_string()));
    }
    if validate_only {
        return Ok(TopicChange::Upsert(Box::new(TopicEntry {
            partitions: count,
            ..entry
        })));
    }
    commit_then_read(
        shard,
        ControllerRpc::CreatePartitions {
            name: name.clone(),
            count,
            from_count: entry.partitions,
            assignment,
        },
        &name,
    )
    .await
}

pub(super) async fn alter_configs(
    shard: &Rc<Shard>,
    name: String,
    ops: Vec<(String, Option<String>, ConfigOpKind)>,
    replace_all: bool,
    validate_only: bool,
) -> ControllerReply {
    let entry = existing_topic(shard, &name)?;
    let defaults = &super::topic_defaults::topic_defaults(shard);
    let config = altered_config(defaults, &entry.config, &ops, replace_all)?;
    check_tiering(shard, &config, Some(&entry.config))?;
    if validate_only {
        return Ok(TopicChange::Upsert(Box::new(TopicEntry {
            config,
            ..entry
        })));
    }
    let request = ControllerRpc::SetTopicConfigs {
        name: name.clone(),
        configs: config.overrides_against(defaults),
    };
    commit_then_read(shard, request, &name).await
}

/// Has the controller commit `request` and waits until this broker has
/// applied it; returns the commit's metadata offset.
async fn commit(shard: &Rc<Shard>, request: ControllerRpc) -> Result<i64, (ErrorCode, String)> {
    match call_controller_until_answered(shard, request).await? {
        crate::cluster_runtime::ControllerReply::Committed { offset } => {
            wait_reconciled(shard, offset).await;
            Ok(offset)
        }
        other => Err((
            ErrorCode::UnknownServerError,
            format!("unexpected controller answer {other:?}"),
        )),
    }
}

/// [`commit`], then the topic's entry as this broker now has it.
async fn commit_then_read(
    shard: &Rc<Shard>,
    request: ControllerRpc,
    name: &str,
) -> ControllerReply {
    commit(shard, request).await?;
    match shard.topics.borrow().get(name) {
        Some(entry) => Ok(TopicChange::Upsert(Box::new(entry.clone()))),
        // Deleted again by a later change, already applied.
        None => Err((
            ErrorCode::UnknownTopicOrPartition,
            format!("topic '{name}' is gone"),
        )),
    }
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

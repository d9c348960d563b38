//! Topic create / delete / grow / reconfigure. Every change runs on shard 0,
//! one at a time, like Kafka's controller: it validates against its topic
//! table, has the owner shards create or change the partitions, then
//! broadcasts the new entry to every shard. The asking shard also applies the
//! returned update itself, so its own next request sees the change even if the
//! broadcast is still in a queue.
//!
//! - [`topic_changes`]: the changes themselves.
//! - [`config_ops`]: topic config edits (pure).

mod config_ops;
mod topic_changes;

pub use config_ops::{altered_config, ConfigOpKind};

use crate::call::OwnerCall;
use crate::mesh::Envelope;
use crate::shard::{Shard, ShardService};
use crate::topics::TopicUpdate;
use engine::ErrorCode;
use std::cell::Cell;
use std::rc::Rc;

/// The shard that runs the controller.
pub const CONTROLLER_SHARD: usize = 0;

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

/// Controller bookkeeping (meaningful on the controller shard).
#[derive(Debug)]
pub struct ControllerState {
    next_version: Cell<u64>,
    lock: glommio::sync::Semaphore,
}

impl ShardService for ControllerState {
    /// Starts numbering after the versions already in the table.
    fn build(shard: &Shard) -> Self {
        let first_version = shard.topics.borrow().max_version() + 1;
        ControllerState {
            next_version: Cell::new(first_version.max(1)),
            lock: glommio::sync::Semaphore::new(1),
        }
    }
}

impl ControllerState {
    fn take_version(&self) -> u64 {
        let version = self.next_version.get();
        self.next_version.set(version + 1);
        version
    }
}

impl OwnerCall for ControllerRequest {
    type Reply = ControllerReply;

    async fn run(self, shard: Rc<Shard>) -> ControllerReply {
        execute(&shard, self).await
    }
}

/// Asks the controller for a change, from any shard, and applies the result locally.
pub async fn submit(shard: &Rc<Shard>, request: ControllerRequest) -> ControllerReply {
    let reply = shard
        .call(CONTROLLER_SHARD, request)
        .await
        .map_err(|e| (ErrorCode::NotLeaderOrFollower, e.to_string()))?;
    // Validate-only answers carry version 0 and must not change any table.
    if let Ok(update) = &reply {
        if update.version() > 0 {
            shard.apply_update(update);
        }
    }
    reply
}

/// Runs a change on the controller shard (serialized).
async fn execute(shard: &Rc<Shard>, request: ControllerRequest) -> ControllerReply {
    let state = shard.service::<ControllerState>();
    let _permit = state
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
        } => topic_changes::create_topic(shard, name, partitions, configs, validate_only).await,
        ControllerRequest::DeleteTopic { name } => topic_changes::delete_topic(shard, name).await,
        ControllerRequest::CreatePartitions {
            name,
            count,
            validate_only,
        } => topic_changes::create_partitions(shard, name, count, validate_only).await,
        ControllerRequest::AlterConfigs {
            name,
            ops,
            replace_all,
            validate_only,
        } => topic_changes::alter_configs(shard, name, ops, replace_all, validate_only).await,
    }
}

/// Applies a change here and has every other shard apply it. The change is
/// applied in the receiving shard's receive loop itself, not in a task of its
/// own, so it takes effect in the order the mesh delivers it, before any
/// later message from this shard.
async fn broadcast_update(shard: &Rc<Shard>, update: TopicUpdate) {
    shard.apply_update(&update);
    for other in (0..shard.count).filter(|&s| s != shard.id) {
        let update = update.clone();
        let message = Envelope::new(move |receiver: &Rc<Shard>| receiver.apply_update(&update));
        if let Err(e) = shard.send_to(other, message).await {
            tracing::warn!(shard = other, error = %e, "topic update not delivered");
        }
    }
}

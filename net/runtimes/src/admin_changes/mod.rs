//! Topic create / delete / grow / reconfigure, as this broker asks them of
//! the cluster, and the reconciler that applies the committed metadata to
//! this broker's partitions.
//!
//! A change runs on shard 0 (the metadata shard), one at a time: validated
//! against the topic table, committed by the active controller through the
//! metadata quorum, applied here by the reconciler, then answered — once
//! every shard's topic table (derived from the image each shard holds) is at
//! the commit's offset, so the client's next request sees the change on any
//! shard.
//!
//! - [`topic_changes`]: the changes themselves.
//! - [`reconcile`]: image → local partitions.
//! - [`config_ops`]: topic config edits (pure).
//! - [`acls`]: CreateAcls / DeleteAcls, committed through the controller.
//! - [`broker_configs`]: dynamic broker configs (IncrementalAlterConfigs).
//! - [`client_metrics`]: client-metrics subscriptions (KIP-714).
//! - [`group_configs`]: group configs (GROUP resources: share groups' settings).
//! - [`named_configs`]: the change of a client-metrics subscription's or a
//!   group's configs, committed through the controller.
//! - [`client_quotas`]: client quotas (AlterClientQuotas).
//! - [`commit`]: one ACL, credential or quota change through the controller.
//! - [`elections`]: ElectLeaders through the controller.
//! - [`topic_defaults`]: the topic defaults in force (file, then dynamic).
//! - [`scram_credentials`]: SASL/SCRAM users (AlterUserScramCredentials,
//!   bootstrap users).

pub mod acls;
pub mod broker_configs;
pub mod client_metrics;
pub mod client_quotas;
pub mod commit;
mod config_ops;
pub mod elections;
pub mod group_configs;
pub mod named_configs;
mod reconcile;
pub mod scram_credentials;
mod tiered_configs;
mod topic_changes;
pub mod topic_defaults;
mod topic_id;

pub use config_ops::{altered_config, ConfigOpKind};
pub use reconcile::{start as start_reconciler, wait_reconciled, Reconciler};

use crate::Shard;
use engine::ErrorCode;
use kernel::call::OwnerCall;
use kernel::topics::TopicEntry;
use std::rc::Rc;

/// `replication_factor` of a CreateTopic that takes `default.replication.factor`.
pub const DEFAULT_REPLICATION: i16 = -1;
/// `replication_factor` of an internal topic (`offsets.topic.replication.factor`,
/// `transaction.state.log.replication.factor`): Kafka's 3, capped by the live brokers.
pub const INTERNAL_REPLICATION: i16 = -2;

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
        /// Replicas per partition ([`DEFAULT_REPLICATION`]: the broker's
        /// `default.replication.factor`; [`INTERNAL_REPLICATION`]: the
        /// internal topics' factor, capped by the live brokers).
        replication_factor: i16,
        /// CreateTopics' explicit (partition, replicas); empty: placed.
        assignment: Vec<(i32, Vec<i32>)>,
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
        /// One replica list per new partition, in order; empty: placed.
        assignment: Vec<Vec<i32>>,
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

/// What a topic change did (or, validated only, would do).
#[derive(Debug, Clone)]
pub enum TopicChange {
    /// Created, grown or reconfigured: the topic as it is now (as it would
    /// be, validated only). Boxed: an entry holds a whole topic config.
    Upsert(Box<TopicEntry>),
    /// Deleted.
    Delete {
        /// Topic name.
        name: String,
    },
}

/// The controller's answer: the change, or a Kafka error with a message.
pub type ControllerReply = Result<TopicChange, (ErrorCode, String)>;

/// Controller bookkeeping (meaningful on the controller shard): topic
/// changes from this broker run one at a time.
#[derive(Debug)]
pub struct ControllerState {
    lock: glommio::sync::Semaphore,
}

impl Default for ControllerState {
    fn default() -> Self {
        ControllerState {
            lock: glommio::sync::Semaphore::new(1),
        }
    }
}

impl OwnerCall<crate::ShardRuntime> for ControllerRequest {
    type Reply = ControllerReply;

    async fn run(self, shard: Rc<Shard>) -> ControllerReply {
        execute(&shard, self).await
    }
}

/// Asks the controller for a change, from any shard. A committed change is
/// answered once every shard's table holds it, the asking one's too.
pub async fn submit(shard: &Rc<Shard>, request: ControllerRequest) -> ControllerReply {
    shard
        .call(CONTROLLER_SHARD, request)
        .await
        .map_err(|e| (ErrorCode::NotLeaderOrFollower, e.to_string()))?
}

/// The partition count of internal topic `name` (a coordinator's:
/// `__consumer_offsets`, `__transaction_state`, `__share_group_state`),
/// creating it first with `partitions`, internal replication and `configs`
/// when it does not exist yet. COORDINATOR_NOT_AVAILABLE when it cannot be.
pub async fn ensure_internal_topic(
    shard: &Rc<Shard>,
    name: &str,
    partitions: i32,
    configs: Vec<(String, String)>,
) -> Result<i32, ErrorCode> {
    let count = |shard: &Shard| shard.topics.borrow().get(name).map(|e| e.partitions);
    if let Some(partitions) = count(shard) {
        return Ok(partitions);
    }
    let request = ControllerRequest::CreateTopic {
        name: name.to_string(),
        partitions,
        configs,
        replication_factor: INTERNAL_REPLICATION,
        assignment: Vec::new(),
        validate_only: false,
    };
    match submit(shard, request).await {
        Ok(_) | Err((ErrorCode::TopicAlreadyExists, _)) => {}
        Err((code, message)) => {
            tracing::warn!(%code, %message, topic = name, "cannot create an internal topic");
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
    }
    count(shard).ok_or(ErrorCode::CoordinatorNotAvailable)
}

/// Runs `change` on the controller shard holding the admin lock, so that
/// topic, broker-config and client-metrics changes decide one at a time,
/// each on the image the one before it left.
pub(crate) async fn one_at_a_time<T>(
    shard: &Rc<Shard>,
    change: impl std::future::Future<Output = Result<T, (ErrorCode, String)>>,
) -> Result<T, (ErrorCode, String)> {
    let state = shard.runtime().admin_changes.clone();
    let _permit = state
        .lock
        .acquire_permit(1)
        .await
        .map_err(|e| (ErrorCode::UnknownServerError, e.to_string()))?;
    change.await
}

/// Runs a change on the controller shard (serialized).
async fn execute(shard: &Rc<Shard>, request: ControllerRequest) -> ControllerReply {
    one_at_a_time(shard, execute_now(shard, request)).await
}

async fn execute_now(shard: &Rc<Shard>, request: ControllerRequest) -> ControllerReply {
    match request {
        ControllerRequest::CreateTopic {
            name,
            partitions,
            configs,
            replication_factor,
            assignment,
            validate_only,
        } => {
            let placement = topic_changes::Placement {
                partitions,
                replication_factor,
                assignment,
            };
            topic_changes::create_topic(shard, name, placement, configs, validate_only).await
        }
        ControllerRequest::DeleteTopic { name } => topic_changes::delete_topic(shard, name).await,
        ControllerRequest::CreatePartitions {
            name,
            count,
            assignment,
            validate_only,
        } => topic_changes::create_partitions(shard, name, count, assignment, validate_only).await,
        ControllerRequest::AlterConfigs {
            name,
            ops,
            replace_all,
            validate_only,
        } => topic_changes::alter_configs(shard, name, ops, replace_all, validate_only).await,
    }
}

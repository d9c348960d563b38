//! One shard's runtimes as one struct, built in one constructor
//! ([`ShardRuntime::open`]) and installed in the kernel's shard before it
//! serves anything. Every part is a field: what a shard runs is read off
//! this type, and the parts only some shards have are `Option`s.

use crate::admin_changes::ControllerState;
use crate::admin_changes::Reconciler;
use crate::cluster_runtime::{self, AclView, ClusterView, MetadataQuorum};
use crate::group_runtime::GroupRuntime;
use crate::producer_id_pool::{self, ProducerIdAllocator, ProducerIdPool};
use crate::quotas::{QuotaManager, Sensors};
use crate::replication_runtime::ReplicaManager;
use crate::routing::MarkerHooks;
use crate::txn_runtime::TxnRuntime;
use std::rc::Rc;
use std::sync::Arc;

/// The kernel's shard with the broker's runtimes.
pub type Shard = kernel::shard::Shard<ShardRuntime>;

/// What the broker's shards send each other.
pub type ShardMessage = kernel::shard::ShardMessage<ShardRuntime>;

/// The runtimes of one shard. Parts are `Rc` so that a task may hold one
/// across an await while the shard keeps serving.
pub struct ShardRuntime {
    /// This shard's copy of the committed metadata image.
    pub view: Rc<ClusterView>,
    /// The authorizer, rebuilt from the image when its ACLs change.
    pub acls: Rc<AclView>,
    /// The roles of this shard's replicated partitions.
    pub replicas: Rc<ReplicaManager>,
    /// The group coordinator's state for the partitions led here.
    pub groups: Rc<GroupRuntime>,
    /// The transaction coordinator's state for the partitions led here.
    pub txns: Rc<TxnRuntime>,
    /// The rest of this shard's current producer-id block.
    pub producer_ids: Rc<ProducerIdPool>,
    /// Serializes the admin changes this shard asks of the cluster.
    pub admin_changes: Rc<ControllerState>,
    /// How far committed metadata is applied to this broker's partitions
    /// (meaningful on [`cluster_runtime::METADATA_SHARD`]).
    pub reconciler: Rc<Reconciler>,
    /// Run after every transaction marker this shard writes.
    pub marker_hooks: Rc<MarkerHooks>,
    /// This shard's handle on the broker's quota sensors.
    pub quotas: Rc<QuotaManager>,
    /// The durable producer-id block store: on
    /// [`producer_id_pool::ALLOCATOR_SHARD`] of a single node only.
    pub producer_id_allocator: Option<Rc<ProducerIdAllocator>>,
    /// The metadata quorum member (a voter or an observer): on
    /// [`cluster_runtime::METADATA_SHARD`] only. Its tasks start later,
    /// with [`cluster_runtime::start`].
    pub quorum: Option<Rc<MetadataQuorum>>,
}

impl ShardRuntime {
    /// Builds every part from the shard's id and settings, opening what
    /// this shard keeps on disk (the metadata log, the producer-id block
    /// store); a store that cannot be opened stops the shard's start.
    pub fn open(shard: &Shard, quota_sensors: Arc<Sensors>) -> Result<ShardRuntime, String> {
        let id = shard.id;
        let producer_id_allocator = producer_id_pool::open_allocator(shard)
            .map_err(|e| format!("shard {id}: {e}"))?
            .map(Rc::new);
        let quorum = cluster_runtime::open_quorum(shard)
            .map_err(|e| format!("shard {id}: {e}"))?
            .map(Rc::new);
        Ok(ShardRuntime {
            view: Rc::default(),
            acls: Rc::default(),
            replicas: Rc::default(),
            groups: Rc::new(GroupRuntime::new(&shard.config, id)),
            txns: Rc::default(),
            producer_ids: Rc::new(ProducerIdPool::new()),
            admin_changes: Rc::default(),
            reconciler: Rc::new(Reconciler::new(&shard.topic_table(), quorum.as_deref())),
            marker_hooks: Rc::default(),
            quotas: Rc::new(QuotaManager::new(quota_sensors)),
            producer_id_allocator,
            quorum,
        })
    }
}

//! rill's per-shard runtimes: the services a shard runs, each a thin layer of
//! I/O around a pure core.
//!
//! A runtime persists what its core decides (through the replicated log),
//! then replies; it runs on the shard that owns the partition or the
//! coordinator it serves, and reaches other shards only by the kernel's owner
//! call. The Kafka API layer above calls these; none of them knows a frame
//! or a handler.
//!
//! ```text
//! routing ─────────────┐            split a request's partitions by owner shard
//! admin_changes ───────┤            topics, configs, ACLs, quotas, on shard 0
//! group_runtime ───────┤            coordinators (cores: rill-coordinators)
//! txn_runtime ─────────┤
//! producer_id_pool ────┤            producer-id blocks for InitProducerId
//! share_runtime ───────┤            share groups: record locks on the owners
//! quotas ──────────────┤            client byte-rate quotas, throttling
//! telemetry ───────────┤            client metrics pushed (KIP-714), per shard
//!                      ↓
//! replication_runtime               leaders serve followers, hold the HW;
//!                      ↓            followers fetch
//! cluster_runtime                   the metadata quorum member, broker
//!                                   registration, every shard's view
//!                                   (and topic table derived from it)
//! ```
//!
//! - [`ShardRuntime`] (here, at the crate root: the runtimes' face): the
//!   struct of one shard's runtimes, built in one constructor and installed
//!   in the kernel's shard; [`Shard`] is the kernel's shard with it. Every
//!   runtime is a field, and the parts only some shards have are `Option`s,
//!   so what a shard runs is read off this type.
//! - [`routing`]: split a request's partitions by owner, run, join.
//! - [`admin_changes`]: the metadata changes this broker asks of the
//!   cluster (topics, configs, ACLs, quotas, SCRAM credentials), serialized
//!   on shard 0, and the reconciler that applies committed metadata to the
//!   broker's partition logs (each shard's topic table is derived from its
//!   image by [`cluster_runtime`]).
//! - [`group_runtime`]: the group coordinator on shards: placement by
//!   `__consumer_offsets` partition, leases, persistence, timers, loading.
//! - [`txn_runtime`]: the transaction coordinator on shards: placement by
//!   `__transaction_state` partition, persistence, markers, timeouts.
//! - [`producer_id_pool`]: producer ids for InitProducerId, from persisted blocks
//!   of 1000 (KIP-730) that shard 0 allocates and every shard draws from.
//! - [`quotas`]: client quotas (produce/fetch byte rates per user and client
//!   id): the windowed rates shared by the shards, and throttling.
//! - [`replication_runtime`]: replicated partitions — the leader serving
//!   followers and holding the HW, the followers' fetchers.
//! - [`cluster_runtime`]: the metadata quorum member on shard 0, its
//!   transport, broker registration and heartbeats, every shard's view.
//! - [`fetch_sessions`]: this shard's cache of incremental fetch sessions
//!   (KIP-227), for the Fetch handler.
//! - [`share_runtime`]: share groups (KIP-932): the records' delivery state
//!   on each partition's owner, and the share sessions.
//! - [`share_coordinator`]: the share-partitions' durable state in
//!   `__share_group_state`, on the leaders of its partitions.
//! - [`telemetry`]: client telemetry (KIP-714): the subscriptions a client
//!   gets, its pushes, and the series `/metrics` shows; per shard.
//! - [`tiered`]: tiered storage (KIP-405): uploads of sealed segments,
//!   remote retention, and fetches served from the object store;
//!   [`remote_keys`], the names of its objects.

pub mod admin_changes;
pub mod cluster_runtime;
pub mod fetch_sessions;
pub mod group_runtime;
pub mod producer_id_pool;
pub mod quotas;
pub mod remote_keys;
pub mod replication_runtime;
pub mod routing;
pub mod share_coordinator;
pub mod share_runtime;
pub mod telemetry;
pub mod tiered;
pub mod txn_runtime;

use admin_changes::{ControllerState, Reconciler};
use cluster_runtime::{AclView, ClusterView, MetadataQuorum};
use fetch_sessions::FetchSessionCache;
use group_runtime::GroupRuntime;
use producer_id_pool::{ProducerIdAllocator, ProducerIdPool};
use quotas::{QuotaManager, Sensors};
use replication_runtime::ReplicaManager;
use routing::{JoinGuards, MarkerHooks};
use share_coordinator::ShareCoordinator;
use share_runtime::ShareRuntime;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use telemetry::TelemetryRuntime;
use tiered::TieredRuntime;
use txn_runtime::TxnRuntime;

/// The kernel's shard with the broker's runtimes.
pub type Shard = kernel::shard::Shard<ShardRuntime>;

/// What the broker's shards send each other.
pub type ShardMessage = kernel::shard::ShardMessage<ShardRuntime>;

/// What the broker's shards share, built once before they start (`Send`).
pub struct SharedParts {
    /// The broker's quota sensors.
    pub quota_sensors: Arc<Sensors>,
    /// The object store of tiered storage, when it is on.
    pub remote_store: Option<remote_storage::RemoteStore>,
    /// The broker's remote copy and fetch quotas.
    pub remote_quotas: Arc<tiered::quota::RemoteQuotas>,
}

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
    /// The partition leaders' transaction checks in flight here, and how
    /// they ask the coordinator (see [`routing::txn_join`]).
    pub join_guards: Rc<JoinGuards>,
    /// This shard's handle on the broker's quota sensors.
    pub quotas: Rc<QuotaManager>,
    /// This shard's incremental fetch sessions.
    pub fetch_sessions: Rc<RefCell<FetchSessionCache>>,
    /// Share groups (KIP-932): the delivery state of the partitions owned
    /// here, and the share sessions of this shard's connections.
    pub share: Rc<ShareRuntime>,
    /// The share coordinator's state for the `__share_group_state`
    /// partitions led here.
    pub share_coordinator: Rc<ShareCoordinator>,
    /// This shard's client telemetry instances and subscriptions.
    pub telemetry: Rc<TelemetryRuntime>,
    /// Tiered storage: the broker's object store and this shard's remote
    /// log work.
    pub tiered: Rc<TieredRuntime>,
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
    pub fn open(shard: &Shard, shared: SharedParts) -> Result<ShardRuntime, String> {
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
            join_guards: Rc::default(),
            quotas: Rc::new(QuotaManager::new(shared.quota_sensors)),
            fetch_sessions: Rc::new(RefCell::new(FetchSessionCache::new(
                shard.config.fetch_session_cache_slots,
                id,
                shard.count,
            ))),
            share: Rc::new(ShareRuntime::new(
                shard.config.group.share.max_sessions,
                id,
                shard.count,
            )),
            share_coordinator: Rc::default(),
            telemetry: Rc::new(TelemetryRuntime::new(&shard.config, id, shard.count)),
            tiered: Rc::new(TieredRuntime::new(
                shared.remote_store,
                shared.remote_quotas,
            )),
            producer_id_allocator,
            quorum,
        })
    }
}

//! One shard's state. **Shard-local** (`Rc`, `RefCell`): built on its glommio
//! executor and never shared with another core; other shards are reached only
//! through [`Shard::call`] (see [`crate::call`]).
//!
//! The shard is the bottom of net's runtime: it holds the engine's logs, the
//! topic table, the mesh, the send path, metrics, and the table of services
//! ([`ShardService`]) that the layers above register by building them here.
//! It imports no service.

use crate::config::BrokerConfig;
use crate::error::RequestError;
use crate::mesh::Envelope;
use crate::metrics::ShardMetrics;
use crate::sendpath::Sender;
use crate::services::Services;
use crate::topics::{TopicTable, TopicUpdate};
use engine::{LogManager, TopicPartition};
use glommio::channels::channel_mesh::Senders;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// What shards send each other: a job opened on the receiving shard.
pub type ShardMessage = Envelope<Shard>;

/// A runtime with one instance per shard (group and transaction
/// coordinators, controller state, producer-id pool, …), built on first use
/// and found with [`Shard::service`].
pub trait ShardService: 'static {
    /// Builds this shard's instance from the shard's id, config and tables.
    fn build(shard: &Shard) -> Self;
}

/// The state of one shard.
pub struct Shard {
    /// This shard's id (its place in the channel mesh).
    pub id: usize,
    /// Number of shards.
    pub count: usize,
    /// Broker settings.
    pub config: Arc<BrokerConfig>,
    /// This shard's partitions.
    pub logs: Rc<LogManager>,
    /// This shard's copy of the topic table.
    pub topics: RefCell<TopicTable>,
    /// Queues to the other shards (`None` with a single shard).
    pub peers: Option<Senders<ShardMessage>>,
    /// The fetch/response send path of this shard.
    pub sender: Rc<Sender>,
    /// Counters and histograms of this shard.
    pub metrics: RefCell<ShardMetrics>,
    /// Open connections of the whole broker (for `max.connections`): an
    /// atomic touched once per accept and close, never on the request path.
    pub open_connections: Arc<AtomicUsize>,
    /// Open connections per client address, of the whole broker (for
    /// `max.connections.per.ip`).
    pub per_ip_connections: Arc<crate::conn_limits::PerIpConnections>,
    /// This shard's services, by type.
    pub services: Services,
}

impl Shard {
    /// The shard that owns `tp`.
    pub fn owner(&self, tp: &TopicPartition) -> usize {
        engine::shard::shard_of(&tp.topic, tp.partition, self.count)
    }

    /// Wall-clock milliseconds since the epoch, from the broker's one clock
    /// (`engine::Clock`: the system clock, or a test's manual clock).
    pub fn now_ms(&self) -> i64 {
        self.config.engine.clock.now_ms()
    }

    /// This shard's instance of service `T`, built on first use.
    pub fn service<T: ShardService>(&self) -> Rc<T> {
        self.services.get_or_build(|| T::build(self))
    }

    /// Queues a message to another shard; fails only when that shard has
    /// gone away. Services use [`Shard::call`] rather than this.
    pub async fn send_to(&self, shard: usize, message: ShardMessage) -> Result<(), RequestError> {
        let peers = self.peers.as_ref().ok_or(RequestError::ShardGone(shard))?;
        peers
            .send_to(shard, message)
            .await
            .map_err(|_| RequestError::ShardGone(shard))
    }

    /// Applies a topic-table change to this shard's copy.
    pub fn apply_update(&self, update: &TopicUpdate) {
        self.topics.borrow_mut().apply(update);
    }
}

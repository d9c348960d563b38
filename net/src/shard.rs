//! One shard's state. **Shard-local** (`Rc`, `RefCell`): built on its glommio
//! executor and never shared with another core; other shards are reached only
//! through [`Shard::send_to`].

use crate::config::BrokerConfig;
use crate::error::RequestError;
use crate::mesh::ShardMessage;
use crate::metrics::ShardMetrics;
use crate::sendpath::Sender;
use crate::topics::{TopicTable, TopicUpdate};
use engine::{LogManager, TopicPartition};
use glommio::channels::channel_mesh::Senders;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

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
    /// Controller state (used on shard 0 only).
    pub controller: crate::controller::ControllerState,
    /// The group coordinator of the `__consumer_offsets` partitions this shard owns.
    pub groups: crate::group_runtime::GroupRuntime,
}

impl Shard {
    /// The shard that owns `tp`.
    pub fn owner(&self, tp: &TopicPartition) -> usize {
        engine::shard::shard_of(&tp.topic, tp.partition, self.count)
    }

    /// Sends a message to another shard; fails only when that shard has gone away.
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

    /// Applies a change here and sends it to every other shard.
    pub async fn broadcast_update(&self, update: TopicUpdate) {
        self.apply_update(&update);
        for shard in (0..self.count).filter(|&s| s != self.id) {
            if let Err(e) = self
                .send_to(shard, ShardMessage::TopicUpdate(update.clone()))
                .await
            {
                tracing::warn!(shard, error = %e, "topic update not delivered");
            }
        }
    }
}

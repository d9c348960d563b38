//! One shard's state. **Shard-local** (`Rc`, `RefCell`): built on its glommio
//! executor and never shared with another core; other shards are reached only
//! through [`Shard::call`] (see [`crate::call`]).
//!
//! The shard is the bottom of net's runtime: it holds the engine's logs, the
//! topic table (derived from the shard's metadata image by the layers
//! above, swapped whole with [`Shard::set_topic_table`]), the mesh, the send path, metrics and connection budgets, and
//! one runtime of type `R`: the struct of per-shard runtimes the layers
//! above build once, in one constructor, and install with
//! [`Shard::install_runtime`] before the shard serves anything. The kernel
//! names no runtime; `R` is `runtimes::ShardRuntime` in the broker.

use crate::config::BrokerConfig;
use crate::conn_limits::RequestBytes;
use crate::error::RequestError;
use crate::mesh::Envelope;
use crate::metrics::ShardMetrics;
use crate::sendpath::Sender;
use crate::topics::TopicTable;
use engine::{LogManager, TopicPartition};
use glommio::channels::channel_mesh::Senders;
use std::cell::{Cell, OnceCell, RefCell};
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// What shards send each other: a job opened on the receiving shard.
pub type ShardMessage<R> = Envelope<Shard<R>>;

/// The state of one shard, with its runtimes `R`.
pub struct Shard<R: 'static> {
    /// This shard's id (its place in the channel mesh).
    pub id: usize,
    /// Number of shards.
    pub count: usize,
    /// Broker settings.
    pub config: Arc<BrokerConfig>,
    /// This shard's partitions.
    pub logs: Rc<LogManager>,
    /// This shard's topic table, derived from the metadata image it holds.
    /// Readers borrow it for a lookup or take a snapshot
    /// ([`Shard::topic_table`]); only [`Shard::set_topic_table`] replaces it.
    pub topics: RefCell<Rc<TopicTable>>,
    /// Queues to the other shards (`None` with a single shard).
    pub peers: Option<Senders<ShardMessage<R>>>,
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
    /// This shard's share of `queued.max.request.bytes`.
    pub request_bytes: Rc<RequestBytes>,
    /// Bytes of this shard's connections' read buffers, for `/metrics`.
    pub read_buffer_bytes: Rc<Cell<u64>>,
    /// The runtimes, set once by [`Shard::install_runtime`] (empty while
    /// they are being built from this shard's settings).
    pub runtime: OnceCell<R>,
}

impl<R> Shard<R> {
    /// This shard's runtimes.
    ///
    /// # Panics
    /// Before [`Shard::install_runtime`]: a start-order bug, never a
    /// client's or the disk's doing.
    pub fn runtime(&self) -> &R {
        match self.runtime.get() {
            Some(runtime) => runtime,
            None => panic!("shard {}: runtime used before it was installed", self.id),
        }
    }

    /// Installs the runtimes, once, before the shard serves anything.
    ///
    /// # Panics
    /// On a second install (a start-order bug).
    pub fn install_runtime(&self, runtime: R) {
        let installed = self.runtime.set(runtime).is_ok();
        assert!(installed, "shard {}: runtime installed twice", self.id);
    }

    /// The shard that owns `tp`.
    pub fn owner(&self, tp: &TopicPartition) -> usize {
        engine::shard::shard_of(&tp.topic, tp.partition, self.count)
    }

    /// Wall-clock milliseconds since the epoch, from the broker's one clock
    /// (`engine::Clock`: the system clock, or a test's manual clock).
    pub fn now_ms(&self) -> i64 {
        self.config.engine.clock.now_ms()
    }

    /// Milliseconds on the process's monotonic clock (since its first
    /// read): for timeouts that a jump of the wall clock must not move,
    /// such as the controller's broker sessions.
    pub fn monotonic_ms(&self) -> i64 {
        monotonic_ms()
    }

    /// Queues a message to another shard; fails only when that shard has
    /// gone away. Services use [`Shard::call`] rather than this.
    pub async fn send_to(
        &self,
        shard: usize,
        message: ShardMessage<R>,
    ) -> Result<(), RequestError> {
        let peers = self.peers.as_ref().ok_or(RequestError::ShardGone(shard))?;
        peers
            .send_to(shard, message)
            .await
            .map_err(|_| RequestError::ShardGone(shard))
    }

    /// This shard's topic table as it is now (a snapshot that outlives
    /// later changes, for work that awaits in between).
    pub fn topic_table(&self) -> Rc<TopicTable> {
        self.topics.borrow().clone()
    }

    /// Replaces this shard's topic table with one derived from a newer (or
    /// the same) image.
    ///
    /// # Panics
    /// When `table` is derived from an older image than the table in place:
    /// a shard's view only moves forward.
    pub fn set_topic_table(&self, table: TopicTable) {
        let mut topics = self.topics.borrow_mut();
        assert!(
            table.offset() >= topics.offset(),
            "shard {}: topic table of offset {} replaced by one of offset {}",
            self.id,
            topics.offset(),
            table.offset()
        );
        *topics = Rc::new(table);
    }
}

/// Milliseconds since the first call in this process, on the monotonic
/// clock (`Instant`), which a change of the system's wall clock does not
/// move.
pub fn monotonic_ms() -> i64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let origin = ORIGIN.get_or_init(std::time::Instant::now);
    i64::try_from(origin.elapsed().as_millis()).unwrap_or(i64::MAX)
}

//! The per-shard pool of producer ids, served from blocks (KIP-730).
//!
//! Each shard keeps one [`ProducerIdPool`] holding the rest of its current
//! block of ids ([`engine::ProducerIdBlock`]). An `InitProducerId` without a
//! transactional id takes the next id of its shard's block; when the block
//! runs out, the pool fetches a new one from the block store
//! ([`engine::ProducerIdStore`], owned by shard 0 on one node, the metadata
//! quorum in a cluster), which persists the block before handing it out. So
//! ids are unique across shards and restarts, and grow on each shard.
//!
//! Only one fetch per shard is in flight: callers that find the block empty
//! while a fetch runs wait for it and take ids from the block it installs.
//! With blocks of 1000, a shard fetches once per 1000 producers, so the pool
//! costs a `Cell` read on the common path.
//!
//! Shard-local (`Cell`, not `Send`): one pool per shard, used on its thread,
//! a field of the shard's runtimes. The store is the [`ProducerIdAllocator`] on
//! [`ALLOCATOR_SHARD`], opened at start ([`open_allocator`]); other shards
//! reach it with the owner call ([`AllocateProducerIdBlock`]).

use crate::cluster_runtime::{call_controller_until_answered, ControllerReply, ControllerRpc};
use crate::Shard;
use engine::producer_id_blocks::PRODUCER_ID_BLOCK_SIZE;
use engine::{ErrorCode, ProducerIdBlock, ProducerIdStore};
use kernel::call::OwnerCall;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

/// The shard that keeps the block store (on one node; the metadata quorum
/// takes this role in a cluster).
pub const ALLOCATOR_SHARD: usize = 0;

/// A fresh producer id for an InitProducerId on this shard.
pub async fn next_producer_id(shard: &Rc<Shard>) -> Result<i64, ErrorCode> {
    let pool = shard.runtime().producer_ids.clone();
    pool.next(|| async {
        match shard.call(ALLOCATOR_SHARD, AllocateProducerIdBlock).await {
            Ok(block) => block,
            Err(e) => {
                tracing::warn!(error = %e, "producer-id block not fetched");
                Err(ErrorCode::CoordinatorLoadInProgress)
            }
        }
    })
    .await
}

/// The durable block store, on [`ALLOCATOR_SHARD`] only.
#[derive(Debug)]
pub struct ProducerIdAllocator {
    store: RefCell<ProducerIdStore>,
}

/// Opens the block store on the allocating shard, before it serves anything.
/// An unreadable or corrupt store stops the broker: handing out ids again
/// from 0 could give a new producer the id of an old one, whose sequence
/// numbers the partitions still remember.
pub fn open_allocator(shard: &Shard) -> Result<Option<ProducerIdAllocator>, String> {
    if shard.id != ALLOCATOR_SHARD {
        return Ok(None);
    }
    let store = ProducerIdStore::open(&shard.config.data_dir)
        .map_err(|e| format!("cannot open the producer-id block store: {e}"))?;
    Ok(Some(ProducerIdAllocator {
        store: RefCell::new(store),
    }))
}

/// Asks the allocating shard for the next block of ids. The store writes
/// and fsyncs its file with blocking calls on that shard's thread: once per
/// [`PRODUCER_ID_BLOCK_SIZE`] producers, a few hundred microseconds here.
#[derive(Debug)]
pub struct AllocateProducerIdBlock;

impl OwnerCall<crate::ShardRuntime> for AllocateProducerIdBlock {
    type Reply = Result<ProducerIdBlock, ErrorCode>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        if !shard.config.cluster.is_single_node() {
            return allocate_from_quorum(&shard).await;
        }
        let Some(allocator) = shard.runtime().producer_id_allocator.clone() else {
            tracing::error!(shard = shard.id, "no producer-id block store on this shard");
            return Err(ErrorCode::CoordinatorLoadInProgress);
        };
        let block = allocator
            .store
            .borrow_mut()
            .allocate_block(PRODUCER_ID_BLOCK_SIZE);
        block.map_err(|e| {
            // Retriable for the client; the operator sees why in the log.
            tracing::error!(error = %e, "cannot allocate a producer-id block");
            ErrorCode::CoordinatorLoadInProgress
        })
    }
}

/// A block from the active controller (AllocateProducerIds, KIP-730): in
/// a cluster, ids must be unique across brokers, not only across this
/// broker's shards and restarts — two producers with one id writing to the
/// same partition would have each other's batches taken for duplicates.
/// The block's end is committed in the metadata log before it is handed
/// out, so no later block overlaps it, whichever controller gives it.
async fn allocate_from_quorum(shard: &Rc<Shard>) -> Result<ProducerIdBlock, ErrorCode> {
    let Some(quorum) = shard.runtime().quorum.clone() else {
        return Err(ErrorCode::CoordinatorLoadInProgress);
    };
    // Not registered yet: the client retries.
    let broker_epoch = quorum
        .registered_epoch()
        .ok_or(ErrorCode::CoordinatorLoadInProgress)?;
    let request = ControllerRpc::AllocateProducerIds {
        broker_id: shard.config.broker_id,
        broker_epoch,
    };
    match call_controller_until_answered(shard, request).await {
        Ok(ControllerReply::ProducerIds { first, last }) if first <= last => {
            Ok(ProducerIdBlock { first, last })
        }
        outcome => {
            tracing::warn!(?outcome, "no producer-id block from the controller");
            Err(ErrorCode::CoordinatorLoadInProgress)
        }
    }
}

/// One shard's producer ids: the rest of its current block.
#[derive(Debug)]
pub struct ProducerIdPool {
    /// Next id to hand out; the block is spent when it is past `last`.
    next_id: Cell<i64>,
    /// Last id of the current block.
    last: Cell<i64>,
    /// Held while a block is fetched, so only one fetch runs per shard.
    /// `futures`' mutex rather than a glommio semaphore: its lock cannot
    /// fail (a glommio semaphore's acquire errs once closed), so waiting for
    /// the fetch has no error path of its own.
    fetching: futures::lock::Mutex<()>,
}

impl Default for ProducerIdPool {
    fn default() -> Self {
        ProducerIdPool::new()
    }
}

impl ProducerIdPool {
    /// An empty pool: the first id fetches a block.
    pub fn new() -> Self {
        ProducerIdPool {
            next_id: Cell::new(0),
            last: Cell::new(-1),
            fetching: futures::lock::Mutex::new(()),
        }
    }

    /// Ids left in the current block.
    pub fn remaining(&self) -> i64 {
        (self.last.get() - self.next_id.get() + 1).max(0)
    }

    /// The next id of the current block, or `None` when it is spent.
    pub fn try_next(&self) -> Option<i64> {
        let id = self.next_id.get();
        if id > self.last.get() {
            return None;
        }
        self.next_id.set(id + 1);
        Some(id)
    }

    /// Makes `block` the current block. Ids left in the previous block are
    /// skipped (never handed out later): ids may have gaps, never repeats.
    pub fn install(&self, block: ProducerIdBlock) {
        assert!(
            block.first >= 0 && block.first <= block.last,
            "a producer-id block holds at least one id: {block:?}"
        );
        // Blocks come from one increasing allocator: a block at or below an
        // id this pool already handed out would hand it out again.
        assert!(
            block.first >= self.next_id.get(),
            "producer-id block {block:?} does not start after the ids handed out (next {})",
            self.next_id.get()
        );
        self.next_id.set(block.first);
        self.last.set(block.last);
    }

    /// The next id, fetching a new block with `fetch_block` when the current
    /// one is spent. Concurrent callers share one fetch: they wait for it
    /// and take from the block it installs, and `fetch_block` is then not
    /// called. A fetch error is returned to the caller that fetched; the
    /// next caller tries again.
    pub async fn next<F, Fut, E>(&self, fetch_block: F) -> Result<i64, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<ProducerIdBlock, E>>,
    {
        if let Some(id) = self.try_next() {
            return Ok(id);
        }
        let _fetching = self.fetching.lock().await;
        // Another caller may have installed a block while this one waited.
        if let Some(id) = self.try_next() {
            return Ok(id);
        }
        let block = fetch_block().await?;
        self.install(block);
        // No await since the install: the block's first id is this caller's.
        self.next_id.set(block.first + 1);
        Ok(block.first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{ProducerIdError, ProducerIdStore};
    use glommio::LocalExecutorBuilder;
    use std::cell::RefCell;
    use std::collections::HashSet;
    use std::path::Path;
    use std::rc::Rc;
    use std::time::Duration;

    fn run<T>(future: impl Future<Output = T> + 'static) -> T {
        LocalExecutorBuilder::default().make().unwrap().run(future)
    }

    /// `count` ids from `pool`, fetching blocks of `block_size` from `store`.
    async fn take_ids(
        pool: &ProducerIdPool,
        store: &Rc<RefCell<ProducerIdStore>>,
        block_size: i64,
        count: usize,
    ) -> Vec<i64> {
        let mut ids = Vec::with_capacity(count);
        for _ in 0..count {
            let store = store.clone();
            let fetch = || async move { store.borrow_mut().allocate_block(block_size) };
            ids.push(pool.next(fetch).await.unwrap());
        }
        ids
    }

    fn open(dir: &Path) -> Rc<RefCell<ProducerIdStore>> {
        Rc::new(RefCell::new(ProducerIdStore::open(dir).unwrap()))
    }

    #[test]
    fn an_empty_pool_has_nothing_until_a_block_is_installed() {
        let pool = ProducerIdPool::new();
        assert_eq!(pool.try_next(), None);
        assert_eq!(pool.remaining(), 0);
        pool.install(ProducerIdBlock { first: 5, last: 7 });
        assert_eq!(pool.remaining(), 3);
        assert_eq!(
            [pool.try_next(), pool.try_next(), pool.try_next()],
            [Some(5), Some(6), Some(7)]
        );
        assert_eq!(pool.try_next(), None);
    }

    #[test]
    #[should_panic(expected = "does not start after")]
    fn a_block_below_the_ids_handed_out_is_a_bug() {
        let pool = ProducerIdPool::new();
        pool.install(ProducerIdBlock {
            first: 10,
            last: 19,
        });
        assert_eq!(pool.try_next(), Some(10));
        pool.install(ProducerIdBlock { first: 0, last: 9 });
    }

    #[test]
    fn ids_never_repeat_across_restarts_of_store_and_pool() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        run(async move {
            let mut seen = HashSet::new();
            let mut max_before_restart = -1;
            for restart in 0..5 {
                // A new store over the same dir and a new pool: a restarted broker.
                let store = open(&path);
                let pool = ProducerIdPool::new();
                // 25 ids with blocks of 10: three fetches, the last block half used.
                let ids = take_ids(&pool, &store, 10, 25).await;
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
                assert!(
                    ids[0] > max_before_restart,
                    "restart {restart}: {ids:?} after {max_before_restart}"
                );
                for id in &ids {
                    assert!(seen.insert(*id), "id {id} repeated");
                }
                max_before_restart = *ids.last().unwrap();
                assert_eq!(pool.remaining(), 5);
            }
            // The very first id is 0, as in Kafka; unused ids are skipped.
            assert!(seen.contains(&0));
            assert_eq!(seen.len(), 5 * 25);
        });
    }

    #[test]
    fn concurrent_callers_share_one_fetch() {
        run(async {
            let pool = Rc::new(ProducerIdPool::new());
            let fetches = Rc::new(Cell::new(0));
            let mut tasks = Vec::new();
            for _ in 0..8 {
                let (pool, fetches) = (pool.clone(), fetches.clone());
                tasks.push(glommio::spawn_local(async move {
                    let fetch = || async move {
                        fetches.set(fetches.get() + 1);
                        // A fetch takes a while (a call to shard 0, a disk write).
                        glommio::timer::sleep(Duration::from_millis(20)).await;
                        Ok::<_, ProducerIdError>(ProducerIdBlock {
                            first: 1000,
                            last: 1999,
                        })
                    };
                    pool.next(fetch).await.unwrap()
                }));
            }
            let mut ids = Vec::new();
            for task in tasks {
                ids.push(task.await);
            }
            assert_eq!(fetches.get(), 1, "one fetch for eight callers");
            ids.sort_unstable();
            assert_eq!(ids, (1000..1008).collect::<Vec<_>>());
        });
    }

    #[test]
    fn a_failed_fetch_is_returned_and_the_next_caller_fetches_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        run(async move {
            let pool = ProducerIdPool::new();
            let failed = pool
                .next(|| async {
                    Err::<ProducerIdBlock, ErrorCode>(ErrorCode::CoordinatorNotAvailable)
                })
                .await;
            assert_eq!(failed, Err(ErrorCode::CoordinatorNotAvailable));
            assert_eq!(pool.remaining(), 0);
            let store = open(&path);
            assert_eq!(take_ids(&pool, &store, 1000, 2).await, vec![0, 1]);
        });
    }
}

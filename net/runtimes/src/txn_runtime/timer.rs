//! The per-shard timer task of the transaction coordinator.

use super::finish::finish;
use super::persist::persist;
use super::replay::{loaded_lease, owned_partitions, unload_lost};
use super::{TxnRuntime, TIMER_INTERVAL_MS};
use crate::replication_runtime::leader_lease;
use crate::Shard;
use coordinators::txn::TxnState;
use std::rc::Rc;
use std::time::Duration;

/// Every [`TIMER_INTERVAL_MS`]: unloads the partitions this broker no
/// longer leads (their transactions are no longer its to time out or
/// finish), loads the ones it leads (a new leader finishes what the log
/// says), then finishes decided transactions and aborts timed-out ones.
/// Runs for the life of the shard.
pub async fn run_timer(shard: Rc<Shard>) {
    let rt = shard.runtime().txns.clone();
    loop {
        unload_lost(&shard, &rt);
        for partition in owned_partitions(&shard).collect::<Vec<_>>() {
            let tp = engine::TopicPartition::new(coordinators::txn::TXN_STATE_TOPIC, partition);
            if leader_lease(&shard, &tp).is_some() {
                // NOT_COORDINATOR or a load in progress: the next tick retries.
                let _ = loaded_lease(&shard, &rt, partition).await;
            }
        }
        tick(&shard, &rt).await;
        glommio::timer::sleep(Duration::from_millis(TIMER_INTERVAL_MS)).await;
    }
}

async fn tick(shard: &Rc<Shard>, rt: &Rc<TxnRuntime>) {
    let unfinished = rt.core.borrow().unfinished();
    for (id, _) in unfinished {
        let lock = rt.lock_for(&id);
        let Ok(_permit) = lock.acquire_permit(1).await else {
            continue;
        };
        // Re-read under the lock: a request may have finished it meanwhile.
        let Some(prepared) = rt.core.borrow().get(&id).cloned() else {
            continue;
        };
        if !matches!(
            prepared.state,
            TxnState::PrepareCommit | TxnState::PrepareAbort
        ) {
            continue;
        }
        match finish(shard, rt, &id, prepared).await {
            Ok(()) => tracing::info!(transactional_id = %id, "unfinished transaction completed"),
            Err(code) => {
                tracing::warn!(transactional_id = %id, %code, "transaction still unfinished")
            }
        }
    }
    let expired = rt.core.borrow().expired(shard.now_ms());
    for id in expired {
        let lock = rt.lock_for(&id);
        let Ok(_permit) = lock.acquire_permit(1).await else {
            continue;
        };
        let Some(abort) = rt.core.borrow().timeout_abort(&id, shard.now_ms()) else {
            continue;
        };
        tracing::info!(transactional_id = %id, producer_id = abort.producer_id,
            "transaction timed out; aborting and fencing the producer");
        if persist(shard, rt, &id, Some(abort.clone())).await.is_ok() {
            if let Err(code) = finish(shard, rt, &id, abort).await {
                tracing::warn!(transactional_id = %id, %code, "timed-out transaction not finished yet");
            }
        }
    }
}

//! Loading a shard's transaction state from its `__transaction_state`
//! partitions, once, before the first request is served.

use super::TxnRuntime;
use crate::shard::Shard;
use crate::txn::records::{self, TxnLogKey};
use crate::txn::{TXN_STATE_PARTITIONS, TXN_STATE_TOPIC};
use engine::log::ReadMode;
use engine::{ReadData, TopicPartition};
use std::rc::Rc;

/// A `__transaction_state` partition came to be led here (its coordinator
/// moved to this broker): the next request replays every partition of this
/// shard again, the new one with what its previous leader wrote.
pub fn reload_on_leadership(shard: &Shard) {
    shard.service::<TxnRuntime>().loaded.set(false);
}

/// Replays this shard's `__transaction_state` partitions into the core, once.
pub(super) async fn ensure_loaded(shard: &Rc<Shard>) {
    let rt = shard.service::<TxnRuntime>();
    if rt.loaded.get() {
        return;
    }
    let Ok(_permit) = rt.load_lock.acquire_permit(1).await else {
        return;
    };
    if rt.loaded.get() {
        return;
    }
    let mut replayed = 0usize;
    for partition in 0..TXN_STATE_PARTITIONS {
        let tp = TopicPartition::new(TXN_STATE_TOPIC, partition);
        if shard.owner(&tp) != shard.id {
            continue;
        }
        if let Some(log) = shard.logs.get(&tp) {
            match replay_partition(&log, &rt).await {
                Ok(count) => replayed += count,
                Err(e) => tracing::error!(partition, error = %e,
                    "cannot replay __transaction_state; its transactions are unknown"),
            }
        }
    }
    // Only now is the final state of every id known (see
    // `TxnCoordinator::drop_stale_offsets`).
    rt.core.borrow_mut().drop_stale_offsets();
    if replayed > 0 {
        tracing::info!(
            shard = shard.id,
            records = replayed,
            "transaction state replayed"
        );
    }
    rt.loaded.set(true);
}

async fn replay_partition(
    log: &engine::PartitionLog,
    rt: &Rc<TxnRuntime>,
) -> Result<usize, engine::EngineError> {
    let mut offset = log.log_start_offset();
    let end = log.high_watermark();
    let mut count = 0;
    while offset < end {
        let read = log.read(offset, 1 << 20, ReadMode::Copy).await?;
        let ReadData::Bytes(bytes) = read.data else {
            break;
        };
        let before = offset;
        for item in engine::batch::batches(&bytes) {
            let Ok((header, range)) = item else { break };
            offset = header.last_offset() + 1;
            if header.is_control() {
                continue;
            }
            let Ok(batch_records) = engine::batch::records(&bytes[range]) else {
                continue;
            };
            for record in batch_records {
                let Some(key) = record.key.as_deref() else {
                    continue;
                };
                let id = match records::decode_log_key(key) {
                    Ok(TxnLogKey::State(id)) => id,
                    Ok(TxnLogKey::PendingOffsets(id)) => {
                        match record.value.as_deref().map(records::decode_offsets_value) {
                            None => rt.core.borrow_mut().apply_offsets(&id, None),
                            Some(Ok(pending)) => {
                                rt.core.borrow_mut().apply_offsets(&id, Some(pending))
                            }
                            Some(Err(e)) => {
                                tracing::warn!(error = %e, transactional_id = %id,
                                    "transaction offsets record skipped");
                                continue;
                            }
                        }
                        count += 1;
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "transaction log key skipped");
                        continue;
                    }
                };
                let meta = match record.value.as_deref().map(records::decode_value) {
                    None => None,
                    Some(Ok(meta)) => Some(meta),
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, transactional_id = %id,
                            "transaction log value skipped");
                        continue;
                    }
                };
                rt.core.borrow_mut().apply(&id, meta);
                count += 1;
            }
        }
        if offset == before {
            break;
        }
    }
    Ok(count)
}

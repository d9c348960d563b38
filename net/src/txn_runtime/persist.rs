//! Appending transaction state to `__transaction_state`, durably, before it
//! is applied to the core.

use super::{ensure_txn_topic, TxnRuntime};
use crate::shard::Shard;
use crate::txn::TXN_STATE_TOPIC;
use crate::txn::{records, txn_partition_for, PendingOffsets, TxnMetadata};
use engine::batch::{BatchBuilder, Compression};
use engine::ErrorCode;
use engine::TopicPartition;
use std::rc::Rc;

/// Appends the new state (or a tombstone) to the id's `__transaction_state`
/// partition, waits until durable, then applies it to the core.
pub(super) async fn persist(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    transactional_id: &str,
    meta: Option<TxnMetadata>,
) -> Result<(), ErrorCode> {
    let key = records::encode_key(transactional_id);
    let value = meta.as_ref().map(records::encode_value);
    append_durable(shard, transactional_id, &[(key, value)]).await?;
    rt.core.borrow_mut().apply(transactional_id, meta);
    Ok(())
}

/// Persists the Complete state of a transaction with the tombstone of its
/// pending offsets, in one batch so that neither is durable without the
/// other. The tombstone is written even when the transaction had no
/// offsets: it costs a few bytes, and it also retires a record left by an
/// earlier transaction that the replay found stale.
pub(super) async fn persist_complete(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    transactional_id: &str,
    complete: TxnMetadata,
) -> Result<(), ErrorCode> {
    let offsets_tombstone = (records::encode_offsets_key(transactional_id), None);
    let state = (
        records::encode_key(transactional_id),
        Some(records::encode_value(&complete)),
    );
    append_durable(shard, transactional_id, &[offsets_tombstone, state]).await?;
    let mut core = rt.core.borrow_mut();
    core.apply_offsets(transactional_id, None);
    core.apply(transactional_id, Some(complete));
    Ok(())
}

/// Persists the whole set of a transaction's offsets, then applies it.
pub(super) async fn persist_offsets(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    transactional_id: &str,
    pending: PendingOffsets,
) -> Result<(), ErrorCode> {
    let record = (
        records::encode_offsets_key(transactional_id),
        Some(records::encode_offsets_value(&pending)),
    );
    append_durable(shard, transactional_id, &[record]).await?;
    rt.core
        .borrow_mut()
        .apply_offsets(transactional_id, Some(pending));
    Ok(())
}

/// Appends `(key, value)` records as one batch to the id's
/// `__transaction_state` partition and waits until they are durable.
pub(super) async fn append_durable(
    shard: &Rc<Shard>,
    transactional_id: &str,
    entries: &[(Vec<u8>, Option<Vec<u8>>)],
) -> Result<(), ErrorCode> {
    let tp = TopicPartition::new(TXN_STATE_TOPIC, txn_partition_for(transactional_id));
    let log = match shard.logs.get(&tp) {
        Some(log) => log,
        None => {
            ensure_txn_topic(shard).await?;
            shard
                .logs
                .get(&tp)
                .ok_or(ErrorCode::CoordinatorNotAvailable)?
        }
    };
    let mut builder = BatchBuilder::new(0, Compression::None);
    let now = shard.now_ms();
    for (delta, (key, value)) in entries.iter().enumerate() {
        builder.push(delta as i32, now, Some(key), value.as_deref(), &[]);
    }
    let mut bytes = builder.build().map_err(|e| {
        tracing::error!(error = %e, "cannot build a transaction log record");
        ErrorCode::UnknownServerError
    })?;
    let appended = log
        .append(&mut bytes, log.leader_epoch())
        .map_err(|e| persist_error(&e))?;
    log.wait_durable(appended.last_offset)
        .await
        .map_err(|e| persist_error(&e))?;
    Ok(())
}

fn persist_error(e: &engine::EngineError) -> ErrorCode {
    tracing::warn!(error = %e, "cannot persist transaction state");
    // Retriable for the client: it looks the coordinator up again and retries.
    ErrorCode::CoordinatorNotAvailable
}

//! Appending transaction state to `__transaction_state` as its leader
//! (acks=all, under the lease the partition was loaded with), before it is
//! applied to the core.

use super::TxnRuntime;
use crate::replication_runtime::{append_as_leader, coordinator_error};
use crate::Shard;
use coordinators::txn::TXN_STATE_TOPIC;
use coordinators::txn::{records, txn_partition_for, PendingOffsets, TxnMetadata};
use engine::batch::{BatchBuilder, Compression};
use engine::ErrorCode;
use engine::TopicPartition;
use std::rc::Rc;
use std::time::Duration;

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
    append_durable(shard, rt, transactional_id, &[(key, value)]).await?;
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
    append_durable(shard, rt, transactional_id, &[offsets_tombstone, state]).await?;
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
    append_durable(shard, rt, transactional_id, &[record]).await?;
    rt.core
        .borrow_mut()
        .apply_offsets(transactional_id, Some(pending));
    Ok(())
}

/// Appends `(key, value)` records as one batch to the id's
/// `__transaction_state` partition, as its leader under the lease the
/// partition was loaded with, and waits until the high watermark passed
/// them. NOT_COORDINATOR once that lease is not the partition's current
/// one: nothing a coordinator that lost its partition decides is applied.
pub(super) async fn append_durable(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    transactional_id: &str,
    entries: &[(Vec<u8>, Option<Vec<u8>>)],
) -> Result<(), ErrorCode> {
    let partition = txn_partition_for(transactional_id);
    let tp = TopicPartition::new(TXN_STATE_TOPIC, partition);
    let lease = rt
        .leases
        .recorded(partition)
        .ok_or(ErrorCode::NotCoordinator)?;
    let mut builder = BatchBuilder::new(0, Compression::None);
    let now = shard.now_ms();
    for (delta, (key, value)) in entries.iter().enumerate() {
        builder.push(delta as i32, now, Some(key), value.as_deref(), &[]);
    }
    let mut bytes = builder.build().map_err(|e| {
        tracing::error!(error = %e, "cannot build a transaction log record");
        ErrorCode::UnknownServerError
    })?;
    append_as_leader(shard, &tp, lease, &mut bytes, TXN_WRITE_TIMEOUT)
        .await
        .map_err(persist_error)?;
    if rt.leases.recorded(partition) != Some(lease) {
        // Unloaded (or loaded again) while the write waited.
        return Err(ErrorCode::NotCoordinator);
    }
    Ok(())
}

/// How long a write to `__transaction_state` may wait for its high
/// watermark (Kafka's `request.timeout.ms` default for the same append).
const TXN_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

fn persist_error(code: ErrorCode) -> ErrorCode {
    tracing::warn!(%code, "cannot persist transaction state");
    coordinator_error(code)
}

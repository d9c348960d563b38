//! The owner side of a transaction-coordinator call: one function per
//! request, each under its transactional id's lock.

use super::finish::{finish, validate_member};
use super::persist::{persist, persist_offsets};
use super::replay::loaded_lease;
use super::{
    ensure_txn_topic, GroupMember, TxnReply, TxnRequest, TxnRuntime, FAULT_CRASH_AFTER_PREPARE,
};
use crate::producer_id_pool::next_producer_id;
use crate::Shard;
use coordinators::txn::{
    txn_partition_for, EndStep, InitStep, PendingOffset, TxnCoordinator, TRANSACTION_VERSION_2,
};
use engine::ErrorCode;
use glommio::sync::StaticPermit;
use std::rc::Rc;

/// Owner side: serves one request.
pub(super) async fn execute(shard: &Rc<Shard>, request: TxnRequest) -> TxnReply {
    let rt = shard.runtime().txns.clone();
    if let Some(id) = request.transactional_id() {
        if matches!(request, TxnRequest::InitProducerId { .. }) {
            if let Err(code) = ensure_txn_topic(shard).await {
                return request.refused(code);
            }
        }
        // Only for a partition led here, loaded under its current lease.
        if let Err(code) = loaded_lease(shard, &rt, txn_partition_for(id)).await {
            return request.refused(code);
        }
    }
    match request {
        TxnRequest::InitProducerId {
            transactional_id,
            timeout_ms,
            expected,
        } => TxnReply::Init(
            init_producer_id(shard, &rt, &transactional_id, timeout_ms, expected).await,
        ),
        TxnRequest::AddPartitions {
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            verify_only,
            client_version,
        } => {
            let producer = (producer_id, producer_epoch);
            let how = (verify_only, client_version);
            add_partitions(shard, &rt, &transactional_id, producer, partitions, how).await
        }
        TxnRequest::OffsetCommit {
            transactional_id,
            producer_id,
            producer_epoch,
            group_id,
            member,
            offsets,
        } => {
            let producer = (producer_id, producer_epoch);
            let commit = (group_id, member, offsets);
            offset_commit(shard, &rt, &transactional_id, producer, commit).await
        }
        TxnRequest::EndTxn {
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            client_version,
        } => {
            let producer = (producer_id, producer_epoch);
            let end = (commit, client_version);
            TxnReply::Ended(end_txn(shard, &rt, &transactional_id, producer, end).await)
        }
        TxnRequest::Describe { transactional_id } => {
            TxnReply::Described(rt.core.borrow().get(&transactional_id).cloned())
        }
        TxnRequest::List => TxnReply::Listed(
            rt.core
                .borrow()
                .all()
                .map(|(id, m)| (id.clone(), m.clone()))
                .collect(),
        ),
    }
}

/// Takes the transactional id's lock: its steps never interleave.
async fn lock(rt: &TxnRuntime, transactional_id: &str) -> Option<StaticPermit> {
    rt.lock_for(transactional_id)
        .acquire_static_permit(1)
        .await
        .ok()
}

/// AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition).
async fn add_partitions(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    partitions: Vec<(String, i32)>,
    (verify_only, client_version): (bool, i16),
) -> TxnReply {
    let Some(_permit) = lock(rt, transactional_id).await else {
        return TxnReply::unavailable();
    };
    if verify_only {
        return TxnReply::Verified(rt.core.borrow().verify_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            &partitions,
        ));
    }
    let step = rt.core.borrow().add_partitions_as(
        transactional_id,
        (producer_id, producer_epoch),
        &partitions,
        client_version,
        shard.now_ms(),
    );
    TxnReply::Code(match step {
        Ok(None) => ErrorCode::None,
        Ok(Some(next)) => match persist(shard, rt, transactional_id, Some(next)).await {
            Ok(()) => ErrorCode::None,
            Err(code) => code,
        },
        Err(code) => code,
    })
}

/// TxnOffsetCommit: the membership check, then the transaction's whole
/// offset set persisted.
async fn offset_commit(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    (group_id, member, offsets): (String, GroupMember, Vec<PendingOffset>),
) -> TxnReply {
    let Some(_permit) = lock(rt, transactional_id).await else {
        return TxnReply::unavailable();
    };
    let next = match rt.core.borrow().add_offsets(
        transactional_id,
        producer_id,
        producer_epoch,
        &group_id,
        offsets,
    ) {
        Ok(next) => next,
        Err(code) => return TxnReply::Code(code),
    };
    let code = validate_member(shard, &group_id, member, &next).await;
    if code != ErrorCode::None {
        return TxnReply::Code(code);
    }
    TxnReply::Code(
        match persist_offsets(shard, rt, transactional_id, next).await {
            Ok(()) => ErrorCode::None,
            Err(code) => code,
        },
    )
}

/// EndTxn: persist the Prepare state, then finish the transaction. The
/// answer is the producer's id and epoch from now on.
async fn end_txn(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    transactional_id: &str,
    producer: (i64, i16),
    (commit, client_version): (bool, i16),
) -> Result<(i64, i16), ErrorCode> {
    let Some(_permit) = lock(rt, transactional_id).await else {
        return Err(ErrorCode::CoordinatorNotAvailable);
    };
    // Only at the epoch limit of transactions v2 is a new id needed.
    let needs_id = client_version >= TRANSACTION_VERSION_2
        && rt
            .core
            .borrow()
            .end_needs_producer_id(transactional_id, producer.1);
    let new_producer_id = if needs_id {
        next_producer_id(shard).await?
    } else {
        -1
    };
    let step = rt.core.borrow().end_txn(
        transactional_id,
        producer,
        commit,
        (client_version, new_producer_id),
        shard.now_ms(),
    );
    let prepared = match step {
        Ok(EndStep::AlreadyDone) => return Ok(current_producer(rt, transactional_id)),
        Ok(EndStep::Prepare(prepared)) => prepared,
        Err(code) => return Err(code),
    };
    persist(shard, rt, transactional_id, Some(prepared.clone())).await?;
    let after = TxnCoordinator::complete(&prepared, 0);
    let answer = (after.producer_id, after.producer_epoch);
    if commit && fault_crash_after_prepare() {
        tracing::error!(
            transactional_id,
            "fault injection: aborting after PrepareCommit"
        );
        std::process::abort();
    }
    // Decided: a failure from here on is retried by the timer, so the
    // answer is success either way.
    if let Err(code) = finish(shard, rt, transactional_id, prepared).await {
        tracing::warn!(
            transactional_id,
            %code,
            "transaction decided but not finished; the timer retries"
        );
    }
    Ok(answer)
}

/// The id and epoch the coordinator holds for a transactional id.
fn current_producer(rt: &TxnRuntime, transactional_id: &str) -> (i64, i16) {
    rt.core
        .borrow()
        .get(transactional_id)
        .map_or((-1, -1), |m| (m.producer_id, m.producer_epoch))
}

/// InitProducerId with a transactional id: fence the previous producer
/// (aborting its open transaction), then hand out the id and epoch.
async fn init_producer_id(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    transactional_id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> Result<(i64, i16), ErrorCode> {
    let lock = rt.lock_for(transactional_id);
    let _permit = lock
        .acquire_permit(1)
        .await
        .map_err(|_| ErrorCode::CoordinatorNotAvailable)?;
    // At most: abort the ongoing transaction, then initialize.
    for _ in 0..2 {
        let new_producer_id = next_producer_id(shard).await?;
        let step = rt.core.borrow().init_producer_id(
            transactional_id,
            timeout_ms,
            expected,
            new_producer_id,
            shard.now_ms(),
        )?;
        match step {
            InitStep::Ready(meta) => {
                let answer = (meta.producer_id, meta.producer_epoch);
                persist(shard, rt, transactional_id, Some(meta)).await?;
                return Ok(answer);
            }
            InitStep::AbortFirst(abort) => {
                persist(shard, rt, transactional_id, Some(abort.clone())).await?;
                finish(shard, rt, transactional_id, abort).await?;
            }
        }
    }
    Err(ErrorCode::ConcurrentTransactions)
}

/// Whether the [`FAULT_CRASH_AFTER_PREPARE`] point is armed; read once.
fn fault_crash_after_prepare() -> bool {
    static ARMED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ARMED.get_or_init(|| std::env::var(FAULT_CRASH_AFTER_PREPARE).as_deref() == Ok("1"))
}

//! The transaction coordinator at run time: one [`TxnCoordinator`] per
//! shard, serving the transactional ids whose `__transaction_state`
//! partition the shard owns. **Shard-local**: kept in a thread local (each
//! shard is one executor thread), reached from other shards only through
//! [`ShardMessage::Txn`].
//!
//! A step runs under the transactional id's lock: ask the pure core, append
//! the new state to `__transaction_state` and wait until it is durable, then
//! apply it to the core. Ending a transaction is three such steps around the
//! markers: persist PrepareCommit/PrepareAbort; write a marker on every
//! partition of the transaction (on their owner shards, each waited durable);
//! persist CompleteCommit/CompleteAbort. Once the Prepare state is durable
//! the outcome is decided: if a marker cannot be written, the periodic task
//! retries, and after a restart the replay finds the Prepare state and the
//! task finishes it (a marker written twice is harmless: the second one ends
//! nothing).
//!
//! The offsets of a transaction (TxnOffsetCommit) are persisted on the same
//! partition as its state, as a rill record ([`records::encode_offsets_key`])
//! holding the transaction's whole set, before TxnOffsetCommit is answered;
//! the tombstone of that record goes in the same batch as the Complete
//! state. So a transaction found in PrepareCommit after a crash still has
//! its offsets, and finishing it forwards them to the group coordinator
//! before the Complete state is written. Forwarding is idempotent (the same
//! offsets committed again), so a crash after forwarding and before Complete
//! only forwards them once more. Kafka's own design writes them to
//! `__consumer_offsets` at TxnOffsetCommit and applies them at the COMMIT
//! marker; this one keeps transactions out of the group core, which only
//! gains a check at TxnOffsetCommit and an unchecked apply at commit.
//!
//! The periodic task ([`run_timer`], every [`TIMER_INTERVAL_MS`]) also aborts
//! transactions open longer than their `transaction.timeout.ms`, with the
//! producer epoch bumped, so the zombie producer is fenced.

use crate::controller::{self, ControllerRequest};
use crate::group::OffsetCommitRequest;
use crate::group_runtime::{self, GroupReply, GroupRequest};
use crate::mesh::{PartitionOp, PartitionReply, ShardMessage};
use crate::routing::run_on_owners;
use crate::shard::Shard;
use crate::txn::records::TxnLogKey;
use crate::txn::{
    records, txn_partition_for, EndStep, InitStep, PendingOffset, PendingOffsets, TxnCoordinator,
    TxnMetadata, TxnState, TXN_STATE_PARTITIONS, TXN_STATE_TOPIC,
};
use engine::batch::{BatchBuilder, Compression};
use engine::log::ReadMode;
use engine::ErrorCode;
use engine::{ReadData, TopicPartition};
use futures::channel::oneshot;
use glommio::sync::Semaphore;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

/// How often timed-out transactions are aborted and unfinished ones retried
/// (Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`
/// is 10 s; a shorter tick makes a timeout take effect close to its value).
pub const TIMER_INTERVAL_MS: u64 = 500;
/// `transaction.state.log.segment.bytes` (Kafka's default, 100 MiB).
const TXN_STATE_SEGMENT_BYTES: &str = "104857600";
/// Attempts at writing the markers of a transaction within one step.
const MARKER_ATTEMPTS: u32 = 5;
/// Fault-injection point for crash tests: when this environment variable is
/// `1`, the process aborts right after a PrepareCommit state is durable,
/// before the transaction's offsets are forwarded and its markers written —
/// the window the recovery after a restart has to close.
pub const FAULT_CRASH_AFTER_PREPARE: &str = "RILL_FAULT_TXN_CRASH_AFTER_PREPARE";

/// A coordinator request, sent to the owner shard of the transactional id.
#[derive(Debug, Clone)]
pub enum TxnRequest {
    /// InitProducerId with a transactional id.
    InitProducerId {
        /// The transactional id.
        transactional_id: String,
        /// `transaction.timeout.ms`.
        timeout_ms: i32,
        /// KIP-360: the producer's current `(id, epoch)`, to bump it.
        expected: Option<(i64, i16)>,
    },
    /// AddPartitionsToTxn (or AddOffsetsToTxn with the offsets partition).
    AddPartitions {
        /// The transactional id.
        transactional_id: String,
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
        /// The partitions.
        partitions: Vec<(String, i32)>,
        /// v4+ `verify_only`: check, do not add.
        verify_only: bool,
    },
    /// TxnOffsetCommit.
    OffsetCommit {
        /// The transactional id.
        transactional_id: String,
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
        /// The group.
        group_id: String,
        /// Generation, member id and instance id the consumer sent.
        member: GroupMember,
        /// The offsets.
        offsets: Vec<PendingOffset>,
    },
    /// EndTxn.
    EndTxn {
        /// The transactional id.
        transactional_id: String,
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
        /// Commit (true) or abort.
        commit: bool,
    },
    /// DescribeTransactions of one id.
    Describe {
        /// The transactional id.
        transactional_id: String,
    },
    /// ListTransactions: every id of the receiving shard.
    List,
}

impl TxnRequest {
    /// The transactional id (none for List).
    fn transactional_id(&self) -> Option<&str> {
        match self {
            TxnRequest::InitProducerId {
                transactional_id, ..
            }
            | TxnRequest::AddPartitions {
                transactional_id, ..
            }
            | TxnRequest::OffsetCommit {
                transactional_id, ..
            }
            | TxnRequest::EndTxn {
                transactional_id, ..
            }
            | TxnRequest::Describe { transactional_id } => Some(transactional_id),
            TxnRequest::List => None,
        }
    }
}

/// The coordinator's answer.
#[derive(Debug, Clone)]
pub enum TxnReply {
    /// InitProducerId: `(producer_id, epoch)`.
    Init(Result<(i64, i16), ErrorCode>),
    /// A bare error code (`ErrorCode::None` on success).
    Code(ErrorCode),
    /// `verify_only`: whether each partition is in the transaction.
    Verified(Result<Vec<bool>, ErrorCode>),
    /// Describe: the state, if the id is known.
    Described(Option<TxnMetadata>),
    /// List: every id with its state.
    Listed(Vec<(String, TxnMetadata)>),
}

impl TxnReply {
    /// The error code of a reply that failed to arrive.
    fn unavailable() -> TxnReply {
        TxnReply::Code(ErrorCode::CoordinatorNotAvailable)
    }
}

/// Generation, member id and instance id a consumer sent with TxnOffsetCommit.
pub type GroupMember = (i32, String, Option<String>);

/// One shard's coordinator with its locks.
struct Runtime {
    core: RefCell<TxnCoordinator>,
    /// One lock per transactional id: its steps never interleave.
    locks: RefCell<HashMap<String, Rc<Semaphore>>>,
    loaded: Cell<bool>,
    load_lock: Semaphore,
}

thread_local! {
    static RUNTIME: Rc<Runtime> = Rc::new(Runtime {
        core: RefCell::new(TxnCoordinator::new()),
        locks: RefCell::new(HashMap::new()),
        loaded: Cell::new(false),
        load_lock: Semaphore::new(1),
    });
}

fn runtime() -> Rc<Runtime> {
    RUNTIME.with(Rc::clone)
}

impl Runtime {
    fn lock_for(&self, transactional_id: &str) -> Rc<Semaphore> {
        self.locks
            .borrow_mut()
            .entry(transactional_id.to_string())
            .or_insert_with(|| Rc::new(Semaphore::new(1)))
            .clone()
    }
}

fn now_ms() -> i64 {
    group_runtime::now_ms()
}

/// The shard coordinating `transactional_id`.
pub fn coordinator_shard(shard: &Shard, transactional_id: &str) -> usize {
    shard.owner(&TopicPartition::new(
        TXN_STATE_TOPIC,
        txn_partition_for(transactional_id),
    ))
}

/// Runs `request` on the coordinator shard of its transactional id.
pub async fn call(shard: &Rc<Shard>, request: TxnRequest) -> TxnReply {
    let owner = match request.transactional_id() {
        Some(id) => coordinator_shard(shard, id),
        None => shard.id,
    };
    call_on(shard, owner, request).await
}

/// Runs `request` on shard `owner`.
pub async fn call_on(shard: &Rc<Shard>, owner: usize, request: TxnRequest) -> TxnReply {
    if owner == shard.id {
        return execute(shard, request).await;
    }
    let (reply, receiver) = oneshot::channel();
    if let Err(e) = shard
        .send_to(owner, ShardMessage::Txn { request, reply })
        .await
    {
        tracing::warn!(owner, error = %e, "transaction request not delivered");
        return TxnReply::unavailable();
    }
    receiver.await.unwrap_or_else(|_| TxnReply::unavailable())
}

/// Creates `__transaction_state` (compacted, 50 partitions) if it does not exist.
pub async fn ensure_txn_topic(shard: &Rc<Shard>) -> Result<(), ErrorCode> {
    if shard.topics.borrow().get(TXN_STATE_TOPIC).is_some() {
        return Ok(());
    }
    let request = ControllerRequest::CreateTopic {
        name: TXN_STATE_TOPIC.to_string(),
        partitions: TXN_STATE_PARTITIONS,
        configs: vec![
            (String::from("cleanup.policy"), String::from("compact")),
            (
                String::from("segment.bytes"),
                TXN_STATE_SEGMENT_BYTES.to_string(),
            ),
        ],
        validate_only: false,
    };
    match controller::submit(shard, request).await {
        Ok(_) | Err((ErrorCode::TopicAlreadyExists, _)) => Ok(()),
        Err((code, message)) => {
            tracing::warn!(%code, %message, "cannot create __transaction_state");
            Err(ErrorCode::CoordinatorNotAvailable)
        }
    }
}

/// Owner side: serves one request.
pub async fn execute(shard: &Rc<Shard>, request: TxnRequest) -> TxnReply {
    ensure_loaded(shard).await;
    let rt = runtime();
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
        } => {
            let lock = rt.lock_for(&transactional_id);
            let Ok(_permit) = lock.acquire_permit(1).await else {
                return TxnReply::unavailable();
            };
            if verify_only {
                return TxnReply::Verified(rt.core.borrow().verify_partitions(
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                ));
            }
            let step = rt.core.borrow().add_partitions(
                &transactional_id,
                producer_id,
                producer_epoch,
                &partitions,
                now_ms(),
            );
            TxnReply::Code(match step {
                Ok(None) => ErrorCode::None,
                Ok(Some(next)) => match persist(shard, &rt, &transactional_id, Some(next)).await {
                    Ok(()) => ErrorCode::None,
                    Err(code) => code,
                },
                Err(code) => code,
            })
        }
        TxnRequest::OffsetCommit {
            transactional_id,
            producer_id,
            producer_epoch,
            group_id,
            member,
            offsets,
        } => {
            let lock = rt.lock_for(&transactional_id);
            let Ok(_permit) = lock.acquire_permit(1).await else {
                return TxnReply::unavailable();
            };
            let next = match rt.core.borrow().add_offsets(
                &transactional_id,
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
                match persist_offsets(shard, &rt, &transactional_id, next).await {
                    Ok(()) => ErrorCode::None,
                    Err(code) => code,
                },
            )
        }
        TxnRequest::EndTxn {
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
        } => {
            let lock = rt.lock_for(&transactional_id);
            let Ok(_permit) = lock.acquire_permit(1).await else {
                return TxnReply::unavailable();
            };
            let step = rt.core.borrow().end_txn(
                &transactional_id,
                producer_id,
                producer_epoch,
                commit,
                now_ms(),
            );
            TxnReply::Code(match step {
                Ok(EndStep::AlreadyDone) => ErrorCode::None,
                Ok(EndStep::Prepare(prepared)) => {
                    match persist(shard, &rt, &transactional_id, Some(prepared.clone())).await {
                        Ok(()) => {
                            if commit && fault_crash_after_prepare() {
                                tracing::error!(
                                    transactional_id,
                                    "fault injection: aborting after PrepareCommit"
                                );
                                std::process::abort();
                            }
                            // Decided: a failure from here on is retried by the
                            // timer, so the answer is success either way.
                            if let Err(code) = finish(shard, &rt, &transactional_id, prepared).await
                            {
                                tracing::warn!(
                                    transactional_id,
                                    %code,
                                    "transaction decided but not finished; the timer retries"
                                );
                            }
                            ErrorCode::None
                        }
                        Err(code) => code,
                    }
                }
                Err(code) => code,
            })
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

async fn init_producer_id(
    shard: &Rc<Shard>,
    rt: &Rc<Runtime>,
    transactional_id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> Result<(i64, i16), ErrorCode> {
    ensure_txn_topic(shard).await?;
    let lock = rt.lock_for(transactional_id);
    let _permit = lock
        .acquire_permit(1)
        .await
        .map_err(|_| ErrorCode::CoordinatorNotAvailable)?;
    // At most: abort the ongoing transaction, then initialize.
    for _ in 0..2 {
        let new_producer_id = crate::handlers::init_producer_id::next_producer_id(shard.id);
        let step = rt.core.borrow().init_producer_id(
            transactional_id,
            timeout_ms,
            expected,
            new_producer_id,
            now_ms(),
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

/// Appends the new state (or a tombstone) to the id's `__transaction_state`
/// partition, waits until durable, then applies it to the core.
async fn persist(
    shard: &Rc<Shard>,
    rt: &Rc<Runtime>,
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
async fn persist_complete(
    shard: &Rc<Shard>,
    rt: &Rc<Runtime>,
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
async fn persist_offsets(
    shard: &Rc<Shard>,
    rt: &Rc<Runtime>,
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
async fn append_durable(
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
    let now = now_ms();
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

/// Whether the [`FAULT_CRASH_AFTER_PREPARE`] point is armed; read once.
fn fault_crash_after_prepare() -> bool {
    static ARMED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ARMED.get_or_init(|| std::env::var(FAULT_CRASH_AFTER_PREPARE).as_deref() == Ok("1"))
}

/// TxnOffsetCommit's membership check by the group coordinator (skipped for
/// a commit that names no member, as Kafka does for transactional commits).
async fn validate_member(
    shard: &Rc<Shard>,
    group: &str,
    member: GroupMember,
    pending: &PendingOffsets,
) -> ErrorCode {
    let (generation, member_id, instance_id) = member;
    if generation < 0 && member_id.is_empty() && instance_id.is_none() {
        return ErrorCode::None;
    }
    let request = OffsetCommitRequest {
        group_id: group.to_string(),
        generation_id_or_member_epoch: generation,
        member_id,
        group_instance_id: instance_id,
        offsets: group_offsets(pending.groups.get(group).cloned().unwrap_or_default()),
    };
    match group_runtime::call(shard, group, GroupRequest::ValidateTxnCommit(request)).await {
        GroupReply::Code(code) => code,
        GroupReply::Unavailable(code) => code,
        other => {
            tracing::warn!(group, reply = ?other, "unexpected answer to a membership check");
            ErrorCode::UnknownServerError
        }
    }
}

fn persist_error(e: &engine::EngineError) -> ErrorCode {
    tracing::warn!(error = %e, "cannot persist transaction state");
    // Retriable for the client: it looks the coordinator up again and retries.
    ErrorCode::CoordinatorNotAvailable
}

/// Completes a decided transaction: forwards its offsets (commit) or drops
/// them (abort), writes the markers, persists the Complete state. Any
/// failure leaves the transaction in its Prepare state, with its offsets,
/// for the timer to run this again.
async fn finish(
    shard: &Rc<Shard>,
    rt: &Rc<Runtime>,
    transactional_id: &str,
    prepared: TxnMetadata,
) -> Result<(), ErrorCode> {
    let commit = prepared.state == TxnState::PrepareCommit;
    if commit {
        let pending = rt.core.borrow().offsets(transactional_id).cloned();
        for (group, offsets) in pending.map(|p| p.groups).unwrap_or_default() {
            commit_group_offsets(shard, &group, offsets).await?;
        }
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        match write_markers(shard, &prepared, commit).await {
            Ok(()) => break,
            Err(code) if attempt >= MARKER_ATTEMPTS => return Err(code),
            Err(code) => {
                tracing::debug!(
                    transactional_id,
                    %code,
                    attempt,
                    "marker write failed; retrying"
                );
                glommio::timer::sleep(Duration::from_millis(50 << attempt)).await;
            }
        }
    }
    persist_complete(
        shard,
        rt,
        transactional_id,
        TxnCoordinator::complete(&prepared, now_ms()),
    )
    .await
}

fn group_offsets(
    offsets: Vec<PendingOffset>,
) -> Vec<(crate::group::TopicPartition, i64, i32, String)> {
    offsets
        .into_iter()
        .map(|o| {
            (
                crate::group::TopicPartition::new(o.topic, o.partition),
                o.offset,
                o.leader_epoch,
                o.metadata.unwrap_or_default(),
            )
        })
        .collect()
}

/// Applies a committed transaction's offsets in the group coordinator,
/// durably; an error leaves the transaction unfinished, to be retried.
async fn commit_group_offsets(
    shard: &Rc<Shard>,
    group: &str,
    offsets: Vec<PendingOffset>,
) -> Result<(), ErrorCode> {
    let request = OffsetCommitRequest {
        group_id: group.to_string(),
        // Not checked by CommitTxn: the membership was checked at
        // TxnOffsetCommit.
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets: group_offsets(offsets),
    };
    match group_runtime::call(shard, group, GroupRequest::CommitTxn(request)).await {
        GroupReply::Committed(results) => {
            match results
                .into_iter()
                .find(|(_, code)| *code != ErrorCode::None)
            {
                None => Ok(()),
                Some((tp, code)) => {
                    tracing::warn!(group, partition = ?tp, %code,
                        "transactional offset not committed yet; retrying later");
                    Err(code)
                }
            }
        }
        GroupReply::Unavailable(code) => {
            tracing::warn!(
                group,
                %code,
                "group coordinator unavailable for transactional offsets"
            );
            Err(code)
        }
        other => {
            tracing::warn!(group, reply = ?other, "unexpected answer to transactional offsets");
            Err(ErrorCode::UnknownServerError)
        }
    }
}

/// Writes the markers of `meta`'s partitions on their owners, each durable.
async fn write_markers(
    shard: &Rc<Shard>,
    meta: &TxnMetadata,
    commit: bool,
) -> Result<(), ErrorCode> {
    let ops: Vec<PartitionOp> = meta
        .partitions
        .iter()
        .map(|(topic, partition)| PartitionOp::WriteMarker {
            tp: TopicPartition::new(topic.clone(), *partition),
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            commit,
            coordinator_epoch: 0,
        })
        .collect();
    for reply in run_on_owners(shard, ops).await {
        match reply {
            PartitionReply::Done(Ok(())) => {}
            // A deleted partition has no transaction left to end.
            PartitionReply::Done(Err(ErrorCode::UnknownTopicOrPartition)) => {}
            // A newer epoch or coordinator already ended it there.
            PartitionReply::Done(Err(ErrorCode::InvalidProducerEpoch))
            | PartitionReply::Done(Err(ErrorCode::TransactionCoordinatorFenced)) => {}
            PartitionReply::Done(Err(code)) => return Err(code),
            _ => return Err(ErrorCode::UnknownServerError),
        }
    }
    Ok(())
}

/// Owner side of [`PartitionOp::WriteMarker`].
pub async fn write_marker_local(
    log: &engine::PartitionLog,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
) -> Result<(), ErrorCode> {
    let appended = log
        .append_control(producer_id, producer_epoch, commit, coordinator_epoch)
        .map_err(|e| e.error_code())?;
    log.wait_durable(appended.last_offset)
        .await
        .map_err(|e| e.error_code())
}

/// Replays this shard's `__transaction_state` partitions into the core, once.
async fn ensure_loaded(shard: &Rc<Shard>) {
    let rt = runtime();
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
    rt: &Rc<Runtime>,
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

/// Replays this shard's transaction state, then every
/// [`TIMER_INTERVAL_MS`] finishes decided transactions and aborts timed-out
/// ones. Runs for the life of the shard.
pub async fn run_timer(shard: Rc<Shard>) {
    ensure_loaded(&shard).await;
    let rt = runtime();
    loop {
        tick(&shard, &rt).await;
        glommio::timer::sleep(Duration::from_millis(TIMER_INTERVAL_MS)).await;
    }
}

async fn tick(shard: &Rc<Shard>, rt: &Rc<Runtime>) {
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
    let expired = rt.core.borrow().expired(now_ms());
    for id in expired {
        let lock = rt.lock_for(&id);
        let Ok(_permit) = lock.acquire_permit(1).await else {
            continue;
        };
        let Some(abort) = rt.core.borrow().timeout_abort(&id, now_ms()) else {
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

/// ListTransactions across every shard.
pub async fn list_all(shard: &Rc<Shard>) -> Vec<(String, TxnMetadata)> {
    let mut all = Vec::new();
    for owner in 0..shard.count {
        if let TxnReply::Listed(rows) = call_on(shard, owner, TxnRequest::List).await {
            all.extend(rows);
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

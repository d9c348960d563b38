//! The leader's side of replication, on the shard that owns the partition:
//! a follower's fetch reports its log end and reads what the leader has
//! made durable; the HW moves with the ISR's progress and is handed to the
//! log as its replication limit, which wakes acks=all produces and
//! consumers' long polls. A timer proposes ISR changes to the controller.

use super::roles::Role;
use crate::cluster_runtime::{ControllerReply, ControllerRpc, SendToController, METADATA_SHARD};
use crate::Shard;
use bytes::Bytes;
use cluster::replication::{
    diverging_epoch_of_answer, last_fetched_epoch_from_wire, Acks, AlterPartition,
    AlterPartitionRejection, EpochEndOffset, IsrChangeKind, LeaderState, ReplicationError,
};
use engine::log::ReadMode;
use engine::{ErrorCode, PartitionLog, ReadData, TopicPartition};
use kernel::call::OwnerCall;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// How often a leader checks its followers (ISR shrink and expand).
const LEADER_TICK: Duration = Duration::from_millis(250);

/// Brings the leader state up to the log: its end and what is durable.
fn sync(state: &RefCell<LeaderState>, log: &PartitionLog) {
    let mut state = state.borrow_mut();
    let log_end_offset = log.log_end_offset();
    state.on_local_append(log_end_offset);
    let durable = log.published_offset().min(log_end_offset);
    if durable > state.durable_offset() {
        if let Some(hw) = state.on_local_durable(durable) {
            // HW ≤ what is durable here ≤ the log end just read (no await
            // in between).
            assert!(
                hw <= log_end_offset,
                "a leader's HW never passes its log end: HW {hw}, log end {log_end_offset}"
            );
            log.set_replication_limit(Some(hw));
        }
    }
}

/// A leader serving `tp` here leads it as this broker, in an ISR that
/// holds it (the role's state is built for this broker, and the ISR
/// always holds its leader).
fn assert_leads_as(state: &LeaderState, own: i32, tp: &TopicPartition) {
    assert_eq!(
        state.leader(),
        own,
        "a leader role here is this broker's: {tp} is led by {} in the role of broker {own}",
        state.leader()
    );
    assert!(
        state.isr().contains(&own),
        "a serving leader is in its ISR: {tp}, leader {own}, ISR {:?}",
        state.isr()
    );
}

/// Whether clients may produce to and read `tp` here: it is not
/// replicated, or this broker leads it.
pub fn serves_clients(shard: &Shard, tp: &TopicPartition) -> bool {
    !matches!(
        shard.runtime().replicas.role(tp),
        Some((_, Role::Follower { .. } | Role::Offline))
    )
}

/// The leader role an append was made under: its acks=all wait completes
/// only while that same role lasts. Taken before the append.
pub struct Leadership {
    generation: u64,
    state: Rc<RefCell<LeaderState>>,
}

/// This shard's leadership of `tp` now, if it is a replicated partition
/// this shard leads (`None`: not replicated, the single-node rules apply).
pub fn leadership(shard: &Shard, tp: &TopicPartition) -> Option<Leadership> {
    match shard.runtime().replicas.role(tp) {
        Some((generation, Role::Leader(state))) => {
            assert_leads_as(&state.borrow(), shard.config.broker_id, tp);
            Some(Leadership { generation, state })
        }
        _ => None,
    }
}

impl Leadership {
    /// Refuses acks=all when the ISR is smaller than `min.insync.replicas`
    /// (before anything is appended).
    pub fn acks_all_check(&self) -> Result<(), ErrorCode> {
        self.state
            .borrow()
            .produce_check(Acks::All)
            .map_err(|e| e.error_code())
    }
}

/// After an append made under `leadership`: once it is durable here, the
/// HW may move (a leader alone in its ISR moves it by itself), and an
/// acks=all produce whose last record is `last_offset` completes when the
/// HW passes it, within `timeout` (the request's `timeout_ms`;
/// REQUEST_TIMED_OUT past it; `None`: only the HW update, no wait).
///
/// Only while the same role lasts: once this broker no longer leads the
/// partition in that epoch (it follows, is offline, or was moved off), the
/// wait ends with NOT_LEADER_OR_FOLLOWER, as Kafka completes its delayed
/// produces when leadership moves. The new leader may not have the
/// records, and the local log's HW no longer says what the ISR holds; an
/// acknowledgement then would be a lost write (an idempotent producer
/// sees it as OUT_OF_ORDER_SEQUENCE_NUMBER on its next batch).
pub async fn wait_acks_all(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    log: &Rc<PartitionLog>,
    last_offset: i64,
    timeout: Option<Duration>,
    leadership: &Leadership,
) -> Result<(), ErrorCode> {
    let manager = shard.runtime().replicas.clone();
    let current = || manager.is_current(tp, leadership.generation);
    // The engine's durability wait is on what is published here (durable
    // under `fsync`, written otherwise): the offset the HW counts.
    let _ = log.wait_durable(last_offset).await;
    if !current() {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    sync(&leadership.state, log);
    let Some(timeout) = timeout else {
        return Ok(());
    };
    let waited = glommio::timer::timeout(timeout, async {
        loop {
            if !current() {
                return Ok(Err(ErrorCode::NotLeaderOrFollower));
            }
            if log.high_watermark() > last_offset {
                return Ok(Ok(()));
            }
            let role_changed = async {
                manager.next_change().await;
                Ok::<(), engine::EngineError>(())
            };
            if let Err(e) =
                futures_lite::future::or(log.wait_high_watermark_past(last_offset), role_changed)
                    .await
            {
                return Ok(Err(e.error_code()));
            }
        }
    })
    .await;
    match waited {
        Ok(outcome) => outcome,
        Err(_) => Err(ErrorCode::RequestTimedOut),
    }
}

/// The leadership a coordinator was loaded under: the partition's leader
/// epoch and, for a replicated partition, the role's generation. A
/// coordinator writes its internal topic only while its lease is the
/// partition's current one ([`leader_lease`]), and acts on a write only
/// once the high watermark passed it ([`append_as_leader`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderLease {
    /// The leader epoch its records are stamped with; also the coordinator
    /// epoch its transaction markers carry.
    pub leader_epoch: i32,
    /// The role's generation (`None`: one replica, the single-node rules).
    generation: Option<u64>,
}

/// This broker's lease on `tp` now: it leads the replicated partition, or
/// holds its only replica. `None` while it follows, is offline, was moved
/// off, has no log for it, or its state in the image is not applied here
/// yet.
pub fn leader_lease(shard: &Shard, tp: &TopicPartition) -> Option<LeaderLease> {
    match shard.runtime().replicas.role(tp) {
        Some((generation, Role::Leader(state))) => {
            let state = state.borrow();
            assert_leads_as(&state, shard.config.broker_id, tp);
            Some(LeaderLease {
                leader_epoch: state.leader_epoch(),
                generation: Some(generation),
            })
        }
        Some((_, Role::Follower { .. } | Role::Offline)) => None,
        None if serves_alone(shard, tp) => shard.logs.get(tp).map(|log| LeaderLease {
            leader_epoch: log.leader_epoch(),
            generation: None,
        }),
        None => None,
    }
}

/// Whether a partition without a role is this broker's alone: the metadata
/// image names this broker its leader and only replica, and the reconciler
/// has applied that state here in the image's leader epoch. Until then (a
/// partition just created; at a start, the image replayed from the local
/// metadata log before this process registered, whose epoch the
/// registration then bumps) no lease is handed out: a coordinator loaded
/// under the old epoch would be reloaded under the new one, and what it
/// answered in between (a member id handed out) lost.
fn serves_alone(shard: &Shard, tp: &TopicPartition) -> bool {
    let image = shard.runtime().view.image();
    let Some(state) = image
        .topic_by_name(&tp.topic)
        .and_then(|topic| topic.partitions.get(&tp.partition))
    else {
        return false;
    };
    state.leader == shard.config.broker_id
        && state.replicas.len() <= 1
        && shard.runtime().replicas.held_alone_in(tp) == Some(state.leader_epoch)
}

/// Appends `records` to `tp` as its leader under `lease`, as an acks=all
/// produce does, and returns once the high watermark passed them (within
/// `timeout`). Refused (NOT_LEADER_OR_FOLLOWER) unless `lease` is the
/// partition's current lease, before and after the wait: a coordinator
/// that lost its partition never makes a write durable there, nor acts on
/// one. Runs on the shard that owns `tp`.
pub async fn append_as_leader(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    lease: LeaderLease,
    records: &mut [u8],
    timeout: Duration,
) -> Result<engine::AppendResult, ErrorCode> {
    if shard.owner(tp) != shard.id {
        // An invariant: only the owner shard has the log and its role.
        tracing::error!(%tp, shard = shard.id, "a leader's append asked of a shard that does not own the partition");
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    let current = |shard: &Shard| leader_lease(shard, tp) == Some(lease);
    if !current(shard) {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    let log = shard.logs.get(tp).ok_or(ErrorCode::NotLeaderOrFollower)?;
    let leading = leadership(shard, tp);
    // `current` just read the same role table (no await since): a lease of
    // a replicated partition is a leader role, of that very generation.
    assert_eq!(
        leading.as_ref().map(|l| l.generation),
        lease.generation,
        "a coordinator writes under the leadership its lease names: {tp}, lease {lease:?}"
    );
    if let Some(leading) = &leading {
        leading.acks_all_check()?;
    }
    let appended = log
        .append(records, lease.leader_epoch)
        .map_err(|e| e.error_code())?;
    match &leading {
        Some(leading) => {
            wait_acks_all(
                shard,
                tp,
                &log,
                appended.last_offset,
                Some(timeout),
                leading,
            )
            .await?;
            // Its `Ok` is the HW seen past the write, in the same poll.
            assert!(
                log.high_watermark() > appended.last_offset,
                "an acks=all write completes only once the HW passed it: {tp}, last offset {}, HW {}",
                appended.last_offset,
                log.high_watermark()
            );
        }
        None => {
            // One replica: durable here is the whole acks=all.
            let durable = glommio::timer::timeout(timeout, async {
                Ok(log.wait_durable(appended.last_offset).await)
            });
            match durable.await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e.error_code()),
                Err(_) => return Err(ErrorCode::RequestTimedOut),
            }
        }
    }
    if !current(shard) {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    Ok(appended)
}

/// A coordinator's answer for an [`append_as_leader`] that failed, as
/// Kafka's coordinators map it: the partition is not led here (any more)
/// → NOT_COORDINATOR, so the client looks the coordinator up again; not
/// enough replicas or too slow → COORDINATOR_NOT_AVAILABLE, retriable.
pub fn coordinator_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::NotLeaderOrFollower
        | ErrorCode::FencedLeaderEpoch
        | ErrorCode::KafkaStorageError
        | ErrorCode::UnknownTopicOrPartition => ErrorCode::NotCoordinator,
        _ => ErrorCode::CoordinatorNotAvailable,
    }
}

/// Waits (at most `wait`) until the high watermark reaches the log end a
/// coordinator is about to load: a new leader's HW may trail records its
/// predecessor had committed, and a load that stopped short could miss one
/// (a PrepareCommit, an offset commit). COORDINATOR_LOAD_IN_PROGRESS when
/// it does not get there in time; the client retries.
pub async fn wait_committed_to_end(log: &PartitionLog, wait: Duration) -> Result<(), ErrorCode> {
    let end = log.log_end_offset();
    if end <= log.high_watermark() {
        return Ok(());
    }
    let caught_up = glommio::timer::timeout(wait, async {
        Ok(log.wait_high_watermark_past(end - 1).await)
    })
    .await;
    match caught_up {
        Ok(Ok(_)) => Ok(()),
        _ => Err(ErrorCode::CoordinatorLoadInProgress),
    }
}

/// A follower's fetch of one partition, served by its owner shard.
#[derive(Debug, Clone)]
pub struct ServeFollowerFetch {
    /// The partition.
    pub tp: TopicPartition,
    /// The follower's node id.
    pub replica: i32,
    /// Its log end offset: where it fetches from.
    pub fetch_offset: i64,
    /// The leader epoch it follows.
    pub current_leader_epoch: i32,
    /// The epoch of the last batch in its log (Fetch v12+; -1: none, or
    /// an older version): checked against this log's epochs.
    pub last_fetched_epoch: i32,
    /// Its log start offset (Fetch v5+; -1: not said): where it can serve
    /// consumers from (KIP-392).
    pub log_start_offset: i64,
    /// At most this many bytes.
    pub max_bytes: usize,
    /// How long to wait for new data when there is none.
    pub max_wait: Duration,
    /// The partition is throttled here and the leader's throttle is over
    /// its rate (KIP-73, [`crate::quotas::replication`]): a follower out of
    /// the ISR gets no records.
    pub throttled: bool,
}

/// What the leader answers a follower for one partition.
#[derive(Debug, Clone)]
pub struct FollowerFetchReply {
    /// The error, or `None`.
    pub error: ErrorCode,
    /// The leader's HW.
    pub high_watermark: i64,
    /// The leader's log start.
    pub log_start_offset: i64,
    /// The batches from `fetch_offset`, as written.
    pub records: Option<Bytes>,
    /// Where the follower's log diverges from this one (KIP-595): this
    /// log's largest epoch ≤ the follower's last fetched one and its end.
    /// Comes with no records; the follower truncates and fetches again.
    pub diverging_epoch: Option<EpochEndOffset>,
}

impl FollowerFetchReply {
    fn error(error: ErrorCode) -> Self {
        FollowerFetchReply {
            error,
            high_watermark: -1,
            log_start_offset: -1,
            records: None,
            diverging_epoch: None,
        }
    }
}

/// Kafka's `Partition.validateFetchOffsetAndMaybeGetDivergingEpoch`: where
/// the follower's log (ending at `fetch_offset`, its last batch of
/// `last_fetched_epoch`) parts from this one, if it does. The log answers
/// for the epoch rather than its bare cache, so that a leader that has not
/// written in its own epoch yet answers as Kafka's (which assigns the epoch
/// when it is elected).
fn diverging_epoch_of(
    log: &PartitionLog,
    fetch_offset: i64,
    last_fetched_epoch: i32,
) -> Result<Option<EpochEndOffset>, ReplicationError> {
    let Some(epoch) = last_fetched_epoch_from_wire(last_fetched_epoch) else {
        return Ok(None);
    };
    diverging_epoch_of_answer(log.end_offset_for_epoch(epoch), fetch_offset, epoch)
}

impl ServeFollowerFetch {
    /// Records the follower's fetch offset in the leader state, moving the
    /// HW and the ISR as it allows, and hands a moved HW to the log.
    fn record_fetch(
        &self,
        shard: &Shard,
        state: &RefCell<LeaderState>,
        log: &PartitionLog,
    ) -> Result<(), ErrorCode> {
        let moved =
            state
                .borrow_mut()
                .on_follower_fetch(self.replica, self.fetch_offset, shard.now_ms());
        if moved.is_ok() {
            (state.borrow_mut()).on_follower_log_start(self.replica, self.log_start_offset);
        }
        // `sync` just brought the state to this log's end, with no await
        // since: a fetch offset the state took is at most that end, and so
        // is any HW it moved to.
        let log_end_offset = log.log_end_offset();
        if moved.is_ok() {
            assert!(
                self.fetch_offset <= log_end_offset,
                "a follower's accepted fetch offset never passes the leader's log end: {}, \
                 replica {} at {}, log end {log_end_offset}",
                self.tp,
                self.replica,
                self.fetch_offset
            );
        }
        match moved {
            Ok(Some(hw)) => {
                assert!(
                    hw <= log_end_offset,
                    "a leader's HW never passes its log end: {}, HW {hw}, log end {log_end_offset}",
                    self.tp
                );
                log.set_replication_limit(Some(hw));
            }
            Ok(None) => {}
            Err(e) => return Err(e.error_code()),
        }
        Ok(())
    }

    /// Reads from the fetch offset; an empty read waits up to `max_wait`
    /// for new durable records and reads again.
    async fn read_or_wait(
        &self,
        log: &PartitionLog,
    ) -> Result<engine::ReadResult, engine::EngineError> {
        let mut read = log
            .read_replica(self.fetch_offset, self.max_bytes, ReadMode::Copy)
            .await;
        let empty = matches!(&read, Ok(r) if r.data.is_empty());
        if empty && !self.max_wait.is_zero() {
            let _ = glommio::timer::timeout(self.max_wait, async {
                let _ = log.wait_durable(self.fetch_offset).await;
                Ok(())
            })
            .await;
            read = log
                .read_replica(self.fetch_offset, self.max_bytes, ReadMode::Copy)
                .await;
        }
        read
    }
}

impl OwnerCall<crate::ShardRuntime> for ServeFollowerFetch {
    type Reply = FollowerFetchReply;

    async fn run(self, shard: Rc<Shard>) -> FollowerFetchReply {
        // The handler sends it to `shard.owner(tp)`; only there is the role.
        assert_eq!(
            shard.owner(&self.tp),
            shard.id,
            "a follower fetch is served by the partition's owner: {} is shard {}'s, served on shard {}",
            self.tp,
            shard.owner(&self.tp),
            shard.id
        );
        let Some(log) = shard.logs.get(&self.tp) else {
            return FollowerFetchReply::error(ErrorCode::NotLeaderOrFollower);
        };
        let Some(state) = shard.runtime().replicas.leader_state(&self.tp) else {
            return FollowerFetchReply::error(ErrorCode::NotLeaderOrFollower);
        };
        if let Err(e) = state.borrow().check_leader_epoch(self.current_leader_epoch) {
            return FollowerFetchReply::error(e.error_code());
        }
        if state.borrow().follower(self.replica).is_none() {
            return FollowerFetchReply::error(ErrorCode::NotLeaderOrFollower);
        }
        sync(&state, &log);
        // A diverging follower's fetch offset names records this log does
        // not have: it is not its log end here (Kafka skips
        // `updateFollowerFetchState`), so neither the HW nor the ISR hears
        // of it.
        match diverging_epoch_of(&log, self.fetch_offset, self.last_fetched_epoch) {
            Ok(None) => {}
            Ok(Some(diverging)) => {
                return FollowerFetchReply {
                    error: ErrorCode::None,
                    high_watermark: state.borrow().high_watermark(),
                    log_start_offset: log.log_start_offset(),
                    records: None,
                    diverging_epoch: Some(diverging),
                }
            }
            Err(e) => return FollowerFetchReply::error(e.error_code()),
        }
        // Below the log start there is nothing to read: the follower asks
        // where the log starts and begins there. Its offset is not taken as
        // its log end (Kafka reads first and updates the follower only
        // after a read that succeeded).
        if self.fetch_offset < log.log_start_offset() {
            let below_local = log.earliest_offset() <= self.fetch_offset;
            return FollowerFetchReply::error(if below_local {
                ErrorCode::OffsetMovedToTieredStorage
            } else {
                ErrorCode::OffsetOutOfRange
            });
        }
        if let Err(code) = self.record_fetch(&shard, &state, &log) {
            return FollowerFetchReply::error(code);
        }
        self.read_for_follower(&state, &log).await
    }
}

impl ServeFollowerFetch {
    /// The records from the fetch offset, or none for a throttled follower
    /// out of the ISR, answered after the fetch's wait, as a fetch with
    /// nothing new is (Kafka answers a throttled partition empty, and its
    /// fetch waits in purgatory), so the follower does not spin.
    async fn read_for_follower(
        &self,
        state: &RefCell<LeaderState>,
        log: &PartitionLog,
    ) -> FollowerFetchReply {
        if self.throttled && !state.borrow().isr().contains(&self.replica) {
            glommio::timer::sleep(self.max_wait).await;
            return FollowerFetchReply {
                error: ErrorCode::None,
                high_watermark: state.borrow().high_watermark(),
                log_start_offset: log.log_start_offset(),
                records: None,
                diverging_epoch: None,
            };
        }
        match self.read_or_wait(log).await {
            Ok(result) => FollowerFetchReply {
                error: ErrorCode::None,
                high_watermark: state.borrow().high_watermark(),
                log_start_offset: result.log_start_offset,
                records: bytes_of(result.data),
                diverging_epoch: None,
            },
            Err(e) => FollowerFetchReply::error(e.error_code()),
        }
    }
}

fn bytes_of(data: ReadData) -> Option<Bytes> {
    match data {
        ReadData::Empty => None,
        ReadData::Bytes(bytes) => Some(bytes),
        ReadData::Pieces(pieces) => {
            let mut joined = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
            for piece in pieces {
                joined.extend_from_slice(&piece);
            }
            Some(Bytes::from(joined))
        }
        // A follower read is a copy read; a file range never comes back.
        ReadData::File(_) => None,
    }
}

/// The leader's durable watch for one partition, while `generation` is its
/// role: each time the log makes more of itself durable here (its
/// published offset, which the HW counts), the leader state hears of it,
/// so the HW moves with acks=0/1 appends as soon as they are durable — one
/// task per led partition, woken by the log, not one task per produce.
/// (An acks=all produce syncs on its own way to its wait; the timer's tick
/// is the bound should this task end early.) Ends when the role changes,
/// the log closes or its disk writes fail.
pub async fn run_durable_watch(shard: Rc<Shard>, tp: TopicPartition, generation: u64) {
    let manager = shard.runtime().replicas.clone();
    loop {
        let Some((state, log)) = led_in(&shard, &tp, generation) else {
            return;
        };
        sync(&state, &log);
        // Past what is published now, not past the state's durable offset
        // (capped at the log end): each wake is progress, never a spin.
        let published = log.published_offset();
        let advanced = async { log.wait_durable(published).await.is_ok() };
        let role_changed = async {
            manager.next_change().await;
            true
        };
        if !futures_lite::future::or(advanced, role_changed).await {
            return;
        }
    }
}

/// The leader state and log of `tp` while `generation` is its role (a
/// leader task of an older role ends when this is `None`).
fn led_in(
    shard: &Shard,
    tp: &TopicPartition,
    generation: u64,
) -> Option<(Rc<RefCell<LeaderState>>, Rc<PartitionLog>)> {
    let manager = &shard.runtime().replicas;
    if !manager.is_current(tp, generation) {
        return None;
    }
    match (manager.role(tp), shard.logs.get(tp)) {
        (Some((_, Role::Leader(state))), Some(log)) => Some((state, log)),
        _ => None,
    }
}

/// How long a proposal whose outcome is unknown waits for committed
/// metadata before it is sent again.
const RESEND_UNANSWERED_AFTER: Duration = Duration::from_secs(1);

/// The leader's timer for one partition, while `generation` is its role:
/// keeps the HW up to the local log and proposes ISR changes.
///
/// A proposal whose outcome is unknown (no controller was known, the
/// controller lost its leadership, the answer was lost) stays pending until
/// committed metadata settles it, and is sent again, the same proposal on
/// the same partition epoch, every [`RESEND_UNANSWERED_AFTER`] until then,
/// as Kafka's AlterPartitionManager does. A controller that applied it
/// already refuses the copy (`INVALID_UPDATE_VERSION`), and its metadata
/// settles it; one that never saw it applies it. Without the resend, a
/// proposal made while no controller was known waited for metadata that
/// would never come, and the ISR never changed again under this leader.
pub async fn run_leader_timer(shard: Rc<Shard>, tp: TopicPartition, generation: u64) {
    let (topic_id, own) = match shard.topics.borrow().get(&tp.topic) {
        Some(entry) => (entry.topic_id, shard.config.broker_id),
        None => return,
    };
    let mut unanswered: Option<(u64, std::time::Instant)> = None;
    loop {
        glommio::timer::sleep(LEADER_TICK).await;
        let Some((state, log)) = led_in(&shard, &tp, generation) else {
            return;
        };
        sync(&state, &log);
        let proposal = match next_proposal(&shard, &state) {
            Some(proposal) => proposal,
            None => match resend_due(&state, &mut unanswered) {
                Some(proposal) => proposal,
                None => continue,
            },
        };
        tracing::info!(%tp, kind = ?proposal.kind, isr = ?proposal.new_isr, "proposing an ISR change");
        let request = ControllerRpc::AlterPartition {
            broker_id: own,
            topic_id,
            partition: tp.partition,
            leader_epoch: proposal.leader_epoch,
            partition_epoch: proposal.partition_epoch,
            new_isr: proposal.new_isr.iter().copied().collect(),
        };
        let answer = shard.call(METADATA_SHARD, SendToController(request)).await;
        let Some(rejection) = rejection_of(&tp, answer) else {
            // Committed: nothing to send again while the metadata comes.
            unanswered = None;
            continue;
        };
        if rejection == AlterPartitionRejection::Unknown {
            unanswered = Some((proposal.proposal_id, std::time::Instant::now()));
        }
        state
            .borrow_mut()
            .on_alter_partition_rejected(proposal.proposal_id, rejection);
    }
}

/// The ISR change this tick proposes, if any. KIP-841: a fenced broker may
/// not join an ISR; the controller would refuse it, so it is not proposed.
fn next_proposal(shard: &Shard, state: &RefCell<LeaderState>) -> Option<AlterPartition> {
    let image = shard.runtime().view.image();
    let proposal = state
        .borrow_mut()
        .tick_with(shard.now_ms(), |replica| image.is_live(replica))?;
    let ineligible = proposal.kind == IsrChangeKind::Expand
        && proposal
            .new_isr
            .iter()
            .any(|&replica| !image.is_live(replica));
    if ineligible {
        state
            .borrow_mut()
            .on_alter_partition_rejected(proposal.proposal_id, AlterPartitionRejection::NotApplied);
        return None;
    }
    Some(proposal)
}

/// The pending proposal to send again: the one `unanswered` names, still
/// pending (no committed metadata settled it), and last sent at least
/// [`RESEND_UNANSWERED_AFTER`] ago.
fn resend_due(
    state: &RefCell<LeaderState>,
    unanswered: &mut Option<(u64, std::time::Instant)>,
) -> Option<AlterPartition> {
    let (id, sent) = (*unanswered)?;
    let state = state.borrow();
    let Some(pending) = state
        .pending_alter_partition()
        .filter(|p| p.proposal_id == id)
    else {
        *unanswered = None;
        return None;
    };
    (sent.elapsed() >= RESEND_UNANSWERED_AFTER).then(|| pending.clone())
}

/// How the controller's answer leaves a proposal: `None` once committed
/// (the reconciler brings the new ISR here), else its rejection, logged.
fn rejection_of(
    tp: &TopicPartition,
    answer: Result<Result<ControllerReply, (ErrorCode, String)>, kernel::error::RequestError>,
) -> Option<AlterPartitionRejection> {
    // A replica that cannot append yet (its disk is full) is refused
    // at every tick until it can: not worth a warning each time.
    let ineligible = matches!(answer, Ok(Err((ErrorCode::IneligibleReplica, _))));
    let rejection = match answer {
        Ok(Ok(ControllerReply::Committed { .. })) => return None,
        Ok(Err((ErrorCode::InvalidRequest | ErrorCode::IneligibleReplica, _))) => {
            AlterPartitionRejection::NotApplied
        }
        _ => AlterPartitionRejection::Unknown,
    };
    if ineligible {
        tracing::debug!(%tp, ?answer, "ISR change not committed");
    } else {
        tracing::warn!(%tp, ?answer, "ISR change not committed");
    }
    Some(rejection)
}

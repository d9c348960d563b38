//! A follower's fetcher, one task per followed partition on the shard that
//! owns it, for as long as its role (leader, epoch) lasts:
//!
//! 1. Fetch from our log end with our replica id and the epoch of our last
//!    batch (`last_fetched_epoch`, Fetch v12); append the batches as the
//!    leader wrote them (offsets, epochs); fsync; only then fetch again —
//!    the next fetch's offset is what tells the leader we hold the data, so
//!    the HW only ever counts what is durable on the ISR.
//! 2. When our log has parted from the leader's (we hold records of an
//!    epoch past where the leader's copy of it ends), the leader answers
//!    `diverging_epoch` instead of records (KIP-595): truncate to where the
//!    logs agree and go on fetching from the new end. What we cut was never
//!    committed (the leader would have it otherwise). This is how Kafka's
//!    replica fetcher truncates since 2.7, with no OffsetForLeaderEpoch
//!    round first, and it also catches a divergence that arises within a
//!    session.
//! 3. Readers of this replica see up to min(leader's HW, our log end).
//! 4. Fetches are in a fetch session with the leader (KIP-227,
//!    [`super::leader_session`]): full once, then incremental ones that
//!    name the partition only when our log end moved.
//!
//! 5. A follower replication throttle (KIP-73,
//!    [`crate::quotas::replication`]) holds back the fetches of the
//!    partitions it lists while this replica is out of the ISR and the
//!    throttle is over its rate.
//!
//! Any error (the leader moved, the connection broke) pauses and retries;
//! a new role stops the task. After an OFFSET_OUT_OF_RANGE answer the next
//! session first asks the leader for its log start and, when that is past
//! our log end, starts the log over there ([`super::out_of_range`]);
//! otherwise the leader could not place our last epoch, and it truncates
//! with OffsetForLeaderEpoch (see [`super::truncation`]).

use super::client::KafkaConnection;
use super::leader_session::{LeaderSession, SessionAnswer};
use super::out_of_range::start_over_if_behind;
use super::truncation::{truncate_on_divergence, truncate_to_leader};
use crate::cluster_runtime::partition_leader;
use crate::fetch_sessions::INITIAL_EPOCH;
use crate::quotas::replication::{self, Side};
use crate::Shard;
use cluster::replication::{diverging_epoch_from_wire, EpochEndOffset, UNDEFINED_EPOCH};
use engine::{ErrorCode, PartitionLog, TopicPartition};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::net::ToSocketAddrs;
use std::rc::Rc;
use std::time::Duration;

/// Fetch v12: replica id in the body, current leader epoch, topic names, and
/// the first version with `last_fetched_epoch` / `diverging_epoch`.
const FETCH_VERSION: i16 = 12;
/// How long the leader may hold a fetch with nothing new.
const FETCH_MAX_WAIT_MS: i32 = 500;
/// The most bytes of one fetch.
const FETCH_MAX_BYTES: i32 = 8 << 20;
/// Pause after an error before trying again.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// How often a throttled fetcher looks again whether it may fetch.
const THROTTLE_PAUSE: Duration = Duration::from_millis(100);
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs the fetcher of `tp` while `generation` is its role.
pub async fn run_fetcher(
    shard: Rc<Shard>,
    tp: TopicPartition,
    leader: i32,
    leader_epoch: i32,
    generation: u64,
) {
    let manager = shard.runtime().replicas.clone();
    let mut out_of_range = false;
    while manager.is_current(&tp, generation) {
        let session = Session {
            tp: &tp,
            leader,
            leader_epoch,
            generation,
            out_of_range,
        };
        match follow(&shard, session).await {
            Ok(()) => return,
            Err(e) => {
                out_of_range = matches!(e, SessionError::OutOfRange);
                tracing::debug!(%tp, leader, error = %e, "fetching from the leader failed; retrying");
                glommio::timer::sleep(RETRY_BACKOFF).await;
            }
        }
    }
}

/// One session's parameters: the role it serves, and whether the last
/// session ended out of range.
struct Session<'a> {
    tp: &'a TopicPartition,
    leader: i32,
    leader_epoch: i32,
    generation: u64,
    /// The last session ended with OFFSET_OUT_OF_RANGE: our log end is
    /// below the leader's log start, or the leader cannot place our last
    /// fetched epoch.
    out_of_range: bool,
}

/// Why a session ended.
#[derive(Debug)]
enum SessionError {
    /// The leader answered OFFSET_OUT_OF_RANGE.
    OutOfRange,
    /// Anything else: the leader moved, the connection broke, the disk.
    Other(String),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::OutOfRange => f.write_str("the leader answered OFFSET_OUT_OF_RANGE"),
            SessionError::Other(e) => f.write_str(e),
        }
    }
}

impl From<String> for SessionError {
    fn from(e: String) -> Self {
        SessionError::Other(e)
    }
}

impl From<&str> for SessionError {
    fn from(e: &str) -> Self {
        SessionError::Other(e.to_string())
    }
}

/// One session with the leader: fetch (truncating where the leader says
/// our log diverges) until an error or a new role (`Ok`).
async fn follow(shard: &Rc<Shard>, session: Session<'_>) -> Result<(), SessionError> {
    let Session {
        tp,
        leader,
        leader_epoch,
        generation,
        out_of_range,
    } = session;
    let manager = shard.runtime().replicas.clone();
    let log = shard.logs.get(tp).ok_or("the local replica is gone")?;
    let (node, host, port) =
        partition_leader(shard, &tp.topic, tp.partition).map_err(|code| code.to_string())?;
    if node != leader {
        return Err(format!("the image names leader {node}, not {leader} yet").into());
    }
    let address = (host.as_str(), u16::try_from(port).unwrap_or(0))
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("the leader's address resolves to nothing")?;
    let client_id = format!("rill-replica-{}", shard.config.broker_id);
    let mut connection =
        KafkaConnection::connect(&shard.config, (&host, address), CONNECT_TIMEOUT, client_id)
            .await?;
    if out_of_range && !start_over_if_behind(&mut connection, shard, tp, &log, leader_epoch).await?
    {
        truncate_to_leader(&mut connection, shard, tp, &log, leader_epoch).await?;
    }
    let mut leader_session = LeaderSession::default();
    while manager.is_current(tp, generation) {
        let throttled = hold_while_throttled(shard, tp, generation).await;
        let fetched = fetch(
            &mut connection,
            shard,
            tp,
            &log,
            leader_epoch,
            &mut leader_session,
        )
        .await?;
        // The answer is for the role and the log end of its request: a role
        // that ended meanwhile (a fetcher of the next role may run already)
        // or a log end that moved makes it stale, as Kafka's fetcher drops
        // a response whose fetch offset no longer matches.
        if !manager.is_current(tp, generation) {
            return Ok(());
        }
        if fetched.fetch_offset != log.log_end_offset() {
            return Err(SessionError::from("the log end moved during a fetch"));
        }
        if let Some(diverging) = fetched.diverging_epoch {
            truncate_on_divergence(&manager, tp, &log, diverging).await?;
            continue;
        }
        if throttled {
            let bytes = fetched.records.as_ref().map_or(0, |r| r.len());
            shard
                .runtime()
                .quotas
                .record_replication(Side::Follower, bytes);
        }
        take_fetched(shard, tp, &log, fetched).await?;
    }
    Ok(())
}

/// KIP-73's follower throttle: while this broker's follower throttle is
/// over its rate, a partition it lists waits before fetching while this
/// replica is out of the ISR (Kafka leaves it out of its fetches). True
/// when the partition is listed, so its bytes count.
async fn hold_while_throttled(shard: &Rc<Shard>, tp: &TopicPartition, generation: u64) -> bool {
    let manager = shard.runtime().replicas.clone();
    loop {
        let Some(over) = replication::over_rate(shard, Side::Follower) else {
            return false;
        };
        if !replication::throttles(shard, tp, Side::Follower) {
            return false;
        }
        if !over || in_isr(shard, tp) || !manager.is_current(tp, generation) {
            return true;
        }
        glommio::timer::sleep(THROTTLE_PAUSE).await;
    }
}

/// Whether the image has this broker in `tp`'s ISR.
fn in_isr(shard: &Shard, tp: &TopicPartition) -> bool {
    let image = shard.runtime().view.image();
    let state = (image.topic_by_name(&tp.topic)).and_then(|t| t.partitions.get(&tp.partition));
    state.is_some_and(|s| s.isr.contains(&shard.config.broker_id))
}

/// Takes one answer with no divergence: appends its records and syncs
/// them, then moves the lag, the visible HW and the log start.
async fn take_fetched(
    shard: &Shard,
    tp: &TopicPartition,
    log: &PartitionLog,
    fetched: Fetched,
) -> Result<(), SessionError> {
    if let Some(records) = fetched.records.filter(|r| !r.is_empty()) {
        let appended = log
            .append_replicated_copy(&records)
            .map_err(|e| format!("append of the leader's batches refused: {e}"))?;
        log.wait_durable(appended.last_offset)
            .await
            .map_err(|e| format!("the replica's disk failed: {e}"))?;
    }
    let manager = shard.runtime().replicas.clone();
    manager.counters.borrow_mut().follower_lag.insert(
        (tp.topic.clone(), tp.partition),
        (fetched.high_watermark - log.log_end_offset()).max(0),
    );
    let visible = fetched.high_watermark.min(log.log_end_offset());
    if visible > log.high_watermark() {
        log.set_replication_limit(Some(visible));
    }
    follow_log_start(tp, log, fetched.log_start_offset).await;
    Ok(())
}

/// Moves our log start up to the leader's (DeleteRecords or retention on
/// the leader), as Kafka's follower does (`maybeIncrementLogStartOffset`):
/// a replica elected next must not serve records the leader deleted. Only
/// within what we hold below the HW; a failure waits for the next answer.
async fn follow_log_start(tp: &TopicPartition, log: &PartitionLog, leader_log_start: i64) {
    if leader_log_start <= log.log_start_offset() || leader_log_start > log.high_watermark() {
        return;
    }
    if let Err(e) = log.delete_records(leader_log_start).await {
        tracing::debug!(%tp, leader_log_start, error = %e, "could not follow the leader's log start");
    }
}

/// What a fetch brought.
struct Fetched {
    /// The offset the request fetched at (our log end then).
    fetch_offset: i64,
    high_watermark: i64,
    /// The leader's log start (-1: not in an incremental answer).
    log_start_offset: i64,
    records: Option<bytes::Bytes>,
    /// The leader's answer when our log diverges from its own (then there
    /// are no records).
    diverging_epoch: Option<EpochEndOffset>,
}

async fn fetch(
    connection: &mut KafkaConnection,
    shard: &Shard,
    tp: &TopicPartition,
    log: &PartitionLog,
    leader_epoch: i32,
    leader_session: &mut LeaderSession,
) -> Result<Fetched, SessionError> {
    // A session the leader lost is restarted with a full fetch at once.
    for _ in 0..2 {
        // Read together, on this shard, with no await in between: the
        // epoch of the last batch below the offset we fetch from.
        let last_fetched_epoch = log
            .leader_epoch_cache()
            .latest_epoch()
            .unwrap_or(UNDEFINED_EPOCH);
        let fetch_offset = log.log_end_offset();
        let mut partition = FetchPartition::default();
        partition.partition = tp.partition;
        partition.current_leader_epoch = leader_epoch;
        partition.last_fetched_epoch = last_fetched_epoch;
        partition.fetch_offset = fetch_offset;
        partition.log_start_offset = log.log_start_offset();
        partition.partition_max_bytes = FETCH_MAX_BYTES;
        let sent = leader_session.must_send(&partition).then_some(partition);
        let (session_id, session_epoch) = leader_session.metadata();
        let request = fetch_request(shard, tp, sent.clone(), session_id, session_epoch);
        let response: FetchResponse = connection
            .request(ApiKey::Fetch, FETCH_VERSION, &request)
            .await?;
        let answer =
            leader_session.answered(sent.as_ref(), response.error_code, response.session_id);
        if let SessionAnswer::Restart(code) = answer {
            tracing::debug!(%tp, %code, "the leader lost our fetch session; fetching in full");
            continue;
        }
        let incremental = session_epoch != INITIAL_EPOCH && session_id != 0;
        return fetched_of(response, tp, fetch_offset, incremental, leader_session);
    }
    Err(SessionError::from(
        "the leader refused two fetch sessions in a row",
    ))
}

/// A fetch of `partition` of `tp` (none: an incremental fetch with nothing
/// to tell the leader) in session `session_id` at `session_epoch`.
fn fetch_request(
    shard: &Shard,
    tp: &TopicPartition,
    partition: Option<FetchPartition>,
    session_id: i32,
    session_epoch: i32,
) -> FetchRequest {
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(shard.config.broker_id);
    request.max_wait_ms = FETCH_MAX_WAIT_MS;
    request.min_bytes = 1;
    request.max_bytes = FETCH_MAX_BYTES;
    request.session_id = session_id;
    request.session_epoch = session_epoch;
    if let Some(partition) = partition {
        let mut topic = FetchTopic::default();
        topic.topic = TopicName(StrBytes::from_string(tp.topic.clone()));
        topic.partitions = vec![partition];
        request.topics = vec![topic];
    }
    request
}

/// Our partition's part of the leader's answer; an incremental answer
/// without it means nothing changed.
fn fetched_of(
    response: FetchResponse,
    tp: &TopicPartition,
    fetch_offset: i64,
    incremental: bool,
    leader_session: &mut LeaderSession,
) -> Result<Fetched, SessionError> {
    let data = answer_for(
        response.responses.into_iter().flat_map(|t| t.partitions),
        |p| (p.partition_index == tp.partition).then_some(p.error_code),
    );
    let data = match data {
        Ok(data) => data,
        Err(None) if incremental => {
            return Ok(Fetched {
                fetch_offset,
                high_watermark: leader_session.high_watermark(),
                log_start_offset: -1,
                records: None,
                diverging_epoch: None,
            })
        }
        Err(Some(ErrorCode::OffsetOutOfRange | ErrorCode::OffsetMovedToTieredStorage)) => {
            return Err(SessionError::OutOfRange)
        }
        Err(Some(code)) => return Err(SessionError::Other(format!("the leader answered {code}"))),
        Err(None) => {
            return Err(SessionError::from(
                "the leader's answer lacks the partition",
            ))
        }
    };
    leader_session.set_high_watermark(data.high_watermark);
    Ok(Fetched {
        fetch_offset,
        high_watermark: data.high_watermark,
        log_start_offset: data.log_start_offset,
        diverging_epoch: diverging_epoch_from_wire(
            data.diverging_epoch.epoch,
            data.diverging_epoch.end_offset,
        ),
        records: data.records,
    })
}

/// The leader's answer for our partition: `error_of` names the partition's
/// entry (with its error code); an error code is an `Err` with the code,
/// a missing entry an `Err(None)`.
fn answer_for<P>(
    partitions: impl IntoIterator<Item = P>,
    error_of: impl Fn(&P) -> Option<i16>,
) -> Result<P, Option<ErrorCode>> {
    for partition in partitions {
        match error_of(&partition) {
            Some(0) => return Ok(partition),
            Some(code) => {
                let code = ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError);
                return Err(Some(code));
            }
            None => {}
        }
    }
    Err(None)
}

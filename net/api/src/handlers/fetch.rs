//! Fetch (key 1): read every asked partition on its owner shard; if fewer than
//! `min_bytes` are ready, long-poll — woken by an append on any owner shard,
//! or by `max_wait_ms` — then read again, the owner reading again in the
//! same call that waited ([`runtimes::routing::read_or_wait`]). The response is framed around file
//! ranges by [`crate::fetch_response`] and leaves through the shard's sender.
//!
//! `isolation_level=1` (read_committed) reads stop at the last stable offset
//! and carry the aborted transactions of the returned range, so the consumer
//! drops their records.
//!
//! Fetch from the closest replica (KIP-392): a v11+ fetch names the
//! consumer's rack; a follower serves it from its own log, and a leader
//! with a `replica.selector.class` may answer a partition with no records
//! and the follower in that rack to read from
//! ([`runtimes::replication_runtime::read_replica`]).
//!
//! Fetch sessions (KIP-227, [`super::fetch_session`]): a full fetch with epoch 0 makes
//! a session on the connection's shard; incremental fetches then name only
//! what changed, read every partition of the session (any of them ends the
//! long poll) and are answered with only the partitions that have records,
//! a moved offset or an error. librdkafka's consumer always fetches
//! sessionless (`SessionId` 0, `SessionEpoch` -1 in `rdkafka_fetcher.c`);
//! the Java client and rill's own followers use sessions.

use super::fetch_session::{self as session, Asked, Context};
use super::{Handler, HandlerFuture, Request, Response};
use crate::fetch_response::{
    encode_fetch_response, set_throttle_time, FetchPartitionData, FetchResponseData,
    FetchTopicData, FETCH_VERSION_MAX, FETCH_VERSION_MIN,
};
use engine::ErrorCode;
use engine::{ReadData, TopicPartition};
use kafka_protocol::messages::{ApiKey, FetchRequest};
use kernel::sendpath::SendPath;
use runtimes::cluster_runtime;
use runtimes::fetch_sessions::{PartitionSeen, TopicRef};
use runtimes::quotas::{self, QuotaKind};
use runtimes::routing::read_or_wait;
use runtimes::routing::{PartitionRead, ReadOptions, ReadOutcome};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The versions the hand-written encoder writes (v13+ names topics by id).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::Fetch,
    min_version: FETCH_VERSION_MIN,
    max_version: FETCH_VERSION_MAX,
    handle,
};

/// Longest long poll honoured, whatever the client asks (5 minutes).
const MAX_WAIT_MS_LIMIT: i32 = 300_000;

/// A topic of the request: name (resolved from the id on v13+), id, error.
type TopicSlot = (String, [u8; 16], ErrorCode);

/// One asked partition, resolved against the topic table.
struct Wanted {
    topic_index: usize,
    partition: i32,
    fetch_offset: i64,
    partition_max_bytes: usize,
    /// The consumer's view of the leader epoch (-1: unchecked).
    current_leader_epoch: i32,
    /// Error found before reading (unknown topic or partition).
    error_code: ErrorCode,
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: FetchRequest = request.decode()?;
        let version = request.version;
        let replica = if version >= 15 {
            body.replica_state.replica_id.0
        } else {
            body.replica_id.0
        };
        let authz = cluster_runtime::authz(&shard, &request.session);
        // A follower needs CLUSTER_ACTION; without it every partition is
        // TOPIC_AUTHORIZATION_FAILED, as Kafka answers.
        let follower_refused = replica >= 0 && !authz.allows_cluster(Operation::ClusterAction);
        if replica >= 0 && !follower_refused {
            return super::fetch_follower::serve(&shard, &request, body, replica).await;
        }
        let (context, asked) = session::open(&shard, &body, version, false);
        // A consumer over its quota is answered at once, empty, with the
        // throttle time (Kafka's throttled fetch response); its session
        // moved on, the partitions it named are answered next time.
        let client_id = request
            .header
            .client_id
            .as_deref()
            .unwrap_or("")
            .to_string();
        let owed = quotas::enforce::owed(&shard, &request.session, &client_id, QuotaKind::Fetch);
        if owed > 0 || matches!(context, Context::Refused(_)) {
            return Ok(answer_at_once(&request, owed, context));
        }
        let (topics, mut wanted) = resolve(&shard, &asked);
        for w in &mut wanted {
            let name = &topics[w.topic_index].0;
            if follower_refused || (!name.is_empty() && !authz.allows_topic(Operation::Read, name))
            {
                w.error_code = ErrorCode::TopicAuthorizationFailed;
            }
        }
        let poll = LongPoll::of(&shard, &request, &body);
        // No partition can contribute more than the whole response may hold
        // (the first one is kept whole, so cap at max_bytes, not below).
        for w in &mut wanted {
            w.partition_max_bytes = w.partition_max_bytes.min(poll.max_bytes);
        }
        let outcomes = read_until_ready(&shard, &topics, &wanted, &poll).await;
        let carried = session::carried(&shard, context, &asked, &session_outcomes(&outcomes));
        let mut data = assemble(&topics, wanted, outcomes, &carried, poll.max_bytes);
        data.session_id = context.session_id();
        Ok(encode_counted(&shard, &request, &client_id, data))
    })
}

/// What the session records of each read.
fn session_outcomes(outcomes: &[ReadOutcome]) -> Vec<session::Outcome> {
    outcomes
        .iter()
        .map(|o| session::Outcome {
            seen: PartitionSeen {
                high_watermark: o.high_watermark,
                last_stable_offset: o.last_stable_offset,
                log_start_offset: o.log_start_offset,
            },
            // A redirect to another replica must reach the consumer too.
            has_records: !o.data.is_empty() || o.preferred_read_replica >= 0,
            error_code: o.error_code,
        })
        .collect()
}

/// The empty answer of a consumer over its quota (with the throttle time
/// it owes), or of a refused incremental fetch (with the error).
fn answer_at_once(request: &Request, owed_ms: i32, context: Context) -> Response {
    let error_code = match context {
        Context::Refused(code) => code,
        _ => ErrorCode::None,
    };
    let data = FetchResponseData {
        throttle_time_ms: owed_ms.max(0),
        error_code,
        session_id: context.session_id(),
        topics: Vec::new(),
    };
    Response::Chunks(encode_fetch_response(
        request.header.correlation_id,
        request.version,
        &data,
    ))
}

/// How a request's reads are made and when its long poll ends.
struct LongPoll {
    /// Data that ends the poll early.
    min_bytes: usize,
    /// The whole response's cap (`usize::MAX`: none).
    max_bytes: usize,
    /// Reads may answer with file ranges: the connection is plain TCP and
    /// the shard's send path is not a copy. A TLS connection must encrypt
    /// the records in memory, so its reads bring them there with the
    /// engine's asynchronous DMA reads (or the batch cache), never as a
    /// file range the writer would have to read on the shard's thread.
    file_slice: bool,
    /// `isolation_level=1`: reads stop at the last stable offset.
    read_committed: bool,
    /// v11+: the consumer's rack (KIP-392), which lets a follower serve
    /// it and a leader send it to one.
    client_rack: Option<Arc<str>>,
    /// When the poll answers with whatever it has.
    deadline: Instant,
}

impl LongPoll {
    /// The request's limits, its wait clamped to [`MAX_WAIT_MS_LIMIT`].
    fn of(shard: &Shard, request: &Request, body: &FetchRequest) -> LongPoll {
        let version = request.version;
        let tls = request.session.protocol.uses_tls();
        let max_wait = Duration::from_millis(body.max_wait_ms.clamp(0, MAX_WAIT_MS_LIMIT) as u64);
        let max_bytes = if body.max_bytes <= 0 {
            usize::MAX
        } else {
            body.max_bytes as usize
        };
        LongPoll {
            min_bytes: body.min_bytes.max(0) as usize,
            max_bytes,
            file_slice: !tls && shard.sender.path() != SendPath::Copy,
            read_committed: version >= 4 && body.isolation_level == 1,
            client_rack: (version >= 11).then(|| Arc::from(body.rack_id.as_str())),
            deadline: Instant::now() + max_wait,
        }
    }
}

/// Reads every wanted partition; while fewer than `min_bytes` are ready,
/// no partition failed and the deadline is ahead, waits for an append on
/// any of them and reads again — on their owners, one call each
/// ([`read_or_wait`]). Partitions refused before reading are answered with
/// their error, and, as a failed read does, end the poll at once.
async fn read_until_ready(
    shard: &Rc<Shard>,
    topics: &[TopicSlot],
    wanted: &[Wanted],
    poll: &LongPoll,
) -> Vec<ReadOutcome> {
    let mut reads = Vec::with_capacity(wanted.len());
    for w in wanted.iter().filter(|w| w.error_code == ErrorCode::None) {
        reads.push(PartitionRead {
            tp: TopicPartition::new(topics[w.topic_index].0.clone(), w.partition),
            offset: w.fetch_offset,
            max_bytes: w.partition_max_bytes,
            current_leader_epoch: w.current_leader_epoch,
        });
    }
    let refused = reads.len() < wanted.len();
    let min_bytes = if refused { 0 } else { poll.min_bytes };
    let options = ReadOptions {
        file_slice: poll.file_slice,
        read_committed: poll.read_committed,
        client_rack: poll.client_rack.clone(),
    };
    let asked = reads.len();
    let mut outcomes = read_or_wait(shard, reads, options, min_bytes, poll.deadline)
        .await
        .into_iter();
    assert_eq!(
        outcomes.len(),
        asked,
        "the owners answer each read once: {} outcomes to {asked} reads",
        outcomes.len()
    );
    wanted
        .iter()
        .map(|w| match w.error_code {
            ErrorCode::None => outcomes
                .next()
                .unwrap_or_else(|| ReadOutcome::error(ErrorCode::UnknownServerError)),
            refused => ReadOutcome::error(refused),
        })
        .collect()
}

/// Encodes the response and counts its bytes against the client's fetch
/// quota; when that quota is now exceeded, the throttle time is written
/// into the encoded response (same size), which is not encoded again.
fn encode_counted(
    shard: &Shard,
    request: &Request,
    client_id: &str,
    data: FetchResponseData,
) -> Response {
    let correlation_id = request.header.correlation_id;
    let mut chunks = encode_fetch_response(correlation_id, request.version, &data);
    let response_bytes: usize = chunks.iter().map(|c| c.len()).sum();
    let throttle_time_ms = quotas::enforce::record(
        shard,
        &request.session,
        client_id,
        QuotaKind::Fetch,
        response_bytes,
    );
    if throttle_time_ms != 0 {
        set_throttle_time(&mut chunks, request.version, throttle_time_ms);
    }
    Response::Chunks(chunks)
}

/// Topic (name, id) list and the partitions asked, in `asked` order; a
/// topic's consecutive partitions share its entry.
fn resolve(shard: &Shard, asked: &[Asked]) -> (Vec<TopicSlot>, Vec<Wanted>) {
    let table = shard.topics.borrow();
    let mut topics: Vec<TopicSlot> = Vec::new();
    let mut wanted = Vec::with_capacity(asked.len());
    let mut last: Option<(&TopicRef, i32)> = None;
    for ((topic_ref, partition), params) in asked {
        let (topic_index, partitions) = match last {
            Some((previous, partitions)) if previous == topic_ref => (topics.len() - 1, partitions),
            _ => {
                let (slot, partitions) = match topic_ref {
                    TopicRef::Id(id) => match table.by_id(id) {
                        Some(e) => ((e.name.clone(), *id, ErrorCode::None), e.partitions),
                        None => ((String::new(), *id, ErrorCode::UnknownTopicId), 0),
                    },
                    TopicRef::Name(name) => match table.get(name) {
                        Some(e) => ((name.clone(), e.topic_id, ErrorCode::None), e.partitions),
                        None => (
                            (name.clone(), [0; 16], ErrorCode::UnknownTopicOrPartition),
                            0,
                        ),
                    },
                };
                topics.push(slot);
                last = Some((topic_ref, partitions));
                (topics.len() - 1, partitions)
            }
        };
        let topic_error = topics[topic_index].2;
        let error_code = if topic_error != ErrorCode::None {
            topic_error
        } else if *partition < 0 || *partition >= partitions {
            ErrorCode::UnknownTopicOrPartition
        } else {
            ErrorCode::None
        };
        wanted.push(Wanted {
            topic_index,
            partition: *partition,
            fetch_offset: params.fetch_offset,
            partition_max_bytes: params.max_bytes.max(0) as usize,
            current_leader_epoch: params.current_leader_epoch,
            error_code,
        });
    }
    (topics, wanted)
}

/// Builds the response of the `carried` partitions, dropping data past
/// `max_bytes` (the first non-empty partition is always kept whole, as
/// Kafka does, so progress is guaranteed). A topic none of whose
/// partitions is carried is left out (an incremental response).
fn assemble(
    topics: &[TopicSlot],
    wanted: Vec<Wanted>,
    outcomes: Vec<ReadOutcome>,
    carried: &[bool],
    max_bytes: usize,
) -> FetchResponseData {
    let mut out: Vec<FetchTopicData> = topics
        .iter()
        .map(|(name, id, _)| FetchTopicData {
            topic: name.clone(),
            topic_id: *id,
            partitions: Vec::new(),
        })
        .collect();
    let mut total = 0usize;
    let mut any_of_topic = vec![false; out.len()];
    for ((w, outcome), _) in wanted
        .into_iter()
        .zip(outcomes)
        .zip(carried)
        .filter(|(_, carried)| **carried)
    {
        if let Some(any) = any_of_topic.get_mut(w.topic_index) {
            *any = true;
        }
        let length = outcome.data.len();
        let keep = length > 0 && (total == 0 || total + length <= max_bytes);
        let records = if keep {
            total += length;
            outcome.data
        } else {
            ReadData::Empty
        };
        if let Some(topic) = out.get_mut(w.topic_index) {
            topic.partitions.push(FetchPartitionData {
                partition_index: w.partition,
                error_code: outcome.error_code,
                high_watermark: outcome.high_watermark,
                last_stable_offset: outcome.last_stable_offset,
                log_start_offset: outcome.log_start_offset,
                aborted_transactions: outcome.aborted_transactions,
                preferred_read_replica: outcome.preferred_read_replica,
                records,
            });
        }
    }
    let all_carried = carried.iter().all(|c| *c);
    let topics = out
        .into_iter()
        .zip(any_of_topic)
        .filter(|(_, any)| all_carried || *any)
        .map(|(topic, _)| topic)
        .collect();
    FetchResponseData {
        throttle_time_ms: 0,
        error_code: ErrorCode::None,
        session_id: 0,
        topics,
    }
}

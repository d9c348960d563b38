//! A Fetch request's place in an incremental fetch session (KIP-227), for
//! the consumer ([`super::fetch`]) and follower ([`super::fetch_follower`])
//! paths alike: which partitions the request reads, and which of them its
//! response carries. The cache itself, one per shard, is
//! [`runtimes::fetch_sessions`] (why per shard is told there).
//!
//! - `session_epoch` -1 (FINAL): a sessionless full fetch; the session
//!   named, if any, is closed. Fetch v4 – v6 have no session fields and
//!   are sessionless too.
//! - `session_epoch` 0 (INITIAL): a full fetch; the session named is
//!   closed and a new one made when the shard's share of the cache has
//!   room (or an eviction makes some); the response names it, or 0.
//! - any other epoch: an incremental fetch of session `session_id`, which
//!   must be the session's next epoch. The request's partitions are added
//!   to the session or update it, the forgotten ones leave it; every
//!   partition of the session is read (and wakes the long poll), and the
//!   response carries those with records, a moved offset, or an error.

use engine::ErrorCode;
use kafka_protocol::messages::FetchRequest;
use runtimes::fetch_sessions::{
    CachedPartition, PartitionParams, PartitionSeen, SessionError, SessionKey, TopicRef,
    FINAL_EPOCH, INITIAL_EPOCH,
};
use runtimes::Shard;
use std::collections::BTreeMap;

/// First Fetch version with session fields.
const SESSION_VERSION_MIN: i16 = 7;
/// First Fetch version that names topics by id.
const TOPIC_ID_VERSION_MIN: i16 = 13;

/// One partition a request reads: its session key and parameters.
pub type Asked = (SessionKey, PartitionParams);

/// How a request relates to the shard's fetch sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// No session: every partition asked is answered; session id 0.
    Sessionless,
    /// A full fetch that made session `id`: every partition answered.
    Full(i32),
    /// An incremental fetch of session `id`.
    Incremental(i32),
    /// Refused with a top-level error, no partitions, session id 0.
    Refused(ErrorCode),
}

impl Context {
    /// The session id the response names.
    pub fn session_id(self) -> i32 {
        match self {
            Context::Full(id) | Context::Incremental(id) => id,
            Context::Sessionless | Context::Refused(_) => 0,
        }
    }

    /// The session whose cache records what the response sends.
    fn session(self) -> Option<i32> {
        match self {
            Context::Full(id) | Context::Incremental(id) => Some(id),
            Context::Sessionless | Context::Refused(_) => None,
        }
    }
}

/// The partitions `body` names, in its order, keyed as a session keys them.
pub fn asked_of(body: &FetchRequest, version: i16) -> Vec<Asked> {
    let mut asked = Vec::new();
    for topic in &body.topics {
        let topic_ref = topic_ref(version, topic.topic_id.as_bytes(), &topic.topic.0);
        for p in &topic.partitions {
            let params = PartitionParams {
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
                log_start_offset: p.log_start_offset,
            };
            asked.push(((topic_ref.clone(), p.partition), params));
        }
    }
    asked
}

fn topic_ref(version: i16, id: &[u8; 16], name: &str) -> TopicRef {
    if version >= TOPIC_ID_VERSION_MIN {
        TopicRef::Id(*id)
    } else {
        TopicRef::Name(name.to_string())
    }
}

/// Places the request in the shard's sessions and returns its context and
/// the partitions to read: those asked, or for an incremental fetch every
/// partition of the (updated) session. `privileged`: a follower's fetch.
pub fn open(
    shard: &Shard,
    body: &FetchRequest,
    version: i16,
    privileged: bool,
) -> (Context, Vec<Asked>) {
    let asked = asked_of(body, version);
    if version < SESSION_VERSION_MIN {
        return (Context::Sessionless, asked);
    }
    let now_ms = shard.now_ms();
    let uses_topic_ids = version >= TOPIC_ID_VERSION_MIN;
    let mut cache = shard.runtime().fetch_sessions.borrow_mut();
    match body.session_epoch {
        FINAL_EPOCH | INITIAL_EPOCH => {
            if body.session_id != 0 {
                cache.remove(body.session_id);
            }
            if body.session_epoch == FINAL_EPOCH {
                return (Context::Sessionless, asked);
            }
            let partitions: BTreeMap<SessionKey, CachedPartition> = asked
                .iter()
                .map(|(key, params)| {
                    let seen = PartitionSeen::UNSENT;
                    let params = *params;
                    (key.clone(), CachedPartition { params, seen })
                })
                .collect();
            match cache.create(privileged, uses_topic_ids, partitions, now_ms) {
                Some(id) => (Context::Full(id), asked),
                None => (Context::Sessionless, asked),
            }
        }
        epoch => {
            let forgotten = forgotten_of(body, version);
            let updated = cache.update(
                body.session_id,
                epoch,
                uses_topic_ids,
                asked,
                &forgotten,
                now_ms,
            );
            match updated {
                Ok(session) => {
                    let all = session
                        .partitions
                        .iter()
                        .map(|(key, cached)| (key.clone(), cached.params))
                        .collect();
                    (Context::Incremental(body.session_id), all)
                }
                Err(error) => (Context::Refused(error_code(error)), Vec::new()),
            }
        }
    }
}

fn forgotten_of(body: &FetchRequest, version: i16) -> Vec<SessionKey> {
    let mut forgotten = Vec::new();
    for topic in &body.forgotten_topics_data {
        let topic_ref = topic_ref(version, topic.topic_id.as_bytes(), &topic.topic.0);
        for &partition in &topic.partitions {
            forgotten.push((topic_ref.clone(), partition));
        }
    }
    forgotten
}

fn error_code(error: SessionError) -> ErrorCode {
    match error {
        SessionError::NotFound => ErrorCode::FetchSessionIdNotFound,
        SessionError::InvalidEpoch => ErrorCode::InvalidFetchSessionEpoch,
        SessionError::TopicIdMismatch => ErrorCode::FetchSessionTopicIdError,
    }
}

/// What one partition's read said, for the session's record.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// The offsets answered.
    pub seen: PartitionSeen,
    /// Records answered.
    pub has_records: bool,
    /// The partition's error.
    pub error_code: ErrorCode,
}

/// Records the response in the session and says, per partition (in
/// `asked` order), whether the response carries it: all of them outside an
/// incremental fetch.
pub fn carried(
    shard: &Shard,
    context: Context,
    asked: &[Asked],
    outcomes: &[Outcome],
) -> Vec<bool> {
    let Some(id) = context.session() else {
        return vec![true; asked.len()];
    };
    let mut cache = shard.runtime().fetch_sessions.borrow_mut();
    asked
        .iter()
        .zip(outcomes)
        .map(|((key, _), outcome)| {
            let has_error = outcome.error_code != ErrorCode::None;
            let changed = cache.record_sent(id, key, outcome.seen, outcome.has_records, has_error);
            changed || matches!(context, Context::Full(_))
        })
        .collect()
}

//! ShareFetch (key 78): a share consumer (KIP-932) acknowledges what it
//! processed and acquires more records, within its share session.
//!
//! The session's epoch is checked first (`share_runtime::sessions`): 0
//! opens a session (and may carry no acknowledgements), -1 closes it
//! (acknowledgements only: nothing is acquired), anything else must be the
//! epoch the broker expects. Partitions named are added to the session,
//! forgotten ones leave it and the member's records there go back. Then
//! the partitions' owners acknowledge and acquire (`share_runtime::fetch`),
//! waiting up to `max_wait_ms` while nothing could be acquired.

use super::share_acknowledge::{
    acks_of, connection_id, group_and_member, session_step, SessionStep,
};
use super::{str_bytes, uuid, Handler, HandlerFuture, Request};
use coordinators::share::{ShareAutoOffsetReset, ShareSettings};
use engine::{ErrorCode, TopicPartition};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ShareFetchRequest, ShareFetchResponse};
use runtimes::admin_changes::group_configs::{
    SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION_LEVEL, SHARE_RECORD_LOCK_DURATION_MS,
};
use runtimes::cluster_runtime;
use runtimes::share_runtime::{
    self, FetchRound, PartitionAcks, ShareParams, ShareReadOutcome, TopicId,
};
use runtimes::Shard;
use security::acl::{Authz, Operation};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// v1 (Kafka 4.1's first production version).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ShareFetch,
    min_version: 1,
    max_version: 1,
    handle,
};

/// Bytes read per partition at most (Kafka's `max.partition.fetch.bytes`
/// default); a larger first batch is still returned whole.
const PARTITION_MAX_BYTES: usize = 1 << 20;

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ShareFetchRequest = request.decode()?;
        let mut response = ShareFetchResponse::default();
        let (group, member) = match group_and_member(&body.group_id, &body.member_id) {
            Ok(ids) => ids,
            Err(code) => return refuse(&request, response, code),
        };
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.group(Operation::Read, &group) {
            return refuse(&request, response, code);
        }
        let has_acks = body.topics.iter().any(|t| {
            t.partitions
                .iter()
                .any(|p| !p.acknowledgement_batches.is_empty())
        });
        if body.share_session_epoch == 0 && has_acks {
            return refuse(&request, response, ErrorCode::InvalidRequest);
        }
        let Parsed {
            requested,
            forgotten,
            forgotten_ids,
            acks,
            mut unknown,
        } = parse_topics(&shard, &authz, &body);
        let key = (group.as_str(), member.as_str());
        let (reads, release) = match session_step(
            &shard,
            key,
            (body.share_session_epoch, connection_id(&request)),
            true,
            requested,
            &forgotten_ids,
        )
        .await
        {
            SessionStep::Refused(code) => return refuse(&request, response, code),
            SessionStep::Closed(release) => (Vec::new(), release),
            SessionStep::Open(session) => (current(&shard, session, &mut unknown), forgotten),
        };
        let (settings, reset, read_committed) = group_settings(&shard, &group);
        response.acquisition_lock_timeout_ms = settings.lock_duration_ms as i32;
        // max_bytes 0 asks for no records (acknowledgements still apply).
        let reads = if body.max_bytes > 0 {
            reads
        } else {
            Vec::new()
        };
        let wait_ms = u64::try_from(body.max_wait_ms).unwrap_or(0);
        let params = ShareParams {
            group,
            member,
            max_records: usize::try_from(body.max_records).unwrap_or(0).max(1),
            max_bytes: usize::try_from(body.max_bytes)
                .unwrap_or(0)
                .clamp(1, PARTITION_MAX_BYTES),
            reset,
            revalidate: body.share_session_epoch == 0,
            read_committed,
            settings,
        };
        let round = FetchRound {
            params,
            acks,
            release,
            reads,
            deadline: Instant::now() + Duration::from_millis(wait_ms),
        };
        let (acked, read) = share_runtime::share_fetch(&shard, round).await;
        response.responses = responses(&shard, read, acked, unknown);
        request.respond(&response)
    })
}

/// The group's settings from its configs (the broker's where unset):
/// records, `share.auto.offset.reset`, read_committed.
fn group_settings(shard: &Shard, group: &str) -> (ShareSettings, ShareAutoOffsetReset, bool) {
    let image = shard.runtime().view.image();
    let set = |key: &str| {
        image
            .group_configs()
            .get(group)
            .and_then(|c| c.get(key))
            .cloned()
    };
    let mut settings = shard.config.group.share.records;
    if let Some(ms) = set(SHARE_RECORD_LOCK_DURATION_MS).and_then(|v| v.parse().ok()) {
        settings.lock_duration_ms = ms;
    }
    // A value the config check let through always parses; one written by
    // an older broker that does not is the default.
    let reset = (set(SHARE_AUTO_OFFSET_RESET).as_deref())
        .and_then(ShareAutoOffsetReset::parse)
        .unwrap_or_default();
    let read_committed = set(SHARE_ISOLATION_LEVEL).as_deref() == Some("read_committed");
    (settings, reset, read_committed)
}

fn refuse(
    request: &Request,
    mut response: ShareFetchResponse,
    code: ErrorCode,
) -> Result<super::Response, super::RequestError> {
    response.error_code = code.code();
    response.error_message = Some(str_bytes(code.name()));
    request.respond(&response)
}

/// A request's partitions, by name.
struct Parsed {
    /// Partitions named (added to the session), with their topic ids.
    requested: Vec<(TopicPartition, TopicId)>,
    /// Partitions forgotten whose topics this broker knows (their records
    /// go back).
    forgotten: Vec<TopicPartition>,
    /// Every partition forgotten, by topic id (leaving the session), a
    /// deleted topic's too.
    forgotten_ids: Vec<(TopicId, i32)>,
    /// Acknowledgements.
    acks: Vec<PartitionAcks>,
    /// Partitions of topic ids unknown here (or not readable by the client).
    unknown: Vec<(uuid::Uuid, i32)>,
}

fn parse_topics(shard: &Shard, authz: &Authz, body: &ShareFetchRequest) -> Parsed {
    let names = topic_names(shard, body);
    let mut parsed = Parsed {
        requested: Vec::new(),
        forgotten: Vec::new(),
        forgotten_ids: Vec::new(),
        acks: Vec::new(),
        unknown: Vec::new(),
    };
    for topic in &body.topics {
        let name = names
            .get(&topic.topic_id)
            .filter(|n| authz.allows_topic(Operation::Read, n));
        for p in &topic.partitions {
            let Some(name) = name else {
                parsed.unknown.push((topic.topic_id, p.partition_index));
                continue;
            };
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            if let Some(batches) = acks_of(&tp, &p.acknowledgement_batches) {
                parsed.acks.push(batches);
            }
            parsed.requested.push((tp, *topic.topic_id.as_bytes()));
        }
    }
    parsed.forgotten_ids = (body.forgotten_topics_data.iter())
        .flat_map(|t| t.partitions.iter().map(|&p| (*t.topic_id.as_bytes(), p)))
        .collect();
    parsed.forgotten = body
        .forgotten_topics_data
        .iter()
        .filter_map(|t| names.get(&t.topic_id).map(|n| (n, &t.partitions)))
        .flat_map(|(name, parts)| parts.iter().map(|&p| TopicPartition::new(name.clone(), p)))
        .collect();
    parsed
}

/// The session's partitions whose topics still have the id the client
/// added them by; the others (their topic was deleted, or deleted and
/// created again under its name) are answered UNKNOWN_TOPIC_ID under the
/// client's id, as Kafka answers a session partition whose topic is gone.
/// Reading a recreated topic under its old id would hand the client
/// records it cannot place: it drops them and they come back only when
/// their locks run out, one delivery counted each time.
fn current(
    shard: &Shard,
    session: Vec<(TopicPartition, TopicId)>,
    unknown: &mut Vec<(uuid::Uuid, i32)>,
) -> Vec<TopicPartition> {
    let table = shard.topics.borrow();
    let mut reads = Vec::with_capacity(session.len());
    for (tp, id) in session {
        if table.get(&tp.topic).is_some_and(|e| e.topic_id == id) {
            reads.push(tp);
        } else if !unknown.contains(&(uuid(id), tp.partition)) {
            unknown.push((uuid(id), tp.partition));
        }
    }
    reads
}

/// The names of the request's topic ids this broker knows.
fn topic_names(shard: &Shard, body: &ShareFetchRequest) -> BTreeMap<uuid::Uuid, String> {
    let table = shard.topics.borrow();
    let ids = body
        .topics
        .iter()
        .map(|t| t.topic_id)
        .chain(body.forgotten_topics_data.iter().map(|t| t.topic_id));
    ids.filter_map(|id| {
        let entry = table.by_id(id.as_bytes())?;
        Some((id, entry.name.clone()))
    })
    .collect()
}

/// The response's topics: each read partition with its records, each
/// acknowledged one with its outcome, each unknown one with its error.
fn responses(
    shard: &Shard,
    read: Vec<ShareReadOutcome>,
    acked: Vec<(TopicPartition, ErrorCode)>,
    unknown: Vec<(uuid::Uuid, i32)>,
) -> Vec<ShareFetchableTopicResponse> {
    let table = shard.topics.borrow();
    let mut by_topic: BTreeMap<uuid::Uuid, BTreeMap<i32, PartitionData>> = BTreeMap::new();
    let id_of = |tp: &TopicPartition| table.get(&tp.topic).map(|e| uuid(e.topic_id));
    fn slot(
        by_topic: &mut BTreeMap<uuid::Uuid, BTreeMap<i32, PartitionData>>,
        id: Option<uuid::Uuid>,
        partition: i32,
    ) -> Option<&mut PartitionData> {
        let data = by_topic
            .entry(id?)
            .or_default()
            .entry(partition)
            .or_default();
        data.partition_index = partition;
        Some(data)
    }
    for outcome in read {
        let Some(data) = slot(&mut by_topic, id_of(&outcome.tp), outcome.tp.partition) else {
            continue;
        };
        data.error_code = outcome.error_code.code();
        let leads = outcome.error_code == ErrorCode::None;
        let leader = if leads { shard.config.broker_id } else { -1 };
        data.current_leader.leader_id = leader;
        data.current_leader.leader_epoch = if leads { outcome.leader_epoch } else { -1 };
        // Never null: librdkafka reads a null record set as a bad message.
        data.records = Some(outcome.records.unwrap_or_default());
        data.acquired_records = outcome
            .acquired
            .iter()
            .map(|r| {
                let mut a = AcquiredRecords::default();
                a.first_offset = r.first_offset;
                a.last_offset = r.last_offset;
                a.delivery_count = r.delivery_count;
                a
            })
            .collect();
    }
    for (tp, code) in acked {
        if let Some(data) = slot(&mut by_topic, id_of(&tp), tp.partition) {
            data.acknowledge_error_code = code.code();
        }
    }
    for (id, partition) in unknown {
        let data = by_topic
            .entry(id)
            .or_default()
            .entry(partition)
            .or_default();
        data.partition_index = partition;
        data.error_code = ErrorCode::UnknownTopicId.code();
    }
    by_topic
        .into_iter()
        .map(|(topic_id, partitions)| {
            let mut t = ShareFetchableTopicResponse::default();
            t.topic_id = topic_id;
            t.partitions = partitions.into_values().collect();
            t
        })
        .collect()
}

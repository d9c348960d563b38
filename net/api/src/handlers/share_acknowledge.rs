//! ShareAcknowledge (key 79): a share consumer (KIP-932) acknowledges
//! records without fetching more, within its share session (epoch -1
//! closes the session: the member's other records go back). Also the
//! session and acknowledgement steps ShareFetch shares.

use super::{str_bytes, Handler, HandlerFuture, Request};
use coordinators::share::AckType;
use engine::{ErrorCode, TopicPartition};
use kafka_protocol::messages::share_acknowledge_response::{
    PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
};
use kafka_protocol::protocol::StrBytes;
use runtimes::cluster_runtime;
use runtimes::share_runtime::{self, AckBatch, PartitionAcks, SessionCheck, TopicId};
use runtimes::Shard;
use security::acl::{Authz, Operation};
use std::collections::BTreeMap;
use std::rc::Rc;

/// v1 (Kafka 4.1's first production version).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ShareAcknowledge,
    min_version: 1,
    max_version: 1,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ShareAcknowledgeRequest = request.decode()?;
        let mut response = ShareAcknowledgeResponse::default();
        let refuse = |mut response: ShareAcknowledgeResponse, code: ErrorCode| {
            response.error_code = code.code();
            response.error_message = Some(str_bytes(code.name()));
            request.respond(&response)
        };
        let (group, member) = match group_and_member(&body.group_id, &body.member_id) {
            Ok(ids) => ids,
            Err(code) => return refuse(response, code),
        };
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.group(Operation::Read, &group) {
            return refuse(response, code);
        }
        let (acks, unknown) = parse_topics(&shard, &authz, &body);
        let key = (group.as_str(), member.as_str());
        let release = match session_step(
            &shard,
            key,
            (body.share_session_epoch, connection_id(&request)),
            false,
            Vec::new(),
            &[],
        )
        .await
        {
            SessionStep::Refused(code) => return refuse(response, code),
            SessionStep::Closed(release) => release,
            SessionStep::Open(_) => Vec::new(),
        };
        let acked = share_runtime::acknowledge(&shard, &group, &member, acks, release).await;
        response.responses = responses(&shard, acked, unknown);
        request.respond(&response)
    })
}

/// The acknowledgements of the request's topics this broker knows (and
/// the client may read), and the partitions of the other topic ids.
fn parse_topics(
    shard: &Shard,
    authz: &Authz,
    body: &ShareAcknowledgeRequest,
) -> (Vec<PartitionAcks>, Vec<(uuid::Uuid, i32)>) {
    let mut acks = Vec::new();
    let mut unknown = Vec::new();
    let table = shard.topics.borrow();
    for topic in &body.topics {
        let name = table
            .by_id(topic.topic_id.as_bytes())
            .map(|e| e.name.clone())
            .filter(|n| authz.allows_topic(Operation::Read, n));
        for p in &topic.partitions {
            let Some(name) = &name else {
                unknown.push((topic.topic_id, p.partition_index));
                continue;
            };
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            if let Some(batches) = acks_of(&tp, &p.acknowledgement_batches) {
                acks.push(batches);
            }
        }
    }
    (acks, unknown)
}

/// Each partition's outcome, by topic id.
fn responses(
    shard: &Shard,
    acked: Vec<(TopicPartition, ErrorCode)>,
    unknown: Vec<(uuid::Uuid, i32)>,
) -> Vec<ShareAcknowledgeTopicResponse> {
    let mut by_topic: BTreeMap<uuid::Uuid, Vec<PartitionData>> = BTreeMap::new();
    let table = shard.topics.borrow();
    let outcomes = acked.into_iter().filter_map(|(tp, code)| {
        let id = super::uuid(table.get(&tp.topic)?.topic_id);
        Some((id, tp.partition, code))
    });
    let unknown = unknown
        .into_iter()
        .map(|(id, p)| (id, p, ErrorCode::UnknownTopicId));
    for (id, partition, code) in outcomes.chain(unknown) {
        let mut data = PartitionData::default();
        data.partition_index = partition;
        data.error_code = code.code();
        data.current_leader.leader_id = -1;
        data.current_leader.leader_epoch = -1;
        by_topic.entry(id).or_default().push(data);
    }
    by_topic
        .into_iter()
        .map(|(topic_id, partitions)| {
            let mut t = ShareAcknowledgeTopicResponse::default();
            t.topic_id = topic_id;
            t.partitions = partitions;
            t
        })
        .collect()
}

/// The connection a request came on (its session's address): a share
/// session ends with the connection that opened it.
pub fn connection_id(request: &Request) -> usize {
    Rc::as_ptr(&request.session) as usize
}

/// The group and member ids a share request must name (INVALID_REQUEST
/// when either is missing or empty).
pub fn group_and_member(
    group_id: &Option<GroupId>,
    member_id: &Option<StrBytes>,
) -> Result<(String, String), ErrorCode> {
    let group = group_id
        .as_ref()
        .map(|g| g.0.to_string())
        .unwrap_or_default();
    let member = member_id
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default();
    if group.is_empty() || member.is_empty() {
        return Err(ErrorCode::InvalidRequest);
    }
    Ok((group, member))
}

/// The acknowledgement batches of one partition (share fetch and share
/// acknowledge carry the same fields); `None` when there are none. A type
/// Kafka does not define is INVALID_REQUEST for that partition (the owner
/// answers it, as a type list the range refuses).
pub fn acks_of<B: AckFields>(tp: &TopicPartition, batches: &[B]) -> Option<PartitionAcks> {
    if batches.is_empty() {
        return None;
    }
    let batches = batches
        .iter()
        .map(|b| AckBatch {
            first_offset: b.first_offset(),
            last_offset: b.last_offset(),
            types: b
                .types()
                .iter()
                .map(|&t| AckType::from_wire(t))
                .collect::<Option<Vec<_>>>()
                .unwrap_or_default(),
        })
        .collect();
    Some(PartitionAcks {
        tp: tp.clone(),
        batches,
    })
}

/// The fields of an acknowledgement batch, in both requests' codecs.
pub trait AckFields {
    /// First offset.
    fn first_offset(&self) -> i64;
    /// Last offset.
    fn last_offset(&self) -> i64;
    /// The wire's acknowledge types.
    fn types(&self) -> &[i8];
}

macro_rules! ack_fields {
    ($t:ty) => {
        impl AckFields for $t {
            fn first_offset(&self) -> i64 {
                self.first_offset
            }
            fn last_offset(&self) -> i64 {
                self.last_offset
            }
            fn types(&self) -> &[i8] {
                &self.acknowledge_types
            }
        }
    };
}

ack_fields!(kafka_protocol::messages::share_fetch_request::AcknowledgementBatch);
ack_fields!(kafka_protocol::messages::share_acknowledge_request::AcknowledgementBatch);

/// Where a request's session stands after its epoch was checked.
pub enum SessionStep {
    /// Refused, with this code (the session, if it ended, gave its
    /// records back).
    Refused(ErrorCode),
    /// The session goes on: its partitions now, each with the topic id
    /// the client named it by.
    Open(Vec<(TopicPartition, TopicId)>),
    /// The session closed: its partitions, whose records go back once the
    /// request's acknowledgements are applied.
    Closed(Vec<TopicPartition>),
}

/// Checks the epoch, updates the session with `requested` and
/// `forgotten` (by topic id and partition), and gives back the records of a session that ended.
pub async fn session_step(
    shard: &Rc<Shard>,
    (group, member): (&str, &str),
    (epoch, connection): (i32, usize),
    may_open: bool,
    requested: Vec<(TopicPartition, TopicId)>,
    forgotten: &[(TopicId, i32)],
) -> SessionStep {
    let idle_ms = shard.config.group.share.session_timeout_ms;
    let sessions = &shard.runtime().share.sessions;
    let check = sessions.borrow_mut().check(
        (group, member),
        (epoch, connection),
        may_open,
        (shard.now_ms(), idle_ms),
    );
    let ended = match check {
        SessionCheck::Refused(code, ended) => {
            let ended = ended.map(|p| p.into_iter().collect()).unwrap_or_default();
            share_runtime::release(shard, group, member, ended).await;
            return SessionStep::Refused(code);
        }
        SessionCheck::Closed(partitions) => {
            return SessionStep::Closed(partitions.into_iter().collect())
        }
        SessionCheck::Opened(old) => old.map(|p| p.into_iter().collect()).unwrap_or_default(),
        SessionCheck::Continued => Vec::new(),
    };
    share_runtime::release(shard, group, member, ended).await;
    let partitions = sessions
        .borrow_mut()
        .update((group, member), requested, forgotten);
    SessionStep::Open(partitions)
}

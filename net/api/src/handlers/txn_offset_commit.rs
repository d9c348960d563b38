//! TxnOffsetCommit (key 28): offsets consumed inside a transaction, sent to
//! the group's coordinator (this broker). Two ways, by where the
//! transaction's coordinator is:
//! - On this broker too: they go to it, which has the group coordinator
//!   check the membership the consumer sent (generation, member id,
//!   instance id — none for v0–v2), persists them with the transaction and
//!   holds them until it ends: on commit it applies them to the group, on
//!   abort it drops them (see [`runtimes::txn_runtime`]).
//! - On another broker (Kafka's way): the group coordinator checks the
//!   membership and stages them, durably, under the producer id; the
//!   transaction's marker on the group's `__consumer_offsets` partition
//!   commits or drops them ([`runtimes::group_runtime::on_txn_marker`]).
//!
//! Either way OffsetFetch sees them only once the transaction has committed,
//! and a crash after the commit is decided does not lose them.

use super::init_producer_id::fenced_for_version;
use super::{Handler, HandlerFuture, Request};
use coordinators::group::{offsets_partition_for, OffsetCommitRequest};
use coordinators::txn::{txn_partition_for, PendingOffset, TXN_STATE_TOPIC};
use engine::ErrorCode;
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use runtimes::cluster_runtime;
use runtimes::cluster_runtime::partition_leader;
use runtimes::group_runtime::{self, GroupReply, GroupRequest, OFFSETS_TOPIC};
use runtimes::txn_runtime::{self, join, TxnReply, TxnRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v5. v5 is transactions v2 (KIP-890 part 2): its client sends no
/// AddOffsetsToTxn, so the group's offsets partition is added to the
/// transaction here first.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::TxnOffsetCommit,
    min_version: 0,
    max_version: 5,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: TxnOffsetCommitRequest = request.decode()?;
        let offsets = pending_offsets(&body.topics);
        // v0–v2 carry no membership: a simple commit (generation -1).
        let member = if request.version >= 3 {
            (
                body.generation_id,
                body.member_id.to_string(),
                body.group_instance_id.as_ref().map(|i| i.to_string()),
            )
        } else {
            (-1, String::new(), None)
        };
        let transactional_id = body.transactional_id.0.to_string();
        let group_id = body.group_id.0.to_string();
        // WRITE on the transactional id, READ on the group and topics.
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refused = authz
            .transactional_id(Operation::Write, &transactional_id)
            .and_then(|()| authz.group(Operation::Read, &group_id))
            .and_then(|()| {
                body.topics
                    .iter()
                    .try_for_each(|t| authz.topic(Operation::Read, &t.name))
            });
        let producer = (body.producer_id.0, body.producer_epoch);
        let code = if let Err(code) = refused {
            code
        } else if let Err(code) = join_offsets_partition(
            &shard,
            request.version,
            &transactional_id,
            &group_id,
            producer,
        )
        .await
        {
            code
        } else if coordinated_elsewhere(&shard, &transactional_id) {
            stage_here(
                &shard,
                group_id,
                body.producer_id.0,
                body.producer_epoch,
                member,
                offsets,
            )
            .await
        } else {
            let commit = TxnRequest::OffsetCommit {
                transactional_id,
                producer_id: body.producer_id.0,
                producer_epoch: body.producer_epoch,
                group_id,
                member,
                offsets,
            };
            hold_with_transaction(&shard, commit).await
        };
        let code = fenced_for_version(code, request.version, 3);
        let mut response = TxnOffsetCommitResponse::default();
        response.topics = answer_all(body.topics, code);
        request.respond(&response)
    })
}

/// The request's offsets, in request order.
fn pending_offsets(topics: &[TxnOffsetCommitRequestTopic]) -> Vec<PendingOffset> {
    topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| PendingOffset {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            })
        })
        .collect()
}

/// Sends the offsets to the transaction's coordinator on this broker,
/// which holds them until the transaction ends: its code.
async fn hold_with_transaction(shard: &Rc<Shard>, commit: TxnRequest) -> ErrorCode {
    match txn_runtime::call(shard, commit).await {
        TxnReply::Code(code) => code,
        _ => ErrorCode::UnknownServerError,
    }
}

/// v5 (transactions v2): adds the group's `__consumer_offsets` partition
/// to the transaction, as AddOffsetsToTxn would have.
async fn join_offsets_partition(
    shard: &Rc<Shard>,
    version: i16,
    transactional_id: &str,
    group_id: &str,
    producer: (i64, i16),
) -> Result<(), ErrorCode> {
    if version < 5 {
        return Ok(());
    }
    let partitions = group_runtime::ensure_offsets_topic(shard).await?;
    let partition = offsets_partition_for(group_id, partitions);
    let offsets_partition = (String::from(OFFSETS_TOPIC), partition);
    match join::add_to_transaction(shard, transactional_id, producer, offsets_partition).await {
        ErrorCode::None => Ok(()),
        code => Err(code),
    }
}

/// The response's topics, in request order, every partition with `code`.
fn answer_all(
    topics: Vec<TxnOffsetCommitRequestTopic>,
    code: ErrorCode,
) -> Vec<TxnOffsetCommitResponseTopic> {
    topics
        .into_iter()
        .map(|t| {
            let mut out = TxnOffsetCommitResponseTopic::default();
            out.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut r = TxnOffsetCommitResponsePartition::default();
                    r.partition_index = p.partition_index;
                    r.error_code = code.code();
                    r
                })
                .collect();
            out.name = t.name;
            out
        })
        .collect()
}

/// Whether the transaction's coordinator (the leader of its
/// `__transaction_state` partition) is another broker.
fn coordinated_elsewhere(shard: &Shard, transactional_id: &str) -> bool {
    let partition = txn_partition_for(transactional_id);
    partition_leader(shard, TXN_STATE_TOPIC, partition)
        .is_ok_and(|(leader, _, _)| leader != shard.config.broker_id)
}

/// Kafka's way, for a transaction coordinated by another broker: this
/// broker, the group's coordinator, checks the membership and keeps the
/// offsets (durably) until the transaction's marker reaches the group's
/// `__consumer_offsets` partition, which commits or drops them.
async fn stage_here(
    shard: &Rc<Shard>,
    group_id: String,
    producer_id: i64,
    producer_epoch: i16,
    (generation, member_id, instance_id): (i32, String, Option<String>),
    offsets: Vec<PendingOffset>,
) -> ErrorCode {
    let request = OffsetCommitRequest {
        retention_ms: -1,
        group_id: group_id.clone(),
        generation_id_or_member_epoch: generation,
        member_id,
        group_instance_id: instance_id,
        offsets: offsets
            .into_iter()
            .map(|o| {
                (
                    coordinators::group::TopicPartition::new(o.topic, o.partition),
                    o.offset,
                    o.leader_epoch,
                    o.metadata.unwrap_or_default(),
                    -1,
                )
            })
            .collect(),
    };
    let staged = group_runtime::call(
        shard,
        &group_id,
        GroupRequest::StageTxn {
            producer_id,
            producer_epoch,
            request,
        },
    )
    .await;
    match staged {
        GroupReply::Committed(rows) => rows
            .into_iter()
            .map(|(_, code)| code)
            .find(|code| *code != ErrorCode::None)
            .unwrap_or(ErrorCode::None),
        GroupReply::Unavailable(code) | GroupReply::Code(code) => code,
        _ => ErrorCode::UnknownServerError,
    }
}

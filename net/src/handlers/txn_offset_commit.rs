//! TxnOffsetCommit (key 28): offsets consumed inside a transaction. They go
//! to the transaction coordinator of the transactional id, which has the
//! group coordinator check the membership the consumer sent (generation,
//! member id, instance id — none for v0–v2), persists them with the
//! transaction, and holds them until it ends: on commit it applies them to
//! the group, on abort it drops them. OffsetFetch therefore sees them only
//! once the transaction has committed, and a crash after the commit is
//! decided does not lose them (see [`crate::txn_runtime`]).

use super::init_producer_id::fenced_for_version;
use super::{Handler, HandlerFuture, Request};
use crate::shard::Shard;
use crate::txn::PendingOffset;
use crate::txn_runtime::{self, TxnReply, TxnRequest};
use engine::ErrorCode;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use std::rc::Rc;

/// v0–v4 (v5 is transactions v2).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::TxnOffsetCommit,
    min_version: 0,
    max_version: 4,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: TxnOffsetCommitRequest = request.decode()?;
        let offsets = body
            .topics
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
            .collect();
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
        let reply = txn_runtime::call(
            &shard,
            TxnRequest::OffsetCommit {
                transactional_id: body.transactional_id.0.to_string(),
                producer_id: body.producer_id.0,
                producer_epoch: body.producer_epoch,
                group_id: body.group_id.0.to_string(),
                member,
                offsets,
            },
        )
        .await;
        let code = match reply {
            TxnReply::Code(code) => fenced_for_version(code, request.version, 3),
            _ => ErrorCode::UnknownServerError,
        };
        let mut response = TxnOffsetCommitResponse::default();
        response.topics = body
            .topics
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
            .collect();
        request.respond(&response)
    })
}

//! EndTxn (key 26): commit or abort. The coordinator persists
//! PrepareCommit/PrepareAbort, writes a marker on every partition of the
//! transaction (each durable), forwards or drops the transaction's offsets,
//! persists CompleteCommit/CompleteAbort, then answers.

use super::init_producer_id::fenced_for_version;
use super::{Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse, ProducerId};
use runtimes::cluster_runtime;
use runtimes::txn_runtime::{self, TxnReply, TxnRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v4 (v5 is transactions v2: the epoch bumps at every end).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::EndTxn,
    min_version: 0,
    max_version: 4,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: EndTxnRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.transactional_id(Operation::Write, &body.transactional_id) {
            let mut response = EndTxnResponse::default();
            response.producer_id = ProducerId(-1);
            response.producer_epoch = -1;
            response.error_code = code.code();
            return request.respond(&response);
        }
        let reply = txn_runtime::call(
            &shard,
            TxnRequest::EndTxn {
                transactional_id: body.transactional_id.0.to_string(),
                producer_id: body.producer_id.0,
                producer_epoch: body.producer_epoch,
                commit: body.committed,
            },
        )
        .await;
        let mut response = EndTxnResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        response.error_code = match reply {
            TxnReply::Code(code) => fenced_for_version(code, request.version, 2),
            _ => ErrorCode::UnknownServerError,
        }
        .code();
        request.respond(&response)
    })
}

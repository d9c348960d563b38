//! EndTxn (key 26): commit or abort. The coordinator persists
//! PrepareCommit/PrepareAbort, writes a marker on every partition of the
//! transaction (each durable), forwards or drops the transaction's offsets,
//! persists CompleteCommit/CompleteAbort, then answers.
//!
//! v5 is transactions v2 (KIP-890 part 2): the transaction ends under the
//! producer's next epoch, which the answer hands back (with a new producer
//! id when the epochs ran out), so a late produce of the ended transaction
//! is fenced by its markers. Clients send v5 only while the cluster's
//! `transaction.version` is 2.

use super::init_producer_id::fenced_for_version;
use super::{Handler, HandlerFuture, Request};
use coordinators::txn::TRANSACTION_VERSION_2;
use engine::ErrorCode;
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse, ProducerId};
use runtimes::cluster_runtime;
use runtimes::txn_runtime::{self, TxnReply, TxnRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v5.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::EndTxn,
    min_version: 0,
    max_version: 5,
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
                client_version: if request.version >= 5 {
                    TRANSACTION_VERSION_2
                } else {
                    0
                },
            },
        )
        .await;
        let mut response = EndTxnResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        let code = match reply {
            TxnReply::Ended(Ok((producer_id, producer_epoch))) => {
                response.producer_id = ProducerId(producer_id);
                response.producer_epoch = producer_epoch;
                ErrorCode::None
            }
            TxnReply::Ended(Err(code)) | TxnReply::Code(code) => code,
            _ => ErrorCode::UnknownServerError,
        };
        response.error_code = fenced_for_version(code, request.version, 2).code();
        request.respond(&response)
    })
}

//! InitProducerId (key 22): producer ids for idempotent and transactional
//! producers.
//!
//! Without a transactional id, any shard hands out a fresh id with epoch 0
//! (or, KIP-360, bumps the epoch of the id the producer names). With one,
//! the request goes to the transaction coordinator of the id (the owner
//! shard of its `__transaction_state` partition, created here on first
//! use), which keeps the producer id and bumps the epoch on every re-init,
//! aborting a transaction left open — so the previous producer is fenced.
//!
//! Ids must not repeat, even across restarts, or a new producer would be
//! taken for an old one's retry: they come from persisted blocks of 1000
//! (KIP-730, [`runtimes::producer_id_pool`]).

use super::{Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use runtimes::cluster_runtime;
use runtimes::producer_id_pool::next_producer_id;
use runtimes::txn_runtime::{self, TxnReply, TxnRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v4 (v5+ concern transactions v2).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::InitProducerId,
    min_version: 0,
    max_version: 4,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: InitProducerIdRequest = request.decode()?;
        let mut response = InitProducerIdResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        let expected = (body.producer_id.0 >= 0 && body.producer_epoch >= 0)
            .then_some((body.producer_id.0, body.producer_epoch));
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refused = match &body.transactional_id {
            Some(id) => authz.transactional_id(Operation::Write, id).err(),
            None => authz.idempotent_write().err(),
        };
        if let Some(code) = refused {
            response.error_code = code.code();
            return request.respond(&response);
        }
        match body.transactional_id {
            Some(id) => {
                let reply = txn_runtime::call(
                    &shard,
                    TxnRequest::InitProducerId {
                        transactional_id: id.0.to_string(),
                        timeout_ms: body.transaction_timeout_ms,
                        expected,
                    },
                )
                .await;
                match reply {
                    TxnReply::Init(Ok((producer_id, epoch))) => {
                        response.producer_id = ProducerId(producer_id);
                        response.producer_epoch = epoch;
                    }
                    TxnReply::Init(Err(code)) | TxnReply::Code(code) => {
                        response.error_code = fenced_for_version(code, request.version, 4).code();
                    }
                    _ => response.error_code = ErrorCode::UnknownServerError.code(),
                }
            }
            None => match expected {
                // KIP-360: an idempotent producer bumps its own epoch after an error.
                Some((producer_id, epoch)) if epoch < i16::MAX - 1 => {
                    response.producer_id = ProducerId(producer_id);
                    response.producer_epoch = epoch + 1;
                }
                _ => match next_producer_id(&shard).await {
                    Ok(producer_id) => {
                        response.producer_id = ProducerId(producer_id);
                        response.producer_epoch = 0;
                    }
                    Err(code) => response.error_code = code.code(),
                },
            },
        }
        request.respond(&response)
    })
}

/// PRODUCER_FENCED (KIP-588) for versions that know it, INVALID_PRODUCER_EPOCH before.
pub fn fenced_for_version(
    code: ErrorCode,
    version: i16,
    first_version_with_fenced: i16,
) -> ErrorCode {
    if code == ErrorCode::ProducerFenced && version < first_version_with_fenced {
        ErrorCode::InvalidProducerEpoch
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_maps_to_invalid_epoch_for_old_versions() {
        assert_eq!(
            fenced_for_version(ErrorCode::ProducerFenced, 3, 4),
            ErrorCode::InvalidProducerEpoch
        );
        assert_eq!(
            fenced_for_version(ErrorCode::ProducerFenced, 4, 4),
            ErrorCode::ProducerFenced
        );
        assert_eq!(
            fenced_for_version(ErrorCode::ConcurrentTransactions, 0, 4),
            ErrorCode::ConcurrentTransactions
        );
    }
}

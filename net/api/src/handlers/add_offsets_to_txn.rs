//! AddOffsetsToTxn (key 25): adds the group's `__consumer_offsets`
//! partition to the transaction, before TxnOffsetCommit sends the offsets
//! (which the coordinator holds until the transaction ends).

use super::init_producer_id::fenced_for_version;
use super::{Handler, HandlerFuture, Request};
use coordinators::group::offsets_partition_for;
use engine::ErrorCode;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey};
use runtimes::cluster_runtime;
use runtimes::group_runtime;
use runtimes::txn_runtime::{self, TxnReply, TxnRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v4 (v4 only adds TRANSACTION_ABORTABLE, never sent here).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::AddOffsetsToTxn,
    min_version: 0,
    max_version: 4,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: AddOffsetsToTxnRequest = request.decode()?;
        let mut response = AddOffsetsToTxnResponse::default();
        // WRITE on the transactional id, READ on the group, as Kafka.
        let authz = cluster_runtime::authz(&shard, &request.session);
        let refused = authz
            .transactional_id(Operation::Write, &body.transactional_id)
            .and_then(|()| authz.group(Operation::Read, &body.group_id));
        if let Err(code) = refused {
            response.error_code = code.code();
            return request.respond(&response);
        }
        response.error_code = match group_runtime::ensure_offsets_topic(&shard).await {
            Err(code) => code,
            Ok(partitions) => {
                let partition = offsets_partition_for(&body.group_id.0, partitions);
                let reply = txn_runtime::call(
                    &shard,
                    TxnRequest::AddPartitions {
                        transactional_id: body.transactional_id.0.to_string(),
                        producer_id: body.producer_id.0,
                        producer_epoch: body.producer_epoch,
                        partitions: vec![(String::from("__consumer_offsets"), partition)],
                        verify_only: false,
                        client_version: 0,
                    },
                )
                .await;
                match reply {
                    TxnReply::Code(code) => fenced_for_version(code, request.version, 2),
                    _ => ErrorCode::UnknownServerError,
                }
            }
        }
        .code();
        request.respond(&response)
    })
}

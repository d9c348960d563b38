//! DescribeTransactions (key 65): the coordinator's state of each asked
//! transactional id (asked of its coordinator shard).

use super::{str_bytes, Handler, HandlerFuture, Request};
use coordinators::txn::records::group_by_topic;
use engine::ErrorCode;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use runtimes::cluster_runtime;
use runtimes::txn_runtime::{self, TxnReply, TxnRequest};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeTransactions,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeTransactionsRequest = request.decode()?;
        let mut response = DescribeTransactionsResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        for id in body.transactional_ids {
            if let Err(code) = authz.transactional_id(Operation::Describe, &id) {
                let mut state = TransactionState::default();
                state.transactional_id = id;
                state.producer_id = ProducerId(-1);
                state.producer_epoch = -1;
                state.transaction_start_time_ms = -1;
                state.error_code = code.code();
                response.transaction_states.push(state);
                continue;
            }
            let reply = txn_runtime::call(
                &shard,
                TxnRequest::Describe {
                    transactional_id: id.0.to_string(),
                },
            )
            .await;
            let mut state = TransactionState::default();
            state.producer_id = ProducerId(-1);
            state.producer_epoch = -1;
            state.transaction_start_time_ms = -1;
            match reply {
                TxnReply::Described(Some(meta)) => {
                    state.transaction_state = str_bytes(meta.state.name());
                    state.transaction_timeout_ms = meta.timeout_ms;
                    state.transaction_start_time_ms = meta.start_ms;
                    state.producer_id = ProducerId(meta.producer_id);
                    state.producer_epoch = meta.producer_epoch;
                    state.topics = group_by_topic(&meta.partitions)
                        .into_iter()
                        .map(|(topic, partitions)| {
                            let mut t = TopicData::default();
                            t.topic = TopicName(str_bytes(topic));
                            t.partitions = partitions;
                            t
                        })
                        .collect();
                }
                TxnReply::Described(None) => {
                    state.error_code = ErrorCode::TransactionalIdNotFound.code()
                }
                TxnReply::Code(code) => state.error_code = code.code(),
                _ => state.error_code = ErrorCode::UnknownServerError.code(),
            }
            state.transactional_id = id;
            response.transaction_states.push(state);
        }
        request.respond(&response)
    })
}

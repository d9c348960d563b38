//! ListTransactions (key 66): every transactional id of every shard's
//! coordinator, filtered by state, producer id and (v1+) by how long the
//! transaction has been open.

use super::{str_bytes, Handler, HandlerFuture, Request};
use coordinators::txn::TxnState;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use runtimes::cluster_runtime;
use runtimes::txn_runtime;
use runtimes::Shard;
use security::acl::{Operation, ResourceType};
use std::rc::Rc;

/// v0–v1 (v2 adds a regular-expression filter on the id).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ListTransactions,
    min_version: 0,
    max_version: 1,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ListTransactionsRequest = request.decode()?;
        let mut response = ListTransactionsResponse::default();
        let mut states = Vec::new();
        for name in &body.state_filters {
            match TxnState::from_name(name) {
                Some(state) => states.push(state),
                None => response.unknown_state_filters.push(name.clone()),
            }
        }
        let producer_ids: Vec<i64> = body.producer_id_filters.iter().map(|p| p.0).collect();
        let now_ms = shard.now_ms();
        let min_duration_ms = if request.version >= 1 {
            body.duration_filter
        } else {
            -1
        };
        // Only the transactional ids the caller may DESCRIBE, as Kafka.
        let authz = cluster_runtime::authz(&shard, &request.session);
        for (id, meta) in txn_runtime::list_all(&shard).await {
            if !authz.allows(Operation::Describe, ResourceType::TransactionalId, &id) {
                continue;
            }
            let state_ok = body.state_filters.is_empty() || states.contains(&meta.state);
            let producer_ok = producer_ids.is_empty() || producer_ids.contains(&meta.producer_id);
            // KIP-994: only transactions open at least this long.
            let duration_ok = min_duration_ms < 0
                || (meta.start_ms >= 0 && now_ms - meta.start_ms >= min_duration_ms);
            if state_ok && producer_ok && duration_ok {
                let mut row = TransactionState::default();
                row.transactional_id = TransactionalId(str_bytes(id));
                row.producer_id = ProducerId(meta.producer_id);
                row.transaction_state = str_bytes(meta.state.name());
                response.transaction_states.push(row);
            }
        }
        request.respond(&response)
    })
}

//! AddPartitionsToTxn (key 24): registers the partitions a transactional
//! producer is about to write, on the transaction coordinator of its id, so
//! EndTxn knows where to write the markers.
//!
//! v0–v3 is the client form (one transaction); v4 is the broker form
//! (several transactions, with `verify_only` to ask whether partitions are
//! already in a transaction), which a partition leader sends before a
//! transaction's first batch there (KIP-890, `txn_runtime::join`): it needs
//! CLUSTER_ACTION, as Kafka's, and the leader has checked the producer's
//! own rights already. Unknown partitions fail with
//! UNKNOWN_TOPIC_OR_PARTITION and the rest of the request with
//! OPERATION_NOT_ATTEMPTED, as Kafka answers.

use super::init_producer_id::fenced_for_version;
use super::{Handler, HandlerFuture, Request};
use coordinators::txn::TRANSACTION_VERSION_2;
use engine::ErrorCode;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey};
use runtimes::cluster_runtime;
use runtimes::txn_runtime::{self, TxnReply, TxnRequest};
use runtimes::Shard;
use security::acl::{Authz, Operation};
use std::rc::Rc;

/// v0–v4 (v5 adds transactions v2's TRANSACTION_ABORTABLE).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::AddPartitionsToTxn,
    min_version: 0,
    max_version: 4,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: AddPartitionsToTxnRequest = request.decode()?;
        let version = request.version;
        let mut response = AddPartitionsToTxnResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        if version <= 3 {
            let txn = TxnPartitions {
                transactional_id: body.v3_and_below_transactional_id.0.to_string(),
                producer_id: body.v3_and_below_producer_id.0,
                producer_epoch: body.v3_and_below_producer_epoch,
                topics: &body.v3_and_below_topics,
                verify_only: false,
            };
            response.results_by_topic_v3_and_below = add_one(&shard, &authz, version, txn).await;
        } else if !authz.allows_cluster(Operation::ClusterAction) {
            response.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        } else {
            for txn in body.transactions {
                let mut result = AddPartitionsToTxnResult::default();
                let one = TxnPartitions {
                    transactional_id: txn.transactional_id.0.to_string(),
                    producer_id: txn.producer_id.0,
                    producer_epoch: txn.producer_epoch,
                    topics: &txn.topics,
                    verify_only: txn.verify_only,
                };
                result.topic_results = add_one(&shard, &authz, version, one).await;
                result.transactional_id = txn.transactional_id;
                response.results_by_transaction.push(result);
            }
        }
        request.respond(&response)
    })
}

/// One transaction of the request and the partitions it adds.
struct TxnPartitions<'a> {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    topics: &'a [AddPartitionsToTxnTopic],
    /// Only ask whether the partitions are already in the transaction (v4).
    verify_only: bool,
}

/// A partition of the request: topic name and index.
type Partition = (String, i32);

/// One transaction's partitions: per-partition codes.
async fn add_one(
    shard: &Rc<Shard>,
    authz: &Authz,
    version: i16,
    txn: TxnPartitions<'_>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let topics = txn.topics;
    let (partitions, unknown) = sort_partitions(shard, authz, &txn.transactional_id, topics);
    let codes_by_partition = if !unknown.is_empty() {
        codes_when_refused(topics, &unknown)
    } else {
        register(shard, version, txn, partitions).await
    };
    let mut results = codes_by_partition.into_iter();
    topics
        .iter()
        .map(|topic| {
            let mut out = AddPartitionsToTxnTopicResult::default();
            out.name = topic.name.clone();
            out.results_by_partition = topic
                .partitions
                .iter()
                .map(|&p| {
                    let mut r = AddPartitionsToTxnPartitionResult::default();
                    r.partition_index = p;
                    r.partition_error_code = results
                        .next()
                        .unwrap_or(ErrorCode::UnknownServerError)
                        .code();
                    r
                })
                .collect();
            out
        })
        .collect()
}

/// The partitions to register, and those refused up front with their code.
fn sort_partitions(
    shard: &Shard,
    authz: &Authz,
    transactional_id: &str,
    topics: &[AddPartitionsToTxnTopic],
) -> (Vec<Partition>, Vec<(Partition, ErrorCode)>) {
    let mut partitions = Vec::new();
    // Partitions refused up front, with their code: WRITE on the
    // transactional id and on each topic (Kafka's checks), then existence.
    let mut unknown: Vec<(Partition, ErrorCode)> = Vec::new();
    // A broker's request (v4, CLUSTER_ACTION) is not checked again.
    let broker = authz.allows_cluster(Operation::ClusterAction);
    let txn_refused = authz
        .transactional_id(Operation::Write, transactional_id)
        .err()
        .filter(|_| !broker);
    let table = shard.topics.borrow();
    for topic in topics {
        let name = topic.name.0.to_string();
        let count = table.get(&name).map_or(0, |e| e.partitions);
        let topic_refused = || {
            authz
                .topic(Operation::Write, &name)
                .err()
                .filter(|_| !broker)
        };
        let refused = txn_refused.or_else(topic_refused);
        for &p in &topic.partitions {
            if let Some(code) = refused {
                unknown.push(((name.clone(), p), code));
            } else if p >= 0 && p < count {
                partitions.push((name.clone(), p));
            } else {
                unknown.push(((name.clone(), p), ErrorCode::UnknownTopicOrPartition));
            }
        }
    }
    (partitions, unknown)
}

/// Every partition's code, in request order, when some were refused up
/// front: theirs, and OPERATION_NOT_ATTEMPTED for the rest.
fn codes_when_refused(
    topics: &[AddPartitionsToTxnTopic],
    unknown: &[(Partition, ErrorCode)],
) -> Vec<ErrorCode> {
    topics
        .iter()
        .flat_map(|t| {
            let name = t.name.0.to_string();
            t.partitions.iter().map(move |p| {
                let key = (name.clone(), *p);
                unknown.iter().find(|(failed, _)| *failed == key).map_or(
                    // Another part of the request failed.
                    ErrorCode::OperationNotAttempted,
                    |(_, code)| *code,
                )
            })
        })
        .collect()
}

/// Registers (or, `verify_only`, looks up) `partitions` with the
/// transaction's coordinator: each partition's code, in request order.
async fn register(
    shard: &Rc<Shard>,
    version: i16,
    txn: TxnPartitions<'_>,
    partitions: Vec<Partition>,
) -> Vec<ErrorCode> {
    let count = partitions.len();
    let reply = txn_runtime::call(
        shard,
        TxnRequest::AddPartitions {
            transactional_id: txn.transactional_id,
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            partitions,
            verify_only: txn.verify_only,
            // A broker's add (v4) is a leader's for a client of
            // transactions v2: only those have their leader add for them.
            client_version: if version >= 4 && !txn.verify_only {
                TRANSACTION_VERSION_2
            } else {
                0
            },
        },
    )
    .await;
    match reply {
        TxnReply::Code(code) => vec![fenced_for_version(code, version, 2); count],
        TxnReply::Verified(Ok(present)) => present
            .into_iter()
            // Kafka answers a partition not in the transaction with INVALID_TXN_STATE.
            .map(|p| {
                if p {
                    ErrorCode::None
                } else {
                    ErrorCode::InvalidTxnState
                }
            })
            .collect(),
        TxnReply::Verified(Err(code)) => vec![code; count],
        _ => vec![ErrorCode::UnknownServerError; count],
    }
}

//! The coordinator side of a partition joining a transaction (KIP-890):
//! a partition leader's check before a transaction's first batch
//! ([`crate::routing::TxnJoin`], installed as its shard's coordinator
//! ask) and TxnOffsetCommit v5's offsets partition are added to (or, for
//! older clients, verified in) the transaction at its coordinator: through
//! the owner call when this broker leads the id's `__transaction_state`
//! partition, with AddPartitionsToTxn v4 (the brokers' form) to the broker
//! that does otherwise.

use super::{TxnReply, TxnRequest};
use crate::cluster_runtime::partition_leader;
use crate::replication_runtime::client::KafkaConnection;
use crate::routing::TxnJoin;
use crate::Shard;
use coordinators::txn::{txn_partition_for, TRANSACTION_VERSION_2, TXN_STATE_TOPIC};
use engine::ErrorCode;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use std::net::ToSocketAddrs;
use std::rc::Rc;
use std::time::Duration;

/// How long a broker waits to connect to another broker's coordinator.
const COORDINATOR_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Adds `partition` to the producer's transaction at its coordinator, on
/// this broker or another: TxnOffsetCommit v5 (transactions v2) adds the
/// group's offsets partition so, its client having sent no
/// AddOffsetsToTxn.
pub async fn add_to_transaction(
    shard: &Rc<Shard>,
    transactional_id: &str,
    producer: (i64, i16),
    partition: (String, i32),
) -> ErrorCode {
    let join = TxnJoin {
        transactional_id: transactional_id.to_string(),
        add: true,
    };
    ask_coordinator(shard.clone(), join, producer, partition).await
}

/// The coordinator's code for adding (or verifying) one partition of the
/// transaction `join` names.
pub async fn ask_coordinator(
    shard: Rc<Shard>,
    join: TxnJoin,
    (producer_id, producer_epoch): (i64, i16),
    partition: (String, i32),
) -> ErrorCode {
    let state_partition = txn_partition_for(&join.transactional_id);
    let (leader, host, port) = match partition_leader(&shard, TXN_STATE_TOPIC, state_partition) {
        Ok(endpoint) => endpoint,
        Err(_) => return ErrorCode::CoordinatorNotAvailable,
    };
    if leader != shard.config.broker_id {
        let producer = (producer_id, producer_epoch);
        return ask_remote(&shard, &join, producer, partition, (&host, port)).await;
    }
    let reply = super::call(
        &shard,
        TxnRequest::AddPartitions {
            transactional_id: join.transactional_id,
            producer_id,
            producer_epoch,
            partitions: vec![partition],
            verify_only: !join.add,
            // Only a client of transactions v2 has its leader add for it.
            client_version: if join.add { TRANSACTION_VERSION_2 } else { 0 },
        },
    )
    .await;
    match reply {
        TxnReply::Code(code) => code,
        TxnReply::Verified(Ok(present)) if present.first() == Some(&true) => ErrorCode::None,
        TxnReply::Verified(Ok(_)) => ErrorCode::InvalidTxnState,
        TxnReply::Verified(Err(code)) => code,
        _ => ErrorCode::UnknownServerError,
    }
}

/// AddPartitionsToTxn v4 (the brokers' form) to the coordinator's broker.
async fn ask_remote(
    shard: &Shard,
    join: &TxnJoin,
    (producer_id, producer_epoch): (i64, i16),
    (topic, partition): (String, i32),
    (host, port): (&str, i32),
) -> ErrorCode {
    let Some(address) = (host, u16::try_from(port).unwrap_or(0))
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
    else {
        return ErrorCode::CoordinatorNotAvailable;
    };
    let mut asked = AddPartitionsToTxnTopic::default();
    asked.name = TopicName(StrBytes::from_string(topic));
    asked.partitions = vec![partition];
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = TransactionalId(StrBytes::from_string(join.transactional_id.clone()));
    txn.producer_id = ProducerId(producer_id);
    txn.producer_epoch = producer_epoch;
    txn.verify_only = !join.add;
    txn.topics = vec![asked];
    let mut request = AddPartitionsToTxnRequest::default();
    request.transactions = vec![txn];
    let client_id = format!("rill-partition-leader-{}", shard.config.broker_id);
    let answered = async {
        let mut connection = KafkaConnection::connect(
            &shard.config,
            (host, address),
            COORDINATOR_CONNECT_TIMEOUT,
            client_id,
        )
        .await?;
        connection
            .request::<_, AddPartitionsToTxnResponse>(ApiKey::AddPartitionsToTxn, 4, &request)
            .await
    }
    .await;
    let response = match answered {
        Ok(response) => response,
        Err(e) => {
            tracing::debug!(error = %e, "transaction coordinator not reached");
            return ErrorCode::CoordinatorNotAvailable;
        }
    };
    let code = |code: i16| ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError);
    if response.error_code != 0 {
        return code(response.error_code);
    }
    response
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .flat_map(|t| &t.results_by_partition)
        .map(|p| code(p.partition_error_code))
        .next()
        .unwrap_or(ErrorCode::UnknownServerError)
}

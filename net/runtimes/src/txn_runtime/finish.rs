//! Ending a decided transaction: its offsets forwarded to the group
//! coordinator (commit), a marker on every partition of the transaction,
//! then the Complete state. Also TxnOffsetCommit's membership check.

use super::persist::persist_complete;
use super::{GroupMember, TxnRuntime, MARKER_ATTEMPTS};
use crate::cluster_runtime::partition_leader;
use crate::group_runtime::{self, GroupReply, GroupRequest};
use crate::replication_runtime::client::KafkaConnection;
use crate::replication_runtime::LeaderLease;
use crate::routing::{run_on_owners, PartitionOp, PartitionReply};
use crate::Shard;
use coordinators::group::OffsetCommitRequest;
use coordinators::txn::{
    txn_partition_for, PendingOffset, PendingOffsets, TxnCoordinator, TxnMetadata, TxnState,
};
use engine::ErrorCode;
use engine::TopicPartition;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::net::ToSocketAddrs;
use std::rc::Rc;
use std::time::Duration;

/// TxnOffsetCommit's membership check by the group coordinator (skipped for
/// a commit that names no member, as Kafka does for transactional commits).
pub(super) async fn validate_member(
    shard: &Rc<Shard>,
    group: &str,
    member: GroupMember,
    pending: &PendingOffsets,
) -> ErrorCode {
    let (generation, member_id, instance_id) = member;
    if generation < 0 && member_id.is_empty() && instance_id.is_none() {
        return ErrorCode::None;
    }
    let request = OffsetCommitRequest {
        retention_ms: -1,
        group_id: group.to_string(),
        generation_id_or_member_epoch: generation,
        member_id,
        group_instance_id: instance_id,
        offsets: group_offsets(pending.groups.get(group).cloned().unwrap_or_default()),
    };
    match group_runtime::call(shard, group, GroupRequest::ValidateTxnCommit(request)).await {
        GroupReply::Code(code) => code,
        GroupReply::Unavailable(code) => code,
        other => {
            tracing::warn!(group, reply = ?other, "unexpected answer to a membership check");
            ErrorCode::UnknownServerError
        }
    }
}

/// How long connecting to a partition's leader for its markers may take.
const MARKER_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Completes a decided transaction: forwards its offsets (commit) or drops
/// them (abort), writes the markers, persists the Complete state. Any
/// failure leaves the transaction in its Prepare state, with its offsets,
/// for the timer to run this again.
pub(super) async fn finish(
    shard: &Rc<Shard>,
    rt: &Rc<TxnRuntime>,
    transactional_id: &str,
    prepared: TxnMetadata,
) -> Result<(), ErrorCode> {
    let commit = prepared.state == TxnState::PrepareCommit;
    // The lease its partition is loaded under: every step below is taken
    // only while it is still current, and the markers carry its epoch.
    let lease = current_lease(shard, rt, transactional_id)?;
    if commit {
        let pending = rt.core.borrow().offsets(transactional_id).cloned();
        for (group, offsets) in pending.map(|p| p.groups).unwrap_or_default() {
            commit_group_offsets(shard, &group, offsets).await?;
        }
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        if current_lease(shard, rt, transactional_id)? != lease {
            return Err(ErrorCode::NotCoordinator);
        }
        match write_markers(shard, &prepared, commit, lease.leader_epoch).await {
            Ok(()) => break,
            Err(code) if attempt >= MARKER_ATTEMPTS => return Err(code),
            Err(code) => {
                tracing::debug!(
                    transactional_id,
                    %code,
                    attempt,
                    "marker write failed; retrying"
                );
                glommio::timer::sleep(Duration::from_millis(50 << attempt)).await;
            }
        }
    }
    persist_complete(
        shard,
        rt,
        transactional_id,
        TxnCoordinator::complete(&prepared, shard.now_ms()),
    )
    .await
}

/// The lease the id's partition is loaded under, if it is still the
/// partition's current one; NOT_COORDINATOR otherwise (the coordinator
/// lost the partition: whatever it decided is for the new leader to find).
fn current_lease(
    shard: &Shard,
    rt: &TxnRuntime,
    transactional_id: &str,
) -> Result<LeaderLease, ErrorCode> {
    let partition = txn_partition_for(transactional_id);
    rt.leases
        .current(shard, partition)
        .ok_or(ErrorCode::NotCoordinator)
}

fn group_offsets(
    offsets: Vec<PendingOffset>,
) -> Vec<(coordinators::group::TopicPartition, i64, i32, String, i64)> {
    offsets
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
        .collect()
}

/// Applies a committed transaction's offsets in the group coordinator,
/// durably; an error leaves the transaction unfinished, to be retried.
async fn commit_group_offsets(
    shard: &Rc<Shard>,
    group: &str,
    offsets: Vec<PendingOffset>,
) -> Result<(), ErrorCode> {
    let request = OffsetCommitRequest {
        retention_ms: -1,
        group_id: group.to_string(),
        // Not checked by CommitTxn: the membership was checked at
        // TxnOffsetCommit.
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets: group_offsets(offsets),
    };
    match group_runtime::call(shard, group, GroupRequest::CommitTxn(request)).await {
        GroupReply::Committed(results) => {
            match results
                .into_iter()
                .find(|(_, code)| *code != ErrorCode::None)
            {
                None => Ok(()),
                Some((tp, code)) => {
                    tracing::warn!(group, partition = ?tp, %code,
                        "transactional offset not committed yet; retrying later");
                    Err(code)
                }
            }
        }
        GroupReply::Unavailable(code) => {
            tracing::warn!(
                group,
                %code,
                "group coordinator unavailable for transactional offsets"
            );
            Err(code)
        }
        other => {
            tracing::warn!(group, reply = ?other, "unexpected answer to transactional offsets");
            Err(ErrorCode::UnknownServerError)
        }
    }
}

/// Writes the markers of `meta`'s partitions, each durable: on their owner
/// shards for the partitions this broker leads, with WriteTxnMarkers to the
/// leader for the others (in a cluster the coordinator and a partition's
/// leader are often different brokers).
async fn write_markers(
    shard: &Rc<Shard>,
    meta: &TxnMetadata,
    commit: bool,
    coordinator_epoch: i32,
) -> Result<(), ErrorCode> {
    let mut local = Vec::new();
    let mut remote: BTreeMap<(i32, String, i32), Vec<(String, i32)>> = BTreeMap::new();
    for (topic, partition) in &meta.partitions {
        match partition_leader(shard, topic, *partition) {
            Ok((leader, host, port)) if leader != shard.config.broker_id => remote
                .entry((leader, host, port))
                .or_default()
                .push((topic.clone(), *partition)),
            // Led here, or its leader unknown: the local owner answers
            // (NOT_LEADER_OR_FOLLOWER makes the caller retry later).
            _ => local.push((topic.clone(), *partition)),
        }
    }
    let ops: Vec<PartitionOp> = local
        .into_iter()
        .map(|(topic, partition)| PartitionOp::WriteMarker {
            tp: TopicPartition::new(topic, partition),
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            commit,
            coordinator_epoch,
        })
        .collect();
    for reply in run_on_owners(shard, ops).await {
        match reply {
            PartitionReply::Done(Ok(())) => {}
            PartitionReply::Done(Err(code)) => marker_outcome(code)?,
            _ => return Err(ErrorCode::UnknownServerError),
        }
    }
    for ((leader, host, port), partitions) in remote {
        let marker = (meta, commit, coordinator_epoch);
        write_remote_markers(shard, marker, (leader, &host, port), partitions).await?;
    }
    Ok(())
}

/// Whether a partition's answer to a marker leaves the transaction ended there.
fn marker_outcome(code: ErrorCode) -> Result<(), ErrorCode> {
    match code {
        ErrorCode::None => Ok(()),
        // A deleted partition has no transaction left to end.
        ErrorCode::UnknownTopicOrPartition => Ok(()),
        // A newer epoch or coordinator already ended it there.
        ErrorCode::InvalidProducerEpoch | ErrorCode::TransactionCoordinatorFenced => Ok(()),
        code => Err(code),
    }
}

/// WriteTxnMarkers (v1) to the broker leading `partitions`.
async fn write_remote_markers(
    shard: &Shard,
    (meta, commit, coordinator_epoch): (&TxnMetadata, bool, i32),
    (leader, host, port): (i32, &str, i32),
    partitions: Vec<(String, i32)>,
) -> Result<(), ErrorCode> {
    let address = (host, u16::try_from(port).unwrap_or(0))
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        topics.entry(topic).or_default().push(partition);
    }
    let mut marker = WritableTxnMarker::default();
    marker.producer_id = ProducerId(meta.producer_id);
    marker.producer_epoch = meta.producer_epoch;
    marker.transaction_result = commit;
    marker.coordinator_epoch = coordinator_epoch;
    marker.topics = topics
        .into_iter()
        .map(|(name, indexes)| {
            let mut topic = WritableTxnMarkerTopic::default();
            topic.name = TopicName(StrBytes::from_string(name));
            topic.partition_indexes = indexes;
            topic
        })
        .collect();
    let mut request = WriteTxnMarkersRequest::default();
    request.markers = vec![marker];
    let client_id = format!("rill-txn-coordinator-{}", shard.config.broker_id);
    let mut connection = KafkaConnection::connect(
        &shard.config,
        (host, address),
        MARKER_CONNECT_TIMEOUT,
        client_id,
    )
    .await
    .map_err(|e| {
        tracing::debug!(leader, error = %e, "transaction markers not delivered");
        ErrorCode::CoordinatorNotAvailable
    })?;
    let response: WriteTxnMarkersResponse = connection
        .request(ApiKey::WriteTxnMarkers, 1, &request)
        .await
        .map_err(|e| {
            tracing::debug!(leader, error = %e, "transaction markers not answered");
            ErrorCode::CoordinatorNotAvailable
        })?;
    for result in response.markers {
        for topic in result.topics {
            for partition in topic.partitions {
                let code = ErrorCode::from_code(partition.error_code)
                    .unwrap_or(ErrorCode::UnknownServerError);
                marker_outcome(code)?;
            }
        }
    }
    Ok(())
}

//! AlterPartitionReassignments (key 45, KIP-455): move a partition's
//! replicas to a new set of brokers, or cancel a move (`replicas: null`),
//! as `kafka-reassign-partitions.sh --execute` and
//! `Admin.alterPartitionReassignments` ask it.
//!
//! Asked of any broker: each partition goes to the active controller (the
//! decision is `rill-cluster`'s `alter_reassignment`), which answers once
//! the start is committed. The move itself then runs in the background: the
//! new replicas catch up as followers, join the ISR, and the controller
//! completes it (ListPartitionReassignments shows it until then).

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey,
};
use runtimes::cluster_runtime;
use runtimes::cluster_runtime::METADATA_SHARD;
use runtimes::cluster_runtime::{ControllerReply, ControllerRpc, SendToController};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v1 (v1: `allow_replication_factor_change`, KIP-1066).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::AlterPartitionReassignments,
    min_version: 0,
    max_version: 1,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: AlterPartitionReassignmentsRequest = request.decode()?;
        // v0 has no such field and always allowed it.
        let allow_rf_change = request.version < 1 || body.allow_replication_factor_change;
        let mut response = AlterPartitionReassignmentsResponse::default();
        if request.version >= 1 {
            response.allow_replication_factor_change = body.allow_replication_factor_change;
        }
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.cluster(Operation::Alter) {
            response.error_code = code.code();
            return request.respond(&response);
        }
        for topic in body.topics {
            let name = topic.name.0.to_string();
            let mut topic_response = ReassignableTopicResponse::default();
            topic_response.name = topic.name;
            for partition in topic.partitions {
                let target: Option<Vec<i32>> = partition
                    .replicas
                    .map(|replicas| replicas.into_iter().map(|b| b.0).collect());
                let outcome = reassign(
                    &shard,
                    &name,
                    partition.partition_index,
                    target,
                    allow_rf_change,
                )
                .await;
                let mut partition_response = ReassignablePartitionResponse::default();
                partition_response.partition_index = partition.partition_index;
                if let Err((code, message)) = outcome {
                    partition_response.error_code = code.code();
                    partition_response.error_message = Some(str_bytes(message));
                }
                topic_response.partitions.push(partition_response);
            }
            response.responses.push(topic_response);
        }
        request.respond(&response)
    })
}

/// One partition's move (or cancel), checked here then committed by the
/// active controller.
async fn reassign(
    shard: &Rc<Shard>,
    topic: &str,
    partition: i32,
    target: Option<Vec<i32>>,
    allow_rf_change: bool,
) -> Result<(), (ErrorCode, String)> {
    if let Some(target) = &target {
        let image = shard.runtime().view.image();
        let state = image
            .topic_by_name(topic)
            .and_then(|t| t.partitions.get(&partition))
            .ok_or_else(|| {
                (
                    ErrorCode::UnknownTopicOrPartition,
                    format!("unknown partition {topic}-{partition}"),
                )
            })?;
        let current_rf = state.replicas.len() - state.adding_replicas.len();
        if !allow_rf_change && target.len() != current_rf {
            return Err((
                ErrorCode::InvalidReplicationFactor,
                format!(
                    "the target {target:?} changes the replication factor {current_rf} of \
                     {topic}-{partition}, and the request does not allow that"
                ),
            ));
        }
    }
    let rpc = ControllerRpc::AlterReassignment {
        topic: topic.to_owned(),
        partition,
        target,
    };
    let answer = shard
        .call(METADATA_SHARD, SendToController(rpc))
        .await
        .map_err(|e| (ErrorCode::NotController, e.to_string()))??;
    match answer {
        ControllerReply::Committed { .. } => Ok(()),
        other => Err((
            ErrorCode::UnknownServerError,
            format!("unexpected controller answer {other:?}"),
        )),
    }
}

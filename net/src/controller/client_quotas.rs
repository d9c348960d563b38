//! AlterClientQuotas as this broker asks it of the cluster: one entity's
//! changes, committed by the active controller through the metadata quorum
//! (Kafka's ClientQuotaRecords), answered once applied here.

use super::reconcile::wait_reconciled;
use super::{ControllerState, CONTROLLER_SHARD};
use crate::call::OwnerCall;
use crate::cluster_runtime::{call_controller_until_answered, ControllerReply, ControllerRpc};
use crate::shard::Shard;
use engine::ErrorCode;
use std::rc::Rc;

/// One entity's quota changes, run on the controller shard one at a time
/// with the other metadata changes.
#[derive(Debug, Clone)]
pub struct AlterClientQuotas {
    /// The entity, parts in canonical order (`quotas::normalize`).
    pub entity: Vec<(String, Option<String>)>,
    /// (key, new value or `None` to remove).
    pub changes: Vec<(String, Option<f64>)>,
}

impl OwnerCall for AlterClientQuotas {
    type Reply = Result<(), (ErrorCode, String)>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let state = shard.service::<ControllerState>();
        let _permit = state
            .lock
            .acquire_permit(1)
            .await
            .map_err(|e| (ErrorCode::UnknownServerError, e.to_string()))?;
        let request = ControllerRpc::AlterClientQuotas {
            entity: self.entity,
            changes: self
                .changes
                .into_iter()
                .map(|(key, value)| (key, value.map(|v| v.to_string())))
                .collect(),
        };
        match call_controller_until_answered(&shard, request).await? {
            ControllerReply::Committed { offset } => {
                wait_reconciled(&shard, offset).await;
                Ok(())
            }
            other => Err((
                ErrorCode::UnknownServerError,
                format!("unexpected controller answer {other:?}"),
            )),
        }
    }
}

/// Asks the controller shard for a quota change, from any shard.
pub async fn submit(
    shard: &Rc<Shard>,
    request: AlterClientQuotas,
) -> Result<(), (ErrorCode, String)> {
    shard
        .call(CONTROLLER_SHARD, request)
        .await
        .map_err(|e| (ErrorCode::NotLeaderOrFollower, e.to_string()))?
}

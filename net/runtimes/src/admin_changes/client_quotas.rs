//! AlterClientQuotas as this broker asks it of the cluster: one entity's
//! changes, committed by the active controller through the metadata quorum
//! (Kafka's ClientQuotaRecords), answered once applied here.

use super::commit::commit;
use crate::cluster_runtime::ControllerRpc;
use crate::Shard;
use engine::ErrorCode;
use std::rc::Rc;

/// One entity's quota changes.
#[derive(Debug, Clone)]
pub struct AlterClientQuotas {
    /// The entity, parts in canonical order (`quotas::normalize`).
    pub entity: Vec<(String, Option<String>)>,
    /// (key, new value or `None` to remove).
    pub changes: Vec<(String, Option<f64>)>,
}

/// Commits a quota change from any shard and waits until this shard's
/// view holds it.
pub async fn submit(
    shard: &Rc<Shard>,
    request: AlterClientQuotas,
) -> Result<(), (ErrorCode, String)> {
    let change = ControllerRpc::AlterClientQuotas {
        entity: request.entity,
        changes: request
            .changes
            .into_iter()
            .map(|(key, value)| (key, value.map(|v| v.to_string())))
            .collect(),
    };
    commit(shard, change).await
}

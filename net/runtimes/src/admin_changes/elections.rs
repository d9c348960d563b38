//! ElectLeaders (key 43) as this broker asks it of the active controller:
//! run on the controller shard, committed through the metadata quorum,
//! answered once this broker has applied the new leaders, so that the
//! client's next Metadata request already names them.

use super::reconcile::wait_reconciled;
use super::CONTROLLER_SHARD;
use crate::cluster_runtime::{
    call_controller_until_answered, ControllerReply, ControllerRpc, TopicElections,
};
use crate::Shard;
use engine::ErrorCode;
use kernel::call::OwnerCall;
use std::rc::Rc;

/// ElectLeaders, run on the controller shard.
#[derive(Debug)]
pub struct ElectLeaders {
    /// Kafka's `ElectionType` code (0 preferred, 1 unclean).
    pub election_type: i8,
    /// (topic, partitions); `None`: every partition.
    pub partitions: Option<Vec<(String, Vec<i32>)>>,
}

impl OwnerCall<crate::ShardRuntime> for ElectLeaders {
    /// Each topic's answers.
    type Reply = Result<Vec<TopicElections>, (ErrorCode, String)>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let request = ControllerRpc::ElectLeaders {
            election_type: self.election_type,
            partitions: self.partitions,
        };
        match call_controller_until_answered(&shard, request).await? {
            ControllerReply::Elected { offset, results } => {
                wait_reconciled(&shard, offset).await;
                Ok(results)
            }
            other => Err((
                ErrorCode::UnknownServerError,
                format!("unexpected controller answer {other:?}"),
            )),
        }
    }
}

/// ElectLeaders from any shard: each topic's answers, or why the whole
/// request failed (no active controller, an unknown election type).
pub async fn elect_leaders(
    shard: &Rc<Shard>,
    request: ElectLeaders,
) -> Result<Vec<TopicElections>, (ErrorCode, String)> {
    shard
        .call(CONTROLLER_SHARD, request)
        .await
        .map_err(|e| (ErrorCode::NotController, e.to_string()))?
}

//! One metadata change (ACLs, SCRAM credentials, client quotas) committed
//! through the active controller and answered once the asking shard sees
//! it, so that the client's next request is judged by the new state.

use super::reconcile::wait_reconciled;
use super::CONTROLLER_SHARD;
use crate::cluster_runtime::{call_controller_until_answered, ControllerReply, ControllerRpc};
use crate::Shard;
use engine::ErrorCode;
use kernel::call::OwnerCall;
use std::rc::Rc;
use std::time::Duration;

/// How long an answer waits for the asking shard to see the change; past
/// it the change is committed anyway and applies a moment later.
const VIEW_WAIT: Duration = Duration::from_secs(10);

/// A change run on the controller shard: committed, then reconciled there.
#[derive(Debug)]
pub struct Commit(pub ControllerRpc);

impl OwnerCall<crate::ShardRuntime> for Commit {
    /// The metadata offset the change committed at.
    type Reply = Result<i64, (ErrorCode, String)>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        commit_here(&shard, self.0).await
    }
}

/// On the controller shard: commits `change` through the active controller
/// and waits until this shard has reconciled it; the offset it committed at.
pub(crate) async fn commit_here(
    shard: &Rc<Shard>,
    change: ControllerRpc,
) -> Result<i64, (ErrorCode, String)> {
    match call_controller_until_answered(shard, change).await? {
        ControllerReply::Committed { offset } => {
            wait_reconciled(shard, offset).await;
            Ok(offset)
        }
        other => Err((
            ErrorCode::UnknownServerError,
            format!("unexpected controller answer {other:?}"),
        )),
    }
}

/// Commits `change` from any shard and waits until this shard's metadata
/// view holds it.
pub async fn commit(shard: &Rc<Shard>, change: ControllerRpc) -> Result<(), (ErrorCode, String)> {
    let offset = shard
        .call(CONTROLLER_SHARD, Commit(change))
        .await
        .map_err(|e| (ErrorCode::NotController, e.to_string()))??;
    let view = shard.runtime().view.clone();
    let _ = glommio::timer::timeout(VIEW_WAIT, async {
        let (mut sequence, mut image, _) = view.current();
        while image.last_applied_offset() < offset {
            (sequence, image) = view.newer_than(sequence).await;
        }
        Ok(())
    })
    .await;
    Ok(())
}

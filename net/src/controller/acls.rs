//! CreateAcls and DeleteAcls as this broker asks them of the active
//! controller: the ACL records are committed to the metadata log (so they
//! hold on every broker and across restarts), and the answer waits until
//! this broker's shard sees them, so the client's next request is judged by
//! the new ACLs.

use super::reconcile::wait_reconciled;
use super::CONTROLLER_SHARD;
use crate::call::OwnerCall;
use crate::cluster_runtime::{
    call_controller_until_answered, ClusterView, ControllerReply, ControllerRpc,
};
use crate::shard::Shard;
use engine::ErrorCode;
use std::rc::Rc;
use std::time::Duration;

/// How long an answer waits for this shard to see the change; past it the
/// change is committed anyway and applies a moment later.
const VIEW_WAIT: Duration = Duration::from_secs(10);

/// An ACL change ([`ControllerRpc::CreateAcls`] or
/// [`ControllerRpc::DeleteAcls`]), run on the controller shard.
#[derive(Debug)]
pub struct ChangeAcls(pub ControllerRpc);

impl OwnerCall for ChangeAcls {
    /// The metadata offset the change committed at.
    type Reply = Result<i64, (ErrorCode, String)>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        match call_controller_until_answered(&shard, self.0).await? {
            ControllerReply::Committed { offset } => {
                wait_reconciled(&shard, offset).await;
                Ok(offset)
            }
            other => Err((
                ErrorCode::UnknownServerError,
                format!("unexpected controller answer {other:?}"),
            )),
        }
    }
}

/// Commits an ACL change from any shard and waits until this shard's
/// metadata view holds it.
pub async fn submit(shard: &Rc<Shard>, change: ControllerRpc) -> Result<(), (ErrorCode, String)> {
    let offset = shard
        .call(CONTROLLER_SHARD, ChangeAcls(change))
        .await
        .map_err(|e| (ErrorCode::NotController, e.to_string()))??;
    let view = shard.service::<ClusterView>();
    let _ = glommio::timer::timeout(VIEW_WAIT, async {
        let (mut sequence, mut image) = {
            let (sequence, image, _) = view.current();
            (sequence, image)
        };
        while image.last_applied_offset() < offset {
            (sequence, image) = view.newer_than(sequence).await;
        }
        Ok(())
    })
    .await;
    Ok(())
}

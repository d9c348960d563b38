//! CreateAcls and DeleteAcls as this broker asks them of the active
//! controller: the ACL records are committed to the metadata log (so they
//! hold on every broker and across restarts), and the answer waits until
//! this broker's shard sees them, so the client's next request is judged by
//! the new ACLs.

use super::commit::commit;
use crate::cluster_runtime::ControllerRpc;
use crate::Shard;
use engine::ErrorCode;
use std::rc::Rc;

/// Commits an ACL change ([`ControllerRpc::CreateAcls`] or
/// [`ControllerRpc::DeleteAcls`]) from any shard and waits until this
/// shard's metadata view holds it.
pub async fn submit(shard: &Rc<Shard>, change: ControllerRpc) -> Result<(), (ErrorCode, String)> {
    commit(shard, change).await
}

//! AddRaftVoter (key 80, KIP-853): make a running controller a voter of
//! the metadata quorum, as `kafka-metadata-quorum.sh add-controller` and
//! `rill admin quorum add-voter` ask.
//!
//! Asked of any node: the request goes to the active controller, which
//! commits the new controller's listener, adds it as a learner, waits for
//! it to catch up and promotes it (see `cluster_runtime::membership`). The
//! listener is the request's first one. Directory ids (KIP-858) are not
//! kept yet: the one sent is ignored. Authorization is Kafka's: ALTER on
//! the CLUSTER.

use super::{str_bytes, Handler, HandlerFuture, Request};
use kafka_protocol::messages::{AddRaftVoterRequest, AddRaftVoterResponse, ApiKey};
use runtimes::admin_changes::commit::commit;
use runtimes::cluster_runtime::{self, ControllerRpc};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0, the only version Kafka 3.9 and 4.x define.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::AddRaftVoter,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: AddRaftVoterRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let outcome = match (authz.cluster(Operation::Alter), body.listeners.first()) {
            (Err(code), _) => Err((code, String::from("not authorized to change the quorum"))),
            (Ok(()), None) => Err((
                engine::ErrorCode::InvalidRequest,
                String::from("the new voter needs a controller listener"),
            )),
            (Ok(()), Some(listener)) => {
                let change = ControllerRpc::AddVoter {
                    node_id: body.voter_id,
                    host: listener.host.to_string(),
                    port: listener.port,
                };
                commit(&shard, change).await
            }
        };
        let mut response = AddRaftVoterResponse::default();
        if let Err((code, message)) = outcome {
            response.error_code = code.code();
            response.error_message = Some(str_bytes(message));
        }
        request.respond(&response)
    })
}

//! RemoveRaftVoter (key 81, KIP-853): a voter of the metadata quorum stops
//! voting, as `kafka-metadata-quorum.sh remove-controller` and
//! `rill admin quorum remove-voter` ask: how a dead controller's place is
//! given up once a new one was added.
//!
//! Asked of any node: the request goes to the active controller, which
//! commits the change through the quorum. The active controller does not
//! remove itself (INVALID_REQUEST: stop it first); an id that does not
//! vote is VOTER_NOT_FOUND. Authorization is Kafka's: ALTER on the CLUSTER.

use super::{str_bytes, Handler, HandlerFuture, Request};
use kafka_protocol::messages::{ApiKey, RemoveRaftVoterRequest, RemoveRaftVoterResponse};
use runtimes::admin_changes::commit::commit;
use runtimes::cluster_runtime::{self, ControllerRpc};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0, the only version Kafka 3.9 and 4.x define.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::RemoveRaftVoter,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: RemoveRaftVoterRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let outcome = match authz.cluster(Operation::Alter) {
            Err(code) => Err((code, String::from("not authorized to change the quorum"))),
            Ok(()) => {
                let change = ControllerRpc::RemoveVoter {
                    node_id: body.voter_id,
                };
                commit(&shard, change).await
            }
        };
        let mut response = RemoveRaftVoterResponse::default();
        if let Err((code, message)) = outcome {
            response.error_code = code.code();
            response.error_message = Some(str_bytes(message));
        }
        request.respond(&response)
    })
}

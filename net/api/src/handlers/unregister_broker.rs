//! UnregisterBroker (key 64, KIP-500): remove a broker from the cluster
//! for good, as `kafka-cluster.sh unregister --id N` and
//! `Admin.unregisterBroker` ask it once the broker's machine is retired.
//!
//! Asked of any broker: the request goes to the active controller, which
//! moves the broker's leaderships and ISR memberships to live replicas and
//! deletes its registration in one decision, committed through the
//! metadata quorum. Its id may stay in replica lists (offline replicas)
//! until they are reassigned; `rill admin decommission` reassigns first.
//! An unknown id is BROKER_ID_NOT_REGISTERED. Authorization is Kafka's:
//! ALTER on the CLUSTER.

use super::{str_bytes, Handler, HandlerFuture, Request};
use kafka_protocol::messages::{ApiKey, UnregisterBrokerRequest, UnregisterBrokerResponse};
use runtimes::admin_changes::commit::commit;
use runtimes::cluster_runtime::{self, ControllerRpc};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0, the only version Kafka 3.x and 4.x define.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::UnregisterBroker,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: UnregisterBrokerRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let outcome = match authz.cluster(Operation::Alter) {
            Err(code) => Err((code, String::from("not authorized to unregister brokers"))),
            Ok(()) => {
                let change = ControllerRpc::UnregisterBroker {
                    broker_id: body.broker_id.0,
                };
                commit(&shard, change).await
            }
        };
        let mut response = UnregisterBrokerResponse::default();
        if let Err((code, message)) = outcome {
            response.error_code = code.code();
            response.error_message = Some(str_bytes(message));
        }
        request.respond(&response)
    })
}

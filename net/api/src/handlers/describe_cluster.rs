//! DescribeCluster (key 60): the cluster id, the active controller and the
//! live brokers (as Metadata lists them), and the caller's operations on
//! the cluster when asked (KIP-430).

use super::metadata::{active_controller, cluster_brokers};
use super::{str_bytes, Handler, HandlerFuture, Request};
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use runtimes::{cluster_runtime, Shard};
use std::rc::Rc;

/// v0–v1 (v2 adds fenced brokers, not listed yet).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeCluster,
    min_version: 0,
    max_version: 1,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeClusterRequest = request.decode()?;
        let mut response = DescribeClusterResponse::default();
        response.cluster_id = str_bytes(shard.config.cluster_id.clone());
        response.controller_id = BrokerId(active_controller(&shard));
        if request.version >= 1 {
            response.endpoint_type = body.endpoint_type;
        }
        let authz = cluster_runtime::authz(&shard, &request.session);
        let asked = body.include_cluster_authorized_operations;
        response.cluster_authorized_operations = authz.cluster_operations(asked);
        for listed in cluster_brokers(&shard, &request.session.listener) {
            let mut broker = DescribeClusterBroker::default();
            broker.broker_id = BrokerId(listed.node_id);
            broker.host = str_bytes(listed.host);
            broker.port = listed.port;
            broker.rack = listed.rack.map(str_bytes);
            response.brokers.push(broker);
        }
        request.respond(&response)
    })
}

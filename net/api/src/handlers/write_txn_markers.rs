//! WriteTxnMarkers (key 27): the inter-broker request that writes
//! transaction markers. rill's own coordinator writes them over the shard
//! mesh ([`runtimes::routing::PartitionOp::WriteMarker`]); this handler serves the
//! same operation to a peer or a tool, each marker waited durable.

use super::{Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ApiKey, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use runtimes::cluster_runtime;
use runtimes::routing::run_authorized;
use runtimes::routing::{PartitionOp, PartitionReply};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v1 (the codec's only version).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::WriteTxnMarkers,
    min_version: 1,
    max_version: 1,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: WriteTxnMarkersRequest = request.decode()?;
        let mut response = WriteTxnMarkersResponse::default();
        // An inter-broker API: CLUSTER_ACTION on the cluster, as Kafka.
        let authz = cluster_runtime::authz(&shard, &request.session);
        let allowed = authz.allows_cluster(Operation::ClusterAction);
        for marker in body.markers {
            let pairs: Vec<(String, i32)> = marker
                .topics
                .iter()
                .flat_map(|t| {
                    t.partition_indexes
                        .iter()
                        .map(|&p| (t.name.0.to_string(), p))
                })
                .collect();
            let mut replies = run_authorized(
                &shard,
                &pairs,
                |_| allowed,
                |tp, _| PartitionOp::WriteMarker {
                    tp,
                    producer_id: marker.producer_id.0,
                    producer_epoch: marker.producer_epoch,
                    commit: marker.transaction_result,
                    coordinator_epoch: marker.coordinator_epoch,
                },
            )
            .await
            .into_iter();
            let mut result = WritableTxnMarkerResult::default();
            result.producer_id = marker.producer_id;
            for topic in marker.topics {
                let mut out = WritableTxnMarkerTopicResult::default();
                for p in topic.partition_indexes {
                    let mut r = WritableTxnMarkerPartitionResult::default();
                    r.partition_index = p;
                    r.error_code = match replies.next() {
                        Some(Err(_)) if !allowed => ErrorCode::ClusterAuthorizationFailed,
                        Some(Ok(PartitionReply::Done(Ok(())))) => ErrorCode::None,
                        Some(Ok(PartitionReply::Done(Err(code)))) | Some(Err(code)) => code,
                        _ => ErrorCode::UnknownServerError,
                    }
                    .code();
                    out.partitions.push(r);
                }
                out.name = topic.name;
                result.topics.push(out);
            }
            response.markers.push(result);
        }
        request.respond(&response)
    })
}

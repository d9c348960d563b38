//! GetTelemetrySubscriptions (key 71, KIP-714): the client's instance id (a
//! new one when it sent the zero id), what it must push and how often, from
//! the CLIENT_METRICS resources that match it (`runtimes::telemetry`). With
//! none matching, the metrics list is empty and the client pushes nothing.
//! Kafka asks no ACL of it.

use super::{str_bytes, uuid, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::{
    ApiKey, GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
};
use runtimes::telemetry::{self, ACCEPTED_COMPRESSION_TYPES};
use runtimes::Shard;
use std::rc::Rc;

/// v0 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::GetTelemetrySubscriptions,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: GetTelemetrySubscriptionsRequest = request.decode()?;
        let client_id = request.header.client_id.as_deref().unwrap_or_default();
        let requested = body.client_instance_id.into_bytes();
        let (id, outcome) =
            telemetry::get_subscriptions(&shard, client_id, &request.session, requested);
        let mut response = GetTelemetrySubscriptionsResponse::default();
        response.throttle_time_ms = request.quota_throttle_ms;
        response.client_instance_id = uuid(id);
        match outcome {
            Ok(resolved) => {
                response.subscription_id = resolved.subscription_id;
                response.accepted_compression_types = ACCEPTED_COMPRESSION_TYPES.to_vec();
                response.push_interval_ms = resolved.interval_ms;
                response.telemetry_max_bytes =
                    i32::try_from(shard.runtime().telemetry.max_bytes()).unwrap_or(i32::MAX);
                // Cumulative sums: what a Prometheus counter is.
                response.delta_temporality = false;
                response.requested_metrics = resolved.metrics.into_iter().map(str_bytes).collect();
            }
            Err(code) => response.error_code = code.code(),
        }
        debug_assert!(response.error_code != ErrorCode::None.code() || id != [0; 16]);
        request.respond(&response)
    })
}

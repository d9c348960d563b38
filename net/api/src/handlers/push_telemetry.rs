//! PushTelemetry (key 72, KIP-714): a client's metrics, as OTLP
//! `MetricsData` compressed as it chose among those offered; checked,
//! decoded and kept for `/metrics` by `runtimes::telemetry`. The error codes
//! are Kafka's: UNKNOWN_SUBSCRIPTION_ID (ask again), THROTTLING_QUOTA_EXCEEDED
//! (too soon), TELEMETRY_TOO_LARGE (`telemetry.max.bytes`),
//! UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD (not metrics),
//! INVALID_REQUEST (the zero instance id, or a push after a terminating one).
//! Kafka asks no ACL of it.

use super::{Handler, HandlerFuture, Request};
use kafka_protocol::messages::{ApiKey, PushTelemetryRequest, PushTelemetryResponse};
use runtimes::telemetry::{self, Push};
use runtimes::Shard;
use std::rc::Rc;

/// v0 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::PushTelemetry,
    min_version: 0,
    max_version: 0,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: PushTelemetryRequest = request.decode()?;
        let client_id = request.header.client_id.as_deref().unwrap_or_default();
        let push = Push {
            instance_id: body.client_instance_id.into_bytes(),
            subscription_id: body.subscription_id,
            terminating: body.terminating,
            compression_type: body.compression_type,
            metrics: &body.metrics,
        };
        let code = telemetry::push(&shard, client_id, &request.session, push);
        let mut response = PushTelemetryResponse::default();
        response.throttle_time_ms = request.quota_throttle_ms;
        response.error_code = code.code();
        request.respond(&response)
    })
}

//! Connections, quotas, TLS and SASL.

use super::per_shard::PerShard;
use super::registry::{Declared, Family, Value};
use super::Shards;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::collections::BTreeMap;

/// Connections: open, accepted, refused, closed on bad input, and the
/// request bytes and read buffers they hold.
pub(super) static CONNECTIONS: [PerShard; 6] = [
    PerShard::gauge("rill_connections_open", "Connections open now.", |m| {
        m.connections_open
    }),
    PerShard::counter(
        "rill_connections_accepted_total",
        "Connections accepted.",
        |m| m.connections_accepted as i64,
    ),
    PerShard::counter(
        "rill_connections_refused_total",
        "Connections refused at max.connections or max.connections.per.ip.",
        |m| m.connections_refused as i64,
    ),
    PerShard::counter(
        "rill_protocol_errors_total",
        "Connections closed because of bad input.",
        |m| m.protocol_errors as i64,
    ),
    PerShard::gauge(
        "rill_queued_request_bytes",
        "Request bytes read and not yet answered (against the shard's share of queued.max.request.bytes).",
        |m| m.queued_request_bytes as i64,
    ),
    // 4 KiB for a connection that never filled one, then 64 KiB or the frame
    // being read; their bytes are not in rill_queued_request_bytes until a
    // frame is whole.
    PerShard::gauge(
        "rill_connection_read_buffer_bytes",
        "Bytes of the connections' read buffers.",
        |m| m.connection_read_buffer_bytes as i64,
    ),
];

/// Client quotas: requests throttled and the throttle time given.
pub(super) static QUOTAS: [PerShard; 2] = [
    PerShard::counter(
        "rill_quota_throttled_requests_total",
        "Requests answered with a quota throttle.",
        |m| m.quota_throttled_requests as i64,
    ),
    PerShard::counter(
        "rill_quota_throttle_ms_total",
        "Quota throttle time handed out, in milliseconds.",
        |m| m.quota_throttle_ms as i64,
    ),
];

/// TLS handshakes.
pub(super) static TLS: [PerShard; 2] = [
    PerShard::counter(
        "rill_tls_handshakes_total",
        "TLS handshakes completed.",
        |m| m.tls_handshakes as i64,
    ),
    PerShard::counter(
        "rill_tls_handshake_failures_total",
        "TLS handshakes failed (not TLS, refused certificate, timeout).",
        |m| m.tls_handshake_failures as i64,
    ),
];

static SASL_AUTHENTICATIONS: Family = Family::counter(
    "rill_sasl_authentications_total",
    "SASL authentications (and re-authentications) by mechanism and result, all shards; a rise of failed is a wrong password or someone guessing.",
    &["mechanism", "result"],
);

/// `rill_sasl_authentications_total{mechanism,result}`, summed over shards.
#[derive(Debug)]
pub(super) struct SaslCollector(pub(super) Shards);

impl Collector for SaslCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let mut totals: BTreeMap<(&str, bool), u64> = BTreeMap::new();
        for (_, m) in self.0.iter() {
            for (key, count) in &m.sasl_authentications {
                *totals.entry(*key).or_default() += count;
            }
        }
        let samples = totals.into_iter().map(|((mechanism, succeeded), count)| {
            let result = if succeeded { "succeeded" } else { "failed" };
            (
                vec![mechanism.to_string(), result.to_string()],
                Value::from(count),
            )
        });
        SASL_AUTHENTICATIONS.encode(&mut encoder, samples)
    }
}

impl Declared for SaslCollector {
    fn families(&self) -> Vec<&'static Family> {
        vec![&SASL_AUTHENTICATIONS]
    }
}

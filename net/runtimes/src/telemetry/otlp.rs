//! A pushed payload, decompressed, decoded as OTLP `MetricsData` (the
//! `opentelemetry-proto` crate's prost types) and turned into Prometheus
//! series (pure).
//!
//! - Names: `rill_client_` + the OTLP name with every character Prometheus
//!   does not allow (`[a-zA-Z0-9_:]`) made `_`:
//!   `org.apache.kafka.producer.record.queue.time.avg` →
//!   `rill_client_org_apache_kafka_producer_record_queue_time_avg`.
//! - Gauges and non-monotonic sums are gauges of their latest value;
//!   monotonic sums are counters (named `…_total`), cumulative as the
//!   broker asks clients to send them (a delta one is added up).
//! - Histograms, exponential histograms and summaries are skipped: the
//!   Kafka clients' KIP-714 metrics are gauges and sums (`.avg`, `.max`,
//!   `.rate`, `.total`), and a histogram's buckets would need a family of
//!   their own per client.
//! - A data point's attributes (`node.id`, ...) become labels, sanitized
//!   the same way; resource attributes do not (every series already has
//!   `client_id` and `client_instance_id`).
//! - Only metrics the client was asked for are kept, and no more points
//!   than an instance keeps series.

use super::instances::{Point, Series, SeriesKind, MAX_SERIES_PER_INSTANCE};
use super::subscription::Resolved;
use engine::batch::{decompress_capped, Compression};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, MetricsData, NumberDataPoint,
};
use prost::Message;

/// The prefix of every client metric's family name.
pub const NAME_PREFIX: &str = "rill_client_";
/// Labels every client series has.
pub const CLIENT_LABELS: [&str; 2] = ["client_id", "client_instance_id"];

/// Why a push's payload is not metrics.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The compression type is not one Kafka defines.
    #[error("unknown compression type {0}")]
    Compression(i8),
    /// The payload does not decompress (or decompresses too large).
    #[error("payload does not decompress: {0}")]
    Decompress(#[from] engine::batch::BatchError),
    /// The payload is not an OTLP `MetricsData`.
    #[error("payload is not OTLP metrics: {0}")]
    Decode(#[from] prost::DecodeError),
}

/// The codec of a PushTelemetry `compression_type` (Kafka's record codec
/// ids: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
pub fn compression(code: i8) -> Option<Compression> {
    match code {
        0 => Some(Compression::None),
        1 => Some(Compression::Gzip),
        2 => Some(Compression::Snappy),
        3 => Some(Compression::Lz4),
        4 => Some(Compression::Zstd),
        _ => None,
    }
}

/// Decompresses and decodes `payload`, keeping what `resolved` asks for.
pub fn decode(
    payload: &[u8],
    compression_type: i8,
    max_decompressed_bytes: usize,
    resolved: &Resolved,
) -> Result<Vec<Point>, OtlpError> {
    let codec = compression(compression_type).ok_or(OtlpError::Compression(compression_type))?;
    let raw = match codec {
        Compression::None => None,
        codec => Some(decompress_capped(codec, payload, max_decompressed_bytes)?),
    };
    let data = MetricsData::decode(raw.as_deref().unwrap_or(payload))?;
    let metrics = data
        .resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .filter(|m| resolved.wants(&m.name));
    let mut points = Vec::new();
    for metric in metrics {
        let family = family_name(&metric.name);
        let (data_points, kind, delta) = match &metric.data {
            Some(metric::Data::Gauge(gauge)) => (&gauge.data_points, SeriesKind::Gauge, false),
            Some(metric::Data::Sum(sum)) if sum.is_monotonic => (
                &sum.data_points,
                SeriesKind::Counter,
                sum.aggregation_temporality == AggregationTemporality::Delta as i32,
            ),
            Some(metric::Data::Sum(sum)) => (&sum.data_points, SeriesKind::Gauge, false),
            // Histograms and summaries: see the module doc.
            _ => continue,
        };
        let family = match kind {
            SeriesKind::Counter if !family.ends_with("_total") => format!("{family}_total"),
            _ => family,
        };
        for point in data_points {
            // The instance keeps no more than this: build no more.
            if points.len() >= MAX_SERIES_PER_INSTANCE {
                return Ok(points);
            }
            let Some(value) = point_value(point) else {
                continue;
            };
            points.push(Point {
                key: (family.clone(), labels(&point.attributes)),
                series: Series {
                    help: metric.description.clone(),
                    kind,
                    value,
                },
                delta,
            });
        }
    }
    Ok(points)
}

fn point_value(point: &NumberDataPoint) -> Option<f64> {
    match point.value? {
        number_data_point::Value::AsDouble(v) => Some(v),
        number_data_point::Value::AsInt(v) => Some(v as f64),
    }
}

/// A metric's family name: [`NAME_PREFIX`] and the name made Prometheus-safe.
pub fn family_name(otlp_name: &str) -> String {
    let mut out = String::with_capacity(NAME_PREFIX.len() + otlp_name.len());
    out.push_str(NAME_PREFIX);
    out.extend(otlp_name.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            c
        } else {
            '_'
        }
    }));
    out
}

/// A label name made Prometheus-safe (`[a-zA-Z_][a-zA-Z0-9_]*`, not
/// `__`-prefixed, which Prometheus reserves, nor one of [`CLIENT_LABELS`]);
/// `None` for an empty name.
pub fn label_name(key: &str) -> Option<String> {
    if key.is_empty() {
        return None;
    }
    let safe: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let reserved = safe.starts_with("__")
        || safe.starts_with(|c: char| c.is_ascii_digit())
        || CLIENT_LABELS.contains(&safe.as_str());
    Some(if reserved {
        format!("attr_{safe}")
    } else {
        safe
    })
}

/// A data point's attributes as sorted labels (values that are not a
/// string, bool or number are left out; a repeated name keeps its first).
fn labels(attributes: &[KeyValue]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(attributes.len());
    for attribute in attributes {
        let value = match attribute.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => s.clone(),
            Some(any_value::Value::BoolValue(b)) => b.to_string(),
            Some(any_value::Value::IntValue(i)) => i.to_string(),
            Some(any_value::Value::DoubleValue(d)) => d.to_string(),
            _ => continue,
        };
        let Some(name) = label_name(&attribute.key) else {
            continue;
        };
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, value));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::telemetry::instances::SeriesKey;
    use opentelemetry_proto::tonic::common::v1::AnyValue;
    use opentelemetry_proto::tonic::metrics::v1::{
        Gauge, Histogram, Metric, ResourceMetrics, ScopeMetrics, Sum,
    };

    fn number(value: f64, attributes: Vec<KeyValue>) -> NumberDataPoint {
        NumberDataPoint {
            attributes,
            value: Some(number_data_point::Value::AsDouble(value)),
            ..Default::default()
        }
    }

    fn attribute(key: &str, value: i64) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::IntValue(value)),
            }),
            ..Default::default()
        }
    }

    /// An OTLP payload as librdkafka's producer sends one (a gauge with a
    /// node attribute, a monotonic sum, a histogram).
    pub(crate) fn producer_payload() -> Vec<u8> {
        let gauge = |name: &str, value: f64, attributes| Metric {
            name: name.to_owned(),
            description: format!("{name} help"),
            data: Some(metric::Data::Gauge(Gauge {
                data_points: vec![number(value, attributes)],
            })),
            ..Default::default()
        };
        let metrics = vec![
            gauge(
                "org.apache.kafka.producer.record.queue.time.avg",
                1.5,
                Vec::new(),
            ),
            gauge(
                "org.apache.kafka.producer.node.request.latency.max",
                7.0,
                vec![attribute("node.id", 1)],
            ),
            Metric {
                name: "org.apache.kafka.producer.connection.creation.total".to_owned(),
                data: Some(metric::Data::Sum(Sum {
                    data_points: vec![number(3.0, Vec::new())],
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                    is_monotonic: true,
                })),
                ..Default::default()
            },
            Metric {
                name: "org.apache.kafka.producer.histogram".to_owned(),
                data: Some(metric::Data::Histogram(Histogram::default())),
                ..Default::default()
            },
            gauge(
                "org.apache.kafka.consumer.poll.idle.ratio.avg",
                0.5,
                Vec::new(),
            ),
        ];
        MetricsData {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
        .encode_to_vec()
    }

    fn producers() -> Resolved {
        Resolved {
            subscription_id: 1,
            interval_ms: 1000,
            metrics: vec![String::from("org.apache.kafka.producer.")],
        }
    }

    #[test]
    fn names_and_labels_follow_prometheus_rules() {
        assert_eq!(
            family_name("org.apache.kafka.producer.record.queue.time.avg"),
            "rill_client_org_apache_kafka_producer_record_queue_time_avg"
        );
        assert_eq!(family_name("a-b c/d:e"), "rill_client_a_b_c_d:e");
        assert_eq!(label_name("node.id").as_deref(), Some("node_id"));
        assert_eq!(label_name("__name__").as_deref(), Some("attr___name__"));
        assert_eq!(label_name("9lives").as_deref(), Some("attr_9lives"));
        assert_eq!(label_name("client_id").as_deref(), Some("attr_client_id"));
        assert_eq!(label_name(""), None);
    }

    #[test]
    fn a_payload_becomes_the_series_asked_for() {
        let points = decode(&producer_payload(), 0, 1 << 20, &producers()).unwrap();
        let keys: Vec<&SeriesKey> = points.iter().map(|p| &p.key).collect();
        assert_eq!(
            keys,
            [
                &(
                    "rill_client_org_apache_kafka_producer_record_queue_time_avg".to_owned(),
                    Vec::new()
                ),
                &(
                    "rill_client_org_apache_kafka_producer_node_request_latency_max".to_owned(),
                    vec![("node_id".to_owned(), "1".to_owned())]
                ),
                &(
                    "rill_client_org_apache_kafka_producer_connection_creation_total".to_owned(),
                    Vec::new()
                ),
            ]
        );
        assert_eq!(points[0].series.value, 1.5);
        assert_eq!(points[0].series.kind, SeriesKind::Gauge);
        assert_eq!(
            points[0].series.help,
            "org.apache.kafka.producer.record.queue.time.avg help"
        );
        assert_eq!(points[2].series.kind, SeriesKind::Counter);
        assert!(!points[2].delta);
    }

    #[test]
    fn no_more_points_are_built_than_an_instance_keeps() {
        let gauge = Metric {
            name: "org.apache.kafka.producer.x".to_owned(),
            data: Some(metric::Data::Gauge(Gauge {
                data_points: (0..MAX_SERIES_PER_INSTANCE + 100)
                    .map(|n| number(1.0, vec![attribute("n", n as i64)]))
                    .collect(),
            })),
            ..Default::default()
        };
        let payload = MetricsData {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![gauge],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
        .encode_to_vec();
        let points = decode(&payload, 0, 1 << 20, &producers()).unwrap();
        assert_eq!(points.len(), MAX_SERIES_PER_INSTANCE);
    }

    #[test]
    fn compressed_payloads_decode_and_garbage_is_refused() {
        let raw = producer_payload();
        for codec in [1i8, 2, 3, 4] {
            let packed = engine::batch::compress(compression(codec).unwrap(), &raw).unwrap();
            let points = decode(&packed, codec, 1 << 20, &producers()).unwrap();
            assert_eq!(points.len(), 3, "codec {codec}");
            // Decompressing past the cap is refused.
            assert!(matches!(
                decode(&packed, codec, raw.len() - 1, &producers()),
                Err(OtlpError::Decompress(_))
            ));
        }
        assert!(matches!(
            decode(&raw, 9, 1 << 20, &producers()),
            Err(OtlpError::Compression(9))
        ));
        assert!(matches!(
            decode(&[0xff, 0xff, 0xff], 0, 1 << 20, &producers()),
            Err(OtlpError::Decode(_))
        ));
        assert!(decode(b"not gzip", 1, 1 << 20, &producers()).is_err());
    }
}

//! DescribeConfigs v0 response: each config says `is_default` where later
//! versions give a `config_source`, and has no synonyms. The v0 request is
//! v1's without `include_synonyms` (decoded as v1 with it false).

use super::Writer;
use bytes::Bytes;
use kafka_protocol::messages::DescribeConfigsResponse;

/// Kafka's `ConfigSource.DEFAULT_CONFIG`: what v0 reports as `is_default`.
const SOURCE_DEFAULT: i8 = 5;

/// Encodes `response` as v0.
pub fn encode(response: &DescribeConfigsResponse) -> Bytes {
    let mut w = Writer::default();
    w.i32(response.throttle_time_ms);
    w.array_len(response.results.len());
    for result in &response.results {
        w.i16(result.error_code);
        w.nullable_string(result.error_message.as_ref().map(|m| m.as_str()));
        w.i8(result.resource_type);
        w.string(result.resource_name.as_str());
        w.array_len(result.configs.len());
        for c in &result.configs {
            w.string(c.name.as_str());
            w.nullable_string(c.value.as_ref().map(|v| v.as_str()));
            w.bool(c.read_only);
            w.bool(c.config_source == SOURCE_DEFAULT);
            w.bool(c.is_sensitive);
        }
    }
    w.finish()
}

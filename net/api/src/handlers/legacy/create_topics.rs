//! CreateTopics v0 and v1 responses: `[name error_code]`, v1 with
//! `error_message` (v2 put `throttle_time_ms` in front). The v0 request is
//! v1's without `validate_only` and v1's is v2's: both decode as v2.

use super::Writer;
use bytes::Bytes;
use kafka_protocol::messages::CreateTopicsResponse;

/// Encodes `response` as v0 or v1.
pub fn encode(response: &CreateTopicsResponse, version: i16) -> Bytes {
    let mut w = Writer::default();
    w.array_len(response.topics.len());
    for topic in &response.topics {
        w.string(topic.name.0.as_str());
        w.i16(topic.error_code);
        if version >= 1 {
            w.nullable_string(topic.error_message.as_ref().map(|m| m.as_str()));
        }
    }
    w.finish()
}

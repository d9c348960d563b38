//! ApiVersions (key 18): the served APIs and versions, straight from the registry.

use super::{encode_frame, Handler, HandlerFuture, Request, REGISTRY};
use bytes::Bytes;
use engine::ErrorCode;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use runtimes::Shard;
use std::rc::Rc;

/// v0–v3 (v3 is flexible; the crate's v4 is not yet negotiated by clients).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ApiVersions,
    min_version: 0,
    max_version: 3,
    handle,
};

/// The ApiVersions body listing every handler in the registry.
pub fn response_body(error_code: ErrorCode) -> ApiVersionsResponse {
    let mut body = ApiVersionsResponse::default();
    body.error_code = error_code.code();
    body.api_keys = REGISTRY
        .iter()
        .map(|h| {
            let mut v = ApiVersion::default();
            v.api_key = h.api_key as i16;
            v.min_version = h.min_version;
            v.max_version = h.max_version;
            v
        })
        .collect();
    body
}

/// Kafka's answer to an ApiVersions version it does not know: error 35 with
/// the API list, encoded as v0 so that any client can read it.
pub fn unsupported_version_frame(correlation_id: i32) -> Result<Bytes, String> {
    encode_frame(
        correlation_id,
        0,
        &response_body(ErrorCode::UnsupportedVersion),
        0,
    )
}

fn handle(_shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        // The body only names the client software (v3+), kept for the
        // matching of client-metrics subscriptions (KIP-714).
        let body: ApiVersionsRequest = request.decode()?;
        if request.version >= 3 {
            request.session.set_client_software(
                body.client_software_name.as_str(),
                body.client_software_version.as_str(),
            );
        }
        request.respond(&response_body(ErrorCode::None))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Decodable;

    #[test]
    fn lists_exactly_the_registry() {
        let body = response_body(ErrorCode::None);
        assert_eq!(body.api_keys.len(), REGISTRY.len());
        for (listed, h) in body.api_keys.iter().zip(REGISTRY) {
            assert_eq!(listed.api_key, h.api_key as i16);
            assert_eq!(
                (listed.min_version, listed.max_version),
                (h.min_version, h.max_version)
            );
        }
    }

    #[test]
    fn unsupported_version_answer_is_v0_with_error_35() {
        let mut frame = unsupported_version_frame(42).unwrap();
        let size = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(size, frame.len() - 4);
        let _ = bytes::Buf::get_i32(&mut frame);
        assert_eq!(bytes::Buf::get_i32(&mut frame), 42);
        let body = ApiVersionsResponse::decode(&mut frame, 0).unwrap();
        assert_eq!(body.error_code, 35);
        assert_eq!(body.api_keys.len(), REGISTRY.len());
    }
}

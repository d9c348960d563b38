//! ApiVersions (key 18): the served APIs and versions, straight from the
//! registry, and from v3 the feature levels (KIP-584): those this binary
//! supports and those the cluster runs at (`cluster::metadata::features`).
//! With `group.version` at 0 the consumer group protocol's APIs
//! (ConsumerGroupHeartbeat, ConsumerGroupDescribe) are left out, as Kafka
//! leaves them out, so clients use the classic protocol; with
//! `share.version` at 0, the share groups' client APIs.

use super::{encode_frame, Handler, HandlerFuture, Request, REGISTRY};
use bytes::Bytes;
use cluster::metadata::features::{self, GROUP_VERSION, SHARE_VERSION};
use cluster::metadata::MetadataImage;
use engine::ErrorCode;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
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

/// The APIs that run only with `group.version` 1 or more (KIP-848).
const GROUP_PROTOCOL_APIS: [ApiKey; 2] = [
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
];

/// The client APIs of share groups, which run only with `share.version` 1
/// or more (KIP-932).
const SHARE_GROUP_APIS: [ApiKey; 7] = [
    ApiKey::ShareGroupHeartbeat,
    ApiKey::ShareGroupDescribe,
    ApiKey::ShareFetch,
    ApiKey::ShareAcknowledge,
    ApiKey::DescribeShareGroupOffsets,
    ApiKey::AlterShareGroupOffsets,
    ApiKey::DeleteShareGroupOffsets,
];

/// `body` with the feature levels of `image` (v3+), and without the APIs
/// of a feature turned off.
pub fn with_features(mut body: ApiVersionsResponse, image: &MetadataImage) -> ApiVersionsResponse {
    if features::finalized_level(image, GROUP_VERSION) < 1 {
        body.api_keys.retain(|api| {
            !GROUP_PROTOCOL_APIS
                .iter()
                .any(|key| *key as i16 == api.api_key)
        });
    }
    if features::finalized_level(image, SHARE_VERSION) < 1 {
        body.api_keys.retain(|api| {
            !SHARE_GROUP_APIS
                .iter()
                .any(|key| *key as i16 == api.api_key)
        });
    }
    body.supported_features = features::supported_by_this_binary()
        .into_iter()
        .map(|feature| {
            let mut key = SupportedFeatureKey::default();
            key.name = StrBytes::from_string(feature.name);
            key.min_version = feature.min_level;
            key.max_version = feature.max_level;
            key
        })
        .collect();
    body.finalized_features = features::finalized_levels(image)
        .into_iter()
        .map(|(name, level)| {
            let mut key = FinalizedFeatureKey::default();
            key.name = StrBytes::from_string(name);
            key.min_version_level = level;
            key.max_version_level = level;
            key
        })
        .collect();
    // The image's offset: it only grows, and it has grown with every
    // feature change, which is all a client compares it for.
    body.finalized_features_epoch = image.last_applied_offset().max(0);
    body
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
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
        let image = shard.runtime().view.image();
        request.respond(&with_features(response_body(ErrorCode::None), &image))
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
    fn features_are_listed_and_group_protocol_apis_follow_group_version() {
        let mut image = MetadataImage::new();
        let body = with_features(response_body(ErrorCode::None), &image);
        assert_eq!(body.api_keys.len(), REGISTRY.len());
        assert_eq!(body.supported_features.len(), features::SUPPORTED.len());
        let finalized: Vec<(String, i16)> = body
            .finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.max_version_level))
            .collect();
        assert!(
            finalized.contains(&(GROUP_VERSION.to_owned(), 1)),
            "{finalized:?}"
        );
        let off = cluster::metadata::MetadataRecord::FeatureLevel {
            name: GROUP_VERSION.to_owned(),
            level: 0,
        };
        image.apply(0, &off).unwrap();
        let body = with_features(response_body(ErrorCode::None), &image);
        assert_eq!(body.api_keys.len(), REGISTRY.len() - 2);
        assert!(body
            .finalized_features
            .iter()
            .all(|f| f.name.as_str() != GROUP_VERSION));
        assert_eq!(body.finalized_features_epoch, 0);
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

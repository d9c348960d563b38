//! UpdateFeatures (key 57, KIP-584): change the level a feature runs at in
//! the cluster, as `kafka-features.sh upgrade|downgrade` and
//! `Admin.updateFeatures` ask it.
//!
//! Asked of any broker: the request goes to the active controller, which
//! refuses a level that this binary or any registered broker does not
//! support, or a downgrade not asked as one (INVALID_UPDATE_VERSION), and
//! commits the rest all or none (`rill-cluster`'s `update_features`). As
//! Kafka's controller, a refusal is the top-level error and every
//! feature's result. Authorization is Kafka's: ALTER on the CLUSTER.

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{ApiKey, UpdateFeaturesRequest, UpdateFeaturesResponse};
use runtimes::admin_changes::commit::commit;
use runtimes::cluster_runtime::{self, ControllerRpc};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v2 (v1: `upgrade_type` and `validate_only`; v2: no per-feature
/// results in the response).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::UpdateFeatures,
    min_version: 0,
    max_version: 2,
    handle,
};

/// Kafka's `UpgradeType` codes.
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: UpdateFeaturesRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let outcome = match authz.cluster(Operation::Alter) {
            Err(code) => Err((code, String::from("not authorized to update features"))),
            Ok(()) => commit(&shard, asked(&body, request.version)).await,
        };
        request.respond(&answer(&body, request.version, outcome))
    })
}

/// The request as the controller takes it. v0 has no upgrade type, only
/// `allow_downgrade`: Kafka reads it as a safe downgrade.
fn asked(body: &UpdateFeaturesRequest, version: i16) -> ControllerRpc {
    let updates = body
        .feature_updates
        .iter()
        .map(|update| {
            let upgrade_type = match (version, update.allow_downgrade) {
                (0, true) => SAFE_DOWNGRADE,
                (0, false) => UPGRADE,
                _ => update.upgrade_type,
            };
            (
                update.feature.to_string(),
                update.max_version_level,
                upgrade_type,
            )
        })
        .collect();
    ControllerRpc::UpdateFeatures {
        updates,
        validate_only: body.validate_only,
    }
}

fn answer(
    body: &UpdateFeaturesRequest,
    version: i16,
    outcome: Result<(), (ErrorCode, String)>,
) -> UpdateFeaturesResponse {
    let (code, message) = match outcome {
        Ok(()) => (ErrorCode::None.code(), None),
        Err((code, message)) => (code.code(), Some(message)),
    };
    let mut response = UpdateFeaturesResponse::default();
    response.error_code = code;
    response.error_message = message.clone().map(str_bytes);
    if version < 2 {
        response.results = body
            .feature_updates
            .iter()
            .map(|update| {
                let mut result = UpdatableFeatureResult::default();
                result.feature = update.feature.clone();
                result.error_code = code;
                result.error_message = message.clone().map(str_bytes);
                result
            })
            .collect();
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    use kafka_protocol::protocol::StrBytes;

    fn body(allow_downgrade: bool, upgrade_type: i8) -> UpdateFeaturesRequest {
        let mut update = FeatureUpdateKey::default();
        update.feature = StrBytes::from_static_str("group.version");
        update.max_version_level = 0;
        update.allow_downgrade = allow_downgrade;
        update.upgrade_type = upgrade_type;
        let mut body = UpdateFeaturesRequest::default();
        body.feature_updates = vec![update];
        body
    }

    #[test]
    fn v0_reads_allow_downgrade_and_v1_the_upgrade_type() {
        let downgrade = |rpc| match rpc {
            ControllerRpc::UpdateFeatures { updates, .. } => updates[0].2,
            other => panic!("{other:?}"),
        };
        assert_eq!(downgrade(asked(&body(true, 0), 0)), SAFE_DOWNGRADE);
        assert_eq!(downgrade(asked(&body(false, 0), 0)), UPGRADE);
        assert_eq!(downgrade(asked(&body(false, 3), 1)), 3);
    }

    #[test]
    fn a_refusal_is_the_top_level_error_and_each_result_until_v2() {
        let refused = || Err((ErrorCode::InvalidUpdateVersion, "no".to_owned()));
        let v1 = answer(&body(true, 2), 1, refused());
        assert_eq!(v1.error_code, 95);
        assert_eq!(v1.results.len(), 1);
        assert_eq!(v1.results[0].error_code, 95);
        let v2 = answer(&body(true, 2), 2, refused());
        assert_eq!(v2.error_code, 95);
        assert!(v2.results.is_empty());
        assert_eq!(answer(&body(true, 2), 1, Ok(())).results[0].error_code, 0);
    }
}

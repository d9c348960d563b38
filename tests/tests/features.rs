//! Feature levels (KIP-584; issue #33, point 4) against a real broker:
//! ApiVersions v3 lists the features this binary supports and the levels
//! the cluster runs at; UpdateFeatures changes a level only as asked
//! (INVALID_UPDATE_VERSION otherwise), and the change survives a restart.
//! `group.version` 0 turns the consumer group protocol off: ApiVersions
//! stops listing ConsumerGroupHeartbeat, and a call to it is refused with
//! UNSUPPORTED_VERSION, as in Kafka; 1 turns it back on. `share.version`
//! 0 does the same to share groups (ShareGroupHeartbeat, ShareFetch, ...).

use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;
use rill_tests::cluster::wait_for;
use rill_tests::{data_dir, raw, Broker};
use std::net::SocketAddr;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

const UNSUPPORTED_VERSION: i16 = 35;
const INVALID_UPDATE_VERSION: i16 = 95;

// Kafka's upgrade types.
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;

/// What ApiVersions v3 says: (APIs, supported (name, min, max), finalized
/// (name, level)).
type Versions = (Vec<i16>, Vec<(String, i16, i16)>, Vec<(String, i16)>);

fn api_versions(addr: SocketAddr) -> Versions {
    let mut request = ApiVersionsRequest::default();
    request.client_software_name = StrBytes::from_static_str("rill-tests");
    request.client_software_version = StrBytes::from_static_str("1");
    let response: ApiVersionsResponse =
        raw::request(addr, ApiKey::ApiVersions, 3, &request).expect("ApiVersions answered");
    assert_eq!(response.error_code, 0);
    let apis = response.api_keys.iter().map(|api| api.api_key).collect();
    let supported = response
        .supported_features
        .iter()
        .map(|f| (f.name.to_string(), f.min_version, f.max_version))
        .collect();
    let finalized: Vec<(String, i16)> = response
        .finalized_features
        .iter()
        .map(|f| {
            assert_eq!(f.min_version_level, f.max_version_level);
            (f.name.to_string(), f.max_version_level)
        })
        .collect();
    if !finalized.is_empty() {
        assert!(response.finalized_features_epoch >= 0);
    }
    (apis, supported, finalized)
}

/// UpdateFeatures v1 of one feature: (top-level code, the result's code).
fn update(
    addr: SocketAddr,
    name: &str,
    level: i16,
    upgrade_type: i8,
    validate_only: bool,
) -> (i16, i16) {
    let mut key = FeatureUpdateKey::default();
    key.feature = StrBytes::from_string(name.to_owned());
    key.max_version_level = level;
    key.upgrade_type = upgrade_type;
    let mut request = UpdateFeaturesRequest::default();
    request.timeout_ms = 10_000;
    request.feature_updates = vec![key];
    request.validate_only = validate_only;
    let response: UpdateFeaturesResponse =
        raw::request(addr, ApiKey::UpdateFeatures, 1, &request).expect("UpdateFeatures answered");
    assert_eq!(response.results.len(), 1);
    (response.error_code, response.results[0].error_code)
}

fn group_version(versions: &Versions) -> Option<i16> {
    versions
        .2
        .iter()
        .find(|(name, _)| name == "group.version")
        .map(|(_, level)| *level)
}

/// ConsumerGroupHeartbeat v0 of a new member: its error code.
fn join_consumer_group(addr: SocketAddr) -> i16 {
    let mut request = ConsumerGroupHeartbeatRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str("kip-848-readers"));
    request.member_id = StrBytes::from_static_str("");
    request.member_epoch = 0;
    request.rebalance_timeout_ms = 10_000;
    request.subscribed_topic_names = Some(vec![]);
    request.topic_partitions = Some(vec![]);
    let response: ConsumerGroupHeartbeatResponse =
        raw::request(addr, ApiKey::ConsumerGroupHeartbeat, 0, &request)
            .expect("ConsumerGroupHeartbeat answered");
    response.error_code
}

#[test]
fn feature_levels_are_listed_changed_as_asked_and_kept_over_a_restart() {
    let dir = data_dir();
    let mut broker = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    let addr = broker.addr;
    let cghb = ApiKey::ConsumerGroupHeartbeat as i16;

    let versions = api_versions(addr);
    assert!(versions.0.contains(&cghb));
    assert!(
        versions.1.contains(&("group.version".to_owned(), 0, 1)),
        "{:?}",
        versions.1
    );
    assert!(versions
        .1
        .contains(&("transaction.version".to_owned(), 0, 2)));
    // Transactions v2 on: clients of it use Produce v12 and EndTxn v5.
    assert!(versions.2.contains(&("transaction.version".to_owned(), 2)));
    assert_eq!(group_version(&versions), Some(1));
    assert!(versions.2.contains(&("metadata.version".to_owned(), 2)));
    assert_ne!(join_consumer_group(addr), UNSUPPORTED_VERSION);

    // Refused: down without asking for a downgrade, past what rill
    // supports, an unknown feature. Validate-only changes nothing.
    let refused = (INVALID_UPDATE_VERSION, INVALID_UPDATE_VERSION);
    assert_eq!(update(addr, "group.version", 0, UPGRADE, false), refused);
    assert_eq!(
        update(addr, "transaction.version", 3, UPGRADE, false),
        refused
    );
    assert_eq!(update(addr, "no.such.feature", 1, UPGRADE, false), refused);
    assert_eq!(
        update(addr, "group.version", 0, SAFE_DOWNGRADE, true),
        (0, 0)
    );
    assert_eq!(group_version(&api_versions(addr)), Some(1));

    // group.version 0: the consumer group protocol is off.
    assert_eq!(
        update(addr, "group.version", 0, SAFE_DOWNGRADE, false),
        (0, 0)
    );
    let versions = api_versions(addr);
    assert_eq!(group_version(&versions), None, "{:?}", versions.2);
    assert!(!versions.0.contains(&cghb));
    assert_eq!(join_consumer_group(addr), UNSUPPORTED_VERSION);

    // The level is in the metadata log: a restart keeps it.
    assert_eq!(broker.stop(), Some(0));
    broker.restart();
    let addr = broker.addr;
    wait_for("the broker back", Duration::from_secs(30), || {
        let request = ApiVersionsRequest::default();
        raw::request::<_, ApiVersionsResponse>(addr, ApiKey::ApiVersions, 0, &request).ok()
    });
    assert_eq!(group_version(&api_versions(addr)), None);
    assert_eq!(join_consumer_group(addr), UNSUPPORTED_VERSION);

    // Back on.
    assert_eq!(update(addr, "group.version", 1, UPGRADE, false), (0, 0));
    let versions = api_versions(addr);
    assert_eq!(group_version(&versions), Some(1));
    assert!(versions.0.contains(&cghb));
    assert_ne!(
        join_consumer_group(addr),
        UNSUPPORTED_VERSION,
        "{}",
        broker.log()
    );
}

/// A ShareGroupHeartbeat v1 join: its error code.
fn join_share_group(addr: SocketAddr) -> i16 {
    rill_tests::share::heartbeat(addr, "share-features", "member-1", 0, &[])
}

#[test]
fn share_version_zero_turns_share_groups_off() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--cores", "1"]);
    let addr = broker.addr;
    let share_apis = [
        ApiKey::ShareGroupHeartbeat as i16,
        ApiKey::ShareFetch as i16,
    ];
    let versions = api_versions(addr);
    assert!(versions.1.contains(&("share.version".to_owned(), 0, 1)));
    assert!(versions.2.contains(&("share.version".to_owned(), 1)));
    assert!(share_apis.iter().all(|api| versions.0.contains(api)));
    assert_eq!(join_share_group(addr), 0);

    assert_eq!(
        update(addr, "share.version", 0, SAFE_DOWNGRADE, false),
        (0, 0)
    );
    let versions = api_versions(addr);
    assert!(!versions.2.iter().any(|(name, _)| name == "share.version"));
    assert!(share_apis.iter().all(|api| !versions.0.contains(api)));
    assert_eq!(join_share_group(addr), UNSUPPORTED_VERSION);

    assert_eq!(update(addr, "share.version", 1, UPGRADE, false), (0, 0));
    assert!(api_versions(addr).0.contains(&share_apis[0]));
    assert_eq!(join_share_group(addr), 0);
}

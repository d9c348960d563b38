//! Feature levels (KIP-584), as ApiVersions reports them and UpdateFeatures
//! changes them: which features this binary supports, at which levels, and
//! at which level each runs in the cluster.
//!
//! A feature runs at its *finalized* level: the last level UpdateFeatures
//! set (a `FeatureLevel` record), or else its default below, lowered to
//! what every registered broker supports. Defaults are implicit rather
//! than written at bootstrap, so that a cluster made before feature levels
//! existed runs at them too. A level is only finalized when every
//! registered broker supports it, and a broker that cannot run a finalized
//! level is refused registration: so a feature is switched on only once
//! every broker of a rolling upgrade has the binary that supports it.
//!
//! The features:
//! - `metadata.version`: the format of rill's metadata log. rill's levels
//!   are its own (its log is not Kafka's): 1 is the first format; 2 adds
//!   group configs (GroupConfigChange records), which a level-1 binary
//!   cannot read, so none is written while any broker runs one.
//! - `group.version`: 1 turns on the consumer group protocol of KIP-848
//!   (ConsumerGroupHeartbeat); 0 leaves only the classic protocol, as in
//!   Kafka.
//! - `eligible.leader.replicas.version`: 1, KIP-966's eligible leader
//!   replicas, always on in rill (it cannot be turned off).
//! - `share.version`: 1 turns on share groups (KIP-932: ShareGroupHeartbeat,
//!   ShareFetch, ...); 0 turns them off, as in Kafka 4.1+.
//! - `transaction.version`: 2 tells clients to use transactions v2
//!   (KIP-890 part 2: Produce v12 adds partitions to the transaction,
//!   EndTxn v5 gives a new epoch per transaction); below it they stay on
//!   v1. The broker serves both whatever the level (the request versions
//!   say which); level 1 changes nothing in rill.
//! - `kraft.version`: level 0; rill's dynamic quorum (KIP-853) keeps its
//!   membership in the metadata log's Raft configuration, with no level.

use super::error::MetadataError;
use super::image::BrokerRegistration;
use super::record::SupportedFeature;
use super::MetadataImage;

/// One feature this binary knows: its supported range and default level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feature {
    /// Kafka's name.
    pub name: &'static str,
    /// Lowest supported level.
    pub min_level: i16,
    /// Highest supported level.
    pub max_level: i16,
    /// The level it runs at until UpdateFeatures sets one.
    pub default_level: i16,
    /// The only level a binary older than feature levels runs it at (one
    /// that registers without listing its features).
    pub legacy_level: i16,
}

/// `metadata.version`.
pub const METADATA_VERSION: &str = "metadata.version";
/// The `metadata.version` that group configs need.
pub const GROUP_CONFIGS_METADATA_VERSION: i16 = 2;
/// `group.version`.
pub const GROUP_VERSION: &str = "group.version";
/// `share.version`.
pub const SHARE_VERSION: &str = "share.version";
/// `transaction.version`.
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// Every feature this binary supports.
pub const SUPPORTED: [Feature; 6] = [
    Feature {
        name: METADATA_VERSION,
        min_level: 1,
        max_level: 2,
        default_level: 2,
        legacy_level: 2,
    },
    Feature {
        name: GROUP_VERSION,
        min_level: 0,
        max_level: 1,
        default_level: 1,
        legacy_level: 1,
    },
    Feature {
        name: "eligible.leader.replicas.version",
        min_level: 1,
        max_level: 1,
        default_level: 1,
        legacy_level: 1,
    },
    Feature {
        name: SHARE_VERSION,
        min_level: 0,
        max_level: 1,
        default_level: 1,
        legacy_level: 1,
    },
    Feature {
        name: TRANSACTION_VERSION,
        min_level: 0,
        max_level: 2,
        default_level: 2,
        legacy_level: 0,
    },
    Feature {
        name: "kraft.version",
        min_level: 0,
        max_level: 0,
        default_level: 0,
        legacy_level: 0,
    },
];

/// `RILL_TEST_SUPPORTED_FEATURES`, read in debug builds only: the features
/// the broker says it supports, `name=min-max` separated by commas, in
/// place of [`SUPPORTED`]. A test's stand-in for the previous release in a
/// rolling upgrade (its registration and ApiVersions); the binary still
/// runs each feature only at the level the cluster runs it at.
pub const TEST_SUPPORTED_FEATURES: &str = "RILL_TEST_SUPPORTED_FEATURES";

/// This binary's supported features, as its registration carries them
/// (and ApiVersions lists them).
pub fn supported_by_this_binary() -> Vec<SupportedFeature> {
    if let Some(features) = test_override() {
        return features;
    }
    SUPPORTED
        .iter()
        .map(|feature| SupportedFeature {
            name: feature.name.to_owned(),
            min_level: feature.min_level,
            max_level: feature.max_level,
        })
        .collect()
}

/// [`TEST_SUPPORTED_FEATURES`], parsed; `None` when unset, unparsable or
/// in a release build.
fn test_override() -> Option<Vec<SupportedFeature>> {
    if !cfg!(debug_assertions) {
        return None;
    }
    let text = std::env::var(TEST_SUPPORTED_FEATURES).ok()?;
    parse_feature_ranges(&text)
}

/// `name=min-max,...` as [`SupportedFeature`]s; `None` if any is malformed.
fn parse_feature_ranges(text: &str) -> Option<Vec<SupportedFeature>> {
    text.split(',')
        .filter(|item| !item.trim().is_empty())
        .map(|item| {
            let (name, range) = item.trim().split_once('=')?;
            let (min, max) = range.split_once('-')?;
            Some(SupportedFeature {
                name: name.to_owned(),
                min_level: min.parse().ok()?,
                max_level: max.parse().ok()?,
            })
        })
        .collect()
}

/// This binary's entry for `name`.
pub fn known(name: &str) -> Option<&'static Feature> {
    SUPPORTED.iter().find(|feature| feature.name == name)
}

/// The level `name` runs at in the cluster of `image`: the finalized one,
/// else its [`implicit_level`].
pub fn finalized_level(image: &MetadataImage, name: &str) -> i16 {
    match image.finalized_features().get(name) {
        Some(&level) => level,
        None => implicit_level(image, name),
    }
}

/// Whether group configs may be written: they need `metadata.version` 2,
/// as a binary of level 1 cannot read their records (a rolling upgrade
/// that has not reached every broker yet).
pub fn group_configs_allowed(image: &MetadataImage) -> Result<(), MetadataError> {
    let level = finalized_level(image, METADATA_VERSION);
    if level >= GROUP_CONFIGS_METADATA_VERSION {
        return Ok(());
    }
    Err(MetadataError::FeatureLevelTooLow {
        what: "a group config",
        feature: METADATA_VERSION,
        needed: GROUP_CONFIGS_METADATA_VERSION,
        level,
    })
}

/// The level of a feature no UpdateFeatures has set: its default (0 for a
/// feature this binary does not know), lowered to the highest level every
/// registered broker supports. So in a rolling upgrade a feature new in
/// this binary stays off while any broker still runs the previous one,
/// and comes on by itself once the last broker has re-registered with
/// the new binary; a broker rolled back to an older binary turns it off
/// again rather than being refused.
pub fn implicit_level(image: &MetadataImage, name: &str) -> i16 {
    let default = known(name).map_or(0, |feature| feature.default_level);
    (1..=default)
        .rev()
        .find(|&level| {
            image
                .brokers()
                .values()
                .all(|broker| broker_supports(broker, name, level))
        })
        .unwrap_or(0)
}

/// Every feature's level in the cluster of `image`, those this binary
/// knows and those set by a newer one, above 0 only (as ApiVersions lists
/// them: an absent feature runs at 0).
pub fn finalized_levels(image: &MetadataImage) -> Vec<(String, i16)> {
    let mut levels: Vec<(String, i16)> = SUPPORTED
        .iter()
        .map(|feature| {
            (
                feature.name.to_owned(),
                finalized_level(image, feature.name),
            )
        })
        .collect();
    for (name, &level) in image.finalized_features() {
        if known(name).is_none() {
            levels.push((name.clone(), level));
        }
    }
    levels.retain(|(_, level)| *level > 0);
    levels.sort();
    levels
}

/// Whether `broker` can run `name` at `level`. A broker registered without
/// features (a binary older than feature levels) runs each feature at its
/// legacy level only; any broker runs a feature it does not list at level 0.
pub fn broker_supports(broker: &BrokerRegistration, name: &str, level: i16) -> bool {
    supports(&broker.features, name, level)
}

/// Whether a registration listing `features` can run `name` at `level`.
pub fn supports(features: &[SupportedFeature], name: &str, level: i16) -> bool {
    if features.is_empty() {
        let legacy = known(name).map_or(0, |feature| feature.legacy_level);
        return level == legacy;
    }
    match features.iter().find(|feature| feature.name == name) {
        Some(feature) => (feature.min_level..=feature.max_level).contains(&level),
        None => level == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::MetadataRecord;

    fn range(name: &str, min_level: i16, max_level: i16) -> SupportedFeature {
        SupportedFeature {
            name: name.to_owned(),
            min_level,
            max_level,
        }
    }

    #[test]
    fn levels_default_until_set_and_zero_is_kept() {
        let mut image = MetadataImage::new();
        assert_eq!(finalized_level(&image, GROUP_VERSION), 1);
        assert_eq!(finalized_level(&image, TRANSACTION_VERSION), 2);
        assert_eq!(finalized_level(&image, "no.such.feature"), 0);
        let off = MetadataRecord::FeatureLevel {
            name: GROUP_VERSION.to_owned(),
            level: 0,
        };
        image.apply(0, &off).unwrap();
        // Set to 0 is off, not back to the default.
        assert_eq!(finalized_level(&image, GROUP_VERSION), 0);
        assert_eq!(
            finalized_levels(&image),
            vec![
                ("eligible.leader.replicas.version".to_owned(), 1),
                (METADATA_VERSION.to_owned(), 2),
                (SHARE_VERSION.to_owned(), 1),
                (TRANSACTION_VERSION.to_owned(), 2)
            ]
        );
    }

    #[test]
    fn a_test_override_parses_ranges_and_refuses_malformed_ones() {
        let parsed = parse_feature_ranges("metadata.version=1-1, group.version=0-1").unwrap();
        assert_eq!(
            parsed,
            vec![range(METADATA_VERSION, 1, 1), range(GROUP_VERSION, 0, 1)]
        );
        assert_eq!(parse_feature_ranges("metadata.version=1"), None);
        assert_eq!(parse_feature_ranges("metadata.version=a-1"), None);
    }

    #[test]
    fn support_follows_the_registration_and_old_binaries_run_defaults() {
        let listed = [range(GROUP_VERSION, 0, 1), range(METADATA_VERSION, 1, 1)];
        assert!(supports(&listed, GROUP_VERSION, 0));
        assert!(supports(&listed, GROUP_VERSION, 1));
        assert!(!supports(&listed, GROUP_VERSION, 2));
        assert!(supports(&listed, "transaction.version", 0));
        assert!(!supports(&listed, "transaction.version", 1));
        // A binary from before feature levels: defaults only.
        assert!(supports(&[], GROUP_VERSION, 1));
        assert!(!supports(&[], GROUP_VERSION, 0));
        // Transactions v2 came after feature levels: such a binary has v1.
        assert!(supports(&[], TRANSACTION_VERSION, 0));
        assert!(!supports(&[], TRANSACTION_VERSION, 2));
        assert_eq!(supported_by_this_binary().len(), SUPPORTED.len());
        for feature in SUPPORTED {
            assert!((feature.min_level..=feature.max_level).contains(&feature.default_level));
        }
    }
}

//! UpdateFeatures (KIP-584): a feature's finalized level changes only to a
//! level that this binary and every registered broker support, and a
//! downgrade only when asked as one. A registering broker must support
//! every level the cluster runs at (checked in `brokers.rs`).

use super::super::error::MetadataError;
use super::super::features::{broker_supports, finalized_level, known, supports};
use super::super::record::{MetadataRecord, SupportedFeature};
use super::Controller;
use crate::placement::BrokerId;

/// Kafka's `UpgradeType`: how a level change is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradeType {
    /// 1: to a higher level (or the same).
    Upgrade,
    /// 2: to a lower level, losing no metadata.
    SafeDowngrade,
    /// 3: to a lower level, possibly losing metadata.
    UnsafeDowngrade,
}

impl UpgradeType {
    /// From Kafka's code; `None` for an unknown one.
    pub fn from_code(code: i8) -> Option<UpgradeType> {
        match code {
            1 => Some(UpgradeType::Upgrade),
            2 => Some(UpgradeType::SafeDowngrade),
            3 => Some(UpgradeType::UnsafeDowngrade),
            _ => None,
        }
    }
}

/// One asked change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureUpdate {
    /// The feature.
    pub name: String,
    /// The level wanted.
    pub level: i16,
    /// How it is asked.
    pub upgrade_type: UpgradeType,
}

impl Controller<'_> {
    /// UpdateFeatures: the FeatureLevel records of `updates`, all or none
    /// (as Kafka's controller: the first refused update refuses the whole
    /// request). An update to the level in force adds no record;
    /// `validate_only` checks and adds none.
    pub fn update_features(
        &self,
        updates: &[FeatureUpdate],
        validate_only: bool,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let mut records = Vec::new();
        for update in updates {
            if self.checked_update(update)? {
                records.push(MetadataRecord::FeatureLevel {
                    name: update.name.clone(),
                    level: update.level,
                });
            }
        }
        if validate_only {
            records.clear();
        }
        Ok(records)
    }

    /// Whether `update` changes its feature's level; an error if it may not.
    fn checked_update(&self, update: &FeatureUpdate) -> Result<bool, MetadataError> {
        let refuse = |reason: String| Err(MetadataError::InvalidFeatureUpdate { reason });
        let name = &update.name;
        let Some(feature) = known(name) else {
            return refuse(format!("unknown feature {name}"));
        };
        let level = update.level;
        if !(feature.min_level..=feature.max_level).contains(&level) {
            return refuse(format!(
                "{name} level {level} is outside the supported {}..={}",
                feature.min_level, feature.max_level
            ));
        }
        let current = finalized_level(self.image, name);
        if level < current && update.upgrade_type == UpgradeType::Upgrade {
            return refuse(format!(
                "{name} would go down from {current} to {level}: ask for a downgrade"
            ));
        }
        if level > current && update.upgrade_type != UpgradeType::Upgrade {
            return refuse(format!(
                "{name} would go up from {current} to {level}: ask for an upgrade"
            ));
        }
        if let Some(broker) = self
            .image
            .brokers()
            .values()
            .find(|broker| !broker_supports(broker, name, level))
        {
            return refuse(format!(
                "broker {} does not support {name} at level {level}",
                broker.broker_id
            ));
        }
        Ok(level != current)
    }

    /// Refuses a registration listing `features` when it cannot run a
    /// feature at a level UpdateFeatures finalized. A level that is only
    /// implicit (a default) does not refuse it: that level follows the
    /// registrations and drops once this one is in
    /// ([`super::super::features::implicit_level`]).
    pub(super) fn check_registration_features(
        &self,
        broker_id: BrokerId,
        features: &[SupportedFeature],
    ) -> Result<(), MetadataError> {
        for (name, &level) in self.image.finalized_features() {
            if !supports(features, name, level) {
                return Err(MetadataError::UnsupportedFeatureLevel {
                    broker_id,
                    feature: name.to_owned(),
                    level,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{registration, Cluster};
    use super::*;
    use crate::metadata::features::GROUP_VERSION;
    use engine::ErrorCode;

    fn update(name: &str, level: i16, upgrade_type: UpgradeType) -> FeatureUpdate {
        FeatureUpdate {
            name: name.to_owned(),
            level,
            upgrade_type,
        }
    }

    fn refused(cluster: &Cluster, updates: &[FeatureUpdate]) -> String {
        match cluster.controller().update_features(updates, false) {
            Err(error @ MetadataError::InvalidFeatureUpdate { .. }) => {
                assert_eq!(error.error_code(), ErrorCode::InvalidUpdateVersion);
                error.to_string()
            }
            other => panic!("{updates:?} not refused: {other:?}"),
        }
    }

    #[test]
    fn a_level_moves_only_as_asked_and_within_what_every_broker_supports() {
        let mut cluster = Cluster::new();
        cluster.start_broker(1, None, 0);
        cluster.start_broker(2, None, 0);
        let off = [update(GROUP_VERSION, 0, UpgradeType::SafeDowngrade)];
        // Validate-only changes nothing; an upgrade type cannot go down.
        assert_eq!(cluster.controller().update_features(&off, true), Ok(vec![]));
        let message = refused(&cluster, &[update(GROUP_VERSION, 0, UpgradeType::Upgrade)]);
        assert!(message.contains("ask for a downgrade"), "{message}");
        let records = cluster.controller().update_features(&off, false).unwrap();
        cluster.commit(&records);
        assert_eq!(finalized_level(&cluster.image, GROUP_VERSION), 0);
        // Back up; then the same level again is no record.
        let on = [update(GROUP_VERSION, 1, UpgradeType::Upgrade)];
        let records = cluster.controller().update_features(&on, false).unwrap();
        cluster.commit(&records);
        assert_eq!(finalized_level(&cluster.image, GROUP_VERSION), 1);
        assert_eq!(cluster.controller().update_features(&on, false), Ok(vec![]));
        // Outside the range, unknown, or a level ELR cannot leave.
        let message = refused(&cluster, &[update(GROUP_VERSION, 2, UpgradeType::Upgrade)]);
        assert!(message.contains("outside"), "{message}");
        refused(
            &cluster,
            &[update("no.such.feature", 1, UpgradeType::Upgrade)],
        );
        let elr = "eligible.leader.replicas.version";
        refused(&cluster, &[update(elr, 0, UpgradeType::UnsafeDowngrade)]);
        // All or none: one bad update refuses the good one beside it.
        refused(
            &cluster,
            &[
                off[0].clone(),
                update("transaction.version", 3, UpgradeType::Upgrade),
            ],
        );
        assert_eq!(finalized_level(&cluster.image, GROUP_VERSION), 1);
    }

    #[test]
    fn an_older_broker_holds_a_level_back_and_a_broker_that_cannot_run_it_is_refused() {
        let mut cluster = Cluster::new();
        cluster.start_broker(1, None, 0);
        // A broker from before feature levels runs group.version 1 only.
        let old = registration(2, None, Vec::new());
        let outcome = Controller::new(&cluster.image, &cluster.config)
            .register_broker(&mut cluster.heartbeats, &old, 0)
            .unwrap();
        cluster.commit(&outcome.records);
        let off = [update(GROUP_VERSION, 0, UpgradeType::SafeDowngrade)];
        let message = refused(&cluster, &off);
        assert!(message.contains("broker 2 does not support"), "{message}");
        // Gone, it no longer holds the change back.
        let gone = Controller::new(&cluster.image, &cluster.config)
            .unregister_broker(&mut cluster.heartbeats, 2)
            .unwrap();
        cluster.commit(&gone);
        let records = cluster.controller().update_features(&off, false).unwrap();
        cluster.commit(&records);
        // Now it cannot come back: it would run the consumer protocol the
        // cluster turned off.
        let again = Controller::new(&cluster.image, &cluster.config).register_broker(
            &mut cluster.heartbeats,
            &old,
            0,
        );
        match again {
            Err(error @ MetadataError::UnsupportedFeatureLevel { .. }) => {
                assert_eq!(error.error_code(), ErrorCode::UnsupportedVersion);
            }
            other => panic!("{other:?}"),
        }
        // A current binary registers.
        let current = registration(
            3,
            None,
            crate::metadata::features::supported_by_this_binary(),
        );
        assert!(Controller::new(&cluster.image, &cluster.config)
            .register_broker(&mut cluster.heartbeats, &current, 0)
            .is_ok());
    }
    #[test]
    fn a_feature_new_in_this_binary_comes_on_only_once_every_broker_has_it() {
        use crate::metadata::features::{
            supported_by_this_binary, METADATA_VERSION, SHARE_VERSION,
        };
        let mut cluster = Cluster::new();
        // The previous release: no share.version, metadata.version 1 only.
        let previous: Vec<SupportedFeature> = supported_by_this_binary()
            .into_iter()
            .filter(|feature| feature.name != SHARE_VERSION)
            .map(|mut feature| {
                if feature.name == METADATA_VERSION {
                    feature.max_level = 1;
                }
                feature
            })
            .collect();
        let group_config = |cluster: &Cluster| {
            cluster.controller().alter_group_config(
                "g",
                "share.auto.offset.reset",
                Some("earliest"),
            )
        };
        let register = |cluster: &mut Cluster, id: i32, features: Vec<SupportedFeature>| {
            let outcome = Controller::new(&cluster.image, &cluster.config)
                .register_broker(
                    &mut cluster.heartbeats,
                    &registration(id, None, features),
                    0,
                )
                .expect("registers");
            cluster.commit(&outcome.records);
        };
        for id in 1..=3 {
            register(&mut cluster, id, previous.clone());
        }
        assert_eq!(finalized_level(&cluster.image, SHARE_VERSION), 0);
        // No record the previous release cannot read.
        match group_config(&cluster) {
            Err(error @ MetadataError::FeatureLevelTooLow { .. }) => {
                assert_eq!(error.error_code(), ErrorCode::UnsupportedVersion);
            }
            other => panic!("{other:?}"),
        }
        // Rolled one by one: off until the last has the new binary.
        register(&mut cluster, 1, supported_by_this_binary());
        register(&mut cluster, 2, supported_by_this_binary());
        assert_eq!(finalized_level(&cluster.image, SHARE_VERSION), 0);
        assert_eq!(finalized_level(&cluster.image, GROUP_VERSION), 1);
        register(&mut cluster, 3, supported_by_this_binary());
        assert_eq!(finalized_level(&cluster.image, SHARE_VERSION), 1);
        assert_eq!(finalized_level(&cluster.image, METADATA_VERSION), 2);
        assert_eq!(group_config(&cluster).map(|records| records.len()), Ok(1));
        // Rolled back: the old binary registers, and the feature goes off.
        register(&mut cluster, 2, previous);
        assert_eq!(finalized_level(&cluster.image, SHARE_VERSION), 0);
    }
}

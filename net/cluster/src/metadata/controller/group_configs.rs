//! Group configs (IncrementalAlterConfigs on a GROUP resource, as Kafka
//! 4.x has them for consumer and share groups): the records that set or
//! remove one config of a group. The broker layer checks the keys and
//! values before it asks. They need `metadata.version` 2: a binary of
//! level 1 could not read their records.

use super::client_metrics::NamedConfigChange;
use super::Controller;
use crate::metadata::error::MetadataError;
use crate::metadata::features::group_configs_allowed;
use crate::metadata::record::MetadataRecord;

impl Controller<'_> {
    /// Sets (`Some`) or removes (`None`) config `key` of group `group`.
    /// Removing a config the group does not have is no change.
    pub fn alter_group_config(
        &self,
        group: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        group_configs_allowed(self.image)?;
        let had = (self.image.group_configs().get(group)).is_some_and(|c| c.contains_key(key));
        let change = NamedConfigChange {
            name: group,
            key,
            value,
            had,
            nameless: "a group resource needs a group id",
        };
        self.named_config_change(change, |group, key, value| {
            MetadataRecord::GroupConfigChange { group, key, value }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::controller::ControllerConfig;
    use crate::metadata::MetadataImage;

    #[test]
    fn group_configs_are_set_and_removed_and_survive_a_snapshot() {
        let mut image = MetadataImage::new();
        let config = ControllerConfig::default();
        let key = "share.auto.offset.reset";
        let records = Controller::new(&image, &config)
            .alter_group_config("g", key, Some("earliest"))
            .unwrap();
        for record in &records {
            image.apply(0, record).unwrap();
        }
        assert_eq!(image.group_configs()["g"][key], "earliest");
        let mut restored = MetadataImage::new();
        for (offset, record) in image.snapshot_records().iter().enumerate() {
            restored.apply(offset as i64, record).unwrap();
        }
        assert_eq!(restored.group_configs(), image.group_configs());
        let records = Controller::new(&image, &config)
            .alter_group_config("g", key, None)
            .unwrap();
        for record in &records {
            image.apply(1, record).unwrap();
        }
        assert!(image.group_configs().is_empty());
        let nothing = Controller::new(&image, &config).alter_group_config("g", key, None);
        assert_eq!(nothing.unwrap(), Vec::new());
        assert!(Controller::new(&image, &config)
            .alter_group_config("", key, Some("latest"))
            .is_err());
    }
}

//! Group configs (IncrementalAlterConfigs on a GROUP resource, as Kafka
//! 4.x has them for consumer and share groups): the records that set or
//! remove one config of a group. The broker layer checks the keys and
//! values before it asks.

use super::Controller;
use crate::metadata::error::MetadataError;
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
        let refuse = |reason: &str| MetadataError::InvalidConfig {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            reason: reason.to_owned(),
        };
        if group.is_empty() {
            return Err(refuse("a group resource needs a group id"));
        }
        if key.is_empty() {
            return Err(refuse("empty config name"));
        }
        let had = (self.image.group_configs().get(group)).is_some_and(|c| c.contains_key(key));
        let mut proposal = self.proposal();
        if value.is_some() || had {
            proposal.push(MetadataRecord::GroupConfigChange {
                group: group.to_owned(),
                key: key.to_owned(),
                value: value.map(str::to_owned),
            });
        }
        Ok(proposal.into_records())
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

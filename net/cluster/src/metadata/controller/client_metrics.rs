//! Client-metrics subscriptions (KIP-714, IncrementalAlterConfigs on a
//! CLIENT_METRICS resource): the records that set or remove one config of a
//! subscription. The broker layer checks the keys and values (the regexes
//! of `match`, the range of `interval.ms`) before it asks; the controller
//! keeps to what the image checks, so that a bad request is an answer, not
//! a refused proposal.

use super::Controller;
use crate::metadata::error::MetadataError;
use crate::metadata::record::MetadataRecord;

impl Controller<'_> {
    /// Sets (`Some`) or removes (`None`) config `key` of subscription
    /// `name`. Removing a config the subscription does not have is no
    /// change.
    pub fn alter_client_metrics_config(
        &self,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let had = (self.image.client_metrics_configs().get(name))
            .is_some_and(|configs| configs.contains_key(key));
        let change = NamedConfigChange {
            name,
            key,
            value,
            had,
            nameless: "a client-metrics resource needs a name",
        };
        self.named_config_change(change, |name, key, value| {
            MetadataRecord::ClientMetricsConfigChange { name, key, value }
        })
    }

    /// The record of one config change of a named resource (a
    /// client-metrics subscription, a group), made by `record`.
    pub(super) fn named_config_change(
        &self,
        change: NamedConfigChange<'_>,
        record: impl FnOnce(String, String, Option<String>) -> MetadataRecord,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let NamedConfigChange {
            name,
            key,
            value,
            had,
            nameless,
        } = change;
        let refuse = |reason: &str| MetadataError::InvalidConfig {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            reason: reason.to_owned(),
        };
        if name.is_empty() {
            return Err(refuse(nameless));
        }
        if key.is_empty() {
            return Err(refuse("empty config name"));
        }
        let mut proposal = self.proposal();
        if value.is_some() || had {
            proposal.push(record(
                name.to_owned(),
                key.to_owned(),
                value.map(str::to_owned),
            ));
        }
        Ok(proposal.into_records())
    }
}

/// One config change of a named resource.
pub(super) struct NamedConfigChange<'a> {
    /// The resource's name.
    pub name: &'a str,
    /// The config.
    pub key: &'a str,
    /// Its new value (`None`: removed).
    pub value: Option<&'a str>,
    /// Whether the resource has the config now.
    pub had: bool,
    /// Why an empty name is refused.
    pub nameless: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::controller::ControllerConfig;
    use crate::metadata::MetadataImage;

    #[test]
    fn subscriptions_are_set_and_removed_and_survive_a_snapshot() {
        let mut image = MetadataImage::new();
        let config = ControllerConfig::default();
        let controller = Controller::new(&image, &config);
        let records = controller
            .alter_client_metrics_config("producers", "interval.ms", Some("1000"))
            .unwrap();
        image.apply(0, &records[0]).unwrap();
        assert_eq!(
            image.client_metrics_configs()["producers"]["interval.ms"],
            "1000"
        );
        let controller = Controller::new(&image, &config);
        assert!(controller
            .alter_client_metrics_config("producers", "metrics", None)
            .unwrap()
            .is_empty());
        assert!(controller
            .alter_client_metrics_config("", "metrics", Some("a"))
            .is_err());
        // A snapshot carries the subscription over.
        let mut restored = MetadataImage::new();
        for (offset, record) in image.snapshot_records().iter().enumerate() {
            restored.apply(offset as i64, record).unwrap();
        }
        assert_eq!(
            restored.client_metrics_configs(),
            image.client_metrics_configs()
        );
        let records = Controller::new(&image, &config)
            .alter_client_metrics_config("producers", "interval.ms", None)
            .unwrap();
        image.apply(1, &records[0]).unwrap();
        assert!(image.client_metrics_configs().is_empty());
    }
}

//! Client quotas (AlterClientQuotas): the records that set or remove an
//! entity's quotas, checked as the image checks them so that a bad request
//! is an answer, not a refused proposal.

use super::Controller;
use crate::metadata::error::MetadataError;
use crate::metadata::image::{check_quota_entity, QuotaEntity};
use crate::metadata::record::MetadataRecord;

impl Controller<'_> {
    /// Sets (`Some`) or removes (`None`) each of `changes` on `entity`.
    /// Removing a quota the entity does not have is no change.
    pub fn alter_client_quotas(
        &self,
        entity: &QuotaEntity,
        changes: &[(String, Option<f64>)],
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let refuse = |key: &str, value: Option<f64>, reason: String| MetadataError::InvalidConfig {
            key: key.to_owned(),
            value: value.map(|v| v.to_string()),
            reason,
        };
        check_quota_entity(entity).map_err(|reason| refuse("entity", None, reason))?;
        let current = self.image.client_quotas().get(entity);
        let mut proposal = self.proposal();
        for (key, value) in changes {
            if key.is_empty() {
                return Err(refuse(key, *value, String::from("empty quota name")));
            }
            if let Some(v) = value {
                if !(v.is_finite() && *v > 0.0) {
                    return Err(refuse(
                        key,
                        *value,
                        String::from("must be a positive number"),
                    ));
                }
            }
            let had = current.is_some_and(|quotas| quotas.contains_key(key));
            if value.is_none() && !had {
                continue;
            }
            proposal.push(MetadataRecord::ClientQuota {
                entity: entity.clone(),
                key: key.clone(),
                value: value.map(|v| v.to_string()),
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

    fn user(name: Option<&str>) -> QuotaEntity {
        vec![(String::from("user"), name.map(str::to_owned))]
    }

    #[test]
    fn quotas_are_set_changed_and_removed() {
        let mut image = MetadataImage::new();
        let config = ControllerConfig::default();
        let records = Controller::new(&image, &config)
            .alter_client_quotas(
                &user(Some("alice")),
                &[(String::from("producer_byte_rate"), Some(1024.0))],
            )
            .unwrap();
        for (offset, record) in records.iter().enumerate() {
            image.apply(offset as i64, record).unwrap();
        }
        assert_eq!(
            image.client_quotas()[&user(Some("alice"))]["producer_byte_rate"],
            "1024"
        );
        let controller = Controller::new(&image, &config);
        // Removing an absent quota proposes nothing.
        assert!(controller
            .alter_client_quotas(&user(None), &[(String::from("producer_byte_rate"), None)])
            .unwrap()
            .is_empty());
        assert!(controller
            .alter_client_quotas(&user(Some("alice")), &[(String::from("x"), Some(-1.0))])
            .is_err());
        let bad = vec![(String::from("group"), None)];
        assert!(controller.alter_client_quotas(&bad, &[]).is_err());
        let twice = vec![(String::from("user"), None), (String::from("user"), None)];
        assert!(controller.alter_client_quotas(&twice, &[]).is_err());
        let records = controller
            .alter_client_quotas(
                &user(Some("alice")),
                &[(String::from("producer_byte_rate"), None)],
            )
            .unwrap();
        image.apply(1, &records[0]).unwrap();
        assert!(image.client_quotas().is_empty());
    }
}

//! CreateAcls and DeleteAcls: the records that add and remove ACLs
//! (Kafka's AclControlManager). The asking broker has checked each ACL
//! against Kafka's rules and drawn its id; the controller drops a creation
//! whose ACL exists already (Kafka answers it with success and writes
//! nothing) and a removal of an ACL that is gone (a concurrent delete).

use super::Controller;
use crate::metadata::error::MetadataError;
use crate::metadata::record::{AclRecord, MetadataRecord};

impl Controller<'_> {
    /// The records that create `acls` (those that do not exist yet).
    pub fn create_acls(&self, acls: &[AclRecord]) -> Result<Vec<MetadataRecord>, MetadataError> {
        let mut proposal = self.proposal();
        for acl in acls {
            let exists = proposal
                .image()
                .acls()
                .values()
                .any(|old| old.same_binding(acl));
            if exists {
                continue;
            }
            if acl.id == [0; 16] || proposal.image().acls().contains_key(&acl.id) {
                return Err(MetadataError::InvalidRequest {
                    reason: format!("ACL id {:?} is zero or taken", acl.id),
                });
            }
            if acl.resource_name.is_empty() || acl.principal.is_empty() || acl.host.is_empty() {
                return Err(MetadataError::InvalidRequest {
                    reason: String::from("ACL with an empty resource name, principal or host"),
                });
            }
            proposal.push(MetadataRecord::AccessControlEntry(acl.clone()));
        }
        Ok(proposal.into_records())
    }

    /// The records that delete the ACLs `ids` (those that still exist).
    pub fn delete_acls(&self, ids: &[[u8; 16]]) -> Vec<MetadataRecord> {
        let mut proposal = self.proposal();
        for id in ids {
            if proposal.image().acls().contains_key(id) {
                proposal.push(MetadataRecord::RemoveAccessControlEntry { id: *id });
            }
        }
        proposal.into_records()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{ControllerConfig, MetadataImage};

    fn acl(id: u8, name: &str) -> AclRecord {
        AclRecord {
            id: [id; 16],
            resource_type: 2,
            resource_name: name.into(),
            pattern_type: 3,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
        }
    }

    #[test]
    fn acls_are_created_once_and_deleted() {
        let config = ControllerConfig::default();
        let mut image = MetadataImage::new();
        let apply = |image: &mut MetadataImage, records: Vec<MetadataRecord>| {
            for record in records {
                let offset = image.last_applied_offset() + 1;
                image.apply(offset, &record).unwrap();
            }
        };
        let records = Controller::new(&image, &config)
            .create_acls(&[acl(1, "a"), acl(2, "b"), acl(3, "a")])
            .unwrap();
        // The third states the first's ACL again: dropped.
        assert_eq!(records.len(), 2);
        apply(&mut image, records);
        assert_eq!(image.acls().len(), 2);
        // Again with new ids: nothing to write.
        let records = Controller::new(&image, &config)
            .create_acls(&[acl(4, "a")])
            .unwrap();
        assert!(records.is_empty());
        // A taken id with another binding, or an empty name, is refused.
        assert!(Controller::new(&image, &config)
            .create_acls(&[acl(1, "c")])
            .is_err());
        assert!(Controller::new(&image, &config)
            .create_acls(&[acl(5, "")])
            .is_err());
        let records = Controller::new(&image, &config).delete_acls(&[[1; 16], [9; 16]]);
        assert_eq!(
            records,
            vec![MetadataRecord::RemoveAccessControlEntry { id: [1; 16] }]
        );
        apply(&mut image, records);
        assert_eq!(image.acls().keys().collect::<Vec<_>>(), vec![&[2; 16]]);
        // A removal of an unknown id is refused by the image itself.
        let mut copy = image.clone();
        assert!(copy
            .apply(
                100,
                &MetadataRecord::RemoveAccessControlEntry { id: [9; 16] }
            )
            .is_err());
        assert_eq!(copy, image);
    }
}

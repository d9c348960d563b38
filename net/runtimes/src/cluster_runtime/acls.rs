//! Every shard's [`Authorizer`] over the ACLs of its metadata image, and
//! [`authz`], the per-request checker handlers ask.
//!
//! The authorizer is rebuilt when the shard's image changes (a new
//! publication, see [`super::view`]): ACLs created or deleted anywhere in
//! the cluster take effect here once the metadata reaches this broker, with
//! no restart; after a restart they come back with the metadata log.

use crate::Shard;
use cluster::metadata::{AclRecord, MetadataImage};
use security::acl::{AclBinding, Authorizer, Authz};
use security::Session;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// The authorizer built from the image it was built from.
#[derive(Debug, Default)]
pub struct AclView {
    built: RefCell<Option<(Arc<MetadataImage>, Rc<Authorizer>)>>,
}

/// The broker's model of a stored ACL; `None` for a record whose codes this
/// build does not know (it then grants and denies nothing).
pub fn binding_of(record: &AclRecord) -> Option<AclBinding> {
    AclBinding::from_codes(
        record.resource_type,
        &record.resource_name,
        record.pattern_type,
        &record.principal,
        &record.host,
        record.operation,
        record.permission_type,
    )
    .ok()
}

impl AclView {
    /// The authorizer of `shard`'s current image; `None` when
    /// `authorizer.class.name` is unset.
    pub fn authorizer(&self, shard: &Shard) -> Option<Rc<Authorizer>> {
        let config = &shard.config.authorizer;
        if !config.enabled {
            return None;
        }
        let image = shard.runtime().view.image();
        if let Some((built_from, authorizer)) = &*self.built.borrow() {
            if Arc::ptr_eq(built_from, &image) {
                return Some(authorizer.clone());
            }
        }
        let authorizer = Rc::new(Authorizer::new(
            config.super_users.iter().cloned(),
            config.allow_everyone_if_no_acl_found,
            image.acls().values().filter_map(binding_of),
        ));
        *self.built.borrow_mut() = Some((image, authorizer.clone()));
        Some(authorizer)
    }
}

/// The authorization checks of a request made in `session`.
pub fn authz(shard: &Shard, session: &Session) -> Authz {
    Authz::new(shard.runtime().acls.authorizer(shard), session)
}

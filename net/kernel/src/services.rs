//! The shard's service table: one value per type, built on first use.
//!
//! Every per-shard runtime (the group coordinator, the transaction
//! coordinator, the topic controller's state, the producer-id pool; later
//! replication and cluster metadata) lives here, found by its type through
//! [`crate::shard::Shard::service`]. This file knows no service and no shard.
//! **Shard-local**: `Rc`, never crosses cores.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Values by type.
#[derive(Default)]
pub struct Services {
    by_type: RefCell<HashMap<TypeId, Rc<dyn Any>>>,
}

impl Services {
    /// The value of type `T`, built by `build` if there is none yet. `build`
    /// runs outside the table's borrow, so it may read other values.
    pub fn get_or_build<T: 'static>(&self, build: impl FnOnce() -> T) -> Rc<T> {
        if let Some(found) = self.get::<T>() {
            return found;
        }
        let built = Rc::new(build());
        // A `build` that built `T` itself through another path loses to it,
        // so every caller sees one instance.
        if let Some(found) = self.get::<T>() {
            return found;
        }
        self.by_type
            .borrow_mut()
            .insert(TypeId::of::<T>(), built.clone());
        built
    }

    /// The value of type `T`, if built.
    pub fn get<T: 'static>(&self) -> Option<Rc<T>> {
        let any = self.by_type.borrow().get(&TypeId::of::<T>())?.clone();
        any.downcast::<T>().ok()
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Services({} built)", self.by_type.borrow().len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn one_instance_per_type_built_once() {
        let services = Services::default();
        let builds = Cell::new(0);
        let a = services.get_or_build(|| {
            builds.set(builds.get() + 1);
            Cell::new(5u32)
        });
        a.set(6);
        let b = services.get_or_build(|| {
            builds.set(builds.get() + 1);
            Cell::new(0u32)
        });
        assert_eq!(b.get(), 6);
        assert_eq!(builds.get(), 1);
        assert!(services.get::<String>().is_none());
        let s = services.get_or_build(|| String::from("x"));
        assert_eq!(*s, "x");
    }
}

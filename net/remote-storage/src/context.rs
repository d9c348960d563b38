//! What the operations on the remote thread share: the store, the chunk
//! cache, the counters and the limits, and the one helper that puts a time
//! limit on every call to the store.

use crate::cache::ChunkCache;
use crate::error::RemoteError;
use crate::stats::Stats;
use object_store::path::Path;
use object_store::ObjectStore;
use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// The remote thread's state. Not `Send`: it never leaves the thread, and
/// the cache's `RefCell` is never borrowed across an `.await`.
pub(crate) struct Context {
    pub store: Arc<dyn ObjectStore>,
    pub cache: RefCell<ChunkCache>,
    pub stats: Arc<Stats>,
    pub chunk_bytes: u64,
    pub part_bytes: u64,
    pub op_timeout: Duration,
    /// Slots of file uploads (see `worker`).
    pub upload_slots: Semaphore,
    /// Slots of the other operations.
    pub request_slots: Semaphore,
}

impl Context {
    /// Runs one call to the store within the operation timeout: a store
    /// that hangs fails with `Unavailable` instead of holding the caller.
    pub async fn bounded<T>(
        &self,
        op: &'static str,
        key: &str,
        call: impl Future<Output = object_store::Result<T>>,
    ) -> Result<T, RemoteError> {
        match tokio::time::timeout(self.op_timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(RemoteError::from_store(op, key, error)),
            Err(_elapsed) => Err(self.timed_out(op)),
        }
    }

    /// The error of an operation that ran past the timeout.
    pub fn timed_out(&self, op: &'static str) -> RemoteError {
        let timeout_ms = u64::try_from(self.op_timeout.as_millis()).unwrap_or(u64::MAX);
        RemoteError::timed_out(op, timeout_ms)
    }

    /// Forgets the cached chunks of `key` (it was written or deleted).
    pub fn invalidate_key(&self, key: &str) {
        let mut cache = self.cache.borrow_mut();
        cache.invalidate_key(key);
        self.stats.set_cache_bytes(cache.used_bytes());
    }

    /// Forgets the cached chunks of every key under `prefix`.
    pub fn invalidate_prefix(&self, prefix: &str) {
        let mut cache = self.cache.borrow_mut();
        cache.invalidate_prefix(prefix);
        self.stats.set_cache_bytes(cache.used_bytes());
    }
}

/// The object path of a caller's key: `/`-separated segments, none empty,
/// `.` or `..`.
pub(crate) fn object_path(key: &str) -> Result<Path, RemoteError> {
    let invalid = |reason: String| RemoteError::InvalidKey {
        key: key.to_string(),
        reason,
    };
    let path = Path::parse(key).map_err(|error| invalid(error.to_string()))?;
    if path.as_ref().is_empty() {
        return Err(invalid("empty key".to_string()));
    }
    Ok(path)
}

/// The path of a listing prefix; `None` (everything) for the empty prefix.
pub(crate) fn prefix_path(prefix: &str) -> Result<Option<Path>, RemoteError> {
    if prefix.trim_matches('/').is_empty() {
        return Ok(None);
    }
    object_path(prefix).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        assert_eq!(
            object_path("t/0/00000000000000000000.log")
                .unwrap()
                .as_ref(),
            "t/0/00000000000000000000.log"
        );
        for bad in ["", "a//b", "a/../b", "./a"] {
            assert!(
                matches!(object_path(bad), Err(RemoteError::InvalidKey { .. })),
                "{bad:?} was accepted"
            );
        }
        assert_eq!(prefix_path("").unwrap(), None);
        assert_eq!(prefix_path("t/0/").unwrap(), Some(Path::from("t/0")));
    }
}

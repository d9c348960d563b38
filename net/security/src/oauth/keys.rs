//! The identity provider's public keys (a JWKS, RFC 7517), shared by every
//! shard. The broker's refresher (a thread of its own: fetching is I/O)
//! installs each set it loads; a token signed by a key the set lacks asks
//! it to fetch again at once, so a provider's key rotation is picked up
//! without waiting for the refresh period.

use super::TokenError;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::time::Duration;

/// The current key set, the refresher's wake-up, and its counts for
/// `/metrics`.
pub struct KeySet {
    keys: RwLock<Arc<JwkSet>>,
    loaded: AtomicBool,
    refresh_wanted: Mutex<bool>,
    wake: Condvar,
    fetches_succeeded: AtomicU64,
    fetches_failed: AtomicU64,
    loaded_at_ms: AtomicI64,
}

/// What the refresher has done, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeySetStats {
    /// Fetches that installed a set.
    pub fetches_succeeded: u64,
    /// Fetches that failed (the last set was kept).
    pub fetches_failed: u64,
    /// Keys in the current set.
    pub keys: usize,
    /// When the current set was fetched, wall-clock ms (0: never).
    pub loaded_at_ms: i64,
}

impl Default for KeySet {
    fn default() -> Self {
        KeySet {
            keys: RwLock::new(Arc::new(JwkSet { keys: Vec::new() })),
            loaded: AtomicBool::new(false),
            refresh_wanted: Mutex::new(false),
            wake: Condvar::new(),
            fetches_succeeded: AtomicU64::new(0),
            fetches_failed: AtomicU64::new(0),
            loaded_at_ms: AtomicI64::new(0),
        }
    }
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet")
            .field("keys", &self.current().keys.len())
            .field("loaded", &self.is_loaded())
            .finish()
    }
}

impl KeySet {
    /// Parses a JWKS document; a set with no key is refused (it would
    /// refuse every token).
    pub fn parse(document: &[u8]) -> Result<JwkSet, String> {
        let set: JwkSet = serde_json::from_slice(document)
            .map_err(|e| format!("not a JWKS (a JSON object with \"keys\"): {e}"))?;
        if set.keys.is_empty() {
            return Err(String::from("the JWKS holds no key"));
        }
        Ok(set)
    }

    /// Installs a set fetched at `now_ms` (wall clock).
    pub fn install(&self, set: JwkSet, now_ms: i64) {
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(set);
        self.loaded.store(true, Ordering::Release);
        self.fetches_succeeded.fetch_add(1, Ordering::Relaxed);
        self.loaded_at_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Counts a fetch that failed (the current set stays).
    pub fn record_failed_fetch(&self) {
        self.fetches_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// The refresher's counts and the current set's size and age.
    pub fn stats(&self) -> KeySetStats {
        KeySetStats {
            fetches_succeeded: self.fetches_succeeded.load(Ordering::Relaxed),
            fetches_failed: self.fetches_failed.load(Ordering::Relaxed),
            keys: self.current().keys.len(),
            loaded_at_ms: self.loaded_at_ms.load(Ordering::Relaxed),
        }
    }

    /// Whether a set was ever loaded.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    fn current(&self) -> Arc<JwkSet> {
        Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The key a token names by `kid`; a token without one may use the
    /// set's only key. A key the set lacks asks the refresher to fetch.
    pub fn find(&self, kid: Option<&str>) -> Result<Jwk, TokenError> {
        let set = self.current();
        let found = match kid {
            Some(kid) => set.find(kid).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        found.ok_or_else(|| {
            self.request_refresh();
            TokenError::Signature(match kid {
                Some(kid) => format!("no key {kid:?} in the provider's JWKS"),
                None => String::from("the token names no key (kid) and the JWKS has several"),
            })
        })
    }

    /// Wakes the refresher to fetch now.
    pub fn request_refresh(&self) {
        *self
            .refresh_wanted
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.notify_one();
    }

    /// The refresher's wait: until a refresh is asked for or `period`
    /// passes; true when asked for.
    pub fn wait_for_refresh(&self, period: Duration) -> bool {
        let wanted = self
            .refresh_wanted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (mut wanted, _) = self
            .wake
            .wait_timeout_while(wanted, period, |wanted| !*wanted)
            .unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *wanted, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"a","use":"sig",
        "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
        "y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;

    #[test]
    fn keys_are_found_by_kid_and_a_miss_wakes_the_refresher() {
        let keys = KeySet::default();
        assert!(!keys.is_loaded());
        keys.install(KeySet::parse(SET.as_bytes()).unwrap(), 7);
        keys.record_failed_fetch();
        assert!(keys.is_loaded());
        let stats = keys.stats();
        assert_eq!((stats.fetches_succeeded, stats.fetches_failed), (1, 1));
        assert_eq!((stats.keys, stats.loaded_at_ms), (1, 7));
        assert!(keys.find(Some("a")).is_ok());
        assert!(keys.find(None).is_ok());
        assert!(!keys.wait_for_refresh(Duration::from_millis(1)));
        assert!(keys.find(Some("b")).is_err());
        assert!(keys.wait_for_refresh(Duration::from_secs(60)));
        assert!(KeySet::parse(br#"{"keys":[]}"#).is_err());
        assert!(KeySet::parse(b"[]").is_err());
    }
}

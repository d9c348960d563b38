//! The identity provider's keys for OAUTHBEARER's signed tokens
//! (`sasl.oauthbearer.jwks.endpoint.url`): fetched once before the
//! listeners open (a failure stops the start, as on Kafka), then by a
//! thread of its own every `sasl.oauthbearer.jwks.endpoint.refresh.ms`, and
//! at once when a token names a key the set lacks (a provider rotated its
//! keys), at most once a second. A failed refresh keeps the last good set
//! and retries after `retry.backoff.ms`, doubling up to
//! `retry.backoff.max.ms`.
//!
//! Fetching is blocking I/O (HTTP or a file), never on a shard.

use kernel::config::oauth::JwksSource;
use security::oauth::keys::KeySet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The fewest ms between two fetches a missing key asked for.
const ASKED_REFRESH_GAP: Duration = Duration::from_secs(1);
/// How long one HTTP fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the JWKS is read from.
enum Fetcher {
    File(PathBuf),
    Http(reqwest::blocking::Client, String),
}

impl Fetcher {
    fn new(url: &str) -> Result<Fetcher, String> {
        if let Some(path) = url.strip_prefix("file:") {
            // file:///etc/x, file:/etc/x.
            let path = path.strip_prefix("//").unwrap_or(path);
            return Ok(Fetcher::File(PathBuf::from(path)));
        }
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::blocking::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot make an HTTP client for the JWKS: {e}"))?;
        Ok(Fetcher::Http(client, url.to_string()))
    }

    fn fetch(&self) -> Result<jsonwebtoken::jwk::JwkSet, String> {
        let document = match self {
            Fetcher::File(path) => {
                std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?
            }
            Fetcher::Http(client, url) => {
                let response = client
                    .get(url)
                    .send()
                    .and_then(|r| r.error_for_status())
                    .map_err(|e| format!("GET {url}: {e}"))?;
                response
                    .bytes()
                    .map_err(|e| format!("GET {url}: {e}"))?
                    .to_vec()
            }
        };
        KeySet::parse(&document)
    }
}

/// Loads the key set once and starts its refresher; `Err` stops the start.
pub(super) fn start(source: &JwksSource, keys: Arc<KeySet>) -> Result<(), String> {
    let fetcher = Fetcher::new(&source.url)?;
    let set = fetcher
        .fetch()
        .map_err(|e| format!("sasl.oauthbearer.jwks.endpoint.url: {e}"))?;
    tracing::info!(url = %source.url, keys = set.keys.len(), "OAUTHBEARER: identity provider keys loaded");
    keys.install(set, wall_clock_ms());
    let source = source.clone();
    std::thread::Builder::new()
        .name(String::from("rill-jwks"))
        .spawn(move || refresh(&fetcher, &source, &keys))
        .map(drop)
        .map_err(|e| format!("cannot start the JWKS refresher: {e}"))
}

/// The refresher's loop; it lives as long as the process.
fn refresh(fetcher: &Fetcher, source: &JwksSource, keys: &KeySet) {
    let period = Duration::from_millis(source.refresh_ms);
    let first_backoff = Duration::from_millis(source.retry_backoff_ms);
    let max_backoff = Duration::from_millis(source.retry_backoff_max_ms);
    let mut wait = period;
    let mut backoff = first_backoff;
    let mut last_fetch = Instant::now();
    loop {
        if keys.wait_for_refresh(wait) {
            std::thread::sleep(ASKED_REFRESH_GAP.saturating_sub(last_fetch.elapsed()));
        }
        last_fetch = Instant::now();
        match fetcher.fetch() {
            Ok(set) => {
                tracing::debug!(
                    keys = set.keys.len(),
                    "OAUTHBEARER: identity provider keys refreshed"
                );
                keys.install(set, wall_clock_ms());
                wait = period;
                backoff = first_backoff;
            }
            Err(e) => {
                keys.record_failed_fetch();
                tracing::warn!(url = %source.url, error = %e, retry_in_ms = backoff.as_millis(), "OAUTHBEARER: cannot refresh the identity provider's keys; keeping the last ones");
                wait = backoff;
                backoff = (backoff * 2).min(max_backoff);
            }
        }
    }
}

/// Now, wall-clock ms since the epoch (when a set was fetched).
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

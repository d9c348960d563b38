//! OAUTHBEARER's identity provider keys on `/metrics`, so an operator can
//! alert when the JWKS stops refreshing: `rill_oauth_jwks_fetches_total`
//! (by result), `rill_oauth_jwks_keys` and `rill_oauth_jwks_age_seconds`
//! (since the set in use was fetched). Samples only when
//! `sasl.oauthbearer.jwks.endpoint.url` is set.

use kernel::config::BrokerConfig;
use kernel::metrics::prometheus_client::collector::Collector;
use kernel::metrics::prometheus_client::encoding::DescriptorEncoder;
use kernel::metrics::registry::{Declared, Family, Value};
use security::oauth::keys::KeySetStats;

static FETCHES: Family = Family::counter(
    "rill_oauth_jwks_fetches_total",
    "Fetches of the OAUTHBEARER identity provider's JWKS \
     (sasl.oauthbearer.jwks.endpoint.url): succeeded, or failed (the last \
     keys are kept).",
    &["result"],
);
static KEYS: Family = Family::gauge(
    "rill_oauth_jwks_keys",
    "Keys in the JWKS signed OAUTHBEARER tokens are checked against.",
    &[],
);
static AGE_SECONDS: Family = Family::gauge(
    "rill_oauth_jwks_age_seconds",
    "Seconds since the JWKS in use was fetched (it grows while refreshes fail).",
    &[],
);

/// The key set's figures at a scrape (`None`: no JWKS configured).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OAuthStats {
    stats: Option<KeySetStats>,
    now_ms: i64,
}

impl OAuthStats {
    /// The figures of `stats` at `now_ms`.
    pub fn new(stats: Option<KeySetStats>, now_ms: i64) -> Self {
        OAuthStats { stats, now_ms }
    }

    /// Reads the broker's key set now.
    pub fn read(config: &BrokerConfig, now_ms: i64) -> Self {
        let oauth = &config.sasl.oauth;
        OAuthStats {
            stats: oauth.jwks.as_ref().map(|_| oauth.keys.0.stats()),
            now_ms,
        }
    }
}

impl Collector for OAuthStats {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(stats) = self.stats else {
            // Declared with no samples: the alert rules name them.
            for family in [&FETCHES, &KEYS, &AGE_SECONDS] {
                family.encode(&mut encoder, [])?;
            }
            return Ok(());
        };
        FETCHES.encode(
            &mut encoder,
            [
                (
                    vec!["succeeded".to_string()],
                    Value::from(stats.fetches_succeeded),
                ),
                (
                    vec!["failed".to_string()],
                    Value::from(stats.fetches_failed),
                ),
            ],
        )?;
        KEYS.encode(&mut encoder, [(Vec::new(), Value::from(stats.keys as u64))])?;
        let age_s = (self.now_ms - stats.loaded_at_ms).max(0) as f64 / 1000.0;
        AGE_SECONDS.encode(&mut encoder, [(Vec::new(), Value::Float(age_s))])
    }
}

impl Declared for OAuthStats {
    fn families(&self) -> Vec<&'static Family> {
        vec![&FETCHES, &KEYS, &AGE_SECONDS]
    }
}

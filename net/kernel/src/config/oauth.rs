//! OAUTHBEARER's server side, by Kafka's names.
//!
//! Which validator a listener uses is Kafka's
//! `listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class`
//! (or un-prefixed, for every listener):
//!
//! - unset, or `...OAuthBearerUnsecuredValidatorCallbackHandler`: unsigned
//!   tokens (Kafka's default, for development only), with the options of
//!   the listener's `OAuthBearerLoginModule` JAAS entry
//!   (`unsecuredValidator*`);
//! - `...OAuthBearerValidatorCallbackHandler`: tokens signed by the keys of
//!   `sasl.oauthbearer.jwks.endpoint.url` (an `https:`, `http:` or `file:`
//!   URL), fetched at start and every `sasl.oauthbearer.jwks.endpoint.refresh.ms`,
//!   and checked with `sasl.oauthbearer.expected.audience`,
//!   `sasl.oauthbearer.expected.issuer`, `sasl.oauthbearer.sub.claim.name`,
//!   `sasl.oauthbearer.scope.claim.name` and
//!   `sasl.oauthbearer.clock.skew.seconds`.
//!
//! A JWKS URL that no listener's validator uses stops the start: the
//! operator meant tokens to be checked, and Kafka would silently take
//! unsigned ones.

use crate::error::ConfigError;
use security::oauth::keys::KeySet;
use security::oauth::signed::SignedOptions;
use security::oauth::unsecured::UnsecuredOptions;
use security::oauth::Validator;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Kafka's validating handler (3.x named it under `.secured`).
const SIGNED_HANDLER: &str = "OAuthBearerValidatorCallbackHandler";
/// Kafka's default, unsecured handler.
const UNSECURED_HANDLER: &str = "OAuthBearerUnsecuredValidatorCallbackHandler";

/// Where the provider's keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksSource {
    /// `sasl.oauthbearer.jwks.endpoint.url`.
    pub url: String,
    /// `sasl.oauthbearer.jwks.endpoint.refresh.ms`.
    pub refresh_ms: u64,
    /// `sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`.
    pub retry_backoff_ms: u64,
    /// `sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms`.
    pub retry_backoff_max_ms: u64,
}

/// The key set every shard reads, filled by the broker's refresher. Equal
/// to another only when it is the same set (configs compare by settings).
#[derive(Clone, Default)]
pub struct SharedKeys(pub Arc<KeySet>);

impl PartialEq for SharedKeys {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SharedKeys {}

impl std::fmt::Debug for SharedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedKeys")
    }
}

/// The OAUTHBEARER part of the SASL config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// Whether a listener's handler validates signed tokens, by upper-case
    /// listener name; `""` for the un-prefixed key.
    pub signed_handler: BTreeMap<String, bool>,
    /// The unsecured validator's options, by upper-case listener name;
    /// `""` for `sasl.jaas.config`.
    pub unsecured: BTreeMap<String, UnsecuredOptions>,
    /// The signed validator's options.
    pub signed: SignedOptions,
    /// The provider's keys, when a URL is set.
    pub jwks: Option<JwksSource>,
    /// The keys loaded from [`OAuthConfig::jwks`].
    pub keys: SharedKeys,
    refresh_ms: u64,
    retry_backoff_ms: u64,
    retry_backoff_max_ms: u64,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        OAuthConfig {
            signed_handler: BTreeMap::new(),
            unsecured: BTreeMap::new(),
            signed: SignedOptions::default(),
            jwks: None,
            keys: SharedKeys::default(),
            refresh_ms: 3_600_000,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 10_000,
        }
    }
}

fn positive_ms(name: &str, value: &str) -> Result<u64, ConfigError> {
    ConfigError::parse_at_least(name, value, 1, "a number of ms, at least 1")
}

fn non_empty(name: &str, value: &str) -> Result<String, ConfigError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ConfigError::invalid(name, value, "must not be empty"));
    }
    Ok(value.to_string())
}

impl OAuthConfig {
    /// Applies one setting; `Ok(false)` when `name` is not an OAUTHBEARER key.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match name {
            "sasl.oauthbearer.jwks.endpoint.url" => self.set_url(name, value)?,
            "sasl.oauthbearer.jwks.endpoint.refresh.ms" => {
                self.refresh_ms = positive_ms(name, value)?;
                self.sync_source();
            }
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms" => {
                self.retry_backoff_ms = positive_ms(name, value)?;
                self.sync_source();
            }
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms" => {
                self.retry_backoff_max_ms = positive_ms(name, value)?;
                self.sync_source();
            }
            "sasl.oauthbearer.expected.audience" => {
                self.signed.expected_audience = value
                    .split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            "sasl.oauthbearer.expected.issuer" => {
                self.signed.expected_issuer =
                    Some(value.trim().to_string()).filter(|i| !i.is_empty())
            }
            "sasl.oauthbearer.sub.claim.name" => {
                self.signed.principal_claim = non_empty(name, value)?
            }
            "sasl.oauthbearer.scope.claim.name" => {
                self.signed.scope_claim = non_empty(name, value)?
            }
            "sasl.oauthbearer.clock.skew.seconds" => {
                self.signed.clock_skew_s =
                    ConfigError::parse_at_least(name, value, 0, "seconds, 0 or more")?
            }
            "sasl.server.callback.handler.class" => self.set_handler("", name, value)?,
            _ => return self.apply_listener(name, value),
        }
        Ok(true)
    }

    /// `listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class`.
    fn apply_listener(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        let listener = name
            .strip_prefix("listener.name.")
            .and_then(|rest| rest.strip_suffix(".oauthbearer.sasl.server.callback.handler.class"))
            .filter(|listener| !listener.contains('.'));
        match listener {
            Some(listener) => {
                self.set_handler(&listener.to_ascii_uppercase(), name, value)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn set_url(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let url = value.trim();
        let known = ["https://", "http://", "file:"]
            .iter()
            .any(|scheme| url.starts_with(scheme));
        if !known {
            return Err(ConfigError::invalid(
                name,
                value,
                "an https://, http:// or file: URL",
            ));
        }
        self.jwks = Some(JwksSource {
            url: url.to_string(),
            refresh_ms: 0,
            retry_backoff_ms: 0,
            retry_backoff_max_ms: 0,
        });
        self.sync_source();
        Ok(())
    }

    /// Copies the timing keys into the source, whatever their order.
    fn sync_source(&mut self) {
        if let Some(source) = &mut self.jwks {
            source.refresh_ms = self.refresh_ms;
            source.retry_backoff_ms = self.retry_backoff_ms;
            source.retry_backoff_max_ms = self.retry_backoff_max_ms.max(self.retry_backoff_ms);
        }
    }

    fn set_handler(&mut self, listener: &str, name: &str, value: &str) -> Result<(), ConfigError> {
        let class = value.trim();
        let signed = if class.ends_with(&format!(".{SIGNED_HANDLER}")) {
            true
        } else if class.ends_with(&format!(".{UNSECURED_HANDLER}")) {
            false
        } else {
            return Err(ConfigError::invalid(
                name,
                value,
                &format!("rill serves Kafka's {SIGNED_HANDLER} and {UNSECURED_HANDLER} only"),
            ));
        };
        self.signed_handler.insert(listener.to_string(), signed);
        Ok(())
    }

    /// The options of an `OAuthBearerLoginModule` JAAS entry for `listener`
    /// (upper case; `""` for `sasl.jaas.config`).
    pub fn apply_jaas(
        &mut self,
        listener: &str,
        name: &str,
        options: &[(String, String)],
    ) -> Result<(), ConfigError> {
        let mut unsecured = UnsecuredOptions::default();
        for (key, value) in options {
            unsecured
                .apply(key, value)
                .map_err(|reason| ConfigError::invalid(name, value, &reason))?;
        }
        self.unsecured.insert(listener.to_string(), unsecured);
        Ok(())
    }

    /// Whether `listener` validates signed tokens.
    pub fn is_signed(&self, listener: &str) -> bool {
        let upper = listener.to_ascii_uppercase();
        self.signed_handler
            .get(&upper)
            .or_else(|| self.signed_handler.get(""))
            .copied()
            .unwrap_or(false)
    }

    /// The validator of `listener`.
    pub fn validator(&self, listener: &str) -> Validator<'_> {
        if self.is_signed(listener) {
            return Validator::Signed(&self.signed, &self.keys.0);
        }
        static DEFAULT: std::sync::OnceLock<UnsecuredOptions> = std::sync::OnceLock::new();
        let upper = listener.to_ascii_uppercase();
        let options = self
            .unsecured
            .get(&upper)
            .or_else(|| self.unsecured.get(""))
            .unwrap_or_else(|| DEFAULT.get_or_init(UnsecuredOptions::default));
        Validator::Unsecured(options)
    }

    /// The start-time check, given the listeners that offer OAUTHBEARER:
    /// a signed listener needs a JWKS URL, and a URL needs the listeners
    /// offering OAUTHBEARER to include a signed one.
    pub fn check(&self, oauth_listeners: &[String]) -> Result<(), ConfigError> {
        let signed: Vec<&String> = oauth_listeners
            .iter()
            .filter(|l| self.is_signed(l))
            .collect();
        match (&self.jwks, signed.first()) {
            (None, Some(listener)) => Err(ConfigError::invalid(
                "sasl.oauthbearer.jwks.endpoint.url",
                "",
                &format!(
                    "listener {listener} validates signed tokens ({SIGNED_HANDLER}) \
                     and needs the provider's JWKS URL"
                ),
            )),
            (Some(source), None) if !oauth_listeners.is_empty() => Err(ConfigError::invalid(
                "sasl.oauthbearer.jwks.endpoint.url",
                &source.url,
                &format!(
                    "no listener offering OAUTHBEARER validates signed tokens: set \
                     listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class=\
                     org.apache.kafka.common.security.oauthbearer.{SIGNED_HANDLER} \
                     (without it Kafka would take unsigned tokens)"
                ),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNED: &str =
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";

    #[test]
    fn listeners_choose_their_validator() {
        let mut oauth = OAuthConfig::default();
        assert!(matches!(
            oauth.validator("SASL_PLAINTEXT"),
            Validator::Unsecured(_)
        ));
        oauth
            .apply(
                "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class",
                SIGNED,
            )
            .unwrap();
        assert!(oauth.is_signed("SASL_SSL"));
        assert!(!oauth.is_signed("SASL_PLAINTEXT"));
        assert!(oauth
            .apply("sasl.server.callback.handler.class", "com.example.Mine")
            .is_err());
        let options = [(
            String::from("unsecuredValidatorPrincipalClaimName"),
            String::from("user"),
        )];
        oauth.apply_jaas("SASL_PLAINTEXT", "k", &options).unwrap();
        let Validator::Unsecured(unsecured) = oauth.validator("sasl_plaintext") else {
            panic!("unsecured expected");
        };
        assert_eq!(unsecured.principal_claim, "user");
    }

    #[test]
    fn the_url_and_the_signed_listeners_go_together() {
        let mut oauth = OAuthConfig::default();
        let listeners = vec![String::from("SASL_SSL")];
        assert!(oauth.check(&listeners).is_ok());
        assert!(oauth.check(&[]).is_ok());
        oauth
            .apply(
                "sasl.oauthbearer.jwks.endpoint.url",
                "file:/etc/rill/jwks.json",
            )
            .unwrap();
        assert!(oauth
            .check(&listeners)
            .unwrap_err()
            .to_string()
            .contains("handler.class"));
        oauth
            .apply("sasl.server.callback.handler.class", SIGNED)
            .unwrap();
        assert!(oauth.check(&listeners).is_ok());
        oauth
            .apply("sasl.oauthbearer.jwks.endpoint.refresh.ms", "5000")
            .unwrap();
        assert_eq!(oauth.jwks.as_ref().map(|j| j.refresh_ms), Some(5000));
        oauth.jwks = None;
        assert!(oauth.check(&listeners).is_err());
        assert!(oauth
            .apply("sasl.oauthbearer.jwks.endpoint.url", "ftp://x")
            .is_err());
        assert!(oauth
            .apply("sasl.oauthbearer.clock.skew.seconds", "-1")
            .is_err());
    }
}

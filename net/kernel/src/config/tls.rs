//! The `ssl.*` broker keys, by Kafka's names, and the TLS of each listener.
//!
//! Keys may be given for every listener (`ssl.keystore.location`) or for one
//! (`listener.name.<lowercase name>.ssl.keystore.location`); as in Kafka, a
//! listener's own key wins over the common one, key by key. Only PEM is read
//! (`ssl.keystore.type=PEM`, `ssl.truststore.type=PEM`):
//!
//! - the broker's key and certificate chain: `ssl.keystore.location` (one PEM
//!   file holding both), or `ssl.keystore.certificate.chain` and
//!   `ssl.keystore.key` (inline PEM), or rill's `ssl.certificate.location` and
//!   `ssl.key.location` (two files);
//! - the CAs client certificates must chain to: `ssl.truststore.location`
//!   (a PEM bundle) or `ssl.truststore.certificates` (inline);
//! - `ssl.client.auth` (none, requested, required), `ssl.enabled.protocols`
//!   (TLSv1.2, TLSv1.3), `ssl.principal.mapping.rules` (Kafka's rules);
//! - `rill.ssl.handshake.timeout.ms` (10 s): how long a client has to finish
//!   the handshake;
//! - for the broker's own connections to other brokers on a TLS first
//!   listener ([`TlsSettings::client_tls`]): the same truststore (the
//!   peers' certificates chain to it), keystore (shown when a peer asks),
//!   and `ssl.endpoint.identification.algorithm` (`https`, the default:
//!   the certificate must name the peer's advertised host; empty: not).
//!
//! Everything is read and checked at start ([`TlsSettings::listener_tls`]):
//! a TLS listener without a certificate, an unreadable file or a bad PEM
//! stops the broker with the key's name, never a connection later.

use crate::error::ConfigError;
use security::principal_mapping::PrincipalMapper;
use security::tls::{
    parse_certificates, parse_private_key, ClientAuth, ListenerTls, TlsMaterial, TlsVersion,
};
use security::tls_client::{ClientTls, ClientTlsMaterial};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// `ssl.*` keys rill reads.
pub const READ_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.principal.mapping.rules",
    "ssl.endpoint.identification.algorithm",
];

/// `ssl.*` keys of Kafka's that have no effect on rill (JVM providers,
/// passwords of keystores rill does not read, client-side checks): accepted
/// so a Kafka file starts rill, logged so nobody believes they took effect.
pub const INERT_KEYS: &[&str] = &[
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.password",
    "ssl.protocol",
    "ssl.cipher.suites",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "ssl.provider",
    "ssl.engine.factory.class",
    "ssl.allow.dn.changes",
    "ssl.allow.san.changes",
];

/// Default of `rill.ssl.handshake.timeout.ms`.
const HANDSHAKE_TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// The `ssl.*` keys as given, common and per listener; resolved per TLS
/// listener once every key is read.
#[derive(Clone, Default)]
pub struct TlsSettings {
    common: BTreeMap<String, String>,
    /// By lowercase listener name.
    per_listener: BTreeMap<String, BTreeMap<String, String>>,
    handshake_timeout_ms: Option<u64>,
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Key names only: `ssl.keystore.key` holds a private key.
        f.debug_struct("TlsSettings")
            .field("common", &self.common.keys().collect::<Vec<_>>())
            .field(
                "per_listener",
                &self
                    .per_listener
                    .iter()
                    .map(|(l, keys)| (l, keys.keys().collect::<Vec<_>>()))
                    .collect::<Vec<_>>(),
            )
            .field("handshake_timeout_ms", &self.handshake_timeout_ms)
            .finish()
    }
}

impl TlsSettings {
    /// Takes `name` when it is a TLS key; `Ok(false)` when it is not. A
    /// value that can be checked alone (`ssl.client.auth`, ...) is checked
    /// here, so a typo stops the broker even before a listener uses it.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        if name == "rill.ssl.handshake.timeout.ms" {
            let ms: u64 = value
                .trim()
                .parse()
                .map_err(|_| ConfigError::invalid(name, value, "not a number of milliseconds"))?;
            if ms == 0 {
                return Err(ConfigError::invalid(name, value, "at least 1"));
            }
            self.handshake_timeout_ms = Some(ms);
            return Ok(true);
        }
        let (listener, key) = match name.strip_prefix("listener.name.") {
            Some(rest) => match rest.split_once('.') {
                Some((listener, key)) => (Some(listener.to_ascii_lowercase()), key),
                None => return Ok(false),
            },
            None => (None, name),
        };
        if INERT_KEYS.contains(&key) {
            tracing::info!(key = name, "TLS setting has no effect on rill; ignored");
            return Ok(true);
        }
        if !READ_KEYS.contains(&key) {
            return Ok(false);
        }
        check_value(name, key, value)?;
        let keys = match listener {
            Some(listener) => self.per_listener.entry(listener).or_default(),
            None => &mut self.common,
        };
        keys.insert(key.to_string(), value.to_string());
        Ok(true)
    }

    /// The TLS of listener `listener` (its name as in `listeners`), its
    /// files read and checked.
    pub fn listener_tls(&self, listener: &str) -> Result<ListenerTls, ConfigError> {
        let keys = ListenerKeys {
            settings: self,
            prefix: format!("listener.name.{}.", listener.to_ascii_lowercase()),
            own: self.per_listener.get(&listener.to_ascii_lowercase()),
        };
        for key in ["ssl.keystore.type", "ssl.truststore.type"] {
            if let Some((name, value)) = keys.get(key) {
                if !value.trim().eq_ignore_ascii_case("PEM") {
                    return Err(ConfigError::invalid(
                        &name,
                        value,
                        "rill reads PEM files only (set PEM and give PEM files)",
                    ));
                }
            }
        }
        let (chain, key) = keys.certificate_and_key(listener)?;
        let trusted = keys.trusted()?;
        let client_auth = match keys.get("ssl.client.auth") {
            Some((name, value)) => parse_with(&name, value, str::parse::<ClientAuth>)?,
            None => ClientAuth::None,
        };
        if client_auth != ClientAuth::None && trusted.is_empty() {
            return Err(ConfigError::invalid(
                &keys.name("ssl.truststore.location"),
                "",
                &format!(
                    "listener {listener} has ssl.client.auth={} but no truststore to check \
                     client certificates against",
                    format!("{client_auth:?}").to_ascii_lowercase()
                ),
            ));
        }
        let versions = match keys.get("ssl.enabled.protocols") {
            Some((name, value)) => parse_with(&name, value, TlsVersion::parse_list)?,
            None => vec![TlsVersion::Tls12, TlsVersion::Tls13],
        };
        let handshake_timeout = Duration::from_millis(
            self.handshake_timeout_ms
                .unwrap_or(HANDSHAKE_TIMEOUT_MS_DEFAULT),
        );
        let principal_mapping = match keys.get("ssl.principal.mapping.rules") {
            Some((name, value)) => parse_with(&name, value, PrincipalMapper::parse)?,
            None => PrincipalMapper::default(),
        };
        ListenerTls::new(TlsMaterial {
            chain,
            key,
            trusted,
            client_auth,
            versions,
            handshake_timeout,
            principal_mapping,
        })
        .map_err(|reason| {
            ConfigError::invalid(
                &keys.name("ssl.keystore.location"),
                "",
                &format!("listener {listener}: {reason}"),
            )
        })
    }
}

impl TlsSettings {
    /// The broker's own TLS client for listener `listener` (its peers'),
    /// its files read and checked.
    pub fn client_tls(&self, listener: &str) -> Result<ClientTls, ConfigError> {
        let keys = ListenerKeys {
            settings: self,
            prefix: format!("listener.name.{}.", listener.to_ascii_lowercase()),
            own: self.per_listener.get(&listener.to_ascii_lowercase()),
        };
        let identity = Some(keys.certificate_and_key(listener)?);
        let trusted = keys.trusted()?;
        let versions = match keys.get("ssl.enabled.protocols") {
            Some((name, value)) => parse_with(&name, value, TlsVersion::parse_list)?,
            None => vec![TlsVersion::Tls12, TlsVersion::Tls13],
        };
        let verify_hostname = match keys.get("ssl.endpoint.identification.algorithm") {
            Some((name, value)) => parse_with(&name, value, verifies_hostname)?,
            None => true,
        };
        ClientTls::new(ClientTlsMaterial {
            trusted,
            identity,
            versions,
            verify_hostname,
        })
        .map_err(|reason| {
            ConfigError::invalid(
                &keys.name("ssl.truststore.location"),
                "",
                &format!("the brokers' connections to each other on {listener}: {reason}"),
            )
        })
    }
}

/// Checks a value that needs no other key.
fn check_value(name: &str, key: &str, value: &str) -> Result<(), ConfigError> {
    match key {
        "ssl.client.auth" => parse_with(name, value, str::parse::<ClientAuth>).map(drop),
        "ssl.enabled.protocols" => parse_with(name, value, TlsVersion::parse_list).map(drop),
        "ssl.principal.mapping.rules" => parse_with(name, value, PrincipalMapper::parse).map(drop),
        "ssl.endpoint.identification.algorithm" => {
            parse_with(name, value, verifies_hostname).map(drop)
        }
        _ => Ok(()),
    }
}

/// `ssl.endpoint.identification.algorithm`: `https` checks the host name.
fn verifies_hostname(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "https" => Ok(true),
        "" => Ok(false),
        _ => Err(String::from("https or empty")),
    }
}

fn parse_with<T>(
    name: &str,
    value: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<T, ConfigError> {
    parse(value).map_err(|reason| ConfigError::invalid(name, value, &reason))
}

/// One listener's view of the keys: its own, then the common ones.
struct ListenerKeys<'a> {
    settings: &'a TlsSettings,
    prefix: String,
    own: Option<&'a BTreeMap<String, String>>,
}

impl ListenerKeys<'_> {
    /// The value of `key` and the name it was given under.
    fn get(&self, key: &str) -> Option<(String, &str)> {
        if let Some(value) = self.own.and_then(|own| own.get(key)) {
            return Some((format!("{}{key}", self.prefix), value.as_str()));
        }
        self.settings
            .common
            .get(key)
            .map(|value| (key.to_string(), value.as_str()))
    }

    /// The name to blame for a missing key: the listener's own form.
    fn name(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The PEM text of a key, inline or from the file it names.
    fn pem(&self, key: &str, is_file: bool) -> Result<Option<(String, String)>, ConfigError> {
        let Some((name, value)) = self.get(key) else {
            return Ok(None);
        };
        if !is_file {
            return Ok(Some((name, value.to_string())));
        }
        let text = std::fs::read_to_string(value.trim())
            .map_err(|e| ConfigError::invalid(&name, value, &format!("cannot read: {e}")))?;
        Ok(Some((name, text)))
    }

    /// The broker's certificate chain and key, from whichever pair is given.
    fn certificate_and_key(
        &self,
        listener: &str,
    ) -> Result<
        (
            Vec<rustls::pki_types::CertificateDer<'static>>,
            rustls::pki_types::PrivateKeyDer<'static>,
        ),
        ConfigError,
    > {
        let pair = |cert_key: &str, key_key: &str, is_file: bool| match (
            self.pem(cert_key, is_file)?,
            self.pem(key_key, is_file)?,
        ) {
            (Some(cert), Some(key)) => Ok(Some((cert, key))),
            (Some(_), None) => Err(ConfigError::invalid(
                &self.name(key_key),
                "",
                &format!("{cert_key} is set, {key_key} is missing"),
            )),
            (None, Some(_)) => Err(ConfigError::invalid(
                &self.name(cert_key),
                "",
                &format!("{key_key} is set, {cert_key} is missing"),
            )),
            (None, None) => Ok(None),
        };
        let texts = if let Some(pair) =
            pair("ssl.keystore.certificate.chain", "ssl.keystore.key", false)?
        {
            pair
        } else if let Some(both) = self.pem("ssl.keystore.location", true)? {
            (both.clone(), both)
        } else if let Some(pair) = pair("ssl.certificate.location", "ssl.key.location", true)? {
            pair
        } else {
            return Err(ConfigError::invalid(
                &self.name("ssl.keystore.location"),
                "",
                &format!(
                    "TLS listener {listener} has no certificate: set ssl.keystore.location (a \
                     PEM file with the key and the certificate chain), or \
                     ssl.keystore.certificate.chain and ssl.keystore.key (inline PEM), or \
                     ssl.certificate.location and ssl.key.location (PEM files)"
                ),
            ));
        };
        let ((cert_name, cert_text), (key_name, key_text)) = texts;
        let chain = parse_certificates(&cert_text)
            .map_err(|reason| ConfigError::invalid(&cert_name, "", &reason))?;
        let key = parse_private_key(&key_text)
            .map_err(|reason| ConfigError::invalid(&key_name, "", &reason))?;
        Ok((chain, key))
    }

    /// The truststore's CA certificates (none when no truststore is set).
    fn trusted(&self) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, ConfigError> {
        let text = match self.pem("ssl.truststore.certificates", false)? {
            Some(inline) => inline,
            None => match self.pem("ssl.truststore.location", true)? {
                Some(file) => file,
                None => return Ok(Vec::new()),
            },
        };
        parse_certificates(&text.1).map_err(|reason| ConfigError::invalid(&text.0, "", &reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    #[test]
    fn listener_keys_override_common_ones_and_bad_values_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![String::from("localhost")])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let both = write(
            dir.path(),
            "both.pem",
            &format!("{}{}", key.serialize_pem(), cert.pem()),
        );
        let mut settings = TlsSettings::default();
        assert!(settings
            .apply("ssl.keystore.location", "/nonexistent")
            .unwrap());
        assert!(settings
            .apply("listener.name.secure.ssl.keystore.location", &both)
            .unwrap());
        assert!(settings.apply("ssl.keystore.password", "x").unwrap());
        assert!(!settings
            .apply("listener.name.secure.sasl.enabled.mechanisms", "PLAIN")
            .unwrap());
        assert!(!settings.apply("ssl.unknown", "x").unwrap());
        let tls = settings.listener_tls("SECURE").unwrap();
        assert_eq!(tls.client_auth, ClientAuth::None);
        // Another listener falls back to the common (missing) file.
        let err = settings.listener_tls("OTHER").unwrap_err().to_string();
        assert!(
            err.contains("ssl.keystore.location") && err.contains("cannot read"),
            "{err}"
        );
        // Requested client auth without a truststore.
        settings.apply("ssl.client.auth", "requested").unwrap();
        let err = settings.listener_tls("SECURE").unwrap_err().to_string();
        assert!(err.contains("truststore"), "{err}");
        assert!(settings.apply("ssl.client.auth", "sometimes").is_err());
        assert!(settings
            .apply("ssl.principal.mapping.rules", "RULE:^CN=(.*)$/$1/L,DEFAULT")
            .is_ok());
        assert!(settings
            .apply("ssl.principal.mapping.rules", "RULE:^CN=(.*$/$1/")
            .is_err());
        assert!(settings.apply("ssl.enabled.protocols", "TLSv1").is_err());
        assert!(settings
            .apply("ssl.endpoint.identification.algorithm", "")
            .unwrap());
        assert!(settings
            .apply("ssl.endpoint.identification.algorithm", "HTTPS")
            .unwrap());
        assert!(settings
            .apply("ssl.endpoint.identification.algorithm", "none")
            .is_err());
    }

    #[test]
    fn missing_or_half_key_pairs_are_startup_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = TlsSettings::default();
        let err = settings.listener_tls("SSL").unwrap_err().to_string();
        assert!(err.contains("has no certificate"), "{err}");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![String::from("localhost")])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let cert_file = write(dir.path(), "cert.pem", &cert.pem());
        settings
            .apply("ssl.certificate.location", &cert_file)
            .unwrap();
        let err = settings.listener_tls("SSL").unwrap_err().to_string();
        assert!(err.contains("ssl.key.location"), "{err}");
        let garbage = write(dir.path(), "key.pem", "not a key");
        settings.apply("ssl.key.location", &garbage).unwrap();
        let err = settings.listener_tls("SSL").unwrap_err().to_string();
        assert!(err.contains("private key"), "{err}");
        let key_file = write(dir.path(), "key2.pem", &key.serialize_pem());
        settings.apply("ssl.key.location", &key_file).unwrap();
        assert!(settings.listener_tls("SSL").is_ok());
        settings.apply("ssl.keystore.type", "JKS").unwrap();
        assert!(settings
            .listener_tls("SSL")
            .unwrap_err()
            .to_string()
            .contains("PEM"));
        let mut inline = TlsSettings::default();
        inline
            .apply(
                "ssl.keystore.certificate.chain",
                &cert.pem().replace('\n', ""),
            )
            .unwrap();
        inline
            .apply("ssl.keystore.key", &key.serialize_pem())
            .unwrap();
        assert!(inline.listener_tls("SSL").is_ok());
        assert!(!format!("{inline:?}").contains("PRIVATE"));
    }
}

//! SASL/GSSAPI (Kerberos) settings, by Kafka's names:
//!
//! - the broker's keys: the `Krb5LoginModule` entry of
//!   `listener.name.<listener>.gssapi.sasl.jaas.config` (or of
//!   `sasl.jaas.config`), `useKeyTab=true keyTab="/etc/kafka/kafka.keytab"
//!   principal="kafka/host1.example.com@EXAMPLE.COM"`. Without a `keyTab`,
//!   MIT Kerberos' own default (`KRB5_KTNAME`, else `/etc/krb5.keytab`).
//!   MIT's acceptor keys are the process's, so every listener that offers
//!   GSSAPI must name the same keytab;
//! - `sasl.kerberos.service.name` (or the JAAS `serviceName`): the service
//!   clients ask tickets for (`kafka`), kept for DescribeConfigs; tickets
//!   for any principal of the keytab are accepted;
//! - `sasl.kerberos.principal.to.local.rules`: how a principal becomes a
//!   user name (default `DEFAULT`, see [`security::kerberos::rules`]);
//! - `krb5.conf` is MIT's: `KRB5_CONFIG`, else `/etc/krb5.conf`.
//!
//! The client-side relogin keys (`sasl.kerberos.kinit.cmd`,
//! `sasl.kerberos.ticket.renew.*`, `sasl.kerberos.min.time.before.relogin`)
//! are taken and ignored: an acceptor needs no ticket of its own.

use crate::error::ConfigError;
use security::kerberos::rules::ShortNamer;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One `Krb5LoginModule` JAAS entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KerberosLogin {
    /// `keyTab`.
    pub keytab: Option<PathBuf>,
    /// `principal`.
    pub principal: Option<String>,
    /// `serviceName`.
    pub service_name: Option<String>,
}

/// What the broker's start sets Kerberos up with, when a listener offers
/// GSSAPI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GssapiSetup {
    /// The acceptor's keytab (`None`: MIT's default).
    pub keytab: Option<PathBuf>,
}

/// GSSAPI's part of the SASL config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosConfig {
    /// `sasl.kerberos.service.name`.
    pub service_name: Option<String>,
    /// `sasl.kerberos.principal.to.local.rules`.
    pub to_local_rules: String,
    /// The `Krb5LoginModule` entries, by upper-case listener name (`""`:
    /// `sasl.jaas.config`'s, for every listener).
    pub logins: BTreeMap<String, KerberosLogin>,
}

impl Default for KerberosConfig {
    fn default() -> Self {
        KerberosConfig {
            service_name: None,
            to_local_rules: String::from("DEFAULT"),
            logins: BTreeMap::new(),
        }
    }
}

impl KerberosConfig {
    /// Applies one `sasl.kerberos.*` key; `Ok(false)` for another key.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match name {
            "sasl.kerberos.service.name" => self.service_name = Some(value.trim().to_string()),
            "sasl.kerberos.principal.to.local.rules" => {
                // Checked now with any realm: only the syntax is at stake.
                ShortNamer::parse(value, "EXAMPLE.COM")
                    .map_err(|reason| ConfigError::invalid(name, value, &reason))?;
                self.to_local_rules = value.to_string();
            }
            "sasl.kerberos.kinit.cmd"
            | "sasl.kerberos.min.time.before.relogin"
            | "sasl.kerberos.ticket.renew.jitter"
            | "sasl.kerberos.ticket.renew.window.factor" => {
                tracing::info!(key = name, "a Kerberos client's relogin setting; ignored");
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Records the options of a `Krb5LoginModule` JAAS entry of `listener`
    /// (`""`: every listener).
    pub fn apply_jaas(&mut self, listener: &str, options: &[(String, String)]) {
        let option = |key: &str| {
            options
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let uses_keytab = option("useKeyTab").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let login = KerberosLogin {
            keytab: option("keyTab").filter(|_| uses_keytab).map(PathBuf::from),
            principal: option("principal"),
            service_name: option("serviceName"),
        };
        self.logins.insert(listener.to_string(), login);
    }

    /// The login entry of `listener`.
    fn login(&self, listener: &str) -> Option<&KerberosLogin> {
        (self.logins.get(&listener.to_ascii_uppercase())).or_else(|| self.logins.get(""))
    }

    /// The keytab the listeners offering GSSAPI name (`None`: MIT's
    /// default); an error when two of them name different ones.
    pub fn keytab(&self, offering: &[String]) -> Result<Option<PathBuf>, ConfigError> {
        let mut keytabs = offering.iter().map(|listener| {
            (
                listener,
                self.login(listener).and_then(|l| l.keytab.clone()),
            )
        });
        let Some((first_listener, first)) = keytabs.next() else {
            return Ok(None);
        };
        if let Some(path) = first.as_ref().filter(|path| !path.is_file()) {
            let key = match self
                .logins
                .contains_key(&first_listener.to_ascii_uppercase())
            {
                true => format!(
                    "listener.name.{}.gssapi.sasl.jaas.config",
                    first_listener.to_lowercase()
                ),
                false => String::from("sasl.jaas.config"),
            };
            return Err(ConfigError::invalid(
                &key,
                "[hidden]",
                &format!("keyTab {} is not a readable file", path.display()),
            ));
        }
        for (listener, keytab) in keytabs {
            if keytab != first {
                return Err(ConfigError::invalid(
                    &format!("listener.name.{}.gssapi.sasl.jaas.config", listener.to_lowercase()),
                    "[hidden]",
                    "every listener offering GSSAPI must name the same keyTab (Kerberos' acceptor keys are the process's)",
                ));
            }
        }
        Ok(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jaas(keytab: &str) -> Vec<(String, String)> {
        vec![
            (String::from("useKeyTab"), String::from("true")),
            (String::from("keyTab"), keytab.to_string()),
            (String::from("principal"), String::from("kafka/h@R")),
        ]
    }

    #[test]
    fn keys_and_jaas_entries() {
        let dir = std::env::temp_dir().join(format!("rill-keytabs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kafka = dir.join("kafka.keytab");
        let other = dir.join("other.keytab");
        for file in [&kafka, &other] {
            std::fs::write(file, b"keys").unwrap();
        }
        let (kafka, other) = (kafka.to_str().unwrap(), other.to_str().unwrap());
        let mut k = KerberosConfig::default();
        assert!(k.apply("sasl.kerberos.service.name", "kafka").unwrap());
        assert_eq!(k.service_name.as_deref(), Some("kafka"));
        assert!(k
            .apply(
                "sasl.kerberos.principal.to.local.rules",
                "RULE:[1:$1]/L,DEFAULT"
            )
            .unwrap());
        let bad = k.apply("sasl.kerberos.principal.to.local.rules", "RULE:[9:$1]");
        assert!(bad.unwrap_err().to_string().contains("invalid rule"));
        assert!(k
            .apply("sasl.kerberos.kinit.cmd", "/usr/bin/kinit")
            .unwrap());
        assert!(!k.apply("sasl.kerberos.other", "x").unwrap());

        k.apply_jaas("", &jaas(kafka));
        let listeners = [String::from("SASL_PLAINTEXT"), String::from("OUTER")];
        assert_eq!(k.keytab(&listeners).unwrap(), Some(PathBuf::from(kafka)));
        k.apply_jaas("OUTER", &jaas(other));
        assert!(k.keytab(&listeners).is_err(), "two keytabs");
        assert_eq!(
            k.keytab(&listeners[1..]).unwrap(),
            Some(PathBuf::from(other))
        );
        k.apply_jaas("OUTER", &jaas("/no/such.keytab"));
        let missing = k.keytab(&listeners[1..]).unwrap_err().to_string();
        assert!(
            missing.contains("listener.name.outer.gssapi.sasl.jaas.config")
                && missing.contains("/no/such.keytab"),
            "{missing}"
        );
        let mut no_keytab = jaas("/ignored");
        no_keytab[0].1 = String::from("false");
        k.apply_jaas("OUTER", &no_keytab);
        assert_eq!(k.keytab(&listeners[1..]).unwrap(), None, "MIT's default");
        assert_eq!(k.keytab(&[]).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

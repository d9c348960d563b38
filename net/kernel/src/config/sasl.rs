//! SASL settings, by Kafka's names:
//!
//! - `sasl.enabled.mechanisms` and `listener.name.<listener>.sasl.enabled.mechanisms`:
//!   the mechanisms a SASL listener offers (rill's default: PLAIN,
//!   SCRAM-SHA-256, SCRAM-SHA-512; OAUTHBEARER and GSSAPI when named).
//! - `listener.name.<listener>.plain.sasl.jaas.config` and `sasl.jaas.config`:
//!   the PLAIN users, in JAAS syntax (`PlainLoginModule required
//!   user_alice="alice-secret";`), and the unsecured OAUTHBEARER
//!   validator's options (`OAuthBearerLoginModule`). The listener's own
//!   config wins.
//! - OAUTHBEARER's validators and identity provider: [`super::oauth`].
//! - GSSAPI's keytab, service name and principal rules: [`super::kerberos`].
//! - `connections.max.reauth.ms` (KIP-368): how long an authentication holds;
//!   0 (the default) is for ever.
//! - `rill.sasl.handshake.timeout.ms`: how long a connection may stay
//!   unauthenticated on a SASL listener (default 10000).
//! - `sasl.server.max.receive.size`: the largest request frame read on a
//!   SASL listener before authentication (Kafka's 524288); a larger one
//!   closes the connection.
//! - `sasl.mechanism.inter.broker.protocol` and the `username`/`password`
//!   of that mechanism's JAAS entry on the first listener
//!   (`PlainLoginModule` or `ScramLoginModule`): how this broker logs in
//!   to the others when that listener is SASL_PLAINTEXT or SASL_SSL.
//! - `rill.sasl.bootstrap.scram`: the first SCRAM users, in kafka-storage's
//!   `--add-scram` syntax (`SCRAM-SHA-512=[name=admin,password=admin-secret]`,
//!   several separated by `;`), written into the metadata quorum at start
//!   when the user has no credential of that mechanism yet.
//!
//! Secrets never reach an error message or a log line.

use super::kerberos::{GssapiSetup, KerberosConfig};
use super::oauth::OAuthConfig;
use crate::error::ConfigError;
use security::sasl::{Mechanism, ScramMechanism, SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS};
use std::collections::BTreeMap;

/// Stands for a value that holds a secret in error messages.
const HIDDEN: &str = "[hidden]";

/// The SASL part of the broker config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// `sasl.enabled.mechanisms` (`None`: rill's default, all three).
    pub enabled_mechanisms: Option<Vec<Mechanism>>,
    /// `listener.name.<listener>.sasl.enabled.mechanisms`, by upper-case
    /// listener name.
    pub listener_mechanisms: BTreeMap<String, Vec<Mechanism>>,
    /// PLAIN users of `sasl.jaas.config`.
    pub plain_users: BTreeMap<String, String>,
    /// PLAIN users of `listener.name.<listener>.plain.sasl.jaas.config`, by
    /// upper-case listener name.
    pub listener_plain_users: BTreeMap<String, BTreeMap<String, String>>,
    /// `connections.max.reauth.ms` (0: sessions never expire).
    pub max_reauth_ms: i64,
    /// `rill.sasl.handshake.timeout.ms`.
    pub handshake_timeout_ms: u64,
    /// `sasl.server.max.receive.size`: the largest frame a SASL listener
    /// reads before the connection authenticates.
    pub server_max_receive_bytes: usize,
    /// `rill.sasl.bootstrap.scram`.
    pub bootstrap_scram: Vec<BootstrapScram>,
    /// OAUTHBEARER's validators.
    pub oauth: OAuthConfig,
    /// `sasl.mechanism.inter.broker.protocol`.
    pub inter_broker_mechanism: Option<Mechanism>,
    /// The `username`/`password` of the PLAIN and SCRAM JAAS entries, by
    /// upper-case listener name (`""`: `sasl.jaas.config`) and `PLAIN` or
    /// `SCRAM`: the broker's own login.
    pub own_logins: BTreeMap<(String, &'static str), OwnLogin>,
    /// GSSAPI's Kerberos settings.
    pub kerberos: KerberosConfig,
}

/// The `username` and `password` of a PLAIN or SCRAM JAAS entry.
#[derive(Clone, PartialEq, Eq)]
pub struct OwnLogin {
    /// `username`.
    pub user: String,
    /// `password`.
    pub password: String,
}

impl std::fmt::Debug for OwnLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnLogin")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// How this broker logs in to the others.
#[derive(Clone, PartialEq, Eq)]
pub struct InterBrokerLogin {
    /// PLAIN or SCRAM.
    pub mechanism: Mechanism,
    /// The user.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl std::fmt::Debug for InterBrokerLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterBrokerLogin")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// One `--add-scram` entry of `rill.sasl.bootstrap.scram`.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapScram {
    /// The mechanism.
    pub mechanism: ScramMechanism,
    /// The user.
    pub name: String,
    /// The password (salted and hashed before it is stored).
    pub password: String,
    /// PBKDF2 iterations (default 4096, Kafka's).
    pub iterations: i32,
}

impl std::fmt::Debug for BootstrapScram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapScram")
            .field("mechanism", &self.mechanism)
            .field("name", &self.name)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl Default for SaslConfig {
    fn default() -> Self {
        SaslConfig {
            enabled_mechanisms: None,
            listener_mechanisms: BTreeMap::new(),
            plain_users: BTreeMap::new(),
            listener_plain_users: BTreeMap::new(),
            max_reauth_ms: 0,
            handshake_timeout_ms: 10_000,
            server_max_receive_bytes: 524_288,
            bootstrap_scram: Vec::new(),
            oauth: OAuthConfig::default(),
            inter_broker_mechanism: None,
            own_logins: BTreeMap::new(),
            kerberos: KerberosConfig::default(),
        }
    }
}

impl SaslConfig {
    /// Applies one setting; `Ok(false)` when `name` is not a SASL key.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match name {
            "sasl.enabled.mechanisms" => {
                self.enabled_mechanisms = Some(parse_mechanisms(name, value)?)
            }
            "sasl.jaas.config" => {
                self.plain_users = plain_users(name, value)?;
                self.apply_login_modules("", name, value)?;
            }
            "connections.max.reauth.ms" => {
                self.max_reauth_ms =
                    ConfigError::parse_at_least(name, value, 0, "a number, 0 or more")?
            }
            "rill.sasl.handshake.timeout.ms" => {
                self.handshake_timeout_ms =
                    ConfigError::parse_at_least(name, value, 1, "a number, at least 1")?
            }
            "sasl.server.max.receive.size" => {
                self.server_max_receive_bytes =
                    ConfigError::parse_at_least(name, value, 1, "bytes, at least 1")?
            }
            "rill.sasl.bootstrap.scram" => self.bootstrap_scram = parse_bootstrap(name, value)?,
            "sasl.mechanism.inter.broker.protocol" => {
                let mechanism: Mechanism = (value.trim().to_ascii_uppercase().parse())
                    .map_err(|reason: String| ConfigError::invalid(name, value, &reason))?;
                self.inter_broker_mechanism = Some(mechanism);
            }
            "sasl.mechanism.controller.protocol" => {
                // The controller listener speaks rill's own protocol.
                tracing::info!(key = name, "Kafka setting has no effect on rill; ignored");
            }
            _ if self.oauth.apply(name, value)? => {}
            _ if self.kerberos.apply(name, value)? => {}
            _ => return self.apply_listener(name, value),
        }
        Ok(true)
    }

    /// The `OAuthBearerLoginModule` and `Krb5LoginModule` options of a
    /// JAAS config, where it has them.
    fn apply_login_modules(
        &mut self,
        listener: &str,
        name: &str,
        value: &str,
    ) -> Result<(), ConfigError> {
        let modules =
            parse_jaas(value).map_err(|reason| ConfigError::invalid(name, HIDDEN, &reason))?;
        for module in &modules {
            let kind = if module.class.ends_with("PlainLoginModule") {
                Some("PLAIN")
            } else if module.class.ends_with("ScramLoginModule") {
                Some("SCRAM")
            } else {
                None
            };
            let option = |key: &str| module.options.iter().find(|(k, _)| k == key);
            if let (Some(kind), Some((_, user)), Some((_, password))) =
                (kind, option("username"), option("password"))
            {
                let login = OwnLogin {
                    user: user.clone(),
                    password: password.clone(),
                };
                self.own_logins.insert((listener.to_string(), kind), login);
            }
            if module.class.ends_with("OAuthBearerLoginModule") {
                self.oauth.apply_jaas(listener, name, &module.options)?;
            } else if module.class.ends_with("Krb5LoginModule") {
                self.kerberos.apply_jaas(listener, &module.options);
            }
        }
        Ok(())
    }

    /// `listener.name.<listener>.sasl.enabled.mechanisms` and
    /// `listener.name.<listener>.<mechanism>.sasl.jaas.config`.
    fn apply_listener(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        let Some(rest) = name.strip_prefix("listener.name.") else {
            return Ok(false);
        };
        if let Some(listener) = rest.strip_suffix(".sasl.enabled.mechanisms") {
            if !listener.contains('.') {
                self.listener_mechanisms.insert(
                    listener.to_ascii_uppercase(),
                    parse_mechanisms(name, value)?,
                );
                return Ok(true);
            }
        }
        let Some(prefix) = rest.strip_suffix(".sasl.jaas.config") else {
            return Ok(false);
        };
        let Some((listener, mechanism)) = prefix.split_once('.') else {
            return Ok(false);
        };
        match mechanism.to_ascii_uppercase().as_str() {
            "PLAIN" => {
                self.listener_plain_users
                    .insert(listener.to_ascii_uppercase(), plain_users(name, value)?);
                self.apply_login_modules(&listener.to_ascii_uppercase(), name, value)?;
            }
            // SCRAM's users are in the metadata quorum; its JAAS entry
            // holds the broker's own login (inter-broker).
            "OAUTHBEARER" | "GSSAPI" | "SCRAM-SHA-256" | "SCRAM-SHA-512" => {
                self.apply_login_modules(&listener.to_ascii_uppercase(), name, value)?;
            }
            other => {
                return Err(ConfigError::invalid(
                    name,
                    HIDDEN,
                    &format!("SASL mechanism {other} is not supported by rill"),
                ))
            }
        }
        Ok(true)
    }

    /// The mechanisms listener `listener` offers.
    pub fn mechanisms_for(&self, listener: &str) -> &[Mechanism] {
        self.listener_mechanisms
            .get(&listener.to_ascii_uppercase())
            .or(self.enabled_mechanisms.as_ref())
            .map_or(&Mechanism::DEFAULT[..], Vec::as_slice)
    }

    /// The start-time check of OAUTHBEARER, given the SASL listeners'
    /// names: see [`OAuthConfig::check`]. Logs each listener that takes
    /// unsigned tokens.
    pub fn check_oauth(&self, sasl_listeners: &[String]) -> Result<(), ConfigError> {
        let offering: Vec<String> = sasl_listeners
            .iter()
            .filter(|l| self.mechanisms_for(l).contains(&Mechanism::OAuthBearer))
            .cloned()
            .collect();
        self.oauth.check(&offering)?;
        for listener in offering.iter().filter(|l| !self.oauth.is_signed(l)) {
            tracing::warn!(
                %listener,
                "OAUTHBEARER takes unsigned tokens here (Kafka's unsecured validator): any client \
                 can name any principal; for development only"
            );
        }
        Ok(())
    }

    /// What Kerberos is set up with at start, when one of the SASL
    /// listeners `sasl_listeners` offers GSSAPI.
    pub fn gssapi_setup(
        &self,
        sasl_listeners: &[String],
    ) -> Result<Option<GssapiSetup>, ConfigError> {
        let offering: Vec<String> = sasl_listeners
            .iter()
            .filter(|l| self.mechanisms_for(l).contains(&Mechanism::Gssapi))
            .cloned()
            .collect();
        if offering.is_empty() {
            return Ok(None);
        }
        let keytab = self.kerberos.keytab(&offering)?;
        Ok(Some(GssapiSetup { keytab }))
    }

    /// How this broker logs in to the others on `listener` (the first
    /// one, a SASL listener): `sasl.mechanism.inter.broker.protocol`, with
    /// the `username` and `password` of that mechanism's JAAS entry.
    pub fn inter_broker_login(&self, listener: &str) -> Result<InterBrokerLogin, ConfigError> {
        const KEY: &str = "sasl.mechanism.inter.broker.protocol";
        let mechanism = self.inter_broker_mechanism.ok_or_else(|| {
            ConfigError::invalid(KEY, "(unset)", "the first listener carries traffic between brokers and is SASL: name PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        })?;
        let kind = match mechanism {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(_) => "SCRAM",
            other => {
                return Err(ConfigError::invalid(
                    KEY,
                    other.name(),
                    "brokers log in to each other with PLAIN or SCRAM",
                ))
            }
        };
        if !self.mechanisms_for(listener).contains(&mechanism) {
            return Err(ConfigError::invalid(
                KEY,
                mechanism.name(),
                &format!("listener {listener} does not offer it"),
            ));
        }
        let upper = listener.to_ascii_uppercase();
        let login = (self.own_logins.get(&(upper, kind)))
            .or_else(|| self.own_logins.get(&(String::new(), kind)))
            .ok_or_else(|| {
                let key = format!(
                    "listener.name.{}.{}.sasl.jaas.config",
                    listener.to_lowercase(),
                    mechanism.name().to_lowercase()
                );
                ConfigError::invalid(
                    &key,
                    HIDDEN,
                    "the broker's own login needs username and password options",
                )
            })?;
        Ok(InterBrokerLogin {
            mechanism,
            user: login.user.clone(),
            password: login.password.clone(),
        })
    }

    /// The JAAS password of a PLAIN user on `listener`.
    pub fn plain_password(&self, listener: &str, user: &str) -> Option<&str> {
        self.listener_plain_users
            .get(&listener.to_ascii_uppercase())
            .unwrap_or(&self.plain_users)
            .get(user)
            .map(String::as_str)
    }
}

/// A comma list of mechanism names.
fn parse_mechanisms(name: &str, value: &str) -> Result<Vec<Mechanism>, ConfigError> {
    let mut out = Vec::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mechanism: Mechanism = part
            .to_ascii_uppercase()
            .parse()
            .map_err(|reason: String| ConfigError::invalid(name, value, &reason))?;
        if !out.contains(&mechanism) {
            out.push(mechanism);
        }
    }
    if out.is_empty() {
        return Err(ConfigError::invalid(name, value, "no mechanism"));
    }
    Ok(out)
}

/// One login module of a JAAS config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasModule {
    /// Its class (`org.apache.kafka.common.security.plain.PlainLoginModule`).
    pub class: String,
    /// `required`, `requisite`, `sufficient` or `optional`.
    pub flag: String,
    /// Its options in order, values unquoted.
    pub options: Vec<(String, String)>,
}

/// Parses JAAS syntax: modules `Class flag key=value ... ;`, values bare or
/// in double quotes (`\` escapes the next character). Never panics.
pub fn parse_jaas(text: &str) -> Result<Vec<JaasModule>, String> {
    let mut tokens = JaasTokens {
        chars: text.chars().peekable(),
    };
    let mut modules = Vec::new();
    while let Some(class) = tokens.word()? {
        let flag = tokens
            .word()?
            .ok_or_else(|| format!("login module {class} has no control flag"))?;
        if !matches!(
            flag.as_str(),
            "required" | "requisite" | "sufficient" | "optional"
        ) {
            return Err(format!("bad control flag {flag:?} of {class}"));
        }
        let mut options = Vec::new();
        loop {
            tokens.skip_space();
            match tokens.chars.peek() {
                Some(';') => {
                    tokens.chars.next();
                    break;
                }
                None => return Err(format!("login module {class} does not end with ';'")),
                Some(_) => {}
            }
            let key = tokens
                .word()?
                .ok_or_else(|| String::from("option without a name"))?;
            tokens.skip_space();
            if tokens.chars.next() != Some('=') {
                return Err(format!("option {key} has no '='"));
            }
            let value = tokens.value()?;
            options.push((key, value));
        }
        modules.push(JaasModule {
            class,
            flag,
            options,
        });
    }
    if modules.is_empty() {
        return Err(String::from("no login module"));
    }
    Ok(modules)
}

struct JaasTokens<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl JaasTokens<'_> {
    fn skip_space(&mut self) {
        while self.chars.peek().is_some_and(|c| c.is_whitespace()) {
            self.chars.next();
        }
    }

    /// A bare word (class name, flag, option name); `None` at the end.
    fn word(&mut self) -> Result<Option<String>, String> {
        self.skip_space();
        let mut word = String::new();
        while let Some(&c) = self.chars.peek() {
            if c.is_whitespace() || c == '=' || c == ';' || c == '"' {
                break;
            }
            word.push(c);
            self.chars.next();
        }
        match (word.is_empty(), self.chars.peek()) {
            (true, None) => Ok(None),
            (true, Some(c)) => Err(format!("unexpected {c:?}")),
            (false, _) => Ok(Some(word)),
        }
    }

    /// An option value, quoted or bare.
    fn value(&mut self) -> Result<String, String> {
        self.skip_space();
        if self.chars.peek() != Some(&'"') {
            return self
                .word()?
                .ok_or_else(|| String::from("option without a value"));
        }
        self.chars.next();
        let mut value = String::new();
        loop {
            match self.chars.next() {
                Some('"') => return Ok(value),
                Some('\\') => match self.chars.next() {
                    Some(c) => value.push(c),
                    None => return Err(String::from("unterminated quoted value")),
                },
                Some(c) => value.push(c),
                None => return Err(String::from("unterminated quoted value")),
            }
        }
    }
}

/// The `user_<name>="<password>"` options of the PLAIN login module.
fn plain_users(name: &str, value: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let modules =
        parse_jaas(value).map_err(|reason| ConfigError::invalid(name, HIDDEN, &reason))?;
    let mut users = BTreeMap::new();
    for module in modules {
        if !module.class.ends_with("PlainLoginModule") {
            // A SCRAM or other login module is the broker's own client
            // identity; it holds no users.
            continue;
        }
        for (key, password) in module.options {
            if let Some(user) = key.strip_prefix("user_") {
                if user.is_empty() {
                    return Err(ConfigError::invalid(name, HIDDEN, "user_ with no name"));
                }
                users.insert(user.to_string(), password);
            }
        }
    }
    Ok(users)
}

/// kafka-storage's `--add-scram` entries, `;`-separated:
/// `SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]`.
pub fn parse_bootstrap(name: &str, value: &str) -> Result<Vec<BootstrapScram>, ConfigError> {
    let invalid = |reason: &str| ConfigError::invalid(name, HIDDEN, reason);
    let mut out = Vec::new();
    for entry in value.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (mechanism, body) = entry
            .split_once('=')
            .ok_or_else(|| invalid("expected SCRAM-SHA-512=[name=...,password=...]"))?;
        let mechanism = match mechanism.trim().to_ascii_uppercase().as_str() {
            "SCRAM-SHA-256" => ScramMechanism::Sha256,
            "SCRAM-SHA-512" => ScramMechanism::Sha512,
            other => return Err(invalid(&format!("unknown SCRAM mechanism {other:?}"))),
        };
        let body = body
            .trim()
            .strip_prefix('[')
            .and_then(|b| b.strip_suffix(']'))
            .ok_or_else(|| invalid("the user's fields go in [ ]"))?;
        let (mut user, mut password, mut iterations) = (None, None, SCRAM_MIN_ITERATIONS);
        for field in body.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            let (key, raw) = field
                .split_once('=')
                .ok_or_else(|| invalid("a field is key=value"))?;
            let text = raw.trim().trim_matches('"').to_string();
            match key.trim() {
                "name" => user = Some(text),
                "password" => password = Some(text),
                "iterations" => {
                    iterations = text
                        .parse()
                        .ok()
                        .filter(|i| (SCRAM_MIN_ITERATIONS..=SCRAM_MAX_ITERATIONS).contains(i))
                        .ok_or_else(|| invalid("iterations between 4096 and 16384"))?
                }
                "salt" | "saltedpassword" => {
                    return Err(invalid(
                        "salt and saltedpassword are not supported; give the password",
                    ))
                }
                other => return Err(invalid(&format!("unknown field {other:?}"))),
            }
        }
        let user = user
            .filter(|u| !u.is_empty())
            .ok_or_else(|| invalid("an entry needs name="))?;
        let password = password
            .filter(|p| !p.is_empty())
            .ok_or_else(|| invalid("an entry needs password="))?;
        out.push(BootstrapScram {
            mechanism,
            name: user,
            password,
            iterations,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice \"q\" secret";"#;

    #[test]
    fn jaas_users_are_read_per_listener_and_globally() {
        let mut sasl = SaslConfig::default();
        assert!(sasl
            .apply("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS)
            .unwrap());
        assert!(sasl
            .apply(
                "sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=bob-pw;"
            )
            .unwrap());
        assert_eq!(
            sasl.plain_password("SASL_PLAINTEXT", "alice"),
            Some("alice \"q\" secret")
        );
        assert_eq!(
            sasl.plain_password("SASL_PLAINTEXT", "admin"),
            Some("admin-secret")
        );
        assert_eq!(sasl.plain_password("SASL_PLAINTEXT", "bob"), None);
        assert_eq!(sasl.plain_password("OTHER", "bob"), Some("bob-pw"));
        assert_eq!(sasl.plain_password("OTHER", "username"), None);
        assert!(!sasl
            .apply("listener.name.x.ssl.keystore.location", "/k")
            .unwrap());
    }

    #[test]
    fn mechanisms_default_to_passwords_and_take_gssapi_when_named() {
        let mut sasl = SaslConfig::default();
        assert_eq!(
            sasl.mechanisms_for("SASL_PLAINTEXT"),
            &Mechanism::DEFAULT[..]
        );
        sasl.apply("sasl.enabled.mechanisms", "SCRAM-SHA-512")
            .unwrap();
        sasl.apply(
            "listener.name.inner.sasl.enabled.mechanisms",
            "PLAIN, SCRAM-SHA-256",
        )
        .unwrap();
        assert_eq!(
            sasl.mechanisms_for("SASL_PLAINTEXT"),
            &[Mechanism::Scram(ScramMechanism::Sha512)]
        );
        assert_eq!(
            sasl.mechanisms_for("INNER"),
            &[Mechanism::Plain, Mechanism::Scram(ScramMechanism::Sha256)]
        );
        sasl.apply("sasl.enabled.mechanisms", "GSSAPI").unwrap();
        assert_eq!(sasl.mechanisms_for("SASL_PLAINTEXT"), &[Mechanism::Gssapi]);
        let listeners = [String::from("SASL_PLAINTEXT")];
        assert_eq!(
            sasl.gssapi_setup(&listeners).unwrap(),
            Some(GssapiSetup { keytab: None })
        );
        sasl.apply(
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config",
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true \
             storeKey=true keyTab=\"/no/such/kafka.keytab\" principal=\"kafka/h@R\";",
        )
        .unwrap();
        let missing = sasl.gssapi_setup(&listeners).unwrap_err().to_string();
        assert!(missing.contains("/no/such/kafka.keytab"), "{missing}");
        sasl.apply("sasl.enabled.mechanisms", "OAUTHBEARER")
            .unwrap();
        assert_eq!(
            sasl.mechanisms_for("SASL_PLAINTEXT"),
            &[Mechanism::OAuthBearer]
        );
        assert!(sasl.apply("sasl.enabled.mechanisms", " ").is_err());
    }

    #[test]
    fn oauthbearer_jaas_options_reach_the_unsecured_validator() {
        let mut sasl = SaslConfig::default();
        sasl.apply(
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"admin\" unsecuredValidatorRequiredScope=\"a b\";",
        )
        .unwrap();
        let security::oauth::Validator::Unsecured(options) = sasl.oauth.validator("SASL_PLAINTEXT")
        else {
            panic!("unsecured expected");
        };
        assert_eq!(options.required_scopes, ["a", "b"]);
        sasl.apply("sasl.enabled.mechanisms", "PLAIN,OAUTHBEARER")
            .unwrap();
        sasl.apply("sasl.oauthbearer.jwks.endpoint.url", "https://idp/keys")
            .unwrap();
        let listeners = [String::from("SASL_PLAINTEXT")];
        assert!(sasl.check_oauth(&listeners).is_err());
        sasl.apply("sasl.enabled.mechanisms", "PLAIN").unwrap();
        assert!(sasl.check_oauth(&listeners).is_ok());
    }

    #[test]
    fn bad_jaas_is_an_error_that_hides_the_secret() {
        let mut sasl = SaslConfig::default();
        for bad in [
            "",
            "Module",
            "Module required",
            "Module required user_a=\"x",
            "Module sometimes user_a=x;",
            "Module required user_a;",
            "Module required =x;",
        ] {
            let err = sasl.apply("sasl.jaas.config", bad);
            assert!(err.is_err(), "{bad:?}");
        }
        let err = sasl
            .apply("sasl.jaas.config", "Module required user_a=\"topsecret")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("topsecret"), "{err}");
        let modules = parse_jaas("A required k=v; B optional;").unwrap();
        assert_eq!(modules.len(), 2);
        assert_eq!(modules[0].options, vec![("k".into(), "v".into())]);
    }

    #[test]
    fn bootstrap_scram_uses_kafka_storage_syntax() {
        let parsed = parse_bootstrap(
            "rill.sasl.bootstrap.scram",
            "SCRAM-SHA-512=[name=admin,password=admin-secret]; SCRAM-SHA-256=[name=\"bob\",password=\"b,pw\",iterations=8192]",
        );
        // A comma inside a quoted password is not supported: fields split on ','.
        assert!(parsed.is_err());
        let parsed = parse_bootstrap(
            "k",
            "SCRAM-SHA-512=[name=admin,password=admin-secret];SCRAM-SHA-256=[name=\"bob\",password=\"bpw\",iterations=8192]",
        )
        .unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].mechanism, ScramMechanism::Sha512);
        assert_eq!(parsed[0].name, "admin");
        assert_eq!(parsed[0].iterations, 4096);
        assert_eq!(parsed[1].password, "bpw");
        assert_eq!(parsed[1].iterations, 8192);
        assert!(!format!("{parsed:?}").contains("admin-secret"));
        for bad in [
            "SCRAM-SHA-1=[name=a,password=b]",
            "SCRAM-SHA-512=name=a,password=b",
            "SCRAM-SHA-512=[password=b]",
            "SCRAM-SHA-512=[name=a]",
            "SCRAM-SHA-512=[name=a,password=b,iterations=10]",
            "SCRAM-SHA-512=[name=a,salt=x,saltedpassword=y]",
        ] {
            assert!(parse_bootstrap("k", bad).is_err(), "{bad}");
        }
        let mut sasl = SaslConfig::default();
        assert!(sasl.apply("connections.max.reauth.ms", "-1").is_err());
        sasl.apply("connections.max.reauth.ms", "3000").unwrap();
        assert_eq!(sasl.max_reauth_ms, 3000);
        assert!(sasl.apply("rill.sasl.handshake.timeout.ms", "0").is_err());
    }
}

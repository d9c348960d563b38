//! SASL mechanisms as pure state machines: bytes from the client in, bytes
//! for the client (or a verdict) out; no I/O, no clock, no broker state
//! beyond the credentials a [`CredentialSource`] hands over.
//!
//! - [`plain`]: PLAIN (RFC 4616), checked against the JAAS users of the
//!   listener or, failing that, a user's stored SCRAM credential.
//! - [`scram`]: SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677)
//!   without channel binding, as Kafka offers them.
//! - [`oauthbearer`]: OAUTHBEARER (RFC 7628), the bearer token checked by
//!   the broker's validator ([`crate::oauth`]). Never offered unless named.
//! - [`client`]: the client side of PLAIN and SCRAM, for the broker's own
//!   logins to other brokers.
//! - [`gssapi`]: GSSAPI (RFC 4752), Kerberos through the acceptor the
//!   credential source hands over ([`crate::kerberos`]). Never offered
//!   unless named.
//!
//! The client messages are parsed by pure functions
//! ([`plain::parse`], [`scram::parse_client_first`],
//! [`scram::parse_client_final`], [`oauthbearer::parse`]) that never panic
//! on any input: the fuzz targets call them directly.

pub mod client;
pub mod gssapi;
pub mod oauthbearer;
pub mod plain;
pub mod scram;

pub use cluster::metadata::ScramCredential;
use std::fmt;
use std::str::FromStr;

/// A SASL mechanism rill serves, by Kafka's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    /// `PLAIN`: user name and password in the clear (use it over TLS).
    Plain,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    Scram(ScramMechanism),
    /// `OAUTHBEARER`: a bearer token (a JWT) from an identity provider.
    OAuthBearer,
    /// `GSSAPI`: Kerberos.
    Gssapi,
}

/// The SCRAM hash functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256` (Kafka's number 1).
    Sha256,
    /// `SCRAM-SHA-512` (Kafka's number 2).
    Sha512,
}

/// Kafka's smallest accepted SCRAM iteration count.
pub const SCRAM_MIN_ITERATIONS: i32 = 4096;
/// Kafka's largest accepted SCRAM iteration count.
pub const SCRAM_MAX_ITERATIONS: i32 = 16384;

impl ScramMechanism {
    /// Both, strongest first.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha512, ScramMechanism::Sha256];

    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's number (`ScramMechanism` in the admin API and the metadata
    /// records).
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism of Kafka's number.
    pub fn from_kafka_type(number: i8) -> Option<ScramMechanism> {
        match number {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// The mechanism number as the metadata records store it.
    pub fn record_type(self) -> u8 {
        self.kafka_type().unsigned_abs()
    }
}

impl Mechanism {
    /// The mechanisms a SASL listener offers when none are named. Not
    /// OAUTHBEARER: its default validator trusts unsigned tokens, so it is
    /// offered only where an operator names it.
    pub const DEFAULT: [Mechanism; 3] = [
        Mechanism::Plain,
        Mechanism::Scram(ScramMechanism::Sha256),
        Mechanism::Scram(ScramMechanism::Sha512),
    ];

    /// Every mechanism rill serves.
    pub const ALL: [Mechanism; 5] = [
        Mechanism::Plain,
        Mechanism::Scram(ScramMechanism::Sha256),
        Mechanism::Scram(ScramMechanism::Sha512),
        Mechanism::OAuthBearer,
        Mechanism::Gssapi,
    ];

    /// Kafka's name (`SCRAM-SHA-512`).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
            Mechanism::Gssapi => "GSSAPI",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mechanism {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let wanted = text.trim();
        if let Some(m) = Mechanism::ALL.into_iter().find(|m| m.name() == wanted) {
            return Ok(m);
        }
        Err(format!(
            "unknown SASL mechanism {wanted:?} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI)"
        ))
    }
}

/// Where the mechanisms find users: the listener's JAAS users (PLAIN),
/// the metadata image's SCRAM credentials, the listener's token
/// validator (OAUTHBEARER), and the broker's Kerberos (GSSAPI).
pub trait CredentialSource {
    /// The password of a user the JAAS config names (`user_<name>=...`).
    fn plain_password(&self, user: &str) -> Option<String>;
    /// A user's stored SCRAM credential for a mechanism.
    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
    /// Who an OAUTHBEARER token names, and until when; `Err` says why it
    /// is refused (it reaches the client: never a secret).
    fn validate_token(&self, token: &str) -> Result<TokenIdentity, String>;
    /// A new GSS-API acceptor context for a GSSAPI exchange.
    fn gss_acceptor(&self) -> Result<Box<dyn gssapi::GssAcceptor>, String> {
        Err(String::from("Kerberos is not configured on this broker"))
    }
    /// The user name of a Kerberos principal
    /// (`sasl.kerberos.principal.to.local.rules`).
    fn kerberos_short_name(&self, principal: &str) -> Result<String, String> {
        Err(format!("no Kerberos name rules for {principal}"))
    }
}

/// What a valid bearer token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenIdentity {
    /// The principal's name (its `sub` claim, or the one configured).
    pub principal: String,
    /// When it expires, wall-clock ms since the epoch.
    pub expires_at_ms: i64,
}

/// Why an exchange failed. The text goes to the client in SaslAuthenticate's
/// `error_message` (with SASL_AUTHENTICATION_FAILED or ILLEGAL_SASL_STATE),
/// so it never says whether the user exists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// The client's message is not what the mechanism expects.
    #[error("malformed {mechanism} message: {reason}")]
    Malformed {
        /// The mechanism.
        mechanism: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Wrong user name or password (or proof).
    #[error("Authentication failed: Invalid username or password ({mechanism})")]
    InvalidCredentials {
        /// The mechanism.
        mechanism: &'static str,
    },
    /// A SCRAM error named by RFC 5802's `server-error-value`.
    #[error("{mechanism} authentication failed: e={value}")]
    Scram {
        /// The mechanism.
        mechanism: &'static str,
        /// RFC 5802's `server-error-value` (`invalid-proof`, ...).
        value: &'static str,
    },
    /// An OAUTHBEARER token the validator refused.
    #[error("Authentication failed: invalid OAUTHBEARER token: {reason}")]
    InvalidToken {
        /// Why (expired, bad signature, ...).
        reason: String,
    },
    /// A Kerberos failure (a ticket the keytab cannot decrypt, a replay,
    /// a principal no rule names), in the library's words.
    #[error("GSSAPI authentication failed: {reason}")]
    Gssapi {
        /// Why.
        reason: String,
    },
    /// A message after the exchange ended.
    #[error("unexpected {mechanism} message: the exchange is over")]
    IllegalState {
        /// The mechanism.
        mechanism: &'static str,
    },
}

impl SaslError {
    /// Whether Kafka answers it ILLEGAL_SASL_STATE rather than
    /// SASL_AUTHENTICATION_FAILED.
    pub fn is_illegal_state(&self) -> bool {
        matches!(self, SaslError::IllegalState { .. })
    }
}

/// What one client message leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes; the exchange goes on.
    Continue(Vec<u8>),
    /// Authenticated as `user`; send `response` (empty for PLAIN).
    Done {
        /// The authenticated user name.
        user: String,
        /// The last server message.
        response: Vec<u8>,
        /// When the credential expires (a bearer token's `exp`), wall-clock
        /// ms; `None` for passwords.
        expires_at_ms: Option<i64>,
    },
}

/// One connection's server side of an exchange.
pub enum SaslServer {
    /// PLAIN: one message.
    Plain(plain::PlainServer),
    /// SCRAM: two messages.
    Scram(scram::ScramServer),
    /// OAUTHBEARER: one message (two when the token is refused).
    OAuthBearer(oauthbearer::OAuthBearerServer),
    /// GSSAPI: the context tokens, then the security layer choice.
    Gssapi(gssapi::GssapiServer),
}

impl fmt::Debug for SaslServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The exchange holds nonces and keys: only its mechanism is shown.
        write!(f, "SaslServer({})", self.mechanism())
    }
}

impl SaslServer {
    /// A new exchange of `mechanism`.
    pub fn new(mechanism: Mechanism) -> SaslServer {
        match mechanism {
            Mechanism::Plain => SaslServer::Plain(plain::PlainServer::default()),
            Mechanism::Scram(m) => SaslServer::Scram(scram::ScramServer::new(m)),
            Mechanism::OAuthBearer => {
                SaslServer::OAuthBearer(oauthbearer::OAuthBearerServer::default())
            }
            Mechanism::Gssapi => SaslServer::Gssapi(gssapi::GssapiServer::default()),
        }
    }

    /// The mechanism.
    pub fn mechanism(&self) -> Mechanism {
        match self {
            SaslServer::Plain(_) => Mechanism::Plain,
            SaslServer::Scram(s) => Mechanism::Scram(s.mechanism()),
            SaslServer::OAuthBearer(_) => Mechanism::OAuthBearer,
            SaslServer::Gssapi(_) => Mechanism::Gssapi,
        }
    }

    /// Handles the client's next message.
    pub fn step(
        &mut self,
        message: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<Step, SaslError> {
        match self {
            SaslServer::Plain(s) => s.step(message, credentials),
            SaslServer::Scram(s) => s.step(message, credentials),
            SaslServer::OAuthBearer(s) => s.step(message, credentials),
            SaslServer::Gssapi(s) => s.step(message, credentials),
        }
    }
}

/// Compares two secrets in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use std::collections::BTreeMap;
    use std::rc::Rc;

    /// Makes a GSS-API acceptor context.
    pub type GssFactory = Rc<dyn Fn() -> Box<dyn gssapi::GssAcceptor>>;

    /// Credentials held in maps.
    #[derive(Default)]
    pub struct Users {
        pub plain: BTreeMap<String, String>,
        pub scram: BTreeMap<(String, ScramMechanism), ScramCredential>,
        /// Token → (principal, expiry ms).
        pub tokens: BTreeMap<String, (String, i64)>,
        /// GSSAPI's acceptor contexts.
        pub gss: Option<GssFactory>,
        /// The default Kerberos realm (`EXAMPLE.COM` when unset).
        pub realm: Option<String>,
    }

    impl CredentialSource for Users {
        fn plain_password(&self, user: &str) -> Option<String> {
            self.plain.get(user).cloned()
        }
        fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
            self.scram.get(&(user.to_string(), mechanism)).cloned()
        }
        fn validate_token(&self, token: &str) -> Result<TokenIdentity, String> {
            let (principal, expires_at_ms) = self
                .tokens
                .get(token)
                .cloned()
                .ok_or_else(|| String::from("unknown token"))?;
            Ok(TokenIdentity {
                principal,
                expires_at_ms,
            })
        }
        fn gss_acceptor(&self) -> Result<Box<dyn gssapi::GssAcceptor>, String> {
            let make = self.gss.as_ref().ok_or("Kerberos is not configured")?;
            Ok(make())
        }
        fn kerberos_short_name(&self, principal: &str) -> Result<String, String> {
            let realm = self.realm.as_deref().unwrap_or("EXAMPLE.COM");
            crate::kerberos::rules::ShortNamer::parse("DEFAULT", realm)?.short_name(principal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_are_kafkas() {
        for m in Mechanism::ALL {
            assert_eq!(m.name().parse::<Mechanism>(), Ok(m));
        }
        assert!("KERBEROS"
            .parse::<Mechanism>()
            .unwrap_err()
            .contains("unknown SASL mechanism"));
        assert!("scram-sha-256".parse::<Mechanism>().is_err());
        for m in ScramMechanism::ALL {
            assert_eq!(ScramMechanism::from_kafka_type(m.kafka_type()), Some(m));
        }
        assert_eq!(ScramMechanism::Sha512.record_type(), 2);
        assert_eq!(ScramMechanism::from_kafka_type(0), None);
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}

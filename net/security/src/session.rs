//! One connection's identity: the listener it came in on, its peer, and the
//! principal it authenticated as (Kafka's `KafkaPrincipal`, `User:name`).

use super::sasl::{CredentialSource, Mechanism, SaslError, SaslServer, Step};
use super::SecurityProtocol;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// An authenticated identity, as ACLs and quotas name it (`User:alice`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    /// The principal type; Kafka's built-in one is `User`.
    pub kind: String,
    /// The name within the type.
    pub name: String,
}

impl Principal {
    /// `User:name`.
    pub fn user(name: &str) -> Principal {
        Principal {
            kind: String::from("User"),
            name: name.to_string(),
        }
    }

    /// `User:ANONYMOUS`: every client of a PLAINTEXT listener, and a TLS
    /// client without a certificate.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }

    /// Parses `Type:name` (Kafka's `super.users` and ACL principal syntax).
    pub fn parse(text: &str) -> Option<Principal> {
        let (kind, name) = text.trim().split_once(':')?;
        (!kind.is_empty()).then(|| Principal {
            kind: kind.to_string(),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// What the broker knows of one connection's client. Shared (`Rc`) by the
/// connection and every request it reads; the principal changes when SASL
/// authentication (or re-authentication) succeeds.
#[derive(Debug)]
pub struct Session {
    /// The listener's name (`PLAINTEXT`, `SASL_SSL`, `INTERNAL`, ...).
    pub listener: String,
    /// How that listener secures its connections.
    pub protocol: SecurityProtocol,
    /// The client's address, when the socket still had one.
    pub peer: Option<IpAddr>,
    /// The client's port, when the socket still had one (KIP-714's
    /// `client_source_port`).
    pub peer_port: Option<u16>,
    /// The client software's name and version from its ApiVersions
    /// request (v3+), KIP-714's `client_software_name` / `_version`.
    client_software: RefCell<Option<(String, String)>>,
    principal: RefCell<Principal>,
    /// Whether the client may make requests beyond the SASL exchange: at once
    /// on PLAINTEXT and SSL, after SaslAuthenticate succeeds on SASL ones.
    authenticated: Cell<bool>,
    /// The SASL exchange in progress (after SaslHandshake, until
    /// SaslAuthenticate succeeds or fails).
    exchange: RefCell<Option<SaslServer>>,
    /// When the authentication stops holding (`connections.max.reauth.ms`,
    /// KIP-368): past it, only a re-authentication is served.
    expires_at: Cell<Option<Instant>>,
    /// Until when the connection reads no request (a quota throttle,
    /// KIP-219's muted channel).
    muted_until: Cell<Option<Instant>>,
}

impl Session {
    /// A new connection's session: `principal` is `User:ANONYMOUS` unless
    /// TLS already named the client; SASL listeners start unauthenticated.
    pub fn new(
        listener: &str,
        protocol: SecurityProtocol,
        peer: Option<IpAddr>,
        principal: Principal,
    ) -> Session {
        Session {
            listener: listener.to_string(),
            protocol,
            peer,
            peer_port: None,
            client_software: RefCell::new(None),
            principal: RefCell::new(principal),
            authenticated: Cell::new(!protocol.uses_sasl()),
            exchange: RefCell::new(None),
            expires_at: Cell::new(None),
            muted_until: Cell::new(None),
        }
    }

    /// A session for work the broker does itself (tests, internal calls):
    /// PLAINTEXT, anonymous, authenticated.
    pub fn internal() -> Session {
        Session::new(
            "PLAINTEXT",
            SecurityProtocol::Plaintext,
            None,
            Principal::anonymous(),
        )
    }

    /// The session with the client's port (`client_source_port` of KIP-714).
    pub fn with_peer_port(mut self, port: Option<u16>) -> Session {
        self.peer_port = port;
        self
    }

    /// The client's address as Kafka shows it in groups' member lists
    /// (`InetAddress.toString()` of an unresolved address: `/` and the
    /// address, IPv6 in full); empty when the socket had none.
    pub fn client_host(&self) -> String {
        match self.peer {
            Some(IpAddr::V4(ip)) => format!("/{ip}"),
            Some(IpAddr::V6(ip)) => {
                let groups: Vec<String> = ip.segments().iter().map(|s| format!("{s:x}")).collect();
                format!("/{}", groups.join(":"))
            }
            None => String::new(),
        }
    }

    /// Records the client software an ApiVersions request named.
    pub fn set_client_software(&self, name: &str, version: &str) {
        *self.client_software.borrow_mut() = Some((name.to_string(), version.to_string()));
    }

    /// The client software's (name, version), if its ApiVersions named it.
    pub fn client_software(&self) -> Option<(String, String)> {
        self.client_software.borrow().clone()
    }

    /// The principal requests are made as.
    pub fn principal(&self) -> Principal {
        self.principal.borrow().clone()
    }

    /// Whether requests beyond the SASL exchange are allowed.
    pub fn is_authenticated(&self) -> bool {
        self.authenticated.get()
    }

    /// Reads no further request for `ms` (a quota throttle); a longer
    /// mute already in force stays.
    pub fn mute_for(&self, ms: u64) {
        let until = Instant::now() + Duration::from_millis(ms);
        if self.muted_until.get().is_none_or(|now| now < until) {
            self.muted_until.set(Some(until));
        }
    }

    /// How long the connection must still wait before reading, clearing
    /// the mute.
    pub fn take_mute(&self) -> Option<Duration> {
        let until = self.muted_until.take()?;
        let left = until.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// SASL authentication succeeded as `principal`.
    pub fn authenticate(&self, principal: Principal) {
        *self.principal.borrow_mut() = principal;
        self.authenticated.set(true);
    }

    /// SaslHandshake chose `mechanism`: a new exchange starts (and any
    /// unfinished one is dropped).
    pub fn start_sasl(&self, mechanism: Mechanism) {
        *self.exchange.borrow_mut() = Some(SaslServer::new(mechanism));
    }

    /// The mechanism of the exchange in progress.
    pub fn sasl_mechanism(&self) -> Option<Mechanism> {
        self.exchange.borrow().as_ref().map(SaslServer::mechanism)
    }

    /// Feeds one SaslAuthenticate token to the exchange in progress; `None`
    /// when no SaslHandshake started one. The exchange ends (is dropped)
    /// when it succeeds or fails.
    pub fn sasl_step(
        &self,
        token: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Option<Result<Step, SaslError>> {
        let mut exchange = self.exchange.borrow_mut();
        let outcome = exchange.as_mut()?.step(token, credentials);
        if !matches!(outcome, Ok(Step::Continue(_))) {
            *exchange = None;
        }
        Some(outcome)
    }

    /// Sets when the authentication stops holding (`None`: never).
    pub fn set_expiry(&self, expires_at: Option<Instant>) {
        self.expires_at.set(expires_at);
    }

    /// Whether the authentication no longer holds at `now` (KIP-368).
    pub fn is_expired(&self, now: Instant) -> bool {
        self.expires_at.get().is_some_and(|at| now >= at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_sessions_start_unauthenticated() {
        let plain = Session::new(
            "PLAINTEXT",
            SecurityProtocol::Plaintext,
            None,
            Principal::anonymous(),
        );
        assert!(plain.is_authenticated());
        assert_eq!(plain.principal().to_string(), "User:ANONYMOUS");
        let sasl = Session::new(
            "SASL_SSL",
            SecurityProtocol::SaslSsl,
            None,
            Principal::anonymous(),
        );
        assert!(!sasl.is_authenticated());
        sasl.authenticate(Principal::user("alice"));
        assert!(sasl.is_authenticated());
        assert_eq!(sasl.principal(), Principal::parse("User:alice").unwrap());
        assert_eq!(Principal::parse("nocolon"), None);
    }

    #[test]
    fn client_hosts_read_as_javas_inet_address() {
        let at = |peer: Option<IpAddr>| {
            Session::new(
                "PLAINTEXT",
                SecurityProtocol::Plaintext,
                peer,
                Principal::anonymous(),
            )
            .client_host()
        };
        assert_eq!(at("10.1.2.3".parse().ok()), "/10.1.2.3");
        assert_eq!(at("::1".parse().ok()), "/0:0:0:0:0:0:0:1");
        assert_eq!(at("fe80::a:1".parse().ok()), "/fe80:0:0:0:0:0:a:1");
        assert_eq!(at(None), "");
    }

    #[test]
    fn an_exchange_runs_until_it_ends_and_sessions_expire() {
        use crate::sasl::ScramCredential;
        struct Users;
        impl CredentialSource for Users {
            fn plain_password(&self, user: &str) -> Option<String> {
                (user == "alice").then(|| String::from("pw"))
            }
            fn scram(&self, _: &str, _: crate::sasl::ScramMechanism) -> Option<ScramCredential> {
                None
            }
            fn validate_token(&self, _: &str) -> Result<crate::sasl::TokenIdentity, String> {
                Err(String::from("no tokens here"))
            }
        }
        let sasl = Session::new(
            "SASL_PLAINTEXT",
            SecurityProtocol::SaslPlaintext,
            None,
            Principal::anonymous(),
        );
        assert!(sasl.sasl_step(b"\0alice\0pw", &Users).is_none());
        sasl.start_sasl(Mechanism::Plain);
        assert_eq!(sasl.sasl_mechanism(), Some(Mechanism::Plain));
        assert!(matches!(
            sasl.sasl_step(b"\0alice\0pw", &Users),
            Some(Ok(Step::Done { .. }))
        ));
        assert_eq!(sasl.sasl_mechanism(), None);
        let now = Instant::now();
        assert!(!sasl.is_expired(now));
        sasl.set_expiry(Some(now));
        assert!(sasl.is_expired(now));
        assert!(!sasl.is_expired(now - std::time::Duration::from_millis(1)));
    }
}

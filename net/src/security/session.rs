//! One connection's identity: the listener it came in on, its peer, and the
//! principal it authenticated as (Kafka's `KafkaPrincipal`, `User:name`).

use super::SecurityProtocol;
use std::cell::RefCell;
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
    principal: RefCell<Principal>,
    /// Whether the client may make requests beyond the SASL exchange: at once
    /// on PLAINTEXT and SSL, after SaslAuthenticate succeeds on SASL ones.
    authenticated: std::cell::Cell<bool>,
    /// Until when the connection reads no request (a quota throttle,
    /// KIP-219's muted channel).
    muted_until: std::cell::Cell<Option<Instant>>,
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
            principal: RefCell::new(principal),
            authenticated: std::cell::Cell::new(!protocol.uses_sasl()),
            muted_until: std::cell::Cell::new(None),
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
}

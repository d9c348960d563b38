//! Kafka's security protocols, by the names Kafka's configs use.

use std::fmt;
use std::str::FromStr;

/// How a listener's connections are secured (`listener.security.protocol.map`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    /// No TLS, no authentication: every client is `User:ANONYMOUS`.
    Plaintext,
    /// TLS; the principal is the client certificate's subject (mTLS) or
    /// `User:ANONYMOUS`.
    Ssl,
    /// SASL authentication over plain TCP.
    SaslPlaintext,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, in Kafka's order.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// Kafka's name (`SASL_SSL`).
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether the connection is wrapped in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether a client must authenticate with SASL before anything but
    /// ApiVersions, SaslHandshake and SaslAuthenticate.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SecurityProtocol {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let wanted = text.trim();
        SecurityProtocol::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| {
                format!("unknown security protocol {wanted:?} (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_names_round_trip() {
        for p in SecurityProtocol::ALL {
            assert_eq!(p.name().parse::<SecurityProtocol>(), Ok(p));
        }
        assert_eq!("sasl_ssl".parse(), Ok(SecurityProtocol::SaslSsl));
        assert!("TLS".parse::<SecurityProtocol>().is_err());
        assert!(SecurityProtocol::SaslSsl.uses_tls() && SecurityProtocol::SaslSsl.uses_sasl());
        assert!(
            !SecurityProtocol::Plaintext.uses_tls() && !SecurityProtocol::Plaintext.uses_sasl()
        );
    }
}

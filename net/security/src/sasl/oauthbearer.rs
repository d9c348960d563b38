//! OAUTHBEARER (RFC 7628, KIP-255): one client message carrying a bearer
//! token, checked by the broker's token validator (see [`crate::oauth`]).
//!
//! The client's initial response is a GS2 header and `\x01`-separated
//! `key=value` pairs: `n,a=<authzid>,\x01auth=Bearer <token>\x01\x01`, with
//! SASL extensions as further pairs (accepted and ignored, as Kafka's
//! default server ignores extensions no callback validates).
//!
//! A good token ends the exchange with an empty answer. A bad one is
//! answered, as RFC 7628 §3.2.2 and Kafka do, with an error challenge
//! (`{"status":"invalid_token"}`); the client acknowledges it with a lone
//! `\x01`, and only then does the exchange fail, with the reason.

use super::{CredentialSource, SaslError, Step};

const MECHANISM: &str = "OAUTHBEARER";
/// RFC 7628's key/value separator.
const KVSEP: char = '\u{1}';
/// The challenge that tells the client its token was refused.
const INVALID_TOKEN_CHALLENGE: &str = r#"{"status":"invalid_token"}"#;

/// A parsed client initial response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialResponse {
    /// The GS2 authorization id (empty: none).
    pub authzid: String,
    /// The bearer token.
    pub token: String,
    /// The SASL extensions (`key=value` pairs other than `auth`).
    pub extensions: Vec<(String, String)>,
}

fn malformed(reason: &str) -> SaslError {
    SaslError::Malformed {
        mechanism: MECHANISM,
        reason: reason.to_string(),
    }
}

/// Parses the client initial response. Never panics, whatever the bytes.
pub fn parse(message: &[u8]) -> Result<InitialResponse, SaslError> {
    let text = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
    let (header, pairs) = text
        .split_once(KVSEP)
        .ok_or_else(|| malformed("no key/value pairs after the GS2 header"))?;
    let authzid = parse_gs2_header(header)?;
    let pairs = pairs
        .strip_suffix("\u{1}\u{1}")
        .ok_or_else(|| malformed("the message must end with two \\x01"))?;
    let mut token = None;
    let mut extensions = Vec::new();
    for pair in pairs.split(KVSEP) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| malformed("a pair without '='"))?;
        if key == "auth" {
            token = Some(parse_auth(value)?);
        } else if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(malformed("an extension name that is not letters"));
        } else {
            extensions.push((key.to_string(), value.to_string()));
        }
    }
    let token = token.ok_or_else(|| malformed("no auth=Bearer pair"))?;
    Ok(InitialResponse {
        authzid,
        token,
        extensions,
    })
}

/// `n,,` or `n,a=<authzid>,` (no channel binding: `y` and `p` are refused).
fn parse_gs2_header(header: &str) -> Result<String, SaslError> {
    let rest = header
        .strip_prefix("n,")
        .ok_or_else(|| malformed("the GS2 header must start with \"n,\""))?;
    let authzid = rest
        .strip_suffix(',')
        .ok_or_else(|| malformed("the GS2 header must end with ','"))?;
    if authzid.is_empty() {
        return Ok(String::new());
    }
    let name = authzid
        .strip_prefix("a=")
        .ok_or_else(|| malformed("the GS2 authorization id must be a=<name>"))?;
    // RFC 5801: ',' and '=' in the name are escaped as =2C and =3D.
    Ok(name.replace("=2C", ",").replace("=3D", "="))
}

/// `Bearer <token>`, the scheme in any case.
fn parse_auth(value: &str) -> Result<String, SaslError> {
    let (scheme, token) = value
        .split_once(' ')
        .ok_or_else(|| malformed("auth must be \"Bearer <token>\""))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed("the auth scheme must be Bearer"));
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(malformed("an empty bearer token"));
    }
    Ok(token.to_string())
}

/// The server side of one OAUTHBEARER exchange.
#[derive(Debug, Default)]
pub struct OAuthBearerServer {
    state: State,
}

#[derive(Debug, Default)]
enum State {
    #[default]
    Start,
    /// The token was refused and the error challenge sent: the client's
    /// acknowledgement ends the exchange with this reason.
    Refused(String),
    Over,
}

impl OAuthBearerServer {
    /// Handles the client's next message.
    pub fn step(
        &mut self,
        message: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<Step, SaslError> {
        match std::mem::replace(&mut self.state, State::Over) {
            State::Start => match check(message, credentials) {
                Ok(step) => Ok(step),
                Err(SaslError::InvalidToken { reason }) => {
                    self.state = State::Refused(reason);
                    Ok(Step::Continue(INVALID_TOKEN_CHALLENGE.as_bytes().to_vec()))
                }
                Err(other) => Err(other),
            },
            State::Refused(reason) => {
                if message != b"\x01" {
                    return Err(malformed("expected \\x01 after the error challenge"));
                }
                Err(SaslError::InvalidToken { reason })
            }
            State::Over => Err(SaslError::IllegalState {
                mechanism: MECHANISM,
            }),
        }
    }
}

/// Validates the initial response's token.
fn check(message: &[u8], credentials: &dyn CredentialSource) -> Result<Step, SaslError> {
    let response = parse(message)?;
    let identity = credentials
        .validate_token(&response.token)
        .map_err(|reason| SaslError::InvalidToken { reason })?;
    // Kafka: an authorization id must name the token's own principal.
    if !response.authzid.is_empty() && response.authzid != identity.principal {
        return Err(SaslError::InvalidToken {
            reason: String::from("the authorization id is not the token's principal"),
        });
    }
    Ok(Step::Done {
        user: identity.principal,
        response: Vec::new(),
        expires_at_ms: Some(identity.expires_at_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::Users;
    use super::*;

    fn message(header: &str, pairs: &[&str]) -> Vec<u8> {
        let mut text = format!("{header}\u{1}");
        for pair in pairs {
            text.push_str(pair);
            text.push('\u{1}');
        }
        text.push('\u{1}');
        text.into_bytes()
    }

    #[test]
    fn initial_responses_parse_as_rfc_7628_writes_them() {
        let parsed = parse(&message("n,,", &["auth=Bearer abc.def.", "traceId=42"])).unwrap();
        assert_eq!(parsed.token, "abc.def.");
        assert_eq!(parsed.authzid, "");
        assert_eq!(parsed.extensions, [("traceId".into(), "42".into())]);
        let parsed = parse(&message("n,a=al=2Cice,", &["auth=bearer t"])).unwrap();
        assert_eq!(
            (parsed.authzid.as_str(), parsed.token.as_str()),
            ("al,ice", "t")
        );
        for bad in [
            message("y,,", &["auth=Bearer t"]),
            message("n,,", &["auth=Basic t"]),
            message("n,,", &["auth=Bearer "]),
            message("n,,", &["other=1"]),
            message("n,,", &["auth"]),
            message("n,,", &["auth=Bearer t", "bad-name=1"]),
            b"n,,\x01auth=Bearer t\x01".to_vec(),
            b"n,,".to_vec(),
            vec![0xff, 0xfe],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }

    fn users() -> Users {
        let mut users = Users::default();
        users.tokens.insert("good".into(), ("alice".into(), 5_000));
        users
    }

    #[test]
    fn a_valid_token_logs_its_principal_in() {
        let mut server = OAuthBearerServer::default();
        let step = server.step(&message("n,,", &["auth=Bearer good"]), &users());
        assert_eq!(
            step,
            Ok(Step::Done {
                user: "alice".into(),
                response: Vec::new(),
                expires_at_ms: Some(5_000),
            })
        );
        let again = server.step(&message("n,,", &["auth=Bearer good"]), &users());
        assert!(again.unwrap_err().is_illegal_state());
    }

    #[test]
    fn a_refused_token_gets_the_error_challenge_then_fails() {
        for (msg, reason) in [
            (message("n,,", &["auth=Bearer forged"]), "unknown token"),
            (
                message("n,a=bob,", &["auth=Bearer good"]),
                "the authorization id is not the token's principal",
            ),
        ] {
            let mut server = OAuthBearerServer::default();
            let challenge = server.step(&msg, &users()).unwrap();
            assert_eq!(
                challenge,
                Step::Continue(INVALID_TOKEN_CHALLENGE.as_bytes().to_vec())
            );
            let end = server.step(b"\x01", &users()).unwrap_err();
            assert_eq!(
                end,
                SaslError::InvalidToken {
                    reason: reason.into()
                }
            );
            assert!(!end.is_illegal_state());
        }
        let mut server = OAuthBearerServer::default();
        server
            .step(&message("n,,", &["auth=Bearer forged"]), &users())
            .unwrap();
        assert!(server.step(b"again", &users()).is_err());
    }
}

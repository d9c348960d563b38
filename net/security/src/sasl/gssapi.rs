//! GSSAPI (RFC 4752): Kerberos through the GSS-API, as Kafka serves it.
//!
//! The client's context tokens go to the acceptor until the context is
//! established (its last answer, Kerberos' mutual-authentication reply,
//! is sent, and the client answers it with an empty message). Then the
//! security layers are negotiated in two wrapped messages: the broker
//! offers "no security layer" only (Kafka never offers integrity or
//! confidentiality layers; TLS does that), the client takes it, and the
//! exchange ends. The authenticated principal is the context's initiator
//! (`alice@EXAMPLE.COM`), named by `sasl.kerberos.principal.to.local.rules`;
//! the authorization id the client sends is ignored, as by Kafka.
//!
//! The acceptor comes from the [`CredentialSource`] (the broker's
//! Kerberos, [`crate::kerberos`]), so that this state machine stays free
//! of I/O and its tests run without a KDC.

use super::{CredentialSource, SaslError, Step};
use crate::kerberos::{AcceptContext, Accepted};

const MECHANISM: &str = "GSSAPI";
/// RFC 4752's "no security layer" bit.
const LAYER_NONE: u8 = 0x01;

/// A GSS-API acceptor context for one exchange.
pub trait GssAcceptor {
    /// Accepts the client's next context token.
    fn accept(&mut self, token: &[u8]) -> Result<Accepted, String>;
    /// The client's principal, once the context is established.
    fn initiator(&self) -> Option<&str>;
    /// Wraps a message for the client (integrity only).
    fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String>;
    /// Unwraps a message from the client.
    fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String>;
}

impl GssAcceptor for AcceptContext {
    fn accept(&mut self, token: &[u8]) -> Result<Accepted, String> {
        AcceptContext::accept(self, token)
    }
    fn initiator(&self) -> Option<&str> {
        AcceptContext::initiator(self)
    }
    fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String> {
        AcceptContext::wrap(self, message)
    }
    fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
        AcceptContext::unwrap(self, token)
    }
}

/// Where the exchange is.
#[derive(Default)]
enum State {
    /// No token yet.
    #[default]
    Start,
    /// Context tokens are being exchanged.
    Establishing(Box<dyn GssAcceptor>),
    /// The context is established and its last token sent; the client's
    /// (empty) answer comes next.
    Established(Box<dyn GssAcceptor>),
    /// The security layer offer is sent; the client's choice comes next.
    Offered(Box<dyn GssAcceptor>),
    /// Over (authenticated or failed).
    Over,
}

/// The server side of one GSSAPI exchange.
#[derive(Default)]
pub struct GssapiServer {
    state: State,
}

fn failed(reason: String) -> SaslError {
    SaslError::Gssapi { reason }
}

impl GssapiServer {
    /// Handles the client's next message.
    pub fn step(
        &mut self,
        message: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<Step, SaslError> {
        match std::mem::replace(&mut self.state, State::Over) {
            State::Start => {
                let context = credentials.gss_acceptor().map_err(failed)?;
                self.establish(context, message)
            }
            State::Establishing(context) => self.establish(context, message),
            // RFC 4752: the client answers the context's last token with
            // an empty message; its content is not looked at.
            State::Established(context) => self.offer(context),
            State::Offered(context) => finish(context, message, credentials),
            State::Over => Err(SaslError::IllegalState {
                mechanism: MECHANISM,
            }),
        }
    }

    fn establish(
        &mut self,
        mut context: Box<dyn GssAcceptor>,
        token: &[u8],
    ) -> Result<Step, SaslError> {
        let accepted = context.accept(token).map_err(failed)?;
        if !accepted.complete {
            self.state = State::Establishing(context);
            return Ok(Step::Continue(accepted.output));
        }
        if accepted.output.is_empty() {
            return self.offer(context);
        }
        self.state = State::Established(context);
        Ok(Step::Continue(accepted.output))
    }

    /// Offers no security layer, with no maximum message size (there is
    /// no layer to size).
    fn offer(&mut self, mut context: Box<dyn GssAcceptor>) -> Result<Step, SaslError> {
        let offer = context.wrap(&[LAYER_NONE, 0, 0, 0]).map_err(failed)?;
        self.state = State::Offered(context);
        Ok(Step::Continue(offer))
    }
}

/// The client's choice of layer: the end of the exchange.
fn finish(
    mut context: Box<dyn GssAcceptor>,
    message: &[u8],
    credentials: &dyn CredentialSource,
) -> Result<Step, SaslError> {
    let choice = context.unwrap(message).map_err(failed)?;
    let Some(&layer) = choice.first().filter(|_| choice.len() >= 4) else {
        return Err(SaslError::Malformed {
            mechanism: MECHANISM,
            reason: String::from("the security layer choice is shorter than 4 bytes"),
        });
    };
    if layer & LAYER_NONE == 0 {
        return Err(failed(format!(
            "the client asks for security layers {layer:#04x}; only 0x01 (none) is offered"
        )));
    }
    let principal = context
        .initiator()
        .ok_or_else(|| failed(String::from("the context names no client principal")))?;
    let user = credentials.kerberos_short_name(principal).map_err(failed)?;
    Ok(Step::Done {
        user,
        response: Vec::new(),
        expires_at_ms: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::test_support::Users;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A context that takes `rounds` tokens, answering each with
    /// `reply-N`, and wraps by prefixing `w:`.
    struct Scripted {
        rounds: usize,
        seen: usize,
        last_reply: bool,
        initiator: &'static str,
        log: Rc<RefCell<Vec<String>>>,
    }

    impl GssAcceptor for Scripted {
        fn accept(&mut self, token: &[u8]) -> Result<Accepted, String> {
            if token == b"forged" {
                return Err(String::from("Decrypt integrity check failed"));
            }
            self.seen += 1;
            let complete = self.seen == self.rounds;
            let output = if complete && !self.last_reply {
                Vec::new()
            } else {
                format!("reply-{}", self.seen).into_bytes()
            };
            Ok(Accepted { output, complete })
        }
        fn initiator(&self) -> Option<&str> {
            (self.seen == self.rounds).then_some(self.initiator)
        }
        fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, String> {
            self.log.borrow_mut().push(format!("wrap {message:?}"));
            Ok([b"w:".as_slice(), message].concat())
        }
        fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
            token
                .strip_prefix(b"w:")
                .map(<[u8]>::to_vec)
                .ok_or_else(|| String::from("bad wrap token"))
        }
    }

    fn kerberos_users(rounds: usize, last_reply: bool) -> (Users, Rc<RefCell<Vec<String>>>) {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut users = Users::default();
        let shared = log.clone();
        users.gss = Some(Rc::new(move || {
            Box::new(Scripted {
                rounds,
                seen: 0,
                last_reply,
                initiator: "alice@EXAMPLE.COM",
                log: shared.clone(),
            }) as Box<dyn GssAcceptor>
        }));
        (users, log)
    }

    fn continued(step: Result<Step, SaslError>) -> Vec<u8> {
        match step {
            Ok(Step::Continue(bytes)) => bytes,
            other => panic!("expected Continue, got {other:?}"),
        }
    }

    #[test]
    fn a_kerberos_exchange_with_mutual_authentication() {
        let (users, log) = kerberos_users(1, true);
        let mut server = GssapiServer::default();
        assert_eq!(continued(server.step(b"ap-req", &users)), b"reply-1");
        let offer = continued(server.step(b"", &users));
        assert_eq!(offer, b"w:\x01\0\0\0", "no security layer, no size");
        let done = server.step(b"w:\x01\x00\x10\x00kafka@broker", &users);
        assert_eq!(
            done,
            Ok(Step::Done {
                user: String::from("alice"),
                response: Vec::new(),
                expires_at_ms: None
            })
        );
        assert_eq!(log.borrow().len(), 1);
        assert!(server.step(b"", &users).unwrap_err().is_illegal_state());
    }

    #[test]
    fn without_a_last_context_token_the_offer_comes_at_once() {
        let (users, _) = kerberos_users(2, false);
        let mut server = GssapiServer::default();
        assert_eq!(continued(server.step(b"t1", &users)), b"reply-1");
        assert_eq!(continued(server.step(b"t2", &users)), b"w:\x01\0\0\0");
        assert!(matches!(
            server.step(b"w:\x01\0\0\0", &users),
            Ok(Step::Done { .. })
        ));
    }

    #[test]
    fn refusals() {
        let (users, _) = kerberos_users(1, true);
        let mut forged = GssapiServer::default();
        let error = forged.step(b"forged", &users).unwrap_err();
        assert!(
            error.to_string().contains("integrity check failed"),
            "{error}"
        );

        let layer = |choice: &[u8]| {
            let mut server = GssapiServer::default();
            continued(server.step(b"ap-req", &users));
            continued(server.step(b"", &users));
            server.step(choice, &users)
        };
        assert!(layer(b"w:\x04\0\0\0")
            .unwrap_err()
            .to_string()
            .contains("0x04"));
        assert!(matches!(layer(b"w:\x01"), Err(SaslError::Malformed { .. })));
        assert!(layer(b"\x01\0\0\0").is_err(), "not wrapped");

        let mut unconfigured = GssapiServer::default();
        let error = unconfigured.step(b"ap-req", &Users::default()).unwrap_err();
        assert!(error.to_string().contains("not configured"), "{error}");
    }

    #[test]
    fn a_principal_no_rule_names_is_refused() {
        let (mut users, _) = kerberos_users(1, true);
        users.realm = Some(String::from("OTHER.ORG"));
        let mut server = GssapiServer::default();
        continued(server.step(b"ap-req", &users));
        continued(server.step(b"", &users));
        let error = server.step(b"w:\x01\0\0\0", &users).unwrap_err();
        assert!(error.to_string().contains("no rule"), "{error}");
    }
}

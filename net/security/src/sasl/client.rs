//! The client side of PLAIN and SCRAM, for the broker's own logins to
//! other brokers (replication, transaction markers, share state) on a
//! SASL inter-broker listener. A pure state machine, like the servers:
//! the caller carries the bytes.

use super::scram::{hash, hmac, salted_password};
use super::{Mechanism, ScramMechanism, SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use rand::Rng;

/// The client of one exchange.
pub struct SaslClient {
    user: String,
    password: String,
    state: ClientState,
}

enum ClientState {
    /// PLAIN, or SCRAM before its first message.
    Start(Mechanism),
    /// SCRAM: the first message is sent.
    SentFirst {
        mechanism: ScramMechanism,
        nonce: String,
        first_bare: String,
    },
    /// SCRAM: the final message is sent; the server's signature is due.
    SentFinal {
        mechanism: ScramMechanism,
        server_signature: Vec<u8>,
    },
    /// Over.
    Done,
}

impl std::fmt::Debug for SaslClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SaslClient({})", self.user)
    }
}

impl SaslClient {
    /// A client logging in as `user` with `password`; PLAIN and SCRAM only.
    pub fn new(mechanism: Mechanism, user: &str, password: &str) -> Result<SaslClient, String> {
        if !matches!(mechanism, Mechanism::Plain | Mechanism::Scram(_)) {
            return Err(format!(
                "brokers log in to each other with PLAIN or SCRAM, not {mechanism}"
            ));
        }
        Ok(SaslClient {
            user: user.to_string(),
            password: password.to_string(),
            state: ClientState::Start(mechanism),
        })
    }

    /// The first message.
    pub fn first(&mut self) -> Vec<u8> {
        match std::mem::replace(&mut self.state, ClientState::Done) {
            ClientState::Start(Mechanism::Scram(mechanism)) => {
                let nonce: String = rand::thread_rng()
                    .sample_iter(&rand::distributions::Alphanumeric)
                    .take(32)
                    .map(char::from)
                    .collect();
                let first_bare = format!("n={},r={nonce}", escape(&self.user));
                let message = format!("n,,{first_bare}").into_bytes();
                self.state = ClientState::SentFirst {
                    mechanism,
                    nonce,
                    first_bare,
                };
                message
            }
            _ => format!("\0{}\0{}", self.user, self.password).into_bytes(),
        }
    }

    /// The server's answer: the next message, or `None` when the exchange
    /// is over (SCRAM's server signature checked).
    pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match std::mem::replace(&mut self.state, ClientState::Done) {
            ClientState::SentFirst {
                mechanism,
                nonce,
                first_bare,
            } => {
                let (message, server_signature) =
                    self.scram_final(mechanism, &nonce, &first_bare, server)?;
                self.state = ClientState::SentFinal {
                    mechanism,
                    server_signature,
                };
                Ok(Some(message))
            }
            ClientState::SentFinal {
                mechanism,
                server_signature,
            } => {
                let text = std::str::from_utf8(server).map_err(|_| "a non-UTF-8 server-final")?;
                let verifier = text
                    .strip_prefix("v=")
                    .ok_or_else(|| format!("{} refused the login: {text}", mechanism.name()))?;
                let sent = BASE64
                    .decode(verifier)
                    .map_err(|_| "a bad server signature")?;
                if sent != server_signature {
                    return Err(String::from("the server's SCRAM signature does not match"));
                }
                Ok(None)
            }
            // PLAIN's one answer is empty; nothing follows.
            _ => Ok(None),
        }
    }

    /// SCRAM's client-final message for the server-first `server`, and
    /// the signature the server must then send.
    fn scram_final(
        &self,
        mechanism: ScramMechanism,
        nonce: &str,
        first_bare: &str,
        server: &[u8],
    ) -> Result<(Vec<u8>, Vec<u8>), String> {
        let server_first = std::str::from_utf8(server).map_err(|_| "a non-UTF-8 server-first")?;
        let field = |key: &str| {
            server_first
                .split(',')
                .find_map(|part| part.strip_prefix(key))
                .ok_or_else(|| format!("server-first has no {key}: {server_first}"))
        };
        let combined = field("r=")?;
        if !combined.starts_with(nonce) || combined.len() == nonce.len() {
            return Err(String::from("the server's nonce does not extend ours"));
        }
        let salt = BASE64.decode(field("s=")?).map_err(|_| "a bad salt")?;
        let iterations: i32 = field("i=")?.parse().map_err(|_| "a bad iteration count")?;
        if !(SCRAM_MIN_ITERATIONS..=SCRAM_MAX_ITERATIONS).contains(&iterations) {
            return Err(format!(
                "{iterations} SCRAM iterations are out of Kafka's range"
            ));
        }
        let salted = salted_password(
            mechanism,
            self.password.as_bytes(),
            &salt,
            iterations.unsigned_abs(),
        );
        let without_proof = format!("c=biws,r={combined}");
        let auth_message = format!("{first_bare},{server_first},{without_proof}");
        let client_key = hmac(mechanism, &salted, b"Client Key");
        let signature = hmac(
            mechanism,
            &hash(mechanism, &client_key),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac(mechanism, &salted, b"Server Key");
        let server_signature = hmac(mechanism, &server_key, auth_message.as_bytes());
        let message = format!("{without_proof},p={}", BASE64.encode(proof));
        Ok((message.into_bytes(), server_signature))
    }
}

/// RFC 5802's `saslname`: `=` and `,` escaped.
fn escape(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::scram::credential_from_password;
    use crate::sasl::test_support::Users;
    use crate::sasl::{SaslServer, Step};

    /// Runs a client against rill's own server with `users`.
    fn exchange(
        mut client: SaslClient,
        mechanism: Mechanism,
        users: &Users,
    ) -> Result<String, String> {
        let mut server = SaslServer::new(mechanism);
        let mut message = client.first();
        loop {
            match server.step(&message, users).map_err(|e| e.to_string())? {
                Step::Continue(reply) => {
                    message = client.step(&reply)?.ok_or("the client ended early")?;
                }
                Step::Done { user, response, .. } => {
                    assert_eq!(client.step(&response)?, None);
                    return Ok(user);
                }
            }
        }
    }

    #[test]
    fn logs_in_to_rills_servers() {
        let mut users = Users::default();
        users.plain.insert("broker".into(), "pw".into());
        for m in ScramMechanism::ALL {
            let credential = credential_from_password(m, "s3cret,=x", 4096);
            users.scram.insert(("inter=broker".into(), m), credential);
        }
        let plain = SaslClient::new(Mechanism::Plain, "broker", "pw").unwrap();
        assert_eq!(exchange(plain, Mechanism::Plain, &users).unwrap(), "broker");
        for m in ScramMechanism::ALL {
            let mechanism = Mechanism::Scram(m);
            let client = SaslClient::new(mechanism, "inter=broker", "s3cret,=x").unwrap();
            assert_eq!(exchange(client, mechanism, &users).unwrap(), "inter=broker");
            let wrong = SaslClient::new(mechanism, "inter=broker", "nope").unwrap();
            assert!(exchange(wrong, mechanism, &users).is_err());
        }
        assert!(SaslClient::new(Mechanism::Gssapi, "a", "b").is_err());
    }

    #[test]
    fn a_forged_server_signature_is_refused() {
        let mut client =
            SaslClient::new(Mechanism::Scram(ScramMechanism::Sha256), "u", "p").unwrap();
        let first = String::from_utf8(client.first()).unwrap();
        let nonce = first.rsplit("r=").next().unwrap().to_string();
        let server_first = format!("r={nonce}xyz,s={},i=4096", BASE64.encode(b"salt"));
        assert!(client.step(server_first.as_bytes()).unwrap().is_some());
        let forged = format!("v={}", BASE64.encode([0u8; 32]));
        assert!(client
            .step(forged.as_bytes())
            .unwrap_err()
            .contains("does not match"));
        let mut short =
            SaslClient::new(Mechanism::Scram(ScramMechanism::Sha256), "u", "p").unwrap();
        short.first();
        let same_nonce = b"r=abc,s=c2FsdA==,i=4096";
        assert!(
            short.step(same_nonce).is_err(),
            "a nonce that does not extend ours"
        );
    }
}

//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side,
//! without channel binding (Kafka offers no `-PLUS` mechanism).
//!
//! ```text
//! client-first  n,[a=authzid],n=user,r=cnonce[,ext]
//! server-first  r=cnonce+snonce,s=base64(salt),i=iterations
//! client-final  c=base64(gs2-header),r=cnonce+snonce[,ext],p=base64(ClientProof)
//! server-final  v=base64(ServerSignature)
//! ```
//!
//! The server checks `H(ClientProof XOR HMAC(StoredKey, AuthMessage)) ==
//! StoredKey` and answers `HMAC(ServerKey, AuthMessage)`: it needs only the
//! stored credential, never the password. An unknown user gets a made-up
//! salt (derived from the name, so it is the same on every try) and fails
//! at the proof like a wrong password, as RFC 5802 §9 suggests, so that the
//! exchange does not tell which users exist.

use super::{constant_time_eq, CredentialSource, SaslError, ScramCredential, ScramMechanism, Step};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::Rng;
use sha2::{Digest, Sha256, Sha512};

/// Length of the server's part of the nonce.
const SERVER_NONCE_CHARS: usize = 32;

/// The client's first message (RFC 5802 `client-first-message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// `gs2-header` as sent (`n,,` or `y,,` or with `a=`), echoed in the
    /// final message's `c=`.
    pub gs2_header: String,
    /// The authorization id (`a=`), decoded.
    pub authzid: Option<String>,
    /// The user name (`n=`), decoded (`=2C` → `,`, `=3D` → `=`).
    pub username: String,
    /// The client's nonce (`r=`).
    pub nonce: String,
    /// Extensions after the nonce (`key=value`), as Kafka's
    /// `tokenauth=true`.
    pub extensions: Vec<(String, String)>,
    /// `client-first-message-bare`: what the AuthMessage starts with.
    pub bare: String,
}

/// The client's final message (RFC 5802 `client-final-message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    /// The channel binding data (`c=`), decoded.
    pub channel_binding: Vec<u8>,
    /// The whole nonce (`r=`).
    pub nonce: String,
    /// The proof (`p=`), decoded.
    pub proof: Vec<u8>,
    /// `client-final-message-without-proof`: the AuthMessage's end.
    pub without_proof: String,
}

fn malformed(reason: impl Into<String>) -> SaslError {
    SaslError::Malformed {
        mechanism: "SCRAM",
        reason: reason.into(),
    }
}

/// Decodes a `saslname`: `=2C` is `,`, `=3D` is `=`, any other `=` is an
/// error (RFC 5802 `invalid-username-encoding`).
fn decode_saslname(text: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(malformed("invalid-username-encoding")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn utf8(message: &[u8]) -> Result<&str, SaslError> {
    std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))
}

/// A `key=value` attribute with a one-letter key.
fn attribute(part: &str, key: char) -> Result<&str, SaslError> {
    let mut chars = part.chars();
    if chars.next() == Some(key) && chars.next() == Some('=') {
        Ok(&part[2..])
    } else {
        Err(malformed(format!("expected {key}=")))
    }
}

/// A nonce is printable ASCII without `,` (RFC 5802 `printable`).
fn check_nonce(nonce: &str) -> Result<(), SaslError> {
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(malformed("bad nonce"));
    }
    Ok(())
}

/// Parses `key=value` extensions; `m=` (mandatory extensions) is refused.
fn parse_extensions<'a>(
    parts: impl Iterator<Item = &'a str>,
) -> Result<Vec<(String, String)>, SaslError> {
    let mut out = Vec::new();
    for part in parts {
        let Some((key, value)) = part.split_once('=') else {
            return Err(malformed(format!("bad extension {part:?}")));
        };
        if key == "m" {
            return Err(SaslError::Scram {
                mechanism: "SCRAM",
                value: "extensions-not-supported",
            });
        }
        if key.is_empty() {
            return Err(malformed("empty extension name"));
        }
        out.push((key.to_string(), value.to_string()));
    }
    Ok(out)
}

/// Parses a `client-first-message`. Never panics, whatever the bytes.
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst, SaslError> {
    let text = utf8(message)?;
    let mut parts = text.splitn(3, ',');
    let flag = parts.next().unwrap_or_default();
    let authzid_part = parts.next().ok_or_else(|| malformed("no gs2 header"))?;
    let bare = parts.next().ok_or_else(|| malformed("no user name"))?;
    match flag {
        "n" | "y" => {}
        _ if flag.starts_with("p=") => {
            return Err(SaslError::Scram {
                mechanism: "SCRAM",
                value: "channel-binding-not-supported",
            })
        }
        _ => return Err(malformed("bad gs2 channel binding flag")),
    }
    let authzid = if authzid_part.is_empty() {
        None
    } else {
        Some(decode_saslname(attribute(authzid_part, 'a')?)?)
    };
    let mut fields = bare.split(',');
    let first = fields.next().unwrap_or_default();
    if first.starts_with("m=") {
        return Err(SaslError::Scram {
            mechanism: "SCRAM",
            value: "extensions-not-supported",
        });
    }
    let username = decode_saslname(attribute(first, 'n')?)?;
    if username.is_empty() {
        return Err(malformed("empty user name"));
    }
    let nonce = attribute(fields.next().unwrap_or_default(), 'r')?;
    check_nonce(nonce)?;
    let extensions = parse_extensions(fields)?;
    Ok(ClientFirst {
        gs2_header: format!("{flag},{authzid_part},"),
        authzid,
        username,
        nonce: nonce.to_string(),
        extensions,
        bare: bare.to_string(),
    })
}

/// Parses a `client-final-message`. Never panics, whatever the bytes.
pub fn parse_client_final(message: &[u8]) -> Result<ClientFinal, SaslError> {
    let text = utf8(message)?;
    let (without_proof, proof) = text
        .rsplit_once(",p=")
        .ok_or_else(|| malformed("no proof"))?;
    let mut fields = without_proof.split(',');
    let binding = attribute(fields.next().unwrap_or_default(), 'c')?;
    let channel_binding = BASE64
        .decode(binding)
        .map_err(|_| malformed("channel binding is not base64"))?;
    let nonce = attribute(fields.next().unwrap_or_default(), 'r')?;
    check_nonce(nonce)?;
    parse_extensions(fields)?;
    let proof = BASE64
        .decode(proof)
        .map_err(|_| malformed("proof is not base64"))?;
    Ok(ClientFinal {
        channel_binding,
        nonce: nonce.to_string(),
        proof,
        without_proof: without_proof.to_string(),
    })
}

/// `HMAC(key, data)` with the mechanism's hash.
pub fn hmac(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    // `new_from_slice` takes keys of any length for HMAC: it cannot fail.
    match mechanism {
        ScramMechanism::Sha256 => match Hmac::<Sha256>::new_from_slice(key) {
            Ok(mut mac) => {
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            Err(_) => Vec::new(),
        },
        ScramMechanism::Sha512 => match Hmac::<Sha512>::new_from_slice(key) {
            Ok(mut mac) => {
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            Err(_) => Vec::new(),
        },
    }
}

/// `H(data)`.
pub fn hash(mechanism: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

/// `SaltedPassword = Hi(password, salt, iterations)` (PBKDF2 with HMAC).
pub fn salted_password(
    mechanism: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => {
            pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec()
        }
        ScramMechanism::Sha512 => {
            pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec()
        }
    }
}

/// The stored credential of a salted password (what AlterUserScramCredentials
/// sends): `StoredKey = H(HMAC(SaltedPassword, "Client Key"))`,
/// `ServerKey = HMAC(SaltedPassword, "Server Key")`.
pub fn credential_from_salted(
    mechanism: ScramMechanism,
    salt: &[u8],
    iterations: i32,
    salted: &[u8],
) -> ScramCredential {
    let client_key = hmac(mechanism, salted, b"Client Key");
    ScramCredential {
        salt: salt.to_vec(),
        iterations,
        stored_key: hash(mechanism, &client_key),
        server_key: hmac(mechanism, salted, b"Server Key"),
    }
}

/// A new credential for `password` with a random 32-byte salt (the
/// bootstrap admin).
pub fn credential_from_password(
    mechanism: ScramMechanism,
    password: &str,
    iterations: i32,
) -> ScramCredential {
    let salt: [u8; 32] = rand::thread_rng().gen();
    let salted = salted_password(
        mechanism,
        password.as_bytes(),
        &salt,
        iterations.max(1).unsigned_abs(),
    );
    credential_from_salted(mechanism, &salt, iterations, &salted)
}

/// Whether `password` is the one `credential` was made from (PLAIN against
/// a SCRAM user).
pub fn password_matches(
    mechanism: ScramMechanism,
    password: &str,
    credential: &ScramCredential,
) -> bool {
    let Ok(iterations) = u32::try_from(credential.iterations) else {
        return false;
    };
    if iterations == 0 || iterations > super::SCRAM_MAX_ITERATIONS.unsigned_abs() {
        return false;
    }
    let salted = salted_password(mechanism, password.as_bytes(), &credential.salt, iterations);
    let derived =
        credential_from_salted(mechanism, &credential.salt, credential.iterations, &salted);
    constant_time_eq(&derived.stored_key, &credential.stored_key)
}

thread_local! {
    /// Key of the made-up salts of unknown users (per thread, per process).
    static FAKE_SALT_KEY: [u8; 32] = rand::thread_rng().gen();
}

/// A credential no password matches, with a salt that depends only on the
/// user name, for a user that does not exist.
fn fake_credential(mechanism: ScramMechanism, username: &str) -> ScramCredential {
    let key = FAKE_SALT_KEY.with(|k| *k);
    let mut salt = hmac(ScramMechanism::Sha256, &key, username.as_bytes());
    salt.truncate(16);
    let unguessable: [u8; 32] = rand::thread_rng().gen();
    ScramCredential {
        salt,
        iterations: super::SCRAM_MIN_ITERATIONS,
        stored_key: hash(mechanism, &unguessable),
        server_key: hmac(mechanism, &unguessable, b"Server Key"),
    }
}

/// A random nonce of printable characters without `,`.
fn server_nonce() -> String {
    rand::thread_rng()
        .sample_iter(&rand::distributions::Alphanumeric)
        .take(SERVER_NONCE_CHARS)
        .map(char::from)
        .collect()
}

/// Whether the client-final message's nonce `sent` answers the exchange
/// whose client nonce is `client` and whose combined nonce is `combined`.
///
/// RFC 5802 wants `combined`. librdkafka before 2.6.1 (confluentinc/
/// librdkafka#4895; Debian 12's kcat has 2.0.2) sends its own nonce once
/// more in front of it, and Kafka since 3.8.1 accepts that. So does rill,
/// that exact form and no other: the fresh server nonce is still in it, so
/// a final message from another exchange never matches.
fn nonce_matches(sent: &str, client: &str, combined: &str) -> bool {
    sent == combined || sent.strip_prefix(client) == Some(combined)
}

#[derive(Debug)]
enum State {
    /// Waiting for the client-first message.
    Initial,
    /// Server-first sent; waiting for the client-final message.
    SentFirst(Box<SentFirst>),
    /// Over (success or failure).
    Done,
}

/// What the final message is checked against.
#[derive(Debug)]
struct SentFirst {
    first: ClientFirst,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
    /// The user exists (else the credential is made up).
    known: bool,
}

/// The server side of one SCRAM exchange.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
    /// Fixed server nonce (tests); random when `None`.
    nonce: Option<String>,
}

impl ScramServer {
    /// A new exchange.
    pub fn new(mechanism: ScramMechanism) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::Initial,
            nonce: None,
        }
    }

    /// An exchange with a fixed server nonce (RFC test vectors).
    pub fn with_server_nonce(mechanism: ScramMechanism, nonce: &str) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::Initial,
            nonce: Some(nonce.to_string()),
        }
    }

    /// The mechanism.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    fn error(&self, value: &'static str) -> SaslError {
        SaslError::Scram {
            mechanism: self.mechanism.name(),
            value,
        }
    }

    /// Handles the client's next message; any error ends the exchange.
    pub fn step(
        &mut self,
        message: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<Step, SaslError> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Initial => self.first(message, credentials),
            State::SentFirst(sent) => self.last(message, &sent),
            State::Done => Err(SaslError::IllegalState {
                mechanism: self.mechanism.name(),
            }),
        }
    }

    fn first(
        &mut self,
        message: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<Step, SaslError> {
        let first = parse_client_first(message)?;
        if first
            .authzid
            .as_ref()
            .is_some_and(|authzid| *authzid != first.username)
        {
            // Kafka: an authorization id other than the user is refused.
            return Err(SaslError::InvalidCredentials {
                mechanism: self.mechanism.name(),
            });
        }
        if first
            .extensions
            .iter()
            .any(|(k, v)| k == "tokenauth" && v == "true")
        {
            // Delegation tokens are not kept by rill.
            return Err(SaslError::InvalidCredentials {
                mechanism: self.mechanism.name(),
            });
        }
        let stored = credentials.scram(&first.username, self.mechanism);
        let known = stored.is_some();
        let credential = stored.unwrap_or_else(|| fake_credential(self.mechanism, &first.username));
        let nonce = format!(
            "{}{}",
            first.nonce,
            self.nonce.clone().unwrap_or_else(server_nonce)
        );
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let reply = server_first.clone().into_bytes();
        self.state = State::SentFirst(Box::new(SentFirst {
            first,
            server_first,
            nonce,
            credential,
            known,
        }));
        Ok(Step::Continue(reply))
    }

    fn last(&mut self, message: &[u8], sent: &SentFirst) -> Result<Step, SaslError> {
        let SentFirst {
            first,
            server_first,
            nonce,
            credential,
            known,
        } = sent;
        let known = *known;
        let last = parse_client_final(message)?;
        if last.channel_binding != first.gs2_header.as_bytes() {
            return Err(self.error("channel-bindings-dont-match"));
        }
        if !nonce_matches(&last.nonce, &first.nonce, nonce) {
            return Err(self.error("other-error"));
        }
        let auth_message = format!("{},{server_first},{}", first.bare, last.without_proof);
        let signature = hmac(
            self.mechanism,
            &credential.stored_key,
            auth_message.as_bytes(),
        );
        if last.proof.len() != signature.len() {
            return Err(self.error("invalid-proof"));
        }
        let client_key: Vec<u8> = last
            .proof
            .iter()
            .zip(&signature)
            .map(|(p, s)| p ^ s)
            .collect();
        let matches = constant_time_eq(&hash(self.mechanism, &client_key), &credential.stored_key);
        if !known || !matches {
            return Err(self.error("invalid-proof"));
        }
        let server_signature = hmac(
            self.mechanism,
            &credential.server_key,
            auth_message.as_bytes(),
        );
        Ok(Step::Done {
            user: first.username.clone(),
            response: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
            expires_at_ms: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::Users;
    use super::*;

    /// RFC 7677 §3's example: user "user", password "pencil".
    const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    const SALT_B64: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
    const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc_users() -> Users {
        let salt = BASE64.decode(SALT_B64).unwrap();
        let salted = salted_password(ScramMechanism::Sha256, b"pencil", &salt, 4096);
        let mut users = Users::default();
        users.scram.insert(
            ("user".into(), ScramMechanism::Sha256),
            credential_from_salted(ScramMechanism::Sha256, &salt, 4096, &salted),
        );
        users
    }

    #[test]
    fn rfc7677_example_authenticates() {
        let users = rfc_users();
        let mut server = ScramServer::with_server_nonce(ScramMechanism::Sha256, SERVER_NONCE);
        let first = server.step(CLIENT_FIRST.as_bytes(), &users).unwrap();
        assert_eq!(
            first,
            Step::Continue(
                format!("r=rOprNGfwEbeRWgbNEkqO{SERVER_NONCE},s={SALT_B64},i=4096").into_bytes()
            )
        );
        let done = server.step(CLIENT_FINAL.as_bytes(), &users).unwrap();
        assert_eq!(
            done,
            Step::Done {
                user: "user".into(),
                response: SERVER_FINAL.as_bytes().to_vec(),
                expires_at_ms: None,
            }
        );
        assert!(server
            .step(b"again", &users)
            .unwrap_err()
            .is_illegal_state());
        assert!(password_matches(
            ScramMechanism::Sha256,
            "pencil",
            &users.scram[&("user".into(), ScramMechanism::Sha256)]
        ));
        assert!(!password_matches(
            ScramMechanism::Sha256,
            "pencil2",
            &users.scram[&("user".into(), ScramMechanism::Sha256)]
        ));
    }

    #[test]
    fn a_bad_proof_or_an_unknown_user_fails_the_same_way() {
        let users = rfc_users();
        let mut server = ScramServer::with_server_nonce(ScramMechanism::Sha256, SERVER_NONCE);
        server.step(CLIENT_FIRST.as_bytes(), &users).unwrap();
        let forged = CLIENT_FINAL.replace("p=dHzb", "p=dHzc");
        let err = server.step(forged.as_bytes(), &users).unwrap_err();
        assert_eq!(
            err,
            SaslError::Scram {
                mechanism: "SCRAM-SHA-256",
                value: "invalid-proof"
            }
        );
        // An unknown user gets a server-first too, with a stable salt.
        let salt_of = |name: &str| {
            let mut server = ScramServer::new(ScramMechanism::Sha512);
            match server
                .step(format!("n,,n={name},r=abc").as_bytes(), &users)
                .unwrap()
            {
                Step::Continue(bytes) => String::from_utf8(bytes)
                    .unwrap()
                    .split(",s=")
                    .nth(1)
                    .unwrap()
                    .to_string(),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(salt_of("ghost"), salt_of("ghost"));
        let mut server = ScramServer::with_server_nonce(ScramMechanism::Sha256, SERVER_NONCE);
        server
            .step(b"n,,n=ghost,r=rOprNGfwEbeRWgbNEkqO", &users)
            .unwrap();
        assert!(matches!(
            server.step(CLIENT_FINAL.as_bytes(), &users),
            Err(SaslError::Scram {
                value: "invalid-proof",
                ..
            })
        ));
    }

    #[test]
    fn the_nonce_and_channel_binding_must_match() {
        let users = rfc_users();
        let mut server = ScramServer::with_server_nonce(ScramMechanism::Sha256, SERVER_NONCE);
        server.step(CLIENT_FIRST.as_bytes(), &users).unwrap();
        let other_cb = CLIENT_FINAL.replace("c=biws", "c=eSws");
        assert!(matches!(
            server.step(other_cb.as_bytes(), &users),
            Err(SaslError::Scram {
                value: "channel-bindings-dont-match",
                ..
            })
        ));
        let mut server = ScramServer::with_server_nonce(ScramMechanism::Sha256, SERVER_NONCE);
        server.step(CLIENT_FIRST.as_bytes(), &users).unwrap();
        let other_nonce = CLIENT_FINAL.replace("r=rOpr", "r=xOpr");
        assert!(server.step(other_nonce.as_bytes(), &users).is_err());
    }

    #[test]
    fn old_librdkafkas_doubled_client_nonce_is_accepted_and_nothing_else() {
        let client = "rOprNGfwEbeRWgbNEkqO";
        let combined = format!("{client}{SERVER_NONCE}");
        assert!(nonce_matches(&combined, client, &combined));
        // librdkafka < 2.6.1: its nonce, then the server's combined one.
        assert!(nonce_matches(
            &format!("{client}{combined}"),
            client,
            &combined
        ));
        for wrong in [
            format!("x{combined}"),
            format!("{client}{client}{combined}"),
            client.to_string(),
            format!("{combined}{client}"),
            SERVER_NONCE.to_string(),
        ] {
            assert!(!nonce_matches(&wrong, client, &combined), "{wrong}");
        }
    }

    #[test]
    fn client_messages_parse_and_bad_ones_are_errors() {
        let first = parse_client_first(b"n,a=bob,n=bob=2Cjr=3D,r=xyz,tokenauth=true").unwrap();
        assert_eq!(first.username, "bob,jr=");
        assert_eq!(first.authzid.as_deref(), Some("bob"));
        assert_eq!(first.gs2_header, "n,a=bob,");
        assert_eq!(first.bare, "n=bob=2Cjr=3D,r=xyz,tokenauth=true");
        assert_eq!(
            first.extensions,
            vec![("tokenauth".to_string(), "true".to_string())]
        );
        for bad in [
            &b""[..],
            b"n",
            b"n,,",
            b"x,,n=a,r=b",
            b"n,,n=,r=b",
            b"n,,n=a=2X,r=b",
            b"n,,n=a,r=",
            b"n,,r=b,n=a",
            b"n,,m=x,n=a,r=b",
            b"n,,n=a,r=b,m=1",
            b"\xff,,n=a,r=b",
            b"n,,n=a,r=b\x01",
        ] {
            assert!(parse_client_first(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(
            parse_client_first(b"p=tls-unique,,n=a,r=b"),
            Err(SaslError::Scram {
                value: "channel-binding-not-supported",
                ..
            })
        ));
        let last = parse_client_final(CLIENT_FINAL.as_bytes()).unwrap();
        assert_eq!(last.channel_binding, b"n,,");
        assert_eq!(last.proof.len(), 32);
        for bad in [
            &b""[..],
            b"c=biws,r=abc",
            b"c=!!,r=abc,p=AAAA",
            b"c=biws,r=abc,p=!!",
            b"r=abc,c=biws,p=AAAA",
            b"c=biws,p=AAAA",
        ] {
            assert!(parse_client_final(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sha512_round_trip_with_a_generated_credential() {
        let mut users = Users::default();
        let credential = credential_from_password(ScramMechanism::Sha512, "s3cret", 4096);
        assert!(password_matches(
            ScramMechanism::Sha512,
            "s3cret",
            &credential
        ));
        users
            .scram
            .insert(("alice".into(), ScramMechanism::Sha512), credential.clone());
        let mut server = ScramServer::new(ScramMechanism::Sha512);
        let Step::Continue(server_first) =
            server.step(b"n,,n=alice,r=clientnonce", &users).unwrap()
        else {
            panic!("expected a challenge")
        };
        let server_first = String::from_utf8(server_first).unwrap();
        let nonce = attribute(server_first.split(',').next().unwrap(), 'r').unwrap();
        // The client's side, by the RFC's formulas.
        let salted = salted_password(ScramMechanism::Sha512, b"s3cret", &credential.salt, 4096);
        let client_key = hmac(ScramMechanism::Sha512, &salted, b"Client Key");
        let stored_key = hash(ScramMechanism::Sha512, &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("n=alice,r=clientnonce,{server_first},{without_proof}");
        let signature = hmac(ScramMechanism::Sha512, &stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let last = format!("{without_proof},p={}", BASE64.encode(&proof));
        let Step::Done { user, response, .. } = server.step(last.as_bytes(), &users).unwrap()
        else {
            panic!("expected success")
        };
        assert_eq!(user, "alice");
        let server_key = hmac(ScramMechanism::Sha512, &salted, b"Server Key");
        let expected = hmac(ScramMechanism::Sha512, &server_key, auth.as_bytes());
        assert_eq!(
            response,
            format!("v={}", BASE64.encode(expected)).into_bytes()
        );
    }
}

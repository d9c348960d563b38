//! SASL to the broker (`--security-protocol SASL_PLAINTEXT|SASL_SSL`):
//! SaslHandshake v1 then SaslAuthenticate, with PLAIN (RFC 4616),
//! SCRAM-SHA-256/512 (RFC 5802/7677) or OAUTHBEARER (RFC 7628: the
//! password is the bearer token; without one, an unsigned token for the
//! user), the client half of what rill's listeners check. Each connection authenticates once, right after
//! ApiVersions, before its first other request.

use crate::error::{BenchError, Result};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use std::sync::OnceLock;

static CREDENTIALS: OnceLock<SaslCredentials> = OnceLock::new();

/// The mechanisms the harness speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl SaslMechanism {
    pub fn parse(name: &str) -> Result<SaslMechanism> {
        match name.to_ascii_uppercase().as_str() {
            "PLAIN" => Ok(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Ok(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Ok(SaslMechanism::ScramSha512),
            "OAUTHBEARER" => Ok(SaslMechanism::OAuthBearer),
            _ => Err(BenchError::Other(format!(
                "--sasl-mechanism {name}: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// Who the harness authenticates as.
#[derive(Debug, Clone)]
pub struct SaslCredentials {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

/// Every later connection authenticates with `credentials`.
pub(crate) fn configure(credentials: SaslCredentials) -> Result<()> {
    CREDENTIALS
        .set(credentials)
        .map_err(|_| BenchError::Other(String::from("SASL configured twice")))
}

/// The credentials every connection authenticates with, when SASL was
/// chosen (the exchange itself is the connection's: [`crate::kafka::connection`]).
pub(crate) fn credentials() -> Option<&'static SaslCredentials> {
    CREDENTIALS.get()
}

/// RFC 4616: `authzid NUL authcid NUL password`, with no authzid.
pub(crate) fn plain_message(username: &str, password: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(username.len() + password.len() + 2);
    message.push(0);
    message.extend_from_slice(username.as_bytes());
    message.push(0);
    message.extend_from_slice(password.as_bytes());
    message
}

/// RFC 7628's client initial response: `n,,\x01auth=Bearer <token>\x01\x01`.
pub(crate) fn oauthbearer_message(token: &str) -> Vec<u8> {
    format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
}

/// An unsigned JWT (`alg: none`) naming `user`, valid for an hour from
/// `now_s`: what Kafka's default validator takes.
pub(crate) fn unsigned_token(user: &str, now_s: u64) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims = serde_json::json!({"sub": user, "iat": now_s, "exp": now_s + 3600});
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

pub(crate) fn client_nonce() -> String {
    let bytes: [u8; 18] = rand::random();
    BASE64.encode(bytes)
}

/// The client side of one SCRAM exchange (RFC 5802 §3).
pub(crate) struct ScramClient {
    mechanism: SaslMechanism,
    password: String,
    client_first_bare: String,
    client_nonce: String,
    /// Set by [`ScramClient::client_final`]: what the server must sign.
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    pub(crate) fn new(
        mechanism: SaslMechanism,
        username: &str,
        password: &str,
        nonce: &str,
    ) -> ScramClient {
        // RFC 5802 §5.1: ',' and '=' in a name are escaped.
        let name = username.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={name},r={nonce}"),
            client_nonce: nonce.to_string(),
            expected_server_signature: None,
        }
    }

    pub(crate) fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    pub(crate) fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| scram_error("server-first-message is not UTF-8"))?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for attribute in text.split(',') {
            match attribute.split_once('=') {
                Some(("r", value)) => nonce = Some(value),
                Some(("s", value)) => salt = Some(value),
                Some(("i", value)) => iterations = Some(value),
                _ => {}
            }
        }
        let nonce = nonce.ok_or_else(|| scram_error("server-first-message has no nonce"))?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(scram_error("server nonce does not extend ours"));
        }
        let salt = BASE64
            .decode(salt.ok_or_else(|| scram_error("server-first-message has no salt"))?)
            .map_err(|_| scram_error("salt is not base64"))?;
        let iterations: u32 = iterations
            .and_then(|value| value.parse().ok())
            .filter(|count| *count > 0)
            .ok_or_else(|| scram_error("bad iteration count"))?;
        let salted = self.salted_password(&salt, iterations);
        let client_key = self.hmac(&salted, b"Client Key");
        let stored_key = self.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = self.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(key, sig)| key ^ sig)
            .collect();
        let server_key = self.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(self.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// The broker proves it knew the credential too (`v=`), or says why
    /// not (`e=`).
    pub(crate) fn verify_server_final(&self, server_final: &[u8]) -> Result<()> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| scram_error("server-final-message is not UTF-8"))?;
        if let Some(error) = text.strip_prefix("e=") {
            return Err(scram_error(&format!("broker refused: {error}")));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|value| BASE64.decode(value.split(',').next().unwrap_or(value)).ok())
            .ok_or_else(|| scram_error("server-final-message has no verifier"))?;
        match &self.expected_server_signature {
            Some(expected) if *expected == signature => Ok(()),
            _ => Err(scram_error("the broker's signature does not match")),
        }
    }

    fn salted_password(&self, salt: &[u8], iterations: u32) -> Vec<u8> {
        salted_password(self.mechanism, &self.password, salt, iterations)
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length: `new_from_slice` cannot fail.
        match self.mechanism {
            SaslMechanism::ScramSha512 => Hmac::<Sha512>::new_from_slice(key)
                .map(|mut mac| {
                    mac.update(data);
                    mac.finalize().into_bytes().to_vec()
                })
                .unwrap_or_default(),
            _ => Hmac::<Sha256>::new_from_slice(key)
                .map(|mut mac| {
                    mac.update(data);
                    mac.finalize().into_bytes().to_vec()
                })
                .unwrap_or_default(),
        }
    }

    fn hash(&self, data: &[u8]) -> Vec<u8> {
        match self.mechanism {
            SaslMechanism::ScramSha512 => Sha512::digest(data).to_vec(),
            _ => Sha256::digest(data).to_vec(),
        }
    }
}

/// RFC 5802's `SaltedPassword := Hi(password, salt, i)`: PBKDF2 with the
/// mechanism's HMAC. Also what a client sends to create a SCRAM user
/// (AlterUserScramCredentials carries the salted password, never the
/// password; `rill admin user create`).
pub fn salted_password(
    mechanism: SaslMechanism,
    password: &str,
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    match mechanism {
        SaslMechanism::ScramSha512 => {
            let mut out = vec![0u8; 64];
            pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), salt, iterations, &mut out);
            out
        }
        _ => {
            let mut out = vec![0u8; 32];
            pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut out);
            out
        }
    }
}

/// A fresh salt for a new SCRAM credential: 32 bytes of rand's thread
/// RNG, a CSPRNG (ChaCha), as a salt must not be guessable in advance.
pub fn random_salt() -> Vec<u8> {
    let bytes: [u8; 32] = rand::random();
    bytes.to_vec()
}

fn scram_error(message: &str) -> BenchError {
    BenchError::Protocol(format!("SCRAM: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_message_is_nul_separated() {
        assert_eq!(plain_message("alice", "pw"), b"\0alice\0pw".to_vec());
    }

    /// RFC 7677 §3's SCRAM-SHA-256 example, end to end.
    #[test]
    fn scram_sha_256_matches_rfc_7677() {
        let mut client = ScramClient::new(
            SaslMechanism::ScramSha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(
            client.client_first(),
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO".to_vec()
        );
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = client.client_final(server_first).unwrap();
        assert_eq!(
            String::from_utf8(client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        client
            .verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(client
            .verify_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .is_err());
        assert!(client.verify_server_final(b"e=invalid-proof").is_err());
    }

    #[test]
    fn a_server_nonce_that_does_not_extend_ours_is_refused() {
        let mut client = ScramClient::new(SaslMechanism::ScramSha512, "u", "p", "abc");
        assert!(client.client_final(b"r=xyz123,s=AAAA,i=4096").is_err());
        assert!(client.client_final(b"r=abc,s=AAAA,i=4096").is_err());
        assert!(client.client_final(b"r=abcdef,s=AAAA,i=0").is_err());
        assert!(client.client_final(b"r=abcdef,s=AAAA,i=4096").is_ok());
    }

    #[test]
    fn mechanism_names_round_trip() {
        for mechanism in [
            SaslMechanism::Plain,
            SaslMechanism::ScramSha256,
            SaslMechanism::ScramSha512,
            SaslMechanism::OAuthBearer,
        ] {
            assert_eq!(SaslMechanism::parse(mechanism.name()).unwrap(), mechanism);
        }
        assert!(SaslMechanism::parse("GSSAPI").is_err());
    }

    #[test]
    fn oauthbearer_sends_an_unsigned_token_for_the_user() {
        let token = unsigned_token("bench", 1_000);
        let claims = token.split('.').nth(1).unwrap();
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
        assert_eq!(claims["sub"], "bench");
        assert_eq!(claims["exp"], 4_600);
        assert!(token.ends_with('.'));
        assert_eq!(oauthbearer_message("t"), b"n,,\x01auth=Bearer t\x01\x01");
    }
}

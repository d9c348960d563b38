//! Bearer tokens for OAUTHBEARER, checked as Kafka's two server-side
//! validators check them:
//!
//! - [`unsecured`]: Kafka's default (`OAuthBearerUnsecuredValidatorCallbackHandler`):
//!   unsigned JWTs (`alg: none`), for development and tests only: any
//!   client may name any principal.
//! - [`signed`]: `OAuthBearerValidatorCallbackHandler` (KIP-768): JWTs
//!   signed by an identity provider whose public keys (a JWKS) the broker
//!   holds in a [`keys::KeySet`], kept fresh by the broker's refresher.
//!
//! Both are pure: the token and the time in, an identity or a reason out.
//! [`claims`] holds the checks they share (times, scopes, the principal).

pub mod claims;
pub mod keys;
pub mod signed;
pub mod unsecured;

use crate::sasl::TokenIdentity;

/// Why a token is refused. The text reaches the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not three base64url parts of JSON, or a part is not what it must be.
    #[error("malformed token: {0}")]
    Malformed(String),
    /// A claim is missing, of the wrong type, or says no.
    #[error("{0}")]
    Claim(String),
    /// The signature does not verify, or no key of the set can check it.
    #[error("{0}")]
    Signature(String),
}

/// The validator of one listener.
#[derive(Debug, Clone, Copy)]
pub enum Validator<'a> {
    /// Unsigned tokens (Kafka's default).
    Unsecured(&'a unsecured::UnsecuredOptions),
    /// Signed tokens checked against a JWKS.
    Signed(&'a signed::SignedOptions, &'a keys::KeySet),
}

impl Validator<'_> {
    /// Validates `token` at `now_ms` (wall clock).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<TokenIdentity, TokenError> {
        match self {
            Validator::Unsecured(options) => unsecured::validate(token, options, now_ms),
            Validator::Signed(options, keys) => signed::validate(token, options, keys, now_ms),
        }
    }
}

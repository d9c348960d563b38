//! Signed tokens, as Kafka's `OAuthBearerValidatorCallbackHandler`
//! (KIP-768) checks them: a JWT signed (RS*, PS*, ES*, EdDSA; never `none`
//! or a shared HMAC secret) by a key of the identity provider's JWKS,
//! with `exp` and `iat` required, `nbf` honoured, and the audience and
//! issuer checked when configured, all within the clock skew.
//!
//! Options, by Kafka's broker keys: `sasl.oauthbearer.sub.claim.name`
//! (`sub`), `sasl.oauthbearer.scope.claim.name` (`scope`),
//! `sasl.oauthbearer.expected.audience` (any), `sasl.oauthbearer.expected.issuer`
//! (any), `sasl.oauthbearer.clock.skew.seconds` (30).

use super::claims::{check_times, principal, scopes, time_ms, Claims};
use super::keys::KeySet;
use super::TokenError;
use crate::sasl::TokenIdentity;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};

/// How signed tokens are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedOptions {
    /// The claim naming the principal.
    pub principal_claim: String,
    /// The claim holding the scopes.
    pub scope_claim: String,
    /// Audiences of which a token's `aud` must name one (empty: any).
    pub expected_audience: Vec<String>,
    /// The `iss` a token must carry (`None`: any).
    pub expected_issuer: Option<String>,
    /// Slack allowed on `exp`, `iat` and `nbf`, seconds.
    pub clock_skew_s: i64,
}

impl Default for SignedOptions {
    fn default() -> Self {
        SignedOptions {
            principal_claim: String::from("sub"),
            scope_claim: String::from("scope"),
            expected_audience: Vec::new(),
            expected_issuer: None,
            clock_skew_s: 30,
        }
    }
}

fn signature_error(error: &jsonwebtoken::errors::Error) -> TokenError {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::InvalidAudience => {
            TokenError::Claim(String::from("the audience is not expected"))
        }
        ErrorKind::InvalidIssuer => TokenError::Claim(String::from("the issuer is not expected")),
        ErrorKind::InvalidSignature => {
            TokenError::Signature(String::from("the signature does not verify"))
        }
        ErrorKind::InvalidAlgorithm => {
            TokenError::Signature(String::from("the token's algorithm does not fit its key"))
        }
        _ => TokenError::Malformed(error.to_string()),
    }
}

/// Validates a signed token against `keys` at `now_ms`.
pub fn validate(
    token: &str,
    options: &SignedOptions,
    keys: &KeySet,
    now_ms: i64,
) -> Result<TokenIdentity, TokenError> {
    let header = decode_header(token).map_err(|e| signature_error(&e))?;
    if matches!(
        header.alg,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    ) {
        return Err(TokenError::Signature(String::from(
            "HMAC-signed tokens are not accepted (the provider's public keys verify tokens)",
        )));
    }
    if !keys.is_loaded() {
        return Err(TokenError::Signature(String::from(
            "the provider's JWKS has not been loaded yet",
        )));
    }
    let jwk = keys.find(header.kid.as_deref())?;
    if let Some(wanted) = jwk.common.key_algorithm {
        if wanted.to_string() != format!("{:?}", header.alg) {
            return Err(TokenError::Signature(String::from(
                "the token's algorithm is not its key's",
            )));
        }
    }
    let key = DecodingKey::from_jwk(&jwk).map_err(|e| signature_error(&e))?;
    let mut validation = Validation::new(header.alg);
    // Times are checked below against the broker's clock, with its skew.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.required_spec_claims.clear();
    if options.expected_audience.is_empty() {
        validation.validate_aud = false;
    } else {
        validation.set_audience(&options.expected_audience);
        validation.required_spec_claims.insert(String::from("aud"));
    }
    if let Some(issuer) = &options.expected_issuer {
        validation.set_issuer(&[issuer]);
        validation.required_spec_claims.insert(String::from("iss"));
    }
    let claims = decode::<Claims>(token, &key, &validation)
        .map_err(|e| signature_error(&e))?
        .claims;
    check_claims(&claims, options, now_ms)
}

/// The checks after the signature: times, principal, scopes.
fn check_claims(
    claims: &Claims,
    options: &SignedOptions,
    now_ms: i64,
) -> Result<TokenIdentity, TokenError> {
    let skew_ms = options.clock_skew_s.saturating_mul(1000);
    if time_ms(claims, "iat")?.is_none() {
        return Err(TokenError::Claim(String::from(
            "the \"iat\" claim is missing",
        )));
    }
    let expires_at_ms = check_times(claims, now_ms, skew_ms)?;
    if let Some(not_before_ms) = time_ms(claims, "nbf")? {
        if not_before_ms > now_ms.saturating_add(skew_ms) {
            return Err(TokenError::Claim(String::from(
                "the token is not valid yet (nbf)",
            )));
        }
    }
    scopes(claims, &options.scope_claim)?;
    Ok(TokenIdentity {
        principal: principal(claims, &options.principal_claim)?,
        expires_at_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    use jsonwebtoken::{encode, EncodingKey, Header};
    use serde_json::json;

    /// A P-256 key: its JWKS entry and its signing key.
    fn provider_key(kid: &str) -> (serde_json::Value, EncodingKey) {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let point = pair.public_key_raw();
        let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65])});
        (jwk, EncodingKey::from_ec_der(&pair.serialize_der()))
    }

    fn sign(key: &EncodingKey, kid: &str, claims: serde_json::Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_string());
        encode(&header, &claims, key).unwrap()
    }

    fn key_set(jwks: &[serde_json::Value]) -> KeySet {
        let keys = KeySet::default();
        let document = json!({ "keys": jwks }).to_string();
        keys.install(KeySet::parse(document.as_bytes()).unwrap(), 0);
        keys
    }

    const NOW_MS: i64 = 1_000_000_000;

    #[test]
    fn a_token_signed_by_a_provider_key_validates() {
        let (jwk, signing) = provider_key("k1");
        let keys = key_set(&[jwk]);
        let token = sign(
            &signing,
            "k1",
            json!({"sub": "alice", "iat": 999_990, "exp": 1_000_100, "aud": "rill", "iss": "idp"}),
        );
        let mut options = SignedOptions::default();
        let identity = validate(&token, &options, &keys, NOW_MS).unwrap();
        assert_eq!(identity.principal, "alice");
        assert_eq!(identity.expires_at_ms, 1_000_100_000);
        options.expected_audience = vec!["other".into(), "rill".into()];
        options.expected_issuer = Some("idp".into());
        assert!(validate(&token, &options, &keys, NOW_MS).is_ok());
        options.expected_issuer = Some("elsewhere".into());
        assert!(validate(&token, &options, &keys, NOW_MS)
            .unwrap_err()
            .to_string()
            .contains("issuer"));
        options.expected_issuer = None;
        options.expected_audience = vec!["kafka".into()];
        assert!(validate(&token, &options, &keys, NOW_MS)
            .unwrap_err()
            .to_string()
            .contains("audience"));
    }

    #[test]
    fn forged_expired_and_unknown_key_tokens_are_refused() {
        let (jwk, signing) = provider_key("k1");
        let (_, forger) = provider_key("k1");
        let keys = key_set(&[jwk]);
        let options = SignedOptions::default();
        let claims = json!({"sub": "alice", "iat": 999_990, "exp": 1_000_100});
        for (token, reason) in [
            (sign(&forger, "k1", claims.clone()), "does not verify"),
            (sign(&signing, "k2", claims.clone()), "no key \"k2\""),
            (
                sign(
                    &signing,
                    "k1",
                    json!({"sub": "a", "iat": 999_000, "exp": 999_900}),
                ),
                "expired",
            ),
            (
                sign(&signing, "k1", json!({"sub": "a", "exp": 1_000_100})),
                "iat",
            ),
            (
                sign(
                    &signing,
                    "k1",
                    json!({"sub": "a", "iat": 999_990, "exp": 1_000_100, "nbf": 1_000_050}),
                ),
                "not valid yet",
            ),
            (
                sign(&signing, "k1", json!({"iat": 999_990, "exp": 1_000_100})),
                "principal",
            ),
            (
                sign(
                    &signing,
                    "k1",
                    json!({"sub": "a", "iat": 999_990, "exp": 1_000_100, "scope": 7}),
                ),
                "scope",
            ),
            (
                format!(
                    "{}.{}.",
                    URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
                    URL_SAFE_NO_PAD.encode(claims.to_string())
                ),
                "`none`",
            ),
            (String::from("not a token"), ""),
        ] {
            let error = validate(&token, &options, &keys, NOW_MS)
                .unwrap_err()
                .to_string();
            assert!(error.contains(reason), "{reason}: {error}");
        }
        // Within the 30 s skew an expired token still passes.
        let late = sign(
            &signing,
            "k1",
            json!({"sub": "a", "iat": 999_000, "exp": 999_990}),
        );
        assert!(validate(&late, &options, &keys, NOW_MS).is_ok());
    }

    #[test]
    fn hmac_tokens_and_an_unloaded_set_are_refused() {
        let secret = EncodingKey::from_secret(b"shared");
        let token = encode(
            &Header::new(Algorithm::HS256),
            &json!({"sub": "a"}),
            &secret,
        )
        .unwrap();
        let keys = key_set(&[json!({"kty": "oct", "k": "c2hhcmVk"})]);
        let error = validate(&token, &SignedOptions::default(), &keys, NOW_MS).unwrap_err();
        assert!(error.to_string().contains("HMAC"));
        let (_, signing) = provider_key("k1");
        let token = sign(
            &signing,
            "k1",
            json!({"sub": "a", "iat": 999_990, "exp": 1_000_100}),
        );
        let error = validate(
            &token,
            &SignedOptions::default(),
            &KeySet::default(),
            NOW_MS,
        )
        .unwrap_err();
        assert!(error.to_string().contains("not been loaded"));
    }
}

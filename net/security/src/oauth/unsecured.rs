//! Unsigned tokens, as Kafka's default OAUTHBEARER validator
//! (`OAuthBearerUnsecuredValidatorCallbackHandler`) takes them: a JWT whose
//! header says `"alg":"none"` and whose signature part is empty. What
//! librdkafka's `enable.sasl.oauthbearer.unsecure.jwt` and Kafka's
//! `unsecuredLoginStringClaim_sub` produce. Anyone can write one for any
//! principal: for development and tests only.
//!
//! Options, from the listener's `OAuthBearerLoginModule` JAAS entry, by
//! Kafka's names: `unsecuredValidatorPrincipalClaimName` (`sub`),
//! `unsecuredValidatorScopeClaimName` (`scope`),
//! `unsecuredValidatorRequiredScope` (space-separated, none),
//! `unsecuredValidatorAllowableClockSkewMs` (0).

use super::claims::{check_scopes, check_times, decode_part, principal, scopes};
use super::TokenError;
use crate::sasl::TokenIdentity;

/// How unsigned tokens are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredOptions {
    /// The claim naming the principal.
    pub principal_claim: String,
    /// The claim holding the scopes.
    pub scope_claim: String,
    /// Scopes a token must hold.
    pub required_scopes: Vec<String>,
    /// Slack allowed on `exp` and `iat`, ms.
    pub clock_skew_ms: i64,
}

impl Default for UnsecuredOptions {
    fn default() -> Self {
        UnsecuredOptions {
            principal_claim: String::from("sub"),
            scope_claim: String::from("scope"),
            required_scopes: Vec::new(),
            clock_skew_ms: 0,
        }
    }
}

impl UnsecuredOptions {
    /// Applies one JAAS option; `Ok(false)` when it is not a validator
    /// option (the broker's own login options, `unsecuredLoginStringClaim_sub`).
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "unsecuredValidatorPrincipalClaimName" => self.principal_claim = non_empty(key, value)?,
            "unsecuredValidatorScopeClaimName" => self.scope_claim = non_empty(key, value)?,
            "unsecuredValidatorRequiredScope" => {
                self.required_scopes = value.split_whitespace().map(str::to_string).collect()
            }
            "unsecuredValidatorAllowableClockSkewMs" => {
                self.clock_skew_ms = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|ms: &i64| *ms >= 0)
                    .ok_or_else(|| format!("{key} must be a number of ms, 0 or more"))?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn non_empty(key: &str, value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Err(format!("{key} must not be empty"));
    }
    Ok(value.to_string())
}

/// Validates an unsigned token.
pub fn validate(
    token: &str,
    options: &UnsecuredOptions,
    now_ms: i64,
) -> Result<TokenIdentity, TokenError> {
    let parts: Vec<&str> = token.split('.').collect();
    let [header, payload, signature] = parts[..] else {
        return Err(TokenError::Malformed(String::from(
            "a JWT has three parts separated by '.'",
        )));
    };
    if !signature.is_empty() {
        return Err(TokenError::Signature(String::from(
            "a signed token on a listener that takes only unsigned ones",
        )));
    }
    let header = decode_part(header, "header")?;
    if header.get("alg").and_then(|alg| alg.as_str()) != Some("none") {
        return Err(TokenError::Malformed(String::from(
            "an unsigned token's header must say \"alg\":\"none\"",
        )));
    }
    let claims = decode_part(payload, "payload")?;
    let principal = principal(&claims, &options.principal_claim)?;
    let expires_at_ms = check_times(&claims, now_ms, options.clock_skew_ms)?;
    check_scopes(
        &scopes(&claims, &options.scope_claim)?,
        &options.required_scopes,
    )?;
    Ok(TokenIdentity {
        principal,
        expires_at_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;

    fn token(header: &str, payload: &str) -> String {
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        )
    }

    const NONE: &str = r#"{"alg":"none"}"#;

    #[test]
    fn librdkafkas_unsecured_token_validates() {
        // What librdkafka builds for `principal=alice scope=a,b`.
        let jwt = token(
            NONE,
            r#"{"sub":"alice","iat":1000.000,"exp":4600.000,"scope":["a","b"]}"#,
        );
        let identity = validate(&jwt, &UnsecuredOptions::default(), 2_000_000).unwrap();
        assert_eq!(identity.principal, "alice");
        assert_eq!(identity.expires_at_ms, 4_600_000);
        let mut options = UnsecuredOptions::default();
        options
            .apply("unsecuredValidatorRequiredScope", "b a")
            .unwrap();
        assert!(validate(&jwt, &options, 2_000_000).is_ok());
        options
            .apply("unsecuredValidatorRequiredScope", "c")
            .unwrap();
        assert!(validate(&jwt, &options, 2_000_000).is_err());
    }

    #[test]
    fn bad_tokens_are_refused_with_a_reason() {
        let options = UnsecuredOptions::default();
        let ok_payload = r#"{"sub":"alice","exp":10}"#;
        for (jwt, reason) in [
            (token(NONE, r#"{"sub":"alice","exp":1}"#), "expired"),
            (token(NONE, r#"{"exp":10}"#), "missing"),
            (token(r#"{"alg":"RS256"}"#, ok_payload), "alg"),
            (format!("{}x", token(NONE, ok_payload)), "signed"),
            (String::from("a.b"), "three parts"),
            (String::from("!.!."), "base64url"),
        ] {
            let error = validate(&jwt, &options, 5_000).unwrap_err().to_string();
            assert!(error.contains(reason), "{jwt}: {error}");
        }
    }

    #[test]
    fn options_read_kafkas_names() {
        let mut options = UnsecuredOptions::default();
        assert_eq!(
            options.apply("unsecuredValidatorPrincipalClaimName", "user"),
            Ok(true)
        );
        assert_eq!(
            options.apply("unsecuredValidatorAllowableClockSkewMs", "500"),
            Ok(true)
        );
        assert_eq!(
            options.apply("unsecuredLoginStringClaim_sub", "admin"),
            Ok(false)
        );
        assert!(options
            .apply("unsecuredValidatorAllowableClockSkewMs", "-1")
            .is_err());
        assert!(options
            .apply("unsecuredValidatorScopeClaimName", " ")
            .is_err());
        let jwt = token(NONE, r#"{"user":"bob","exp":10}"#);
        assert_eq!(validate(&jwt, &options, 10_400).unwrap().principal, "bob");
    }
}

//! The claim checks both validators make, with Kafka's rules
//! (`OAuthBearerValidationUtils`): the principal is a non-empty string,
//! `exp` (required) and `iat` (when present) are numbers of seconds, the
//! token has not expired and was not issued in the future (both within the
//! allowed clock skew), it expires after it was issued, and its scope
//! claim (a space-separated string or a list of strings) holds every
//! required scope.

use super::TokenError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

/// A token's header or payload.
pub type Claims = Map<String, Value>;

fn claim_error(text: String) -> TokenError {
    TokenError::Claim(text)
}

/// One base64url part of a JWT, as a JSON object. Padding is tolerated.
pub fn decode_part(part: &str, what: &str) -> Result<Claims, TokenError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .map_err(|_| TokenError::Malformed(format!("the {what} is not base64url")))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(TokenError::Malformed(format!(
            "the {what} is not a JSON object"
        ))),
    }
}

/// The principal named by claim `name`.
pub fn principal(claims: &Claims, name: &str) -> Result<String, TokenError> {
    match claims.get(name) {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
        Some(_) => Err(claim_error(format!(
            "the principal claim {name:?} is not a non-empty string"
        ))),
        None => Err(claim_error(format!(
            "the principal claim {name:?} is missing"
        ))),
    }
}

/// A time claim (seconds since the epoch, fractions allowed) in ms.
pub fn time_ms(claims: &Claims, name: &str) -> Result<Option<i64>, TokenError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            #[allow(clippy::cast_possible_truncation)] // JWT times are well inside i64 ms
            Some(seconds) if seconds.is_finite() && seconds.abs() < 1e15 => {
                Ok(Some((seconds * 1000.0) as i64))
            }
            _ => Err(claim_error(format!("the {name:?} claim is out of range"))),
        },
        Some(_) => Err(claim_error(format!("the {name:?} claim is not a number"))),
    }
}

/// Checks `exp` against `now_ms` and `iat`, both with `skew_ms` of slack;
/// answers `exp` in ms.
pub fn check_times(claims: &Claims, now_ms: i64, skew_ms: i64) -> Result<i64, TokenError> {
    let expires_ms = time_ms(claims, "exp")?
        .ok_or_else(|| claim_error("the \"exp\" claim is missing".into()))?;
    if now_ms.saturating_sub(skew_ms) >= expires_ms {
        return Err(claim_error(format!(
            "the token expired {} ms ago",
            now_ms - expires_ms
        )));
    }
    if let Some(issued_ms) = time_ms(claims, "iat")? {
        if issued_ms > now_ms.saturating_add(skew_ms) {
            return Err(claim_error("the token was issued in the future".into()));
        }
        if expires_ms <= issued_ms {
            return Err(claim_error("the token expires before it was issued".into()));
        }
    }
    Ok(expires_ms)
}

/// The scopes of claim `name`: none when it is absent.
pub fn scopes(claims: &Claims, name: &str) -> Result<Vec<String>, TokenError> {
    let bad = || {
        claim_error(format!(
            "the scope claim {name:?} is not a string or a list of strings"
        ))
    };
    match claims.get(name) {
        None => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(text.split_whitespace().map(str::to_string).collect()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// Fails when a required scope is not among `held`.
pub fn check_scopes(held: &[String], required: &[String]) -> Result<(), TokenError> {
    match required.iter().find(|scope| !held.contains(scope)) {
        Some(missing) => Err(claim_error(format!(
            "the token lacks the required scope {missing:?}"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> Claims {
        match value {
            Value::Object(map) => map,
            _ => unreachable!("test claims are objects"),
        }
    }

    #[test]
    fn times_are_checked_with_the_skew() {
        let token = claims(json!({"exp": 100, "iat": 50.5}));
        assert_eq!(check_times(&token, 99_999, 0), Ok(100_000));
        assert!(check_times(&token, 100_000, 0).is_err());
        assert_eq!(check_times(&token, 100_500, 1_000), Ok(100_000));
        assert!(check_times(&token, 50_000, 0)
            .unwrap_err()
            .to_string()
            .contains("future"));
        assert!(check_times(&claims(json!({"iat": 1})), 0, 0).is_err());
        assert!(check_times(&claims(json!({"exp": "100"})), 0, 0).is_err());
        assert!(check_times(&claims(json!({"exp": 10, "iat": 20})), 0, 30_000).is_err());
    }

    #[test]
    fn scopes_and_principals_read_both_forms() {
        let token = claims(json!({"scope": "a b", "scp": ["c"], "bad": 3, "sub": "", "who": "al"}));
        assert_eq!(scopes(&token, "scope").unwrap(), ["a", "b"]);
        assert_eq!(scopes(&token, "scp").unwrap(), ["c"]);
        assert!(scopes(&token, "bad").is_err());
        assert!(scopes(&token, "none").unwrap().is_empty());
        assert!(check_scopes(&["a".into()], &["a".into(), "b".into()]).is_err());
        assert!(check_scopes(&["a".into(), "b".into()], &["b".into()]).is_ok());
        assert!(principal(&token, "sub").is_err());
        assert!(principal(&token, "missing").is_err());
        assert_eq!(principal(&token, "who").unwrap(), "al");
    }

    #[test]
    fn parts_must_be_base64url_json_objects() {
        assert!(decode_part("eyJhIjoxfQ", "header").is_ok());
        assert!(decode_part("eyJhIjoxfQ==", "header").is_ok());
        assert!(decode_part("WzFd", "header").is_err()); // [1]
        assert!(decode_part("!!", "header").is_err());
    }
}

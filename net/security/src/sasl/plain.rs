//! PLAIN (RFC 4616): one client message, `[authzid] NUL authcid NUL passwd`.
//!
//! The password is checked against the listener's JAAS users
//! (`user_<name>="<password>"`); a user the JAAS config does not name may
//! still log in with the password of its stored SCRAM credential (SHA-512
//! tried first), so one `kafka-configs --alter --add-config
//! 'SCRAM-SHA-512=[...]'` serves both mechanisms.

use super::scram::password_matches;
use super::{constant_time_eq, CredentialSource, SaslError, ScramMechanism, Step};

/// RFC 4616's limit on each field.
const FIELD_MAX_BYTES: usize = 255;

/// A parsed PLAIN message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainMessage {
    /// The authorization id (empty: the user itself).
    pub authzid: String,
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

fn malformed(reason: &str) -> SaslError {
    SaslError::Malformed {
        mechanism: "PLAIN",
        reason: reason.to_string(),
    }
}

/// Parses a PLAIN message. Never panics, whatever the bytes.
pub fn parse(message: &[u8]) -> Result<PlainMessage, SaslError> {
    let text = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
    let mut fields = text.split('\0');
    let (Some(authzid), Some(username), Some(password), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(malformed("expected authzid NUL user NUL password"));
    };
    if username.is_empty() || password.is_empty() {
        return Err(malformed("empty user name or password"));
    }
    if [authzid, username, password]
        .iter()
        .any(|f| f.len() > FIELD_MAX_BYTES)
    {
        return Err(malformed("field longer than 255 bytes"));
    }
    Ok(PlainMessage {
        authzid: authzid.to_string(),
        username: username.to_string(),
        password: password.to_string(),
    })
}

/// The server side of one PLAIN exchange.
#[derive(Debug, Default)]
pub struct PlainServer {
    done: bool,
}

impl PlainServer {
    /// Checks the one message; a second is an error.
    pub fn step(
        &mut self,
        message: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<Step, SaslError> {
        if std::mem::replace(&mut self.done, true) {
            return Err(SaslError::IllegalState { mechanism: "PLAIN" });
        }
        let plain = parse(message)?;
        let failed = SaslError::InvalidCredentials { mechanism: "PLAIN" };
        // Kafka: an authorization id other than the user is refused.
        if !plain.authzid.is_empty() && plain.authzid != plain.username {
            return Err(failed);
        }
        if !verify(&plain.username, &plain.password, credentials) {
            return Err(failed);
        }
        Ok(Step::Done {
            user: plain.username,
            response: Vec::new(),
            expires_at_ms: None,
        })
    }
}

/// Whether `password` is `user`'s: its JAAS password, else its SCRAM one.
pub fn verify(user: &str, password: &str, credentials: &dyn CredentialSource) -> bool {
    if let Some(expected) = credentials.plain_password(user) {
        return constant_time_eq(expected.as_bytes(), password.as_bytes());
    }
    ScramMechanism::ALL.into_iter().any(|mechanism| {
        credentials
            .scram(user, mechanism)
            .is_some_and(|credential| password_matches(mechanism, password, &credential))
    })
}

#[cfg(test)]
mod tests {
    use super::super::scram::credential_from_password;
    use super::super::test_support::Users;
    use super::*;

    fn users() -> Users {
        let mut users = Users::default();
        users.plain.insert("admin".into(), "admin-secret".into());
        users.scram.insert(
            ("carol".into(), ScramMechanism::Sha256),
            credential_from_password(ScramMechanism::Sha256, "carol-pw", 4096),
        );
        users
    }

    #[test]
    fn jaas_and_scram_users_log_in() {
        let users = users();
        for (message, user) in [
            (&b"\0admin\0admin-secret"[..], "admin"),
            (b"admin\0admin\0admin-secret", "admin"),
            (b"\0carol\0carol-pw", "carol"),
        ] {
            let mut server = PlainServer::default();
            assert_eq!(
                server.step(message, &users),
                Ok(Step::Done {
                    user: user.into(),
                    response: Vec::new(),
                    expires_at_ms: None,
                })
            );
            assert!(server.step(message, &users).unwrap_err().is_illegal_state());
        }
    }

    #[test]
    fn wrong_passwords_unknown_users_and_bad_messages_fail() {
        let users = users();
        for message in [
            &b"\0admin\0wrong"[..],
            b"\0carol\0wrong",
            b"\0nobody\0x",
            b"other\0admin\0admin-secret",
            b"\0admin",
            b"\0admin\0admin-secret\0extra",
            b"\0\0pw",
            b"\0admin\0",
            b"\xff\0admin\0admin-secret",
        ] {
            assert!(
                PlainServer::default().step(message, &users).is_err(),
                "{message:?}"
            );
        }
        let long = format!("\0{}\0pw", "u".repeat(256));
        assert!(parse(long.as_bytes()).is_err());
        assert_eq!(
            parse(b"a\0b\0c").unwrap(),
            PlainMessage {
                authzid: "a".into(),
                username: "b".into(),
                password: "c".into()
            }
        );
    }
}

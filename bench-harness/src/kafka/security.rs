//! The harness's security flags, Kafka's `security.protocol` and `sasl.*`
//! names: `--security-protocol PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL`,
//! `--ssl-ca-location`, `--sasl-mechanism`, `--sasl-username`,
//! `--sasl-password`.
//!
//! The choice is process-wide (set once by `main` before any connection):
//! every connection the harness opens then speaks it, which is what a run
//! against one listener wants, and it spares threading a setting through
//! every place that connects. [`crate::kafka::tls`] holds the TLS half,
//! [`crate::kafka::sasl`] the SASL half.

use crate::error::{BenchError, Result};
use crate::kafka::sasl::{self, SaslCredentials, SaslMechanism};
use crate::kafka::tls;
use std::path::PathBuf;

/// The security flags (global: any subcommand accepts them).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SecurityArgs {
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's
    /// `security.protocol`).
    #[arg(long, global = true, default_value = "PLAINTEXT")]
    pub security_protocol: String,
    /// PEM bundle of the CAs the broker's certificate must chain to
    /// (Kafka's `ssl.ca.location`); required with SSL and SASL_SSL.
    #[arg(long, global = true)]
    pub ssl_ca_location: Option<PathBuf>,
    /// PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (Kafka's
    /// `sasl.mechanism`).
    #[arg(long, global = true, default_value = "PLAIN")]
    pub sasl_mechanism: String,
    /// SASL user name (Kafka's `sasl.username`).
    #[arg(long, global = true)]
    pub sasl_username: Option<String>,
    /// SASL password (Kafka's `sasl.password`); for OAUTHBEARER the bearer
    /// token (without it, an unsigned token for the user).
    #[arg(long, global = true)]
    pub sasl_password: Option<String>,
}

/// Applies the flags: with SSL every later connection is TLS, with SASL
/// every later connection authenticates before its first request.
pub fn configure(args: &SecurityArgs) -> Result<()> {
    let protocol = args.security_protocol.to_ascii_uppercase();
    let (uses_tls, uses_sasl) = match protocol.as_str() {
        "PLAINTEXT" => (false, false),
        "SSL" => (true, false),
        "SASL_PLAINTEXT" => (false, true),
        "SASL_SSL" => (true, true),
        other => {
            return Err(BenchError::Other(format!(
                "--security-protocol {other}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            )))
        }
    };
    if uses_tls {
        let ca = args.ssl_ca_location.as_deref().ok_or_else(|| {
            BenchError::Other(format!(
                "--security-protocol {protocol} needs --ssl-ca-location FILE"
            ))
        })?;
        tls::configure(ca)?;
    }
    if uses_sasl {
        let mechanism = SaslMechanism::parse(&args.sasl_mechanism)?;
        let password = match (&args.sasl_password, &args.sasl_username) {
            (None, Some(user)) if mechanism == SaslMechanism::OAuthBearer => {
                let now_s = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                Some(sasl::unsigned_token(user, now_s))
            }
            (password, _) => password.clone(),
        };
        let (Some(username), Some(password)) = (&args.sasl_username, &password) else {
            return Err(BenchError::Other(format!(
                "--security-protocol {protocol} needs --sasl-username and --sasl-password"
            )));
        };
        sasl::configure(SaslCredentials {
            mechanism,
            username: username.clone(),
            password: password.clone(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(protocol: &str) -> SecurityArgs {
        SecurityArgs {
            security_protocol: protocol.to_string(),
            sasl_mechanism: String::from("PLAIN"),
            ..SecurityArgs::default()
        }
    }

    #[test]
    fn each_protocol_asks_for_what_it_needs() {
        assert!(configure(&args("plaintext")).is_ok());
        assert!(tls::connector_for("127.0.0.1:9092").unwrap().is_none());
        let ssl = configure(&args("SSL")).unwrap_err().to_string();
        assert!(ssl.contains("--ssl-ca-location"), "{ssl}");
        let sasl = configure(&args("SASL_PLAINTEXT")).unwrap_err().to_string();
        assert!(sasl.contains("--sasl-username"), "{sasl}");
        let mut bad_mechanism = args("SASL_PLAINTEXT");
        bad_mechanism.sasl_mechanism = String::from("GSSAPI");
        bad_mechanism.sasl_username = Some(String::from("u"));
        bad_mechanism.sasl_password = Some(String::from("p"));
        let error = configure(&bad_mechanism).unwrap_err().to_string();
        assert!(error.contains("GSSAPI"), "{error}");
        let unknown = configure(&args("SASL_KERBEROS")).unwrap_err().to_string();
        assert!(unknown.contains("SASL_SSL"), "{unknown}");
    }
}

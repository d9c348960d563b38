//! TLS to the broker (`--security-protocol SSL --ssl-ca-location FILE`), with
//! rustls, so that a TLS listener's throughput can be compared with a
//! PLAINTEXT one.
//!
//! The choice is process-wide (set once by `main` before any connection):
//! every connection the harness opens then speaks it, which is what a run
//! against one listener wants, and it spares threading a setting through
//! every place that connects.

use crate::error::{BenchError, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

static CLIENT: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();

/// The harness's security flags (global: any subcommand accepts them).
#[derive(Debug, Clone, clap::Args)]
pub struct SecurityArgs {
    /// PLAINTEXT or SSL (Kafka's `security.protocol`).
    #[arg(long, global = true, default_value = "PLAINTEXT")]
    pub security_protocol: String,
    /// PEM bundle of the CAs the broker's certificate must chain to
    /// (Kafka's `ssl.ca.location`); required with SSL.
    #[arg(long, global = true)]
    pub ssl_ca_location: Option<PathBuf>,
}

/// Applies the flags: with SSL, every later connection is TLS.
pub fn configure(args: &SecurityArgs) -> Result<()> {
    match args.security_protocol.to_ascii_uppercase().as_str() {
        "PLAINTEXT" => Ok(()),
        "SSL" => {
            let ca = args.ssl_ca_location.as_deref().ok_or_else(|| {
                BenchError::Other(String::from(
                    "--security-protocol SSL needs --ssl-ca-location FILE",
                ))
            })?;
            let config = client_config(ca)?;
            CLIENT
                .set(Arc::new(config))
                .map_err(|_| BenchError::Other(String::from("TLS configured twice")))
        }
        other => Err(BenchError::Other(format!(
            "--security-protocol {other}: PLAINTEXT or SSL"
        ))),
    }
}

fn client_config(ca: &Path) -> Result<rustls::ClientConfig> {
    let text = std::fs::read(ca)
        .map_err(|e| BenchError::Other(format!("--ssl-ca-location {}: {e}", ca.display())))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&text) {
        let cert = cert
            .map_err(|e| BenchError::Other(format!("--ssl-ca-location {}: {e}", ca.display())))?;
        roots
            .add(cert)
            .map_err(|e| BenchError::Other(format!("--ssl-ca-location {}: {e}", ca.display())))?;
    }
    if roots.is_empty() {
        return Err(BenchError::Other(format!(
            "--ssl-ca-location {}: no PEM certificate",
            ca.display()
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| BenchError::Other(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The TLS connector when SSL was chosen, and the name to check the
/// broker's certificate against (the host of `addr`).
pub(crate) fn connector_for(
    addr: &str,
) -> Result<Option<(tokio_rustls::TlsConnector, ServerName<'static>)>> {
    let Some(config) = CLIENT.get() else {
        return Ok(None);
    };
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| BenchError::Other(format!("TLS server name {host:?}: {e}")))?;
    Ok(Some((
        tokio_rustls::TlsConnector::from(config.clone()),
        name,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_must_hold_pem_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        assert!(client_config(&missing)
            .unwrap_err()
            .to_string()
            .contains("missing.pem"));
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not pem").unwrap();
        assert!(client_config(&empty)
            .unwrap_err()
            .to_string()
            .contains("no PEM certificate"));
        let plain = SecurityArgs {
            security_protocol: String::from("plaintext"),
            ssl_ca_location: None,
        };
        assert!(configure(&plain).is_ok());
        assert!(connector_for("127.0.0.1:9092").unwrap().is_none());
        let ssl_without_ca = SecurityArgs {
            security_protocol: String::from("SSL"),
            ssl_ca_location: None,
        };
        assert!(configure(&ssl_without_ca).is_err());
        let sasl = SecurityArgs {
            security_protocol: String::from("SASL_SSL"),
            ssl_ca_location: None,
        };
        assert!(configure(&sasl).is_err());
    }
}

//! TLS to the broker (`--security-protocol SSL|SASL_SSL --ssl-ca-location
//! FILE`, see [`crate::kafka::security`]), with rustls, so that a TLS
//! listener's throughput can be compared with a PLAINTEXT one.

use crate::error::{BenchError, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::path::Path;
use std::sync::{Arc, OnceLock};

static CLIENT: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();

/// Every later connection is TLS, trusting the CAs in `ca` (PEM).
pub(crate) fn configure(ca: &Path) -> Result<()> {
    let config = client_config(ca)?;
    CLIENT
        .set(Arc::new(config))
        .map_err(|_| BenchError::Other(String::from("TLS configured twice")))
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
    }
}

//! The broker's own TLS client, for the connections it opens to other
//! brokers on an SSL or SASL_SSL inter-broker listener: the listener's
//! truststore is what the peers' certificates must chain to, its keystore
//! is the certificate the broker shows when asked (mutual TLS), and
//! `ssl.endpoint.identification.algorithm` (Kafka's `https` by default)
//! says whether the certificate must also name the peer's advertised host.

use super::tls::{root_store, TlsVersion};
use futures_rustls::client::TlsStream;
use glommio::net::TcpStream;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::fmt;
use std::sync::Arc;

/// The TLS stream of one connection to another broker.
pub type ClientTlsStream = TlsStream<TcpStream>;

/// What the client is built from, once the PEM files are read.
pub struct ClientTlsMaterial {
    /// CAs the peers' certificates must chain to.
    pub trusted: Vec<CertificateDer<'static>>,
    /// The broker's own chain and key, shown when a peer asks.
    pub identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    /// `ssl.enabled.protocols`.
    pub versions: Vec<TlsVersion>,
    /// Whether the peer's certificate must name its host (`https`).
    pub verify_hostname: bool,
}

/// The client, shared by every shard.
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<ClientConfig>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls").finish_non_exhaustive()
    }
}

impl PartialEq for ClientTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for ClientTls {}

impl ClientTls {
    /// Builds the client; the error says what is wrong with the material.
    pub fn new(material: ClientTlsMaterial) -> Result<ClientTls, String> {
        if material.trusted.is_empty() {
            return Err(String::from(
                "no truststore: the brokers' certificates must chain to one",
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = root_store(material.trusted)?;
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| format!("server certificate verifier: {e}"))?;
        let versions: Vec<_> = material.versions.iter().map(|v| v.rustls()).collect();
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS versions: {e}"))?;
        let builder = if material.verify_hostname {
            builder.with_webpki_verifier(verifier)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyName(verifier)))
        };
        let config = match material.identity {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("certificate and key: {e}"))?,
            None => builder.with_no_client_auth(),
        };
        Ok(ClientTls {
            config: Arc::new(config),
        })
    }

    /// The client handshake with the broker at `host` over `stream`.
    pub async fn connect(&self, host: &str, stream: TcpStream) -> Result<ClientTlsStream, String> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("{host} is not a host name: {e}"))?;
        futures_rustls::TlsConnector::from(self.config.clone())
            .connect(name, stream)
            .await
            .map_err(|e| format!("TLS handshake with {host}: {e}"))
    }
}

/// The chain is checked; the name in it is not
/// (`ssl.endpoint.identification.algorithm=` empty, as Kafka allows).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified =
            self.0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verified {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

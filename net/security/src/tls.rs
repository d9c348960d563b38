//! TLS for client listeners, with rustls (no OpenSSL in the broker).
//!
//! - [`ListenerTls`]: one listener's acceptor, built once at start from PEM
//!   material ([`parse_certificates`], [`parse_private_key`]) and shared by
//!   every shard (`Arc`); a bad file stops the broker at start, never a
//!   connection later.
//! - [`ListenerTls::handshake`]: the server handshake over a glommio
//!   `TcpStream` (`futures-rustls`), bounded by a timeout so that a silent
//!   client cannot hold a connection slot.
//! - [`principal_of`]: the principal of a client certificate: `User:` and
//!   the name `ssl.principal.mapping.rules` makes of its subject in RFC 2253
//!   form, as Java's `X500Principal.getName()` writes it (`DEFAULT`: the
//!   subject itself).

use super::principal_mapping::PrincipalMapper;
use super::Principal;
use futures::future::{select, Either};
use futures_rustls::server::TlsStream;
use glommio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use x509_parser::prelude::{FromDer, X509Certificate, X509Name};

/// The TLS stream of one client connection.
pub type ServerTlsStream = TlsStream<TcpStream>;

/// `ssl.client.auth`: whether clients present a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// No certificate asked for (Kafka's default).
    #[default]
    None,
    /// Asked for; a client without one is `User:ANONYMOUS`, a bad one is refused.
    Requested,
    /// Required, and it must chain to the truststore.
    Required,
}

impl std::str::FromStr for ClientAuth {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            other => Err(format!(
                "unknown client auth {other:?} (none, requested or required)"
            )),
        }
    }
}

/// A TLS version of `ssl.enabled.protocols` that rustls speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// `TLSv1.2`.
    Tls12,
    /// `TLSv1.3`.
    Tls13,
}

impl TlsVersion {
    /// Parses Kafka's `ssl.enabled.protocols` list (`TLSv1.2,TLSv1.3`).
    /// Older versions are refused by name: rustls never speaks them, and
    /// dropping them silently would hide that clients needing them fail.
    pub fn parse_list(text: &str) -> Result<Vec<TlsVersion>, String> {
        let mut versions = Vec::new();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let version = match name {
                "TLSv1.2" => TlsVersion::Tls12,
                "TLSv1.3" => TlsVersion::Tls13,
                other => {
                    return Err(format!(
                        "TLS version {other:?} is not supported (TLSv1.2, TLSv1.3)"
                    ))
                }
            };
            if !versions.contains(&version) {
                versions.push(version);
            }
        }
        if versions.is_empty() {
            return Err(String::from("no TLS version enabled (TLSv1.2, TLSv1.3)"));
        }
        Ok(versions)
    }

    pub(crate) fn rustls(self) -> &'static SupportedProtocolVersion {
        match self {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        }
    }
}

/// What a TLS listener is built from, once its PEM files are read.
pub struct TlsMaterial {
    /// The broker's certificate chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The broker's private key.
    pub key: PrivateKeyDer<'static>,
    /// CA certificates client certificates must chain to (`ssl.truststore.*`).
    pub trusted: Vec<CertificateDer<'static>>,
    /// `ssl.client.auth`.
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`.
    pub versions: Vec<TlsVersion>,
    /// How long a client has to finish the handshake.
    pub handshake_timeout: Duration,
    /// `ssl.principal.mapping.rules`.
    pub principal_mapping: PrincipalMapper,
}

/// One TLS listener's acceptor, shared by every shard.
pub struct ListenerTls {
    config: Arc<ServerConfig>,
    /// `ssl.client.auth`.
    pub client_auth: ClientAuth,
    /// How long a client has to finish the handshake.
    pub handshake_timeout: Duration,
    /// How a client certificate's subject becomes its principal; `None` on
    /// a SASL_SSL listener, where SASL names the principal.
    principal_mapping: Option<PrincipalMapper>,
}

impl fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key; the rest is enough to tell listeners apart in logs.
        f.debug_struct("ListenerTls")
            .field("client_auth", &self.client_auth)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ListenerTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for ListenerTls {}

/// Why a handshake did not complete.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The client did not finish within the handshake timeout.
    #[error("TLS handshake not finished after {0:?}")]
    Timeout(Duration),
    /// The client sent something that is not TLS, a refused certificate, ...
    #[error("TLS handshake failed: {0}")]
    Failed(#[source] std::io::Error),
    /// The certificate was accepted but its subject cannot be read.
    #[error("client certificate: {0}")]
    Certificate(String),
}

impl ListenerTls {
    /// Builds the acceptor; the error says what is wrong with the material
    /// (a key that does not match the certificate, an unusable CA, ...).
    pub fn new(material: TlsMaterial) -> Result<ListenerTls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: Vec<&'static SupportedProtocolVersion> =
            material.versions.iter().map(|v| v.rustls()).collect();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS versions: {e}"))?;
        let builder = match material.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => {
                let roots = root_store(material.trusted)?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| format!("client certificate verifier: {e}"))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(material.chain, material.key)
            .map_err(|e| format!("certificate and key: {e}"))?;
        Ok(ListenerTls {
            config: Arc::new(config),
            client_auth: material.client_auth,
            handshake_timeout: material.handshake_timeout,
            principal_mapping: Some(material.principal_mapping),
        })
    }

    /// The acceptor of a SASL_SSL listener: SASL names the principal, so a
    /// client certificate's subject is not mapped (nor refused when no
    /// mapping rule applies), as in Kafka.
    pub fn for_sasl(mut self) -> ListenerTls {
        self.principal_mapping = None;
        self
    }

    /// Runs the server handshake on `stream`; on success, the TLS stream and
    /// the principal of the client's certificate when it sent one.
    pub async fn handshake(
        &self,
        stream: TcpStream,
    ) -> Result<(ServerTlsStream, Option<Principal>), HandshakeError> {
        let acceptor = futures_rustls::TlsAcceptor::from(self.config.clone());
        let accept = acceptor.accept(stream);
        let timeout = glommio::timer::sleep(self.handshake_timeout);
        futures::pin_mut!(accept, timeout);
        let tls = match select(accept, timeout).await {
            Either::Left((Ok(tls), _)) => tls,
            Either::Left((Err(e), _)) => return Err(HandshakeError::Failed(e)),
            Either::Right(_) => return Err(HandshakeError::Timeout(self.handshake_timeout)),
        };
        let leaf = tls.get_ref().1.peer_certificates().and_then(|c| c.first());
        let principal = match (leaf, &self.principal_mapping) {
            (Some(leaf), Some(mapping)) => {
                Some(principal_of(leaf, mapping).map_err(HandshakeError::Certificate)?)
            }
            _ => None,
        };
        Ok((tls, principal))
    }
}

/// The truststore's CAs as rustls takes them.
pub(crate) fn root_store(trusted: Vec<CertificateDer<'static>>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in trusted {
        roots
            .add(cert)
            .map_err(|e| format!("truststore certificate: {e}"))?;
    }
    Ok(roots)
}

/// Every certificate of a PEM text, in order; an error when there is none
/// or a block does not decode.
pub fn parse_certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = normalize_pem(pem);
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad PEM certificate: {e}"))?;
    if certs.is_empty() {
        return Err(String::from(
            "no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

/// The (unencrypted) private key of a PEM text: PKCS#8, PKCS#1 or SEC1.
pub fn parse_private_key(pem: &str) -> Result<PrivateKeyDer<'static>, String> {
    // PKCS#8 `ENCRYPTED PRIVATE KEY`, or a legacy `Proc-Type: 4,ENCRYPTED` header.
    if pem.contains("ENCRYPTED") {
        return Err(String::from(
            "the private key is encrypted; rill reads unencrypted PEM keys only",
        ));
    }
    let pem = normalize_pem(pem);
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            String::from("no PEM private key (-----BEGIN PRIVATE KEY-----)")
        }
        other => format!("bad PEM private key: {other}"),
    })
}

/// Rewrites PEM blocks with one header line, the base64 body in lines and
/// one footer line. Kafka's inline PEM values (`ssl.keystore.key`, ...) in a
/// properties file lose their line breaks to `\` continuations; Kafka's own
/// parser accepts that, so rill does too.
fn normalize_pem(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let after_begin = &rest[begin + "-----BEGIN ".len()..];
        let Some(label_end) = after_begin.find("-----") else {
            break;
        };
        let label = &after_begin[..label_end];
        let body_and_more = &after_begin[label_end + "-----".len()..];
        let footer = format!("-----END {label}-----");
        let Some(end) = body_and_more.find(&footer) else {
            break;
        };
        let body: String = body_and_more[..end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push_str("-----BEGIN ");
        out.push_str(label);
        out.push_str("-----\n");
        for line in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str(&footer);
        out.push('\n');
        rest = &body_and_more[end + footer.len()..];
    }
    out
}

/// The principal of a client certificate (DER): `User:` and the name
/// `mapping` makes of its subject in RFC 2253 form (with Kafka's
/// `DEFAULT` rule, the subject itself); an error when no rule applies.
pub fn principal_of(certificate: &[u8], mapping: &PrincipalMapper) -> Result<Principal, String> {
    let (_, cert) = X509Certificate::from_der(certificate)
        .map_err(|e| format!("certificate does not parse: {e}"))?;
    Ok(Principal::user(&mapping.apply(&rfc2253(cert.subject()))?))
}

/// An X.500 name as Java's `X500Principal.getName()` (RFC 2253) writes it:
/// the last RDN first, `,` between RDNs, `+` inside a multi-valued one,
/// RFC 2253's keywords for its attribute types and the dotted OID for the
/// others; a value is a string when it has a string type and a keyword,
/// otherwise `#` and the hex of its DER encoding.
pub fn rfc2253(name: &X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|ava| {
                    let oid = ava.attr_type().to_id_string();
                    match (keyword(&oid), string_value(ava)) {
                        (Some(keyword), Some(value)) => format!("{keyword}={}", escape(&value)),
                        (Some(keyword), None) => format!("{keyword}={}", hex_value(ava)),
                        (None, _) => format!("{oid}={}", hex_value(ava)),
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// RFC 2253's attribute type keywords (those Java writes by name).
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// The value as text when it has one of the string types Java reads as
/// text (UTF8, Printable, IA5, T61, BMP, Universal).
fn string_value(ava: &x509_parser::x509::AttributeTypeAndValue<'_>) -> Option<String> {
    use x509_parser::der_parser::asn1_rs::Tag;
    let value = ava.attr_value();
    let data: &[u8] = value.data;
    match value.tag() {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::T61String => {
            Some(String::from_utf8_lossy(data).into_owned())
        }
        Tag::BmpString => {
            let units: Vec<u16> = data
                .chunks_exact(2)
                .map(|p| u16::from_be_bytes([p[0], p[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        Tag::UniversalString => data
            .chunks_exact(4)
            .map(|p| char::from_u32(u32::from_be_bytes([p[0], p[1], p[2], p[3]])))
            .collect(),
        _ => None,
    }
}

/// `#` and the hex of the value's DER encoding (tag, length, content).
fn hex_value(ava: &x509_parser::x509::AttributeTypeAndValue<'_>) -> String {
    let value = ava.attr_value();
    let data: &[u8] = value.data;
    let mut der = Vec::with_capacity(data.len() + 6);
    let class = (value.class() as u8) << 6;
    let constructed = if value.header.is_constructed() {
        0x20
    } else {
        0
    };
    // Attribute values use low tag numbers (< 31); a high one is written
    // in the one-byte form's escape, which Java never needs for names.
    der.push(class | constructed | (value.tag().0 as u8 & 0x1f));
    let length = data.len();
    if length < 0x80 {
        der.push(length as u8);
    } else {
        let bytes = length.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        der.push(0x80 | (bytes.len() - skip) as u8);
        der.extend_from_slice(&bytes[skip..]);
    }
    der.extend_from_slice(data);
    let mut out = String::with_capacity(1 + der.len() * 2);
    out.push('#');
    for byte in der {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// RFC 2253 escaping: `,+"\<>;` always, `#` or a space at the start and a
/// space at the end.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (index, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (index == 0 && (c == '#' || c == ' '))
            || (index == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    fn certificate_with(dn: DistinguishedName) -> Vec<u8> {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn default_rule_is_the_subject_in_rfc2253_order() {
        // rcgen writes the RDNs in insertion order; RFC 2253 reverses them.
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CountryName, "US");
        dn.push(DnType::OrganizationName, "Acme, Inc.");
        dn.push(DnType::OrganizationalUnitName, "eng");
        dn.push(DnType::CommonName, "alice");
        let principal = principal_of(&certificate_with(dn), &PrincipalMapper::default()).unwrap();
        assert_eq!(
            principal.to_string(),
            r"User:CN=alice,OU=eng,O=Acme\, Inc.,C=US"
        );
    }

    #[test]
    fn special_characters_are_escaped_and_unknown_types_are_hex() {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationalUnitName, "#x");
        dn.push(DnType::CommonName, " #a+b<c>;\"d\\ ");
        dn.push(
            DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]),
            rcgen::DnValue::Ia5String("a@b".try_into().unwrap()),
        );
        let principal = principal_of(&certificate_with(dn), &PrincipalMapper::default()).unwrap();
        assert_eq!(
            principal.name,
            r#"1.2.840.113549.1.9.1=#1603614062,CN=\ #a\+b\<c\>\;\"d\\\ ,OU=\#x"#
        );
    }

    #[test]
    fn client_auth_and_versions_parse_kafka_names() {
        assert_eq!("REQUIRED".parse(), Ok(ClientAuth::Required));
        assert!("want".parse::<ClientAuth>().is_err());
        assert_eq!(
            TlsVersion::parse_list("TLSv1.3, TLSv1.2").unwrap(),
            [TlsVersion::Tls13, TlsVersion::Tls12]
        );
        assert!(TlsVersion::parse_list("TLSv1.1,TLSv1.2")
            .unwrap_err()
            .contains("TLSv1.1"));
        assert!(TlsVersion::parse_list("").is_err());
    }

    #[test]
    fn pem_without_line_breaks_parses_and_garbage_does_not() {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "broker");
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![String::from("localhost")])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let flat_cert = cert.pem().replace('\n', "");
        let flat_key = key.serialize_pem().replace('\n', "");
        assert_eq!(parse_certificates(&flat_cert).unwrap().len(), 1);
        assert!(parse_private_key(&flat_key).is_ok());
        assert!(parse_certificates("hello").is_err());
        assert!(parse_private_key(&cert.pem()).is_err());
        let chain = ListenerTls::new(TlsMaterial {
            chain: parse_certificates(&cert.pem()).unwrap(),
            key: parse_private_key(&key.serialize_pem()).unwrap(),
            trusted: Vec::new(),
            client_auth: ClientAuth::None,
            versions: vec![TlsVersion::Tls13],
            handshake_timeout: Duration::from_secs(1),
            principal_mapping: PrincipalMapper::default(),
        });
        assert!(chain.is_ok());
        let other = KeyPair::generate().unwrap();
        let mismatched = ListenerTls::new(TlsMaterial {
            chain: parse_certificates(&cert.pem()).unwrap(),
            key: parse_private_key(&other.serialize_pem()).unwrap(),
            trusted: Vec::new(),
            client_auth: ClientAuth::None,
            versions: vec![TlsVersion::Tls13],
            handshake_timeout: Duration::from_secs(1),
            principal_mapping: PrincipalMapper::default(),
        });
        assert!(mismatched.is_err());
    }
}

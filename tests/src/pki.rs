//! A test PKI made with rcgen: a CA and the certificates it signs, as PEM
//! files in a directory (the TLS tests and the inter-broker TLS test).

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// A CA and what it signed, as PEM files in a directory.
pub struct Pki {
    dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(dir: &Path, name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} CA"));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("ca key"))
            .expect("ca certificate");
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).expect("pki dir");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write ca");
        Pki { dir, ca }
    }

    pub fn ca_file(&self) -> String {
        self.dir.join("ca.pem").display().to_string()
    }

    /// Signs a certificate; writes `<file>.crt` and `<file>.key`; returns
    /// their paths.
    pub fn issue(
        &self,
        file: &str,
        names: &[&str],
        dn: &[(DnType, &str)],
        usage: ExtendedKeyUsagePurpose,
    ) -> (String, String) {
        self.issue_for(file, names, dn, vec![usage])
    }

    /// [`Pki::issue`] with several extended key usages.
    fn issue_for(
        &self,
        file: &str,
        names: &[&str],
        dn: &[(DnType, &str)],
        usages: Vec<ExtendedKeyUsagePurpose>,
    ) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .expect("params");
        params.distinguished_name = DistinguishedName::new();
        for (kind, value) in dn {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params.extended_key_usages = usages;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.ca).expect("signed");
        let cert_path = self.dir.join(format!("{file}.crt"));
        let key_path = self.dir.join(format!("{file}.key"));
        std::fs::write(&cert_path, cert.pem()).expect("write cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        (
            cert_path.display().to_string(),
            key_path.display().to_string(),
        )
    }

    /// The broker's certificate (localhost and 127.0.0.1; a server's and,
    /// for other brokers asking for one, a client's) as one PEM file
    /// holding the key and the chain (`ssl.keystore.location`).
    pub fn broker_keystore(&self) -> String {
        self.keystore("broker", &["localhost", "127.0.0.1"])
    }

    /// [`Pki::broker_keystore`] with the host names `names` only.
    pub fn keystore(&self, file: &str, names: &[&str]) -> String {
        let (cert, key) = self.issue_for(
            file,
            names,
            &[(DnType::CommonName, "broker")],
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        let both = format!(
            "{}{}",
            std::fs::read_to_string(key).expect("key"),
            std::fs::read_to_string(cert).expect("cert")
        );
        let path = self.dir.join(format!("{file}-keystore.pem"));
        std::fs::write(&path, both).expect("write keystore");
        path.display().to_string()
    }
}

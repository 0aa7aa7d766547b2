//! The control plane's PKI, made fresh for each control plane with rcgen: one CA that signs the
//! apiservers' serving certificates and the admin's client certificate (it is also the
//! `--client-ca-file`), and the service-account signing key.

use std::net::{IpAddr, Ipv4Addr};

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

/// The admin's user name (its certificate's CN).
pub const ADMIN_USER: &str = "ichor-test-admin";
/// The admin's group: the certificate's O, bound to cluster-admin by the bootstrap RBAC policy.
pub const ADMIN_GROUP: &str = "system:masters";

/// A certificate and its private key, PEM.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The certificate.
    pub cert_pem: String,
    /// Its PKCS#8 private key.
    pub key_pem: String,
}

/// What one control plane trusts and presents.
pub struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The client certificate of the admin (`system:masters`).
    pub admin: Pair,
    /// The service-account signing key (ECDSA P-256, PKCS#8).
    pub service_account_key_pem: String,
    /// Its public key (SubjectPublicKeyInfo PEM), which `--service-account-key-file` reads.
    pub service_account_public_pem: String,
}

impl Pki {
    /// A new CA, admin certificate and service-account key.
    pub fn new() -> anyhow::Result<Self> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "ichor-test-control-plane-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca =
            CertifiedIssuer::self_signed(params, KeyPair::generate()?).context("self-signing the test CA")?;
        let ca_pem = ca.pem();
        let mut admin = CertificateParams::new(Vec::<String>::new())?;
        admin.distinguished_name.push(DnType::CommonName, ADMIN_USER);
        admin
            .distinguished_name
            .push(DnType::OrganizationName, ADMIN_GROUP);
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let admin_key = KeyPair::generate()?;
        let admin_cert = admin.signed_by(&admin_key, &ca)?;
        let service_account = KeyPair::generate()?;
        Ok(Self {
            ca,
            ca_pem,
            admin: Pair {
                cert_pem: admin_cert.pem(),
                key_pem: admin_key.serialize_pem(),
            },
            service_account_key_pem: service_account.serialize_pem(),
            service_account_public_pem: service_account.public_key_pem(),
        })
    }

    /// A serving certificate for `127.0.0.1` and `localhost`.
    pub fn serving(&self, name: &str) -> anyhow::Result<Pair> {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.ca)?;
        Ok(Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

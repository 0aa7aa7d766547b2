//! The one test PKI: a CA made fresh with rcgen for each test that needs TLS, signing serving
//! certificates for loopback (`localhost` and 127.0.0.1) and client certificates, and a rustls
//! server configuration presenting one of them. The control plane, the external OpenID
//! provider and the tests' own servers all take their certificates from here.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType, date_time_ymd,
};

/// The first year of every certificate made here (not before January 1st).
const NOT_BEFORE_YEAR: i32 = 2020;
/// The year the CA and, unless told otherwise, its certificates expire (January 1st).
pub const DEFAULT_UNTIL_YEAR: i32 = 2090;

/// A certificate and its private key.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its PKCS#8 private key, PEM.
    pub key_pem: String,
    /// The certificate, DER (to compare with what a server presented).
    pub der: Vec<u8>,
    /// Its notAfter, Unix seconds.
    pub not_after: i64,
}

/// A test CA: self-signed, valid from 2020 to [`DEFAULT_UNTIL_YEAR`].
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// The CA certificate, PEM (what clients trust).
    pub pem: String,
}

impl TestCa {
    /// A new CA with a fresh P-256 key and `common_name` as its subject.
    ///
    /// # Errors
    /// When rcgen cannot make or sign the certificate.
    pub fn new(common_name: &str) -> anyhow::Result<Self> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_before = date_time_ymd(NOT_BEFORE_YEAR, 1, 1);
        params.not_after = date_time_ymd(DEFAULT_UNTIL_YEAR, 1, 1);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)
            .with_context(|| format!("self-signing the test CA {common_name}"))?;
        let pem = issuer.pem();
        Ok(Self { issuer, pem })
    }

    /// A serving certificate for `localhost` and 127.0.0.1 with subject `common_name` and a
    /// fresh P-256 key, valid until [`DEFAULT_UNTIL_YEAR`].
    ///
    /// # Errors
    /// When rcgen cannot make or sign the certificate.
    pub fn serving(&self, common_name: &str) -> anyhow::Result<Pair> {
        self.serving_until(common_name, DEFAULT_UNTIL_YEAR, KeyPair::generate()?)
    }

    /// As [`TestCa::serving`], valid until January 1st of `until_year`, over `key` (a test of
    /// certificate reloads renews the certificate with or without a new key).
    ///
    /// # Errors
    /// When rcgen cannot sign the certificate.
    pub fn serving_until(&self, common_name: &str, until_year: i32, key: KeyPair) -> anyhow::Result<Pair> {
        self.serving_with(common_name, until_year, key, &[])
    }

    /// As [`TestCa::serving`], valid for the address `ip` too (another loopback address, say).
    ///
    /// # Errors
    /// When rcgen cannot make or sign the certificate.
    pub fn serving_for_ip(&self, common_name: &str, ip: IpAddr) -> anyhow::Result<Pair> {
        self.serving_with(common_name, DEFAULT_UNTIL_YEAR, KeyPair::generate()?, &[ip])
    }

    /// As [`TestCa::serving`], valid for every one of `ips` too (a node's address and its
    /// `kubernetes` Service's ClusterIP, say).
    ///
    /// # Errors
    /// When rcgen cannot make or sign the certificate.
    pub fn serving_for_ips(&self, common_name: &str, ips: &[IpAddr]) -> anyhow::Result<Pair> {
        self.serving_with(common_name, DEFAULT_UNTIL_YEAR, KeyPair::generate()?, ips)
    }

    /// As [`TestCa::serving`], valid for the DNS name `name` too (a site's public host name, as
    /// cert-manager would issue it).
    ///
    /// # Errors
    /// When rcgen cannot make or sign the certificate.
    pub fn serving_for_name(&self, common_name: &str, name: &str) -> anyhow::Result<Pair> {
        let mut params = CertificateParams::new(vec!["localhost".to_owned(), name.to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        params.not_before = date_time_ymd(NOT_BEFORE_YEAR, 1, 1);
        params.not_after = date_time_ymd(DEFAULT_UNTIL_YEAR, 1, 1);
        self.sign(&params, &KeyPair::generate()?)
    }

    fn serving_with(
        &self,
        common_name: &str,
        until_year: i32,
        key: KeyPair,
        more_ips: &[IpAddr],
    ) -> anyhow::Result<Pair> {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        for ip in more_ips
            .iter()
            .filter(|ip| **ip != IpAddr::V4(Ipv4Addr::LOCALHOST))
        {
            params.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        params.not_before = date_time_ymd(NOT_BEFORE_YEAR, 1, 1);
        params.not_after = date_time_ymd(until_year, 1, 1);
        self.sign(&params, &key)
    }

    /// A client certificate with subject CN `common_name` and O `organization` (Kubernetes
    /// reads them as the user and its group), with a fresh P-256 key.
    ///
    /// # Errors
    /// When rcgen cannot make or sign the certificate.
    pub fn client(&self, common_name: &str, organization: &str) -> anyhow::Result<Pair> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, organization);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = date_time_ymd(NOT_BEFORE_YEAR, 1, 1);
        params.not_after = date_time_ymd(DEFAULT_UNTIL_YEAR, 1, 1);
        self.sign(&params, &KeyPair::generate()?)
    }

    fn sign(&self, params: &CertificateParams, key: &KeyPair) -> anyhow::Result<Pair> {
        let cert = params
            .signed_by(key, &self.issuer)
            .context("signing a test certificate")?;
        Ok(Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
            not_after: params.not_after.unix_timestamp(),
        })
    }
}

/// A rustls server configuration (ring) presenting `pair`, offering HTTP/2 and HTTP/1.1.
///
/// # Errors
/// When the key is not PKCS#8 or rustls refuses the pair.
pub fn server_config(pair: &Pair) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let cert = pem::parse(&pair.cert_pem).context("the certificate is not PEM")?;
    let key = pem::parse(&pair.key_pem).context("the key is not PEM")?;
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.into_contents().into()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.into_contents().into()),
            )?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

//! The certificates' performers: the self-signed Ichor CA (RSA-3072) and the ECDSA P-256
//! leaves it signs (the issuer's and the webhook's serving certificates).

use super::{KeyMaterial, PerformError, crypto};
use crate::identity::effects::{IssueCaRequest, IssueLeafRequest, SanName};
use ichor_renderers::trust::tls::CA_COMMON_NAME;
use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A certificate and its private key, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedPair {
    /// The certificate.
    pub cert_pem: String,
    /// The private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for IssuedPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedPair")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// Sets a certificate's validity (whole seconds; instants before 1970 become 1970).
fn set_validity(params: &mut CertificateParams, from: Timestamp, to: Timestamp) {
    let secs = |t: Timestamp| std::time::Duration::from_secs(u64::try_from(t.as_second()).unwrap_or(0));
    params.not_before = rcgen::date_time_ymd(1970, 1, 1) + secs(from);
    params.not_after = rcgen::date_time_ymd(1970, 1, 1) + secs(to);
}

fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn rsa_key_pair(id: &str, pem: &str) -> Result<KeyPair, PerformError> {
    KeyPair::from_pkcs8_pem_and_sign_algo(pem, &rcgen::PKCS_RSA_SHA256).map_err(|e| crypto(id, e))
}

/// Issues a self-signed RSA-3072 CA for the request's common name and validity.
///
/// # Errors
/// [`PerformError::Crypto`].
pub fn issue_ca(r: &IssueCaRequest, material: &mut dyn KeyMaterial) -> Result<IssuedPair, PerformError> {
    let id = "issue-ca";
    let key_pem = material.rsa_pkcs8_pem().map_err(|e| crypto(id, e))?;
    let key = rsa_key_pair(id, &key_pem)?;
    let mut params = ca_params(&r.common_name);
    set_validity(&mut params, r.not_before, r.not_after);
    let cert = params.self_signed(&key).map_err(|e| crypto(id, e))?;
    Ok(IssuedPair {
        cert_pem: cert.pem(),
        key_pem,
    })
}

/// Issues an ECDSA P-256 leaf for the request's SANs and validity, signed by `ca` (an RSA CA
/// issued by [`issue_ca`], whose subject is [`CA_COMMON_NAME`]).
///
/// # Errors
/// [`PerformError::Crypto`] (a SAN rcgen refuses, a CA key that does not load).
pub fn issue_leaf(r: &IssueLeafRequest, ca: &IssuedPair) -> Result<IssuedPair, PerformError> {
    let id = "issue-leaf";
    let ca_key = rsa_key_pair(id, &ca.key_pem)
        .or_else(|_| KeyPair::from_pem(&ca.key_pem).map_err(|e| crypto(id, e)))?;
    let issuer = Issuer::new(ca_params(CA_COMMON_NAME), ca_key);
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, r.common_name.as_str());
    params.subject_alt_names = subject_alt_names(&r.sans).map_err(|e| crypto(id, e))?;
    set_validity(&mut params, r.not_before, r.not_after);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(|e| crypto(id, e))?;
    let cert = params.signed_by(&key, &issuer).map_err(|e| crypto(id, e))?;
    Ok(IssuedPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A name a leaf certificate cannot carry (rcgen refuses it as a DNS name).
#[derive(Debug, thiserror::Error)]
#[error("SAN {name:?}: {reason}")]
pub struct SanError {
    /// The name.
    pub name: String,
    /// Why rcgen refuses it.
    pub reason: rcgen::Error,
}

/// The rcgen SANs of a leaf request (shared by the real performer and the simulator).
///
/// # Errors
/// A DNS name rcgen refuses, named in the message.
pub fn subject_alt_names(sans: &[SanName]) -> Result<Vec<SanType>, SanError> {
    sans.iter()
        .map(|s| match s {
            SanName::Ip(ip) => Ok(SanType::IpAddress(*ip)),
            SanName::Dns(d) => d
                .clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|reason: rcgen::Error| SanError {
                    name: d.clone(),
                    reason,
                }),
        })
        .collect()
}

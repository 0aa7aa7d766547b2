//! The certificates as observed (`ichor-oidc-ca`, `ichor-oidc-tls`) and the CA and leaf
//! decisions.

use super::{IssuerServiceOut, effect};
use crate::identity::TLS_CERT_KEY;
use crate::identity::effects::{CertificateRequest, SanName};
use crate::identity::read::{SecretValue, secret_value};
use ichor_graph::{Desired, Object, Timed};
use ichor_renderers::trust::tls::{CertFacts, San, decide, decide_ca};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// What the decisions need of a certificate ([`CertFacts`] in serializable form).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertSummary {
    /// Start of validity.
    pub not_before: Timestamp,
    /// End of validity.
    pub not_after: Timestamp,
    /// Subject alternative names.
    pub sans: Vec<SanName>,
    /// Subject.
    pub subject: String,
    /// Issuer.
    pub issuer: String,
    /// sha256 of the subject DER.
    pub subject_der_sha256: String,
    /// sha256 of the issuer DER.
    pub issuer_der_sha256: String,
    /// sha256 fingerprint.
    pub sha256_fingerprint: String,
    /// subjectKeyIdentifier.
    pub subject_key_id: Option<String>,
    /// authorityKeyIdentifier.
    pub authority_key_id: Option<String>,
    /// Whether it is a CA.
    pub is_ca: bool,
}

impl From<&CertFacts> for CertSummary {
    fn from(f: &CertFacts) -> Self {
        CertSummary {
            not_before: f.not_before,
            not_after: f.not_after,
            sans: f.sans.iter().map(SanName::from).collect(),
            subject: f.subject.clone(),
            issuer: f.issuer.clone(),
            subject_der_sha256: f.subject_der_sha256.clone(),
            issuer_der_sha256: f.issuer_der_sha256.clone(),
            sha256_fingerprint: f.sha256_fingerprint.clone(),
            subject_key_id: f.subject_key_id.clone(),
            authority_key_id: f.authority_key_id.clone(),
            is_ca: f.is_ca,
        }
    }
}

impl From<&CertSummary> for CertFacts {
    fn from(s: &CertSummary) -> Self {
        CertFacts {
            not_before: s.not_before,
            not_after: s.not_after,
            sans: s.sans.iter().map(San::from).collect(),
            subject: s.subject.clone(),
            issuer: s.issuer.clone(),
            subject_der_sha256: s.subject_der_sha256.clone(),
            issuer_der_sha256: s.issuer_der_sha256.clone(),
            sha256_fingerprint: s.sha256_fingerprint.clone(),
            subject_key_id: s.subject_key_id.clone(),
            authority_key_id: s.authority_key_id.clone(),
            is_ca: s.is_ca,
        }
    }
}

/// The state of one certificate Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum CertState {
    /// No Secret or no `tls.crt`.
    Absent,
    /// `tls.crt` is redacted (a replayed journal): present, content unknown.
    Redacted,
    /// `tls.crt` is not a readable certificate.
    Unreadable {
        /// Why.
        error: String,
    },
    /// The certificate.
    Read {
        /// Its facts.
        facts: Box<CertSummary>,
        /// Its PEM (certificates are public).
        pem: String,
    },
}

impl CertState {
    fn facts(&self) -> Option<CertFacts> {
        match self {
            CertState::Read { facts, .. } => Some(facts.as_ref().into()),
            _ => None,
        }
    }

    fn fingerprint(&self) -> Option<String> {
        match self {
            CertState::Read { facts, .. } => Some(facts.sha256_fingerprint.clone()),
            _ => None,
        }
    }
}

/// The CA and the leaf as observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificates {
    /// `ichor-oidc-ca`.
    pub ca: CertState,
    /// `ichor-oidc-tls`.
    pub leaf: CertState,
}

fn cert_state(secret: Option<&Object>, what: &str) -> CertState {
    let Some(secret) = secret else {
        return CertState::Absent;
    };
    match secret_value(secret, TLS_CERT_KEY) {
        SecretValue::Absent => CertState::Absent,
        SecretValue::Redacted => CertState::Redacted,
        SecretValue::Undecodable(error) => CertState::Unreadable { error },
        SecretValue::Bytes(bytes) => match String::from_utf8(bytes) {
            Err(_) => CertState::Unreadable {
                error: format!("{what} is not UTF-8 PEM text"),
            },
            Ok(pem) => match CertFacts::from_pem(&pem, what) {
                Ok(f) => CertState::Read {
                    facts: Box::new((&f).into()),
                    pem,
                },
                Err(e) => CertState::Unreadable { error: e.to_string() },
            },
        },
    }
}

/// The CA and leaf Secrets → their certificates.
pub(crate) fn certificates(ca: &Option<Object>, leaf: &Option<Object>) -> Certificates {
    Certificates {
        ca: cert_state(ca.as_ref(), "tls.crt of ichor-oidc-ca"),
        leaf: cert_state(leaf.as_ref(), "tls.crt of ichor-oidc-tls"),
    }
}

/// The CA and leaf decisions: `now`, the certificates and the issuer Service → issuance effects.
/// Without a Service (users off) only the CA: the webhooks' certificate needs it. Waits (no
/// decision) while a certificate is redacted.
pub(crate) fn certificate_effects(
    now: Timestamp,
    certs: &Certificates,
    service: &IssuerServiceOut,
) -> Timed<Desired> {
    if matches!(certs.ca, CertState::Redacted) {
        return Timed::forever(Desired::default());
    }
    let decision = match &service.service {
        None => decide_ca(now, certs.ca.facts().as_ref()),
        Some(_) if matches!(certs.leaf, CertState::Redacted) => return Timed::forever(Desired::default()),
        Some(svc) => decide(
            now,
            certs.ca.facts().as_ref(),
            certs.leaf.facts().as_ref(),
            &svc.into(),
        ),
    };
    let mut desired = Desired::default();
    for e in &decision.effects {
        let replaces = match e {
            ichor_renderers::trust::TlsEffect::IssueCa { .. } => certs.ca.fingerprint(),
            ichor_renderers::trust::TlsEffect::IssueLeaf { .. } => certs.leaf.fingerprint(),
        };
        match CertificateRequest::new(e, replaces) {
            CertificateRequest::Ca(r) => desired
                .effects
                .extend(effect(CertificateRequest::Ca(r.clone()).id(), &r)),
            CertificateRequest::Leaf(r) => desired
                .effects
                .extend(effect(CertificateRequest::Leaf(r.clone()).id(), &r)),
        }
    }
    Timed {
        value: desired,
        deadline: decision.next_deadline,
    }
}

//! The issuer's private CA (`ichor-oidc-ca`, 10 years) and its TLS leaf (`ichor-oidc-tls`,
//! 1 year, renewed at two thirds), as decisions: [`decide`] reads the facts of the current
//! certificates ([`CertFacts`]) and the issuer Service, and asks for issuance
//! ([`TlsEffect`]); the applier issues with rcgen and writes the Secrets.
//!
//! - CA missing, expired, or not a CA → issue a CA, and then the leaf too.
//! - Leaf missing; its SANs differ from the Service's ClusterIP and DNS names; not issued by the
//!   current CA; or two thirds of its lifetime passed → issue a leaf.
//!
//! "Issued by the current CA" is checked by the issuer name (raw DER equal to the CA's subject)
//! and the key identifiers (the leaf's authorityKeyIdentifier equal to the CA's
//! subjectKeyIdentifier; rcgen derives the latter from the public key, so a new CA key means a
//! new identifier). Both certificates come from the controller's own Secrets, so this decides
//! *whether to reissue*; it is not a signature verification (the kube-apiserver does that).

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Span, Timestamp};
use sha2::{Digest, Sha256};
use std::fmt;
use std::net::IpAddr;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

/// Common name of the CA the applier issues.
pub const CA_COMMON_NAME: &str = "Ichor OIDC issuer CA";
/// Lifetime of a newly issued CA, in calendar years.
pub const CA_LIFETIME_YEARS: i16 = 10;
/// Lifetime of a newly issued leaf, in calendar years (capped at the CA's expiry).
pub const LEAF_LIFETIME_YEARS: i16 = 1;

/// Why a certificate could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertError {
    /// No PEM block.
    #[error("{what} holds no PEM block; a \"CERTIFICATE\" block is required")]
    NotPem {
        /// What was read (`ca.crt of ichor-oidc-ca`).
        what: String,
    },
    /// The first block is not a certificate.
    #[error("{what} starts with a {label:?} PEM block; a \"CERTIFICATE\" block is required first")]
    NotCertificate {
        /// What was read.
        what: String,
        /// The block's label.
        label: String,
    },
    /// The DER could not be parsed as X.509.
    #[error("{what} is not a well-formed X.509 certificate: {detail}")]
    Malformed {
        /// What was read.
        what: String,
        /// The parser's message (about structure, not secrets: certificates are public).
        detail: String,
    },
}

/// A subject alternative name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum San {
    /// An IP address SAN.
    Ip(IpAddr),
    /// A DNS name SAN (compared lower-case).
    Dns(String),
}

impl fmt::Display for San {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            San::Ip(ip) => write!(f, "IP:{ip}"),
            San::Dns(name) => write!(f, "DNS:{name}"),
        }
    }
}

/// What the decisions need to know of a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFacts {
    /// Start of validity.
    pub not_before: Timestamp,
    /// End of validity.
    pub not_after: Timestamp,
    /// Subject alternative names, sorted and deduplicated (DNS names lower-case).
    pub sans: Vec<San>,
    /// Subject, as text (RFC 4514 style).
    pub subject: String,
    /// Issuer, as text.
    pub issuer: String,
    /// SHA-256 of the subject's DER, to link a leaf's issuer to a CA's subject exactly.
    pub subject_der_sha256: String,
    /// SHA-256 of the issuer's DER.
    pub issuer_der_sha256: String,
    /// Lower-case hex SHA-256 of the certificate's DER (its fingerprint).
    pub sha256_fingerprint: String,
    /// subjectKeyIdentifier, lower-case hex.
    pub subject_key_id: Option<String>,
    /// authorityKeyIdentifier's keyIdentifier, lower-case hex.
    pub authority_key_id: Option<String>,
    /// basicConstraints CA flag.
    pub is_ca: bool,
}

impl CertFacts {
    /// Reads the first PEM block of `pem_text`, which must be a certificate (a `tls.crt` may
    /// carry the chain after it). `what` names the source in errors.
    pub fn from_pem(pem_text: &str, what: &str) -> Result<Self, CertError> {
        let blocks = pem::parse_many(pem_text).map_err(|_| CertError::NotPem {
            what: what.to_owned(),
        })?;
        let first = blocks.first().ok_or_else(|| CertError::NotPem {
            what: what.to_owned(),
        })?;
        if first.tag() != "CERTIFICATE" {
            return Err(CertError::NotCertificate {
                what: what.to_owned(),
                label: first.tag().chars().take(40).collect(),
            });
        }
        Self::from_der(first.contents(), what)
    }

    /// Reads a DER certificate. `what` names the source in errors.
    pub fn from_der(der: &[u8], what: &str) -> Result<Self, CertError> {
        let malformed = |detail: String| CertError::Malformed {
            what: what.to_owned(),
            detail,
        };
        let (rest, cert) = X509Certificate::from_der(der).map_err(|e| malformed(e.to_string()))?;
        if !rest.is_empty() {
            return Err(malformed("trailing bytes after the certificate".to_owned()));
        }
        let time = |t: i64| Timestamp::from_second(t).map_err(|e| malformed(e.to_string()));
        let validity = cert.validity();
        let mut sans = Vec::new();
        let mut subject_key_id = None;
        let mut authority_key_id = None;
        let mut is_ca = false;
        for ext in cert.extensions() {
            match ext.parsed_extension() {
                ParsedExtension::SubjectAlternativeName(san) => {
                    for name in &san.general_names {
                        match name {
                            GeneralName::DNSName(d) => sans.push(San::Dns(d.to_ascii_lowercase())),
                            GeneralName::IPAddress(bytes) => {
                                if let Ok(v4) = <[u8; 4]>::try_from(*bytes) {
                                    sans.push(San::Ip(IpAddr::from(v4)));
                                } else if let Ok(v6) = <[u8; 16]>::try_from(*bytes) {
                                    sans.push(San::Ip(IpAddr::from(v6)));
                                } else {
                                    return Err(malformed(
                                        "an IP address SAN is neither 4 nor 16 bytes".to_owned(),
                                    ));
                                }
                            }
                            _ => {}
                        }
                    }
                }
                ParsedExtension::SubjectKeyIdentifier(id) => subject_key_id = Some(hex::encode(id.0)),
                ParsedExtension::AuthorityKeyIdentifier(aki) => {
                    authority_key_id = aki.key_identifier.as_ref().map(|id| hex::encode(id.0));
                }
                ParsedExtension::BasicConstraints(bc) => is_ca = bc.ca,
                _ => {}
            }
        }
        sans.sort();
        sans.dedup();
        Ok(CertFacts {
            not_before: time(validity.not_before.timestamp())?,
            not_after: time(validity.not_after.timestamp())?,
            sans,
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            subject_der_sha256: hex::encode(Sha256::digest(cert.subject().as_raw())),
            issuer_der_sha256: hex::encode(Sha256::digest(cert.issuer().as_raw())),
            sha256_fingerprint: hex::encode(Sha256::digest(der)),
            subject_key_id,
            authority_key_id,
            is_ca,
        })
    }

    /// The instant two thirds into the validity, when a leaf is renewed.
    pub fn renewal_point(&self) -> Timestamp {
        let life = self.not_after.duration_since(self.not_before).as_secs().max(0);
        let at = SignedDuration::from_secs(life / 3 * 2 + (life % 3) * 2 / 3);
        self.not_before.checked_add(at).unwrap_or(self.not_after)
    }

    /// True when `self` (a leaf) names `ca` as issuer by DN and by key identifier.
    pub fn is_issued_by(&self, ca: &CertFacts) -> bool {
        self.issuer_der_sha256 == ca.subject_der_sha256
            && matches!((&self.authority_key_id, &ca.subject_key_id), (Some(a), Some(s)) if a == s)
    }
}

/// The issuer's Service, whose ClusterIP and DNS names the leaf must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerService {
    /// The Service's ClusterIP (IPv4 or IPv6).
    pub cluster_ip: IpAddr,
    /// The Service's name.
    pub name: String,
    /// The Service's namespace.
    pub namespace: String,
}

/// Why a Service cannot serve as the issuer Service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// A field is absent.
    #[error("Service {name}: {field} is missing")]
    Missing {
        /// The Service (or `<unnamed>`).
        name: String,
        /// The missing field.
        field: &'static str,
    },
    /// The Service has no usable ClusterIP.
    #[error(
        "Service {name}: spec.clusterIP {value:?} is not an IP address; the issuer Service needs a \
         ClusterIP (not headless)"
    )]
    NoClusterIp {
        /// The Service.
        name: String,
        /// The value found.
        value: String,
    },
}

impl IssuerService {
    /// Reads name, namespace and ClusterIP from a Kubernetes Service.
    pub fn from_service(svc: &k8s_openapi::api::core::v1::Service) -> Result<Self, ServiceError> {
        let name = svc.metadata.name.clone().ok_or(ServiceError::Missing {
            name: "<unnamed>".into(),
            field: "metadata.name",
        })?;
        let namespace = svc
            .metadata
            .namespace
            .clone()
            .ok_or_else(|| ServiceError::Missing {
                name: name.clone(),
                field: "metadata.namespace",
            })?;
        let value = svc
            .spec
            .as_ref()
            .and_then(|s| s.cluster_ip.clone())
            .ok_or_else(|| ServiceError::Missing {
                name: name.clone(),
                field: "spec.clusterIP",
            })?;
        let cluster_ip = value.parse::<IpAddr>().map_err(|_| ServiceError::NoClusterIp {
            name: name.clone(),
            value: value.chars().take(64).collect(),
        })?;
        Ok(IssuerService {
            cluster_ip,
            name,
            namespace,
        })
    }

    /// The SANs the leaf must carry, sorted: the ClusterIP and `<name>`, `<name>.<namespace>`,
    /// `<name>.<namespace>.svc`, `<name>.<namespace>.svc.cluster.local`.
    pub fn expected_sans(&self) -> Vec<San> {
        let (n, ns) = (
            self.name.to_ascii_lowercase(),
            self.namespace.to_ascii_lowercase(),
        );
        let mut sans = vec![
            San::Ip(self.cluster_ip),
            San::Dns(n.clone()),
            San::Dns(format!("{n}.{ns}")),
            San::Dns(format!("{n}.{ns}.svc")),
            San::Dns(format!("{n}.{ns}.svc.cluster.local")),
        ];
        sans.sort();
        sans
    }
}

/// A certificate the applier must issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsEffect {
    /// Issue a new self-signed CA (RSA or ECDSA, the applier's choice) into `ichor-oidc-ca`.
    IssueCa {
        /// Subject common name.
        common_name: String,
        /// Start of validity (now).
        not_before: Timestamp,
        /// End of validity (now + 10 years).
        not_after: Timestamp,
        /// Why.
        reason: String,
    },
    /// Issue a new leaf, signed by the current CA (or by the CA issued in the same decision),
    /// into `ichor-oidc-tls`.
    IssueLeaf {
        /// Subject common name (`<name>.<namespace>.svc`).
        common_name: String,
        /// Subject alternative names.
        sans: Vec<San>,
        /// Start of validity (now).
        not_before: Timestamp,
        /// End of validity (now + 1 year, at most the CA's end).
        not_after: Timestamp,
        /// Why, in words ("leaf SANs [..] differ from the issuer Service [..]").
        reason: String,
    },
}

impl TlsEffect {
    /// The human reason of the effect.
    pub fn reason(&self) -> &str {
        match self {
            TlsEffect::IssueCa { reason, .. } | TlsEffect::IssueLeaf { reason, .. } => reason,
        }
    }
}

/// The TLS decision for one instant.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsDecision {
    /// Certificates to issue (a CA first when both).
    pub effects: Vec<TlsEffect>,
    /// When the decision changes next without any input change: the leaf's two-thirds point or
    /// the CA's expiry, whichever is first; `None` while an issuance is requested.
    pub next_deadline: Option<Timestamp>,
}

fn plus_years(now: Timestamp, years: i16) -> Timestamp {
    now.to_zoned(TimeZone::UTC)
        .checked_add(Span::new().years(years))
        .map(|z| z.timestamp())
        .unwrap_or(Timestamp::MAX)
}

fn list(sans: &[San]) -> String {
    let items: Vec<String> = sans.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// Why the CA must be issued at `now` (`None`: the current one stays).
fn ca_reason(now: Timestamp, ca: Option<&CertFacts>) -> Option<String> {
    match ca {
        None => Some("no CA certificate in ichor-oidc-ca".to_owned()),
        Some(ca) if !ca.is_ca => Some(format!(
            "the certificate in ichor-oidc-ca ({}) is not a CA",
            ca.subject
        )),
        Some(ca) if now >= ca.not_after => Some(format!("the CA expired at {}", ca.not_after)),
        Some(_) => None,
    }
}

/// A new CA from `now`, and its notAfter.
fn issue_ca(now: Timestamp, reason: &str) -> (TlsEffect, Timestamp) {
    let not_after = plus_years(now, CA_LIFETIME_YEARS);
    let effect = TlsEffect::IssueCa {
        common_name: CA_COMMON_NAME.to_owned(),
        not_before: now,
        not_after,
        reason: reason.to_owned(),
    };
    (effect, not_after)
}

/// The CA alone, while there is no issuer Service (users off): the admission webhooks' serving
/// certificate is signed by it, and the webhooks fail closed, so the CA cannot wait for users.
/// Issues a CA when it is missing, not a CA or expired; otherwise the next deadline is its expiry.
pub fn decide_ca(now: Timestamp, ca: Option<&CertFacts>) -> TlsDecision {
    match ca_reason(now, ca) {
        Some(reason) => TlsDecision {
            effects: vec![issue_ca(now, &reason).0],
            next_deadline: None,
        },
        None => TlsDecision {
            effects: Vec::new(),
            next_deadline: ca.map(|c| c.not_after),
        },
    }
}

/// Decides which certificates to issue at `now` given the current CA and leaf (`None`: absent
/// or unreadable) and the issuer Service.
pub fn decide(
    now: Timestamp,
    ca: Option<&CertFacts>,
    leaf: Option<&CertFacts>,
    service: &IssuerService,
) -> TlsDecision {
    let mut effects = Vec::new();
    let ca_reason = ca_reason(now, ca);
    let ca_not_after = match &ca_reason {
        Some(reason) => {
            let (effect, not_after) = issue_ca(now, reason);
            effects.push(effect);
            not_after
        }
        None => ca.map_or(now, |c| c.not_after),
    };

    let expected = service.expected_sans();
    let mut reasons = Vec::new();
    match (leaf, ca) {
        (None, _) => reasons.push("no leaf certificate in ichor-oidc-tls".to_owned()),
        (Some(leaf), ca) => {
            if ca_reason.is_some() {
                reasons.push("the CA is being reissued".to_owned());
            } else if let Some(ca) = ca
                && !leaf.is_issued_by(ca)
            {
                reasons.push(format!(
                    "the leaf was issued by {:?} (key id {}), not by the current CA {:?} (key id {})",
                    leaf.issuer,
                    leaf.authority_key_id.as_deref().unwrap_or("none"),
                    ca.subject,
                    ca.subject_key_id.as_deref().unwrap_or("none"),
                ));
            }
            if leaf.sans != expected {
                reasons.push(format!(
                    "leaf SANs {} differ from the issuer Service {}",
                    list(&leaf.sans),
                    list(&expected)
                ));
            }
            let renew_at = leaf.renewal_point();
            if now >= renew_at {
                reasons.push(format!(
                    "two thirds of the leaf's lifetime ({} to {}) passed at {renew_at}",
                    leaf.not_before, leaf.not_after
                ));
            }
        }
    }

    if reasons.is_empty() {
        let mut next = leaf.map(CertFacts::renewal_point);
        if let Some(ca) = ca {
            next = Some(next.map_or(ca.not_after, |n| n.min(ca.not_after)));
        }
        // A CA issuance always comes with a leaf reason, so nothing is requested here.
        return TlsDecision {
            effects,
            next_deadline: next,
        };
    }
    let common_name = format!("{}.{}.svc", service.name, service.namespace);
    effects.push(TlsEffect::IssueLeaf {
        common_name,
        sans: expected,
        not_before: now,
        not_after: plus_years(now, LEAF_LIFETIME_YEARS).min(ca_not_after),
        reason: reasons.join("; "),
    });
    TlsDecision {
        effects,
        next_deadline: None,
    }
}

//! The effects the identity graph requests, as typed JSON the applier decodes, and their stable
//! ids.
//!
//! An effect id names *what* is to be done and *to what*, so it stays the same while the request
//! is pending and changes when a different thing is wanted:
//!
//! | id | request | the applier |
//! |---|---|---|
//! | `generate-rsa-key <kid>` / `generate-hmac-key <kid>` | [`GenerateKeyRequest`] | generates the key and writes `keys.json` (the document changes plus every key requested by the same evaluation) in one update of `ichor-oidc-signing`, conditioned on `basedOnResourceVersion` |
//! | `issue-ca new` / `issue-ca replacing <sha256[..16]>` | [`IssueCaRequest`] | issues a self-signed CA into `ichor-oidc-ca` (`tls.crt`, `tls.key`) |
//! | `issue-leaf <ip> new` / `issue-leaf <ip> replacing <sha256[..16]>` | [`IssueLeafRequest`] | issues the leaf with the CA then in `ichor-oidc-ca` (performing an `issue-ca` of the same evaluation first) into `ichor-oidc-tls` (`tls.crt`, `tls.key`, `ca.crt`); the leaf carries the authorityKeyIdentifier |
//! | `issue-webhook-leaf new` / `issue-webhook-leaf replacing <sha256[..16]>` | [`IssueLeafRequest`] | issues the admission webhooks' serving certificate (the DNS names of the Services their configuration calls) with the CA in `ichor-oidc-ca` into `ichor-webhook-tls` (see [`super::webhook`]) |
//! | `remove-credentials-key <user>` | [`RemoveCredentialsKeyRequest`] | once a read of its `IchorUser` from the store found none, or one being deleted (the user's event can arrive after the credentials'): removes that one key of `ichor-user-credentials` (when it holds one) by JSON merge patch (`{"data":{"<user>":null}}`) with the Secret's resourceVersion, then DELETEs the user's own Secret of the credentials namespace (when one is observed) with its observed `uid` as precondition |
//! | `credentials-layout <from> to <to>`, `credentials-sweep <first user> (<n> keys)`, `retire-legacy-credentials <rv>`, `credentials-return <first user> (<n> keys)`, `recreate-legacy-credentials` | [`super::migration::SwitchLayoutRequest`], [`super::migration::SweepRequest`], [`super::migration::RetireLegacyRequest`], [`super::returning::ReturnRequest`], [`super::returning::RecreateLegacyRequest`] | the move off the legacy credentials Secret and back (see [`super::migration`]) |
//!
//! Key ids come from the timeline (`k-YYYYMMDD-HHMM`, from the planning minute), so a request
//! not performed within its minute is asked again under a new kid; the optimistic lock on
//! `basedOnResourceVersion` makes sure only one of them lands.

use std::net::IpAddr;

use ichor_renderers::trust::timeline::{DocumentChange, KeyEffect, KeyFamily};
use ichor_renderers::trust::tls::{San, TlsEffect};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Which list of `keys.json` a key goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    /// An RSA-3072 key (PKCS#8 PEM) signing ID tokens.
    Rsa,
    /// A 32-byte HMAC-SHA256 key for the issuer's internal artifacts.
    Hmac,
}

impl From<KeyFamily> for KeyKind {
    fn from(f: KeyFamily) -> Self {
        match f {
            KeyFamily::Rsa => KeyKind::Rsa,
            KeyFamily::Hmac => KeyKind::Hmac,
        }
    }
}

/// A deterministic change of `keys.json` the applier writes together with the generated keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "op")]
pub enum KeyDocumentChange {
    /// A superseded key gets its `retireAfter`.
    SetRetireAfter {
        /// The list.
        kind: KeyKind,
        /// The key.
        kid: String,
        /// Its `retireAfter`.
        retire_after: Timestamp,
    },
    /// A retired key leaves the document.
    Drop {
        /// The list.
        kind: KeyKind,
        /// The key.
        kid: String,
    },
}

impl From<&DocumentChange> for KeyDocumentChange {
    fn from(c: &DocumentChange) -> Self {
        match c {
            DocumentChange::SetRetireAfter {
                family,
                kid,
                retire_after,
                ..
            } => KeyDocumentChange::SetRetireAfter {
                kind: (*family).into(),
                kid: kid.clone(),
                retire_after: *retire_after,
            },
            DocumentChange::Drop { family, kid, .. } => KeyDocumentChange::Drop {
                kind: (*family).into(),
                kid: kid.clone(),
            },
        }
    }
}

/// Generate one signing key and add it to `keys.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateKeyRequest {
    /// The list.
    pub kind: KeyKind,
    /// The kid.
    pub kid: String,
    /// `createdAt` (the planning instant).
    pub created_at: Timestamp,
    /// `activeFrom`.
    pub active_from: Timestamp,
    /// Why, in words.
    pub reason: String,
    /// The resourceVersion of `ichor-oidc-signing` the plan was made from (`None`: the Secret
    /// did not exist); the write is conditioned on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub based_on_resource_version: Option<String>,
    /// The document changes to write in the same update.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub document_changes: Vec<KeyDocumentChange>,
}

impl GenerateKeyRequest {
    /// The request for one timeline effect.
    pub fn new(effect: &KeyEffect, based_on: Option<String>, changes: &[DocumentChange]) -> Self {
        let key = effect.key();
        GenerateKeyRequest {
            kind: effect.family().into(),
            kid: key.kid.clone(),
            created_at: key.created_at,
            active_from: key.active_from,
            reason: key.reason.to_string(),
            based_on_resource_version: based_on,
            document_changes: changes.iter().map(KeyDocumentChange::from).collect(),
        }
    }

    /// The effect id: `generate-rsa-key <kid>` or `generate-hmac-key <kid>`.
    pub fn id(&self) -> String {
        match self.kind {
            KeyKind::Rsa => format!("generate-rsa-key {}", self.kid),
            KeyKind::Hmac => format!("generate-hmac-key {}", self.kid),
        }
    }
}

/// A subject alternative name of a requested leaf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SanName {
    /// An IP address.
    Ip(IpAddr),
    /// A DNS name.
    Dns(String),
}

impl From<&San> for SanName {
    fn from(s: &San) -> Self {
        match s {
            San::Ip(ip) => SanName::Ip(*ip),
            San::Dns(d) => SanName::Dns(d.clone()),
        }
    }
}

impl From<&SanName> for San {
    fn from(s: &SanName) -> Self {
        match s {
            SanName::Ip(ip) => San::Ip(*ip),
            SanName::Dns(d) => San::Dns(d.clone()),
        }
    }
}

/// Issue a new self-signed CA into `ichor-oidc-ca`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueCaRequest {
    /// Subject common name.
    pub common_name: String,
    /// Start of validity.
    pub not_before: Timestamp,
    /// End of validity.
    pub not_after: Timestamp,
    /// Why, in words.
    pub reason: String,
    /// sha256 fingerprint (hex) of the CA it replaces, when one is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

/// Issue a new leaf into `ichor-oidc-tls`, signed by the CA of `ichor-oidc-ca`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueLeafRequest {
    /// Subject common name.
    pub common_name: String,
    /// Subject alternative names.
    pub sans: Vec<SanName>,
    /// Start of validity.
    pub not_before: Timestamp,
    /// End of validity.
    pub not_after: Timestamp,
    /// Why, in words.
    pub reason: String,
    /// sha256 fingerprint (hex) of the leaf it replaces, when one is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

fn short(fingerprint: &str) -> &str {
    fingerprint.get(..16).unwrap_or(fingerprint)
}

/// A certificate request with its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateRequest {
    /// A CA.
    Ca(IssueCaRequest),
    /// A leaf.
    Leaf(IssueLeafRequest),
}

impl CertificateRequest {
    /// The request for one TLS decision effect; `replaces` is the fingerprint of the current
    /// certificate of that Secret, if readable.
    pub fn new(effect: &TlsEffect, replaces: Option<String>) -> Self {
        match effect {
            TlsEffect::IssueCa {
                common_name,
                not_before,
                not_after,
                reason,
            } => CertificateRequest::Ca(IssueCaRequest {
                common_name: common_name.clone(),
                not_before: *not_before,
                not_after: *not_after,
                reason: reason.clone(),
                replaces,
            }),
            TlsEffect::IssueLeaf {
                common_name,
                sans,
                not_before,
                not_after,
                reason,
            } => CertificateRequest::Leaf(IssueLeafRequest {
                common_name: common_name.clone(),
                sans: sans.iter().map(SanName::from).collect(),
                not_before: *not_before,
                not_after: *not_after,
                reason: reason.clone(),
                replaces,
            }),
        }
    }

    /// The effect id (see the module table).
    pub fn id(&self) -> String {
        let basis = |r: &Option<String>| match r {
            Some(fp) => format!("replacing {}", short(fp)),
            None => "new".to_owned(),
        };
        match self {
            CertificateRequest::Ca(r) => format!("issue-ca {}", basis(&r.replaces)),
            CertificateRequest::Leaf(r) => {
                let ip = r
                    .sans
                    .iter()
                    .find_map(|s| match s {
                        SanName::Ip(ip) => Some(ip.to_string()),
                        SanName::Dns(_) => None,
                    })
                    .unwrap_or_else(|| "no-ip".to_owned());
                format!("issue-leaf {ip} {}", basis(&r.replaces))
            }
        }
    }
}

/// Remove one user's credentials (its IchorUser is gone): its key of `ichor-user-credentials`
/// when that Secret holds one, then its own Secret of the credentials namespace when one is
/// observed, in that order (a stale legacy copy is read only while the user's own Secret is
/// absent, so the copy must go first: killed in between, the own Secret is still authoritative).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoveCredentialsKeyRequest {
    /// The legacy Secret's namespace.
    pub namespace: String,
    /// The legacy Secret's name.
    pub secret: String,
    /// The key (the user name).
    pub key: String,
    /// Whether the legacy Secret holds the key (omitted when it does: the request of a legacy
    /// key alone reads as it did before per-user Secrets).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub in_legacy: bool,
    /// The user's own credentials Secret to delete after the legacy key, when one is observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_user: Option<PerUserSecretRef>,
}

/// A per-user credentials Secret as a removal names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PerUserSecretRef {
    /// Its namespace (the credentials namespace).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its `metadata.uid` as observed: the DELETE's precondition (`None`: not observed, and the
    /// applier deletes nothing blind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_true(b: &bool) -> bool {
    *b
}

impl RemoveCredentialsKeyRequest {
    /// The effect id: `remove-credentials-key <user>`.
    pub fn id(&self) -> String {
        format!("remove-credentials-key {}", self.key)
    }
}

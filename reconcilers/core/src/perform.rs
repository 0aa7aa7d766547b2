//! The effect performers: the real key and certificate generation behind the identity graph's
//! effects (see [`crate::identity::effects`]), shared by every applier (the local one of
//! `ichor dev`, the cluster one, the simulation). A performer turns requests into the
//! *content* of the Secrets to write ([`SecretData`]); writing them (files, the Kubernetes API)
//! and feeding them back to the graph is the applier's job.
//!
//! # Choices
//! - **Signing keys**: RSA-3072, PKCS#8 PEM, generated with OpenSSL (`ring`, which rcgen and
//!   rustls use, cannot generate RSA keys); HMAC keys are 32 bytes from OpenSSL's CSPRNG.
//! - **The Ichor CA** is RSA-3072 (OpenSSL generates it, rcgen signs with it through ring,
//!   `sha256WithRSAEncryption`), self-signed, for the validity the request carries (10 years).
//! - **The leaf** is ECDSA P-256 (rcgen, `ecdsa-with-SHA256` keys sign handshakes fast), signed
//!   by the CA, for the validity and SANs the request carries, with `serverAuth`, the
//!   authorityKeyIdentifier (so the graph's issued-by check holds) and the CA in `ca.crt`. The
//!   kube-apiserver and every TLS client accept an ECDSA leaf under an RSA CA.
//! - **`keys.json`**: one write holds the request's document changes (`SetRetireAfter`, `Drop`,
//!   applied idempotently) and every key requested by the same evaluation, written on top of the
//!   Secret's current document only when its resourceVersion is still the one the plan was made
//!   from ([`PerformError::Stale`] otherwise: the graph plans again).
//!
//! No performer logs or returns secret material in an error.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_graph::{EffectRequest, Object, ObjectKey, World};
use ichor_renderers::trust::keys::{HmacKey, HmacSecret, KeyTimes, KeysDocument, PrivateKeyPem, RsaKey};
use ichor_renderers::trust::tls::CA_COMMON_NAME;
use ichor_renderers::trust::{CA_SECRET, KEYS_JSON, NAMESPACE, SIGNING_SECRET, TLS_SECRET};
use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde_json::{Map, Value, json};

use crate::identity::effects::{
    GenerateKeyRequest, IssueCaRequest, IssueLeafRequest, KeyDocumentChange, KeyKind,
    RemoveCredentialsKeyRequest, SanName,
};
use crate::identity::{CA_CERT_KEY, TLS_CERT_KEY, TLS_KEY_KEY};

/// Size of generated RSA keys (signing keys and the CA), in bits.
pub const RSA_BITS: u32 = 3072;
/// Secret type of the signing keys.
pub const OPAQUE: &str = "Opaque";
/// Secret type of the CA and the leaf.
pub const TLS_TYPE: &str = "kubernetes.io/tls";

/// Why an effect could not be performed. Messages name the effect and never hold key material.
#[derive(Debug, thiserror::Error)]
pub enum PerformError {
    /// The request's JSON does not decode as the request its id names.
    #[error("effect {id}: the request does not decode: {message}")]
    Request {
        /// The effect id.
        id: String,
        /// The decoder's message.
        message: String,
    },
    /// The effect id is not one this performer knows.
    #[error("effect {0}: unknown effect; this applier is older than the graph that asked for it")]
    Unknown(String),
    /// `ichor-oidc-signing` changed since the plan was made.
    #[error(
        "effect {id}: ichor-oidc-signing is at resourceVersion {current:?}, the plan was made from \
         {planned:?}; the graph plans again"
    )]
    Stale {
        /// The effect id.
        id: String,
        /// The version the plan was made from.
        planned: Option<String>,
        /// The version now.
        current: Option<String>,
    },
    /// A Secret read for the effect holds an unreadable value.
    #[error("effect {id}: {what}")]
    Unreadable {
        /// The effect id.
        id: String,
        /// What cannot be read (field named, no content).
        what: String,
    },
    /// Key or certificate generation failed.
    #[error("effect {id}: {message}")]
    Crypto {
        /// The effect id.
        id: String,
        /// The library's message.
        message: String,
    },
}

fn crypto(id: &str, e: impl std::fmt::Display) -> PerformError {
    PerformError::Crypto {
        id: id.to_owned(),
        message: e.to_string(),
    }
}

/// Where new key material comes from (a trait so tests can count or fix it).
pub trait KeyMaterial {
    /// A new RSA private key of [`RSA_BITS`] bits, PKCS#8 PEM.
    ///
    /// # Errors
    /// The generator failed (the message names no material).
    fn rsa_pkcs8_pem(&mut self) -> Result<String, String>;

    /// 32 new random bytes for the HMAC key `kid`.
    ///
    /// # Errors
    /// The random source failed.
    fn hmac_secret(&mut self, kid: &str) -> Result<[u8; 32], String>;
}

/// Key material from OpenSSL (its CSPRNG is seeded by the operating system).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsKeyMaterial;

impl KeyMaterial for OsKeyMaterial {
    fn rsa_pkcs8_pem(&mut self) -> Result<String, String> {
        let rsa = openssl::rsa::Rsa::generate(RSA_BITS).map_err(|e| e.to_string())?;
        let key = openssl::pkey::PKey::from_rsa(rsa).map_err(|e| e.to_string())?;
        let pem = key.private_key_to_pem_pkcs8().map_err(|e| e.to_string())?;
        String::from_utf8(pem).map_err(|_| "OpenSSL wrote a PEM that is not UTF-8".to_owned())
    }

    fn hmac_secret(&mut self, _kid: &str) -> Result<[u8; 32], String> {
        let mut out = [0u8; 32];
        openssl::rand::rand_bytes(&mut out).map_err(|e| e.to_string())?;
        Ok(out)
    }
}

/// The content of one Secret a performer produced: written whole by the applier.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretData {
    /// The Secret's name (in [`NAMESPACE`]).
    pub name: String,
    /// The Secret's type.
    pub type_: String,
    /// Key → raw bytes.
    pub data: BTreeMap<String, Vec<u8>>,
}

impl std::fmt::Debug for SecretData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretData")
            .field("name", &self.name)
            .field("type_", &self.type_)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SecretData {
    /// The Secret as the graph observes it (base64 `data`), without a resource version.
    pub fn to_object(&self) -> Object {
        let data: Map<String, Value> = self
            .data
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(STANDARD.encode(v))))
            .collect();
        Object::new(
            "Secret",
            NAMESPACE,
            self.name.clone(),
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": self.name, "namespace": NAMESPACE,
                    "labels": {"app.kubernetes.io/part-of": "ichor"}},
                "type": self.type_, "data": data}),
        )
    }

    /// The decoded data of an observed Secret (`None` when its `data` is not all base64).
    pub fn from_object(object: &Object) -> Option<SecretData> {
        let mut data = BTreeMap::new();
        if let Some(map) = object.value.get("data").and_then(Value::as_object) {
            for (k, v) in map {
                let bytes = STANDARD.decode(v.as_str()?).ok()?;
                data.insert(k.clone(), bytes);
            }
        }
        Some(SecretData {
            name: object.name.clone(),
            type_: object
                .value
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or(OPAQUE)
                .to_owned(),
            data,
        })
    }
}

/// What one performed effect asks the applier to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Write this Secret whole.
    Secret(SecretData),
    /// Remove one key of a Secret (the applier's own write, by merge patch or file edit).
    RemoveCredentialsKey(RemoveCredentialsKeyRequest),
}

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

/// `current` with the document changes applied: `SetRetireAfter` sets a key's `retireAfter`,
/// `Drop` removes it; a change naming a key that is not there is a no-op (so applying the same
/// changes twice is harmless).
///
/// # Errors
/// The rebuilt document breaks a list rule (cannot happen for a document that parsed).
pub fn apply_document_changes(
    current: &KeysDocument,
    changes: &[KeyDocumentChange],
) -> Result<KeysDocument, ichor_renderers::trust::keys::KeysError> {
    let mut rsa: Vec<RsaKey> = current.keys().to_vec();
    let mut hmac: Vec<HmacKey> = current.hmac().to_vec();
    for change in changes {
        match change {
            KeyDocumentChange::Drop {
                kind: KeyKind::Rsa,
                kid,
            } => rsa.retain(|k| k.kid() != kid),
            KeyDocumentChange::Drop {
                kind: KeyKind::Hmac,
                kid,
            } => hmac.retain(|k| k.kid() != kid),
            KeyDocumentChange::SetRetireAfter {
                kind: KeyKind::Rsa,
                kid,
                retire_after,
            } => {
                for k in rsa.iter_mut().filter(|k| k.kid() == kid) {
                    *k = RsaKey::new(
                        k.kid().to_owned(),
                        k.pem().clone(),
                        k.created_at(),
                        k.active_from(),
                        Some(*retire_after),
                    )?;
                }
            }
            KeyDocumentChange::SetRetireAfter {
                kind: KeyKind::Hmac,
                kid,
                retire_after,
            } => {
                for k in hmac.iter_mut().filter(|k| k.kid() == kid) {
                    *k = HmacKey::new(
                        k.kid().to_owned(),
                        k.secret().clone(),
                        k.created_at(),
                        k.active_from(),
                        Some(*retire_after),
                    )?;
                }
            }
        }
    }
    KeysDocument::new(rsa, hmac)
}

/// The new `keys.json` for the key requests of one evaluation: `current` (or an empty document)
/// with every request's document changes, plus one generated key per request (a kid already in
/// the document is not generated twice).
///
/// # Errors
/// [`PerformError::Crypto`] when generation fails or a key is refused by the document rules.
pub fn signing_keys(
    current: Option<&KeysDocument>,
    requests: &[GenerateKeyRequest],
    material: &mut dyn KeyMaterial,
) -> Result<KeysDocument, PerformError> {
    let mut doc = current.cloned().unwrap_or_default();
    for r in requests {
        doc = apply_document_changes(&doc, &r.document_changes).map_err(|e| crypto(&r.id(), e))?;
    }
    for r in requests {
        let id = r.id();
        match r.kind {
            KeyKind::Rsa if doc.rsa_key(&r.kid).is_none() => {
                let pem = material.rsa_pkcs8_pem().map_err(|e| crypto(&id, e))?;
                let pem = PrivateKeyPem::new(pem).map_err(|e| crypto(&id, format!("{e:?}")))?;
                let key = RsaKey::new(r.kid.clone(), pem, r.created_at, r.active_from, None)
                    .map_err(|e| crypto(&id, e))?;
                doc.insert_rsa(key).map_err(|e| crypto(&id, e))?;
            }
            KeyKind::Hmac if doc.hmac_key(&r.kid).is_none() => {
                let bytes = material.hmac_secret(&r.kid).map_err(|e| crypto(&id, e))?;
                let key = HmacKey::new(
                    r.kid.clone(),
                    HmacSecret::new(bytes),
                    r.created_at,
                    r.active_from,
                    None,
                )
                .map_err(|e| crypto(&id, e))?;
                doc.insert_hmac(key).map_err(|e| crypto(&id, e))?;
            }
            KeyKind::Rsa | KeyKind::Hmac => {}
        }
    }
    Ok(doc)
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

fn decode<T: serde::de::DeserializeOwned>(request: &EffectRequest) -> Result<T, PerformError> {
    serde_json::from_value(request.request.clone()).map_err(|e| PerformError::Request {
        id: request.id.clone(),
        message: e.to_string(),
    })
}

fn secret_in(world: &World, name: &str) -> Option<Object> {
    world.get(&ObjectKey::new("Secret", NAMESPACE, name)).cloned()
}

fn text(id: &str, data: &SecretData, key: &str) -> Result<String, PerformError> {
    data.data
        .get(key)
        .and_then(|b| String::from_utf8(b.clone()).ok())
        .ok_or_else(|| PerformError::Unreadable {
            id: id.to_owned(),
            what: format!("{} has no readable {key}", data.name),
        })
}

/// Performs the effects of one evaluation against the World they were decided in, and returns
/// what to write, in order: the CA before a leaf of the same evaluation (which is signed by it),
/// and all key requests as one `ichor-oidc-signing` write.
///
/// # Errors
/// The first effect that cannot be performed; nothing of the batch should then be written
/// (the graph asks again).
pub fn perform(
    world: &World,
    effects: &[&EffectRequest],
    material: &mut dyn KeyMaterial,
) -> Result<Vec<Outcome>, PerformError> {
    let mut keys = Vec::new();
    let mut cas = Vec::new();
    let mut leaves = Vec::new();
    let mut removals = Vec::new();
    for e in effects {
        let id = e.id.as_str();
        if id.starts_with("generate-rsa-key ") || id.starts_with("generate-hmac-key ") {
            keys.push(decode::<GenerateKeyRequest>(e)?);
        } else if id.starts_with("issue-ca ") {
            cas.push(decode::<IssueCaRequest>(e)?);
        } else if id.starts_with("issue-leaf ") {
            leaves.push(decode::<IssueLeafRequest>(e)?);
        } else if id.starts_with("remove-credentials-key ") {
            removals.push(decode::<RemoveCredentialsKeyRequest>(e)?);
        } else {
            return Err(PerformError::Unknown(e.id.clone()));
        }
    }
    let mut out = Vec::new();
    if let Some(first) = keys.first() {
        let id = first.id();
        let observed = secret_in(world, SIGNING_SECRET);
        let current_rv = observed.as_ref().and_then(|o| o.resource_version.clone());
        if let Some(stale) = keys.iter().find(|r| r.based_on_resource_version != current_rv) {
            return Err(PerformError::Stale {
                id: stale.id(),
                planned: stale.based_on_resource_version.clone(),
                current: current_rv,
            });
        }
        let unreadable = |what: String| PerformError::Unreadable { id: id.clone(), what };
        let current = match observed.as_ref() {
            None => None,
            Some(o) => {
                let data = SecretData::from_object(o).ok_or_else(|| {
                    unreadable(format!("{SIGNING_SECRET} holds a value that is not base64"))
                })?;
                match data.data.get(KEYS_JSON) {
                    None => None,
                    Some(bytes) => Some(
                        KeysDocument::parse(bytes)
                            .map_err(|e| unreadable(format!("{SIGNING_SECRET} {KEYS_JSON}: {e}")))?,
                    ),
                }
            }
        };
        let doc = signing_keys(current.as_ref(), &keys, material)?;
        out.push(Outcome::Secret(SecretData {
            name: SIGNING_SECRET.to_owned(),
            type_: OPAQUE.to_owned(),
            data: BTreeMap::from([(KEYS_JSON.to_owned(), doc.to_json().into_bytes())]),
        }));
    }
    let mut ca = None;
    for r in &cas {
        let pair = issue_ca(r, material)?;
        out.push(Outcome::Secret(SecretData {
            name: CA_SECRET.to_owned(),
            type_: TLS_TYPE.to_owned(),
            data: BTreeMap::from([
                (TLS_CERT_KEY.to_owned(), pair.cert_pem.clone().into_bytes()),
                (TLS_KEY_KEY.to_owned(), pair.key_pem.clone().into_bytes()),
            ]),
        }));
        ca = Some(pair);
    }
    for r in &leaves {
        let ca = match &ca {
            Some(pair) => pair.clone(),
            None => {
                let id = "issue-leaf";
                let observed = secret_in(world, CA_SECRET)
                    .and_then(|o| SecretData::from_object(&o))
                    .ok_or_else(|| PerformError::Unreadable {
                        id: id.to_owned(),
                        what: format!("there is no readable {CA_SECRET} to sign the leaf with"),
                    })?;
                IssuedPair {
                    cert_pem: text(id, &observed, TLS_CERT_KEY)?,
                    key_pem: text(id, &observed, TLS_KEY_KEY)?,
                }
            }
        };
        let leaf = issue_leaf(r, &ca)?;
        out.push(Outcome::Secret(SecretData {
            name: TLS_SECRET.to_owned(),
            type_: TLS_TYPE.to_owned(),
            data: BTreeMap::from([
                (TLS_CERT_KEY.to_owned(), leaf.cert_pem.into_bytes()),
                (TLS_KEY_KEY.to_owned(), leaf.key_pem.into_bytes()),
                (CA_CERT_KEY.to_owned(), ca.cert_pem.into_bytes()),
            ]),
        }));
    }
    out.extend(removals.into_iter().map(Outcome::RemoveCredentialsKey));
    Ok(out)
}

/// The rcgen SANs of a leaf request (shared by the real performer and the simulator).
///
/// # Errors
/// A DNS name rcgen refuses, named in the message.
pub fn subject_alt_names(sans: &[SanName]) -> Result<Vec<SanType>, String> {
    sans.iter()
        .map(|s| match s {
            SanName::Ip(ip) => Ok(SanType::IpAddress(*ip)),
            SanName::Dns(d) => d
                .clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|e: rcgen::Error| format!("SAN {d:?}: {e}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Fixed material, counting what was asked.
    #[derive(Default)]
    struct Counting {
        rsa: usize,
        hmac: usize,
    }

    impl KeyMaterial for Counting {
        fn rsa_pkcs8_pem(&mut self) -> Result<String, String> {
            self.rsa += 1;
            Ok(crate::sim::TEST_RSA_PEM.to_owned())
        }
        fn hmac_secret(&mut self, _kid: &str) -> Result<[u8; 32], String> {
            self.hmac += 1;
            Ok([7; 32])
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn request(kind: KeyKind, kid: &str, changes: Vec<KeyDocumentChange>) -> GenerateKeyRequest {
        GenerateKeyRequest {
            kind,
            kid: kid.into(),
            created_at: ts("2026-01-01T00:00:00Z"),
            active_from: ts("2026-01-01T00:00:00Z"),
            reason: "test".into(),
            based_on_resource_version: None,
            document_changes: changes,
        }
    }

    #[test]
    fn generates_one_key_per_request_and_applies_the_document_changes_once() {
        let mut m = Counting::default();
        let first = signing_keys(
            None,
            &[
                request(KeyKind::Rsa, "k-1", vec![]),
                request(KeyKind::Hmac, "h-1", vec![]),
            ],
            &mut m,
        )
        .unwrap();
        let retire = ts("2026-02-01T00:00:00Z");
        let changes = vec![
            KeyDocumentChange::SetRetireAfter {
                kind: KeyKind::Rsa,
                kid: "k-1".into(),
                retire_after: retire,
            },
            KeyDocumentChange::Drop {
                kind: KeyKind::Hmac,
                kid: "h-1".into(),
            },
        ];
        let second = signing_keys(
            Some(&first),
            &[
                request(KeyKind::Rsa, "k-2", changes.clone()),
                request(KeyKind::Rsa, "k-2", changes),
            ],
            &mut m,
        )
        .unwrap();
        assert_eq!((m.rsa, m.hmac), (2, 1), "k-2 is generated once");
        assert_eq!(
            second.rsa_key("k-1").and_then(KeyTimes::retire_after),
            Some(retire)
        );
        assert!(second.hmac_key("h-1").is_none());
        assert!(second.rsa_key("k-2").is_some());
    }

    #[test]
    fn a_key_request_planned_from_another_resource_version_is_refused_as_stale() {
        let mut world = World::new();
        let mut secret = SecretData {
            name: SIGNING_SECRET.into(),
            type_: OPAQUE.into(),
            data: BTreeMap::new(),
        }
        .to_object();
        secret.resource_version = Some("5".into());
        world.apply(ichor_graph::Event::Applied(secret));
        let mut r = request(KeyKind::Rsa, "k-1", vec![]);
        r.based_on_resource_version = Some("4".into());
        let effect = EffectRequest::new(r.id(), &r).unwrap();
        let refused = perform(&world, &[&effect], &mut Counting::default()).unwrap_err();
        assert!(matches!(refused, PerformError::Stale { .. }), "{refused}");
    }

    #[test]
    fn an_unknown_effect_is_refused_by_name() {
        let effect = EffectRequest::new("launch-rockets".to_owned(), &json!({})).unwrap();
        let refused = perform(&World::new(), &[&effect], &mut Counting::default()).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "effect launch-rockets: unknown effect; this applier is older than the graph that asked for it"
        );
    }

    #[test]
    fn the_leaf_is_signed_by_the_rsa_ca_and_carries_the_requested_sans() {
        let now = ts("2026-01-01T00:00:00Z");
        let ca = issue_ca(
            &IssueCaRequest {
                common_name: CA_COMMON_NAME.into(),
                not_before: now,
                not_after: ts("2036-01-01T00:00:00Z"),
                reason: "test".into(),
                replaces: None,
            },
            &mut OsKeyMaterial,
        )
        .unwrap();
        let leaf = issue_leaf(
            &IssueLeafRequest {
                common_name: "ichor-issuer".into(),
                sans: vec![
                    SanName::Ip("127.0.0.1".parse().unwrap()),
                    SanName::Dns("localhost".into()),
                ],
                not_before: now,
                not_after: ts("2027-01-01T00:00:00Z"),
                reason: "test".into(),
                replaces: None,
            },
            &ca,
        )
        .unwrap();
        use ichor_renderers::trust::tls::{CertFacts, San};
        let ca_facts = CertFacts::from_pem(&ca.cert_pem, "ca").unwrap();
        let leaf_facts = CertFacts::from_pem(&leaf.cert_pem, "leaf").unwrap();
        assert!(leaf_facts.is_issued_by(&ca_facts));
        assert_eq!(leaf_facts.not_after, ts("2027-01-01T00:00:00Z"));
        assert!(leaf_facts.sans.contains(&San::Dns("localhost".into())));
        assert!(ca.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(
            !format!("{ca:?}").contains("PRIVATE"),
            "Debug never shows the key"
        );
    }
}

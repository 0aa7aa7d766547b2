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

mod keys;
mod tls;

pub use keys::{apply_document_changes, signing_keys};
pub use tls::{IssuedPair, SanError, issue_ca, issue_leaf, subject_alt_names};

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_graph::{EffectRequest, Object, ObjectKey, World};
use ichor_renderers::contract::{PART_OF_LABEL, PART_OF_VALUE};
use ichor_renderers::trust::keys::KeysDocument;
use ichor_renderers::trust::{CA_SECRET, KEYS_JSON, NAMESPACE, SIGNING_SECRET, TLS_SECRET};
use serde_json::{Map, Value, json};

use crate::identity::effects::{
    GenerateKeyRequest, IssueCaRequest, IssueLeafRequest, RemoveCredentialsKeyRequest,
};
use crate::identity::webhook::{ISSUE_WEBHOOK_LEAF, WEBHOOK_TLS_SECRET};
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

/// Why no new key material could be made (the messages name no material). The effect fails
/// and the graph asks again on a later tick.
#[derive(Debug, thiserror::Error)]
pub enum KeyMaterialError {
    /// The RSA key generator failed.
    #[error("{0}")]
    Rsa(String),
    /// The generator wrote a PEM that is not UTF-8.
    #[error("OpenSSL wrote a PEM that is not UTF-8")]
    PemNotUtf8,
    /// The random source failed.
    #[error("{0}")]
    Random(String),
}

/// Where new key material comes from (a trait so tests can count or fix it).
pub trait KeyMaterial {
    /// A new RSA private key of [`RSA_BITS`] bits, PKCS#8 PEM.
    ///
    /// # Errors
    /// The generator failed.
    fn rsa_pkcs8_pem(&mut self) -> Result<String, KeyMaterialError>;

    /// 32 new random bytes for the HMAC key `kid`.
    ///
    /// # Errors
    /// The random source failed.
    fn hmac_secret(&mut self, kid: &str) -> Result<[u8; 32], KeyMaterialError>;
}

/// Key material from OpenSSL (its CSPRNG is seeded by the operating system).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsKeyMaterial;

impl KeyMaterial for OsKeyMaterial {
    fn rsa_pkcs8_pem(&mut self) -> Result<String, KeyMaterialError> {
        let rsa = |e: openssl::error::ErrorStack| KeyMaterialError::Rsa(e.to_string());
        let key = openssl::rsa::Rsa::generate(RSA_BITS).map_err(rsa)?;
        let key = openssl::pkey::PKey::from_rsa(key).map_err(rsa)?;
        let pem = key.private_key_to_pem_pkcs8().map_err(rsa)?;
        String::from_utf8(pem).map_err(|_| KeyMaterialError::PemNotUtf8)
    }

    fn hmac_secret(&mut self, _kid: &str) -> Result<[u8; 32], KeyMaterialError> {
        let mut out = [0u8; 32];
        openssl::rand::rand_bytes(&mut out).map_err(|e| KeyMaterialError::Random(e.to_string()))?;
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
                    "labels": {PART_OF_LABEL: PART_OF_VALUE}},
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
/// what to write, in order: the CA before a leaf of the same evaluation (which is signed by it;
/// the issuer's leaf into `ichor-oidc-tls`, the webhooks' into `ichor-webhook-tls`),
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
            leaves.push((TLS_SECRET, decode::<IssueLeafRequest>(e)?));
        } else if id.starts_with(ISSUE_WEBHOOK_LEAF) && id[ISSUE_WEBHOOK_LEAF.len()..].starts_with(' ') {
            leaves.push((WEBHOOK_TLS_SECRET, decode::<IssueLeafRequest>(e)?));
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
    for (secret, r) in &leaves {
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
            name: (*secret).to_owned(),
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

#[cfg(test)]
mod tests;

//! `keys.json`, the document of Secret `ichor-oidc-signing`: the RSA keys that sign ID tokens and
//! the HMAC keys that sign the issuer's internal artifacts (login ticket, authorization code,
//! refresh token).
//!
//! ```json
//! {"v":1,
//!  "keys":[{"kid":"k-20270101-0000","alg":"RS256","pem":"-----BEGIN PRIVATE KEY-----…",
//!           "createdAt":"2027-01-01T00:00:00Z","activeFrom":"2027-01-01T00:00:00Z"}],
//!  "hmac":[{"kid":"h-20270101-0000","secret":"<base64 of 32 bytes>",
//!           "createdAt":"2027-01-01T00:00:00Z","activeFrom":"2027-01-01T00:00:00Z",
//!           "retireAfter":"2027-02-01T00:00:00Z"}]}
//! ```
//!
//! There is ONE parser, [`KeysDocument::parse`], used by the controller (which writes the
//! document) and by the issuer (which reads it); neither has a format of its own. It is strict:
//! version 1 only, unknown or repeated fields refused, at most [`MAX_DOCUMENT_BYTES`] bytes and
//! [`MAX_KEYS_PER_LIST`] keys per list, unique kids, RS256 only, PKCS#8 PEM only, 32-byte HMAC
//! secrets, `activeFrom ≥ createdAt`, `retireAfter > activeFrom`. Every error names the field
//! path (`keys[1].pem: …`) and never contains key material; `Debug` of every type here redacts
//! the PEM and the secret.
//!
//! A key is *retired* at `retireAfter` exactly (the bound is exclusive): at that instant it is
//! neither signing nor published, and the timeline drops it from the document.

mod error;
mod key;
mod material;
mod pkcs8_rsa;
mod read;

pub use error::{FieldProblem, KeysError};
pub use key::{HmacKey, Key, KeyTimes, RsaKey};
pub(crate) use key::{activation_order, signing};
pub use material::{HmacSecret, PrivateKeyPem};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use jiff::Timestamp;

use crate::trust::json::Json;

/// The only `keys.json` version this build reads and writes.
pub const KEYS_DOCUMENT_VERSION: u64 = 1;
/// Largest `keys.json` accepted, in bytes (16 RSA-8192 keys need about 110 KiB).
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// Most keys in each of the `keys` and `hmac` lists (the timeline keeps at most three).
pub const MAX_KEYS_PER_LIST: usize = 16;
/// Length of an HMAC-SHA256 secret, in bytes.
pub const HMAC_SECRET_BYTES: usize = 32;
/// The only signature algorithm of the RSA keys.
pub const RS256: &str = "RS256";
/// Smallest RSA modulus accepted, in bits (the controller generates 3072).
pub const MIN_RSA_BITS: u32 = 2048;
/// Largest RSA modulus accepted, in bits.
pub const MAX_RSA_BITS: u32 = 8192;
/// Longest kid accepted.
pub const MAX_KID_LEN: usize = 64;

/// A checked `keys.json` document (version 1). Construct it with [`KeysDocument::parse`],
/// [`KeysDocument::new`] or [`KeysDocument::empty`]; every value of this type serializes to a
/// document the parser accepts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeysDocument {
    keys: Vec<RsaKey>,
    hmac: Vec<HmacKey>,
}

impl KeysDocument {
    /// A document with no key (the timeline then asks for the first keys).
    pub fn empty() -> Self {
        KeysDocument::default()
    }

    /// Builds a document from keys, checking the list rules (count, unique kids).
    pub fn new(keys: Vec<RsaKey>, hmac: Vec<HmacKey>) -> Result<Self, KeysError> {
        check_list("keys", &keys)?;
        check_list("hmac", &hmac)?;
        Ok(KeysDocument { keys, hmac })
    }

    /// The RSA keys, in document order.
    pub fn keys(&self) -> &[RsaKey] {
        &self.keys
    }

    /// The HMAC keys, in document order.
    pub fn hmac(&self) -> &[HmacKey] {
        &self.hmac
    }

    /// Adds an RSA key, refusing a kid already used or a list already full.
    pub fn insert_rsa(&mut self, key: RsaKey) -> Result<(), KeysError> {
        insert(&mut self.keys, key, "keys")
    }

    /// Adds an HMAC key, refusing a kid already used or a list already full.
    pub fn insert_hmac(&mut self, key: HmacKey) -> Result<(), KeysError> {
        insert(&mut self.hmac, key, "hmac")
    }

    pub(crate) fn keys_mut(&mut self) -> &mut Vec<RsaKey> {
        &mut self.keys
    }

    pub(crate) fn hmac_mut(&mut self) -> &mut Vec<HmacKey> {
        &mut self.hmac
    }

    /// The RSA key that signs ID tokens at `now`: the one with the latest `activeFrom ≤ now`
    /// that is not retired. `None` when no key is active yet.
    pub fn signing_key(&self, now: Timestamp) -> Option<&RsaKey> {
        signing(&self.keys, now)
    }

    /// The RSA keys of the JWKS at `now`: every key not retired, including keys published ahead
    /// of their `activeFrom` (so a verifier knows a key before anything is signed with it).
    pub fn published(&self, now: Timestamp) -> Vec<&RsaKey> {
        self.keys.iter().filter(|k| k.is_live(now)).collect()
    }

    /// The HMAC key that signs internal artifacts at `now` (same rule as [`Self::signing_key`]).
    pub fn signing_hmac(&self, now: Timestamp) -> Option<&HmacKey> {
        signing(&self.hmac, now)
    }

    /// The HMAC keys that verify at `now`: every key not retired. A key not yet active is
    /// included, so a replica whose clock is slightly behind still accepts what a replica slightly
    /// ahead already signed with it.
    pub fn verifying_hmacs(&self, now: Timestamp) -> Vec<&HmacKey> {
        self.hmac.iter().filter(|k| k.is_live(now)).collect()
    }

    /// The RSA key with this kid, retired or not (the caller checks [`KeyTimes::is_live`]).
    pub fn rsa_key(&self, kid: &str) -> Option<&RsaKey> {
        self.keys.iter().find(|k| k.kid() == kid)
    }

    /// The HMAC key with this kid, retired or not (the caller checks [`KeyTimes::is_live`]).
    pub fn hmac_key(&self, kid: &str) -> Option<&HmacKey> {
        self.hmac.iter().find(|k| k.kid() == kid)
    }

    /// Parses and checks `keys.json`. See the module documentation for the rules.
    pub fn parse(bytes: &[u8]) -> Result<Self, KeysError> {
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(KeysError::TooLarge {
                size: bytes.len(),
                limit: MAX_DOCUMENT_BYTES,
            });
        }
        let json: Json = serde_json::from_slice(bytes).map_err(|e| KeysError::Syntax {
            kind: match e.classify() {
                serde_json::error::Category::Eof => "unexpected end of input",
                serde_json::error::Category::Io => "read error",
                serde_json::error::Category::Syntax | serde_json::error::Category::Data => "syntax error",
            },
            line: e.line(),
            column: e.column(),
        })?;
        read::read_document(&json)
    }

    /// The document as compact JSON, the bytes to store under `keys.json`. Deterministic
    /// (members in a fixed order), so an unchanged document is byte-identical.
    pub fn to_json(&self) -> String {
        let keys: Vec<serde_json::Value> = self
            .keys
            .iter()
            .map(|k| {
                let mut m = serde_json::Map::new();
                m.insert("kid".into(), k.kid().into());
                m.insert("alg".into(), RS256.into());
                m.insert("pem".into(), k.pem().expose().into());
                insert_times(&mut m, k);
                serde_json::Value::Object(m)
            })
            .collect();
        let hmac: Vec<serde_json::Value> = self
            .hmac
            .iter()
            .map(|k| {
                let mut m = serde_json::Map::new();
                m.insert("kid".into(), k.kid().into());
                m.insert("secret".into(), STANDARD.encode(k.secret().expose()).into());
                insert_times(&mut m, k);
                serde_json::Value::Object(m)
            })
            .collect();
        let mut doc = serde_json::Map::new();
        doc.insert("v".into(), KEYS_DOCUMENT_VERSION.into());
        doc.insert("keys".into(), keys.into());
        doc.insert("hmac".into(), hmac.into());
        serde_json::Value::Object(doc).to_string()
    }
}

fn insert_times<K: KeyTimes>(m: &mut serde_json::Map<String, serde_json::Value>, k: &K) {
    m.insert("createdAt".into(), k.created_at().to_string().into());
    m.insert("activeFrom".into(), k.active_from().to_string().into());
    if let Some(r) = k.retire_after() {
        m.insert("retireAfter".into(), r.to_string().into());
    }
}

fn insert<K: KeyTimes>(list: &mut Vec<K>, key: K, name: &str) -> Result<(), KeysError> {
    if list.len() >= MAX_KEYS_PER_LIST {
        return Err(KeysError::field(
            name,
            FieldProblem::TooMany {
                count: list.len() + 1,
                limit: MAX_KEYS_PER_LIST,
            },
        ));
    }
    if let Some(i) = list.iter().position(|k| k.kid() == key.kid()) {
        return Err(KeysError::field(
            format!("{name}[{}].kid", list.len()),
            FieldProblem::DuplicateKid {
                kid: key.kid().to_owned(),
                first: format!("{name}[{i}]"),
            },
        ));
    }
    list.push(key);
    Ok(())
}

fn check_list<K: KeyTimes>(name: &str, list: &[K]) -> Result<(), KeysError> {
    if list.len() > MAX_KEYS_PER_LIST {
        return Err(KeysError::field(
            name,
            FieldProblem::TooMany {
                count: list.len(),
                limit: MAX_KEYS_PER_LIST,
            },
        ));
    }
    for (i, k) in list.iter().enumerate() {
        if let Some(first) = list.iter().take(i).position(|o| o.kid() == k.kid()) {
            return Err(KeysError::field(
                format!("{name}[{i}].kid"),
                FieldProblem::DuplicateKid {
                    kid: k.kid().to_owned(),
                    first: format!("{name}[{first}]"),
                },
            ));
        }
    }
    Ok(())
}

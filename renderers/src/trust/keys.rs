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

use crate::trust::json::Json;
use crate::trust::pkcs8_rsa::{Pkcs8Problem, pkcs8_rsa_modulus_bits};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use jiff::Timestamp;
use std::cmp::Ordering;
use std::fmt;

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

/// Why `keys.json` (or a key given to a constructor) was refused. Never contains key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    /// The document is larger than [`MAX_DOCUMENT_BYTES`].
    #[error("keys.json is {size} bytes; at most {limit} bytes are accepted")]
    TooLarge {
        /// Size of the refused document.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The document is not JSON (the message gives the position only, never the content).
    #[error("keys.json is not valid JSON: {kind} at line {line}, column {column}")]
    Syntax {
        /// What serde_json found wrong ("syntax error", "unexpected end of input").
        kind: &'static str,
        /// Line of the error, from 1.
        line: usize,
        /// Column of the error, from 1.
        column: usize,
    },
    /// A field is wrong; `path` names it, like `keys[1].pem`.
    #[error("{path}: {problem}")]
    Field {
        /// Path of the field in the document (`v`, `keys[0].kid`, `hmac[2].secret`).
        path: String,
        /// What is wrong with it.
        problem: FieldProblem,
    },
}

/// What is wrong with one field of `keys.json`. Each message says what is accepted instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    /// A required field is absent.
    #[error("is required but missing")]
    Missing,
    /// A field this version does not define.
    #[error("is not a field of keys.json version 1 (allowed here: {allowed})")]
    Unknown {
        /// The fields allowed at that place.
        allowed: &'static str,
    },
    /// The same field appears twice in one object.
    #[error("appears more than once in the same object")]
    Duplicate,
    /// The value has the wrong JSON type.
    #[error("must be {expected}, found {found}")]
    WrongType {
        /// What is expected.
        expected: &'static str,
        /// The JSON type found (never the value).
        found: &'static str,
    },
    /// `v` is not 1.
    #[error("keys.json version {found} is not supported; this build reads version 1 only (upgrade it)")]
    UnsupportedVersion {
        /// The version found.
        found: String,
    },
    /// A list is longer than [`MAX_KEYS_PER_LIST`].
    #[error("holds {count} keys; at most {limit} are accepted")]
    TooMany {
        /// Entries found.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// The kid is empty, too long or has characters outside `A-Z a-z 0-9 . _ -`.
    #[error("must be 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'")]
    BadKid,
    /// Two keys of one list share a kid.
    #[error("{kid:?} is also the kid of {first}; every kid of a list must be unique")]
    DuplicateKid {
        /// The repeated kid (kids are public: they are in the JWKS).
        kid: String,
        /// Path of the first key with that kid.
        first: String,
    },
    /// `alg` is not RS256.
    #[error("must be \"RS256\", the only algorithm of the signing keys")]
    UnsupportedAlg,
    /// `pem` holds no PEM block.
    #[error("is not a PEM block; a PKCS#8 \"PRIVATE KEY\" block is required")]
    NotPem,
    /// `pem` holds more than one PEM block, or text around it.
    #[error("must hold exactly one PKCS#8 \"PRIVATE KEY\" block and nothing else")]
    NotOnePemBlock,
    /// `pem` is a PKCS#1 block.
    #[error(
        "is a PKCS#1 \"RSA PRIVATE KEY\" block; PKCS#8 (\"PRIVATE KEY\") is required: convert it with \
         `openssl pkcs8 -topk8 -nocrypt`"
    )]
    Pkcs1,
    /// `pem` is a block of another kind.
    #[error("is a {label:?} PEM block; a PKCS#8 \"PRIVATE KEY\" block is required")]
    WrongPemLabel {
        /// The block's label (shortened when long or unprintable).
        label: String,
    },
    /// The PKCS#8 DER is malformed.
    #[error("is not a well-formed PKCS#8 private key")]
    BadPkcs8,
    /// The PKCS#8 key is not an RSA key.
    #[error("is a PKCS#8 key of another algorithm; RS256 needs an RSA key (rsaEncryption)")]
    NotRsa,
    /// The RSA modulus is too small or too large.
    #[error("is an RSA key of {bits} bits; {MIN_RSA_BITS} to {MAX_RSA_BITS} bits are accepted")]
    RsaSize {
        /// Modulus size found.
        bits: u32,
    },
    /// An instant is not RFC 3339.
    #[error("must be an RFC 3339 instant such as \"2027-01-01T00:00:00Z\"")]
    BadTimestamp,
    /// `secret` is not standard base64.
    #[error("is not standard base64 (alphabet A-Z a-z 0-9 + /, with '=' padding)")]
    BadBase64,
    /// `secret` does not decode to 32 bytes.
    #[error("decodes to {len} bytes; an HMAC secret is exactly {HMAC_SECRET_BYTES} bytes")]
    SecretLength {
        /// Decoded length.
        len: usize,
    },
    /// `activeFrom` is before `createdAt`.
    #[error("is before createdAt; a key cannot sign before it exists")]
    ActiveBeforeCreated,
    /// `retireAfter` is not after `activeFrom`.
    #[error("must be later than activeFrom")]
    RetireNotAfterActive,
}

impl KeysError {
    fn field(path: impl Into<String>, problem: FieldProblem) -> Self {
        KeysError::Field {
            path: path.into(),
            problem,
        }
    }
}

/// A PKCS#8 PEM private key, checked to be RSA of an accepted size. `Debug` redacts it.
#[derive(Clone, PartialEq, Eq)]
pub struct PrivateKeyPem(String);

impl PrivateKeyPem {
    /// Checks `pem` (one PKCS#8 `PRIVATE KEY` block holding an RSA key of 2048 to 8192 bits).
    pub fn new(pem: String) -> Result<Self, FieldProblem> {
        check_pem(&pem)?;
        Ok(PrivateKeyPem(pem))
    }

    /// The PEM text, to load the key with a crypto library. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PrivateKeyPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivateKeyPem(<redacted>)")
    }
}

/// A 32-byte HMAC-SHA256 secret. `Debug` redacts it.
#[derive(Clone, PartialEq, Eq)]
pub struct HmacSecret([u8; HMAC_SECRET_BYTES]);

impl HmacSecret {
    /// Wraps 32 secret bytes (generated by the applier from a CSPRNG).
    pub fn new(bytes: [u8; HMAC_SECRET_BYTES]) -> Self {
        HmacSecret(bytes)
    }

    /// The secret bytes, to key HMAC-SHA256. Never log them.
    pub fn expose(&self) -> &[u8; HMAC_SECRET_BYTES] {
        &self.0
    }
}

impl fmt::Debug for HmacSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HmacSecret(<redacted>)")
    }
}

/// The instants of a key, shared by RSA and HMAC keys so the timeline and the queries treat both
/// the same way.
pub trait KeyTimes {
    /// The key id (public: it is in the JWS header and the JWKS).
    fn kid(&self) -> &str;
    /// When the key was generated and published.
    fn created_at(&self) -> Timestamp;
    /// From when the key signs (it is published, and verifies, before that).
    fn active_from(&self) -> Timestamp;
    /// When the key is gone (exclusive: at this instant it no longer verifies).
    fn retire_after(&self) -> Option<Timestamp>;

    /// True while the key is not retired at `now` (`now < retireAfter`, or no `retireAfter`).
    fn is_live(&self, now: Timestamp) -> bool {
        self.retire_after().is_none_or(|r| now < r)
    }

    /// True when the key may sign at `now` (live and `activeFrom ≤ now`).
    fn may_sign(&self, now: Timestamp) -> bool {
        self.active_from() <= now && self.is_live(now)
    }
}

/// The order in which keys supersede each other: later `activeFrom` wins, then later
/// `createdAt`, then the larger kid, so the choice is total and the same on every replica.
pub(crate) fn activation_order<K: KeyTimes + ?Sized>(a: &K, b: &K) -> Ordering {
    (a.active_from(), a.created_at(), a.kid()).cmp(&(b.active_from(), b.created_at(), b.kid()))
}

/// The signing key of a list at `now`: the latest activated key that is not retired.
pub(crate) fn signing<K: KeyTimes>(keys: &[K], now: Timestamp) -> Option<&K> {
    keys.iter()
        .filter(|k| k.may_sign(now))
        .max_by(|a, b| activation_order(*a, *b))
}

/// An RSA signing key (RS256) of `keys.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RsaKey {
    kid: String,
    pem: PrivateKeyPem,
    created_at: Timestamp,
    active_from: Timestamp,
    retire_after: Option<Timestamp>,
}

impl RsaKey {
    /// Builds a key, with the same checks as the parser (errors name the field, e.g. `pem`).
    pub fn new(
        kid: String,
        pem: PrivateKeyPem,
        created_at: Timestamp,
        active_from: Timestamp,
        retire_after: Option<Timestamp>,
    ) -> Result<Self, KeysError> {
        check_kid(&kid).map_err(|p| KeysError::field("kid", p))?;
        check_times(created_at, active_from, retire_after).map_err(|(f, p)| KeysError::field(f, p))?;
        Ok(RsaKey {
            kid,
            pem,
            created_at,
            active_from,
            retire_after,
        })
    }

    /// The private key, PKCS#8 PEM.
    pub fn pem(&self) -> &PrivateKeyPem {
        &self.pem
    }

    /// The algorithm, always RS256.
    pub fn alg(&self) -> &'static str {
        RS256
    }

    pub(crate) fn set_retire_after(&mut self, at: Timestamp) {
        self.retire_after = Some(at);
    }
}

impl KeyTimes for RsaKey {
    fn kid(&self) -> &str {
        &self.kid
    }
    fn created_at(&self) -> Timestamp {
        self.created_at
    }
    fn active_from(&self) -> Timestamp {
        self.active_from
    }
    fn retire_after(&self) -> Option<Timestamp> {
        self.retire_after
    }
}

/// An HMAC-SHA256 key of `keys.json`, for the issuer's internal artifacts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmacKey {
    kid: String,
    secret: HmacSecret,
    created_at: Timestamp,
    active_from: Timestamp,
    retire_after: Option<Timestamp>,
}

impl HmacKey {
    /// Builds a key, with the same checks as the parser (errors name the field).
    pub fn new(
        kid: String,
        secret: HmacSecret,
        created_at: Timestamp,
        active_from: Timestamp,
        retire_after: Option<Timestamp>,
    ) -> Result<Self, KeysError> {
        check_kid(&kid).map_err(|p| KeysError::field("kid", p))?;
        check_times(created_at, active_from, retire_after).map_err(|(f, p)| KeysError::field(f, p))?;
        Ok(HmacKey {
            kid,
            secret,
            created_at,
            active_from,
            retire_after,
        })
    }

    /// The secret.
    pub fn secret(&self) -> &HmacSecret {
        &self.secret
    }

    pub(crate) fn set_retire_after(&mut self, at: Timestamp) {
        self.retire_after = Some(at);
    }
}

impl KeyTimes for HmacKey {
    fn kid(&self) -> &str {
        &self.kid
    }
    fn created_at(&self) -> Timestamp {
        self.created_at
    }
    fn active_from(&self) -> Timestamp {
        self.active_from
    }
    fn retire_after(&self) -> Option<Timestamp> {
        self.retire_after
    }
}

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
        self.keys.iter().find(|k| k.kid == kid)
    }

    /// The HMAC key with this kid, retired or not (the caller checks [`KeyTimes::is_live`]).
    pub fn hmac_key(&self, kid: &str) -> Option<&HmacKey> {
        self.hmac.iter().find(|k| k.kid == kid)
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
        read_document(&json)
    }

    /// The document as compact JSON, the bytes to store under `keys.json`. Deterministic
    /// (members in a fixed order), so an unchanged document is byte-identical.
    pub fn to_json(&self) -> String {
        let keys: Vec<serde_json::Value> = self
            .keys
            .iter()
            .map(|k| {
                let mut m = serde_json::Map::new();
                m.insert("kid".into(), k.kid.clone().into());
                m.insert("alg".into(), RS256.into());
                m.insert("pem".into(), k.pem.0.clone().into());
                insert_times(&mut m, k);
                serde_json::Value::Object(m)
            })
            .collect();
        let hmac: Vec<serde_json::Value> = self
            .hmac
            .iter()
            .map(|k| {
                let mut m = serde_json::Map::new();
                m.insert("kid".into(), k.kid.clone().into());
                m.insert("secret".into(), STANDARD.encode(k.secret.0).into());
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

fn check_kid(kid: &str) -> Result<(), FieldProblem> {
    let ok = !kid.is_empty()
        && kid.len() <= MAX_KID_LEN
        && kid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok { Ok(()) } else { Err(FieldProblem::BadKid) }
}

fn check_times(
    created_at: Timestamp,
    active_from: Timestamp,
    retire_after: Option<Timestamp>,
) -> Result<(), (&'static str, FieldProblem)> {
    if active_from < created_at {
        return Err(("activeFrom", FieldProblem::ActiveBeforeCreated));
    }
    if retire_after.is_some_and(|r| r <= active_from) {
        return Err(("retireAfter", FieldProblem::RetireNotAfterActive));
    }
    Ok(())
}

/// A PEM label made safe to print: short, printable ASCII only.
fn printable_label(label: &str) -> String {
    if label.len() <= 40 && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b' ') {
        label.to_owned()
    } else {
        "<unprintable label>".to_owned()
    }
}

fn check_pem(text: &str) -> Result<(), FieldProblem> {
    let trimmed = text.trim();
    if !trimmed.starts_with("-----BEGIN ") {
        return Err(FieldProblem::NotPem);
    }
    let blocks = pem::parse_many(trimmed).map_err(|_| FieldProblem::NotPem)?;
    let block = match blocks.as_slice() {
        [] => return Err(FieldProblem::NotPem),
        [one] => one,
        _ => return Err(FieldProblem::NotOnePemBlock),
    };
    if !trimmed.ends_with("-----") {
        return Err(FieldProblem::NotOnePemBlock);
    }
    match block.tag() {
        "PRIVATE KEY" => {}
        "RSA PRIVATE KEY" => return Err(FieldProblem::Pkcs1),
        other => {
            return Err(FieldProblem::WrongPemLabel {
                label: printable_label(other),
            });
        }
    }
    let bits = pkcs8_rsa_modulus_bits(block.contents()).map_err(|p| match p {
        Pkcs8Problem::Malformed => FieldProblem::BadPkcs8,
        Pkcs8Problem::NotRsa => FieldProblem::NotRsa,
    })?;
    if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
        return Err(FieldProblem::RsaSize { bits });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The reader: walks the strict JSON value with a path, so every error names its field.

const DOCUMENT_FIELDS: &str = "v, keys, hmac";
const RSA_FIELDS: &str = "kid, alg, pem, createdAt, activeFrom, retireAfter";
const HMAC_FIELDS: &str = "kid, secret, createdAt, activeFrom, retireAfter";

/// A member name made safe to print in a path.
fn path_name(name: &str) -> String {
    if !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        name.to_owned()
    } else {
        "<unprintable field name>".to_owned()
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        path_name(name)
    } else {
        format!("{path}.{}", path_name(name))
    }
}

/// The members of an object, with unknown and repeated members refused.
struct Members<'a> {
    path: String,
    members: &'a [(String, Json)],
}

impl<'a> Members<'a> {
    fn new(path: &str, value: &'a Json, known: &[&str], allowed: &'static str) -> Result<Self, KeysError> {
        let Json::Object(members) = value else {
            let at = if path.is_empty() { "keys.json" } else { path };
            return Err(KeysError::field(
                at,
                FieldProblem::WrongType {
                    expected: "an object",
                    found: value.type_name(),
                },
            ));
        };
        for (i, (name, _)) in members.iter().enumerate() {
            if !known.contains(&name.as_str()) {
                return Err(KeysError::field(
                    join(path, name),
                    FieldProblem::Unknown { allowed },
                ));
            }
            if members.iter().take(i).any(|(n, _)| n == name) {
                return Err(KeysError::field(join(path, name), FieldProblem::Duplicate));
            }
        }
        Ok(Members {
            path: path.to_owned(),
            members,
        })
    }

    fn path(&self, name: &str) -> String {
        join(&self.path, name)
    }

    fn optional(&self, name: &str) -> Option<&'a Json> {
        self.members.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    fn required(&self, name: &str) -> Result<&'a Json, KeysError> {
        self.optional(name)
            .ok_or_else(|| KeysError::field(self.path(name), FieldProblem::Missing))
    }

    fn string(&self, name: &str) -> Result<&'a str, KeysError> {
        match self.required(name)? {
            Json::String(s) => Ok(s),
            other => Err(KeysError::field(
                self.path(name),
                FieldProblem::WrongType {
                    expected: "a string",
                    found: other.type_name(),
                },
            )),
        }
    }

    fn timestamp(&self, name: &str) -> Result<Timestamp, KeysError> {
        parse_timestamp(self.string(name)?).map_err(|p| KeysError::field(self.path(name), p))
    }

    fn optional_timestamp(&self, name: &str) -> Result<Option<Timestamp>, KeysError> {
        match self.optional(name) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(s)) => parse_timestamp(s)
                .map(Some)
                .map_err(|p| KeysError::field(self.path(name), p)),
            Some(other) => Err(KeysError::field(
                self.path(name),
                FieldProblem::WrongType {
                    expected: "a string or null",
                    found: other.type_name(),
                },
            )),
        }
    }

    fn array(&self, name: &str) -> Result<&'a [Json], KeysError> {
        match self.required(name)? {
            Json::Array(items) => Ok(items),
            other => Err(KeysError::field(
                self.path(name),
                FieldProblem::WrongType {
                    expected: "an array",
                    found: other.type_name(),
                },
            )),
        }
    }
}

fn parse_timestamp(s: &str) -> Result<Timestamp, FieldProblem> {
    // RFC 3339 only: a date, 'T', a time and an offset; no bracketed annotations.
    if s.len() > 40 || s.contains('[') {
        return Err(FieldProblem::BadTimestamp);
    }
    s.parse::<Timestamp>().map_err(|_| FieldProblem::BadTimestamp)
}

/// The key-level checks shared by both lists, returning the times with their errors' paths.
fn read_times(m: &Members<'_>) -> Result<(Timestamp, Timestamp, Option<Timestamp>), KeysError> {
    let created_at = m.timestamp("createdAt")?;
    let active_from = m.timestamp("activeFrom")?;
    let retire_after = m.optional_timestamp("retireAfter")?;
    check_times(created_at, active_from, retire_after).map_err(|(f, p)| KeysError::field(m.path(f), p))?;
    Ok((created_at, active_from, retire_after))
}

fn read_kid(m: &Members<'_>) -> Result<String, KeysError> {
    let kid = m.string("kid")?;
    check_kid(kid).map_err(|p| KeysError::field(m.path("kid"), p))?;
    Ok(kid.to_owned())
}

fn read_rsa(path: &str, value: &Json) -> Result<RsaKey, KeysError> {
    let m = Members::new(
        path,
        value,
        &["kid", "alg", "pem", "createdAt", "activeFrom", "retireAfter"],
        RSA_FIELDS,
    )?;
    let kid = read_kid(&m)?;
    if m.string("alg")? != RS256 {
        return Err(KeysError::field(m.path("alg"), FieldProblem::UnsupportedAlg));
    }
    let pem =
        PrivateKeyPem::new(m.string("pem")?.to_owned()).map_err(|p| KeysError::field(m.path("pem"), p))?;
    let (created_at, active_from, retire_after) = read_times(&m)?;
    Ok(RsaKey {
        kid,
        pem,
        created_at,
        active_from,
        retire_after,
    })
}

fn read_hmac(path: &str, value: &Json) -> Result<HmacKey, KeysError> {
    let m = Members::new(
        path,
        value,
        &["kid", "secret", "createdAt", "activeFrom", "retireAfter"],
        HMAC_FIELDS,
    )?;
    let kid = read_kid(&m)?;
    let encoded = m.string("secret")?;
    let decoded = STANDARD
        .decode(encoded)
        .map_err(|_| KeysError::field(m.path("secret"), FieldProblem::BadBase64))?;
    let bytes: [u8; HMAC_SECRET_BYTES] = decoded.as_slice().try_into().map_err(|_| {
        KeysError::field(
            m.path("secret"),
            FieldProblem::SecretLength { len: decoded.len() },
        )
    })?;
    let (created_at, active_from, retire_after) = read_times(&m)?;
    Ok(HmacKey {
        kid,
        secret: HmacSecret(bytes),
        created_at,
        active_from,
        retire_after,
    })
}

fn read_list<K: KeyTimes>(
    m: &Members<'_>,
    name: &str,
    read: fn(&str, &Json) -> Result<K, KeysError>,
) -> Result<Vec<K>, KeysError> {
    let items = m.array(name)?;
    if items.len() > MAX_KEYS_PER_LIST {
        return Err(KeysError::field(
            name,
            FieldProblem::TooMany {
                count: items.len(),
                limit: MAX_KEYS_PER_LIST,
            },
        ));
    }
    let mut keys = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        keys.push(read(&format!("{name}[{i}]"), item)?);
    }
    check_list(name, &keys)?;
    Ok(keys)
}

fn read_document(json: &Json) -> Result<KeysDocument, KeysError> {
    // The version first: a newer document gets "version 2 is not supported", not a list of
    // unknown fields.
    if let Json::Object(members) = json
        && let Some((_, v)) = members.iter().find(|(n, _)| n == "v")
    {
        match v {
            Json::Number(n) if n.as_u64() == Some(KEYS_DOCUMENT_VERSION) => {}
            Json::Number(n) => {
                return Err(KeysError::field(
                    "v",
                    FieldProblem::UnsupportedVersion { found: n.to_string() },
                ));
            }
            other => {
                return Err(KeysError::field(
                    "v",
                    FieldProblem::WrongType {
                        expected: "the integer 1",
                        found: other.type_name(),
                    },
                ));
            }
        }
    }
    let m = Members::new("", json, &["v", "keys", "hmac"], DOCUMENT_FIELDS)?;
    m.required("v")?;
    let keys = read_list(&m, "keys", read_rsa)?;
    let hmac = read_list(&m, "hmac", read_hmac)?;
    Ok(KeysDocument { keys, hmac })
}

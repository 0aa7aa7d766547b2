//! The credentials entry: the value of one key (the user name) of the Secret
//! `ichor-user-credentials`, written by JSON merge patch of that one key with the Secret's
//! `resourceVersion` as an optimistic lock.
//!
//! ```json
//! {"v":1,"hash":"$argon2id$v=19$m=65536,t=3,p=4$…","notBefore":"2026-11-05T10:00:00Z",
//!  "mustChange":false,
//!  "families":{"<family id>":{"gen":2,"client":"ichor-cli","aud":"ichor-kube",
//!    "iat":"2026-11-05T10:00:00Z","exp":"2026-11-05T22:00:00Z","rotatedAt":"2026-11-05T10:05:00Z"}}}
//! ```
//!
//! - Every instant is an RFC 3339 string in UTC (`jiff::Timestamp`), not unix seconds, so the
//!   Secret reads the same to a person as to the code. The helpers here store whole seconds,
//!   matching the JWT `iat`/`exp` the issuer puts in tokens; the parser accepts a fraction.
//! - `families` (refresh-token families, one per login with `offline_access`) may be absent or
//!   empty; it is omitted when empty. `rotatedAt` is added by this build for the 10-second grace
//!   window of refresh rotation (see [`Family::rotated_at`]) and omitted before the first rotation.
//! - Version 2 (docs/mfa.md) adds `factors` (passkeys, an authenticator-app secret, recovery-code
//!   digests: [`Factors`]) after `mustChange`, and a family's `amr` (RFC 8176) after its other
//!   fields. Both are omitted when empty (an `amr` of `["pwd"]` too), and an entry that needs
//!   neither is written as version 1, so an issuer of the previous release keeps reading it until
//!   the user enrols a factor. Version 1 reads as version 2 without factors.
//! - The parser is strict: an unknown version is refused by number, unknown fields and duplicate
//!   family ids are refused, a version-1 entry with version-2 fields is refused, and the entry is
//!   bounded (64 KiB, 32 families, 10 passkeys of 2 KiB).
//! - [`CredentialsEntry::to_json`] is canonical: fields in the order above, families sorted by id,
//!   `v` the lowest version that holds the entry ([`CredentialsEntry::version`]).
//!
//! Every helper is pure: it takes the entry and `now` and returns the entry to write (or says
//! nothing needs writing); the caller patches the Secret.
//!
//! This module holds the format: the entry, its constants and bounds, and reading, validating
//! and writing it; `families` holds the helpers that start, rotate and end refresh families
//! and sessions; `factors` holds the second factors' types and bounds. Checking a factor is in
//! [`super::totp`] and [`super::recovery`].

use std::collections::BTreeMap;
use std::fmt;

use jiff::{SignedDuration, Timestamp};
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

mod factors;
mod families;
mod passkeys;
mod second_factor;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod v2_tests;

pub(crate) use factors::is_valid_totp_secret;
pub use factors::{
    AMR_PASSWORD, AMR_VALUES, Factors, MAX_CREDENTIAL_ID_BYTES, MAX_PASSKEY_BYTES, MAX_PASSKEY_NAME_CHARS,
    MAX_PASSKEYS, RECOVERY_CODE_COUNT, RECOVERY_DIGEST_CHARS, RecoveryCodes, StoredPasskey,
    TOTP_SECRET_CHARS, TotpFactor,
};
pub use families::{FamilyError, RefusalReason, Rotation};
pub use passkeys::{AMR_HARDWARE_KEY, AMR_SYNCED_KEY, AddPasskeyError, PasskeyRefusal, VerifiedPasskey};
pub use second_factor::{
    AMR_MFA, AMR_TYPED_CODE, FACTOR_PASSKEY, FACTOR_RECOVERY, FACTOR_TOTP, FactorAttempt, FactorRefusal,
};

/// The name of the Secret holding one credentials entry per user, in `ichor-system`.
pub use crate::contract::CREDENTIALS_SECRET as CREDENTIALS_SECRET_NAME;
/// The entry format version of a password-only entry: what every release reads, and what this
/// build writes for an entry without second factors and without a family's `amr`.
pub const ENTRY_VERSION: u32 = 1;
/// The entry format version of an entry with second factors or a family's `amr` (docs/mfa.md);
/// the newest version this build reads.
pub const FACTORS_ENTRY_VERSION: u32 = 2;
/// The largest entry accepted, in bytes of JSON.
pub const MAX_ENTRY_BYTES: usize = 64 * 1024;
/// The most refresh-token families one user may have. [`CredentialsEntry::start_family`] makes
/// room by dropping ended families, then the oldest one, so a new login never fails for it.
pub const MAX_FAMILIES: usize = 32;
/// The longest family id, in bytes (`[A-Za-z0-9_-]`).
pub const MAX_FAMILY_ID_LEN: usize = 64;
/// The longest `client` or `aud` value, in bytes (printable ASCII).
pub const MAX_CLIENT_LEN: usize = 64;
/// The longest stored `hash`, in bytes.
pub const MAX_HASH_LEN: usize = 512;
/// The prefix every stored hash must have.
pub const HASH_PREFIX: &str = "$argon2id$";
/// The generation of the first refresh token of a family.
pub const FIRST_GENERATION: u64 = 1;
/// How long the generation just replaced may still be presented and get the same successor
/// (docs/architecture.md, "Formats").
pub const REFRESH_GRACE: SignedDuration = SignedDuration::from_secs(10);

/// One user's credentials entry. Build one with [`CredentialsEntry::new`], read one with
/// [`CredentialsEntry::parse`]. `Debug` leaves the hash, the TOTP secret and the recovery
/// digests out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialsEntry {
    /// Format version: [`ENTRY_VERSION`] or [`FACTORS_ENTRY_VERSION`]. [`CredentialsEntry::parse`]
    /// sets it to [`CredentialsEntry::version`]; [`CredentialsEntry::to_json`] always writes
    /// that, whatever this field holds.
    pub v: u32,
    /// The argon2id PHC string of the password ([`super::hash`]).
    pub hash: String,
    /// Tokens (and refresh families) whose `iat` is before this instant, in whole seconds, are
    /// no longer accepted. Set on every password change and by "revoke sessions".
    pub not_before: Timestamp,
    /// The user must change the password before getting a Kubernetes token or calling any RPC
    /// but `WhoAmI` and `ChangeOwnPassword`.
    pub must_change: bool,
    /// The second factors (version 2); none in a version-1 entry.
    #[serde(default, skip_serializing_if = "Factors::is_empty")]
    pub factors: Factors,
    /// Live refresh-token families, by family id.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "deserialize_families"
    )]
    pub families: BTreeMap<String, Family>,
}

impl fmt::Debug for CredentialsEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialsEntry")
            .field("v", &self.v)
            .field("hash", &"<redacted>")
            .field("not_before", &self.not_before)
            .field("must_change", &self.must_change)
            .field("factors", &self.factors)
            .field("families", &self.families)
            .finish()
    }
}

/// One refresh-token family: the chain of refresh tokens that one login started. Only the
/// current generation refreshes; presenting an older one is reuse and ends the family, except
/// the one just replaced within [`REFRESH_GRACE`] of its rotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Family {
    /// The generation of the only refresh token that may rotate the family (JSON `gen`).
    #[serde(rename = "gen")]
    pub generation: u64,
    /// The OAuth client the family was issued to (`ichor-ui` or `ichor-cli`).
    pub client: String,
    /// The audience of the ID tokens the family refreshes (`ichor-ui` or `ichor-kube`).
    pub aud: String,
    /// Session start: when the login that started the family happened.
    pub iat: Timestamp,
    /// Absolute end of the family; rotation never extends it.
    pub exp: Timestamp,
    /// When generation `generation - 1` was replaced by `generation`; absent before the first
    /// rotation. Presenting generation `generation - 1` less than [`REFRESH_GRACE`] after this
    /// instant returns the same successor instead of ending the family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotated_at: Option<Timestamp>,
    /// The `amr` (RFC 8176) of the sign-in that started the family, which every refresh repeats,
    /// so a refreshed token never claims more than the sign-in proved: values of [`AMR_VALUES`].
    /// Empty for a password-only sign-in (the JSON omits it, and `["pwd"]` reads as empty); see
    /// [`Family::amr_claim`].
    #[serde(
        default,
        skip_serializing_if = "amr_is_password_only",
        deserialize_with = "factors::deserialize_amr"
    )]
    pub amr: Vec<String>,
}

fn amr_is_password_only(amr: &[String]) -> bool {
    factors::amr_is_password_only(amr)
}

impl Family {
    /// The `amr` claim of the ID tokens the family refreshes: `["pwd"]` when [`Family::amr`] is
    /// empty, else the recorded values.
    pub fn amr_claim(&self) -> Vec<&str> {
        if self.amr.is_empty() {
            vec![AMR_PASSWORD]
        } else {
            self.amr.iter().map(String::as_str).collect()
        }
    }
}

/// Reading or writing a credentials entry failed. Every message starts with the user it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// The entry is larger than [`MAX_ENTRY_BYTES`].
    #[error("credentials entry for user {user}: is {got} bytes, at most {MAX_ENTRY_BYTES} are allowed")]
    TooLarge {
        /// The user (the Secret key).
        user: String,
        /// The entry's size.
        got: usize,
    },
    /// The entry is not JSON, or not a JSON object.
    #[error("credentials entry for user {user}: not a JSON object: {message}")]
    NotJson {
        /// The user (the Secret key).
        user: String,
        /// The parser's message.
        message: String,
    },
    /// The entry has no version field.
    #[error(
        "credentials entry for user {user}: field \"v\" is missing; this build reads versions {ENTRY_VERSION} and {FACTORS_ENTRY_VERSION}"
    )]
    MissingVersion {
        /// The user (the Secret key).
        user: String,
    },
    /// The entry has a version this build does not read.
    #[error(
        "credentials entry for user {user}: unsupported version {got}; this build reads versions {ENTRY_VERSION} and {FACTORS_ENTRY_VERSION}"
    )]
    UnsupportedVersion {
        /// The user (the Secret key).
        user: String,
        /// The version found, as written.
        got: String,
    },
    /// The entry does not have the shape of its version (unknown field, wrong type, missing
    /// field).
    #[error("credentials entry for user {user}: {message}")]
    Shape {
        /// The user (the Secret key).
        user: String,
        /// The parser's message, which names the field.
        message: String,
    },
    /// A field has the right type but a refused value.
    #[error("credentials entry for user {user}: {field}: {problem}")]
    Invalid {
        /// The user (the Secret key).
        user: String,
        /// The field, e.g. `hash` or `families["abc"].exp`.
        field: String,
        /// What is wrong and what is allowed.
        problem: String,
    },
}

/// Whether a token (or family) issued at `iat` is still accepted: `iat >= notBefore`, compared in
/// whole seconds, refusing when `iat < notBefore`. A token issued in the same second as a
/// revocation is therefore accepted, which is what lets the SPA sign in again right after a
/// password change.
pub fn is_token_valid_for(iat: Timestamp, entry: &CredentialsEntry) -> bool {
    iat.as_second() >= entry.not_before.as_second()
}

/// `ts` truncated to whole seconds (the precision of JWT `iat`/`exp` and of `notBefore`).
fn whole_seconds(ts: Timestamp) -> Timestamp {
    Timestamp::from_second(ts.as_second()).unwrap_or(ts)
}

fn is_valid_family_id(id: &str) -> bool {
    (1..=MAX_FAMILY_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_valid_client_value(value: &str) -> bool {
    (1..=MAX_CLIENT_LEN).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_graphic())
}

impl CredentialsEntry {
    /// A new entry for a password just set: `notBefore` = now (whole seconds), no families.
    pub fn new(hash: String, now: Timestamp, must_change: bool) -> Self {
        Self {
            v: ENTRY_VERSION,
            hash,
            not_before: whole_seconds(now),
            must_change,
            factors: Factors::default(),
            families: BTreeMap::new(),
        }
    }

    /// Parses and validates the entry of `user` (the Secret key, used in messages).
    pub fn parse(user: &str, json: &[u8]) -> Result<Self, CredentialsError> {
        if json.len() > MAX_ENTRY_BYTES {
            return Err(CredentialsError::TooLarge {
                user: user.to_owned(),
                got: json.len(),
            });
        }
        #[derive(Deserialize)]
        struct VersionProbe {
            v: Option<serde_json::Value>,
        }
        let probe: VersionProbe = serde_json::from_slice(json).map_err(|e| CredentialsError::NotJson {
            user: user.to_owned(),
            message: e.to_string(),
        })?;
        match probe.v {
            None => {
                return Err(CredentialsError::MissingVersion {
                    user: user.to_owned(),
                });
            }
            Some(serde_json::Value::Number(n))
                if n.as_u64().is_some_and(|v| {
                    v == u64::from(ENTRY_VERSION) || v == u64::from(FACTORS_ENTRY_VERSION)
                }) => {}
            Some(other) => {
                let got: String = other.to_string().chars().take(40).collect();
                return Err(CredentialsError::UnsupportedVersion {
                    user: user.to_owned(),
                    got,
                });
            }
        }
        let mut entry: CredentialsEntry =
            serde_json::from_slice(json).map_err(|e| CredentialsError::Shape {
                user: user.to_owned(),
                message: e.to_string(),
            })?;
        if entry.v == ENTRY_VERSION && entry.version() != ENTRY_VERSION {
            return Err(CredentialsError::Invalid {
                user: user.to_owned(),
                field: "v".to_owned(),
                problem: format!(
                    "is {ENTRY_VERSION}, but \"factors\" and a family's \"amr\" need version {FACTORS_ENTRY_VERSION}"
                ),
            });
        }
        entry.v = entry.version();
        entry.validate(user)?;
        Ok(entry)
    }

    /// Checks every rule the parser checks, for an entry built in code.
    pub fn validate(&self, user: &str) -> Result<(), CredentialsError> {
        let invalid = |field: String, problem: String| CredentialsError::Invalid {
            user: user.to_owned(),
            field,
            problem,
        };
        if self.v != ENTRY_VERSION && self.v != FACTORS_ENTRY_VERSION {
            return Err(CredentialsError::UnsupportedVersion {
                user: user.to_owned(),
                got: self.v.to_string(),
            });
        }
        if !self.hash.starts_with(HASH_PREFIX)
            || self.hash.len() > MAX_HASH_LEN
            || !self.hash.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(invalid(
                "hash".to_owned(),
                format!(
                    "must be an argon2id PHC string starting with \"{HASH_PREFIX}\", at most {MAX_HASH_LEN} bytes"
                ),
            ));
        }
        if self.families.len() > MAX_FAMILIES {
            return Err(invalid(
                "families".to_owned(),
                format!(
                    "has {} entries, at most {MAX_FAMILIES} are allowed",
                    self.families.len()
                ),
            ));
        }
        for (id, family) in &self.families {
            let field = |name: &str| {
                let shown: String = id.chars().take(MAX_FAMILY_ID_LEN).collect();
                format!("families[{shown:?}]{name}")
            };
            if !is_valid_family_id(id) {
                return Err(invalid(
                    field(""),
                    format!(
                        "the id must be 1 to {MAX_FAMILY_ID_LEN} characters of A-Z, a-z, 0-9, '-' and '_'"
                    ),
                ));
            }
            if !is_valid_client_value(&family.client) {
                return Err(invalid(
                    field(".client"),
                    format!("must be 1 to {MAX_CLIENT_LEN} printable ASCII characters"),
                ));
            }
            if !is_valid_client_value(&family.aud) {
                return Err(invalid(
                    field(".aud"),
                    format!("must be 1 to {MAX_CLIENT_LEN} printable ASCII characters"),
                ));
            }
            if family.exp < family.iat {
                return Err(invalid(
                    field(".exp"),
                    format!("{} is before iat {}", family.exp, family.iat),
                ));
            }
            if family.rotated_at.is_some_and(|r| r < family.iat) {
                return Err(invalid(field(".rotatedAt"), "is before iat".to_owned()));
            }
            if let Err(problem) = factors::check_amr(&family.amr) {
                return Err(invalid(field(".amr"), problem));
            }
        }
        self.factors
            .check()
            .map_err(|(field, problem)| invalid(field, problem))
    }

    /// The canonical JSON of the entry (fields in format order, families sorted by id), after
    /// the same validation as [`CredentialsEntry::parse`], so what is written can be read back.
    pub fn to_json(&self, user: &str) -> Result<String, CredentialsError> {
        self.validate(user)?;
        let version = self.version();
        let json = if self.v == version {
            serde_json::to_string(self)
        } else {
            serde_json::to_string(&Self {
                v: version,
                ..self.clone()
            })
        };
        let json = json.map_err(|e| CredentialsError::Shape {
            user: user.to_owned(),
            message: e.to_string(),
        })?;
        if json.len() > MAX_ENTRY_BYTES {
            return Err(CredentialsError::TooLarge {
                user: user.to_owned(),
                got: json.len(),
            });
        }
        Ok(json)
    }

    /// The version [`CredentialsEntry::to_json`] writes: [`ENTRY_VERSION`] when the entry has no
    /// factors and no family records an `amr` beyond the password, else
    /// [`FACTORS_ENTRY_VERSION`].
    pub fn version(&self) -> u32 {
        if self.factors.is_empty() && self.families.values().all(|f| f.amr.is_empty()) {
            ENTRY_VERSION
        } else {
            FACTORS_ENTRY_VERSION
        }
    }

    /// Whether a token (or family) issued at `iat` is still accepted; see [`is_token_valid_for`].
    pub fn accepts_issued_at(&self, iat: Timestamp) -> bool {
        is_token_valid_for(iat, self)
    }
}

/// Deserializes `families`, refusing a repeated family id and more than [`MAX_FAMILIES`] entries
/// while reading, before the map grows.
fn deserialize_families<'de, D>(deserializer: D) -> Result<BTreeMap<String, Family>, D::Error>
where
    D: Deserializer<'de>,
{
    struct FamiliesVisitor;

    impl<'de> Visitor<'de> for FamiliesVisitor {
        type Value = BTreeMap<String, Family>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "an object of at most {MAX_FAMILIES} refresh families")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut families = BTreeMap::new();
            while let Some((id, family)) = map.next_entry::<String, Family>()? {
                if families.len() == MAX_FAMILIES {
                    return Err(serde::de::Error::custom(format!(
                        "families: more than {MAX_FAMILIES} entries, at most {MAX_FAMILIES} are allowed"
                    )));
                }
                if families.contains_key(&id) {
                    return Err(serde::de::Error::custom(format!(
                        "families: family id {id:?} appears twice"
                    )));
                }
                families.insert(id, family);
            }
            Ok(families)
        }
    }

    deserializer.deserialize_map(FamiliesVisitor)
}

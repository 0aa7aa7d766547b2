//! The second factors of a credentials entry (version 2, docs/mfa.md): the user's passkeys, the
//! authenticator-app (TOTP) secret and the recovery-code digests, with their bounds; and the
//! `amr` values (RFC 8176) a refresh family may record.
//!
//! ```json
//! "factors":{
//!   "passkeys":[{"id":"<credential id, base64url>","name":"YubiKey 5","passkey":{…},
//!                "createdAt":"…","lastUsedAt":"…","backupEligible":false}],
//!   "totp":{"secret":"<base32>","createdAt":"…","lastStep":59012345},
//!   "recovery":{"digests":["<sha256 hex>",…],"createdAt":"…"},
//!   "failures":2,"failedAt":"…"}
//! ```
//!
//! Every part is optional and omitted when absent or empty. `Debug` leaves out the TOTP secret
//! and the recovery digests (they stand for secrets), and prints a passkey's size, not its key.

use std::collections::BTreeSet;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jiff::Timestamp;
use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// The most passkeys one user may register.
pub const MAX_PASSKEYS: usize = 10;
/// The longest passkey name, in characters.
pub const MAX_PASSKEY_NAME_CHARS: usize = 64;
/// The largest stored passkey (the relying-party library's serialised credential), in bytes of
/// JSON.
pub const MAX_PASSKEY_BYTES: usize = 4 * 1024;
/// The longest credential id, in bytes before base64url. WebAuthn allows 1,023; authenticators
/// make 16 to about 128, and ten ids of 1,023 bytes would not fit the sign-in's ticket, which
/// lists the user's passkeys.
pub const MAX_CREDENTIAL_ID_BYTES: usize = 255;
/// The length of a stored TOTP secret: 32 base32 characters, 160 bits.
pub const TOTP_SECRET_CHARS: usize = 32;
/// How many recovery codes one enrolment or regeneration makes; each use removes one digest, so
/// an entry holds at most this many.
pub const RECOVERY_CODE_COUNT: usize = 10;
/// The length of a recovery-code digest: lowercase hex of SHA-256.
pub const RECOVERY_DIGEST_CHARS: usize = 64;

/// The `amr` values (RFC 8176) a family may record: `pwd` (password), `hwk` (a hardware-bound
/// passkey), `swk` (a synced passkey), `otp` (an authenticator or recovery code), `mfa`.
pub const AMR_VALUES: [&str; 5] = ["pwd", "hwk", "swk", "otp", "mfa"];
/// The `amr` of a password-only sign-in, which a family records as an empty list (and the
/// JSON omits).
pub const AMR_PASSWORD: &str = "pwd";

/// The second factors of one user. [`Factors::default`] is none, the state of every version-1
/// entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Factors {
    /// Registered passkeys, in registration order.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "deserialize_passkeys"
    )]
    pub passkeys: Vec<StoredPasskey>,
    /// The authenticator-app secret, once a first code confirmed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totp: Option<TotpFactor>,
    /// The digests of the recovery codes not used yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryCodes>,
    /// Codes refused in a row since the last accepted one, counted in the entry so every
    /// replica backs the second step off alike ([`crate::auth::backoff`]); not a factor.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// When the last of [`Factors::failures`] was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Timestamp>,
    /// Factors accepted so far: every accepted use adds one, so the factor use mark moves with
    /// each, whatever the replicas' clocks say.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub uses: u64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One registered passkey.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StoredPasskey {
    /// The credential id, base64url without padding, unique among the user's passkeys.
    pub id: String,
    /// The name the user gave it: 1 to [`MAX_PASSKEY_NAME_CHARS`] characters, no control
    /// character.
    pub name: String,
    /// The relying-party library's credential (public key, signature counter, flags), opaque
    /// here and at most [`MAX_PASSKEY_BYTES`] of JSON.
    pub passkey: serde_json::Value,
    /// When it was registered.
    pub created_at: Timestamp,
    /// When it last completed a sign-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Timestamp>,
    /// The authenticator's backup-eligible flag, as the authenticator reports it (no
    /// attestation is asked for): a synced passkey (`amr` `swk`) rather than one bound to its
    /// device (`hwk`).
    pub backup_eligible: bool,
    /// When an answer signed by this passkey came with a signature counter that went back: a
    /// copy of its key is in use. It completes no sign-in from then on, for the copy or the
    /// original, until its user removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloned_at: Option<Timestamp>,
}

/// The authenticator-app factor (RFC 6238: SHA-1, 6 digits, 30-second steps).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TotpFactor {
    /// The shared secret: [`TOTP_SECRET_CHARS`] upper-case base32 characters (RFC 4648, no
    /// padding). A secret, not a hash: never logged.
    pub secret: String,
    /// When a first code confirmed it.
    pub created_at: Timestamp,
    /// The step of the last accepted code; only a later step is accepted, so a code works once.
    pub last_step: u64,
}

/// The recovery codes not used yet, as digests.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RecoveryCodes {
    /// Lowercase hex SHA-256 of each unused normalised code ([`crate::auth::recovery`]): at
    /// most [`RECOVERY_CODE_COUNT`], distinct.
    pub digests: Vec<String>,
    /// When the codes were made.
    pub created_at: Timestamp,
}

impl fmt::Debug for StoredPasskey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredPasskey")
            .field("id", &self.id)
            .field("name", &self.name)
            .field(
                "passkey",
                &format_args!("<{} bytes>", passkey_size(&self.passkey)),
            )
            .field("created_at", &self.created_at)
            .field("last_used_at", &self.last_used_at)
            .field("backup_eligible", &self.backup_eligible)
            .field("cloned_at", &self.cloned_at)
            .finish()
    }
}

impl fmt::Debug for TotpFactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TotpFactor")
            .field("secret", &"<redacted>")
            .field("created_at", &self.created_at)
            .field("last_step", &self.last_step)
            .finish()
    }
}

impl fmt::Debug for RecoveryCodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecoveryCodes")
            .field("digests", &format_args!("<{} redacted>", self.digests.len()))
            .field("created_at", &self.created_at)
            .finish()
    }
}

impl Factors {
    /// Whether the user has none of the factors (nor a used-up recovery record).
    pub fn is_empty(&self) -> bool {
        self.passkeys.is_empty() && self.totp.is_none() && self.recovery.is_none()
    }

    /// The passkey with this credential id, if registered.
    pub fn passkey(&self, id: &str) -> Option<&StoredPasskey> {
        self.passkeys.iter().find(|p| p.id == id)
    }

    /// Checks every bound of docs/mfa.md; the error is the field (e.g.
    /// `factors.passkeys[2].name`) and what is wrong with it.
    pub(super) fn check(&self) -> Result<(), (String, String)> {
        if self.passkeys.len() > MAX_PASSKEYS {
            return Err((
                "factors.passkeys".to_owned(),
                format!(
                    "has {} entries, at most {MAX_PASSKEYS} are allowed",
                    self.passkeys.len()
                ),
            ));
        }
        let mut ids = BTreeSet::new();
        for (i, passkey) in self.passkeys.iter().enumerate() {
            let field = |name: &str| format!("factors.passkeys[{i}].{name}");
            if !is_valid_credential_id(&passkey.id) {
                return Err((
                    field("id"),
                    format!("must be base64url without padding of 1 to {MAX_CREDENTIAL_ID_BYTES} bytes"),
                ));
            }
            if !ids.insert(passkey.id.as_str()) {
                return Err((
                    field("id"),
                    "the same credential id is registered twice".to_owned(),
                ));
            }
            if !is_valid_passkey_name(&passkey.name) {
                return Err((
                    field("name"),
                    format!(
                        "must be 1 to {MAX_PASSKEY_NAME_CHARS} characters of printable text, not only spaces"
                    ),
                ));
            }
            if !passkey.passkey.is_object() {
                return Err((field("passkey"), "must be a JSON object".to_owned()));
            }
            let size = passkey_size(&passkey.passkey);
            if size > MAX_PASSKEY_BYTES {
                return Err((
                    field("passkey"),
                    format!("is {size} bytes of JSON, at most {MAX_PASSKEY_BYTES} are allowed"),
                ));
            }
        }
        if let Some(totp) = &self.totp
            && !is_valid_totp_secret(&totp.secret)
        {
            return Err((
                "factors.totp.secret".to_owned(),
                format!(
                    "must be {TOTP_SECRET_CHARS} characters of upper-case base32 (A-Z, 2-7), without padding"
                ),
            ));
        }
        if let Some(recovery) = &self.recovery {
            if recovery.digests.len() > RECOVERY_CODE_COUNT {
                return Err((
                    "factors.recovery.digests".to_owned(),
                    format!(
                        "has {} entries, at most {RECOVERY_CODE_COUNT} are allowed",
                        recovery.digests.len()
                    ),
                ));
            }
            let mut seen = BTreeSet::new();
            for (i, digest) in recovery.digests.iter().enumerate() {
                let field = format!("factors.recovery.digests[{i}]");
                if !is_valid_digest(digest) {
                    return Err((
                        field,
                        format!("must be {RECOVERY_DIGEST_CHARS} characters of lowercase hex (SHA-256)"),
                    ));
                }
                if !seen.insert(digest.as_str()) {
                    return Err((field, "the same digest is listed twice".to_owned()));
                }
            }
        }
        Ok(())
    }
}

/// Checks a family's `amr`: values of [`AMR_VALUES`], each once. The problem, if any.
pub(super) fn check_amr(amr: &[String]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for value in amr {
        if !AMR_VALUES.contains(&value.as_str()) {
            let shown: String = value.chars().take(16).collect();
            return Err(format!("{shown:?} is not one of {}", AMR_VALUES.join(", ")));
        }
        if !seen.insert(value.as_str()) {
            return Err(format!("{value:?} is listed twice"));
        }
    }
    Ok(())
}

/// Whether a family's `amr` is the password-only default, which the JSON omits.
pub(super) fn amr_is_password_only(amr: &[String]) -> bool {
    amr.is_empty() || (amr.len() == 1 && amr[0] == AMR_PASSWORD)
}

/// Deserializes a family's `amr`, reading the password-only `["pwd"]` as the empty default so
/// that an entry reads back equal to what it was written from.
pub(super) fn deserialize_amr<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: Deserializer<'de>,
{
    let amr = Vec::<String>::deserialize(deserializer)?;
    Ok(if amr_is_password_only(&amr) {
        Vec::new()
    } else {
        amr
    })
}

/// The size of a stored passkey as the entry holds it, in bytes of compact JSON.
fn passkey_size(passkey: &serde_json::Value) -> usize {
    serde_json::to_vec(passkey).map_or(usize::MAX, |json| json.len())
}

fn is_valid_credential_id(id: &str) -> bool {
    id.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && URL_SAFE_NO_PAD
            .decode(id)
            .is_ok_and(|bytes| (1..=MAX_CREDENTIAL_ID_BYTES).contains(&bytes.len()))
}

fn is_valid_passkey_name(name: &str) -> bool {
    let chars = name.chars().count();
    (1..=MAX_PASSKEY_NAME_CHARS).contains(&chars)
        && !name.chars().any(char::is_control)
        && !name.trim().is_empty()
}

/// Whether `secret` is [`TOTP_SECRET_CHARS`] characters of the RFC 4648 base32 alphabet.
pub(crate) fn is_valid_totp_secret(secret: &str) -> bool {
    secret.len() == TOTP_SECRET_CHARS
        && secret
            .bytes()
            .all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b))
}

fn is_valid_digest(digest: &str) -> bool {
    digest.len() == RECOVERY_DIGEST_CHARS
        && digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Deserializes `passkeys`, refusing more than [`MAX_PASSKEYS`] while reading, before the list
/// grows.
fn deserialize_passkeys<'de, D>(deserializer: D) -> Result<Vec<StoredPasskey>, D::Error>
where
    D: Deserializer<'de>,
{
    struct PasskeysVisitor;

    impl<'de> Visitor<'de> for PasskeysVisitor {
        type Value = Vec<StoredPasskey>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a list of at most {MAX_PASSKEYS} passkeys")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut passkeys = Vec::new();
            while let Some(passkey) = seq.next_element::<StoredPasskey>()? {
                if passkeys.len() == MAX_PASSKEYS {
                    return Err(serde::de::Error::custom(format!(
                        "factors.passkeys: more than {MAX_PASSKEYS} entries, at most {MAX_PASSKEYS} are allowed"
                    )));
                }
                passkeys.push(passkey);
            }
            Ok(passkeys)
        }
    }

    deserializer.deserialize_seq(PasskeysVisitor)
}

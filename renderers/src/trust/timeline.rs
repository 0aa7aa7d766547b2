//! The key timeline as a pure function: given `now` and the current `keys.json`, which keys to
//! generate (effects), which superseded keys get their `retireAfter`, which retired keys leave the
//! document, and when the answer changes next.
//!
//! The rules, the same for the RSA list (`keys`, ID tokens) and the HMAC list (`hmac`, login
//! tickets, authorization codes, refresh tokens):
//!
//! - **First key.** A list with no key that may sign at `now` gets a key at once, active
//!   immediately (`createdAt = activeFrom = now`).
//! - **Rotation.** When the newest key of a list was created [`TimelineSettings::rotation_period`]
//!   ago (30 days by default), a new key is generated at `now` and signs
//!   [`TimelineSettings::publish_lead`] later (10 minutes): it is in the Secret, and so in the
//!   JWKS of every issuer replica, before anything is signed with it.
//! - **Superseded.** When a key stops signing because its successor became active, the plan sets
//!   its `retireAfter` in the document (a deterministic change, not an effect):
//!   - RSA: `successor.activeFrom + max ID token TTL + 2 h` — the last ID token it signed expires
//!     at most one TTL after the successor took over; 2 hours more cover clock skew between
//!     replicas and the kube-apiserver's JWKS cache.
//!   - HMAC: `successor.activeFrom + longest refresh lifetime + 2 h` — a refresh token lives at
//!     most its absolute lifetime after it was signed, so a rotation never logs anyone out; the
//!     same 2 hours cover clock skew between replicas.
//!
//!   If that instant is already past (the controller was down), the key is dropped at once.
//! - **Drop.** A key leaves the document at its `retireAfter` exactly (the bound is exclusive, as
//!   in [`crate::trust::keys`]).
//!
//! Kids are derived from the creation instant: `k-YYYYMMDD-HHMM` (RSA) and `h-YYYYMMDD-HHMM`
//! (HMAC), in UTC, with `-2`, `-3`… appended in the unlikely case the minute is already taken.
//!
//! **How the applier uses a plan.** Effects are valid against the document they were planned
//! from: the applier writes [`KeysPlan::apply_changes`] plus one generated key per effect in ONE
//! update of the Secret, conditioned on the resourceVersion it read (optimistic concurrency). A
//! plan made again before that write lands asks for the same keys with other kids; only the first
//! write succeeds, the others conflict and are dropped, and the next plan sees the new keys. A
//! document that fails to parse must NOT be planned as `None` (that would replace live keys);
//! the controller reports the parse error instead.

use crate::trust::keys::{KeyTimes, KeysDocument, activation_order, signing};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use std::fmt;

/// Margin added to the last validity of what a superseded key signed, before it is dropped.
pub const RETIRE_MARGIN: SignedDuration = SignedDuration::from_hours(2);
/// The default rotation period: 30 days.
pub const DEFAULT_ROTATION_PERIOD: SignedDuration = SignedDuration::from_hours(30 * 24);
/// The default publish lead: 10 minutes (the kubelet's Secret-volume sync lag in the issuer).
pub const DEFAULT_PUBLISH_LEAD: SignedDuration = SignedDuration::from_mins(10);
/// The largest ID token TTL the issuer accepts (the setting's upper bound): 15 minutes.
pub const MAX_ID_TOKEN_TTL: SignedDuration = SignedDuration::from_mins(15);
/// The largest refresh lifetime the issuer accepts (the setting's upper bound): 30 days.
pub const MAX_REFRESH_LIFETIME: SignedDuration = SignedDuration::from_hours(30 * 24);

/// Why timeline settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimelineSettingsError {
    /// A duration is outside its bounds.
    #[error("{setting} is {value}; it must be between {min} and {max}")]
    OutOfBounds {
        /// The setting's name.
        setting: &'static str,
        /// The refused value.
        value: String,
        /// Lower bound (inclusive).
        min: String,
        /// Upper bound (inclusive).
        max: String,
    },
}

/// The durations that drive the timeline, each checked against its bounds.
///
/// The token TTL and refresh lifetime here must be the *largest* the issuer may use (they are
/// runtime settings read per issued token), so [`Default`] takes the upper bounds: 15 minutes
/// and 30 days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineSettings {
    rotation_period: SignedDuration,
    publish_lead: SignedDuration,
    max_id_token_ttl: SignedDuration,
    max_refresh_lifetime: SignedDuration,
}

impl Default for TimelineSettings {
    fn default() -> Self {
        TimelineSettings {
            rotation_period: DEFAULT_ROTATION_PERIOD,
            publish_lead: DEFAULT_PUBLISH_LEAD,
            max_id_token_ttl: MAX_ID_TOKEN_TTL,
            max_refresh_lifetime: MAX_REFRESH_LIFETIME,
        }
    }
}

fn bounded(
    setting: &'static str,
    value: SignedDuration,
    min: SignedDuration,
    max: SignedDuration,
) -> Result<SignedDuration, TimelineSettingsError> {
    if value < min || value > max {
        return Err(TimelineSettingsError::OutOfBounds {
            setting,
            value: format!("{value:#}"),
            min: format!("{min:#}"),
            max: format!("{max:#}"),
        });
    }
    Ok(value)
}

impl TimelineSettings {
    /// Settings with the default rotation period and publish lead, and the given largest ID
    /// token TTL (1 to 15 minutes) and largest refresh lifetime (1 hour to 30 days).
    pub fn new(
        max_id_token_ttl: SignedDuration,
        max_refresh_lifetime: SignedDuration,
    ) -> Result<Self, TimelineSettingsError> {
        Ok(TimelineSettings {
            max_id_token_ttl: bounded(
                "the ID token TTL",
                max_id_token_ttl,
                SignedDuration::from_mins(1),
                MAX_ID_TOKEN_TTL,
            )?,
            max_refresh_lifetime: bounded(
                "the refresh lifetime",
                max_refresh_lifetime,
                SignedDuration::from_hours(1),
                MAX_REFRESH_LIFETIME,
            )?,
            ..TimelineSettings::default()
        })
    }

    /// The same settings with another rotation period (1 to 365 days).
    pub fn with_rotation_period(self, period: SignedDuration) -> Result<Self, TimelineSettingsError> {
        let rotation_period = bounded(
            "the key rotation period",
            period,
            SignedDuration::from_hours(24),
            SignedDuration::from_hours(365 * 24),
        )?;
        Ok(TimelineSettings {
            rotation_period,
            ..self
        })
    }

    /// The same settings with another publish lead (1 to 60 minutes).
    pub fn with_publish_lead(self, lead: SignedDuration) -> Result<Self, TimelineSettingsError> {
        let publish_lead = bounded(
            "the publish lead",
            lead,
            SignedDuration::from_mins(1),
            SignedDuration::from_hours(1),
        )?;
        Ok(TimelineSettings { publish_lead, ..self })
    }

    /// How often a new key is generated.
    pub fn rotation_period(&self) -> SignedDuration {
        self.rotation_period
    }

    /// How long a new key is published before it signs.
    pub fn publish_lead(&self) -> SignedDuration {
        self.publish_lead
    }

    /// The largest ID token TTL the issuer may use.
    pub fn max_id_token_ttl(&self) -> SignedDuration {
        self.max_id_token_ttl
    }

    /// The longest refresh lifetime the issuer may use.
    pub fn max_refresh_lifetime(&self) -> SignedDuration {
        self.max_refresh_lifetime
    }

    /// How long a superseded key of `family` is kept after its successor became active.
    pub fn retention(&self, family: KeyFamily) -> SignedDuration {
        let validity = match family {
            KeyFamily::Rsa => self.max_id_token_ttl,
            KeyFamily::Hmac => self.max_refresh_lifetime,
        };
        validity.saturating_add(RETIRE_MARGIN)
    }
}

/// Which list of `keys.json` a change or effect is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum KeyFamily {
    /// `keys`: RSA keys signing ID tokens (RS256).
    Rsa,
    /// `hmac`: HMAC-SHA256 keys signing the issuer's internal artifacts.
    Hmac,
}

impl KeyFamily {
    fn kid_prefix(self) -> &'static str {
        match self {
            KeyFamily::Rsa => "k",
            KeyFamily::Hmac => "h",
        }
    }
}

impl fmt::Display for KeyFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyFamily::Rsa => "RSA signing key",
            KeyFamily::Hmac => "HMAC key",
        })
    }
}

/// Why a key is to be generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GenerateReason {
    /// The list has no key that may sign now (first start, or every key retired).
    NoSigningKey,
    /// The newest key reached the rotation period.
    RotationDue {
        /// The newest key of the list.
        newest: String,
        /// When the rotation was due.
        due: Timestamp,
    },
}

impl fmt::Display for GenerateReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenerateReason::NoSigningKey => f.write_str("no key may sign now"),
            GenerateReason::RotationDue { newest, due } => {
                write!(
                    f,
                    "rotation due at {due}: the newest key {newest} reached the rotation period"
                )
            }
        }
    }
}

/// A key the applier must generate (randomness is not done here) and add to the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKey {
    /// The kid to use.
    pub kid: String,
    /// `createdAt` of the new key (the planning instant).
    pub created_at: Timestamp,
    /// `activeFrom` of the new key.
    pub active_from: Timestamp,
    /// `retireAfter` of the new key: always `None` (a key is retired when superseded).
    pub retire_after: Option<Timestamp>,
    /// Why it is generated.
    pub reason: GenerateReason,
}

/// An effect requested by the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyEffect {
    /// Generate an RSA-3072 key, PKCS#8 PEM, and add it to `keys`.
    GenerateRsa(NewKey),
    /// Generate 32 random bytes and add them to `hmac`.
    GenerateHmac(NewKey),
}

impl KeyEffect {
    /// The key to generate.
    pub fn key(&self) -> &NewKey {
        match self {
            KeyEffect::GenerateRsa(k) | KeyEffect::GenerateHmac(k) => k,
        }
    }

    /// The list the key goes to.
    pub fn family(&self) -> KeyFamily {
        match self {
            KeyEffect::GenerateRsa(_) => KeyFamily::Rsa,
            KeyEffect::GenerateHmac(_) => KeyFamily::Hmac,
        }
    }
}

impl fmt::Display for KeyEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.key();
        write!(
            f,
            "generate {} {} active from {} ({})",
            self.family(),
            k.kid,
            k.active_from,
            k.reason
        )
    }
}

/// A deterministic change of the current document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentChange {
    /// A superseded key gets its `retireAfter`.
    SetRetireAfter {
        /// The list.
        family: KeyFamily,
        /// The superseded key.
        kid: String,
        /// Its new `retireAfter`.
        retire_after: Timestamp,
        /// The key that superseded it.
        successor: String,
    },
    /// A retired key leaves the document.
    Drop {
        /// The list.
        family: KeyFamily,
        /// The dropped key.
        kid: String,
        /// When it retired (`None` if it never had a `retireAfter` and its retention is over).
        retire_after: Option<Timestamp>,
    },
}

impl fmt::Display for DocumentChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocumentChange::SetRetireAfter {
                family,
                kid,
                retire_after,
                successor,
            } => {
                write!(
                    f,
                    "{family} {kid} superseded by {successor}: retire after {retire_after}"
                )
            }
            DocumentChange::Drop {
                family,
                kid,
                retire_after: Some(at),
            } => {
                write!(f, "drop {family} {kid}: retired at {at}")
            }
            DocumentChange::Drop {
                family,
                kid,
                retire_after: None,
            } => {
                write!(f, "drop {family} {kid}: superseded and its retention is over")
            }
        }
    }
}

/// The timeline's answer for one instant.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeysPlan {
    /// Changes of the current document (retirements set, retired keys dropped).
    pub changes: Vec<DocumentChange>,
    /// Keys to generate and add.
    pub effects: Vec<KeyEffect>,
    /// The earliest instant after `now` at which the plan would change (a rotation due, a key
    /// activating, a key retiring); `None` only when there is nothing scheduled.
    pub next_deadline: Option<Timestamp>,
}

impl KeysPlan {
    /// True when the document is as it should be and nothing is to be generated.
    pub fn is_settled(&self) -> bool {
        self.changes.is_empty() && self.effects.is_empty()
    }

    /// The desired document without the generated keys: `current` (or an empty document) with
    /// the changes applied. The applier adds one key per effect and writes the result.
    pub fn apply_changes(&self, current: Option<&KeysDocument>) -> KeysDocument {
        let mut doc = current.cloned().unwrap_or_default();
        for change in &self.changes {
            match change {
                DocumentChange::SetRetireAfter {
                    family: KeyFamily::Rsa,
                    kid,
                    retire_after,
                    ..
                } => {
                    doc.keys_mut()
                        .iter_mut()
                        .filter(|k| k.kid() == kid)
                        .for_each(|k| k.set_retire_after(*retire_after));
                }
                DocumentChange::SetRetireAfter {
                    family: KeyFamily::Hmac,
                    kid,
                    retire_after,
                    ..
                } => {
                    doc.hmac_mut()
                        .iter_mut()
                        .filter(|k| k.kid() == kid)
                        .for_each(|k| k.set_retire_after(*retire_after));
                }
                DocumentChange::Drop {
                    family: KeyFamily::Rsa,
                    kid,
                    ..
                } => doc.keys_mut().retain(|k| k.kid() != kid),
                DocumentChange::Drop {
                    family: KeyFamily::Hmac,
                    kid,
                    ..
                } => doc.hmac_mut().retain(|k| k.kid() != kid),
            }
        }
        doc
    }
}

/// Plans the key timeline at `now` for the current document (`None`: the Secret does not exist).
/// Cheap (a few comparisons per key, no parsing), deterministic, and idempotent: applying the
/// changes and effects and planning again at the same `now` yields a settled plan.
pub fn plan(now: Timestamp, current: Option<&KeysDocument>, settings: &TimelineSettings) -> KeysPlan {
    let mut out = KeysPlan::default();
    let (rsa, hmac) = current.map_or((&[][..], &[][..]), |d| (d.keys(), d.hmac()));
    plan_family(now, rsa, KeyFamily::Rsa, settings, &mut out);
    plan_family(now, hmac, KeyFamily::Hmac, settings, &mut out);
    out
}

fn add(at: Timestamp, d: SignedDuration) -> Timestamp {
    at.checked_add(d).unwrap_or(if d.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

fn earliest(deadline: &mut Option<Timestamp>, at: Timestamp) {
    *deadline = Some(deadline.map_or(at, |d| d.min(at)));
}

/// `k-YYYYMMDD-HHMM` / `h-YYYYMMDD-HHMM` from `at` in UTC, suffixed if already taken.
fn kid_for<K: KeyTimes>(family: KeyFamily, at: Timestamp, keys: &[K]) -> String {
    let t = TimeZone::UTC.to_datetime(at);
    let base = format!(
        "{}-{:04}{:02}{:02}-{:02}{:02}",
        family.kid_prefix(),
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute()
    );
    let taken = |kid: &str| keys.iter().any(|k| k.kid() == kid);
    if !taken(&base) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|kid| !taken(kid))
        .unwrap_or(base)
}

fn plan_family<K: KeyTimes>(
    now: Timestamp,
    keys: &[K],
    family: KeyFamily,
    settings: &TimelineSettings,
    out: &mut KeysPlan,
) {
    let retention = settings.retention(family);

    // Retired keys leave the document; live ones with a retireAfter schedule their drop.
    for k in keys {
        match k.retire_after() {
            Some(at) if at <= now => out.changes.push(DocumentChange::Drop {
                family,
                kid: k.kid().to_owned(),
                retire_after: Some(at),
            }),
            Some(at) => earliest(&mut out.next_deadline, at),
            None => {}
        }
    }

    let signer = signing(keys, now);

    // Keys superseded by a later active key get their retireAfter (or go, if it is past).
    for k in keys
        .iter()
        .filter(|k| k.may_sign(now) && k.retire_after().is_none())
    {
        if signer.is_some_and(|s| s.kid() == k.kid()) {
            continue;
        }
        let successor = keys
            .iter()
            .filter(|s| s.may_sign(now) && activation_order(*s, k).is_gt())
            .min_by(|a, b| activation_order(*a, *b));
        let Some(successor) = successor else { continue };
        let retire_after = add(successor.active_from(), retention);
        if retire_after <= now {
            out.changes.push(DocumentChange::Drop {
                family,
                kid: k.kid().to_owned(),
                retire_after: None,
            });
        } else {
            out.changes.push(DocumentChange::SetRetireAfter {
                family,
                kid: k.kid().to_owned(),
                retire_after,
                successor: successor.kid().to_owned(),
            });
            earliest(&mut out.next_deadline, retire_after);
        }
    }

    // Keys waiting for their activeFrom.
    for k in keys.iter().filter(|k| k.is_live(now) && k.active_from() > now) {
        earliest(&mut out.next_deadline, k.active_from());
    }

    // Generation: at once when nothing may sign, else when the newest key is a period old.
    let new_key = |active_from: Timestamp, reason: GenerateReason| NewKey {
        kid: kid_for(family, now, keys),
        created_at: now,
        active_from,
        retire_after: None,
        reason,
    };
    let generated = if signer.is_none() {
        Some(new_key(now, GenerateReason::NoSigningKey))
    } else {
        let newest = keys.iter().filter(|k| k.is_live(now)).max_by(|a, b| {
            (a.created_at(), a.active_from(), a.kid()).cmp(&(b.created_at(), b.active_from(), b.kid()))
        });
        match newest {
            Some(newest) => {
                let due = add(newest.created_at(), settings.rotation_period);
                if due <= now {
                    let reason = GenerateReason::RotationDue {
                        newest: newest.kid().to_owned(),
                        due,
                    };
                    Some(new_key(add(now, settings.publish_lead), reason))
                } else {
                    earliest(&mut out.next_deadline, due);
                    None
                }
            }
            None => Some(new_key(now, GenerateReason::NoSigningKey)),
        }
    };
    if let Some(key) = generated {
        out.effects.push(match family {
            KeyFamily::Rsa => KeyEffect::GenerateRsa(key),
            KeyFamily::Hmac => KeyEffect::GenerateHmac(key),
        });
    }
}

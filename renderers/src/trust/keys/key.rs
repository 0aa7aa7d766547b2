//! One key of `keys.json`, RSA or HMAC: its kid, its material and its instants, with the rules
//! both kinds share (the kid's syntax, `activeFrom ≥ createdAt`, `retireAfter > activeFrom`) and
//! the order in which keys supersede each other.

use std::cmp::Ordering;

use jiff::Timestamp;

use super::{FieldProblem, HmacSecret, KeysError, MAX_KID_LEN, PrivateKeyPem, RS256};

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

/// A key of `keys.json`: [`RsaKey`] signs ID tokens, [`HmacKey`] the issuer's internal
/// artifacts. Both kinds carry a kid and the same instants, checked by the same rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key<M> {
    kid: String,
    material: M,
    created_at: Timestamp,
    active_from: Timestamp,
    retire_after: Option<Timestamp>,
}

/// An RSA signing key (RS256) of `keys.json`.
pub type RsaKey = Key<PrivateKeyPem>;

/// An HMAC-SHA256 key of `keys.json`, for the issuer's internal artifacts.
pub type HmacKey = Key<HmacSecret>;

impl<M> Key<M> {
    /// Builds a key, with the same checks as the parser (errors name the field, e.g. `kid`).
    pub fn new(
        kid: String,
        material: M,
        created_at: Timestamp,
        active_from: Timestamp,
        retire_after: Option<Timestamp>,
    ) -> Result<Self, KeysError> {
        check_kid(&kid).map_err(|p| KeysError::field("kid", p))?;
        check_times(created_at, active_from, retire_after).map_err(|(f, p)| KeysError::field(f, p))?;
        Ok(Self::checked(
            kid,
            material,
            created_at,
            active_from,
            retire_after,
        ))
    }

    /// A key whose kid and instants the caller has checked (the reader, whose errors name the
    /// whole path of the field).
    pub(super) fn checked(
        kid: String,
        material: M,
        created_at: Timestamp,
        active_from: Timestamp,
        retire_after: Option<Timestamp>,
    ) -> Self {
        Key {
            kid,
            material,
            created_at,
            active_from,
            retire_after,
        }
    }

    pub(crate) fn set_retire_after(&mut self, at: Timestamp) {
        self.retire_after = Some(at);
    }
}

impl RsaKey {
    /// The private key, PKCS#8 PEM.
    pub fn pem(&self) -> &PrivateKeyPem {
        &self.material
    }

    /// The algorithm, always RS256.
    pub fn alg(&self) -> &'static str {
        RS256
    }
}

impl HmacKey {
    /// The secret.
    pub fn secret(&self) -> &HmacSecret {
        &self.material
    }
}

impl<M> KeyTimes for Key<M> {
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

pub(super) fn check_kid(kid: &str) -> Result<(), FieldProblem> {
    let ok = !kid.is_empty()
        && kid.len() <= MAX_KID_LEN
        && kid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok { Ok(()) } else { Err(FieldProblem::BadKid) }
}

pub(super) fn check_times(
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

//! The pure helpers over a credentials entry's refresh families and sessions: start a family,
//! rotate it (with the grace window and reuse detection), revoke one or all, prune ended ones,
//! and the entry after a password change or rehash. Each returns the entry to write, or says
//! nothing needs writing.

use jiff::{SignedDuration, Timestamp};

use super::{
    CredentialsEntry, FIRST_GENERATION, Factors, Family, MAX_CLIENT_LEN, MAX_FAMILIES, MAX_FAMILY_ID_LEN,
    REFRESH_GRACE, factors, is_valid_client_value, is_valid_family_id, whole_seconds,
};

/// A refused refresh-family operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FamilyError {
    /// The family id is not `[A-Za-z0-9_-]{1,64}`.
    #[error("family id: must be 1 to {MAX_FAMILY_ID_LEN} characters of A-Z, a-z, 0-9, '-' and '_'")]
    InvalidId,
    /// A family with this id exists already (ids are random; this means a caller bug).
    #[error("family id: a family \"{0}\" exists already")]
    AlreadyExists(String),
    /// `client` or `aud` is empty, too long or not printable ASCII.
    #[error("{field}: must be 1 to {MAX_CLIENT_LEN} printable ASCII characters")]
    InvalidValue {
        /// `client` or `aud`.
        field: &'static str,
    },
    /// An `amr` value outside [`AMR_VALUES`](super::AMR_VALUES), or one listed twice.
    #[error("amr: {0}")]
    InvalidAmr(String),
    /// The lifetime is not positive or `now + lifetime` is out of range.
    #[error("refresh lifetime: must be positive and end before the year 9999 (got {0})")]
    InvalidLifetime(SignedDuration),
}

/// The outcome of presenting a refresh token of a family ([`CredentialsEntry::rotate_family`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Rotation {
    /// The current generation was presented: write `entry`, then issue the refresh token of
    /// `generation` (the successor) and a fresh ID token.
    Rotated {
        /// The entry to write (generation advanced, `rotatedAt` = now).
        entry: CredentialsEntry,
        /// The successor's generation.
        generation: u64,
    },
    /// The generation just replaced was presented within the grace window: write nothing and
    /// issue the *same* successor, the refresh token of `generation`, and a fresh ID token.
    Grace {
        /// The current generation (the successor already issued once).
        generation: u64,
    },
    /// Refused (`invalid_grant`). When `entry` is `Some`, write it (the family is removed).
    Refused {
        /// The entry to write, if the family must be removed.
        entry: Option<CredentialsEntry>,
        /// Why.
        reason: RefusalReason,
    },
}

/// Why a refresh was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// No family with this id: revoked, expired and removed, or never issued.
    UnknownFamily,
    /// The family's absolute lifetime has ended.
    Expired,
    /// The family started before the user's `notBefore` (password change, revoke sessions).
    BeforeNotBefore,
    /// A generation other than the current one (and not the grace case) was presented: the
    /// token was used twice, so the family is revoked.
    Reuse {
        /// The generation presented.
        presented: u64,
        /// The family's current generation.
        current: u64,
    },
}

impl CredentialsEntry {
    /// The family with this id, if it exists.
    pub fn family(&self, id: &str) -> Option<&Family> {
        self.families.get(id)
    }

    /// Whether a family is over: past its absolute end, or started before `notBefore`.
    fn family_ended(&self, family: &Family, now: Timestamp) -> bool {
        now >= family.exp || !self.accepts_issued_at(family.iat)
    }

    /// How many families are not over at `now` (neither past their end nor started before
    /// `notBefore`): the sessions that can still refresh once the user may sign in.
    pub fn live_families(&self, now: Timestamp) -> usize {
        self.families
            .values()
            .filter(|family| !self.family_ended(family, now))
            .count()
    }

    /// The entry with the families that are over (expired, or started before `notBefore`)
    /// removed. Useful before any write, so dead families do not accumulate.
    pub fn prune(&self, now: Timestamp) -> Self {
        let mut entry = self.clone();
        entry.families.retain(|_, family| !self.family_ended(family, now));
        entry
    }

    /// The live families that starting one more at `now` ends to stay within [`MAX_FAMILIES`]:
    /// the ones that started earliest (then smallest id), oldest first. These are what
    /// [`CredentialsEntry::start_family`] removes besides the ended families, so a caller can say
    /// that a session was ended to make room.
    pub fn families_displaced_at(&self, now: Timestamp) -> Vec<String> {
        let mut live: Vec<(Timestamp, &String)> = self
            .families
            .iter()
            .filter(|(_, family)| !self.family_ended(family, now))
            .map(|(id, family)| (family.iat, id))
            .collect();
        live.sort();
        let excess = (live.len() + 1).saturating_sub(MAX_FAMILIES);
        live.into_iter().take(excess).map(|(_, id)| id.clone()).collect()
    }

    /// The entry with a new family `id` at [`FIRST_GENERATION`], started now and ending
    /// `lifetime` later. Ended families are dropped first; if [`MAX_FAMILIES`] are still live, the
    /// one that started earliest (then smallest id) is dropped to make room.
    pub fn start_family(
        &self,
        id: &str,
        client: &str,
        aud: &str,
        now: Timestamp,
        lifetime: SignedDuration,
    ) -> Result<Self, FamilyError> {
        self.start_family_with_amr(id, client, aud, &[], now, lifetime)
    }

    /// As [`CredentialsEntry::start_family`], for a sign-in that proved `amr` (RFC 8176 values
    /// of [`AMR_VALUES`](super::AMR_VALUES), e.g. `["pwd","otp","mfa"]`), which the family records and every
    /// refresh repeats. `["pwd"]` and `[]` are the password-only default.
    pub fn start_family_with_amr(
        &self,
        id: &str,
        client: &str,
        aud: &str,
        amr: &[&str],
        now: Timestamp,
        lifetime: SignedDuration,
    ) -> Result<Self, FamilyError> {
        let amr: Vec<String> = amr.iter().map(|&value| value.to_owned()).collect();
        factors::check_amr(&amr).map_err(FamilyError::InvalidAmr)?;
        let amr = if factors::amr_is_password_only(&amr) {
            Vec::new()
        } else {
            amr
        };
        if !is_valid_family_id(id) {
            return Err(FamilyError::InvalidId);
        }
        if !is_valid_client_value(client) {
            return Err(FamilyError::InvalidValue { field: "client" });
        }
        if !is_valid_client_value(aud) {
            return Err(FamilyError::InvalidValue { field: "aud" });
        }
        if self.families.contains_key(id) {
            return Err(FamilyError::AlreadyExists(id.to_owned()));
        }
        let iat = whole_seconds(now);
        let exp = match iat.checked_add(lifetime) {
            Ok(exp) if lifetime.is_positive() => whole_seconds(exp),
            _ => return Err(FamilyError::InvalidLifetime(lifetime)),
        };
        let mut entry = self.prune(now);
        for displaced in self.families_displaced_at(now) {
            entry.families.remove(&displaced);
        }
        let family = Family {
            generation: FIRST_GENERATION,
            client: client.to_owned(),
            aud: aud.to_owned(),
            iat,
            exp,
            rotated_at: None,
            amr,
        };
        entry.families.insert(id.to_owned(), family);
        Ok(entry)
    }

    /// Decides what presenting generation `presented` of family `id` at `now` does, following
    /// refresh rotation with reuse detection, absolute lifetime and the 10-second grace window:
    ///
    /// - current generation → [`Rotation::Rotated`] (generation + 1, `rotatedAt` = now);
    /// - the generation just replaced, less than [`REFRESH_GRACE`] after `rotatedAt` →
    ///   [`Rotation::Grace`] (nothing written, same successor);
    /// - any other generation → refused as [`RefusalReason::Reuse`], family removed;
    /// - family past `exp` or started before `notBefore` → refused, family removed;
    /// - no such family → refused, nothing to write.
    pub fn rotate_family(&self, id: &str, presented: u64, now: Timestamp) -> Rotation {
        let Some(family) = self.families.get(id) else {
            return Rotation::Refused {
                entry: None,
                reason: RefusalReason::UnknownFamily,
            };
        };
        let without = || {
            let mut entry = self.clone();
            entry.families.remove(id);
            Some(entry)
        };
        if !self.accepts_issued_at(family.iat) {
            return Rotation::Refused {
                entry: without(),
                reason: RefusalReason::BeforeNotBefore,
            };
        }
        if now >= family.exp {
            return Rotation::Refused {
                entry: without(),
                reason: RefusalReason::Expired,
            };
        }
        let current = family.generation;
        let reuse = Rotation::Refused {
            entry: without(),
            reason: RefusalReason::Reuse { presented, current },
        };
        if presented == current {
            let Some(next) = current.checked_add(1) else {
                return reuse;
            };
            let mut entry = self.clone();
            if let Some(f) = entry.families.get_mut(id) {
                f.generation = next;
                f.rotated_at = Some(whole_seconds(now));
            }
            return Rotation::Rotated {
                entry,
                generation: next,
            };
        }
        let just_replaced = presented.checked_add(1) == Some(current);
        let in_window = family
            .rotated_at
            .is_some_and(|at| now.duration_since(at) < REFRESH_GRACE);
        if just_replaced && in_window {
            Rotation::Grace { generation: current }
        } else {
            reuse
        }
    }

    /// The entry without family `id` (sign-out, RFC 7009 revocation), or `None` when there is no
    /// such family and nothing needs writing.
    pub fn revoke_family(&self, id: &str) -> Option<Self> {
        if !self.families.contains_key(id) {
            return None;
        }
        let mut entry = self.clone();
        entry.families.remove(id);
        Some(entry)
    }

    /// "Revoke sessions": `notBefore` = now (whole seconds) and every family removed.
    pub fn revoke_all(&self, now: Timestamp) -> Self {
        let mut entry = self.clone();
        entry.not_before = whole_seconds(now);
        entry.families.clear();
        entry
    }

    /// A password change: the new hash, `notBefore` = now, every family removed, `mustChange` as
    /// given (true when an admin set it, false when the user chose it).
    pub fn with_new_password(&self, hash: String, now: Timestamp, must_change: bool) -> Self {
        let mut entry = self.revoke_all(now);
        entry.hash = hash;
        entry.must_change = must_change;
        // Someone who held the old password can no longer hold the second step back.
        entry.factors.failures = 0;
        entry.factors.failed_at = None;
        entry
    }

    /// An admin's factor reset (`SetPassword` with `resetFactors`): every factor removed,
    /// `notBefore` = now and every family removed, in one write; the password is unchanged.
    pub fn with_factors_reset(&self, now: Timestamp) -> Self {
        let mut entry = self.revoke_all(now);
        entry.factors = Factors::default();
        entry
    }

    /// A rehash after a successful login with outdated parameters: only the hash changes, so no
    /// session ends.
    pub fn with_rehashed_password(&self, hash: String) -> Self {
        let mut entry = self.clone();
        entry.hash = hash;
        entry
    }
}

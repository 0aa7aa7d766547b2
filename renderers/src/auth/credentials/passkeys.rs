//! Passkeys in the credentials entry (docs/mfa.md): adding a registered one, and recording the
//! use of one in the sign-in's second step.
//!
//! The WebAuthn ceremonies themselves (the challenge, the origin, the signature, user
//! verification, the signature counter) are checked by the relying-party library in the issuer
//! (`webauthn-rs`); what it hands back — the credential with its counter moved, and whether the
//! authenticator is backup-eligible — is recorded here, purely, inside the same conditional write
//! as a typed code ([`CredentialsEntry::attempt_factor`]). The use moves the passkey's
//! `lastUsedAt`, which is part of the factor use mark, so a second-factor ticket completes one
//! sign-in.

use jiff::Timestamp;

use super::second_factor::{AMR_MFA, FactorAttempt, FactorRefusal};
use super::{CredentialsEntry, MAX_PASSKEYS, StoredPasskey};

/// The `amr` of a sign-in completed with a hardware-bound passkey (RFC 8176 `hwk`).
pub const AMR_HARDWARE_KEY: [&str; 3] = ["pwd", "hwk", AMR_MFA];
/// The `amr` of a sign-in completed with a synced (backup-eligible) passkey (RFC 8176 `swk`).
pub const AMR_SYNCED_KEY: [&str; 3] = ["pwd", "swk", AMR_MFA];

/// A passkey assertion the relying-party library verified against the user's passkeys.
#[derive(Clone, PartialEq, Eq)]
pub struct VerifiedPasskey {
    /// The credential id of the passkey that signed (base64url, as stored).
    pub id: String,
    /// The library's credential after the use (its signature counter moved), to store.
    pub passkey: serde_json::Value,
    /// The authenticator's backup-eligible flag as this assertion reported it.
    pub backup_eligible: bool,
}

impl std::fmt::Debug for VerifiedPasskey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedPasskey")
            .field("id", &self.id)
            .field("backup_eligible", &self.backup_eligible)
            .finish_non_exhaustive()
    }
}

/// Why the relying-party library refused a passkey answer: the refusal, and the passkey that
/// signed it when the signature verified but its counter went back (a copy of its key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasskeyRefusal {
    /// Why, for the log.
    pub refusal: FactorRefusal,
    /// The credential id of the passkey a copy of which signed the answer.
    pub cloned: Option<String>,
}

impl From<FactorRefusal> for PasskeyRefusal {
    fn from(refusal: FactorRefusal) -> Self {
        Self {
            refusal,
            cloned: None,
        }
    }
}

/// Why a registered passkey cannot be added to the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddPasskeyError {
    /// The user has the most passkeys allowed.
    #[error("you have {MAX_PASSKEYS} passkeys already; remove one before adding another")]
    TooMany,
    /// This authenticator's credential is registered already.
    #[error("this passkey is registered already")]
    Duplicate,
    /// A field of the new passkey is not valid (the name, its size).
    #[error("{field} {problem}")]
    Invalid {
        /// The field, as the entry names it.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl CredentialsEntry {
    /// The entry with `passkey` registered, after the user's others.
    ///
    /// # Errors
    /// [`AddPasskeyError`]; the entry is unchanged.
    pub fn add_passkey(&self, passkey: StoredPasskey) -> Result<CredentialsEntry, AddPasskeyError> {
        if self.factors.passkey(&passkey.id).is_some() {
            return Err(AddPasskeyError::Duplicate);
        }
        if self.factors.passkeys.len() >= MAX_PASSKEYS {
            return Err(AddPasskeyError::TooMany);
        }
        let mut next = self.clone();
        next.factors.passkeys.push(passkey);
        next.factors
            .check()
            .map_err(|(field, problem)| AddPasskeyError::Invalid { field, problem })?;
        Ok(next)
    }

    /// The passkeys that may complete a sign-in: those no copy was detected of.
    pub fn usable_passkeys(&self) -> Vec<StoredPasskey> {
        self.factors
            .passkeys
            .iter()
            .filter(|p| p.cloned_at.is_none())
            .cloned()
            .collect()
    }

    /// One passkey answer at `now`, counted as a typed code is
    /// ([`CredentialsEntry::attempt_factor`]): `verify` (the relying-party library) checks it
    /// against [`CredentialsEntry::usable_passkeys`] only when no back-off holds. A refusal
    /// naming a copied passkey also marks that passkey (`clonedAt`), in the same write as the
    /// failure, so neither the copy nor the original completes a sign-in any more: the counter
    /// check cannot tell which of the two is the thief's.
    pub fn attempt_passkey<F>(&self, now: Timestamp, verify: F) -> FactorAttempt
    where
        F: FnOnce(&[StoredPasskey]) -> Result<VerifiedPasskey, PasskeyRefusal>,
    {
        let mut cloned = None;
        let mut attempt = self.attempt_factor(now, |entry| match verify(&entry.usable_passkeys()) {
            Ok(verified) => entry.use_passkey(&verified, now),
            Err(refusal) => {
                cloned = refusal.cloned;
                Err(refusal.refusal)
            }
        });
        if let (FactorAttempt::Refused { entry, .. }, Some(id)) = (&mut attempt, cloned)
            && let Some(passkey) = entry.factors.passkeys.iter_mut().find(|p| p.id == id)
        {
            passkey.cloned_at.get_or_insert(now);
        }
        attempt
    }

    /// Records the use of the passkey `verified` names at `now`: its credential as the library
    /// returned it (the counter moved), `lastUsedAt` and its backup-eligible flag. Returns the
    /// entry and the sign-in's `amr` (`hwk` or `swk`, with `mfa`). Meant as the `check` of
    /// [`CredentialsEntry::attempt_factor`].
    ///
    /// # Errors
    /// [`FactorRefusal::PasskeyRefused`] when the entry has no passkey of that id (removed since
    /// the password step); [`FactorRefusal::NotEnrolled`] when it has none at all.
    pub fn use_passkey(
        &self,
        verified: &VerifiedPasskey,
        now: Timestamp,
    ) -> Result<(CredentialsEntry, [&'static str; 3]), FactorRefusal> {
        if self.factors.passkeys.is_empty() {
            return Err(FactorRefusal::NotEnrolled);
        }
        let mut next = self.clone();
        let stored = next
            .factors
            .passkeys
            .iter_mut()
            .find(|p| p.id == verified.id)
            .ok_or(FactorRefusal::PasskeyRefused)?;
        if stored.cloned_at.is_some() {
            return Err(FactorRefusal::PasskeyCloned);
        }
        stored.passkey = verified.passkey.clone();
        stored.last_used_at = Some(now);
        stored.backup_eligible = verified.backup_eligible;
        let amr = if verified.backup_eligible {
            AMR_SYNCED_KEY
        } else {
            AMR_HARDWARE_KEY
        };
        Ok((next, amr))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::auth::credentials::FactorAttempt;

    fn now() -> Timestamp {
        "2026-12-07T12:00:00Z".parse().unwrap()
    }

    fn passkey(id: &str) -> StoredPasskey {
        StoredPasskey {
            id: id.to_owned(),
            name: format!("key {id}"),
            passkey: serde_json::json!({"cred": {"counter": 1}}),
            created_at: "2026-12-01T00:00:00Z".parse().unwrap(),
            last_used_at: None,
            backup_eligible: false,
            cloned_at: None,
        }
    }

    fn entry() -> CredentialsEntry {
        CredentialsEntry::new(
            "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".to_owned(),
            "2026-12-01T00:00:00Z".parse().unwrap(),
            false,
        )
    }

    #[test]
    fn passkeys_are_added_in_order_up_to_the_limit_and_never_twice() {
        let mut e = entry();
        for i in 0..MAX_PASSKEYS {
            e = e.add_passkey(passkey(&format!("AAA{i}"))).unwrap();
        }
        assert_eq!(e.factors.passkeys[0].id, "AAA0");
        assert_eq!(
            e.add_passkey(passkey("BBBB")).unwrap_err(),
            AddPasskeyError::TooMany
        );
        let one = entry().add_passkey(passkey("AAAA")).unwrap();
        assert_eq!(
            one.add_passkey(passkey("AAAA")).unwrap_err(),
            AddPasskeyError::Duplicate
        );
        let mut unnamed = passkey("CCCC");
        unnamed.name = " ".to_owned();
        let err = entry().add_passkey(unnamed).unwrap_err();
        assert!(
            matches!(&err, AddPasskeyError::Invalid { field, .. } if field == "factors.passkeys[0].name"),
            "{err:?}"
        );
    }

    #[test]
    fn a_verified_passkey_records_its_use_and_says_how_it_is_bound() {
        let e = entry().add_passkey(passkey("AAAA")).unwrap();
        let before = e.factor_use_mark();
        let verified = VerifiedPasskey {
            id: "AAAA".to_owned(),
            passkey: serde_json::json!({"cred": {"counter": 2}}),
            backup_eligible: false,
        };
        let (next, amr) = e.use_passkey(&verified, now()).unwrap();
        assert_eq!(amr, AMR_HARDWARE_KEY);
        assert_eq!(next.factors.passkeys[0].passkey["cred"]["counter"], 2);
        assert_eq!(next.factors.passkeys[0].last_used_at, Some(now()));
        assert_ne!(
            next.factor_use_mark(),
            before,
            "a use moves the mark: the ticket is spent"
        );
        let synced = VerifiedPasskey {
            backup_eligible: true,
            ..verified
        };
        let (next, amr) = e.use_passkey(&synced, now()).unwrap();
        assert_eq!(amr, AMR_SYNCED_KEY);
        assert!(next.factors.passkeys[0].backup_eligible);
    }

    #[test]
    fn a_passkey_removed_since_the_password_step_is_refused() {
        let e = entry().add_passkey(passkey("AAAA")).unwrap();
        let other = VerifiedPasskey {
            id: "ZZZZ".to_owned(),
            passkey: serde_json::json!({}),
            backup_eligible: false,
        };
        assert_eq!(
            e.use_passkey(&other, now()).unwrap_err(),
            FactorRefusal::PasskeyRefused
        );
        assert_eq!(
            entry().use_passkey(&other, now()).unwrap_err(),
            FactorRefusal::NotEnrolled
        );
    }

    #[test]
    fn a_refused_assertion_counts_as_a_failure_and_failures_hold_the_step() {
        let mut e = entry().add_passkey(passkey("AAAA")).unwrap();
        for _ in 0..5 {
            match e.attempt_factor(now(), |_| Err(FactorRefusal::PasskeyCloned)) {
                FactorAttempt::Refused { entry, refusal } => {
                    assert_eq!(refusal, FactorRefusal::PasskeyCloned);
                    e = entry;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(e.factors.failures, 5);
        let mut checked = false;
        let held = e.attempt_factor(now(), |_| {
            checked = true;
            Err(FactorRefusal::Wrong)
        });
        assert!(matches!(held, FactorAttempt::Wait { .. }), "{held:?}");
        assert!(!checked, "a held step does not even check the passkey");
    }

    #[test]
    fn a_copy_detected_marks_the_passkey_and_neither_copy_nor_original_signs_in_again() {
        let e = entry()
            .add_passkey(passkey("AAAA"))
            .unwrap()
            .add_passkey(passkey("BBBB"))
            .unwrap();
        let refused = e.attempt_passkey(now(), |usable| {
            assert_eq!(usable.len(), 2);
            Err(PasskeyRefusal {
                refusal: FactorRefusal::PasskeyCloned,
                cloned: Some("AAAA".to_owned()),
            })
        });
        let FactorAttempt::Refused {
            entry: marked,
            refusal,
        } = refused
        else {
            panic!("{refused:?}");
        };
        assert_eq!(refusal, FactorRefusal::PasskeyCloned);
        assert_eq!(marked.factors.failures, 1);
        assert_eq!(marked.factors.passkeys[0].cloned_at, Some(now()));
        assert_eq!(marked.factors.passkeys[1].cloned_at, None);
        // The library is shown the other passkey only, and an answer of the marked one is refused.
        let usable: Vec<String> = marked.usable_passkeys().into_iter().map(|p| p.id).collect();
        assert_eq!(usable, ["BBBB"]);
        let verified = VerifiedPasskey {
            id: "AAAA".to_owned(),
            passkey: serde_json::json!({}),
            backup_eligible: false,
        };
        assert_eq!(
            marked.use_passkey(&verified, now()).unwrap_err(),
            FactorRefusal::PasskeyCloned
        );
        // With every passkey marked, the sign-in offers no passkey.
        let all = marked.attempt_passkey(now(), |_| {
            Err(PasskeyRefusal {
                refusal: FactorRefusal::PasskeyCloned,
                cloned: Some("BBBB".to_owned()),
            })
        });
        let FactorAttempt::Refused { entry: all, .. } = all else {
            panic!()
        };
        assert!(
            !all.offered_factors()
                .contains(&crate::auth::credentials::FACTOR_PASSKEY)
        );
        assert!(
            all.needs_second_factor(),
            "a marked passkey is still a factor: never the password alone"
        );
    }

    #[test]
    fn every_accepted_use_moves_the_mark_whatever_the_clock_says() {
        let e = entry().add_passkey(passkey("AAAA")).unwrap();
        let verified = VerifiedPasskey {
            id: "AAAA".to_owned(),
            passkey: serde_json::json!({}),
            backup_eligible: true,
        };
        let FactorAttempt::Accepted { entry: once, .. } = e.attempt_passkey(now(), |_| Ok(verified.clone()))
        else {
            panic!()
        };
        // The same instant again (a replica whose clock is behind): the mark still moves.
        let FactorAttempt::Accepted { entry: twice, .. } =
            once.attempt_passkey(now(), |_| Ok(verified.clone()))
        else {
            panic!()
        };
        assert_eq!(twice.factors.uses, 2);
        assert_ne!(once.factor_use_mark(), twice.factor_use_mark());
    }
}

//! The second step of a sign-in (docs/mfa.md): which factors a user is asked for, and the use of
//! one typed code — an authenticator-app (TOTP) code or a recovery code — against the entry.
//!
//! Pure: the issuer reads the entry, calls [`CredentialsEntry::use_typed_factor`] inside its
//! conditional write, and writes the entry it returns. Since the write is conditioned on the
//! version read, two replicas accepting the same TOTP code at once cannot both succeed: the one
//! whose write conflicts reads again, finds `lastStep` at that step and refuses the code as
//! replayed. A recovery code's digest is removed by the same write, so each code works once.

use jiff::{SignedDuration, Timestamp};

use super::CredentialsEntry;
use crate::auth::{backoff::backoff_after, recovery, totp};

/// The factor kinds a sign-in's second step can ask for, as the pending ticket and the page name
/// them.
pub const FACTOR_TOTP: &str = "totp";
/// See [`FACTOR_TOTP`].
pub const FACTOR_RECOVERY: &str = "recovery";
/// See [`FACTOR_TOTP`].
pub const FACTOR_PASSKEY: &str = "passkey";

/// The `amr` value (RFC 8176) of a sign-in that used more than one factor.
pub const AMR_MFA: &str = "mfa";

/// The `amr` of a sign-in completed with a typed code (RFC 8176: `otp`, with `mfa` since the
/// password came first).
pub const AMR_TYPED_CODE: [&str; 3] = ["pwd", "otp", AMR_MFA];

/// Why a typed second factor was refused. The sign-in answers every one of them the same way
/// (a wrong code); the kinds are for the issuer's log and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FactorRefusal {
    /// Neither a current authenticator-app code nor an unused recovery code.
    #[error("the code is not a current authenticator-app code or an unused recovery code")]
    Wrong,
    /// An authenticator-app code of a step already accepted.
    #[error("the authenticator-app code was used already")]
    Replayed,
    /// The user has no factor a typed code can satisfy.
    #[error("the user has no authenticator app or recovery codes")]
    NotEnrolled,
    /// The stored factor cannot be used (an invalid secret, a clock before 1970).
    #[error("the stored second factor cannot be checked: {0}")]
    Unusable(totp::TotpError),
    /// The passkey assertion did not verify: another origin, another challenge, a bad signature,
    /// no user verification, or a credential the user has not registered.
    #[error("the passkey's answer did not verify")]
    PasskeyRefused,
    /// The passkey's signature counter did not move forward: a copy of the authenticator may be
    /// in use (WebAuthn's cloned-authenticator check).
    #[error("the passkey's signature counter did not move forward; the authenticator may have been copied")]
    PasskeyCloned,
}

/// What one typed code came to, with the entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactorAttempt {
    /// Accepted: the entry with the use recorded and the failures cleared; the sign-in's `amr`.
    Accepted {
        /// The entry to write.
        entry: CredentialsEntry,
        /// The sign-in's `amr`.
        amr: [&'static str; 3],
    },
    /// Refused: the entry with one more failure recorded (written, so every replica counts it).
    Refused {
        /// The entry to write.
        entry: CredentialsEntry,
        /// Why, for the log.
        refusal: FactorRefusal,
    },
    /// Not tried: earlier failures hold the second step for this long yet; nothing to write.
    Wait {
        /// How long until a code is looked at again.
        retry_after: SignedDuration,
    },
}

impl CredentialsEntry {
    /// How long the second step is still held by the failures the entry records
    /// ([`crate::auth::backoff`]: after five in a row, one second doubling to fifteen minutes
    /// after the last), or `None` when a code may be tried at `now`.
    pub fn factor_backoff(&self, now: Timestamp) -> Option<SignedDuration> {
        let wait = backoff_after(self.factors.failures)?;
        // A count without its time (an entry written by hand) holds for the whole wait.
        let until = self.factors.failed_at.unwrap_or(now).checked_add(wait).ok()?;
        let left = now.duration_until(until);
        left.is_positive().then_some(left)
    }

    /// One typed code at `now`, counted: a code is looked at only when no back-off holds
    /// ([`CredentialsEntry::factor_backoff`]); an accepted one clears the failures, a refused
    /// one adds one. The caller writes the entry of [`FactorAttempt::Accepted`] and
    /// [`FactorAttempt::Refused`] with one conditional write.
    pub fn attempt_typed_factor(&self, code: &str, now: Timestamp) -> FactorAttempt {
        self.attempt_factor(now, |entry| entry.use_typed_factor(code, now))
    }

    /// One use of a factor at `now`, counted as [`CredentialsEntry::attempt_typed_factor`]
    /// counts a typed code: `check` runs only when no back-off holds, and returns the entry with
    /// the use recorded and the sign-in's `amr`.
    pub fn attempt_factor<F>(&self, now: Timestamp, check: F) -> FactorAttempt
    where
        F: FnOnce(&Self) -> Result<(CredentialsEntry, [&'static str; 3]), FactorRefusal>,
    {
        if let Some(retry_after) = self.factor_backoff(now) {
            return FactorAttempt::Wait { retry_after };
        }
        match check(self) {
            Ok((mut entry, amr)) => {
                entry.factors.failures = 0;
                entry.factors.failed_at = None;
                entry.factors.uses = entry.factors.uses.saturating_add(1);
                FactorAttempt::Accepted { entry, amr }
            }
            Err(refusal) => {
                let mut entry = self.clone();
                entry.factors.failures = entry.factors.failures.saturating_add(1);
                entry.factors.failed_at = Some(now);
                FactorAttempt::Refused { entry, refusal }
            }
        }
    }

    /// Whether a sign-in of this user needs a second step: the entry has any factor.
    pub fn needs_second_factor(&self) -> bool {
        !self.factors.is_empty()
    }

    /// What every accepted use of a factor changes and a wrong code does not: the authenticator
    /// app's last step, the recovery codes left and the passkeys' last sign-in, with when the
    /// app and the codes were made (new codes bring the count back up, never their time). A
    /// second-factor ticket carries the mark of its password step and the second step refuses
    /// the ticket once the mark moved, so one ticket completes one sign-in.
    pub fn factor_use_mark(&self) -> String {
        let f = &self.factors;
        let passkey = f.passkeys.iter().filter_map(|p| p.last_used_at).max();
        let nanos = |t: Option<Timestamp>| t.map_or(0, |t| t.as_nanosecond());
        format!(
            "u{}.t{}@{}.r{}@{}.p{}",
            f.uses,
            f.totp.as_ref().map_or(0, |t| t.last_step),
            nanos(f.totp.as_ref().map(|t| t.created_at)),
            f.recovery.as_ref().map_or(0, |r| r.digests.len()),
            nanos(f.recovery.as_ref().map(|r| r.created_at)),
            nanos(passkey),
        )
    }

    /// The factor kinds the second step offers, in the order a page shows them: passkeys first
    /// (phishing-resistant), then the authenticator app, then recovery codes (when any is left).
    pub fn offered_factors(&self) -> Vec<&'static str> {
        let factors = &self.factors;
        let mut offered = Vec::new();
        if factors.passkeys.iter().any(|p| p.cloned_at.is_none()) {
            offered.push(FACTOR_PASSKEY);
        }
        if factors.totp.is_some() {
            offered.push(FACTOR_TOTP);
        }
        if factors.recovery.as_ref().is_some_and(|r| !r.digests.is_empty()) {
            offered.push(FACTOR_RECOVERY);
        }
        offered
    }

    /// Uses the typed `code` at `now`: six digits are an authenticator-app code, anything else a
    /// recovery code. Returns the entry to write (the TOTP factor's `lastStep` moved to the
    /// accepted step, or the recovery digest removed) and the sign-in's `amr`.
    ///
    /// # Errors
    /// [`FactorRefusal`]; nothing is to be written then.
    pub fn use_typed_factor(
        &self,
        code: &str,
        now: Timestamp,
    ) -> Result<(CredentialsEntry, [&'static str; 3]), FactorRefusal> {
        let looks_like_totp = {
            let trimmed = code.trim();
            trimmed.len() == totp::DIGITS && trimmed.bytes().all(|b| b.is_ascii_digit())
        };
        if looks_like_totp {
            let Some(factor) = &self.factors.totp else {
                return Err(if self.factors.recovery.is_some() {
                    FactorRefusal::Wrong
                } else {
                    FactorRefusal::NotEnrolled
                });
            };
            return match totp::verify(&factor.secret, code, now, factor.last_step) {
                Ok(step) => {
                    let mut next = self.clone();
                    if let Some(t) = next.factors.totp.as_mut() {
                        t.last_step = step;
                    }
                    Ok((next, AMR_TYPED_CODE))
                }
                Err(totp::TotpError::Replayed) => Err(FactorRefusal::Replayed),
                Err(totp::TotpError::Wrong | totp::TotpError::Malformed) => Err(FactorRefusal::Wrong),
                Err(e) => Err(FactorRefusal::Unusable(e)),
            };
        }
        let Some(codes) = &self.factors.recovery else {
            return Err(if self.factors.totp.is_some() {
                FactorRefusal::Wrong
            } else {
                FactorRefusal::NotEnrolled
            });
        };
        let mut codes = codes.clone();
        if !recovery::consume(&mut codes, code) {
            return Err(FactorRefusal::Wrong);
        }
        // A used-up record is kept: the user still needs a second factor (an admin reset, or
        // new codes from a signed-in session), never falls back to the password alone.
        let mut next = self.clone();
        next.factors.recovery = Some(codes);
        Ok((next, AMR_TYPED_CODE))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::auth::credentials::{Factors, TotpFactor};
    use jiff::SignedDuration;

    const SECRET: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";

    fn now() -> Timestamp {
        "2026-12-06T12:00:10Z".parse().unwrap()
    }

    fn entry(factors: Factors) -> CredentialsEntry {
        let mut entry = CredentialsEntry::new(
            "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".to_owned(),
            "2026-12-01T00:00:00Z".parse().unwrap(),
            false,
        );
        entry.factors = factors;
        entry
    }

    fn with_totp() -> CredentialsEntry {
        entry(Factors {
            totp: Some(TotpFactor {
                secret: SECRET.to_owned(),
                created_at: "2026-12-01T00:00:00Z".parse().unwrap(),
                last_step: 0,
            }),
            ..Factors::default()
        })
    }

    fn with_recovery() -> (CredentialsEntry, Vec<String>) {
        let made = recovery::generate(
            &std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11)),
            now(),
        )
        .unwrap();
        (
            entry(Factors {
                recovery: Some(made.stored),
                ..Factors::default()
            }),
            made.codes,
        )
    }

    #[test]
    fn a_password_only_entry_needs_no_second_step_and_offers_nothing() {
        let plain = entry(Factors::default());
        assert!(!plain.needs_second_factor());
        assert!(plain.offered_factors().is_empty());
        assert_eq!(
            plain.use_typed_factor("123456", now()).unwrap_err(),
            FactorRefusal::NotEnrolled
        );
        assert_eq!(
            plain.use_typed_factor("ABCD-EFGH-JKLM-NPQR", now()).unwrap_err(),
            FactorRefusal::NotEnrolled
        );
    }

    #[test]
    fn a_current_code_is_accepted_once_and_moves_the_last_step() {
        let entry = with_totp();
        assert!(entry.needs_second_factor());
        assert_eq!(entry.offered_factors(), [FACTOR_TOTP]);
        let code = totp::code_at(SECRET, now()).unwrap();
        let (next, amr) = entry.use_typed_factor(&format!(" {code} "), now()).unwrap();
        assert_eq!(amr, ["pwd", "otp", "mfa"]);
        let step = totp::current_step(now()).unwrap();
        assert_eq!(next.factors.totp.as_ref().unwrap().last_step, step);
        assert_eq!(next.hash, entry.hash, "nothing else changes");
        assert_eq!(next.families, entry.families);
        // The same code against the written entry: a replay.
        assert_eq!(
            next.use_typed_factor(&code, now()).unwrap_err(),
            FactorRefusal::Replayed
        );
        // The next step's code is accepted after it.
        let later = now().checked_add(jiff::SignedDuration::from_secs(30)).unwrap();
        let code = totp::code_at(SECRET, later).unwrap();
        assert!(next.use_typed_factor(&code, later).is_ok());
    }

    #[test]
    fn a_wrong_code_and_a_recovery_shaped_code_without_recovery_codes_are_wrong() {
        let entry = with_totp();
        let code = totp::code_at(SECRET, now()).unwrap();
        let wrong = format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000);
        assert_eq!(
            entry.use_typed_factor(&wrong, now()).unwrap_err(),
            FactorRefusal::Wrong
        );
        assert_eq!(
            entry.use_typed_factor("ABCD-EFGH-JKLM-NPQR", now()).unwrap_err(),
            FactorRefusal::Wrong
        );
        assert_eq!(
            entry.use_typed_factor("", now()).unwrap_err(),
            FactorRefusal::Wrong
        );
    }

    #[test]
    fn each_recovery_code_works_once_and_the_last_one_leaves_the_user_needing_a_factor() {
        let (mut entry, codes) = with_recovery();
        assert_eq!(entry.offered_factors(), [FACTOR_RECOVERY]);
        // A six-digit code when only recovery codes exist is simply wrong.
        assert_eq!(
            entry.use_typed_factor("123456", now()).unwrap_err(),
            FactorRefusal::Wrong
        );
        for (i, code) in codes.iter().enumerate() {
            let (next, amr) = entry.use_typed_factor(&code.to_lowercase(), now()).unwrap();
            assert_eq!(amr, AMR_TYPED_CODE);
            assert_eq!(
                next.use_typed_factor(code, now()).unwrap_err(),
                FactorRefusal::Wrong,
                "code {i} works once"
            );
            entry = next;
        }
        assert!(
            entry
                .factors
                .recovery
                .as_ref()
                .is_some_and(|r| r.digests.is_empty()),
            "a used-up record is kept"
        );
        assert!(entry.needs_second_factor(), "never back to the password alone");
        assert!(entry.offered_factors().is_empty(), "nothing left to offer");
        entry.validate("alice").unwrap();
    }

    #[test]
    fn failures_are_counted_in_the_entry_and_hold_the_step_whatever_the_password_did() {
        let mut entry = with_totp();
        let code = totp::code_at(SECRET, now()).unwrap();
        let wrong = format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000);
        for i in 1..=5u32 {
            match entry.attempt_typed_factor(&wrong, now()) {
                FactorAttempt::Refused { entry: next, refusal } => {
                    assert_eq!(refusal, FactorRefusal::Wrong);
                    assert_eq!(next.factors.failures, i);
                    assert_eq!(next.factors.failed_at, Some(now()));
                    entry = next;
                }
                other => panic!("attempt {i}: {other:?}"),
            }
        }
        // Five in a row: the right code waits one second, and is not even looked at.
        assert_eq!(
            entry.attempt_typed_factor(&code, now()),
            FactorAttempt::Wait {
                retry_after: SignedDuration::from_secs(1)
            }
        );
        // The count survives the entry's round trip (another replica reads the same).
        let read = CredentialsEntry::parse("alice", entry.to_json("alice").unwrap().as_bytes()).unwrap();
        assert_eq!(read.factors.failures, 5);
        assert_eq!(read.factor_backoff(now()), Some(SignedDuration::from_secs(1)));
        // After the wait the right code passes and clears the count.
        let later = now().checked_add(SignedDuration::from_secs(1)).unwrap();
        let FactorAttempt::Accepted { entry, .. } = read.attempt_typed_factor(&code, later) else {
            panic!("the right code after the wait was refused");
        };
        assert_eq!((entry.factors.failures, entry.factors.failed_at), (0, None));
        // The wait doubles and stops at fifteen minutes.
        let mut many = with_totp();
        many.factors.failures = 40;
        many.factors.failed_at = Some(now());
        assert_eq!(many.factor_backoff(now()), Some(SignedDuration::from_mins(15)));
    }

    #[test]
    fn the_use_mark_moves_with_each_accepted_code_and_not_with_a_wrong_one() {
        let (mut entry, codes) = with_recovery();
        entry.factors.totp = with_totp().factors.totp;
        let at = now();
        let code = crate::auth::totp::code_at(SECRET, at).unwrap();
        let mark = entry.factor_use_mark();
        let FactorAttempt::Refused { entry, .. } = entry.attempt_typed_factor("000000x", at) else {
            panic!("a wrong code was not refused");
        };
        assert_eq!(entry.factor_use_mark(), mark, "a wrong code moved the mark");
        let FactorAttempt::Accepted { entry, .. } = entry.attempt_typed_factor(&code, at) else {
            panic!("the current code was not accepted");
        };
        let after_app = entry.factor_use_mark();
        assert_ne!(after_app, mark);
        let FactorAttempt::Accepted { entry, .. } = entry.attempt_typed_factor(&codes[0], at) else {
            panic!("a recovery code was not accepted");
        };
        assert_ne!(entry.factor_use_mark(), after_app);
        assert_ne!(entry.factor_use_mark(), mark);
        // New codes bring the count back to ten, not the mark.
        let mut renewed = entry.clone();
        let random = std::array::from_fn(|i| (i as u8).wrapping_mul(53).wrapping_add(3));
        let made = recovery::generate(&random, at + SignedDuration::from_millis(1)).unwrap();
        renewed.factors.recovery = Some(made.stored);
        renewed.factors.totp = with_totp().factors.totp;
        assert_ne!(renewed.factor_use_mark(), mark);
    }

    #[test]
    fn an_unusable_stored_secret_is_reported_not_accepted() {
        let mut entry = with_totp();
        if let Some(t) = entry.factors.totp.as_mut() {
            t.secret = "not-base32".to_owned();
        }
        assert!(matches!(
            entry.use_typed_factor("123456", now()).unwrap_err(),
            FactorRefusal::Unusable(_)
        ));
    }
}

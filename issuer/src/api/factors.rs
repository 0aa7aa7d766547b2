//! The second factors as the `UserService` shows and changes them (docs/mfa.md, "API, CLI,
//! UI"), pure: the message of a user's [`Factors`] (kinds, names and dates, never a secret, a
//! digest or a key), the factors left after a removal, and the fresh random material of an
//! enrolment.
//!
//! The rule every removal keeps: recovery codes only stand beside a real factor (an
//! authenticator app or a passkey), so removing the last real factor removes them too, and the
//! user signs in with the password alone again.

use ichor_renderers::auth::{
    credentials::Factors,
    recovery::{self, NewRecoveryCodes},
    totp,
};
use jiff::Timestamp;
use zeroize::Zeroize as _;

use super::{error::ApiError, proto};

/// The issuer label of the authenticator-app entry (`otpauth://totp/Ichor:<name>?…`).
pub const TOTP_ISSUER_LABEL: &str = "Ichor";

/// The longest passkey id accepted in a request, in characters (a credential id of at most
/// 1023 bytes, base64url).
pub const MAX_PASSKEY_ID_CHARS: usize = 1364;

/// Which factor a removal names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal<'a> {
    /// The authenticator app.
    Totp,
    /// The recovery codes.
    Recovery,
    /// The passkey of this credential id.
    Passkey(&'a str),
}

impl<'a> Removal<'a> {
    /// The removal a `RemoveFactor` request names, or the refusal naming its field.
    ///
    /// # Errors
    /// [`ApiError::InvalidArgument`] naming `kind` or `passkey_id`.
    pub fn of_request(kind: i32, passkey_id: &'a str) -> Result<Self, ApiError> {
        let kind = proto::FactorKind::try_from(kind).unwrap_or(proto::FactorKind::Unspecified);
        let removal = match kind {
            proto::FactorKind::Unspecified => {
                return Err(ApiError::invalid(
                    "kind",
                    "give the factor to remove: totp, recovery or passkey",
                ));
            }
            proto::FactorKind::Totp => Removal::Totp,
            proto::FactorKind::Recovery => Removal::Recovery,
            proto::FactorKind::Passkey => {
                if passkey_id.is_empty() {
                    return Err(ApiError::invalid(
                        "passkey_id",
                        "is required to remove a passkey (the id ListOwnFactors shows)",
                    ));
                }
                if passkey_id.chars().count() > MAX_PASSKEY_ID_CHARS {
                    return Err(ApiError::invalid(
                        "passkey_id",
                        format!("is longer than {MAX_PASSKEY_ID_CHARS} characters"),
                    ));
                }
                return Ok(Removal::Passkey(passkey_id));
            }
        };
        if !passkey_id.is_empty() {
            return Err(ApiError::invalid("passkey_id", "is only given with kind passkey"));
        }
        Ok(removal)
    }
}

/// Whether `factors` hold a real factor: an authenticator app or a passkey (recovery codes are
/// the fallback of one, never a factor alone).
pub fn has_real_factor(factors: &Factors) -> bool {
    factors.totp.is_some() || !factors.passkeys.is_empty()
}

/// The factors left after `removal`; without a real factor left, without the recovery codes
/// too.
///
/// # Errors
/// [`ApiError::FailedPrecondition`] when the factor named is not there.
pub fn without(factors: &Factors, removal: Removal<'_>) -> Result<Factors, ApiError> {
    let mut left = factors.clone();
    let missing = |what: &str| ApiError::FailedPrecondition(format!("kind: you have no {what} to remove"));
    match removal {
        Removal::Totp => {
            left.totp.take().ok_or_else(|| missing("authenticator app"))?;
        }
        Removal::Recovery => {
            left.recovery.take().ok_or_else(|| missing("recovery codes"))?;
        }
        Removal::Passkey(id) => {
            let before = left.passkeys.len();
            left.passkeys.retain(|p| p.id != id);
            if left.passkeys.len() == before {
                return Err(ApiError::FailedPrecondition(
                    "passkey_id: you have no passkey of this id; ListOwnFactors shows the ids".to_owned(),
                ));
            }
        }
    }
    if !has_real_factor(&left) {
        left.recovery = None;
    }
    Ok(left)
}

/// Whether an enrolment should come with new recovery codes: the user has no unused one.
pub fn needs_recovery_codes(factors: &Factors) -> bool {
    factors.recovery.as_ref().is_none_or(|r| r.digests.is_empty())
}

/// The API's message of `factors`: kinds, names and dates (RFC 3339), never a secret.
pub fn message(factors: &Factors) -> proto::Factors {
    proto::Factors {
        passkeys: factors
            .passkeys
            .iter()
            .map(|p| proto::PasskeyInfo {
                id: p.id.clone(),
                name: p.name.clone(),
                created_at: p.created_at.to_string(),
                last_used_at: p.last_used_at.map(|t| t.to_string()).unwrap_or_default(),
                backup_eligible: p.backup_eligible,
                cloned_at: p.cloned_at.map(|t| t.to_string()).unwrap_or_default(),
            })
            .collect(),
        totp: factors.totp.as_ref().map(|t| proto::TotpInfo {
            created_at: t.created_at.to_string(),
        }),
        recovery: factors.recovery.as_ref().map(|r| proto::RecoveryCodesInfo {
            remaining: u32::try_from(r.digests.len()).unwrap_or(u32::MAX),
            created_at: r.created_at.to_string(),
        }),
    }
}

/// A new authenticator-app secret from the operating system's random source.
///
/// # Errors
/// [`ApiError::Unavailable`] when the random source fails.
pub fn new_totp_secret() -> Result<String, ApiError> {
    let mut random = [0u8; totp::SECRET_BYTES];
    getrandom::fill(&mut random).map_err(|e| random_failed(&e))?;
    let secret = totp::generate_secret(&random);
    random.zeroize();
    Ok(secret)
}

/// Ten new recovery codes, made at `now`, from the operating system's random source.
///
/// # Errors
/// [`ApiError::Unavailable`] when the random source fails (or repeats itself).
pub fn new_recovery_codes(now: Timestamp) -> Result<NewRecoveryCodes, ApiError> {
    let mut random = [0u8; recovery::RANDOM_BYTES];
    getrandom::fill(&mut random).map_err(|e| random_failed(&e))?;
    let made = recovery::generate(&random, now).map_err(|e| ApiError::Unavailable(e.to_string()));
    random.zeroize();
    made
}

fn random_failed(e: &getrandom::Error) -> ApiError {
    ApiError::Unavailable(format!(
        "the operating system's random source failed ({e}); nothing was changed, try again"
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use ichor_renderers::auth::credentials::{RecoveryCodes, StoredPasskey, TotpFactor};

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn all() -> Factors {
        Factors {
            passkeys: vec![StoredPasskey {
                id: "AQID".into(),
                name: "YubiKey 5".into(),
                passkey: serde_json::json!({"cred": {"secret-ish": "key material"}}),
                created_at: at("2026-01-01T00:00:00Z"),
                last_used_at: None,
                backup_eligible: false,
                cloned_at: None,
            }],
            totp: Some(TotpFactor {
                secret: "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ".into(),
                created_at: at("2026-01-02T00:00:00Z"),
                last_step: 7,
            }),
            recovery: Some(RecoveryCodes {
                digests: vec!["a".repeat(64), "b".repeat(64)],
                created_at: at("2026-01-03T00:00:00Z"),
            }),
            ..Factors::default()
        }
    }

    #[test]
    fn the_message_holds_kinds_names_and_dates_and_no_secret() {
        let shown = message(&all());
        assert_eq!(shown.passkeys.len(), 1);
        assert_eq!(shown.passkeys[0].name, "YubiKey 5");
        assert_eq!(shown.passkeys[0].last_used_at, "");
        assert_eq!(shown.totp.as_ref().unwrap().created_at, "2026-01-02T00:00:00Z");
        let recovery = shown.recovery.as_ref().unwrap();
        assert_eq!(
            (recovery.remaining, recovery.created_at.as_str()),
            (2, "2026-01-03T00:00:00Z")
        );
        let text = format!("{shown:?}");
        for secret in ["GEZDGNBV", "aaaa", "key material"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(message(&Factors::default()), proto::Factors::default());
    }

    #[test]
    fn removing_the_last_real_factor_removes_the_recovery_codes_too() {
        let only_totp = without(&all(), Removal::Passkey("AQID")).unwrap();
        assert!(only_totp.recovery.is_some(), "the app is still there");
        let none = without(&only_totp, Removal::Totp).unwrap();
        assert!(none.is_empty(), "{none:?}");
        let no_codes = without(&all(), Removal::Recovery).unwrap();
        assert!(no_codes.recovery.is_none() && no_codes.totp.is_some());
    }

    #[test]
    fn a_factor_that_is_not_there_is_refused_naming_the_field() {
        let e = without(&Factors::default(), Removal::Totp).unwrap_err();
        assert_eq!(e.to_string(), "kind: you have no authenticator app to remove");
        let e = without(&all(), Removal::Passkey("BAUG")).unwrap_err();
        assert!(e.to_string().starts_with("passkey_id: "), "{e}");
    }

    #[test]
    fn a_request_names_its_kind_and_a_passkey_id_only_for_a_passkey() {
        let totp = proto::FactorKind::Totp as i32;
        let passkey = proto::FactorKind::Passkey as i32;
        assert_eq!(Removal::of_request(totp, "").unwrap(), Removal::Totp);
        assert_eq!(
            Removal::of_request(passkey, "AQID").unwrap(),
            Removal::Passkey("AQID")
        );
        for (kind, id, field) in [
            (0, "", "kind: "),
            (99, "", "kind: "),
            (totp, "AQID", "passkey_id: "),
        ] {
            let e = Removal::of_request(kind, id).unwrap_err().to_string();
            assert!(e.starts_with(field), "{e}");
        }
        let long = "A".repeat(MAX_PASSKEY_ID_CHARS + 1);
        assert!(Removal::of_request(passkey, &long).is_err());
        assert!(Removal::of_request(passkey, "").is_err());
    }

    #[test]
    fn new_codes_come_only_when_none_is_left() {
        assert!(needs_recovery_codes(&Factors::default()));
        assert!(!needs_recovery_codes(&all()));
        let mut used_up = all();
        if let Some(r) = used_up.recovery.as_mut() {
            r.digests.clear();
        }
        assert!(needs_recovery_codes(&used_up));
        let made = new_recovery_codes(at("2026-01-01T00:00:00Z")).unwrap();
        assert_eq!(made.codes.len(), 10);
        assert_eq!(new_totp_secret().unwrap().len(), 32);
        assert_ne!(new_totp_secret().unwrap(), new_totp_secret().unwrap());
    }
}

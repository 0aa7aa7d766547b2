//! Authenticator-app codes (TOTP, RFC 6238) with the parameters every app accepts: HMAC-SHA-1,
//! 6 digits, 30-second steps, a 160-bit secret (docs/mfa.md). The code arithmetic and the
//! constant-time comparison are `totp-rs`'s; this module fixes the parameters, the accepted
//! window (the current step and the one before, for a clock up to 30 seconds behind) and the
//! replay rule: a code is accepted only for a step later than the last one accepted, so each
//! code works once. The caller stores the step returned ([`crate::auth::credentials::TotpFactor`]
//! `lastStep`) in the same conditional write that accepts the sign-in.
//!
//! Pure: `now` and the secret's random bytes are passed in.

use jiff::Timestamp;
use totp_rs::{Algorithm, Builder, Secret, Totp};

use super::base32;
use super::credentials::is_valid_totp_secret;

/// Digits of a code.
pub const DIGITS: usize = 6;
/// Seconds of a step.
pub const STEP_SECONDS: u64 = 30;
/// Random bytes of a secret (160 bits, RFC 4226's recommendation).
pub const SECRET_BYTES: usize = 20;
/// The longest issuer or account name put in an `otpauth://` URI, in bytes.
pub const MAX_LABEL_BYTES: usize = 256;
/// The longest code input looked at, in bytes: anything longer is refused before trimming.
const MAX_CODE_INPUT_BYTES: usize = 64;

/// A code or secret refused. The messages say what to do; none holds the code or the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TotpError {
    /// The input is not 6 ASCII digits (after trimming surrounding whitespace).
    #[error("the code must be exactly {DIGITS} digits")]
    Malformed,
    /// Well-formed, but neither the current code nor the previous one.
    #[error("the code is not the authenticator app's current one; check that the device's clock is right")]
    Wrong,
    /// The code of a step already accepted (or older than one accepted): a replay.
    #[error("the code was used already; wait for the next one (at most {STEP_SECONDS} seconds)")]
    Replayed,
    /// The stored secret is not 32 upper-case base32 characters.
    #[error(
        "the stored authenticator-app secret is not {} base32 characters; remove the factor and enrol again",
        SECRET_BYTES / 5 * 8
    )]
    InvalidSecret,
    /// `now` is before 1970, where no step exists.
    #[error("the clock reads a time before 1970; no code can be checked")]
    ClockBeforeEpoch,
    /// An issuer or account name for the `otpauth://` URI is empty, too long, or holds a `:` or
    /// a control character.
    #[error(
        "{field}: must be 1 to {MAX_LABEL_BYTES} bytes without ':' or control characters to name an authenticator-app entry"
    )]
    InvalidLabel {
        /// `issuer` or `user`.
        field: &'static str,
    },
}

/// A new secret from `random` (the caller's CSPRNG bytes), as stored and shown: 32 upper-case
/// base32 characters.
pub fn generate_secret(random: &[u8; SECRET_BYTES]) -> String {
    base32::encode(random)
}

/// The `otpauth://totp/…` URI an authenticator app reads (as a QR code or a link): label
/// `issuer:user`, the secret, and the parameters spelled out (SHA1, 6 digits, 30 s) for apps that
/// do not assume them.
///
/// # Errors
/// [`TotpError::InvalidSecret`], or [`TotpError::InvalidLabel`] naming `issuer` or `user`.
pub fn otpauth_uri(issuer: &str, user: &str, secret: &str) -> Result<String, TotpError> {
    if !is_valid_totp_secret(secret) {
        return Err(TotpError::InvalidSecret);
    }
    for (field, value) in [("issuer", issuer), ("user", user)] {
        if !(1..=MAX_LABEL_BYTES).contains(&value.len())
            || value.contains(':')
            || value.chars().any(char::is_control)
        {
            return Err(TotpError::InvalidLabel { field });
        }
    }
    let issuer = percent_encode(issuer);
    let user = percent_encode(user);
    Ok(format!(
        "otpauth://totp/{issuer}:{user}?secret={secret}&issuer={issuer}&algorithm=SHA1&digits={DIGITS}&period={STEP_SECONDS}"
    ))
}

/// Verifies `code` at `now` against `secret`, given the step of the last code accepted
/// (`last_step`, 0 before the first). Accepted: the code of the current step or of the one
/// before, if that step is greater than `last_step`. Returns the accepted step, which the caller
/// stores as the new `last_step`.
///
/// # Errors
/// [`TotpError::Malformed`], [`TotpError::Wrong`], [`TotpError::Replayed`] (the code of a step
/// not after `last_step`), [`TotpError::InvalidSecret`], [`TotpError::ClockBeforeEpoch`].
pub fn verify(secret: &str, code: &str, now: Timestamp, last_step: u64) -> Result<u64, TotpError> {
    let code = normalise_code(code)?;
    let totp = totp(secret)?;
    let current = current_step(now)?;
    // Both checks run whatever the first finds; each compares in constant time.
    let matches_current = matches_step(&totp, code, current);
    let matches_previous = current
        .checked_sub(1)
        .filter(|&previous| matches_step(&totp, code, previous));
    if matches_current && current > last_step {
        Ok(current)
    } else if let Some(previous) = matches_previous.filter(|&previous| previous > last_step) {
        Ok(previous)
    } else if matches_current || matches_previous.is_some() {
        Err(TotpError::Replayed)
    } else {
        Err(TotpError::Wrong)
    }
}

/// The code of `secret` at `now`, as the user's app shows it: for tests that play the app, and
/// for a check of the enrolment page.
///
/// # Errors
/// [`TotpError::InvalidSecret`], [`TotpError::ClockBeforeEpoch`].
pub fn code_at(secret: &str, now: Timestamp) -> Result<String, TotpError> {
    let totp = totp(secret)?;
    let step = current_step(now)?;
    Ok(totp.generate(step * STEP_SECONDS).to_string())
}

/// The step of `now`: whole [`STEP_SECONDS`] since 1970.
///
/// # Errors
/// [`TotpError::ClockBeforeEpoch`].
pub fn current_step(now: Timestamp) -> Result<u64, TotpError> {
    u64::try_from(now.as_second())
        .map(|seconds| seconds / STEP_SECONDS)
        .map_err(|_| TotpError::ClockBeforeEpoch)
}

/// The code without surrounding whitespace, if it is exactly [`DIGITS`] ASCII digits.
fn normalise_code(code: &str) -> Result<&str, TotpError> {
    if code.len() > MAX_CODE_INPUT_BYTES {
        return Err(TotpError::Malformed);
    }
    let code = code.trim();
    if code.len() == DIGITS && code.bytes().all(|b| b.is_ascii_digit()) {
        Ok(code)
    } else {
        Err(TotpError::Malformed)
    }
}

/// The generator of `secret` with this module's parameters and no skew (the window is decided
/// here).
fn totp(secret: &str) -> Result<Totp, TotpError> {
    if !is_valid_totp_secret(secret) {
        return Err(TotpError::InvalidSecret);
    }
    let bytes: [u8; SECRET_BYTES] = base32::decode(secret)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(TotpError::InvalidSecret)?;
    Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(6)
        .with_step_duration(STEP_SECONDS)
        .with_skew(0)
        .with_secret(Secret::new_stack(bytes))
        .build()
        .map_err(|_| TotpError::InvalidSecret)
}

/// Whether `code` is the code of `step` (a step far in the future, where the time overflows,
/// matches nothing).
fn matches_step(totp: &Totp, code: &str, step: u64) -> bool {
    step.checked_mul(STEP_SECONDS)
        .is_some_and(|time| totp.check(code, time) == Some(step))
}

/// RFC 3986 percent-encoding of everything but the unreserved characters.
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;

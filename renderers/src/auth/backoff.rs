//! The schedule of the per-user back-off: after [`BACKOFF_THRESHOLD`] failures in a row, each
//! failure blocks the next attempt for [`BACKOFF_BASE`] `· 2^(failures − threshold)`, capped at
//! [`BACKOFF_MAX`]. One schedule for the issuer's in-memory back-off of sign-ins and for the
//! second-factor failures a credentials entry records across replicas.

use jiff::SignedDuration;

/// Failures after which a user backs off.
pub const BACKOFF_THRESHOLD: u32 = 5;
/// The first back-off, after [`BACKOFF_THRESHOLD`] failures; it doubles with each further failure.
pub const BACKOFF_BASE: SignedDuration = SignedDuration::from_secs(1);
/// The longest back-off: a user is never locked out for longer than this after a failure.
pub const BACKOFF_MAX: SignedDuration = SignedDuration::from_mins(15);

/// The block after `failures` failures (none below the threshold).
pub fn backoff_after(failures: u32) -> Option<SignedDuration> {
    let over = failures.checked_sub(BACKOFF_THRESHOLD)?;
    let factor = 1_i64.checked_shl(over.min(32)).unwrap_or(i64::MAX);
    let secs = BACKOFF_BASE.as_secs().saturating_mul(factor);
    Some(SignedDuration::from_secs(secs).min(BACKOFF_MAX))
}

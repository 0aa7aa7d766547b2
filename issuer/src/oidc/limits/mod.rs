//! Per-replica, in-memory limits: the per-user login back-off ([`backoff`]), token buckets per
//! source and per refresh family ([`buckets`], with the [`reservation`] a request holds in its
//! source's bucket), and the single-use ledger of authorization codes ([`ledger`]). The bounded
//! tables forget their least recently used entries through a [`recency`] order.
//!
//! The per-source buckets count what an attacker must do (failed password attempts, bad or
//! replayed grants, garbage tokens, malformed requests), not valid grants: an office behind one
//! address signs in and refreshes as often as its people do. Valid refresh grants are bounded per
//! refresh family instead, which no one can multiply without signing in. A request that proves
//! something no attacker can forge — a refresh token or code whose MAC verifies, a device cookie
//! of the user signing in — is never refused by its source's bucket
//! ([`reservation::SourceToken::exempt`]), so garbage from a shared address cannot deny the
//! people behind it; its failures are still charged. Such a token is held to its family's bucket
//! instead, and a family found gone from the store is remembered ([`gone`]), so an old token
//! presented again is answered without reading the store.
//!
//! Everything here is a plain data structure driven by `now` (no clock, no I/O); the handlers
//! keep each one behind a `std::sync::Mutex` that is never held across an `.await`.
//!
//! # Caveats
//! State is per replica (the seed's stated limit): with two replicas an attacker gets twice the
//! attempts. Every map is bounded, so a flood of names or addresses costs memory only up to the
//! bound; beyond it the least recently used entries are forgotten first, in O(1) amortised time.

pub mod account_writes;
pub mod backoff;
pub mod buckets;
pub mod gone;
pub mod ledger;
pub mod recency;
pub mod reservation;

pub use account_writes::{AccountWrite, AccountWrites, modify_own_credentials};
pub use backoff::{
    Admission, AttemptOutcome, BACKOFF_BASE, BACKOFF_FORGET, BACKOFF_MAX, BACKOFF_THRESHOLD, UserBackoff,
    backoff_after, backoff_key, factor_backoff_key,
};
pub use buckets::{BucketPolicy, SourceKey, TokenBuckets};
pub use gone::GoneFamilies;
pub use ledger::{CodeClaim, CodeLedger};
pub use reservation::SourceToken;

/// How many users the back-off table tracks at most.
pub const BACKOFF_CAPACITY: usize = 65_536;
/// How many keys (source addresses, refresh families) a bucket table tracks at most.
pub const BUCKET_CAPACITY: usize = 65_536;
/// The default rotations written per refresh family, replica and minute past the burst
/// ([`BucketPolicy::FAMILY_WRITES`], `--family-writes-per-minute`).
pub const DEFAULT_FAMILY_WRITES_PER_MINUTE: u32 = 6;
/// How many authorization codes the ledger remembers at most.
pub const LEDGER_CAPACITY: usize = 100_000;

#[cfg(test)]
mod tests;

//! Where the issuer reads users and reads and writes their credentials entries.
//!
//! Two real implementations share this contract: Kubernetes ([`kube`]: `IchorUser` objects, and
//! each user's credentials entry in its own Secret `ichor-user-<name>` of `ichor-credentials` —
//! or, while an installation migrates from it, a key of the one legacy Secret
//! `ichor-user-credentials`, docs/credentials-sharding.md) and local files (a directory of
//! `IchorUser` YAML files and one credentials file, for `ichor dev`). Both keep one entry per user
//! in the same format, written as one value atomically, so everything above the store (reuse
//! detection, the grace window, family revocation, `notBefore`) is the same on each layout.
//!
//! # Guarantees
//! - Credentials writes are optimistic: [`UserStore::write_credentials`] succeeds only when the
//!   user's entry is still at the version the caller read, so two issuer processes (or replicas)
//!   never overwrite each other's rotation, while writes for different users never conflict.
//!   [`modify_credentials`] wraps the read–change–write loop with bounded, jittered retries.
//! - In one process, the changes of one user's credentials through [`modify_credentials`] take
//!   turns in arrival order (the store's [`UserQueue`]), so they do not conflict with each other:
//!   a user with many sessions refreshing at once waits for its turns instead of running out of
//!   retries. Only another process or replica writing the same entry makes a conflict, and only a
//!   full line ([`StoreError::Busy`]) or those retries running out answer a failure — having
//!   written nothing.
//! - A user read may be served from a cache at most [`USER_CACHE_TTL`] old, so a disable or a
//!   role change takes effect within that bound.
//!
//! # Errors
//! [`StoreError::Unavailable`] means the backend could not be reached: callers answer 503 and
//! retry later; nothing is assumed about the user. [`StoreError::Full`] means the write would
//! take the credentials past the store's size limit: it was refused whole, and no retry helps
//! until an administrator makes room, so callers answer it as a server error, not as 503.

pub mod kube;
pub mod local;

mod convert;
mod group_commit;
mod redact;
pub mod user_queue;

use std::{future::Future, time::Duration};

use async_trait::async_trait;
use ichor_renderers::auth::credentials::CredentialsEntry;

pub use user_queue::UserQueue;

/// The longest a cached user read may be (also how long a replica remembers the legacy
/// credentials Secret as absent; the controller's move back waits longer than that).
pub const USER_CACHE_TTL: Duration =
    Duration::from_secs(ichor_renderers::contract::ISSUER_USER_CACHE_SECONDS);

/// How many times [`modify_credentials`] retries after a conflict before giving up.
pub const MAX_CONFLICT_RETRIES: usize = 8;

/// The most [`modify_credentials`] waits before its retry number `n` is this times `2^(n-1)` (the
/// wait is uniformly random below it: 2 ms, 4 ms, … 256 ms before the eighth, about half a second
/// in all at worst), so writers that collided spread out instead of colliding again, and a writer
/// that keeps losing to another replica's run of writes outlasts that run. A linear step was too
/// short for an apiserver under load: its 72 ms in all were spent while another replica's queue
/// of a dozen rotations of the same user still held the Secret.
pub const CONFLICT_BACKOFF_STEP: Duration = Duration::from_millis(2);

/// A user as the issuer needs it (from the `IchorUser` object).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredUser {
    /// The object name: `sub`, and the Kubernetes user `ichor:<name>`.
    pub name: String,
    /// The roles (groups claim).
    pub roles: Vec<String>,
    /// A disabled user gets no token and no refresh.
    pub disabled: bool,
    /// Informational.
    pub display_name: Option<String>,
    /// Informational.
    pub email: Option<String>,
}

/// An opaque version of one user's credentials entry, compared by
/// [`UserStore::write_credentials`] (Kubernetes: the uid and `resourceVersion` of the user's own
/// Secret; in the legacy Secret, the entry's value as read and the migration phase, or the
/// Secret's `resourceVersion` when the user has none; local: the digest of the entry).
/// Versioning entries one by one means writes for different users never conflict.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Version(pub String);

/// Why a store call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The backend is unreachable or failed; try again later.
    #[error("the user store is unavailable: {0}")]
    Unavailable(String),
    /// The credentials changed since they were read: read again and retry.
    #[error("the credentials of user {0:?} changed concurrently; read them again")]
    Conflict(String),
    /// Too many changes of this user's credentials are waiting in this process; nothing was
    /// read or written.
    #[error("too many changes of the credentials of user {0:?} are waiting; try again in a second")]
    Busy(String),
    /// A stored credentials entry cannot be parsed (never includes the entry's content).
    #[error("the stored credentials of user {user:?} are unreadable: {reason}")]
    Corrupt {
        /// The user whose entry is bad.
        user: String,
        /// Why (no secret material).
        reason: String,
    },
    /// The store holds no credentials object at all (Kubernetes: the namespace of the per-user
    /// Secrets is missing, or a legacy write found the legacy Secret gone).
    #[error("the credentials store does not exist: {0}")]
    Missing(String),
    /// The write would take the credentials past the store's size limit (Kubernetes: a
    /// Secret's 1 MiB of data, which the legacy Secret can reach); nothing was written. Writes that shrink an entry (ending
    /// sessions, removing users) still succeed and make room.
    #[error("the credentials store is full: {0}")]
    Full(String),
}

/// What to do about a full credentials store, for its [`StoreError::Full`] messages and logs.
pub const FULL_REMEDY: &str = "end unused sessions (`RevokeSessions`) or remove users who no longer \
    sign in to make room; see docs/credentials-sharding.md";

/// The issuer's view of users and credentials.
#[async_trait]
pub trait UserStore: Send + Sync + 'static {
    /// The user, or `None` when no such user exists (possibly cached, at most [`USER_CACHE_TTL`]).
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError>;

    /// Every user, sorted by name.
    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError>;

    /// The user's credentials entry (if any) and the version to write against. Never cached.
    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError>;

    /// Replace (`Some`) or remove (`None`) the user's entry, only if that entry is still at
    /// `expected`; returns the entry's new version. Touches no other user's entry.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the entry changed since it was read.
    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError>;

    /// Forget any cached read of this user (after this replica wrote something about it).
    fn invalidate(&self, _name: &str) {}

    /// The lines in which one user's changes through [`modify_credentials`] take turns, if this
    /// store has them (without, concurrent changes of one user rely on the retries alone).
    fn user_queue(&self) -> Option<&UserQueue> {
        None
    }

    /// Registers the store's own metrics (the Kubernetes store: the legacy credentials Secret's size)
    /// into the registry the issuer exposes.
    fn register_metrics(&self, _registry: &mut prometheus_client::registry::Registry) {}
}

/// What a [`modify_credentials`] step decided.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "returned once per step and consumed at once, never stored: boxing the entry would cost an allocation per write for nothing"
)]
pub enum Change<T> {
    /// Write this entry, then return the value.
    Put(CredentialsEntry, T),
    /// Remove the entry, then return the value.
    Remove(T),
    /// Write nothing; return the value.
    Keep(T),
}

/// Wait for the user's turn in the store's [`UserQueue`] (when it has one), then read the
/// user's entry, let `f` decide, write with the read version, and retry from a fresh read on a
/// conflict (at most [`MAX_CONFLICT_RETRIES`] times, each after a random pause below
/// [`CONFLICT_BACKOFF_STEP`]` × 2^(attempt-1)`). `f` must be pure: it may run several times.
///
/// # Errors
/// The store's errors, `f`'s errors (converted), [`StoreError::Busy`] when the user's line is
/// full, or [`StoreError::Conflict`] after the retries; after these two nothing was written.
pub async fn modify_credentials<S, T, E, F>(store: &S, name: &str, mut f: F) -> Result<T, E>
where
    S: UserStore + ?Sized,
    E: From<StoreError>,
    F: FnMut(Option<&CredentialsEntry>) -> Result<Change<T>, E>,
{
    let _turn = match store.user_queue() {
        Some(queue) => queue.enter(name).await?,
        None => None,
    };
    for attempt in 0..=MAX_CONFLICT_RETRIES {
        if attempt > 0 {
            sleep(conflict_backoff(attempt)).await;
        }
        let (current, version) = store.read_credentials(name).await?;
        let (write, value) = match f(current.as_ref())? {
            Change::Keep(v) => return Ok(v),
            Change::Put(entry, v) => (Some(entry), v),
            Change::Remove(v) => (None, v),
        };
        match store.write_credentials(name, &version, write.as_ref()).await {
            Ok(_) => return Ok(value),
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Conflict(name.to_owned()).into())
}

/// A random pause below [`conflict_backoff_bound`] (none when no randomness is available: the
/// retry still happens, only without spreading).
fn conflict_backoff(attempt: usize) -> Duration {
    let mut bytes = [0u8; 4];
    if getrandom::fill(&mut bytes).is_err() {
        return Duration::ZERO;
    }
    let micros = u64::try_from(conflict_backoff_bound(attempt).as_micros()).unwrap_or(u64::MAX);
    if micros == 0 {
        return Duration::ZERO;
    }
    Duration::from_micros(u64::from(u32::from_le_bytes(bytes)) % micros)
}

/// The bound of the pause before retry number `attempt`: [`CONFLICT_BACKOFF_STEP`] doubled for
/// each retry after the first (none before the first attempt), never past the eighth's.
fn conflict_backoff_bound(attempt: usize) -> Duration {
    let Some(doublings) = attempt.checked_sub(1) else {
        return Duration::ZERO;
    };
    let doublings = u32::try_from(doublings.min(MAX_CONFLICT_RETRIES - 1)).unwrap_or(u32::MAX);
    CONFLICT_BACKOFF_STEP.saturating_mul(1u32.checked_shl(doublings).unwrap_or(u32::MAX))
}

/// A future that resolves after `d` (kept here so store implementations share one clock).
pub fn sleep(d: Duration) -> impl Future<Output = ()> {
    tokio::time::sleep(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_pauses_double_from_the_step_and_stay_under_their_bound() {
        let bounds: Vec<u128> = (0..=MAX_CONFLICT_RETRIES + 2)
            .map(|a| conflict_backoff_bound(a).as_millis())
            .collect();
        assert_eq!(bounds, [0, 2, 4, 8, 16, 32, 64, 128, 256, 256, 256]);
        let all: Duration = (1..=MAX_CONFLICT_RETRIES).map(conflict_backoff_bound).sum();
        assert!(all < Duration::from_millis(600), "{all:?}");
        for attempt in 0..=MAX_CONFLICT_RETRIES {
            for _ in 0..50 {
                let pause = conflict_backoff(attempt);
                assert!(
                    pause < conflict_backoff_bound(attempt).max(Duration::from_nanos(1)),
                    "{attempt}: {pause:?}"
                );
            }
        }
    }
}

//! [`PasswordLimits`]: what the `UserService`'s password work shares with the sign-in form of
//! the same process — the one argon2id gate ([`HashGate`]), the per-user back-off and the
//! per-source failure buckets — so that a password checked through the API is a sign-in attempt
//! like any other: refused while its user backs off or its source is out of failures, counted
//! when wrong, and computed in the gate that bounds the process's argon2id. The budget of
//! changes users make to their own credentials is shared the same way, so a change made through
//! the API and one made by a sign-in's second step spend one budget.

use std::{
    net::{IpAddr, Ipv4Addr},
    sync::{Arc, Mutex},
};

use ichor_renderers::auth::Password;
use ichor_server::cidr::TrustedProxies;
use jiff::Timestamp;

use super::{
    HASH_PERMITS,
    limits::{
        AccountWrite, AccountWrites, Admission, AttemptOutcome, BucketPolicy, SourceKey, SourceToken,
        TokenBuckets, UserBackoff,
    },
    lock,
    passwords::{self, ApiCaller, CheckError, DEFAULT_MAX_WAITING, HashGate},
};

/// The gate, the back-off and the source buckets the password work of a process shares. Cheap to
/// clone: the clones share them.
#[derive(Clone)]
pub struct PasswordLimits {
    gate: HashGate,
    backoff: Arc<Mutex<UserBackoff>>,
    sources: Arc<Mutex<TokenBuckets<SourceKey>>>,
    trusted_proxies: TrustedProxies,
    writes: AccountWrites,
}

impl std::fmt::Debug for PasswordLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordLimits")
            .field("gate", &self.gate)
            .finish_non_exhaustive()
    }
}

/// Why a password could not be checked or hashed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordLimitError {
    /// The user backs off after wrong passwords, or the source has spent its failures.
    #[error("too many wrong passwords for this account or from this address: try again in {retry_after} s")]
    Limited {
        /// Seconds to wait.
        retry_after: u64,
    },
    /// The user has changed its own credentials too often in a short time
    /// ([`BucketPolicy::ACCOUNT_WRITES`]).
    #[error(
        "your password or second factors were changed too often in a short time: try again in {retry_after} s"
    )]
    Changes {
        /// Seconds to wait.
        retry_after: u64,
    },
    /// The argon2id gate is full, or this user holds its share of it.
    #[error("the password checks of this server are busy: try again in {retry_after} s")]
    Busy {
        /// Seconds to wait.
        retry_after: u64,
    },
    /// The computation could not run (no random bytes, the task failed).
    #[error("the password could not be checked: {0}")]
    Internal(String),
}

impl From<CheckError> for PasswordLimitError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::Busy { retry_after } => PasswordLimitError::Busy { retry_after },
            CheckError::Internal(m) => PasswordLimitError::Internal(m),
        }
    }
}

/// Releases a back-off reservation when dropped: an attempt that ends without an answer (the
/// request dropped, the gate full) counts nothing.
struct Reservation<'a> {
    backoff: &'a Mutex<UserBackoff>,
    key: &'a str,
    outcome: AttemptOutcome,
    at: Timestamp,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        lock(self.backoff).finish(self.key, self.outcome, self.at);
    }
}

impl PasswordLimits {
    /// Limits of their own, for a service with no sign-in form in its process: a gate of
    /// [`HASH_PERMITS`] and [`DEFAULT_MAX_WAITING`], an empty back-off, empty buckets of
    /// [`BucketPolicy::LOGIN_FAILURES`], no trusted proxy, a budget of
    /// [`BucketPolicy::ACCOUNT_WRITES`]. `ichor-issuer` replaces them with its issuer's
    /// ([`super::Issuer::password_limits`]).
    pub fn standalone() -> Self {
        PasswordLimits {
            gate: HashGate::new(HASH_PERMITS, DEFAULT_MAX_WAITING),
            backoff: Arc::new(Mutex::new(UserBackoff::new())),
            sources: Arc::new(Mutex::new(TokenBuckets::new(BucketPolicy::LOGIN_FAILURES))),
            trusted_proxies: TrustedProxies::none(),
            writes: AccountWrites::new(BucketPolicy::ACCOUNT_WRITES),
        }
    }

    /// The limits of an issuer: its gate, back-off, failure buckets, trusted proxies and budget
    /// of credential changes.
    pub(crate) fn of(
        gate: HashGate,
        backoff: Arc<Mutex<UserBackoff>>,
        sources: Arc<Mutex<TokenBuckets<SourceKey>>>,
        trusted_proxies: TrustedProxies,
        writes: AccountWrites,
    ) -> Self {
        PasswordLimits {
            gate,
            backoff,
            sources,
            trusted_proxies,
            writes,
        }
    }

    /// Takes one change of `user`'s own credentials from its budget at `now`
    /// ([`BucketPolicy::ACCOUNT_WRITES`]): taken before the password is checked, so a spent
    /// budget costs no argon2id, and given back unless the change is marked written.
    ///
    /// # Errors
    /// [`PasswordLimitError::Changes`] when `user` has spent its budget.
    pub fn account_write(&self, user: &str, now: Timestamp) -> Result<AccountWrite, PasswordLimitError> {
        self.writes
            .reserve(user, now)
            .map_err(|wait| PasswordLimitError::Changes {
                retry_after: u64::try_from(wait.as_secs()).unwrap_or(1).max(1),
            })
    }

    /// The argon2id gate.
    pub fn gate(&self) -> &HashGate {
        &self.gate
    }

    /// The source address of a request from `peer` carrying `forwarded_for`
    /// (`X-Forwarded-For` values), as the sign-in form reads it: the header is believed only
    /// from a trusted proxy. A request with no peer counts as `0.0.0.0`.
    pub fn source_of(&self, peer: Option<IpAddr>, forwarded_for: &[&str]) -> IpAddr {
        ichor_server::cidr::source_address(peer, forwarded_for, &self.trusted_proxies)
            .unwrap_or(Ipv4Addr::UNSPECIFIED.into())
    }

    /// Hashes `password` for a request of `caller` through the gate.
    ///
    /// # Errors
    /// [`PasswordLimitError::Busy`] when the gate is full or `caller` holds its share,
    /// [`PasswordLimitError::Internal`] when the computation failed.
    pub async fn hash(
        &self,
        caller: ApiCaller<'_>,
        password: Password,
    ) -> Result<String, PasswordLimitError> {
        Ok(passwords::hash_new(&self.gate, caller, password).await?)
    }

    /// A password change of `user` from `source`: `old` is checked against `phc` as a sign-in
    /// attempt without a device cookie (refused while `user`'s name backs off or `source` has
    /// spent its failures; a wrong one, or a probe of the blocked name, is a failure of both; a
    /// right one ends the name's failures), then `new` is hashed in the same computation. `Ok(None)` when `old` is wrong. `now` reads the clock, before and after the
    /// check.
    ///
    /// # Errors
    /// [`PasswordLimitError::Limited`] before any check, [`PasswordLimitError::Busy`] when the
    /// gate refuses (not counted), [`PasswordLimitError::Internal`].
    pub async fn change(
        &self,
        source: IpAddr,
        user: &str,
        old: Password,
        phc: String,
        new: Password,
        now: &(dyn Fn() -> Timestamp + Send + Sync),
    ) -> Result<Option<String>, PasswordLimitError> {
        self.attempt(
            source,
            user,
            now,
            passwords::verify_then_hash(&self.gate, user, old, phc, new),
        )
        .await
    }

    /// A re-ask of `user`'s current password from `source` before a change of its second
    /// factors: `password` is checked against `phc` as a sign-in attempt, exactly as the old
    /// password of [`PasswordLimits::change`] (the same back-off, failures and gate). True when
    /// it is right.
    ///
    /// # Errors
    /// As [`PasswordLimits::change`].
    pub async fn reauthenticate(
        &self,
        source: IpAddr,
        user: &str,
        password: Password,
        phc: String,
        now: &(dyn Fn() -> Timestamp + Send + Sync),
    ) -> Result<bool, PasswordLimitError> {
        let checked = passwords::verify_current(&self.gate, user, password, phc);
        let verified = self
            .attempt(source, user, now, async move { Ok(checked.await?.then_some(())) })
            .await?;
        Ok(verified.is_some())
    }

    /// One password attempt of `user` from `source`: refused while the name backs off or the
    /// source has spent its failures, then `check` (`None`: the password was wrong), counted as
    /// a failure or a success of both.
    async fn attempt<T>(
        &self,
        source: IpAddr,
        user: &str,
        now: &(dyn Fn() -> Timestamp + Send + Sync),
        check: impl std::future::Future<Output = Result<Option<T>, CheckError>>,
    ) -> Result<Option<T>, PasswordLimitError> {
        let at = now();
        let limited = |wait: jiff::SignedDuration| PasswordLimitError::Limited {
            retry_after: u64::try_from(wait.as_secs()).unwrap_or(1).max(1),
        };
        let token = SourceToken::reserve(&self.sources, source, at).map_err(limited)?;
        if let Admission::Blocked { retry_after } = lock(&self.backoff).admit(user, at) {
            // A probe of a blocked name costs its source a token, as at the sign-in form.
            token.charge();
            return Err(limited(retry_after));
        }
        let mut reservation = Reservation {
            backoff: &self.backoff,
            key: user,
            outcome: AttemptOutcome::Abandoned,
            at,
        };
        let checked = check.await?;
        reservation.at = now();
        match checked {
            Some(value) => {
                reservation.outcome = AttemptOutcome::Success;
                Ok(Some(value))
            }
            None => {
                token.charge();
                reservation.outcome = AttemptOutcome::Failure;
                Ok(None)
            }
        }
    }
}

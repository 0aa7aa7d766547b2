//! [`AccountWrites`]: the budget of changes each user makes to its own credentials
//! ([`BucketPolicy::ACCOUNT_WRITES`]), shared by the sign-in's second step and the
//! `UserService`'s self-service calls of one process; the [`AccountWrite`] a change holds; and
//! [`modify_own_credentials`], the conditional write that spends it.
//!
//! A change is given back only when nothing can have been written: dropped before its write
//! began (a wrong password, a refusal, a cancelled request still checking the password), or
//! when the write decided to keep the entry as it was. Once the write began, a cancelled request
//! or a store error keeps it spent: the put may have reached the store though its answer did not.

use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};

use super::{BucketPolicy, TokenBuckets};
use crate::{
    oidc::lock,
    store::{Change, StoreError, UserStore, modify_credentials},
};
use ichor_renderers::auth::credentials::CredentialsEntry;

/// Per-user budgets of credential changes; `off` counts nothing (benchmarks). Cheap to clone:
/// the clones share the budgets.
#[derive(Debug, Clone)]
pub struct AccountWrites(Option<Arc<Mutex<TokenBuckets<String>>>>);

impl AccountWrites {
    /// Budgets of `policy` (normally [`BucketPolicy::ACCOUNT_WRITES`]), at most
    /// [`super::BUCKET_CAPACITY`] users tracked.
    pub fn new(policy: BucketPolicy) -> Self {
        AccountWrites(Some(Arc::new(Mutex::new(TokenBuckets::new(policy)))))
    }

    /// No budget: every change is let through.
    pub fn off() -> Self {
        AccountWrites(None)
    }

    /// Takes one change from `user`'s budget at `now`, or says how long until one is
    /// available. Given back if the returned [`AccountWrite`] is dropped before its write
    /// began.
    ///
    /// # Errors
    /// The wait, at least a second, when `user` has spent its budget.
    pub fn reserve(&self, user: &str, now: Timestamp) -> Result<AccountWrite, SignedDuration> {
        if let Some(buckets) = &self.0 {
            lock(buckets).reserve(user.to_owned(), now)?;
        }
        Ok(AccountWrite {
            budget: self.0.clone(),
            user: user.to_owned(),
            at: now,
            refund_on_drop: true,
        })
    }

    /// The changes `user` may make at `now` without waiting (tests and diagnostics); `None`
    /// when the budget is off.
    pub fn available(&self, user: &str, now: Timestamp) -> Option<f64> {
        self.0
            .as_ref()
            .map(|buckets| lock(buckets).tokens(&user.to_owned(), now))
    }
}

/// One change taken from a user's budget.
#[derive(Debug)]
#[must_use = "dropping it before the write gives the change back at once"]
pub struct AccountWrite {
    budget: Option<Arc<Mutex<TokenBuckets<String>>>>,
    user: String,
    at: Timestamp,
    refund_on_drop: bool,
}

impl AccountWrite {
    /// The write begins: from here a drop keeps the change spent, and only
    /// [`AccountWrite::give_back`] returns it.
    pub fn writing(mut self) -> Self {
        self.refund_on_drop = false;
        self
    }

    /// Nothing was written: the change goes back to the budget.
    pub fn give_back(mut self) {
        self.refund();
        self.refund_on_drop = false;
    }

    fn refund(&self) {
        if let Some(buckets) = &self.budget {
            lock(buckets).refund(&self.user, self.at);
        }
    }
}

impl Drop for AccountWrite {
    fn drop(&mut self) {
        if self.refund_on_drop {
            self.refund();
        }
    }
}

/// [`modify_credentials`] of `name`'s own credentials holding `write` (`None`: nothing to
/// spend): the change stays spent when the last decision of `f` was to write, whatever the
/// store answered (a put whose answer was lost may have been taken), and goes back when it was
/// to keep the entry or to refuse.
///
/// # Errors
/// As [`modify_credentials`].
pub async fn modify_own_credentials<S, T, E, F>(
    store: &S,
    name: &str,
    write: Option<AccountWrite>,
    mut f: F,
) -> Result<T, E>
where
    S: UserStore + ?Sized,
    E: From<StoreError>,
    F: FnMut(Option<&CredentialsEntry>) -> Result<Change<T>, E>,
{
    let write = write.map(AccountWrite::writing);
    let mut writes = false;
    let result = modify_credentials(store, name, |current| {
        writes = false;
        let change = f(current)?;
        writes = !matches!(change, Change::Keep(_));
        Ok(change)
    })
    .await;
    if let (Some(write), false) = (write, writes) {
        write.give_back();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("timestamp")
    }

    #[test]
    fn a_change_is_given_back_before_its_write_and_kept_once_the_write_began() {
        let budget = AccountWrites::new(BucketPolicy::ACCOUNT_WRITES);
        let burst = BucketPolicy::ACCOUNT_WRITES.burst;
        // Dropped before the write (a wrong password, a cancelled check): given back.
        drop(budget.reserve("alice", at(0)).expect("within the burst"));
        assert_eq!(budget.available("alice", at(0)), Some(burst));
        // Dropped once the write began (a cancelled request, a lost answer): kept.
        drop(
            budget
                .reserve("alice", at(0))
                .expect("within the burst")
                .writing(),
        );
        assert_eq!(budget.available("alice", at(0)), Some(burst - 1.0));
        // Given back explicitly after the write decided nothing.
        budget
            .reserve("alice", at(0))
            .expect("within the burst")
            .writing()
            .give_back();
        assert_eq!(budget.available("alice", at(0)), Some(burst - 1.0));
    }

    #[test]
    fn the_burst_then_one_a_period_per_user() {
        let budget = AccountWrites::new(BucketPolicy::ACCOUNT_WRITES);
        for _ in 0..20 {
            drop(
                budget
                    .reserve("alice", at(0))
                    .expect("within the burst")
                    .writing(),
            );
        }
        let wait = budget.reserve("alice", at(0)).expect_err("the burst is spent");
        assert_eq!(wait, SignedDuration::from_secs(30));
        drop(budget.reserve("bob", at(0)).expect("bob's own budget").writing());
        drop(budget.reserve("alice", at(30)).expect("refilled").writing());
        assert!(budget.reserve("alice", at(30)).is_err());
    }

    #[test]
    fn off_lets_everything_through() {
        let budget = AccountWrites::off();
        for _ in 0..1_000 {
            drop(budget.reserve("alice", at(0)).expect("no budget").writing());
        }
        assert_eq!(budget.available("alice", at(0)), None);
    }
}

//! [`AccountWrites`]: the budget of changes each user makes to its own credentials
//! ([`BucketPolicy::ACCOUNT_WRITES`]), shared by the sign-in's second step and the
//! `UserService`'s self-service calls of one process, and the [`AccountWrite`] a change holds
//! until it is written.

use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};

use super::{BucketPolicy, TokenBuckets};
use crate::oidc::lock;

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
    /// available. The change is given back when the returned [`AccountWrite`] is dropped
    /// without [`AccountWrite::written`].
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
            written: false,
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

/// One change taken from a user's budget: given back when dropped, unless it was written.
#[derive(Debug)]
#[must_use = "dropping it gives the change back at once"]
pub struct AccountWrite {
    budget: Option<Arc<Mutex<TokenBuckets<String>>>>,
    user: String,
    at: Timestamp,
    written: bool,
}

impl AccountWrite {
    /// The change was written: it stays spent.
    pub fn written(mut self) {
        self.written = true;
    }
}

impl Drop for AccountWrite {
    fn drop(&mut self) {
        if let (false, Some(buckets)) = (self.written, &self.budget) {
            lock(buckets).refund(&self.user, self.at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("timestamp")
    }

    #[test]
    fn a_written_change_stays_spent_and_a_dropped_one_is_given_back() {
        let budget = AccountWrites::new(BucketPolicy::ACCOUNT_WRITES);
        for _ in 0..20 {
            budget
                .reserve("alice", at(0))
                .expect("within the burst")
                .written();
        }
        let wait = budget.reserve("alice", at(0)).expect_err("the burst is spent");
        assert_eq!(wait, SignedDuration::from_secs(30));
        // Another user has a budget of its own.
        budget.reserve("bob", at(0)).expect("bob's own budget").written();
        // One refilled after 30 s; dropped unwritten, it is there again.
        drop(budget.reserve("alice", at(30)).expect("refilled"));
        budget.reserve("alice", at(30)).expect("given back").written();
        assert!(budget.reserve("alice", at(30)).is_err());
    }

    #[test]
    fn off_lets_everything_through() {
        let budget = AccountWrites::off();
        for _ in 0..1_000 {
            budget.reserve("alice", at(0)).expect("no budget").written();
        }
        assert_eq!(budget.available("alice", at(0)), None);
    }
}

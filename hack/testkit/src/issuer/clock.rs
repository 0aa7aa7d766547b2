//! A clock the test sets and moves, for the issuer's OpenID endpoints and its `UserService`
//! (each has its own `Clock` trait; this one clock serves both).

use std::sync::{Mutex, MutexGuard, PoisonError};

use jiff::{SignedDuration, Timestamp};

/// A clock that stands still until the test moves it.
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    /// A clock at `at`.
    pub fn new(at: Timestamp) -> Self {
        ManualClock(Mutex::new(at))
    }

    fn time(&self) -> MutexGuard<'_, Timestamp> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the clock by `d` (forwards or backwards).
    pub fn advance(&self, d: SignedDuration) {
        let mut t = self.time();
        *t = t.checked_add(d).expect("advance");
    }

    /// Sets the clock to `at`.
    pub fn set(&self, at: Timestamp) {
        *self.time() = at;
    }

    /// The time it shows.
    pub fn now_ts(&self) -> Timestamp {
        *self.time()
    }

    /// The time it shows, Unix seconds.
    pub fn now_secs(&self) -> i64 {
        self.now_ts().as_second()
    }
}

impl ichor_issuer::oidc::Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.now_ts()
    }
}

impl ichor_issuer::api::Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.now_ts()
    }
}

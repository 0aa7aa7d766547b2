//! [`UserBackoff`]: the per-user exponential back-off of sign-ins, with a budget of its own for
//! each device that signed in before ([`backoff_key`]).

use jiff::{SignedDuration, Timestamp};

use super::{BACKOFF_CAPACITY, recency::RecencyMap};

pub use ichor_renderers::auth::backoff::{BACKOFF_BASE, BACKOFF_MAX, BACKOFF_THRESHOLD, backoff_after};
/// Failures are forgotten after this long without an attempt.
pub const BACKOFF_FORGET: SignedDuration = SignedDuration::from_hours(1);
/// What separates a user name from a device id in a device's back-off key (no user name holds it).
const DEVICE_SEPARATOR: char = '\u{0}';

/// The back-off key of the second sign-in step of `user` (on the device `device`, as
/// [`backoff_key`]): apart from the password's, so a right password, which clears the
/// password's failures, does not clear the code's.
pub fn factor_backoff_key(user: &str, device: Option<&str>) -> String {
    format!(
        "{}{DEVICE_SEPARATOR}{DEVICE_SEPARATOR}factor",
        backoff_key(user, device)
    )
}

/// The back-off key of a sign-in as `user`: the name itself, or, when the sign-in carries a valid
/// device cookie of that very user, the name and the cookie's device id.
///
/// A device that signed in before therefore has a budget of its own: failures of sign-ins
/// without its cookie (an attacker who only knows the name) do not block it, and its own wrong
/// passwords back it off like any other. Only a correct password sets a cookie, so a budget per
/// device is no more guesses for someone without one.
pub fn backoff_key(user: &str, device: Option<&str>) -> String {
    match device {
        Some(dev) => format!("{user}{DEVICE_SEPARATOR}{dev}"),
        None => user.to_owned(),
    }
}

/// Names with an attempt in flight passed over, at most, when making room for a new one.
const MAX_SKIPPED: usize = 64;

#[derive(Debug, Clone)]
struct UserState {
    failures: u32,
    in_flight: u32,
    blocked_until: Option<Timestamp>,
    last_seen: Timestamp,
}

/// Whether a login attempt may go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead; the attempt is reserved and must be finished with [`UserBackoff::finish`].
    Admitted,
    /// Backing off: try again after this long.
    Blocked {
        /// How long to wait.
        retry_after: SignedDuration,
    },
}

/// How a reserved login attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The password was right: the failures are forgotten.
    Success,
    /// The password was wrong (or the user unknown): one more failure.
    Failure,
    /// The attempt ended without an answer (client gone, store down): nothing is counted.
    Abandoned,
}

/// The per-user exponential back-off: after [`BACKOFF_THRESHOLD`] failures each failure blocks
/// the name for `BACKOFF_BASE · 2^(failures − threshold)`, capped at [`BACKOFF_MAX`].
///
/// Attempts are *reserved* before the password is verified, and a reservation counts against the
/// threshold, so concurrent wrong attempts cannot slip past it; once the threshold is reached
/// only one attempt at a time is admitted after each block.
///
/// The table holds at most its capacity of names ([`BACKOFF_CAPACITY`]); past it the least recently seen name
/// that has no attempt in flight is forgotten first, in O(1) amortised time.
#[derive(Debug)]
pub struct UserBackoff {
    users: RecencyMap<String, UserState>,
    capacity: usize,
}

impl Default for UserBackoff {
    fn default() -> Self {
        Self::with_capacity(BACKOFF_CAPACITY)
    }
}

impl UserBackoff {
    /// An empty table of [`BACKOFF_CAPACITY`] names.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table of `capacity` names.
    pub fn with_capacity(capacity: usize) -> Self {
        UserBackoff {
            users: RecencyMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// Reserves an attempt for `user` at `now`, or says how long to wait.
    pub fn admit(&mut self, user: &str, now: Timestamp) -> Admission {
        let key = user.to_owned();
        if !self.users.touch(&key) {
            self.make_room();
            self.users.insert(
                key.clone(),
                UserState {
                    failures: 0,
                    in_flight: 0,
                    blocked_until: None,
                    last_seen: now,
                },
            );
        }
        let Some(state) = self.users.get_mut(&key) else {
            return Admission::Blocked {
                retry_after: BACKOFF_BASE,
            };
        };
        if state.blocked_until.is_none_or(|u| u <= now)
            && state.in_flight == 0
            && now.duration_since(state.last_seen) >= BACKOFF_FORGET
        {
            state.failures = 0;
        }
        state.last_seen = now;
        if let Some(until) = state.blocked_until.filter(|u| now < *u) {
            return Admission::Blocked {
                retry_after: until.duration_since(now),
            };
        }
        let over = state.failures >= BACKOFF_THRESHOLD;
        let busy = if over {
            state.in_flight > 0
        } else {
            state.failures + state.in_flight >= BACKOFF_THRESHOLD
        };
        if busy {
            return Admission::Blocked {
                retry_after: BACKOFF_BASE,
            };
        }
        state.in_flight += 1;
        Admission::Admitted
    }

    /// Ends a reserved attempt.
    pub fn finish(&mut self, user: &str, outcome: AttemptOutcome, now: Timestamp) {
        let key = user.to_owned();
        self.users.touch(&key);
        let Some(state) = self.users.get_mut(&key) else {
            return;
        };
        state.in_flight = state.in_flight.saturating_sub(1);
        state.last_seen = now;
        match outcome {
            AttemptOutcome::Success => {
                state.failures = 0;
                state.blocked_until = None;
            }
            AttemptOutcome::Failure => {
                state.failures = state.failures.saturating_add(1);
                state.blocked_until =
                    backoff_after(state.failures).map(|d| now.saturating_add(d).unwrap_or(now));
            }
            AttemptOutcome::Abandoned => {}
        }
        if state.failures == 0 && state.in_flight == 0 {
            self.users.remove(&key);
        }
    }

    /// The number of tracked names (for tests).
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether no name is tracked.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Forgets the least recently seen names until there is room for one more. A name with an
    /// attempt in flight is moved to the back instead (its reservation must find it again);
    /// after [`MAX_SKIPPED`] of those in a row the table grows past its bound rather than scan,
    /// which only as many concurrent attempts as the server admits can cause.
    fn make_room(&mut self) {
        let mut skipped = 0;
        while self.users.len() >= self.capacity && skipped < MAX_SKIPPED {
            let Some((name, state)) = self.users.oldest() else {
                return;
            };
            if state.in_flight > 0 {
                let name = name.clone();
                self.users.touch(&name);
                skipped += 1;
            } else {
                self.users.pop_oldest();
            }
        }
    }
}

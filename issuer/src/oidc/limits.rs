//! Per-replica, in-memory limits: the per-user login back-off, the per-source token buckets,
//! the single-use ledger of authorization codes, and the source address of a request.
//!
//! Everything here is a plain data structure driven by `now` (no clock, no I/O); the handlers
//! keep each one behind a `std::sync::Mutex` that is never held across an `.await`.
//!
//! # Caveats
//! State is per replica (the seed's stated limit): with two replicas an attacker gets twice the
//! attempts. Every map is bounded, so a flood of names or addresses costs memory only up to the
//! bound; beyond it the oldest idle entries are forgotten first.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv6Addr},
};

use jiff::{SignedDuration, Timestamp};

/// Failures after which a user backs off.
pub const BACKOFF_THRESHOLD: u32 = 5;
/// The first back-off, after [`BACKOFF_THRESHOLD`] failures; it doubles with each further failure.
pub const BACKOFF_BASE: SignedDuration = SignedDuration::from_secs(1);
/// The longest back-off: a user is never locked out for longer than this after a failure.
pub const BACKOFF_MAX: SignedDuration = SignedDuration::from_mins(15);
/// Failures are forgotten after this long without an attempt.
pub const BACKOFF_FORGET: SignedDuration = SignedDuration::from_hours(1);
/// How many users the back-off table tracks at most.
pub const BACKOFF_CAPACITY: usize = 65_536;
/// How many source addresses a bucket table tracks at most.
pub const BUCKET_CAPACITY: usize = 65_536;
/// How many authorization codes the ledger remembers at most.
pub const LEDGER_CAPACITY: usize = 100_000;

// === impl UserBackoff ===

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
#[derive(Debug, Default)]
pub struct UserBackoff {
    users: HashMap<String, UserState>,
}

/// The block after `failures` failures (none below the threshold).
pub fn backoff_after(failures: u32) -> Option<SignedDuration> {
    let over = failures.checked_sub(BACKOFF_THRESHOLD)?;
    let factor = 1_i64.checked_shl(over.min(32)).unwrap_or(i64::MAX);
    let secs = BACKOFF_BASE.as_secs().saturating_mul(factor);
    Some(SignedDuration::from_secs(secs).min(BACKOFF_MAX))
}

impl UserBackoff {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserves an attempt for `user` at `now`, or says how long to wait.
    pub fn admit(&mut self, user: &str, now: Timestamp) -> Admission {
        self.make_room(now);
        let state = self.users.entry(user.to_owned()).or_insert(UserState {
            failures: 0,
            in_flight: 0,
            blocked_until: None,
            last_seen: now,
        });
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
        let Some(state) = self.users.get_mut(user) else {
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
            self.users.remove(user);
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

    fn make_room(&mut self, now: Timestamp) {
        if self.users.len() < BACKOFF_CAPACITY {
            return;
        }
        self.users.retain(|_, s| {
            s.in_flight > 0
                || s.blocked_until.is_some_and(|u| now < u)
                || now.duration_since(s.last_seen) < BACKOFF_FORGET
        });
        while self.users.len() >= BACKOFF_CAPACITY {
            let oldest = self
                .users
                .iter()
                .filter(|(_, s)| s.in_flight == 0)
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => self.users.remove(&k),
                None => break,
            };
        }
    }
}

// === impl TokenBuckets ===

/// The size and refill rate of a token bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketPolicy {
    /// Requests allowed in a burst.
    pub burst: f64,
    /// Tokens added per second.
    pub per_second: f64,
}

impl BucketPolicy {
    /// Password attempts per source: 10 at once, then one every 6 seconds.
    pub const LOGIN: BucketPolicy = BucketPolicy {
        burst: 10.0,
        per_second: 1.0 / 6.0,
    };
    /// Token and revocation requests per source: 60 at once, then one per second.
    pub const TOKEN: BucketPolicy = BucketPolicy {
        burst: 60.0,
        per_second: 1.0,
    };
}

/// Token buckets per source address (IPv6 grouped by /64, so one host cannot rotate through
/// its prefix).
#[derive(Debug)]
pub struct TokenBuckets {
    policy: BucketPolicy,
    buckets: HashMap<IpAddr, (f64, Timestamp)>,
}

fn bucket_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl TokenBuckets {
    /// Empty buckets with `policy`.
    pub fn new(policy: BucketPolicy) -> Self {
        TokenBuckets {
            policy,
            buckets: HashMap::new(),
        }
    }

    fn level(&self, tokens: f64, last: Timestamp, now: Timestamp) -> f64 {
        let elapsed = now.duration_since(last).as_secs_f64().max(0.0);
        (tokens + elapsed * self.policy.per_second).min(self.policy.burst)
    }

    /// Takes one token for `source`, or says how long until one is available.
    pub fn take(&mut self, source: IpAddr, now: Timestamp) -> Result<(), SignedDuration> {
        let key = bucket_key(source);
        if self.buckets.len() >= BUCKET_CAPACITY && !self.buckets.contains_key(&key) {
            let burst = self.policy.burst;
            let per_second = self.policy.per_second;
            self.buckets.retain(|_, (t, last)| {
                let elapsed = now.duration_since(*last).as_secs_f64().max(0.0);
                (*t + elapsed * per_second) < burst
            });
            if self.buckets.len() >= BUCKET_CAPACITY {
                let oldest = self.buckets.iter().min_by_key(|(_, (_, l))| *l).map(|(k, _)| *k);
                if let Some(k) = oldest {
                    self.buckets.remove(&k);
                }
            }
        }
        let (tokens, last) = self
            .buckets
            .get(&key)
            .copied()
            .unwrap_or((self.policy.burst, now));
        let level = self.level(tokens, last, now);
        if level >= 1.0 {
            self.buckets.insert(key, (level - 1.0, now));
            Ok(())
        } else {
            self.buckets.insert(key, (level, now));
            let wait = (1.0 - level) / self.policy.per_second;
            Err(SignedDuration::from_secs_f64(wait.ceil().max(1.0)))
        }
    }
}

// === impl CodeLedger ===

#[derive(Debug, Clone)]
enum CodeUse {
    Redeeming {
        exp: i64,
        replayed: bool,
    },
    Redeemed {
        exp: i64,
        user: String,
        family: Option<String>,
    },
}

impl CodeUse {
    fn exp(&self) -> i64 {
        match self {
            CodeUse::Redeeming { exp, .. } | CodeUse::Redeemed { exp, .. } => *exp,
        }
    }
}

/// What claiming a code's `jti` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeClaim {
    /// First use: go ahead, then call [`CodeLedger::complete`] or [`CodeLedger::release`].
    First,
    /// The code was used before. If the first use started a refresh family, it is named here so
    /// the caller revokes it (RFC 6749 section 4.1.2).
    Replay {
        /// `(user, family id)` to revoke.
        revoke: Option<(String, String)>,
    },
    /// The ledger is full of live codes; answer 503 and let the client retry.
    Full,
}

/// The per-replica single-use set of authorization codes, each remembered until its `exp`.
#[derive(Debug, Default)]
pub struct CodeLedger {
    codes: HashMap<String, CodeUse>,
}

impl CodeLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks `jti` (expiring at `exp`, unix seconds) as being redeemed.
    pub fn claim(&mut self, jti: &str, exp: i64, now: Timestamp) -> CodeClaim {
        if let Some(used) = self.codes.get_mut(jti) {
            return match used {
                CodeUse::Redeeming { replayed, .. } => {
                    *replayed = true;
                    CodeClaim::Replay { revoke: None }
                }
                CodeUse::Redeemed { user, family, .. } => CodeClaim::Replay {
                    revoke: family.clone().map(|f| (user.clone(), f)),
                },
            };
        }
        if self.codes.len() >= LEDGER_CAPACITY {
            let now = now.as_second();
            self.codes.retain(|_, u| u.exp() > now);
            if self.codes.len() >= LEDGER_CAPACITY {
                return CodeClaim::Full;
            }
        }
        self.codes
            .insert(jti.to_owned(), CodeUse::Redeeming { exp, replayed: false });
        CodeClaim::First
    }

    /// Records the result of a first use; returns true when the code was replayed meanwhile
    /// (the caller then revokes the family it just started).
    pub fn complete(&mut self, jti: &str, user: &str, family: Option<String>) -> bool {
        let Some(used) = self.codes.get_mut(jti) else {
            return false;
        };
        let (exp, replayed) = match used {
            CodeUse::Redeeming { exp, replayed } => (*exp, *replayed),
            CodeUse::Redeemed { .. } => return false,
        };
        *used = CodeUse::Redeemed {
            exp,
            user: user.to_owned(),
            family,
        };
        replayed
    }

    /// Forgets a first use that failed for a temporary reason (store unavailable), so the
    /// client may retry with the same code, unless it was replayed meanwhile.
    pub fn release(&mut self, jti: &str) {
        if let Some(CodeUse::Redeeming { replayed: false, .. }) = self.codes.get(jti) {
            self.codes.remove(jti);
        }
    }

    /// The number of remembered codes.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Whether no code is remembered.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("ts")
    }

    #[test]
    fn five_failures_block_the_user_and_blocks_double_up_to_fifteen_minutes() {
        let mut b = UserBackoff::new();
        for i in 0..5 {
            assert_eq!(b.admit("alice", at(i)), Admission::Admitted);
            b.finish("alice", AttemptOutcome::Failure, at(i));
        }
        assert_eq!(
            b.admit("alice", at(4)),
            Admission::Blocked {
                retry_after: SignedDuration::from_secs(1)
            }
        );
        assert_eq!(backoff_after(4), None);
        assert_eq!(backoff_after(6), Some(SignedDuration::from_secs(2)));
        assert_eq!(backoff_after(40), Some(BACKOFF_MAX));
        assert_eq!(b.admit("alice", at(5)), Admission::Admitted);
        b.finish("alice", AttemptOutcome::Success, at(5));
        assert!(b.is_empty(), "a success forgets the failures");
    }

    #[test]
    fn concurrent_attempts_cannot_pass_the_threshold() {
        let mut b = UserBackoff::new();
        let admitted = (0..20)
            .filter(|_| b.admit("bob", at(0)) == Admission::Admitted)
            .count();
        assert_eq!(admitted, 5);
        (0..5).for_each(|_| b.finish("bob", AttemptOutcome::Failure, at(0)));
        assert!(matches!(b.admit("bob", at(0)), Admission::Blocked { .. }));
    }

    #[test]
    fn failures_are_forgotten_an_hour_after_the_last_attempt() {
        let mut b = UserBackoff::new();
        for i in 0..6 {
            assert_eq!(b.admit("dave", at(i * 10)), Admission::Admitted);
            b.finish("dave", AttemptOutcome::Failure, at(i * 10));
        }
        assert!(matches!(b.admit("dave", at(51)), Admission::Blocked { .. }));
        let later = at(51 + BACKOFF_FORGET.as_secs());
        assert_eq!(b.admit("dave", later), Admission::Admitted);
        b.finish("dave", AttemptOutcome::Failure, later);
        assert_eq!(
            b.admit("dave", later),
            Admission::Admitted,
            "one failure is below the threshold"
        );
    }

    #[test]
    fn an_abandoned_attempt_counts_nothing() {
        let mut b = UserBackoff::new();
        assert_eq!(b.admit("carol", at(0)), Admission::Admitted);
        b.finish("carol", AttemptOutcome::Abandoned, at(0));
        assert!(b.is_empty());
    }

    #[test]
    fn a_bucket_refuses_after_its_burst_and_refills() {
        let mut buckets = TokenBuckets::new(BucketPolicy {
            burst: 2.0,
            per_second: 1.0,
        });
        let ip: IpAddr = "192.0.2.1".parse().expect("ip");
        assert!(buckets.take(ip, at(0)).is_ok());
        assert!(buckets.take(ip, at(0)).is_ok());
        assert_eq!(buckets.take(ip, at(0)), Err(SignedDuration::from_secs(1)));
        assert!(buckets.take(ip, at(1)).is_ok());
        let other: IpAddr = "192.0.2.2".parse().expect("ip");
        assert!(buckets.take(other, at(0)).is_ok());
    }

    #[test]
    fn ipv6_sources_share_a_bucket_per_64_prefix() {
        let mut buckets = TokenBuckets::new(BucketPolicy {
            burst: 1.0,
            per_second: 0.001,
        });
        assert!(buckets.take("2001:db8::1".parse().expect("ip"), at(0)).is_ok());
        assert!(buckets.take("2001:db8::2".parse().expect("ip"), at(0)).is_err());
    }

    #[test]
    fn a_code_is_claimed_once_and_a_replay_names_its_family() {
        let mut ledger = CodeLedger::new();
        assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::First);
        assert!(!ledger.complete("j1", "alice", Some("fam".into())));
        assert_eq!(
            ledger.claim("j1", 100, at(0)),
            CodeClaim::Replay {
                revoke: Some(("alice".into(), "fam".into()))
            }
        );
    }

    #[test]
    fn a_replay_during_redemption_is_reported_to_the_first_use() {
        let mut ledger = CodeLedger::new();
        assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::First);
        assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::Replay { revoke: None });
        assert!(ledger.complete("j1", "alice", None));
    }
}

//! [`TokenBuckets`]: token buckets per key (a source address, a refresh family), bounded, with
//! reserve-then-refund so that a bucket can count failures without letting concurrent requests
//! slip past it.

use std::{
    hash::Hash,
    net::{IpAddr, Ipv6Addr},
};

use jiff::{SignedDuration, Timestamp};

use super::{BUCKET_CAPACITY, DEFAULT_FAMILY_WRITES_PER_MINUTE, recency::RecencyMap};

/// The size and refill rate of a token bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketPolicy {
    /// Requests allowed in a burst.
    pub burst: f64,
    /// Tokens added per second.
    pub per_second: f64,
}

impl BucketPolicy {
    /// Failed password attempts per source: 10 at once, then one every 6 seconds.
    pub const LOGIN_FAILURES: BucketPolicy = BucketPolicy {
        burst: 10.0,
        per_second: 1.0 / 6.0,
    };
    /// Failed token and revocation requests per source (bad, expired, revoked or replayed
    /// grants, garbage tokens, malformed or unauthenticated requests): 60 at once, then one per
    /// second.
    pub const TOKEN_FAILURES: BucketPolicy = BucketPolicy {
        burst: 60.0,
        per_second: 1.0,
    };
    /// Refresh grants per refresh family, valid or not: 20 at once, then 20 a second.
    ///
    /// A session needs one grant per ID token lifetime (minutes), and the processes sharing it
    /// refresh together when it ends, so the burst covers a score of them at once. The ceiling
    /// is there so that one refresh token cannot be multiplied (the grace window answers
    /// concurrent presentations alike, each with a signature): held to 20 a second a family costs
    /// under 2 % of one replica's RSA-3072 signing rate, and a second family takes a sign-in.
    pub const FAMILY_GRANTS: BucketPolicy = BucketPolicy {
        burst: 20.0,
        per_second: 20.0,
    };
    /// Rotations written per refresh family and replica: 20 at once, then one every 10 seconds
    /// (`--family-writes-per-minute`, default [`DEFAULT_FAMILY_WRITES_PER_MINUTE`]). Taken only
    /// when a grant decides to rotate, and given back when the write fails: the grace window's
    /// answers, refusals and revocations write nothing or end the family.
    ///
    /// Each rotation puts the user's credentials into the store: on Kubernetes the user's Secret
    /// (up to 16 KiB at the 32-family cap) into etcd, whose history until the next compaction
    /// counts against its quota, and a full quota makes the whole cluster read-only. The
    /// presentation ceiling above alone let one account rotate its 32 families flat out, at the
    /// store's round-trip rate (hundreds of writes a second per replica). Held to this, one family
    /// writes at most 20 + 6 a minute, one account (32 families) about three writes a second per
    /// replica, while a session needs one rotation per ID token lifetime (a minute at the least).
    /// The cap is per family, not per user, so a thief rotating one stolen session holds back
    /// only that session, never the user's others or a new sign-in.
    pub const FAMILY_WRITES: BucketPolicy = BucketPolicy {
        burst: 20.0,
        per_second: DEFAULT_FAMILY_WRITES_PER_MINUTE as f64 / 60.0,
    };
    /// Sessions started per user and replica (codes redeemed with `offline_access`): 10 at once,
    /// then one every 30 seconds (a code held back lives 60 seconds, so it can wait its turn).
    /// Each start writes the user's credentials and brings a new family with a whole
    /// [`Self::FAMILY_WRITES`] cap, so without it an account signing in again and again would
    /// write a burst of rotations per sign-in, bounded only by the password gate. Starting a
    /// session takes the user's password, so no one else can spend another's budget.
    pub const SESSION_STARTS: BucketPolicy = BucketPolicy {
        burst: 10.0,
        per_second: 1.0 / 30.0,
    };
    /// Changes a user makes to its own credentials per replica, each after its password was
    /// checked: an accepted second-factor answer of a sign-in, and every self-service change of
    /// the password or the second factors. 20 at once, then one every 30 seconds
    /// ([`super::AccountWrites`]).
    ///
    /// Each writes the user's credentials (on Kubernetes the user's Secret into etcd). Without
    /// it, one account looping a sign-in with a passkey, or `ChangeOwnPassword` to the same
    /// password, wrote once per argon2id check, bounded only by the account's share of the
    /// password gate. A person signs in or changes a factor a few times a day. The budget is
    /// spent only by a change that is written, which takes the account's password and, where it
    /// has one, its second factor: a wrong answer spends nothing (the factor's own back-off
    /// bounds those), so someone holding only the password cannot hold the owner back.
    /// An administrator's changes of another user are not counted.
    pub const ACCOUNT_WRITES: BucketPolicy = BucketPolicy {
        burst: 20.0,
        per_second: 1.0 / 30.0,
    };
}

/// The key of a source address: IPv4 as it is, IPv6 grouped by /64 (so one host cannot rotate
/// through its prefix); an IPv4-mapped IPv6 address is its IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceKey(IpAddr);

impl SourceKey {
    /// The key of `ip`.
    pub fn of(ip: IpAddr) -> SourceKey {
        SourceKey(match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
            v4 => v4,
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Timestamp,
}

/// Token buckets per key, at most a capacity of them ([`BUCKET_CAPACITY`]).
///
/// A request [`reserve`](Self::reserve)s a token before its work and, when it turns out not to
/// count (a valid grant, an outage), gets it back with [`refund`](Self::refund): concurrent
/// requests therefore never pass a bucket together once it is empty, whatever they turn out to
/// be. A key missing from the table has a full bucket, so a bucket that refills is dropped, and
/// when the table is full the least recently reserved key is forgotten first: O(1) amortised,
/// and a source still being refused keeps its place because each refusal touches it.
#[derive(Debug)]
pub struct TokenBuckets<K> {
    policy: BucketPolicy,
    capacity: usize,
    buckets: RecencyMap<K, Bucket>,
}

impl<K: Hash + Eq + Clone> TokenBuckets<K> {
    /// Empty buckets with `policy`, at most [`BUCKET_CAPACITY`] keys.
    pub fn new(policy: BucketPolicy) -> Self {
        Self::with_capacity(policy, BUCKET_CAPACITY)
    }

    /// Empty buckets with `policy`, at most `capacity` keys.
    pub fn with_capacity(policy: BucketPolicy, capacity: usize) -> Self {
        TokenBuckets {
            policy,
            capacity: capacity.max(1),
            buckets: RecencyMap::new(),
        }
    }

    fn level(&self, key: &K, now: Timestamp) -> f64 {
        self.buckets.get(key).map_or(self.policy.burst, |b| {
            let elapsed = now.duration_since(b.last).as_secs_f64().max(0.0);
            (b.tokens + elapsed * self.policy.per_second).min(self.policy.burst)
        })
    }

    /// The refill time a bucket keeps after a charge at `now`: never earlier than the one it
    /// had. A request that read the clock before waiting in a queue charges with an older `now`
    /// than one charged meanwhile; moving the time back would credit the gap a second time.
    fn charged_at(&self, key: &K, now: Timestamp) -> Timestamp {
        self.buckets.get(key).map_or(now, |b| b.last.max(now))
    }

    /// Takes one token for `key`, or says how long until one is available. The token stays
    /// taken unless [`refund`](Self::refund)ed.
    pub fn reserve(&mut self, key: K, now: Timestamp) -> Result<(), SignedDuration> {
        let level = self.level(&key, now);
        let last = self.charged_at(&key, now);
        if !self.buckets.contains_key(&key) {
            while self.buckets.len() >= self.capacity && self.buckets.pop_oldest().is_some() {}
        }
        if level >= 1.0 {
            self.buckets.insert(
                key,
                Bucket {
                    tokens: level - 1.0,
                    last,
                },
            );
            Ok(())
        } else {
            self.buckets.insert(key, Bucket { tokens: level, last });
            let wait = (1.0 - level) / self.policy.per_second;
            Err(SignedDuration::from_secs_f64(wait.ceil().max(1.0)))
        }
    }

    /// Takes one token for `key` if it has one, never refusing: the charge of a failure that no
    /// bucket may refuse (a request whose artifact verified). A bucket with less than a token
    /// is left empty: the fraction it had refilled is lost.
    pub fn spend(&mut self, key: K, now: Timestamp) {
        let level = self.level(&key, now);
        let last = self.charged_at(&key, now);
        if !self.buckets.contains_key(&key) {
            while self.buckets.len() >= self.capacity && self.buckets.pop_oldest().is_some() {}
        }
        self.buckets.insert(
            key,
            Bucket {
                tokens: (level - 1.0).max(0.0),
                last,
            },
        );
    }

    /// Gives back a token [`reserve`](Self::reserve)d for `key`; a bucket full again is
    /// forgotten. A key forgotten meanwhile is left alone (its bucket is full already).
    pub fn refund(&mut self, key: &K, now: Timestamp) {
        if !self.buckets.contains_key(key) {
            return;
        }
        let level = (self.level(key, now) + 1.0).min(self.policy.burst);
        if level >= self.policy.burst {
            self.buckets.remove(key);
        } else if let Some(b) = self.buckets.get_mut(key) {
            *b = Bucket {
                tokens: level,
                last: now.max(b.last),
            };
        }
    }

    /// The tokens `key` holds at `now` (full when it has no entry).
    pub fn tokens(&self, key: &K, now: Timestamp) -> f64 {
        self.level(key, now)
    }

    /// The number of keys with a bucket that is not full (or was not when last touched).
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no key has a bucket.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

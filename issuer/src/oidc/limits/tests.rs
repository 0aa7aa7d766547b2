//! The limits' unit tests, on a fixed clock.
use std::net::IpAddr;

use jiff::{SignedDuration, Timestamp};

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

fn ip(s: &str) -> SourceKey {
    SourceKey::of(s.parse::<IpAddr>().expect("ip"))
}

fn policy(burst: f64, per_second: f64) -> BucketPolicy {
    BucketPolicy { burst, per_second }
}

#[test]
fn a_bucket_refuses_after_its_burst_and_refills() {
    let mut buckets = TokenBuckets::new(policy(2.0, 1.0));
    let a = ip("192.0.2.1");
    assert!(buckets.reserve(a, at(0)).is_ok());
    assert!(buckets.reserve(a, at(0)).is_ok());
    assert_eq!(buckets.reserve(a, at(0)), Err(SignedDuration::from_secs(1)));
    assert!(buckets.reserve(a, at(1)).is_ok());
    assert!(buckets.reserve(ip("192.0.2.2"), at(0)).is_ok());
}

/// A request that read the clock before waiting in a queue charges with a time older than a
/// charge made meanwhile: the bucket's refill time must not move back, or the gap would be
/// credited twice.
#[test]
fn a_charge_with_an_older_time_never_credits_the_refill_again() {
    let mut buckets = TokenBuckets::new(policy(5.0, 1.0));
    let a = ip("192.0.2.1");
    for _ in 0..5 {
        assert!(buckets.reserve(a, at(10)).is_ok());
    }
    // Read at 8, charged after the charges at 10: refused, and the refill time stays 10.
    assert!(buckets.reserve(a, at(8)).is_err());
    buckets.spend(a, at(8));
    // One second past 10 is one token, not three.
    assert!(buckets.reserve(a, at(11)).is_ok());
    assert!(buckets.reserve(a, at(11)).is_err(), "the gap was credited again");
}

#[test]
fn ipv6_sources_share_a_bucket_per_64_prefix() {
    let mut buckets = TokenBuckets::new(policy(1.0, 0.001));
    assert!(buckets.reserve(ip("2001:db8::1"), at(0)).is_ok());
    assert!(buckets.reserve(ip("2001:db8::2"), at(0)).is_err());
    assert!(buckets.reserve(ip("2001:db8:0:1::1"), at(0)).is_ok());
    assert_eq!(ip("::ffff:192.0.2.1"), ip("192.0.2.1"));
}

#[test]
fn refunded_reservations_cost_nothing_and_leave_no_entry() {
    let mut buckets = TokenBuckets::new(policy(3.0, 0.001));
    let a = ip("192.0.2.1");
    for i in 0..1000 {
        assert!(buckets.reserve(a, at(i)).is_ok(), "request {i}");
        buckets.refund(&a, at(i));
    }
    assert!(buckets.is_empty(), "a full bucket is forgotten");
}

#[test]
fn only_failures_empty_a_bucket() {
    let mut buckets = TokenBuckets::new(policy(3.0, 0.001));
    let a = ip("192.0.2.1");
    for _ in 0..3 {
        // A success: reserved and given back; then a failure: reserved and kept.
        assert!(buckets.reserve(a, at(0)).is_ok());
        buckets.refund(&a, at(0));
        assert!(buckets.reserve(a, at(0)).is_ok());
    }
    assert!(
        buckets.reserve(a, at(0)).is_err(),
        "three failures empty a bucket of three"
    );
}

#[test]
fn concurrent_reservations_never_pass_an_empty_bucket() {
    // Ten requests in flight at once, none settled yet: only the burst passes.
    let mut buckets = TokenBuckets::new(policy(4.0, 0.001));
    let a = ip("198.51.100.7");
    let passed = (0..10).filter(|_| buckets.reserve(a, at(0)).is_ok()).count();
    assert_eq!(passed, 4);
    // One of them turns out valid: its token comes back and one more may start.
    buckets.refund(&a, at(0));
    assert!(buckets.reserve(a, at(0)).is_ok());
    assert!(buckets.reserve(a, at(0)).is_err());
}

#[test]
fn a_refund_never_fills_a_bucket_past_its_burst() {
    let mut buckets = TokenBuckets::new(policy(2.0, 1.0));
    let a = ip("192.0.2.1");
    assert!(buckets.reserve(a, at(0)).is_ok());
    buckets.refund(&a, at(0));
    buckets.refund(&a, at(0));
    buckets.refund(&a, at(0));
    assert!(buckets.reserve(a, at(0)).is_ok());
    assert!(buckets.reserve(a, at(0)).is_ok());
    assert!(buckets.reserve(a, at(0)).is_err());
}

#[test]
fn a_full_table_forgets_the_least_recently_reserved_source_first() {
    let mut buckets = TokenBuckets::with_capacity(policy(2.0, 0.001), 3);
    let (a, b, c, d) = (ip("192.0.2.1"), ip("192.0.2.2"), ip("192.0.2.3"), ip("192.0.2.4"));
    for key in [a, b, c] {
        assert!(buckets.reserve(key, at(0)).is_ok());
        assert!(buckets.reserve(key, at(0)).is_ok());
    }
    // `a` keeps trying while refused: each refusal touches it, so `b` is now the oldest.
    assert!(buckets.reserve(a, at(1)).is_err());
    assert!(buckets.reserve(d, at(2)).is_ok());
    assert_eq!(buckets.len(), 3);
    assert!(
        buckets.reserve(a, at(2)).is_err(),
        "the source under penalty is remembered"
    );
    assert!(buckets.reserve(c, at(2)).is_err(), "so is the other recent one");
    assert!(
        buckets.reserve(b, at(2)).is_ok(),
        "the oldest was forgotten (a full bucket again)"
    );
}

#[test]
fn a_table_flooded_by_new_sources_stays_bounded() {
    let mut buckets = TokenBuckets::with_capacity(policy(60.0, 0.001), 1000);
    let penalised = ip("203.0.113.1");
    while buckets.reserve(penalised, at(0)).is_ok() {}
    for n in 0..100_000u32 {
        let [_, _, x, y] = n.to_be_bytes();
        let key = SourceKey::of(IpAddr::from([10, x, y, (n % 251) as u8]));
        let _ = buckets.reserve(key, at(1));
        if n % 100 == 0 {
            // The penalised source keeps knocking and keeps its empty bucket.
            assert!(
                buckets.reserve(penalised, at(1)).is_err(),
                "after {n} new sources"
            );
        }
    }
    assert_eq!(buckets.len(), 1000);
}

#[test]
fn a_family_bucket_lets_a_session_refresh_and_bounds_one_token() {
    let mut families: TokenBuckets<String> = TokenBuckets::new(BucketPolicy::FAMILY_GRANTS);
    // One session refreshing every five minutes for a day is never refused.
    for i in 0..288 {
        assert!(families.reserve("fam-a".to_owned(), at(i * 300)).is_ok());
    }
    // A thousand presentations of one token at once: only the burst passes.
    let passed = (0..1000)
        .filter(|_| families.reserve("fam-b".to_owned(), at(0)).is_ok())
        .count();
    assert_eq!(passed, 20);
    // Sustained, it gets the refill rate and no more.
    let passed = (0..1000)
        .filter(|i| families.reserve("fam-b".to_owned(), at(1 + i / 100)).is_ok())
        .count();
    assert_eq!(passed, 200, "ten seconds at 20 a second");
}

#[test]
fn the_back_off_table_forgets_the_least_recently_seen_idle_name_first() {
    let mut b = UserBackoff::with_capacity(3);
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        assert_eq!(b.admit(name, at(i as i64)), Admission::Admitted);
        b.finish(name, AttemptOutcome::Failure, at(i as i64));
    }
    // `a` has an attempt in flight; `b` is the least recently seen idle name.
    assert_eq!(b.admit("a", at(3)), Admission::Admitted);
    assert_eq!(b.admit("d", at(4)), Admission::Admitted);
    assert_eq!(b.len(), 3);
    b.finish("a", AttemptOutcome::Failure, at(5));
    // `b` starts over (admitted with no failure); `c` still has its one failure: four more
    // failures block it, not five.
    for _ in 0..4 {
        assert_eq!(b.admit("c", at(6)), Admission::Admitted);
        b.finish("c", AttemptOutcome::Failure, at(6));
    }
    assert!(matches!(b.admit("c", at(6)), Admission::Blocked { .. }));
    for _ in 0..4 {
        assert_eq!(b.admit("b", at(6)), Admission::Admitted);
        b.finish("b", AttemptOutcome::Failure, at(6));
    }
    assert_eq!(
        b.admit("b", at(6)),
        Admission::Admitted,
        "b was forgotten: four failures, not five"
    );
}

#[test]
fn a_name_with_an_attempt_in_flight_is_never_forgotten() {
    let mut b = UserBackoff::with_capacity(2);
    assert_eq!(b.admit("busy", at(0)), Admission::Admitted);
    for n in 0..100 {
        let name = format!("n{n}");
        assert_eq!(b.admit(&name, at(1)), Admission::Admitted);
        b.finish(&name, AttemptOutcome::Failure, at(1));
    }
    assert_eq!(b.len(), 2);
    b.finish("busy", AttemptOutcome::Failure, at(2));
    for _ in 0..4 {
        assert_eq!(b.admit("busy", at(2)), Admission::Admitted);
        b.finish("busy", AttemptOutcome::Failure, at(2));
    }
    assert!(
        matches!(b.admit("busy", at(2)), Admission::Blocked { .. }),
        "the busy name kept its first failure"
    );
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
fn a_replay_names_its_family_once_and_again_after_a_failed_revocation() {
    let mut ledger = CodeLedger::new();
    assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::First);
    assert!(!ledger.complete("j1", "alice", Some("fam".into())));
    let named = CodeClaim::Replay {
        revoke: Some(("alice".into(), "fam".into())),
    };
    assert_eq!(ledger.claim("j1", 100, at(0)), named);
    assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::Replay { revoke: None });
    ledger.revocation_failed("j1", "fam".into());
    assert_eq!(ledger.claim("j1", 100, at(0)), named, "retried after a failure");
    assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::Replay { revoke: None });
}

#[test]
fn gone_families_are_bounded_and_a_presented_one_is_kept() {
    let mut gone = GoneFamilies::with_capacity(3);
    assert!(!gone.contains("f0"));
    for f in ["f0", "f1", "f2"] {
        gone.insert(f);
    }
    assert!(gone.contains("f0"), "presented: now the most recent");
    gone.insert("f3");
    assert_eq!(gone.len(), 3);
    assert!(!gone.contains("f1"), "the least recently seen is forgotten first");
    assert!(gone.contains("f0") && gone.contains("f2") && gone.contains("f3"));
}

#[test]
fn a_replay_during_redemption_is_reported_to_the_first_use() {
    let mut ledger = CodeLedger::new();
    assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::First);
    assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::Replay { revoke: None });
    assert!(ledger.complete("j1", "alice", None));
}

#[test]
fn a_family_started_by_a_code_replayed_during_redemption_is_not_named_again() {
    let mut ledger = CodeLedger::new();
    assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::First);
    assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::Replay { revoke: None });
    assert!(
        ledger.complete("j1", "alice", Some("fam".into())),
        "the first use revokes it"
    );
    assert_eq!(ledger.claim("j1", 100, at(0)), CodeClaim::Replay { revoke: None });
    ledger.revocation_failed("j1", "fam".into());
    assert_eq!(
        ledger.claim("j1", 100, at(0)),
        CodeClaim::Replay {
            revoke: Some(("alice".into(), "fam".into()))
        }
    );
}

#[test]
fn a_known_device_has_a_back_off_budget_apart_from_its_name() {
    let mut b = UserBackoff::new();
    let (name, device) = (backoff_key("alice", None), backoff_key("alice", Some("dev-1")));
    for i in 0..8 {
        if b.admit(&name, at(i)) == Admission::Admitted {
            b.finish(&name, AttemptOutcome::Failure, at(i));
        }
    }
    assert!(matches!(b.admit(&name, at(8)), Admission::Blocked { .. }));
    assert_eq!(
        b.admit(&device, at(8)),
        Admission::Admitted,
        "the device is not blocked"
    );
    b.finish(&device, AttemptOutcome::Success, at(8));
    assert!(
        matches!(b.admit(&name, at(8)), Admission::Blocked { .. }),
        "and its success does not unblock the name"
    );
    // The device's own failures back it off, and another device of the name is not affected.
    for i in 0..5 {
        assert_eq!(b.admit(&device, at(9 + i)), Admission::Admitted);
        b.finish(&device, AttemptOutcome::Failure, at(9 + i));
    }
    assert!(matches!(b.admit(&device, at(13)), Admission::Blocked { .. }));
    assert_eq!(
        b.admit(&backoff_key("alice", Some("dev-2")), at(13)),
        Admission::Admitted
    );
    assert_ne!(backoff_key("alice", Some("x")), backoff_key("alicex", None));
}

#[test]
fn spending_takes_a_token_when_there_is_one_and_never_refuses() {
    let mut buckets = TokenBuckets::new(policy(2.0, 1.0));
    let a = ip("192.0.2.1");
    buckets.spend(a, at(0));
    assert!(buckets.reserve(a, at(0)).is_ok(), "one of two left");
    assert!(buckets.reserve(a, at(0)).is_err());
    buckets.spend(a, at(0));
    assert!(
        buckets.tokens(&a, at(0)).abs() < f64::EPSILON,
        "an empty bucket stays empty"
    );
    assert!(buckets.reserve(a, at(1)).is_ok(), "and refills as before");
}

#[test]
fn an_exempt_token_is_never_refused_and_charges_what_the_bucket_holds() {
    let buckets = std::sync::Mutex::new(TokenBuckets::new(policy(2.0, 0.001)));
    let source: IpAddr = "192.0.2.1".parse().expect("ip");
    let key = SourceKey::of(source);
    for _ in 0..2 {
        SourceToken::reserve(&buckets, source, at(0))
            .expect("burst")
            .charge();
    }
    assert!(SourceToken::reserve(&buckets, source, at(0)).is_err(), "empty");
    // Exempt: not refused, and free unless charged.
    drop(SourceToken::exempt(&buckets, source, at(0)));
    SourceToken::exempt(&buckets, source, at(0)).charge();
    assert!(buckets.lock().expect("lock").tokens(&key, at(0)) < 1.0);
    // With a token in the bucket, a charge takes it.
    let other: IpAddr = "192.0.2.2".parse().expect("ip");
    SourceToken::exempt(&buckets, other, at(0)).charge();
    let left = buckets.lock().expect("lock").tokens(&SourceKey::of(other), at(0));
    assert!((left - 1.0).abs() < f64::EPSILON, "{left}");
}

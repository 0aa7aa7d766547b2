//! The per-source limits fall on failures, not on people: many users behind one address (an
//! office's NAT, a CI fleet) refresh and sign in freely, while the same address sending garbage
//! tokens or wrong passwords is slowed down after the burst — and the garbage does not stop the
//! valid grants beside it — and one refresh token cannot be multiplied past its family's bucket. Every request here comes from the harness's one peer.
//! (The long form, over TLS against the release binary, is `hack/bench/nat.sh`.)

use std::sync::Arc;

use crate::common::*;
use axum::http::{StatusCode, header};
use jiff::SignedDuration;

/// Distinct users behind the address, one refresh family each.
const USERS: usize = 500;
/// Each family refreshes once per this many seconds (compressed from the token TTL of minutes).
const PERIOD_SECS: usize = 60;
/// Simulated seconds of the run.
const RUN_SECS: usize = 120;
/// The failure burst of the token endpoint per source.
const TOKEN_BURST: usize = 60;
/// The failure burst of sign-ins per source.
const LOGIN_BURST: usize = 10;

fn user(i: usize) -> String {
    format!("nat-{i}")
}

/// `USERS` users with one `ichor-cli` family each, and the refresh token of each.
fn office(h: &Harness) -> Vec<String> {
    users_with_one_family(h, USERS, user)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_families_behind_one_address_are_never_refused_and_garbage_is() {
    let h = Arc::new(Harness::new());
    let mut tokens = office(&h);
    // Every 100 ms of simulated time the families due refresh together: each one every
    // `PERIOD_SECS`, about 8 a second in all (the old bucket passed one a second after 60).
    let steps = RUN_SECS * 10;
    let mut refreshed = 0;
    for step in 0..steps {
        let due: Vec<usize> = (0..USERS)
            .filter(|i| i * PERIOD_SECS * 10 / USERS == step % (PERIOD_SECS * 10))
            .collect();
        refreshed += refresh_together(&h, &mut tokens, due, |i| format!("{} at step {step}", user(i))).await;
        h.clock.advance(SignedDuration::from_millis(100));
    }
    assert_eq!(refreshed, USERS * RUN_SECS / PERIOD_SECS);
    assert!(!h.metrics().contains("source_rate"), "no request was refused");

    // The same address sending garbage refresh tokens: the burst is answered, then slowed down.
    for n in 0..TOKEN_BURST {
        assert_eq!(
            garbage_refresh(&h, n).await,
            StatusCode::BAD_REQUEST,
            "garbage {n}"
        );
    }
    let refused = h.refresh("garbage.last.token", "ichor-cli", None).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.error(), "slow_down");
    assert!(refused.headers.contains_key(header::RETRY_AFTER));
    // While the address's failure bucket is empty, its valid refreshes still go through (their
    // token's MAC verifies before the bucket is consulted); its garbage does not.
    for (i, token) in tokens.iter().take(5).enumerate() {
        let valid = h.refresh(token, "ichor-cli", None).await;
        assert_eq!(valid.status, StatusCode::OK, "{}: {}", user(i), valid.text());
    }
    assert_eq!(garbage_refresh(&h, 0).await, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_garbage_from_one_address_passes_only_the_burst() {
    let h = Arc::new(Harness::new());
    let tasks: Vec<_> = (0..200)
        .map(|n| {
            let h = Arc::clone(&h);
            tokio::spawn(async move { garbage_refresh(&h, n).await })
        })
        .collect();
    let mut answered = 0;
    for t in tasks {
        match t.await.expect("join") {
            StatusCode::BAD_REQUEST => answered += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(answered, TOKEN_BURST);
}

#[tokio::test]
async fn one_refresh_token_is_held_to_its_family_bucket_without_charging_its_source() {
    let h = Harness::new();
    let tokens = office(&h);
    // A hundred presentations of one token at one instant (the grace window would answer each
    // with a signed ID token): the family's burst of 20 passes, the rest are slowed down.
    let mut passed = 0;
    for _ in 0..100 {
        let reply = h.refresh(&tokens[7], "ichor-cli", None).await;
        match reply.status {
            StatusCode::OK => passed += 1,
            StatusCode::TOO_MANY_REQUESTS => assert_eq!(reply.error(), "slow_down"),
            other => panic!("unexpected {other}: {}", reply.text()),
        }
    }
    assert_eq!(passed, 20);
    assert!(h.metrics().contains("reason=\"family_rate\"} 80"));
    // Other families are not affected, and the address's failure budget is whole.
    let other = h.refresh(&tokens[8], "ichor-cli", None).await;
    assert_eq!(other.status, StatusCode::OK, "{}", other.text());
    for n in 0..TOKEN_BURST {
        assert_eq!(
            garbage_refresh(&h, n).await,
            StatusCode::BAD_REQUEST,
            "garbage {n}"
        );
    }
    assert_eq!(garbage_refresh(&h, 0).await, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn revoking_sessions_is_free_and_revoking_garbage_is_charged() {
    let h = Harness::new();
    let tokens = office(&h);
    for (i, token) in tokens.iter().take(TOKEN_BURST + 20).enumerate() {
        let reply = h.revoke(&[("token", token), ("client_id", "ichor-cli")]).await;
        assert_eq!(reply.status, StatusCode::OK, "revocation {i}: {}", reply.text());
    }
    assert!(h.store.entry(&user(0)).expect("entry").families.is_empty());
    // Garbage is answered 200 like a valid token (no oracle), but counted; so is a token of a
    // family already revoked.
    for n in 0..TOKEN_BURST - 1 {
        let reply = h
            .revoke(&[("token", &format!("garbage.{n}")), ("client_id", "ichor-cli")])
            .await;
        assert_eq!(reply.status, StatusCode::OK, "garbage {n}");
    }
    let again = h
        .revoke(&[("token", &tokens[0]), ("client_id", "ichor-cli")])
        .await;
    assert_eq!(again.status, StatusCode::OK);
    let refused = h
        .revoke(&[("token", "garbage"), ("client_id", "ichor-cli")])
        .await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn sign_ins_behind_one_address_are_free_and_wrong_passwords_are_slowed_down() {
    let h = Harness::new();
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    // More successful sign-ins than the failure burst, from the one address.
    for i in 0..LOGIN_BURST + 2 {
        let who = if i % 2 == 0 { "alice" } else { "carol" };
        let reply = h.login(&ticket, who, PASSWORD).await;
        assert_eq!(reply.status, StatusCode::OK, "sign-in {i}: {}", reply.text());
    }
    // Wrong passwords, each for another name (so the per-user back-off stays out of it).
    for i in 0..LOGIN_BURST {
        let reply = h
            .login(&ticket, &format!("guess-{i}"), "wrong password here")
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "guess {i}");
    }
    let refused = h.login(&ticket, "guess-last", "wrong password here").await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers.contains_key(header::RETRY_AFTER));
    assert!(h.metrics().contains("reason=\"source_rate\"} 1"));
}

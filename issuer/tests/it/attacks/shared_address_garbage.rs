//! Denying a shared address: everyone behind one address (an office's NAT, an ingress the issuer
//! does not trust for `X-Forwarded-For`) shares its per-source failure buckets, and an attacker
//! behind it empties them with garbage. Requests whose artifact verifies — a refresh token, a
//! code, a device cookie of the user signing in — are not refused by a bucket that garbage
//! emptied; the garbage still is. Every request here comes from the harness's one peer.

use std::sync::Arc;

use crate::common::*;
use axum::http::StatusCode;
use jiff::SignedDuration;

/// The failure burst of the token endpoint per source.
const TOKEN_BURST: usize = 60;
/// The failure burst of sign-ins per source.
const LOGIN_BURST: usize = 10;
/// Users behind the address, one refresh family each.
const USERS: usize = 20;

/// `USERS` users `shared-<i>` with one `ichor-cli` family each, and their refresh tokens.
fn sessions(h: &Harness) -> Vec<String> {
    users_with_one_family(h, USERS, |i| format!("shared-{i}"))
}

/// Sends garbage until the address is refused.
async fn empty_the_token_bucket(h: &Harness) {
    for n in 0..TOKEN_BURST {
        assert_eq!(
            garbage_refresh(h, n).await,
            StatusCode::BAD_REQUEST,
            "garbage {n}"
        );
    }
    assert_eq!(
        garbage_refresh(h, TOKEN_BURST).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_refreshes_from_a_shared_address_never_refuse_a_valid_refresh_from_it() {
    let h = Arc::new(Harness::new());
    let mut tokens = sessions(&h);
    empty_the_token_bucket(&h).await;

    // For ten simulated seconds: twenty garbage refreshes a second from the address, beside
    // its twenty users refreshing once a second each.
    let (mut refreshed, mut garbage_refused) = (0, 0);
    for step in 0..100 {
        for k in 0..2 {
            match garbage_refresh(&h, 1000 + step * 2 + k).await {
                StatusCode::TOO_MANY_REQUESTS => garbage_refused += 1,
                StatusCode::BAD_REQUEST => {}
                other => panic!("garbage at step {step}: unexpected {other}"),
            }
        }
        let due = vec![(step * 2) % USERS, (step * 2 + 1) % USERS];
        let done = refresh_together(&h, &mut tokens, due, |i| {
            format!("shared-{i} at step {step} (after {refreshed} refreshes)")
        })
        .await;
        refreshed += done;
        h.clock.advance(SignedDuration::from_millis(100));
    }
    assert_eq!(refreshed, 200);
    // The garbage was refused all along but for the bucket's refill of one a second.
    assert!(garbage_refused >= 185, "{garbage_refused} of 200 garbage refused");
}

#[tokio::test]
async fn a_code_exchange_and_a_revocation_pass_a_token_bucket_that_garbage_emptied() {
    let h = Harness::new();
    empty_the_token_bucket(&h).await;

    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let session = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(session.status, StatusCode::OK, "{}", session.text());
    let refresh = session.json()["refresh_token"]
        .as_str()
        .expect("refresh_token")
        .to_owned();
    let revoked = h.revoke(&[("token", &refresh), ("client_id", "ichor-cli")]).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text());
    assert!(h.store.entry("alice").expect("entry").families.is_empty());

    // A revoked token still verifies: answered invalid_grant, not refused by the limit.
    let after = h.refresh(&refresh, "ichor-cli", None).await;
    assert_eq!(after.status, StatusCode::BAD_REQUEST, "{}", after.text());
    assert_eq!(after.error(), "invalid_grant");
    // Garbage is refused at both endpoints.
    let garbage_revoke = h
        .revoke(&[("token", "garbage"), ("client_id", "ichor-cli")])
        .await;
    assert_eq!(garbage_revoke.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(garbage_refresh(&h, 0).await, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_known_device_signs_in_past_a_sign_in_bucket_emptied_from_its_address() {
    let h = Harness::new();
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let first = h.login(&ticket, "alice", PASSWORD).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text());
    let cookie = first.device_cookie().expect("device cookie");

    // Wrong passwords from the same address, each for another name, empty its bucket.
    for i in 0..LOGIN_BURST {
        let reply = h.login(&ticket, &format!("guess-{i}"), "wrong password").await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "guess {i}");
    }
    let refused = h.login(&ticket, "guess-last", "wrong password").await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);

    // alice's device that signed in before still signs in from that address, again and again.
    for n in 0..3 {
        let reply = h
            .login_from(h.peer, &ticket, "alice", PASSWORD, Some(&cookie))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "sign-in {n}: {}", reply.text());
    }
    // A cookie-less sign-in from the address waits for its bucket, even with the right password.
    let reply = h.login(&ticket, "carol", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{}", reply.text());
}

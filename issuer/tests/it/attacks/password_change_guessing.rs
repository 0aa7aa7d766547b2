//! A stolen browser session (an `ichor-ui` token) guesses its user's password through
//! `ChangeOwnPassword`'s old password: the guesses count as failed sign-ins, in the same per-user
//! back-off and the same per-source budget as the sign-in form, so the session gets five guesses
//! and then waits, and the user's own sign-in sees the same back-off.

use super::composed::{composed, peer};
use axum::http::StatusCode;
use ichor_issuer::oidc::limits::{BACKOFF_BASE, BACKOFF_THRESHOLD, BucketPolicy};
use ichor_testkit::issuer::harness::{PASSWORD, UI_REDIRECT};
use jiff::SignedDuration;
use tonic::Code;

const NEW: &str = "a new passphrase nobody guessed";

#[tokio::test]
async fn wrong_old_passwords_put_the_user_in_the_back_off_that_sign_in_shares() {
    let c = composed().await;
    let before = c.env.entry("alice").await.expect("alice's entry");
    for i in 0..BACKOFF_THRESHOLD {
        let guess = format!("guess number {i} of the thief");
        let refused = c
            .change_own_password("alice", peer(1), &guess, NEW)
            .await
            .expect_err("a wrong old password");
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains("does not match"), "{refused:?}");
    }

    // Backing off: even the right old password is refused, before any check.
    let refused = c
        .change_own_password("alice", peer(1), PASSWORD, NEW)
        .await
        .expect_err("alice is backing off");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("try again in"), "{refused:?}");
    assert_eq!(
        c.env.entry("alice").await.expect("entry").hash,
        before.hash,
        "the password was changed during the back-off"
    );

    // The sign-in form sees the same back-off, from any address.
    let ticket = c.h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = c.h.login_from(peer(2), &ticket, "alice", PASSWORD, None).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{}", reply.text());

    // When the back-off ends, the right old password is accepted again.
    c.h.clock.advance(BACKOFF_BASE + SignedDuration::from_secs(1));
    c.change_own_password("alice", peer(1), PASSWORD, NEW)
        .await
        .expect("the right old password after the back-off");
    assert_ne!(c.env.entry("alice").await.expect("entry").hash, before.hash);
}

#[tokio::test]
async fn wrong_old_passwords_are_charged_to_their_source_like_failed_sign_ins() {
    let c = composed().await;
    // Stolen sessions of two users, used from one address: each user's back-off allows five
    // guesses, the address's budget ten in all.
    let burst = BucketPolicy::LOGIN_FAILURES.burst as usize;
    assert_eq!(burst, 2 * BACKOFF_THRESHOLD as usize);
    for i in 0..burst {
        let user = if i % 2 == 0 { "bob" } else { "carol" };
        let refused = c
            .change_own_password(user, peer(7), &format!("guess {i}"), NEW)
            .await
            .expect_err("a wrong old password");
        assert_eq!(refused.code(), Code::InvalidArgument, "{user}: {refused:?}");
    }
    // A third stolen session from the same address: its user never failed, but the address's
    // budget is spent.
    let refused = c
        .change_own_password("alice", peer(7), "one more guess", NEW)
        .await
        .expect_err("the address's budget is spent");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    // From another address alice's session still works.
    c.change_own_password("alice", peer(8), PASSWORD, NEW)
        .await
        .expect("another address");
}

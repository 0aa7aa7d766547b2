//! A device cookie stolen from alice's browser, kept past what should end it: an admin resets
//! alice's password, her sessions are revoked, or she is deleted and created again. The cookie
//! used to stay a known device for its 30 days whatever happened to the credentials: its own
//! back-off budget of guesses beside the name's, its address's emptied bucket not refusing it,
//! and the known devices' lane. Now a cookie set before the credentials entry's `notBefore` (a
//! new entry's is its creation) is no known device: the sign-in goes on exactly as one without
//! a cookie. So is a cookie of a user that is gone or being deleted while its credentials entry
//! waits for the controller's clean-up (forever, when the controller is down).

use std::net::SocketAddr;

use crate::common::*;
use axum::http::StatusCode;
use ichor_renderers::auth::credentials::CredentialsEntry;
use jiff::SignedDuration;

const NEW_PASSWORD: &str = "a brand new password for alice 42";

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("addr")
}

/// The device cookie alice's browser gets by signing in from her office.
async fn alices_device(h: &Harness) -> String {
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h
        .login_from(addr("198.51.100.7:50000"), &ticket, "alice", PASSWORD, None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply
        .device_cookie()
        .expect("a successful sign-in sets the device cookie")
}

/// What ends alice's credentials as they were, and her password afterwards.
#[derive(Debug, Clone, Copy)]
enum Ending {
    PasswordReset,
    SessionsRevoked,
    DeletedAndCreatedAgain,
}

fn end(h: &Harness, how: Ending) -> &'static str {
    let now = h.clock.now_ts();
    let old = h.store.entry("alice").expect("alice's entry");
    match how {
        Ending::PasswordReset => {
            h.store
                .set_entry("alice", old.with_new_password(hash_of(NEW_PASSWORD), now, false));
            NEW_PASSWORD
        }
        Ending::SessionsRevoked => {
            h.store.set_entry("alice", old.revoke_all(now));
            PASSWORD
        }
        Ending::DeletedAndCreatedAgain => {
            h.store.delete_user("alice");
            h.store.add_user(
                "alice",
                &["admin"],
                Some(CredentialsEntry::new(password_hash(), now, false)),
            );
            PASSWORD
        }
    }
}

#[tokio::test]
async fn a_cookie_set_before_the_credentials_ended_keeps_no_device_id_at_the_next_sign_in() {
    for how in [
        Ending::PasswordReset,
        Ending::SessionsRevoked,
        Ending::DeletedAndCreatedAgain,
    ] {
        let h = Harness::new();
        let stolen = alices_device(&h).await;
        let dev = claims(&stolen)["dev"].as_str().expect("dev").to_owned();
        h.clock.advance(SignedDuration::from_secs(60));
        let password = end(&h, how);
        h.clock.advance(SignedDuration::from_secs(1));
        // The right password with the old cookie: a sign-in like one without a cookie, so the
        // cookie it sets is a new device's, not the stolen one's renewed.
        let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
        let reply = h
            .login_from(
                addr("198.51.100.9:50000"),
                &ticket,
                "alice",
                password,
                Some(&stolen),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{how:?}: {}", reply.text());
        let renewed = reply.device_cookie().expect("a new cookie");
        assert_ne!(
            claims(&renewed)["dev"].as_str(),
            Some(dev.as_str()),
            "{how:?}: the old cookie was taken for a known device"
        );
    }
}

#[tokio::test]
async fn a_cookie_stolen_before_a_password_reset_has_no_guesses_of_its_own_nor_its_address_exemption() {
    let h = Harness::new();
    let stolen = alices_device(&h).await;
    h.clock.advance(SignedDuration::from_secs(60));
    end(&h, Ending::PasswordReset);
    h.clock.advance(SignedDuration::from_secs(1));

    // The thief spends the name's budget and its own address's bucket without the cookie.
    let thief = addr("203.0.113.66:40000");
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let mut refused = false;
    for _ in 0..20 {
        let reply = h.login_from(thief, &ticket, "alice", "a guess", None).await;
        refused |= reply.status == StatusCode::TOO_MANY_REQUESTS;
    }
    assert!(refused, "the name backs off without the cookie");

    // With the stolen cookie, from another address: the name's back-off holds it too.
    let elsewhere = addr("203.0.113.67:40000");
    let reply = h
        .login_from(elsewhere, &ticket, "alice", "another guess", Some(&stolen))
        .await;
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "the stale cookie had a back-off budget of its own: {}",
        reply.text()
    );
    // And from the thief's own address, past the bucket it emptied: refused as without one.
    let without = h.login_from(thief, &ticket, "alice", "another guess", None).await;
    let with = h
        .login_from(thief, &ticket, "alice", "another guess", Some(&stolen))
        .await;
    assert_eq!(with.status, without.status, "{}", with.text());
    assert_eq!(with.status, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_cookie_set_after_the_reset_is_still_a_known_device() {
    let h = Harness::new();
    h.clock.advance(SignedDuration::from_secs(60));
    end(&h, Ending::SessionsRevoked);
    let cookie = alices_device(&h).await;
    let dev = claims(&cookie)["dev"].as_str().expect("dev").to_owned();
    h.clock.advance(SignedDuration::from_secs(5));
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h
        .login_from(
            addr("198.51.100.7:50000"),
            &ticket,
            "alice",
            PASSWORD,
            Some(&cookie),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let renewed = reply.device_cookie().expect("renewed");
    assert_eq!(claims(&renewed)["dev"].as_str(), Some(dev.as_str()));
}

#[tokio::test]
async fn a_cookie_of_a_deleted_user_whose_entry_remains_has_no_guesses_of_its_own_nor_its_address_exemption()
{
    let h = Harness::new();
    let stolen = alices_device(&h).await;
    h.clock.advance(SignedDuration::from_secs(60));
    // alice is deleted; her credentials entry stays until the controller cleans it up.
    h.store.delete_user("alice");
    assert!(h.store.entry("alice").is_some(), "the entry outlives the user");
    h.clock.advance(SignedDuration::from_secs(1));

    // The thief spends the name's budget and its own address's bucket without the cookie.
    let thief = addr("203.0.113.66:40000");
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let mut refused = false;
    for _ in 0..20 {
        let reply = h.login_from(thief, &ticket, "alice", "a guess", None).await;
        refused |= reply.status == StatusCode::TOO_MANY_REQUESTS;
    }
    assert!(refused, "the name backs off without the cookie");

    // With the stolen cookie, from another address: the name's back-off holds it too.
    let elsewhere = addr("203.0.113.67:40000");
    let reply = h
        .login_from(elsewhere, &ticket, "alice", "another guess", Some(&stolen))
        .await;
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "the deleted user's cookie had a back-off budget of its own: {}",
        reply.text()
    );
    // And from the thief's own address, past the bucket it emptied: refused as without one.
    let without = h.login_from(thief, &ticket, "alice", "another guess", None).await;
    let with = h
        .login_from(thief, &ticket, "alice", "another guess", Some(&stolen))
        .await;
    assert_eq!(with.status, without.status, "{}", with.text());
    assert_eq!(with.status, StatusCode::TOO_MANY_REQUESTS);
}

//! Locking a named account out: an attacker who knows a user name (`admin`, here alice) fails
//! its sign-in in a loop so that the per-user back-off keeps the name blocked. The user's
//! device that signed in before keeps signing in (its cookie has a back-off budget of its own),
//! and the attacker's probes of the blocked name are charged to its address, which is soon
//! refused outright.

use std::net::SocketAddr;

use crate::common::*;
use axum::http::StatusCode;
use jiff::SignedDuration;

/// The failure burst of sign-ins per source.
const LOGIN_BURST: usize = 10;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("addr")
}

fn attacker() -> SocketAddr {
    addr("203.0.113.66:40000")
}

/// The device cookie alice gets by signing in from `from`.
async fn alices_device(h: &Harness, from: SocketAddr) -> String {
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h.login_from(from, &ticket, "alice", PASSWORD, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply
        .device_cookie()
        .expect("a successful sign-in sets the device cookie")
}

#[tokio::test]
async fn the_admin_signs_in_on_a_known_device_while_an_attacker_fails_its_name_in_a_loop() {
    let h = Harness::new();
    let office = addr("198.51.100.7:50000");
    let mut cookie = alices_device(&h, office).await;

    // A wrong password for alice every 200 ms for 30 simulated seconds; every 5 s the real
    // admin signs in on the device that signed in before.
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let (mut signed_in, mut wrong, mut refused) = (0, 0, 0);
    for step in 0..150 {
        let probe = h
            .login_from(attacker(), &ticket, "alice", "not the password", None)
            .await;
        match probe.status {
            StatusCode::UNAUTHORIZED => wrong += 1,
            StatusCode::TOO_MANY_REQUESTS => refused += 1,
            other => panic!("probe {step}: unexpected {other}: {}", probe.text()),
        }
        if step % 25 == 24 {
            let reply = h
                .login_from(office, &ticket, "alice", PASSWORD, Some(&cookie))
                .await;
            assert_eq!(
                reply.status,
                StatusCode::OK,
                "the admin's sign-in at step {step} (after {signed_in} of them): {}",
                reply.text()
            );
            cookie = reply.device_cookie().expect("the cookie is renewed");
            signed_in += 1;
        }
        h.clock.advance(SignedDuration::from_millis(200));
    }
    assert_eq!(signed_in, 6, "every sign-in of the known device went through");
    assert!(wrong >= 5, "the attacker's first failures were verified: {wrong}");
    assert!(refused > 120, "and nearly all the rest refused: {refused}");

    // The price: a device of alice that never signed in shares the name's budget with the
    // attacker and waits like it.
    let reply = h
        .login_from(addr("198.51.100.8:50000"), &ticket, "alice", PASSWORD, None)
        .await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{}", reply.text());
}

#[tokio::test]
async fn probes_of_a_blocked_name_drain_the_attackers_source_bucket() {
    let h = Harness::new();
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    for n in 0..5 {
        let reply = h
            .login_from(attacker(), &ticket, "alice", "not the password", None)
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "failure {n}");
    }
    // alice backs off; each probe of her blocked name costs the attacker's address a token.
    for n in 5..LOGIN_BURST {
        let reply = h
            .login_from(attacker(), &ticket, "alice", "not the password", None)
            .await;
        assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "probe {n}");
    }
    assert!(
        h.metrics().contains("reason=\"user_backoff\"} 5"),
        "{}",
        h.metrics()
    );
    // The address's bucket is empty: its next attempt, at any name, is refused before any work.
    let reply = h
        .login_from(attacker(), &ticket, "carol", "not the password", None)
        .await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{}", reply.text());
    assert!(
        h.metrics().contains("reason=\"source_rate\"} 1"),
        "{}",
        h.metrics()
    );
    // Another address is not affected.
    let reply = h
        .login_from(addr("198.51.100.9:1"), &ticket, "carol", PASSWORD, None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

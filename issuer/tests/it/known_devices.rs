//! Known devices during a password flood: a sign-in carrying the device cookie its user got at
//! an earlier sign-in verifies its password in a lane of its own while the shared argon2id
//! queue sheds everyone else; a cookie of another user or a forged one buys nothing, and the
//! lane never skips the password or the back-off.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{net::SocketAddr, sync::Arc, time::Duration};

use crate::common::*;
use axum::http::{StatusCode, header};
use tokio::{sync::OwnedSemaphorePermit, task::JoinHandle};

/// How many sign-ins the shared queue holds (`passwords::DEFAULT_MAX_WAITING`).
const SHARED_QUEUE: usize = 16;

fn peer(i: usize) -> SocketAddr {
    format!("198.51.{}.{}:4000", 100 + i / 250, i % 250)
        .parse()
        .expect("addr")
}

/// The device cookie `user` gets by signing in once (from its own address).
async fn device_of(h: &Harness, user: &str, from: usize) -> String {
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h.login_from(peer(from), &ticket, user, PASSWORD, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply
        .device_cookie()
        .expect("a successful sign-in sets the device cookie")
}

/// The flood, made deterministic: both shared argon2id permits held (password checks in flight)
/// and the shared queue filled with sign-ins of unknown names from addresses of their own, until
/// one is shed at once. Returns the held permits and the queued sign-ins.
async fn saturate(h: &Arc<Harness>) -> (OwnedSemaphorePermit, Vec<JoinHandle<Reply>>) {
    let held = Arc::clone(h.issuer.hash_permits())
        .acquire_many_owned(2)
        .await
        .expect("permits");
    let mut queued = Vec::new();
    for i in 0..4 * SHARED_QUEUE {
        let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
        let flood = Arc::clone(h);
        let task = tokio::spawn(async move {
            flood
                .login_from(peer(1000 + i), &ticket, &format!("nobody-{i}"), PASSWORD, None)
                .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        if task.is_finished() {
            let reply = task.await.expect("join");
            assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{}", reply.text());
            assert!(reply.headers.contains_key(header::RETRY_AFTER));
            return (held, queued);
        }
        queued.push(task);
    }
    panic!("{} sign-ins never filled the shared queue", queued.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_device_signs_in_while_the_flood_is_shed_and_other_cookies_get_no_lane() {
    let h = Arc::new(Harness::new());
    let alice = device_of(&h, "alice", 1).await;
    let carol = device_of(&h, "carol", 2).await;
    let (held, queued) = saturate(&h).await;

    // Without a cookie, with carol's, or with a forged one, alice waits in the shared queue,
    // which is full: shed at once like the flood.
    let mut forged = alice.clone().into_bytes();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).expect("utf8");
    let not_hers = [None, Some(carol.as_str()), Some(forged.as_str()), Some("garbage")];
    for (n, cookie) in not_hers.into_iter().enumerate() {
        let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
        let reply = h
            .login_from(peer(10 + n), &ticket, "alice", PASSWORD, cookie)
            .await;
        assert_eq!(
            reply.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{cookie:?}: {}",
            reply.text()
        );
        assert_eq!(reply.error(), "temporarily_unavailable");
        assert_eq!(reply.device_cookie(), None);
    }

    // Her own cookie takes her through the lane: signed in, the cookie renewed on the same device.
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h
        .login_from(peer(20), &ticket, "alice", PASSWORD, Some(&alice))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let renewed = reply.device_cookie().expect("renewed");
    assert_eq!(claims(&renewed)["dev"], claims(&alice)["dev"]);
    assert_eq!(claims(&renewed)["sub"], "alice");

    // The lane verifies the password: a wrong one is refused as usual.
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h
        .login_from(
            peer(21),
            &ticket,
            "carol",
            "not her password at all",
            Some(&carol),
        )
        .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text());
    assert_eq!(reply.device_cookie(), None);

    // The flood is still waiting the whole time; once the permits are free it is verified.
    drop(held);
    let mut refused = 0;
    for task in queued {
        let reply = task.await.expect("join");
        match reply.status {
            StatusCode::UNAUTHORIZED => refused += 1,
            StatusCode::SERVICE_UNAVAILABLE => {}
            other => panic!("unexpected {other}: {}", reply.text()),
        }
    }
    assert_eq!(refused, SHARED_QUEUE, "the queued sign-ins were all verified");
}

/// The lane goes first on the CPU: while a known device's check is pending the shared queue
/// starts none of its queued checks, even with its permits free, and starts them once the lane
/// check is done. (The hold's bound is raised so that a slow machine cannot end it first; its
/// own tests are in `oidc::priority`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lane_check_takes_a_freed_shared_permit_before_the_queued_flood_checks() {
    let h = Arc::new(Harness::with_lane_hold(Duration::from_secs(60)));
    let alice = device_of(&h, "alice", 1).await;
    let (held, queued) = saturate(&h).await;

    // Alice's sign-in takes its lane place and waits: the lane's permit is taken too.
    let lane = Arc::clone(h.issuer.device_lane_permits())
        .acquire_owned()
        .await
        .expect("the lane permit");
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let known = tokio::spawn({
        let h = Arc::clone(&h);
        async move {
            h.login_from(peer(20), &ticket, "alice", PASSWORD, Some(&alice))
                .await
        }
    });
    while h.issuer.device_lane_pending() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!known.is_finished());

    // The shared permits come free: her check takes one and she is signed in, while the queue
    // starts nothing and no queued flood sign-in is answered.
    drop(held);
    let answered = |queued: &[JoinHandle<Reply>]| queued.iter().filter(|t| t.is_finished()).count();
    let reply = known.await.expect("join");
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(answered(&queued), 0, "a flood check finished before the lane's");
    assert_eq!(h.issuer.device_lane_pending(), 0);
    drop(lane);

    // Then the queue runs again: every queued sign-in is verified.
    for task in queued {
        let reply = task.await.expect("join");
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text());
    }
}

#[tokio::test]
async fn the_lane_keeps_the_back_off_and_the_form_flow_gets_and_sends_the_cookie() {
    let h = Harness::new();
    let carol = device_of(&h, "carol", 1).await;
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    for n in 0..5 {
        let reply = h
            .login_from(
                peer(10 + n),
                &ticket,
                "carol",
                "wrong password here",
                Some(&carol),
            )
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    }
    let blocked = h
        .login_from(peer(20), &ticket, "carol", PASSWORD, Some(&carol))
        .await;
    assert_eq!(
        blocked.status,
        StatusCode::TOO_MANY_REQUESTS,
        "the back-off holds with a cookie"
    );

    // The browser's form: the 303 sets the cookie, and a cookie it sends is renewed.
    let (_, ticket) = h.sign_in_page().await;
    let body = form(&[("ticket", &ticket), ("username", "alice"), ("password", PASSWORD)]);
    let reply = h.post_form("/oidc/login", &body).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let first = reply
        .device_cookie()
        .expect("the form's redirect sets the cookie");
    let set = reply.headers[header::SET_COOKIE]
        .to_str()
        .expect("ascii")
        .to_owned();
    for attribute in ["; Path=/", "; Secure", "; HttpOnly", "; SameSite=Strict"] {
        assert!(set.contains(attribute), "{set} lacks {attribute}");
    }
    let reply = h
        .send(
            axum::http::Request::post("/oidc/login")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(header::COOKIE, format!("theme=dark; __Host-ichor-device={first}"))
                .body(axum::body::Body::from(body))
                .expect("req"),
        )
        .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let second = reply.device_cookie().expect("renewed");
    assert_eq!(claims(&second)["dev"], claims(&first)["dev"], "the same device");
}

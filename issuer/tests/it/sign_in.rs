//! `/oidc/login`: must-change, disabled users, the per-user back-off, the per-source limit
//! with trusted proxies, store outages, the HTML form and rehashing.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::{net::SocketAddr, sync::atomic::Ordering};

use crate::common::*;
use argon2::{Argon2, Params, password_hash::CustomizedPasswordHasher};
use axum::{
    body::Body,
    extract::ConnectInfo,
    http::{Request, StatusCode, header},
};
use ichor_issuer::oidc::TrustedProxies;
use ichor_renderers::auth::credentials::CredentialsEntry;
use jiff::SignedDuration;

#[tokio::test]
async fn a_must_change_user_gets_an_ichor_ui_token_but_no_ichor_kube_token() {
    let h = Harness::new();
    h.store.set_entry("alice", entry(true));
    let ticket = h
        .ticket("ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = h.login(&ticket, "alice", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(reply.error(), "access_denied");
    assert!(
        reply.json()["error_description"]
            .as_str()
            .expect("d")
            .contains("change your password")
    );

    let code = h.code("alice", "ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h.exchange(&code, "ichor-ui", UI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK);

    // The CLI asking for an ichor-ui token is fine too.
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid", "&audience=ichor-ui")
        .await;
    assert_eq!(
        h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER)
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn must_change_set_after_sign_in_stops_the_kubernetes_refresh_but_not_the_ui_one() {
    let h = Harness::new();
    let session = h.cli_session("alice").await;
    let mut e = h.store.entry("alice").expect("entry");
    e.must_change = true;
    h.store.set_entry("alice", e);
    let token = session["refresh_token"].as_str().expect("r");
    let reply = h.refresh(token, "ichor-cli", None).await;
    assert_eq!(reply.error(), "invalid_grant");
    assert!(
        reply.json()["error_description"]
            .as_str()
            .expect("d")
            .contains("change your password")
    );
    let reply = h.refresh(token, "ichor-cli", Some("ichor-ui")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

#[tokio::test]
async fn a_disabled_user_gets_nothing() {
    let h = Harness::new();
    h.store.update_user("alice", |u| u.disabled = true);
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let right = h.login(&ticket, "alice", PASSWORD).await;
    assert_eq!(right.status, StatusCode::FORBIDDEN);
    assert!(
        right.json()["error_description"]
            .as_str()
            .expect("d")
            .contains("disabled")
    );
    let wrong = h.login(&ticket, "alice", "not the password at all").await;
    assert_eq!(
        wrong.status,
        StatusCode::UNAUTHORIZED,
        "a wrong password says nothing more"
    );
    assert!(h.metrics().contains("reason=\"disabled\"} 1"));
}

#[tokio::test]
async fn an_unknown_user_and_a_wrong_password_get_the_same_answer() {
    let h = Harness::new();
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let unknown = h.login(&ticket, "nobody", PASSWORD).await;
    let wrong = h.login(&ticket, "alice", "wrong password here").await;
    let no_password = h.login(&ticket, "mallory", PASSWORD).await;
    let invalid_name = h.login(&ticket, "Not A Name!", PASSWORD).await;
    for reply in [&unknown, &wrong, &no_password, &invalid_name] {
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.body, wrong.body);
    }
}

#[tokio::test]
async fn five_failures_make_the_user_back_off_even_with_the_right_password() {
    let h = Harness::new();
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    for _ in 0..5 {
        assert_eq!(
            h.login(&ticket, "alice", "wrong password here").await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    let blocked = h.login(&ticket, "alice", PASSWORD).await;
    assert_eq!(blocked.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(blocked.headers.contains_key(header::RETRY_AFTER));
    // Another user is not affected.
    assert_eq!(h.login(&ticket, "carol", PASSWORD).await.status, StatusCode::OK);
    // After the back-off the right password works again, and resets the count.
    h.clock.advance(SignedDuration::from_secs(2));
    assert_eq!(h.login(&ticket, "alice", PASSWORD).await.status, StatusCode::OK);
    assert!(h.metrics().contains("reason=\"user_backoff\"} 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_wrong_attempts_cannot_slip_past_the_back_off() {
    let h = std::sync::Arc::new(Harness::new());
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (h, ticket) = (std::sync::Arc::clone(&h), ticket.clone());
            tokio::spawn(async move { h.login(&ticket, "alice", "wrong password here").await.status })
        })
        .collect();
    let mut verified = 0;
    for t in tasks {
        match t.await.expect("join") {
            StatusCode::UNAUTHORIZED => verified += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert!(verified <= 5, "{verified} attempts were verified");
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    assert_eq!(
        h.login(&ticket, "alice", PASSWORD).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_password_queue_sheds_sign_ins_at_once_with_a_503_and_retry_after() {
    // Two permits and sixteen places: forty sign-ins at once (forty sources and forty names, so
    // neither the per-source limit nor the per-user one applies; unknown names cost one argon2id
    // verification like any other) cannot all wait; those past the queue are told at once to
    // come back.
    let h = std::sync::Arc::new(Harness::new());
    let tasks: Vec<_> = (0..40u8)
        .map(|i| {
            let h = std::sync::Arc::clone(&h);
            tokio::spawn(async move {
                let peer: SocketAddr = format!("198.51.100.{i}:4000").parse().expect("addr");
                let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
                let mut req = Request::post("/oidc/login")
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(
                        serde_json::json!({"ticket": ticket, "username": format!("nobody-{i}"), "password": PASSWORD})
                            .to_string(),
                    ))
                    .expect("req");
                req.extensions_mut().insert(ConnectInfo(peer));
                h.send(req).await
            })
        })
        .collect();
    let (mut verified, mut shed) = (0, 0);
    for t in tasks {
        let reply = t.await.expect("join");
        match reply.status {
            StatusCode::UNAUTHORIZED => verified += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                shed += 1;
                assert_eq!(reply.error(), "temporarily_unavailable");
                assert!(reply.text().contains("busy"), "{}", reply.text());
                assert_eq!(reply.headers[header::RETRY_AFTER], "2");
            }
            other => panic!("unexpected {other}: {}", reply.text()),
        }
    }
    assert!(
        verified >= 18,
        "the two running and sixteen queued are all verified, got {verified}"
    );
    assert!(
        shed >= 1 && verified + shed == 40,
        "verified {verified}, shed {shed}"
    );
    assert!(
        h.metrics()
            .contains(&format!("reason=\"hash_queue_full\"}} {shed}")),
        "{}",
        h.metrics()
    );
    // A sign-in shed while the queue is full never reads the store (on the Kubernetes store a
    // read is a GET of the whole credentials Secret).
    let reads = h.store.credential_reads.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        reads >= verified && reads < 40,
        "{reads} credential reads for {verified} verified and {shed} shed sign-ins"
    );
    // Shed attempts are no attempts: alice signs in right after.
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    assert_eq!(h.login(&ticket, "alice", PASSWORD).await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_sign_in_page_without_a_ticket_is_an_error() {
    let h = Harness::new();
    let reply = h.get("/oidc/login").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.text().contains("expired or is invalid"));
    assert_eq!(reply.headers[header::CACHE_CONTROL], "no-store");
    let css = h.get("/oidc/assets/login.css").await;
    assert_eq!(css.status, StatusCode::OK);
    assert!(
        css.headers[header::CONTENT_TYPE]
            .to_str()
            .expect("ct")
            .starts_with("text/css")
    );
}

#[tokio::test]
async fn a_store_outage_at_sign_in_is_a_503_without_user_information() {
    let h = Harness::new();
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    h.store.unavailable.store(true, Ordering::SeqCst);
    let reply = h.login(&ticket, "alice", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.error(), "temporarily_unavailable");
    assert!(!reply.text().contains("alice"));
    let reply = h.login(&ticket, "nobody", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn the_html_form_redirects_with_code_state_and_iss_on_success() {
    let h = Harness::new();
    let (_, ticket) = h.sign_in_page().await;
    let body = form(&[("ticket", &ticket), ("username", "alice"), ("password", PASSWORD)]);
    let reply = h.post_form("/oidc/login", &body).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let to = reply.location();
    assert!(to.starts_with(CLI_REDIRECT), "{to}");
    assert_eq!(query_param(&to, "state").as_deref(), Some("st-1"));
    assert_eq!(query_param(&to, "iss").as_deref(), Some(ISSUER));
    assert!(query_param(&to, "code").is_some());

    let body = form(&[
        ("ticket", &ticket),
        ("username", "alice"),
        ("password", "nope nope nope"),
    ]);
    let reply = h.post_form("/oidc/login", &body).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(reply.text().contains("The user name or password is incorrect."));
    assert!(reply.text().contains("value=\"alice\""), "the user name is kept");
    assert!(
        reply.headers["content-security-policy"]
            .to_str()
            .expect("csp")
            .contains("frame-ancestors 'none'")
    );
}

#[tokio::test]
async fn a_disabled_user_on_the_redirect_flow_goes_back_to_the_client_with_access_denied() {
    let h = Harness::new();
    h.store.update_user("alice", |u| u.disabled = true);
    let ticket = h.ticket("ichor-cli", CLI_REDIRECT, "openid", "").await;
    let body = form(&[("ticket", &ticket), ("username", "alice"), ("password", PASSWORD)]);
    let reply = h.post_form("/oidc/login", &body).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert_eq!(
        query_param(&reply.location(), "error").as_deref(),
        Some("access_denied")
    );
}

#[tokio::test]
async fn a_forged_or_expired_ticket_is_refused_before_any_password_work() {
    let h = Harness::new();
    let reply = h.login("forged.ticket.value", "alice", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    h.clock.advance(SignedDuration::from_mins(5));
    assert_eq!(
        h.login(&ticket, "alice", PASSWORD).await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        h.get(&format!("/oidc/login?ticket={ticket}")).await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn a_hash_with_old_parameters_is_replaced_at_sign_in_without_ending_sessions() {
    let h = Harness::new();
    let old = Argon2::default()
        .hash_password_with_params(
            PASSWORD.as_bytes(),
            b"0123456789abcdef",
            Params::new(64, 1, 1, None).expect("p"),
        )
        .expect("hash")
        .to_string();
    let mut e = CredentialsEntry::new(old.clone(), start() - SignedDuration::from_hours(1), false);
    e = e
        .start_family(
            "fam1",
            "ichor-cli",
            "ichor-kube",
            start(),
            SignedDuration::from_hours(1),
        )
        .expect("family");
    h.store.set_entry("carol", e);
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    assert_eq!(h.login(&ticket, "carol", PASSWORD).await.status, StatusCode::OK);
    let after = h.store.entry("carol").expect("entry");
    assert_ne!(after.hash, old);
    assert!(after.hash.starts_with("$argon2id$v=19$m=65536,t=3,p=4$"));
    assert!(after.families.contains_key("fam1"));
}

async fn token_request_from(h: &Harness, peer: &str, xff: Option<&str>) -> StatusCode {
    let mut req = Request::post("/oidc/token")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("grant_type=password"))
        .expect("req");
    if let Some(x) = xff {
        req.headers_mut()
            .insert("x-forwarded-for", x.parse().expect("hv"));
    }
    let peer: SocketAddr = peer.parse().expect("addr");
    req.extensions_mut().insert(ConnectInfo(peer));
    h.send(req).await.status
}

#[tokio::test]
async fn forwarded_for_counts_only_behind_a_trusted_proxy() {
    let h = Harness::with_proxies(TrustedProxies::parse(&["10.0.0.0/8"]).expect("proxies"));
    // Behind the trusted proxy, each client has its own bucket (60 requests).
    for _ in 0..60 {
        assert_ne!(
            token_request_from(&h, "10.0.0.1:1", Some("203.0.113.5")).await,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    assert_eq!(
        token_request_from(&h, "10.0.0.1:1", Some("203.0.113.5")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_ne!(
        token_request_from(&h, "10.0.0.1:1", Some("203.0.113.6")).await,
        StatusCode::TOO_MANY_REQUESTS,
        "another client behind the same proxy"
    );
    // An untrusted peer cannot escape its bucket by sending X-Forwarded-For.
    for i in 0..60 {
        let xff = format!("198.51.100.{i}");
        assert_ne!(
            token_request_from(&h, "192.0.2.77:1", Some(&xff)).await,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    assert_eq!(
        token_request_from(&h, "192.0.2.77:1", Some("198.51.100.200")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert!(h.metrics().contains("reason=\"source_rate\"} 2"));
}

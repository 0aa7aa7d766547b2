//! The second step of a sign-in through the real endpoints: a user with an authenticator app or
//! recovery codes gets a second-factor ticket instead of a code, and `/oidc/login/factor` turns
//! it and a typed code into the code; tokens carry `amr` (RFC 8176), refreshes repeat it. A code
//! works once, wrong codes back the step off on every replica whatever the password step did, a
//! ticket outlives no reset, and neither a code minted without the factor nor a session from
//! before it gets a token.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::common::*;
use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use ichor_issuer::{
    store::UserStore,
    tokens::{self, CodeClaims},
};
use ichor_renderers::auth::totp;
use jiff::SignedDuration;

/// dave: an operator with an authenticator app and recovery codes (returned).
fn with_dave(h: &Harness) -> Vec<String> {
    let (entry, codes) = factor_entry();
    h.store.add_user("dave", &["admin"], Some(entry));
    codes
}

/// The code dave's authenticator app shows now.
fn app_code(h: &Harness) -> String {
    totp::code_at(TOTP_SECRET, h.clock.now_ts()).expect("code")
}

/// dave's password step for `client`: the second-factor ticket of its answer.
async fn password_step(h: &Harness, client: &str, redirect: &str, scope: &str) -> String {
    let ticket = h.ticket(client, redirect, scope, "").await;
    let reply = h.login(&ticket, "dave", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let body = reply.json();
    assert!(
        body.get("redirect_uri").is_none(),
        "no code before the second factor: {body}"
    );
    assert_eq!(body["factors"], serde_json::json!(["totp", "recovery"]), "{body}");
    body["factor_ticket"].as_str().expect("factor_ticket").to_owned()
}

/// The code in a successful second step's answer.
fn code_of(reply: &Reply) -> String {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let redirect = reply.json()["redirect_uri"]
        .as_str()
        .expect("redirect_uri")
        .to_owned();
    assert_eq!(query_param(&redirect, "state").as_deref(), Some("st-1"));
    query_param(&redirect, "code").expect("code")
}

#[tokio::test]
async fn an_authenticator_code_completes_the_sign_in_and_every_token_says_how() {
    let h = Harness::new();
    with_dave(&h);
    let pending = password_step(&h, "ichor-cli", CLI_REDIRECT, "openid offline_access").await;
    let ticket_claims = claims(&pending);
    assert_eq!(ticket_claims["sub"], "dave");
    assert!(ticket_claims.get("password").is_none() && ticket_claims.get("secret").is_none());
    assert_eq!(jose_header(&pending)["typ"], "ichor-factor+jwt");

    let code = code_of(&h.factor(&pending, &app_code(&h)).await);
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let tokens = reply.json();
    let id = claims(tokens["id_token"].as_str().expect("id_token"));
    assert_eq!(id["amr"], serde_json::json!(["pwd", "otp", "mfa"]), "{id}");
    assert_eq!(id["sub"], "dave");
    let family = h.store.entry("dave").expect("entry");
    let (fam, recorded) = family.families.iter().next().expect("a family");
    assert_eq!(
        recorded.amr,
        ["pwd", "otp", "mfa"],
        "the family records the sign-in's amr"
    );

    // A refresh repeats what the sign-in proved, never more.
    h.clock.advance(SignedDuration::from_mins(5));
    let refreshed = h
        .refresh(
            tokens["refresh_token"].as_str().expect("refresh"),
            "ichor-cli",
            None,
        )
        .await;
    assert_eq!(refreshed.status, StatusCode::OK, "{}", refreshed.text());
    let id = claims(refreshed.json()["id_token"].as_str().expect("id_token"));
    assert_eq!(
        id["amr"],
        serde_json::json!(["pwd", "otp", "mfa"]),
        "{id} ({fam})"
    );

    // A password-only user's tokens say so.
    let alice = h.cli_session("alice").await;
    let id = claims(alice["id_token"].as_str().expect("id_token"));
    assert_eq!(id["amr"], serde_json::json!(["pwd"]), "{id}");
    let discovery = h.get("/.well-known/openid-configuration").await.json();
    assert!(
        discovery["claims_supported"]
            .as_array()
            .expect("claims")
            .iter()
            .any(|c| c == "amr"),
        "{discovery}"
    );
}

#[tokio::test]
async fn an_authenticator_code_works_once_and_each_recovery_code_once() {
    let h = Harness::new();
    let codes = with_dave(&h);
    let code = app_code(&h);
    let first = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    code_of(&h.factor(&first, &code).await);
    // The same code on a new sign-in (as a phisher relaying it would): refused.
    let second = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    refused_as_wrong(&h.factor(&second, &code).await);
    // The same ticket with a recovery code: accepted, once.
    code_of(&h.factor(&second, &codes[3]).await);
    let third = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    refused_as_wrong(&h.factor(&third, &codes[3]).await);
    let entry = h.store.entry("dave").expect("entry");
    assert_eq!(
        entry.factors.recovery.as_ref().expect("codes").digests.len(),
        9,
        "one digest used"
    );
    // Thirty seconds on, the app's next code is good.
    h.clock.advance(SignedDuration::from_secs(30));
    code_of(&h.factor(&third, &app_code(&h)).await);
}

/// A ticket completes one sign-in: once a code was accepted with it, another right code (as
/// from someone who copied the ticket and the next code) mints nothing, and neither does a
/// ticket of a password step made before another sign-in used a factor.
#[tokio::test]
async fn a_second_factor_ticket_completes_one_sign_in() {
    let h = Harness::new();
    let codes = with_dave(&h);
    let first = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    let earlier = password_step(&h, "ichor-cli", CLI_REDIRECT, "openid").await;
    code_of(&h.factor(&first, &app_code(&h)).await);
    for (ticket, code) in [(&first, &codes[0]), (&earlier, &codes[1])] {
        let reply = h.factor(ticket, code).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
        assert!(reply.text().contains("no longer valid"), "{}", reply.text());
    }
    let entry = h.store.entry("dave").expect("entry");
    assert_eq!(
        entry.factors.recovery.as_ref().expect("codes").digests.len(),
        10,
        "a spent ticket used no recovery code"
    );
    // A wrong code leaves the ticket good for the right one.
    let next = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    refused_as_wrong(&h.factor(&next, "000000x").await);
    code_of(&h.factor(&next, &codes[2]).await);
}

/// A spent ticket sent again costs its source like a wrong code, so it cannot be replayed
/// without limit (each one reads the user's entry through the user's write queue).
#[tokio::test]
async fn a_spent_ticket_sent_again_and_again_is_slowed_down() {
    let h = Harness::new();
    let codes = with_dave(&h);
    let ticket = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    code_of(&h.factor(&ticket, &app_code(&h)).await);
    let mut answered = 0;
    loop {
        let reply = h.factor(&ticket, &codes[0]).await;
        if reply.status == StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
        answered += 1;
        assert!(
            answered <= 10,
            "a spent ticket was answered {answered} times from one source"
        );
    }
    assert!(
        answered >= 1,
        "the first replay is answered (the ticket is spent)"
    );
}

/// An attacker who has the password alone: each right password gives a new ticket, and would
/// clear the password's back-off; the code's failures are counted in the entry, so neither a
/// new password step nor another replica buys more guesses at the code.
#[tokio::test]
async fn wrong_codes_back_off_the_second_step_across_password_steps_and_replicas() {
    let h = Harness::new();
    with_dave(&h);
    let pending = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    let right = app_code(&h);
    let wrong = format!("{:06}", (right.parse::<u32>().expect("digits") + 1) % 1_000_000);
    for _ in 0..5 {
        refused_as_wrong(&h.factor(&pending, &wrong).await);
    }
    assert_eq!(h.store.entry("dave").expect("entry").factors.failures, 5);
    // The sixth attempt waits, even with the right code.
    let blocked = h.factor(&pending, &right).await;
    assert_eq!(
        blocked.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        blocked.text()
    );
    // A right password again (from another address) is not refused — the real user is not
    // locked out of it — but its new ticket meets the same wait.
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let login = h
        .login_from(
            "203.0.113.9:4000".parse().expect("addr"),
            &ticket,
            "dave",
            PASSWORD,
            None,
        )
        .await;
    assert_eq!(login.status, StatusCode::OK, "{}", login.text());
    let fresh = login.json()["factor_ticket"]
        .as_str()
        .expect("factor_ticket")
        .to_owned();
    let blocked = h.factor(&fresh, &right).await;
    assert_eq!(
        blocked.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        blocked.text()
    );
    // So does another replica over the same store, whose own limits are fresh.
    let other = replica(
        Arc::clone(&h.store) as Arc<dyn UserStore>,
        Arc::clone(&h.store),
        Arc::clone(&h.ring),
        Arc::clone(&h.settings),
        Arc::clone(&h.clock),
    );
    let blocked = other.factor(&fresh, &right).await;
    assert_eq!(
        blocked.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        blocked.text()
    );
    // Once the wait is over, the right code passes and the count is cleared.
    h.clock.advance(SignedDuration::from_secs(2));
    code_of(&other.factor(&fresh, &right).await);
    assert_eq!(h.store.entry("dave").expect("entry").factors.failures, 0);
}

/// A session started with the password alone before the user enrolled ends at its next
/// refresh: the second factor cannot be skipped by keeping an old session.
#[tokio::test]
async fn a_session_from_before_the_factor_ends_at_its_next_refresh() {
    let h = Harness::new();
    h.store.add_user("erin", &["admin"], Some(entry(false)));
    let session = h.cli_session("erin").await;
    let (enrolled, _) = factor_entry();
    let mut now_with_factor = h.store.entry("erin").expect("entry");
    now_with_factor.factors = enrolled.factors;
    h.store.set_entry("erin", now_with_factor);
    let refused = h
        .refresh(
            session["refresh_token"].as_str().expect("refresh"),
            "ichor-cli",
            None,
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text());
    assert_eq!(refused.error(), "invalid_grant");
    assert!(refused.text().contains("second factor"), "{}", refused.text());
    assert!(
        h.store.entry("erin").expect("entry").families.is_empty(),
        "the family is gone"
    );
}

#[tokio::test]
async fn a_reset_between_the_steps_ends_the_pending_sign_in() {
    let h = Harness::new();
    with_dave(&h);
    let pending = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    // An admin resets dave's password meanwhile: notBefore moves.
    h.clock.advance(SignedDuration::from_secs(5));
    let entry = h.store.entry("dave").expect("entry");
    let reset = entry.with_new_password(password_hash(), h.clock.now_ts(), false);
    h.store.set_entry("dave", reset);
    let reply = h.factor(&pending, &app_code(&h)).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert!(reply.text().contains("no longer valid"), "{}", reply.text());
    // A disabled user's pending sign-in ends too.
    let pending = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    h.store.update_user("dave", |u| u.disabled = true);
    let reply = h.factor(&pending, &app_code(&h)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
}

#[tokio::test]
async fn no_ticket_of_another_kind_passes_for_a_second_factor_ticket_or_back() {
    let h = Harness::new();
    with_dave(&h);
    let login_ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h.factor(&login_ticket, &app_code(&h)).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert_eq!(reply.error(), "invalid_request");
    let pending = password_step(&h, "ichor-ui", UI_REDIRECT, "openid").await;
    let reply = h.login(&pending, "dave", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    // An expired second-factor ticket.
    h.clock.advance(SignedDuration::from_mins(6));
    let reply = h.factor(&pending, &app_code(&h)).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
}

#[tokio::test]
async fn a_code_without_the_second_factor_is_refused_for_a_user_who_has_one() {
    let h = Harness::new();
    with_dave(&h);
    // A code for dave with the password alone, as one minted just before dave enrolled (or by
    // a replica that skipped the step) would be.
    let now = h.clock.now_ts();
    let iat = now.as_second();
    let code = CodeClaims {
        iss: ISSUER.to_owned(),
        jti: "jti-no-factor".to_owned(),
        client_id: "ichor-cli".to_owned(),
        redirect_uri: CLI_REDIRECT.to_owned(),
        sub: "dave".to_owned(),
        nonce: "no-1".to_owned(),
        code_challenge: ichor_issuer::oidc::request::s256_challenge(VERIFIER),
        offline_access: true,
        audience: "ichor-kube".to_owned(),
        amr: Vec::new(),
        iat,
        exp: iat + 60,
    };
    let code = tokens::sign_artifact(&h.keys(), &code, now, now).expect("sign");
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert_eq!(reply.error(), "invalid_grant");
    assert!(reply.text().contains("second factor"), "{}", reply.text());
    assert!(
        h.store.entry("dave").expect("entry").families.is_empty(),
        "no session started"
    );
}

#[tokio::test]
async fn the_page_without_script_asks_for_the_code_and_posts_it() {
    let h = Harness::new();
    with_dave(&h);
    let (_, ticket) = h.sign_in_page().await;
    let reply = h
        .post_form(
            "/oidc/login",
            &form(&[("ticket", &ticket), ("username", "dave"), ("password", PASSWORD)]),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let page = reply.text();
    assert!(page.contains("action=\"/oidc/login/factor\""), "{page}");
    assert!(page.contains("one of your recovery codes"), "{page}");
    assert!(
        page.contains("<script type=\"application/json\" id=\"ichor-sign-in\">{\"factor_ticket\":"),
        "the UI's card, with the second step's data: {page}"
    );
    assert!(
        reply.headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .expect("csp")
            .contains("form-action 'self'")
    );
    let at = page
        .find("name=\"factor_ticket\" value=\"")
        .expect("the ticket field")
        + 28;
    let pending = &page[at..at + page[at..].find('"').expect("end")];

    let wrong = h
        .post_form(
            "/oidc/login/factor",
            &form(&[("factor_ticket", pending), ("code", "000000x")]),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "{}", wrong.text());
    assert!(wrong.text().contains("The code is incorrect"), "{}", wrong.text());
    assert!(wrong.text().contains(pending), "the form again, with its ticket");

    let req = Request::post("/oidc/login/factor")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form(&[
            ("factor_ticket", pending),
            ("code", &app_code(&h)),
        ])))
        .expect("req");
    let done = h.send(req).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text());
    assert!(done.location().starts_with(CLI_REDIRECT), "{}", done.location());
    assert!(
        done.device_cookie().is_some(),
        "the device cookie is set at the end"
    );
}

//! The installation's second-factor policy (`spec.users.secondFactor`) at every step that mints
//! an `ichor-kube` token: a user it requires a factor of who has none gets no Kubernetes token —
//! not at the password step, not from a code, not from a refresh — and is told to set one up in
//! the web UI, whose `ichor-ui` tokens they still get; with a factor they pass after the second
//! step. A weaker level, or none, changes nothing.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;
use axum::http::StatusCode;
use ichor_issuer::oidc::ENROL_FIRST;
use ichor_renderers::auth::{second_factor_policy::MUST_ENROL, totp};
use serde_json::json;

/// A harness whose installation requires a second factor of admins (alice is one, without a
/// factor; carol is a viewer).
fn admins_required() -> Harness {
    let h = Harness::new();
    h.settings.store(settings_with_second_factor(
        json!({"roles": {"admin": "required"}}),
    ));
    h
}

fn description(reply: &Reply) -> String {
    reply.json()["error_description"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// The refusal of a grant for a user who must enrol first.
fn refused_until_enrolled(reply: &Reply) {
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert_eq!(reply.error(), "invalid_grant");
    assert_eq!(description(reply), ENROL_FIRST);
    assert!(ENROL_FIRST.contains("sign in to the Ichor web UI"));
}

#[tokio::test]
async fn an_admin_without_a_factor_gets_no_kubernetes_token_at_the_password_step_but_the_ui_one() {
    let h = admins_required();
    let ticket = h
        .ticket("ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = h.login(&ticket, "alice", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    assert_eq!(reply.error(), "access_denied");
    assert_eq!(description(&reply), MUST_ENROL);
    assert!(MUST_ENROL.contains("Sign in to the Ichor web UI, set up a second factor"));
    assert!(
        h.metrics().contains("reason=\"must_enrol\"} 1"),
        "{}",
        h.metrics()
    );

    // The browser form of `ichor auth login`: the refusal goes back to the CLI's redirect URI.
    let (_, ticket) = h.sign_in_page().await;
    let body = form(&[("ticket", &ticket), ("username", "alice"), ("password", PASSWORD)]);
    let reply = h.post_form("/oidc/login", &body).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let to = reply.location();
    assert!(to.starts_with(CLI_REDIRECT), "{to}");
    assert_eq!(query_param(&to, "error").as_deref(), Some("access_denied"));
    assert_eq!(query_param(&to, "error_description").as_deref(), Some(MUST_ENROL));
    assert_eq!(query_param(&to, "code"), None);

    // The web UI lets her in, so its account page can enrol her; so does the CLI for ichor-ui.
    let code = h.code("alice", "ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h.exchange(&code, "ichor-ui", UI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid", "&audience=ichor-ui")
        .await;
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());

    // A wrong password says nothing about the policy.
    let ticket = h.ticket("ichor-cli", CLI_REDIRECT, "openid", "").await;
    let wrong = h.login(&ticket, "alice", "not the password at all").await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(!wrong.text().contains("second factor"), "{}", wrong.text());
}

#[tokio::test]
async fn a_code_minted_before_the_policy_changed_gets_no_kubernetes_token() {
    let h = Harness::new();
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    h.settings.store(settings_with_second_factor(
        json!({"roles": {"admin": "required"}}),
    ));
    refused_until_enrolled(&h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await);
    assert!(
        h.store.entry("alice").expect("entry").families.is_empty(),
        "no session was started"
    );
}

#[tokio::test]
async fn a_kubernetes_session_of_an_admin_made_to_need_a_factor_is_refused_at_its_next_refresh() {
    let h = Harness::new();
    let session = h.cli_session("alice").await;
    let token = session["refresh_token"].as_str().expect("refresh");
    h.settings.store(settings_with_second_factor(
        json!({"roles": {"admin": "required"}}),
    ));
    refused_until_enrolled(&h.refresh(token, "ichor-cli", None).await);
    // The same session may still get an ichor-ui token (the web UI, to enrol).
    let reply = h.refresh(token, "ichor-cli", Some("ichor-ui")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let token = reply.json()["refresh_token"]
        .as_str()
        .expect("refresh")
        .to_owned();

    // She enrols an authenticator app (as if the enrolment kept her sessions): the
    // password-only session ends, for every audience — someone else's with her stolen password
    // included, who could otherwise remove her new factor from the account page.
    let mut entry = h.store.entry("alice").expect("entry");
    entry.factors = factor_entry().0.factors;
    h.store.set_entry("alice", entry);
    let reply = h.refresh(&token, "ichor-cli", Some("ichor-ui")).await;
    assert_eq!(reply.error(), "invalid_grant", "{}", reply.text());
    assert!(
        description(&reply).contains("before the user had a second factor"),
        "{}",
        reply.text()
    );
    let reply = h.refresh(&token, "ichor-cli", None).await;
    assert_eq!(reply.error(), "invalid_grant", "{}", reply.text());
}

#[tokio::test]
async fn an_admin_with_a_factor_passes_after_the_second_step_and_refreshes() {
    let h = admins_required();
    let (entry, _) = factor_entry();
    h.store.set_entry("alice", entry);
    let ticket = h
        .ticket("ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = h.login(&ticket, "alice", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let pending = reply.json()["factor_ticket"]
        .as_str()
        .expect("the second step, not a refusal")
        .to_owned();
    let app = totp::code_at(TOTP_SECRET, h.clock.now_ts()).expect("code");
    let reply = h.factor(&pending, &app).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let redirect = reply.json()["redirect_uri"]
        .as_str()
        .expect("redirect")
        .to_owned();
    let code = query_param(&redirect, "code").expect("code");
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let tokens = reply.json();
    let id = claims(tokens["id_token"].as_str().expect("id_token"));
    assert_eq!(id["aud"], "ichor-kube");
    assert_eq!(id["amr"], json!(["pwd", "otp", "mfa"]));
    let reply = h
        .refresh(
            tokens["refresh_token"].as_str().expect("refresh"),
            "ichor-cli",
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

#[tokio::test]
async fn a_viewer_under_optional_and_everyone_under_off_are_unaffected() {
    let h = Harness::new();
    h.settings.store(settings_with_second_factor(
        json!({"default": "optional", "roles": {"admin": "required"}}),
    ));
    let session = h.cli_session("carol").await;
    let reply = h
        .refresh(
            session["refresh_token"].as_str().expect("refresh"),
            "ichor-cli",
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());

    // `off` for admins and by default: alice, an admin without a factor, signs in and refreshes
    // as without a policy.
    h.settings.store(settings_with_second_factor(
        json!({"default": "off", "roles": {"admin": "off"}}),
    ));
    let session = h.cli_session("alice").await;
    let token = session["refresh_token"].as_str().expect("refresh");
    let id = claims(session["id_token"].as_str().expect("id_token"));
    assert_eq!(id["aud"], "ichor-kube");
    let reply = h.refresh(token, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(!h.metrics().contains("must_enrol"), "{}", h.metrics());
}

//! The factors the API enrols are the ones the sign-in asks for: the issuer and the service over
//! one store, one clock and one key ring, as `ichor-issuer` composes them. An authenticator app
//! enrolled through `BeginTotp`/`ConfirmTotp` makes the password step ask for a second factor,
//! the recovery codes shown once each work once at `/oidc/login/factor`, and an administrator's
//! reset ends the session that second step started and lets the next sign-in through on the
//! password alone.

use super::*;
use axum::http::StatusCode;
use ichor_issuer::{
    api::proto::{BeginTotpRequest, ConfirmTotpRequest},
    oidc::Settings,
    store::UserStore,
};
use ichor_renderers::auth::totp;
use ichor_testkit::issuer::{
    harness::{self, CLI_REDIRECT, Harness, Reply, VERIFIER, query_param, replica},
    store::MemoryStore,
};

/// The issuer over the service's store, clock and keys.
fn issuer_beside(e: &Env) -> Harness {
    replica(
        Arc::clone(&e.store) as Arc<dyn UserStore>,
        Arc::new(MemoryStore::default()),
        key_ring(),
        Arc::new(Settings::new(harness::settings())),
        Arc::clone(&e.clock),
    )
}

/// `user`'s password step for `ichor-cli` with `offline_access`: the JSON answer.
async fn password_step(h: &Harness, user: &str) -> serde_json::Value {
    let ticket = h
        .ticket("ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = h.login(&ticket, user, harness::PASSWORD).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply.json()
}

fn code_in(reply: &Reply) -> String {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let redirect = reply.json()["redirect_uri"]
        .as_str()
        .expect("redirect_uri")
        .to_owned();
    query_param(&redirect, "code").expect("code")
}

#[tokio::test]
async fn enrolled_factors_guard_the_sign_in_and_a_reset_ends_the_session_they_started() {
    let e = env();
    let hash = harness::password_hash();
    e.seed("alice", &["admin"], false, Some(&hash), false).await;
    e.seed("dave", &["operator"], false, Some(&hash), false).await;
    let h = issuer_beside(&e);
    assert!(
        password_step(&h, "dave").await.get("redirect_uri").is_some(),
        "no factor yet: the password alone signs in"
    );

    // dave enrols an authenticator app.
    let t = token("dave", e.clock.now_ts());
    let begun = e
        .api
        .begin_totp(req(
            &t,
            BeginTotpRequest {
                password: harness::PASSWORD.into(),
                code: String::new(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let code = totp::code_at(&begun.secret, e.clock.now_ts()).unwrap();
    let codes = e
        .api
        .confirm_totp(req(
            &t,
            ConfirmTotpRequest {
                ticket: begun.ticket.clone(),
                code,
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .recovery_codes;

    // The password step now asks for the second factor; a recovery code shown once works once.
    let pending = password_step(&h, "dave").await;
    assert!(pending.get("redirect_uri").is_none(), "{pending}");
    assert_eq!(pending["factors"], serde_json::json!(["totp", "recovery"]));
    let ticket = pending["factor_ticket"].as_str().unwrap().to_owned();
    let reply = h.factor(&ticket, &codes[3]).await;
    let code = code_in(&reply);
    let tokens = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(tokens.status, StatusCode::OK, "{}", tokens.text());
    let refresh = tokens.json()["refresh_token"].as_str().unwrap().to_owned();
    let pending = password_step(&h, "dave").await;
    let again = h
        .factor(pending["factor_ticket"].as_str().unwrap(), &codes[3])
        .await;
    assert_eq!(again.status, StatusCode::UNAUTHORIZED, "{}", again.text());
    // The app's next code works too.
    e.clock.advance(SignedDuration::from_secs(30));
    let pending = password_step(&h, "dave").await;
    let app = totp::code_at(&begun.secret, e.clock.now_ts()).unwrap();
    code_in(&h.factor(pending["factor_ticket"].as_str().unwrap(), &app).await);

    // An administrator resets dave's factors: the session ends, the password alone signs in.
    e.clock.advance(SignedDuration::from_secs(1));
    let t = token("alice", e.clock.now_ts());
    e.api
        .set_password(req(
            &t,
            SetPasswordRequest {
                name: "dave".into(),
                new_password: None,
                reset_factors: true,
            },
        ))
        .await
        .unwrap();
    let refused = h.refresh(&refresh, "ichor-cli", None).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text());
    assert_eq!(refused.error(), "invalid_grant");
    let signed_in = password_step(&h, "dave").await;
    assert!(signed_in.get("redirect_uri").is_some(), "{signed_in}");
}

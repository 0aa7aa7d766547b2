//! The passkey step of a sign-in through the real endpoints, short of a real signature (the
//! browser test signs with Chromium's virtual authenticator, `ui/e2e/passkeys.mjs`): a user with
//! a passkey is offered it with the options `navigator.credentials.get` takes, naming that
//! passkey and this site; an answer that does not verify is refused like a wrong code and
//! counted by the same back-off; a ticket that offered no passkey takes no passkey answer.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;
use axum::http::StatusCode;
use ichor_testkit::issuer::passkey::{CREDENTIAL_ID, stored_passkey};

/// erin: an admin with a passkey, an authenticator app and recovery codes.
fn with_erin(h: &Harness) {
    let (entry, _) = factor_entry();
    let entry = entry.add_passkey(stored_passkey()).unwrap();
    h.store.add_user("erin", &["admin"], Some(entry));
}

/// erin's password step: the answer's JSON.
async fn password_step(h: &Harness) -> serde_json::Value {
    let ticket = h.ticket("ichor-cli", CLI_REDIRECT, "openid", "").await;
    let reply = h.login(&ticket, "erin", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply.json()
}

/// An assertion of the stored passkey's id that no authenticator signed.
fn made_up_assertion() -> serde_json::Value {
    serde_json::json!({
        "id": CREDENTIAL_ID, "rawId": CREDENTIAL_ID, "type": "public-key",
        "response": {
            "authenticatorData": "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAw",
            "clientDataJSON": "eyJ0eXBlIjoid2ViYXV0aG4uZ2V0In0",
            "signature": "MEUCIQ",
            "userHandle": null
        },
        "clientExtensionResults": {}
    })
}

#[tokio::test]
async fn a_user_with_a_passkey_is_offered_it_first_naming_the_passkey_and_this_site() {
    let h = Harness::new();
    with_erin(&h);
    let body = password_step(&h).await;
    assert_eq!(
        body["factors"],
        serde_json::json!(["passkey", "totp", "recovery"]),
        "{body}"
    );
    let pk = &body["passkey_options"]["publicKey"];
    assert_eq!(pk["rpId"], "ichor.example.com", "{body}");
    assert_eq!(pk["allowCredentials"][0]["id"], CREDENTIAL_ID, "{body}");
    assert_eq!(pk["userVerification"], "required", "{body}");
    // The ticket carries the ceremony's state (public keys and the challenge): no secret.
    let claims = claims(body["factor_ticket"].as_str().unwrap());
    assert_eq!(
        claims["passkey"]["options"]["publicKey"]["challenge"],
        pk["challenge"]
    );
    assert!(
        claims.to_string().len() < 8 * 1024,
        "the ticket stays small: {}",
        claims.to_string().len()
    );
}

#[tokio::test]
async fn an_answer_that_does_not_verify_is_a_wrong_code_counted_like_one() {
    let h = Harness::new();
    with_erin(&h);
    let before = h.store.entry("erin").unwrap();
    let body = password_step(&h).await;
    let ticket = body["factor_ticket"].as_str().unwrap();
    let answer = serde_json::json!({"factor_ticket": ticket, "credential": made_up_assertion()});
    refused_as_wrong(&h.post_json("/oidc/login/factor", answer).await);
    let after = h.store.entry("erin").unwrap();
    assert_eq!(
        after.factors.failures, 1,
        "counted in the entry, so every replica backs off"
    );
    assert_eq!(
        after.factors.passkeys, before.factors.passkeys,
        "the passkey is untouched"
    );
    // Neither a code and a credential at once, nor neither.
    for bad in [
        serde_json::json!({"factor_ticket": ticket, "code": "123456", "credential": made_up_assertion()}),
        serde_json::json!({"factor_ticket": ticket}),
    ] {
        let reply = h.post_json("/oidc/login/factor", bad).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    }
    // The typed factors still work beside it.
    let code = ichor_renderers::auth::totp::code_at(TOTP_SECRET, h.clock.now_ts()).unwrap();
    let reply = h.factor(ticket, &code).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

#[tokio::test]
async fn a_ticket_that_offered_no_passkey_takes_no_passkey_answer() {
    let h = Harness::new();
    let (entry, _) = factor_entry();
    h.store.add_user("dave", &["admin"], Some(entry));
    let ticket = h.ticket("ichor-cli", CLI_REDIRECT, "openid", "").await;
    let body = h.login(&ticket, "dave", PASSWORD).await.json();
    assert!(body.get("passkey_options").is_none(), "{body}");
    let answer = serde_json::json!({
        "factor_ticket": body["factor_ticket"], "credential": made_up_assertion()
    });
    refused_as_wrong(&h.post_json("/oidc/login/factor", answer).await);
    assert_eq!(h.store.entry("dave").unwrap().factors.failures, 1);
}

#[tokio::test]
async fn the_second_step_takes_a_ticket_of_ten_passkeys_and_no_more_than_its_limit() {
    let h = Harness::new();
    let (mut entry, _) = factor_entry();
    // Ten passkeys (the most a user may have), each a copy of the test key under its own id.
    for i in 0..10u8 {
        let mut passkey = stored_passkey();
        let id = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, [i; 64]);
        passkey.passkey["cred"]["cred_id"] = serde_json::json!(id);
        passkey.id = id;
        entry = entry.add_passkey(passkey).unwrap();
    }
    h.store.add_user("erin", &["admin"], Some(entry));
    let body = password_step(&h).await;
    assert_eq!(
        body["passkey_options"]["publicKey"]["allowCredentials"]
            .as_array()
            .unwrap()
            .len(),
        10
    );
    let ticket = body["factor_ticket"].as_str().unwrap();
    let answer = serde_json::json!({"factor_ticket": ticket, "credential": made_up_assertion()});
    assert!(
        answer.to_string().len() > ichor_issuer::oidc::MAX_BODY_BYTES / 2,
        "{}",
        answer.to_string().len()
    );
    refused_as_wrong(&h.post_json("/oidc/login/factor", answer).await);
    let huge = serde_json::json!({"factor_ticket": "x".repeat(ichor_issuer::oidc::MAX_FACTOR_BODY_BYTES), "code": "1"});
    let reply = h.post_json("/oidc/login/factor", huge).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert!(
        reply.text().contains("larger than 65536 bytes"),
        "{}",
        reply.text()
    );
}

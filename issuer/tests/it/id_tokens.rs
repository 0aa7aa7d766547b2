//! ID token verification: every way a token must be refused, and a key rotation in the middle
//! of a session with a keys document made by the controller's own timeline.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ichor_issuer::{
    keys::LoadedKeys,
    tokens::{self, TokenError},
};
use jiff::SignedDuration;

async fn ui_token(h: &Harness) -> String {
    let code = h.code("alice", "ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h.exchange(&code, "ichor-ui", UI_REDIRECT, VERIFIER).await;
    reply.json()["id_token"].as_str().expect("id_token").to_owned()
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test]
async fn an_id_token_has_the_claims_and_header_the_kube_apiserver_needs() {
    let h = Harness::new();
    let session = h.cli_session("alice").await;
    let token = session["id_token"].as_str().expect("id");
    let header = jose_header(token);
    assert_eq!(header["alg"], "RS256");
    assert_eq!(header["typ"], "JWT");
    assert!(header["kid"].as_str().is_some_and(|k| k.starts_with("k-")));
    let c = claims(token);
    assert_eq!(c["iss"], ISSUER);
    assert_eq!(c["sub"], "alice");
    assert_eq!(c["aud"], "ichor-kube");
    assert_eq!(c["groups"], serde_json::json!(["admin"]));
    assert_eq!(c["nonce"], "no-1");
    let now = h.clock.now_secs();
    assert_eq!(c["iat"], now, "iat is now, never in the future");
    assert_eq!(c["exp"], now + 300);
    assert_eq!(session["expires_in"], 300);
    assert_eq!(session["token_type"], "Bearer");
    let verified =
        tokens::verify_id_token(&h.keys(), token, ISSUER, "ichor-kube", h.clock.now_ts()).expect("ok");
    assert_eq!(verified.sub, "alice");
}

#[tokio::test]
async fn a_token_for_another_audience_is_refused() {
    let h = Harness::new();
    let token = ui_token(&h).await;
    let err =
        tokens::verify_id_token(&h.keys(), &token, ISSUER, "ichor-kube", h.clock.now_ts()).expect_err("aud");
    assert_eq!(err, TokenError::Audience("ichor-kube".into()));
    assert!(h.issuer.verify_id_token(&token, "ichor-ui").is_ok());
}

#[tokio::test]
async fn an_expired_token_is_refused() {
    let h = Harness::new();
    let token = ui_token(&h).await;
    h.clock.advance(SignedDuration::from_secs(299));
    assert!(h.issuer.verify_id_token(&token, "ichor-ui").is_ok());
    h.clock.advance(SignedDuration::from_secs(1));
    assert_eq!(
        h.issuer.verify_id_token(&token, "ichor-ui"),
        Err(TokenError::Expired)
    );
}

#[tokio::test]
async fn a_tampered_payload_is_refused() {
    let h = Harness::new();
    let token = ui_token(&h).await;
    let parts: Vec<&str> = token.split('.').collect();
    let mut c = claims(&token);
    c["groups"] = serde_json::json!(["admin", "superuser"]);
    let forged = format!("{}.{}.{}", parts[0], b64(c.to_string().as_bytes()), parts[2]);
    assert_eq!(
        h.issuer.verify_id_token(&forged, "ichor-ui"),
        Err(TokenError::Signature)
    );
}

#[tokio::test]
async fn a_tampered_signature_is_refused() {
    let h = Harness::new();
    let token = ui_token(&h).await;
    let parts: Vec<&str> = token.split('.').collect();
    let mut sig = URL_SAFE_NO_PAD.decode(parts[2]).expect("sig");
    sig[10] ^= 0x01;
    let forged = format!("{}.{}.{}", parts[0], parts[1], b64(&sig));
    assert_eq!(
        h.issuer.verify_id_token(&forged, "ichor-ui"),
        Err(TokenError::Signature)
    );
}

#[tokio::test]
async fn a_token_with_alg_none_is_refused() {
    let h = Harness::new();
    let token = ui_token(&h).await;
    let kid = jose_header(&token)["kid"].as_str().expect("kid").to_owned();
    let parts: Vec<&str> = token.split('.').collect();
    let header = serde_json::json!({"alg": "none", "kid": kid, "typ": "JWT"});
    for forged in [
        format!("{}.{}.", b64(header.to_string().as_bytes()), parts[1]),
        format!("{}.{}.{}", b64(header.to_string().as_bytes()), parts[1], parts[2]),
    ] {
        let err = h.issuer.verify_id_token(&forged, "ichor-ui").expect_err("none");
        assert!(matches!(err, TokenError::Algorithm { .. }), "{err:?}");
    }
}

#[tokio::test]
async fn an_hs256_token_is_refused_as_an_id_token() {
    let h = Harness::new();
    // A genuine HS256 artifact of this issuer (the refresh token) ...
    let session = h.cli_session("alice").await;
    let refresh = session["refresh_token"].as_str().expect("refresh");
    let err = h
        .issuer
        .verify_id_token(refresh, "ichor-kube")
        .expect_err("hs256");
    assert!(matches!(err, TokenError::Algorithm { .. }), "{err:?}");
    // ... and the classic confusion: HS256 keyed with the public key, typ JWT, a real kid.
    let id = session["id_token"].as_str().expect("id");
    let kid = jose_header(id)["kid"].as_str().expect("kid").to_owned();
    let header = serde_json::json!({"alg": "HS256", "kid": kid, "typ": "JWT"});
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        id.split('.').nth(1).expect("p")
    );
    let forged = format!("{input}.{}", b64(&[0u8; 32]));
    let err = h
        .issuer
        .verify_id_token(&forged, "ichor-kube")
        .expect_err("confusion");
    assert!(matches!(err, TokenError::Algorithm { .. }), "{err:?}");
}

#[tokio::test]
async fn a_key_rotation_in_the_middle_of_a_session_logs_no_one_out() {
    let h = Harness::new();
    let settings = timeline_settings();
    let t0 = start();
    let doc0 = first_document(t0);
    h.settings.store(settings_with(48 * 3600));
    let session = h.cli_session("alice").await;
    let first_id = session["id_token"].as_str().expect("id").to_owned();
    let old_kid = jose_header(&first_id)["kid"].as_str().expect("kid").to_owned();
    let mut refresh = session["refresh_token"].as_str().expect("refresh").to_owned();
    let mut pem_index = 2;

    // A day later the controller publishes new keys; they sign 10 minutes later.
    h.clock.advance(SignedDuration::from_hours(24));
    let plan = ichor_renderers::trust::plan(h.clock.now_ts(), Some(&doc0), &settings);
    assert_eq!(plan.effects.len(), 2, "a new RSA and a new HMAC key: {plan:?}");
    let doc1 = realize(&plan, Some(&doc0), &mut pem_index);
    h.ring.store(LoadedKeys::from_document(&doc1).expect("load"));
    let jwks = h.get("/oidc/jwks").await.json();
    assert_eq!(
        jwks["keys"].as_array().map(Vec::len),
        Some(2),
        "both keys are published"
    );

    // Before activation: still the old key; the refresh token signed by the old HMAC key works.
    h.clock.advance(SignedDuration::from_mins(8));
    let reply = h.refresh(&refresh, "ichor-cli", None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let before = reply.json()["id_token"].as_str().expect("id").to_owned();
    assert_eq!(jose_header(&before)["kid"], old_kid.as_str());
    refresh = reply.json()["refresh_token"].as_str().expect("r").to_owned();

    // After activation the controller marks the old keys superseded (retireAfter set).
    h.clock.advance(SignedDuration::from_mins(3));
    let plan = ichor_renderers::trust::plan(h.clock.now_ts(), Some(&doc1), &settings);
    let doc2 = realize(&plan, Some(&doc1), &mut pem_index);
    assert!(plan.effects.is_empty() && !plan.changes.is_empty(), "{plan:?}");
    h.ring.store(LoadedKeys::from_document(&doc2).expect("load"));

    // The ID token signed two minutes before activation still verifies ...
    assert!(tokens::verify_id_token(&h.keys(), &before, ISSUER, "ichor-kube", h.clock.now_ts()).is_ok());
    // ... the refresh token the old HMAC key signed still refreshes, and the new ID token has
    // the new kid, which the JWKS publishes next to the old one.
    let reply = h.refresh(&refresh, "ichor-cli", None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let after = reply.json()["id_token"].as_str().expect("id").to_owned();
    let new_kid = jose_header(&after)["kid"].as_str().expect("kid").to_owned();
    assert_ne!(new_kid, old_kid);
    let kids: Vec<String> = h.get("/oidc/jwks").await.json()["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| k["kid"].as_str().expect("kid").to_owned())
        .collect();
    assert!(kids.contains(&new_kid) && kids.contains(&old_kid), "{kids:?}");
    assert!(h.issuer.verify_id_token(&after, "ichor-kube").is_ok());
    // And the next refresh token is signed by the new HMAC key.
    let next = reply.json()["refresh_token"].as_str().expect("r").to_owned();
    assert_ne!(jose_header(&next)["kid"], jose_header(&refresh)["kid"]);
}

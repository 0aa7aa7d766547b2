//! Whole passkey ceremonies through the real endpoints, signed by the test kit's software
//! authenticator ([`SoftAuthenticator`]): a registered passkey completes a sign-in, and the ID
//! token says how (`hwk`, or `swk` for a synced one); what an attacker does with a passkey is
//! refused — an answer relayed from a phishing site (another origin), one for another site's
//! relying-party id, one without user verification, a copied authenticator whose counter went
//! back, and an answer sent again.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;
use axum::http::StatusCode;
use ichor_issuer::passkeys::RelyingParty;
use ichor_testkit::issuer::authenticator::SoftAuthenticator;

/// A passkey registered by `authenticator` for `ISSUER`'s relying party, as the API stores it.
fn register(
    authenticator: &mut SoftAuthenticator,
    now: jiff::Timestamp,
) -> ichor_renderers::auth::credentials::StoredPasskey {
    let rp = RelyingParty::for_issuer(ISSUER).unwrap();
    let (options, state) = rp.begin_registration("erin", &[]).unwrap();
    let answer = authenticator.register(&serde_json::to_value(options).unwrap());
    rp.finish_registration(&state, &answer.to_string(), "Laptop", now)
        .unwrap()
}

/// erin, an admin whose only factor is `authenticator`'s passkey.
fn with_erin(h: &Harness, authenticator: &mut SoftAuthenticator) {
    let passkey = register(authenticator, h.clock.now_ts());
    let entry = entry(false).add_passkey(passkey).unwrap();
    h.store.add_user("erin", &["admin"], Some(entry));
}

/// erin's password step: the ticket and the options for the browser.
async fn password_step(h: &Harness) -> (String, serde_json::Value) {
    let ticket = h.ticket("ichor-cli", CLI_REDIRECT, "openid", "").await;
    let reply = h.login(&ticket, "erin", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["factors"], serde_json::json!(["passkey"]), "{body}");
    (
        body["factor_ticket"].as_str().unwrap().to_owned(),
        body["passkey_options"].clone(),
    )
}

async fn answer(h: &Harness, ticket: &str, credential: serde_json::Value) -> Reply {
    h.post_json(
        "/oidc/login/factor",
        serde_json::json!({"factor_ticket": ticket, "credential": credential}),
    )
    .await
}

/// The ID token of a successful second step.
async fn id_token(h: &Harness, reply: &Reply) -> serde_json::Value {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let redirect = reply.json()["redirect_uri"].as_str().unwrap().to_owned();
    let code = query_param(&redirect, "code").unwrap();
    let tokens = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(tokens.status, StatusCode::OK, "{}", tokens.text());
    claims(tokens.json()["id_token"].as_str().unwrap())
}

#[tokio::test]
async fn a_registered_passkey_completes_the_sign_in_and_the_token_says_hardware_key() {
    let h = Harness::new();
    let mut key = SoftAuthenticator::new(ISSUER);
    with_erin(&h, &mut key);
    let (ticket, options) = password_step(&h).await;
    let reply = answer(&h, &ticket, key.assert(&options)).await;
    let id = id_token(&h, &reply).await;
    assert_eq!(id["amr"], serde_json::json!(["pwd", "hwk", "mfa"]), "{id}");
    let stored = &h.store.entry("erin").unwrap().factors.passkeys[0];
    assert_eq!(stored.last_used_at, Some(h.clock.now_ts()));
    assert_eq!(stored.passkey["cred"]["counter"], 1, "the counter is recorded");
    // The same answer again, or the ticket again: the ticket is spent.
    let again = answer(&h, &ticket, key.assert(&options)).await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST, "{}", again.text());
    // A new sign-in with the answer of the old one: another challenge.
    let (ticket, _) = password_step(&h).await;
    refused_as_wrong(&answer(&h, &ticket, key.assert(&options)).await);
}

#[tokio::test]
async fn a_synced_passkey_says_software_key() {
    let h = Harness::new();
    let mut key = SoftAuthenticator::new(ISSUER);
    key.backup_eligible = true;
    with_erin(&h, &mut key);
    let (ticket, options) = password_step(&h).await;
    let id = id_token(&h, &answer(&h, &ticket, key.assert(&options)).await).await;
    assert_eq!(id["amr"], serde_json::json!(["pwd", "swk", "mfa"]), "{id}");
}

#[tokio::test]
async fn an_answer_relayed_from_a_phishing_site_or_made_for_another_site_is_refused() {
    let h = Harness::new();
    let mut key = SoftAuthenticator::new(ISSUER);
    with_erin(&h, &mut key);
    // The phishing page relays the real options; the browser there reports its own origin.
    let mut phished = key.clone_credential();
    phished.origin = "https://ichor.example.com.sign-in.test".to_owned();
    let (ticket, options) = password_step(&h).await;
    refused_as_wrong(&answer(&h, &ticket, phished.assert(&options)).await);
    // An authenticator answers for the relying-party id of the site it is on, not this one's.
    let mut elsewhere = key.clone_credential();
    elsewhere.rp_id = "sign-in.test".to_owned();
    elsewhere.counter = phished.counter;
    let (ticket, options) = password_step(&h).await;
    refused_as_wrong(&answer(&h, &ticket, elsewhere.assert(&options)).await);
    // Without user verification (no PIN, no biometrics): a passkey alone is not a factor.
    let mut unverified = key.clone_credential();
    unverified.user_verified = false;
    unverified.counter = elsewhere.counter;
    let (ticket, options) = password_step(&h).await;
    refused_as_wrong(&answer(&h, &ticket, unverified.assert(&options)).await);
    let entry = h.store.entry("erin").unwrap();
    assert_eq!(entry.factors.failures, 3, "each counted like a wrong code");
    assert_eq!(entry.factors.passkeys[0].last_used_at, None);
}

#[tokio::test]
async fn a_copied_authenticator_whose_counter_went_back_disables_the_passkey_for_both_and_is_logged() {
    let h = Harness::new();
    let mut key = SoftAuthenticator::new(ISSUER);
    with_erin(&h, &mut key);
    let copy = key.clone_credential();
    for _ in 0..2 {
        let (ticket, options) = password_step(&h).await;
        let reply = answer(&h, &ticket, key.assert(&options)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    }
    let mut copy = copy;
    let log = ichor_testkit::issuer::logs::capture();
    let (ticket, options) = password_step(&h).await;
    // The copy signs with counter 1; the entry holds 2.
    refused_as_wrong(&answer(&h, &ticket, copy.assert(&options)).await);
    assert!(
        log.text().contains("signature counter did not move forward"),
        "{}",
        log.text()
    );
    let entry = h.store.entry("erin").unwrap();
    assert_eq!(entry.factors.failures, 1);
    assert_eq!(entry.factors.passkeys[0].cloned_at, Some(h.clock.now_ts()));
    // Which of the two is the thief's, the counter cannot tell: the passkey signs no one in
    // any more. erin has no other factor, so her sign-in stops at the second step until she
    // (with a recovery code) or an admin removes it.
    let ticket = h.ticket("ichor-cli", CLI_REDIRECT, "openid", "").await;
    let reply = h.login(&ticket, "erin", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    assert!(reply.text().contains("no second factor left"), "{}", reply.text());
}

#[tokio::test]
async fn a_copy_that_jumps_its_counter_ahead_gains_nothing_once_the_original_signs() {
    let h = Harness::new();
    let mut key = SoftAuthenticator::new(ISSUER);
    with_erin(&h, &mut key);
    // The thief signs first, with a counter far ahead: accepted (nothing tells it apart yet).
    let mut copy = key.clone_credential();
    copy.counter = u32::MAX - 2;
    let (ticket, options) = password_step(&h).await;
    let reply = answer(&h, &ticket, copy.assert(&options)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    // The owner's next sign-in comes with a lower counter: the passkey is disabled for both,
    // instead of the owner alone being refused while the thief goes on.
    let (ticket, options) = password_step(&h).await;
    refused_as_wrong(&answer(&h, &ticket, key.assert(&options)).await);
    let ticket = h.ticket("ichor-cli", CLI_REDIRECT, "openid", "").await;
    let reply = h.login(&ticket, "erin", PASSWORD).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    assert!(
        h.store.entry("erin").unwrap().factors.passkeys[0]
            .cloned_at
            .is_some()
    );
}

//! Adding a passkey through the API: the registration starts over the current password and
//! names this issuer's site, and what an attacker tries is refused with nothing stored — a wrong
//! password, an answer the authenticator did not make, another user's ticket, a TOTP enrolment
//! ticket in its place, an outdated ticket. The whole ceremony with a real authenticator is the
//! browser test's (Chromium's virtual authenticator, `ui/e2e/passkeys.mjs`).

use super::*;
use ichor_issuer::api::proto::{
    BeginPasskeyRegistrationRequest, BeginPasskeyRegistrationResponse, FinishPasskeyRegistrationRequest,
    FinishPasskeyRegistrationResponse,
};

async fn begin(e: &Env, user: &str, password: &str) -> Result<BeginPasskeyRegistrationResponse, Status> {
    begin_with_code(e, user, password, "").await
}

async fn begin_with_code(
    e: &Env,
    user: &str,
    password: &str,
    code: &str,
) -> Result<BeginPasskeyRegistrationResponse, Status> {
    let t = token(user, e.clock.now_ts());
    e.api
        .begin_passkey_registration(req(
            &t,
            BeginPasskeyRegistrationRequest {
                password: password.into(),
                code: code.into(),
            },
        ))
        .await
        .map(tonic::Response::into_inner)
}

async fn finish(
    e: &Env,
    user: &str,
    ticket: &str,
    credential_json: &str,
) -> Result<FinishPasskeyRegistrationResponse, Status> {
    let t = token(user, e.clock.now_ts());
    e.api
        .finish_passkey_registration(req(
            &t,
            FinishPasskeyRegistrationRequest {
                ticket: ticket.into(),
                name: "YubiKey".into(),
                credential_json: credential_json.into(),
            },
        ))
        .await
        .map(tonic::Response::into_inner)
}

/// A registration answer of the right shape that no authenticator made.
const MADE_UP: &str = r#"{"id":"AAAA","rawId":"AAAA","response":{"attestationObject":"o2NmbXRkbm9uZQ","clientDataJSON":"eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIn0"},"type":"public-key","clientExtensionResults":{}}"#;

#[tokio::test]
async fn a_registration_starts_over_the_password_and_names_this_site_and_the_user() {
    let e = env();
    e.cast().await;
    assert_status(
        begin(&e, "view", "not the password").await,
        Code::InvalidArgument,
        "password: does not match",
    );
    assert_status(
        begin(&e, "view", "").await,
        Code::InvalidArgument,
        "password: is required",
    );
    let begun = begin(&e, "view", PASSWORD).await.unwrap();
    let options: serde_json::Value = serde_json::from_str(&begun.options_json).unwrap();
    let pk = &options["publicKey"];
    assert_eq!(
        pk["rp"]["id"], "ichor.example.com",
        "the issuer's host is the relying party"
    );
    assert_eq!(pk["user"]["name"], "view");
    assert_eq!(pk["authenticatorSelection"]["userVerification"], "required");
    assert!(pk["challenge"].as_str().is_some_and(|c| c.len() >= 43), "{pk}");
    // The ticket holds the ceremony's state, signed: the issuer keeps nothing.
    assert_eq!(begun.ticket.split('.').count(), 3);
    assert!(e.entry("view").await.unwrap().factors.passkeys.is_empty());
}

#[tokio::test]
async fn an_answer_no_authenticator_made_or_a_ticket_of_someone_else_stores_nothing() {
    let e = env();
    e.cast().await;
    let begun = begin(&e, "view", PASSWORD).await.unwrap();
    for junk in [MADE_UP, "{}", "not json"] {
        assert_status(
            finish(&e, "view", &begun.ticket, junk).await,
            Code::InvalidArgument,
            "credential_json",
        );
    }
    assert_status(
        finish(&e, "view", &begun.ticket, "").await,
        Code::InvalidArgument,
        "credential_json: is required",
    );
    // The ticket names its user: another signed-in user cannot finish it.
    assert_status(
        finish(&e, "op", &begun.ticket, MADE_UP).await,
        Code::InvalidArgument,
        "ticket: was not made for you",
    );
    // An authenticator app's enrolment ticket is not a registration ticket.
    let t = token("view", e.clock.now_ts());
    let totp = e
        .api
        .begin_totp(req(
            &t,
            BeginTotpRequest {
                password: PASSWORD.into(),
                code: String::new(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_status(
        finish(&e, "view", &totp.ticket, MADE_UP).await,
        Code::InvalidArgument,
        "ticket: is not a valid registration ticket",
    );
    // Expired.
    e.clock.advance(SignedDuration::from_mins(11));
    assert_status(
        finish(&e, "view", &begun.ticket, MADE_UP).await,
        Code::InvalidArgument,
        "ticket: has expired",
    );
    for user in ["view", "op"] {
        let entry = e.entry(user).await.unwrap();
        assert!(entry.factors.passkeys.is_empty(), "{user} has no passkey");
        assert!(entry.factors.recovery.is_none(), "{user} got no recovery codes");
    }
}

#[tokio::test]
async fn a_verified_passkey_is_stored_with_recovery_codes_and_ends_every_session() {
    let e = env();
    e.cast().await;
    let before = e.entry("view").await.unwrap().not_before;
    e.clock.advance(SignedDuration::from_secs(5));
    let mut key = ichor_testkit::issuer::authenticator::SoftAuthenticator::new(ISSUER);
    let begun = begin(&e, "view", PASSWORD).await.unwrap();
    let options: serde_json::Value = serde_json::from_str(&begun.options_json).unwrap();
    let answer = key.register(&options).to_string();
    let done = finish(&e, "view", &begun.ticket, &answer).await.unwrap();
    assert_eq!(
        done.recovery_codes.len(),
        10,
        "the first factor brings recovery codes"
    );
    let factors = done.factors.unwrap();
    assert_eq!(factors.passkeys.len(), 1);
    assert_eq!(factors.passkeys[0].id, key.id());
    assert_eq!(factors.passkeys[0].name, "YubiKey");
    let entry = e.entry("view").await.unwrap();
    assert_eq!(entry.factors.passkeys[0].id, key.id());
    assert!(entry.not_before > before, "every session of the caller ends");
    // The same answer again: the ticket was made over the entry before the passkey.
    assert_status(
        finish(&e, "view", &begun.ticket, &answer).await,
        Code::InvalidArgument,
        "ticket: is no longer valid",
    );
    // A second passkey takes a code of a factor besides the password: a stolen session and
    // password cannot add the thief's own.
    assert_status(
        begin(&e, "view", PASSWORD).await,
        Code::InvalidArgument,
        "code: required",
    );
    // A second registration excludes the first passkey (a browser refuses to register it
    // again); an answer of that authenticator anyway is refused by the library.
    let again = begin_with_code(&e, "view", PASSWORD, &done.recovery_codes[0])
        .await
        .unwrap();
    let options: serde_json::Value = serde_json::from_str(&again.options_json).unwrap();
    assert_eq!(
        options["publicKey"]["excludeCredentials"][0]["id"],
        key.id(),
        "{options}"
    );
    assert_status(
        finish(&e, "view", &again.ticket, &key.register(&options).to_string()).await,
        Code::InvalidArgument,
        "credential_json: the passkey could not be verified",
    );
    assert_eq!(e.entry("view").await.unwrap().factors.passkeys.len(), 1);
}

#[tokio::test]
async fn a_user_the_policy_requires_to_enrol_may_enrol_with_a_passkey() {
    let e = env();
    e.cast().await;
    e.config_settings
        .store(ichor_testkit::issuer::harness::settings_with_second_factor(
            serde_json::json!({"roles": {"admin": "required"}}),
        ));
    let mut key = ichor_testkit::issuer::authenticator::SoftAuthenticator::new(ISSUER);
    let begun = begin(&e, "admin", PASSWORD).await.unwrap();
    let options: serde_json::Value = serde_json::from_str(&begun.options_json).unwrap();
    finish(&e, "admin", &begun.ticket, &key.register(&options).to_string())
        .await
        .unwrap();
    e.clock.advance(SignedDuration::from_secs(1));
    let t = token("admin", e.clock.now_ts());
    let me = e
        .api
        .who_am_i(req(&t, WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(!me.must_enrol, "a passkey is a factor the policy counts: {me:?}");
}

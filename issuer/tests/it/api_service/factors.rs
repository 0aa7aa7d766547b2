//! Second factors through the API: enrolling an authenticator app over the password and a first
//! code, recovery codes shown once, removals, an administrator's view and reset — and what an
//! attacker tries: a wrong password, a tampered, expired or borrowed enrolment ticket, a wrong
//! code, another user's factors.

use super::*;
use ichor_issuer::{
    api::proto::{
        BeginTotpRequest, BeginTotpResponse, ConfirmTotpRequest, ConfirmTotpResponse, GetUserFactorsRequest,
        ListOwnFactorsRequest,
    },
    oidc::limits::BACKOFF_THRESHOLD,
    tokens::{self, TicketClaims},
};
use ichor_renderers::auth::{recovery, totp};

async fn begin(e: &Env, user: &str, password: &str) -> Result<BeginTotpResponse, Status> {
    begin_with_code(e, user, password, "").await
}

async fn begin_with_code(
    e: &Env,
    user: &str,
    password: &str,
    code: &str,
) -> Result<BeginTotpResponse, Status> {
    let t = token(user, e.clock.now_ts());
    e.api
        .begin_totp(req(
            &t,
            BeginTotpRequest {
                password: password.into(),
                code: code.into(),
            },
        ))
        .await
        .map(tonic::Response::into_inner)
}

async fn confirm(e: &Env, user: &str, ticket: &str, code: &str) -> Result<ConfirmTotpResponse, Status> {
    let t = token(user, e.clock.now_ts());
    e.api
        .confirm_totp(req(
            &t,
            ConfirmTotpRequest {
                ticket: ticket.into(),
                code: code.into(),
            },
        ))
        .await
        .map(tonic::Response::into_inner)
}

/// `user` enrols an authenticator app: the secret and the recovery codes shown.
pub(super) async fn enrol(e: &Env, user: &str) -> (String, Vec<String>) {
    enrol_with_code(e, user, "").await
}

/// [`enrol`] by a user who has a factor already, over its `code`.
pub(super) async fn enrol_with_code(e: &Env, user: &str, code: &str) -> (String, Vec<String>) {
    let begun = begin_with_code(e, user, PASSWORD, code).await.unwrap();
    let code = totp::code_at(&begun.secret, e.clock.now_ts()).unwrap();
    let confirmed = confirm(e, user, &begun.ticket, &code).await.unwrap();
    (begun.secret, confirmed.recovery_codes)
}

#[tokio::test]
async fn an_authenticator_app_is_stored_only_once_a_first_code_proves_the_app_has_the_secret() {
    let e = env();
    e.cast().await;
    let log = ichor_testkit::issuer::logs::capture();
    let t = token("view", e.clock.now_ts());
    let listed = e
        .api
        .list_own_factors(req(&t, ListOwnFactorsRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.factors, Some(Default::default()), "none yet");

    let before = e.entry("view").await.unwrap();
    let begun = begin(&e, "view", PASSWORD).await.unwrap();
    assert_eq!(begun.secret.len(), 32);
    assert_eq!(
        begun.otpauth_uri,
        format!(
            "otpauth://totp/Ichor:view?secret={}&issuer=Ichor&algorithm=SHA1&digits=6&period=30",
            begun.secret
        )
    );
    assert!(
        !format!("{begun:?}").contains(&begun.secret),
        "Debug hides the secret"
    );
    assert_eq!(e.entry("view").await.unwrap(), before, "BeginTotp stores nothing");

    // The first code a moment later: accepted, the app stored with that step, ten codes once.
    e.clock.advance(SignedDuration::from_secs(20));
    let now = e.clock.now_ts();
    let code = totp::code_at(&begun.secret, now).unwrap();
    let confirmed = confirm(&e, "view", &begun.ticket, &code).await.unwrap();
    assert_eq!(confirmed.recovery_codes.len(), 10);
    assert!(!format!("{confirmed:?}").contains(&confirmed.recovery_codes[0]));
    let entry = e.entry("view").await.unwrap();
    let app = entry.factors.totp.as_ref().unwrap();
    assert_eq!(app.secret, begun.secret);
    assert_eq!(
        app.last_step,
        totp::current_step(now).unwrap(),
        "the code works once"
    );
    assert_eq!(app.created_at, now);
    let digests = &entry.factors.recovery.as_ref().unwrap().digests;
    for shown in &confirmed.recovery_codes {
        assert!(digests.contains(&recovery::digest(shown).unwrap()), "{shown}");
    }
    // As a password change: every session ended, the password kept.
    assert_eq!(entry.not_before, now);
    assert_eq!(entry.hash, before.hash);

    // Listed by kind and date; never the secret nor a digest.
    let t = token("view", e.clock.now_ts());
    let listed = e
        .api
        .list_own_factors(req(&t, ListOwnFactorsRequest {}))
        .await
        .unwrap()
        .into_inner()
        .factors
        .unwrap();
    let shown = format!("{listed:?}");
    assert!(
        !shown.contains(&begun.secret) && !shown.contains(&digests[0]),
        "{shown}"
    );
    assert_eq!(listed.totp.unwrap().created_at, now.to_string());
    assert_eq!(listed.recovery.as_ref().unwrap().remaining, 10);
    assert!(listed.passkeys.is_empty());

    // The same ticket again, and a second app: refused.
    let code = totp::code_at(&begun.secret, now).unwrap();
    assert_status(
        confirm(&e, "view", &begun.ticket, &code).await,
        Code::InvalidArgument,
        "ticket: is no longer valid",
    );
    assert_status(
        begin(&e, "view", PASSWORD).await,
        Code::FailedPrecondition,
        "you have an authenticator app already: remove it first",
    );
    // Logged: who added what; never the secret, the ticket or a code.
    let logged = log.text();
    assert!(
        logged.contains("authenticator app added") && logged.contains("user=view"),
        "{logged}"
    );
    for secret in [&begun.secret, &begun.ticket, &confirmed.recovery_codes[0]] {
        assert!(!logged.contains(secret.as_str()), "{secret} logged: {logged}");
    }
}

#[tokio::test]
async fn a_wrong_password_is_refused_and_counted_as_a_failed_sign_in() {
    let e = env();
    e.cast().await;
    for i in 0..BACKOFF_THRESHOLD {
        assert_status(
            begin(&e, "view", &format!("guess {i} of the thief")).await,
            Code::InvalidArgument,
            "password: does not match your current password",
        );
    }
    // The back-off of a password change and a sign-in: even the right password waits now.
    assert_status(
        begin(&e, "view", PASSWORD).await,
        Code::ResourceExhausted,
        "try again in",
    );
    let t = token("view", e.clock.now_ts());
    assert_status(
        e.api
            .change_own_password(req(
                &t,
                ChangeOwnPasswordRequest {
                    old_password: PASSWORD.into(),
                    new_password: "a brand new password".into(),
                    code: String::new(),
                },
            ))
            .await,
        Code::ResourceExhausted,
        "try again in",
    );
    assert_status(
        begin(&e, "view", "").await,
        Code::InvalidArgument,
        "password: is required",
    );
    assert!(e.entry("view").await.unwrap().factors.is_empty());
}

#[tokio::test]
async fn a_tampered_expired_borrowed_or_outdated_ticket_is_refused_and_stores_nothing() {
    let e = env();
    e.cast().await;
    let begun = begin(&e, "view", PASSWORD).await.unwrap();
    let code = || totp::code_at(&begun.secret, e.clock.now_ts()).unwrap();

    // Another secret put in the payload: the signature no longer verifies.
    let parts: Vec<&str> = begun.ticket.split('.').collect();
    let payload = String::from_utf8(
        base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, parts[1]).unwrap(),
    )
    .unwrap();
    let forged = payload.replace(&begun.secret, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, forged),
        parts[2]
    );
    let attacker_code = totp::code_at("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ", e.clock.now_ts()).unwrap();
    assert_status(
        confirm(&e, "view", &forged, &attacker_code).await,
        Code::InvalidArgument,
        "ticket: is not a valid enrolment ticket",
    );
    // Another artifact of the issuer is not an enrolment ticket.
    let keys = key_ring().load().unwrap();
    let now = e.clock.now_ts();
    let other = TicketClaims {
        iss: ISSUER.into(),
        client_id: "ichor-ui".into(),
        redirect_uri: "https://ichor.example.com/auth/callback".into(),
        state: "s".into(),
        nonce: "n".into(),
        code_challenge: "c".into(),
        offline_access: false,
        audience: "ichor-ui".into(),
        iat: now.as_second(),
        exp: now.as_second() + 60,
    };
    let other = tokens::sign_artifact(&keys, &other, now, now).unwrap();
    assert_status(
        confirm(&e, "view", &other, &code()).await,
        Code::InvalidArgument,
        "ticket: is not a valid enrolment ticket",
    );
    // Another user's ticket, with the right code of its secret.
    assert_status(
        confirm(&e, "nobody", &begun.ticket, &code()).await,
        Code::InvalidArgument,
        "ticket: was not made for you",
    );
    assert!(e.entry("nobody").await.unwrap().factors.is_empty());

    // A password change since the ticket was made.
    e.clock.advance(SignedDuration::from_secs(2));
    let t = token("view", e.clock.now_ts());
    e.api
        .change_own_password(req(
            &t,
            ChangeOwnPasswordRequest {
                old_password: PASSWORD.into(),
                new_password: "the password after the ticket".into(),
                code: String::new(),
            },
        ))
        .await
        .unwrap();
    assert_status(
        confirm(&e, "view", &begun.ticket, &code()).await,
        Code::InvalidArgument,
        "ticket: is no longer valid",
    );

    // Expired: ten minutes later.
    let begun = begin(&e, "nobody", PASSWORD).await.unwrap();
    e.clock.advance(SignedDuration::from_mins(10));
    let late = totp::code_at(&begun.secret, e.clock.now_ts()).unwrap();
    assert_status(
        confirm(&e, "nobody", &begun.ticket, &late).await,
        Code::InvalidArgument,
        "ticket: has expired",
    );
    assert!(e.entry("view").await.unwrap().factors.is_empty());
    assert!(e.entry("nobody").await.unwrap().factors.is_empty());
}

#[tokio::test]
async fn a_wrong_or_malformed_code_stores_nothing() {
    let e = env();
    e.cast().await;
    let begun = begin(&e, "view", PASSWORD).await.unwrap();
    let before = e.entry("view").await.unwrap();
    let right = totp::code_at(&begun.secret, e.clock.now_ts()).unwrap();
    let wrong = format!("{:06}", (right.parse::<u32>().unwrap() + 1) % 1_000_000);
    for bad in [wrong.as_str(), "12345", "abcdef", "1234567"] {
        assert_status(
            confirm(&e, "view", &begun.ticket, bad).await,
            Code::InvalidArgument,
            "code: is not the authenticator app's current code",
        );
    }
    assert_status(
        confirm(&e, "view", &begun.ticket, "").await,
        Code::InvalidArgument,
        "code: is required",
    );
    assert_eq!(e.entry("view").await.unwrap(), before);
    // The right one still works after the wrong ones.
    confirm(&e, "view", &begun.ticket, &right).await.unwrap();
}

#[tokio::test]
async fn an_administrator_sees_kinds_and_dates_of_a_user_and_no_one_else_does() {
    let e = env();
    e.cast().await;
    let (secret, codes) = enrol(&e, "view").await;
    let ask = |caller: &'static str, name: &'static str| {
        let t = token(caller, e.clock.now_ts());
        let api = e.api.clone();
        async move {
            api.get_user_factors(req(&t, GetUserFactorsRequest { name: name.into() }))
                .await
                .map(tonic::Response::into_inner)
        }
    };
    let shown = ask("admin", "view").await.unwrap();
    let text = format!("{shown:?}");
    assert!(text.contains("remaining: 10"), "{text}");
    assert!(!text.contains(&secret) && !text.contains(&codes[0]), "{text}");
    let digest = recovery::digest(&codes[0]).unwrap();
    assert!(!text.contains(&digest), "{text}");
    assert!(shown.factors.unwrap().totp.is_some());
    for caller in ["op", "view", "nobody"] {
        assert_status(
            ask(caller, "view").await,
            Code::PermissionDenied,
            &format!("ichor:{caller} may not get ichorusers \"view\""),
        );
    }
    // An unknown user as GetUser answers it.
    let t = token("admin", e.clock.now_ts());
    let get_user = e
        .api
        .get_user(req(&t, GetUserRequest { name: "ghost".into() }))
        .await
        .unwrap_err();
    let factors = ask("admin", "ghost").await.unwrap_err();
    assert_eq!(
        (factors.code(), factors.message()),
        (get_user.code(), get_user.message())
    );
    assert_eq!(factors.code(), Code::NotFound);
    // No password, no factors.
    e.seed("nopass", &["viewer"], false, None, false).await;
    assert_eq!(
        ask("admin", "nopass").await.unwrap().factors,
        Some(Default::default())
    );
}

pub(super) async fn reset(
    e: &Env,
    caller: &str,
    name: &str,
    new_password: Option<NewPassword>,
) -> Result<String, Status> {
    let t = token(caller, e.clock.now_ts());
    e.api
        .set_password(req(
            &t,
            SetPasswordRequest {
                name: name.into(),
                new_password,
                reset_factors: true,
            },
        ))
        .await
        .map(|r| r.into_inner().generated_password)
}

#[tokio::test]
async fn an_administrator_resets_factors_in_one_write_that_ends_sessions_and_is_logged() {
    let e = env();
    e.cast().await;
    let (secret, codes) = enrol(&e, "view").await;
    e.clock.advance(SignedDuration::from_secs(5));
    let before = e.entry("view").await.unwrap();
    let log = ichor_testkit::issuer::logs::capture();
    assert_eq!(reset(&e, "admin", "view", None).await.unwrap(), "");
    let entry = e.entry("view").await.unwrap();
    assert!(entry.factors.is_empty());
    assert_eq!(entry.not_before, e.clock.now_ts(), "sessions ended");
    assert!(entry.families.is_empty());
    assert_eq!(
        (entry.hash.as_str(), entry.must_change),
        (before.hash.as_str(), false),
        "password kept"
    );
    let text = log.text();
    assert!(
        text.contains("factors reset") && text.contains("admin=admin") && text.contains("user=view"),
        "{text}"
    );
    assert!(!text.contains(&secret) && !text.contains(&codes[0]), "{text}");

    // With a new password too: both in the one write.
    enrol(&e, "nobody").await;
    let generated = reset(&e, "admin", "nobody", Some(NewPassword::Generate(true)))
        .await
        .unwrap();
    let entry = e.entry("nobody").await.unwrap();
    assert!(entry.factors.is_empty() && entry.must_change);
    assert!(
        verify_password(&Password::new(generated), &entry.hash)
            .unwrap()
            .is_valid()
    );
}

#[tokio::test]
async fn a_reset_is_refused_to_whoever_may_not_set_the_password_and_for_unknown_users() {
    let e = env_with(Some(OPERATORS_MANAGE_USERS_AND_PASSWORDS));
    e.cast().await;
    enrol(&e, "admin").await;
    enrol(&e, "view").await;
    // RBAC first: a viewer, and nobody, may not.
    for caller in ["view", "nobody"] {
        assert_status(
            reset(&e, caller, "admin", None).await,
            Code::PermissionDenied,
            &format!("ichor:{caller} may not update ichorusers \"admin\""),
        );
    }
    // An operator allowed to manage users still may not reset an admin's factors.
    assert_status(
        reset(&e, "op", "admin", None).await,
        Code::PermissionDenied,
        "you may not reset the second factors of user \"admin\"",
    );
    assert!(e.entry("admin").await.unwrap().factors.totp.is_some());
    // ... but a viewer's.
    reset(&e, "op", "view", None).await.unwrap();
    assert!(e.entry("view").await.unwrap().factors.is_empty());

    assert_status(
        reset(&e, "admin", "ghost", None).await,
        Code::NotFound,
        "user \"ghost\" does not exist",
    );
    e.seed("nopass", &["viewer"], false, None, false).await;
    assert_status(
        reset(&e, "admin", "nopass", None).await,
        Code::FailedPrecondition,
        "has no password set, so it has no second factors to reset",
    );
    assert!(e.entry("nopass").await.is_none());
    // Without reset_factors a password is still required.
    let t = token("admin", e.clock.now_ts());
    assert_status(
        e.api
            .set_password(req(
                &t,
                SetPasswordRequest {
                    name: "view".into(),
                    new_password: None,
                    reset_factors: false,
                },
            ))
            .await,
        Code::InvalidArgument,
        "new_password: give a password or set generate: true",
    );
}

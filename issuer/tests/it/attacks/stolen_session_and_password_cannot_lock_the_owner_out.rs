//! A thief holds dave's signed-in browser session (an `ichor-ui` token of a sign-in with his
//! second factor) and dave's password, but not his authenticator app nor a recovery code. The
//! thief cannot sign in (the factor is asked), but `ChangeOwnPassword` used to ask only for the
//! old password: a new one locked dave out until an administrator reset it. A caller with a
//! second factor now also types a code of it, used up in the same write as the new password, as
//! for every change of the factors themselves. The thief's calls without a code, and with guessed
//! codes, are refused and change nothing; the guesses count as the sign-in's wrong codes; dave
//! still signs in with his password and his app.
//!
//! The `UserService` runs over the issuer's own store, password limits and clock, as
//! `ichor-issuer` composes them, so the sign-in sees what the service wrote.

use std::{net::SocketAddr, sync::Arc};

use crate::{
    api_common::{FakeVerifier, authorizer, req, token},
    common::*,
};
use async_trait::async_trait;
use axum::{extract::ConnectInfo, http::StatusCode};
use ichor_issuer::{
    api::{
        ApiError, Caller, Clock, Created, LocalAccessReview, UserApi, UserBackend,
        proto::{ChangeOwnPasswordRequest, user_service_server::UserService as _},
    },
    store::{StoreError, StoredUser, UserStore, Version},
};
use ichor_renderers::{
    auth::{credentials::CredentialsEntry, totp},
    crd::IchorUser,
};
use jiff::SignedDuration;
use tonic::Code;

/// The password the thief wants dave to lose his account to.
const THIEFS: &str = "the thief's own password, 42";

/// The issuer's store, seen by the service (which changes no user object here).
struct IssuerStore(Arc<MemoryStore>);

#[async_trait]
impl UserStore for IssuerStore {
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        self.0.get_user(name).await
    }
    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError> {
        self.0.list_users().await
    }
    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        self.0.read_credentials(name).await
    }
    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        self.0.write_credentials(name, expected, entry).await
    }
}

fn no_user_writes() -> ApiError {
    ApiError::Unavailable("this test's store writes no user object".into())
}

#[async_trait]
impl UserBackend for IssuerStore {
    async fn create_user(&self, _: &Caller, _: &IchorUser) -> Result<Created, ApiError> {
        Err(no_user_writes())
    }
    async fn undo_create(&self, _: &Caller, _: &str, _: &Created) -> Result<(), ApiError> {
        Err(no_user_writes())
    }
    async fn update_user(&self, _: &Caller, _: &IchorUser) -> Result<(), ApiError> {
        Err(no_user_writes())
    }
    async fn delete_user(&self, _: &Caller, _: &str) -> Result<(), ApiError> {
        Err(no_user_writes())
    }
}

type Api = UserApi<IssuerStore, LocalAccessReview, FakeVerifier>;

/// The service beside `h`'s issuer: its store, its password limits, its clock.
fn service(h: &Harness) -> Api {
    let mut config = api_config(ISSUER);
    config.passwords = h.issuer.password_limits();
    UserApi::new(
        Arc::new(IssuerStore(Arc::clone(&h.store))),
        LocalAccessReview::new(authorizer(None)),
        FakeVerifier,
        Arc::clone(&h.clock) as Arc<dyn Clock>,
        config,
    )
}

/// The thief's address.
fn thief() -> SocketAddr {
    "203.0.113.66:40000".parse().expect("addr")
}

/// `ChangeOwnPassword` with dave's session (a token of a sign-in with his factor, issued now)
/// from the thief's address.
async fn change_with_stolen_session(h: &Harness, api: &Api, code: &str) -> tonic::Status {
    let mut request = req(
        &token("dave", h.clock.now_ts()),
        ChangeOwnPasswordRequest {
            old_password: PASSWORD.into(),
            new_password: THIEFS.into(),
            code: code.into(),
        },
    );
    request.extensions_mut().insert(ConnectInfo(thief()));
    api.change_own_password(request)
        .await
        .expect_err("the thief changed dave's password")
}

/// dave's sign-in for `ichor-ui` with `password` and `code`: the status of the second step.
async fn sign_in(h: &Harness, password: &str, code: &str) -> Reply {
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h.login(&ticket, "dave", password).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let factor_ticket = reply.json()["factor_ticket"]
        .as_str()
        .expect("the factor is asked")
        .to_owned();
    h.factor(&factor_ticket, code).await
}

/// Guesses of a code that are none of the app's codes around now.
fn guesses(h: &Harness) -> Vec<String> {
    let now = h.clock.now_ts();
    let near: Vec<String> = (-2..=2)
        .map(|step| totp::code_at(TOTP_SECRET, now + SignedDuration::from_secs(30 * step)).expect("code"))
        .collect();
    [
        "000000",
        "123456",
        "111111",
        "654321",
        "999999",
        "AAAA-BBBB-CCCC-DDDD",
        "424242",
    ]
    .into_iter()
    .map(str::to_owned)
    .filter(|g| !near.contains(g))
    .collect()
}

#[tokio::test]
async fn a_stolen_session_and_password_cannot_change_the_password_without_a_factor() {
    let h = Harness::new();
    let (entry, _codes) = factor_entry();
    h.store.add_user("dave", &["admin"], Some(entry));
    let api = service(&h);
    // dave signs in with his password and his app: the session the thief takes.
    let reply = sign_in(
        &h,
        PASSWORD,
        &totp::code_at(TOTP_SECRET, h.clock.now_ts()).expect("code"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let before = h.store.entry("dave").expect("dave's entry");
    h.clock.advance(SignedDuration::from_secs(5));

    // 1. The password alone: refused, naming the missing field.
    for empty in ["", " "] {
        let refused = change_with_stolen_session(&h, &api, empty).await;
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().starts_with("code: required"), "{refused:?}");
    }
    // 2. Guessed codes: each refused, and counted as the sign-in's wrong codes.
    let guesses = guesses(&h);
    assert!(guesses.len() >= 6);
    let mut counted = 0_u32;
    let mut held = 0;
    for guess in &guesses {
        let refused = change_with_stolen_session(&h, &api, guess).await;
        if refused.message() == "code: is incorrect or was used already" {
            assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
            counted += 1;
        } else {
            assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
            assert!(
                refused.message().starts_with("code: too many wrong codes; wait"),
                "{refused:?}"
            );
            held += 1;
        }
    }
    let after = h.store.entry("dave").expect("dave's entry");
    assert_eq!(
        after.factors.failures, counted,
        "every looked-at guess is counted"
    );
    assert!(held > 0, "the wrong codes back the change off as the sign-in's");
    // Nothing else changed: not the password, not the sessions, not the factors.
    assert_eq!(after.hash, before.hash, "the thief changed dave's password");
    assert_eq!(after.not_before, before.not_before, "dave's sessions ended");
    assert_eq!(after.must_change, before.must_change);
    assert_eq!(after.factors.totp, before.factors.totp);
    assert_eq!(after.factors.recovery, before.factors.recovery);

    // 3. The thief's chosen password signs nobody in.
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = h.login(&ticket, "dave", THIEFS).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text());

    // 4. dave, once the thief's wrong codes no longer hold the step, signs in as always.
    h.clock.advance(SignedDuration::from_mins(16));
    let code = totp::code_at(TOTP_SECRET, h.clock.now_ts()).expect("code");
    let reply = sign_in(&h, PASSWORD, &code).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(
        reply.json()["redirect_uri"]
            .as_str()
            .is_some_and(|uri| uri.contains("code=")),
        "{}",
        reply.text()
    );
}

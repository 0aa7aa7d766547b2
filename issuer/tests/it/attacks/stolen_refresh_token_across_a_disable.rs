//! A stolen refresh token brought back by a re-enable: an attacker holds alice's refresh token;
//! an admin notices and disables alice, later enables her again. Before, the families survived
//! the disable and the thief's token refreshed again after the re-enable. Now a disable through
//! the API ends every session once it is written, and a re-enable through the API ends them again
//! before it is written, so whichever path disabled her (the API, or `kubectl`, seen here as a
//! write of the store itself), the old token is refused after the re-enable. (The `kubectl`
//! re-enable and the delete and re-create are the admission webhook's, proven on the real
//! apiserver in the controller's cluster tests.)

use std::sync::Arc;

use crate::api_common::{Env, env, req, seeder, token};
use axum::http::StatusCode;
use ichor_issuer::{
    api::{
        UserBackend,
        proto::{UpdateUserRequest, user_service_server::UserService},
    },
    keys::{KeyRing, LoadedKeys},
    oidc::Settings,
    store::UserStore,
};
use ichor_renderers::crd::{IchorUser, IchorUserSpec, NAMESPACE};
use ichor_testkit::issuer::{
    harness::{Harness, password_hash, replica, settings, start},
    keys::first_document,
    store::MemoryStore,
};
use jiff::SignedDuration;

/// The API over a local store with admin `boss` and alice (viewer, the kit's password), and the
/// issuer's token endpoint over the same store and clock.
async fn site() -> (Env, Harness) {
    let e = env();
    e.clock.set(start());
    e.seed("boss", &["admin"], false, Some(&password_hash()), false)
        .await;
    e.seed("alice", &["viewer"], false, Some(&password_hash()), false)
        .await;
    let ring = Arc::new(KeyRing::with_keys(
        LoadedKeys::from_document(&first_document(start())).expect("keys"),
    ));
    let h = replica(
        Arc::clone(&e.store) as Arc<dyn UserStore>,
        Arc::new(MemoryStore::default()),
        ring,
        Arc::new(Settings::new(settings())),
        Arc::clone(&e.clock),
    );
    (e, h)
}

/// The thief's copy of alice's refresh token.
async fn stolen(h: &Harness) -> String {
    let session = h.cli_session("alice").await;
    session["refresh_token"]
        .as_str()
        .expect("refresh_token")
        .to_owned()
}

/// An admin's `UpdateUser` of alice's `disabled`.
async fn set_disabled(e: &Env, disabled: bool) {
    let t = token("boss", e.clock.now_ts());
    e.api
        .update_user(req(
            &t,
            UpdateUserRequest {
                name: "alice".into(),
                disabled: Some(disabled),
                ..Default::default()
            },
        ))
        .await
        .expect("the admin's update");
}

/// A write of alice's object that does not go through the API (as `kubectl` would).
async fn write_directly(e: &Env, disabled: bool) {
    let mut user = IchorUser::new(
        "alice",
        IchorUserSpec {
            roles: vec!["viewer".into()],
            disabled,
            ..Default::default()
        },
    );
    user.metadata.namespace = Some(NAMESPACE.into());
    UserBackend::update_user(e.store.as_ref(), &seeder(), &user)
        .await
        .expect("direct write");
}

async fn assert_refused(h: &Harness, refresh: &str) {
    let reply = h.refresh(refresh, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert_eq!(reply.error(), "invalid_grant", "{}", reply.text());
}

#[tokio::test]
async fn a_refresh_token_stolen_before_a_disable_is_refused_after_the_re_enable() {
    let (e, h) = site().await;
    let refresh = stolen(&h).await;
    h.clock.advance(SignedDuration::from_secs(60));
    set_disabled(&e, true).await;
    h.clock.advance(SignedDuration::from_secs(60));
    set_disabled(&e, false).await;
    assert_refused(&h, &refresh).await;
    // Alice herself signs in again as usual.
    assert!(h.cli_session("alice").await["refresh_token"].is_string());
}

#[tokio::test]
async fn a_disable_made_outside_the_api_does_not_bring_the_token_back_through_an_api_re_enable() {
    let (e, h) = site().await;
    let refresh = stolen(&h).await;
    h.clock.advance(SignedDuration::from_secs(60));
    write_directly(&e, true).await;
    h.clock.advance(SignedDuration::from_secs(60));
    set_disabled(&e, false).await;
    assert_refused(&h, &refresh).await;
}

#[tokio::test]
async fn an_api_disable_ends_the_sessions_whatever_re_enables_the_user() {
    let (e, h) = site().await;
    let refresh = stolen(&h).await;
    h.clock.advance(SignedDuration::from_secs(60));
    set_disabled(&e, true).await;
    let entry = e.entry("alice").await.expect("entry");
    assert!(
        entry.families.is_empty(),
        "the disable ended every family: {entry:?}"
    );
    h.clock.advance(SignedDuration::from_secs(60));
    write_directly(&e, false).await;
    assert_refused(&h, &refresh).await;
}

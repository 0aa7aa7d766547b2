//! Taking over an admin through a delegated user-management role: a site lets operators manage
//! users (`ichorusers` and `ichorusers/password`, bound to `ichor:operator`), so the grant rule
//! keeps an operator from creating an admin. The attacker, an operator, goes around it: it
//! resets an admin's password (then signs in as that admin), ends the admin's sessions (locking
//! the admin out while it acts), or re-enables a disabled admin whose password it knows. Each is
//! refused with a message naming the role it could not grant; the same acts on viewers and
//! operators are allowed.

use crate::api_common::*;
use ichor_issuer::api::proto::{
    RevokeSessionsRequest, SetPasswordRequest, UpdateUserRequest, set_password_request::NewPassword,
    user_service_server::UserService,
};
use ichor_renderers::auth::hash::DUMMY_PHC;
use tonic::Code;

/// The refusal of an operator acting on an admin, as the API and the webhook word it.
fn refusal(act: &str, user: &str) -> String {
    format!(
        "you may not {act} user \"{user}\": it holds role \"admin\", which is above your highest role \
         \"operator\""
    )
}

/// A site where operators manage users, with the usual cast plus `boss` (a second admin, so
/// no last-admin rule is in play) and `sleeper` (a disabled admin).
async fn site() -> Env {
    let e = env_with(Some(OPERATORS_MANAGE_USERS_AND_PASSWORDS));
    e.cast().await;
    e.seed("boss", &["admin"], false, Some(DUMMY_PHC), false).await;
    e.seed("sleeper", &["admin"], true, Some(DUMMY_PHC), false).await;
    e
}

fn set_password(name: &str) -> SetPasswordRequest {
    SetPasswordRequest {
        name: name.into(),
        new_password: Some(NewPassword::Password("the operator's choice 7".into())),
        reset_factors: false,
    }
}

fn enable(name: &str) -> UpdateUserRequest {
    UpdateUserRequest {
        name: name.into(),
        disabled: Some(false),
        ..Default::default()
    }
}

#[tokio::test]
async fn an_operator_who_manages_users_may_not_reset_an_admins_password() {
    let e = site().await;
    let t = token("op", e.clock.now_ts());
    let before = e.entry("boss").await.unwrap();
    let reset = e.api.set_password(req(&t, set_password("boss"))).await;
    assert_status(
        reset,
        Code::PermissionDenied,
        &refusal("set the password of", "boss"),
    );
    assert_eq!(
        e.entry("boss").await.unwrap(),
        before,
        "the admin's entry is untouched"
    );
}

#[tokio::test]
async fn an_operator_who_manages_users_may_not_end_an_admins_sessions() {
    let e = site().await;
    let t = token("op", e.clock.now_ts());
    let before = e.entry("boss").await.unwrap();
    let revoke = e
        .api
        .revoke_sessions(req(&t, RevokeSessionsRequest { name: "boss".into() }))
        .await;
    assert_status(
        revoke,
        Code::PermissionDenied,
        &refusal("end the sessions of", "boss"),
    );
    assert_eq!(
        e.entry("boss").await.unwrap(),
        before,
        "the admin's sessions are untouched"
    );
}

#[tokio::test]
async fn an_operator_who_manages_users_may_not_re_enable_a_disabled_admin() {
    let e = site().await;
    let t = token("op", e.clock.now_ts());
    let revive = e.api.update_user(req(&t, enable("sleeper"))).await;
    assert_status(revive, Code::PermissionDenied, &refusal("re-enable", "sleeper"));
    assert!(
        e.user("sleeper").await.unwrap().disabled,
        "the admin stays disabled"
    );
}

#[tokio::test]
async fn an_operator_who_manages_users_may_reset_end_and_re_enable_viewers_and_operators() {
    let e = site().await;
    e.seed("napper", &["operator"], true, Some(DUMMY_PHC), false)
        .await;
    let t = token("op", e.clock.now_ts());
    for name in ["target", "view"] {
        e.api.set_password(req(&t, set_password(name))).await.unwrap();
        e.api
            .revoke_sessions(req(&t, RevokeSessionsRequest { name: name.into() }))
            .await
            .unwrap();
    }
    e.api.update_user(req(&t, enable("napper"))).await.unwrap();
    assert!(!e.user("napper").await.unwrap().disabled);
    // An admin may do all three to an admin.
    let boss = token("admin", e.clock.now_ts());
    e.api
        .set_password(req(&boss, set_password("boss")))
        .await
        .unwrap();
    e.api.update_user(req(&boss, enable("sleeper"))).await.unwrap();
}

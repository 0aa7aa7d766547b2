//! A disabled or demoted admin undoing it through the API with a token issued before: admins
//! `admin` and `mallory`; `admin` disables mallory (or takes its admin role away). Mallory's
//! `ichor-ui` token still verifies until it expires, so mallory calls the API with it to re-enable
//! itself, put its admin role back or make another admin. The API reads the caller's `IchorUser`
//! afresh on every call that changes a user: a disabled caller is unauthenticated, and a demoted
//! one holds only what its user holds now.

use crate::api_common::*;
use ichor_issuer::api::proto::{
    CreateUserRequest, RoleList, UpdateUserRequest, user_service_server::UserService,
};
use tonic::Code;

fn update(name: &str, roles: Option<&[&str]>, disabled: Option<bool>) -> UpdateUserRequest {
    UpdateUserRequest {
        name: name.into(),
        roles: roles.map(|r| RoleList {
            roles: r.iter().map(|r| (*r).to_owned()).collect(),
        }),
        disabled,
        ..Default::default()
    }
}

fn accomplice() -> CreateUserRequest {
    CreateUserRequest {
        name: "eve".into(),
        roles: vec!["admin".into()],
        ..Default::default()
    }
}

#[tokio::test]
async fn a_disabled_or_demoted_admin_cannot_restore_itself_through_the_api() {
    let e = env_with(None);
    e.cast().await;
    e.seed("mallory", &["admin"], false, Some(&real_hash()), false)
        .await;
    let mallory = token("mallory", e.clock.now_ts());
    // A call before, so the caller is in every cache.
    e.api
        .update_user(req(&mallory, update("view", None, None)))
        .await
        .unwrap();
    let admin = token("admin", e.clock.now_ts());

    // Demoted: its token's admin group is no longer anything (RBAC, asked about its live roles,
    // lets a viewer write no user at all).
    e.api
        .update_user(req(&admin, update("mallory", Some(&["viewer"]), None)))
        .await
        .unwrap();
    let back = e
        .api
        .update_user(req(&mallory, update("mallory", Some(&["viewer", "admin"]), None)))
        .await;
    assert_status(back, Code::PermissionDenied, "ichor:mallory may not");
    assert_status(
        e.api.create_user(req(&mallory, accomplice())).await,
        Code::PermissionDenied,
        "ichor:mallory may not",
    );
    assert_eq!(e.user("mallory").await.unwrap().roles, ["viewer"]);

    // Disabled (the admin role given back first): unauthenticated, whatever it asks.
    e.api
        .update_user(req(&admin, update("mallory", Some(&["admin"]), None)))
        .await
        .unwrap();
    e.api
        .update_user(req(&admin, update("mallory", None, Some(true))))
        .await
        .unwrap();
    let mallory = token("mallory", e.clock.now_ts());
    let revive = e
        .api
        .update_user(req(&mallory, update("mallory", None, Some(false))))
        .await;
    assert_status(revive, Code::Unauthenticated, "does not exist or is disabled");
    assert_status(
        e.api.create_user(req(&mallory, accomplice())).await,
        Code::Unauthenticated,
        "does not exist or is disabled",
    );
    assert!(e.user("mallory").await.unwrap().disabled);
    assert!(e.user("eve").await.is_none());
}

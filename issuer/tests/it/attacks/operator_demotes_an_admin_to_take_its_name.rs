//! Taking over an admin's name by first taking its admin role away: a site lets operators manage
//! users (`ichorusers`, `ichorusers/password`, bound to `ichor:operator`). Setting an admin's
//! password is refused, so the operator first makes the admin something it may act on: it demotes
//! the admin to operator (nothing added, another admin exists), then sets the password and signs
//! in as it, holding user `ichor:boss` and every binding to it. The variants disable the admin
//! (ending its sessions) or delete it and create it again with a password of the operator's
//! choice. Each first step is refused with the act-on message; the same acts on viewers and
//! operators, and an admin's on an admin, are allowed.

use crate::api_common::*;
use ichor_issuer::api::proto::{
    CreateUserRequest, DeleteUserRequest, RoleList, UpdateUserRequest, create_user_request::InitialPassword,
    user_service_server::UserService,
};
use ichor_renderers::auth::hash::DUMMY_PHC;
use tonic::Code;

/// The refusal of an operator acting on admin `boss`, as the API and the webhook word it.
fn refusal(act: &str) -> String {
    format!(
        "you may not {act} user \"boss\": it holds role \"admin\", which is above your highest role \
         \"operator\""
    )
}

/// Operators manage users; `boss` is a second admin (so no last-admin rule is in play).
async fn site() -> Env {
    let e = env_with(Some(OPERATORS_MANAGE_USERS_AND_PASSWORDS));
    e.cast().await;
    e.seed("boss", &["admin"], false, Some(DUMMY_PHC), false).await;
    e
}

fn roles(name: &str, roles: &[&str]) -> UpdateUserRequest {
    UpdateUserRequest {
        name: name.into(),
        roles: Some(RoleList {
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        }),
        ..Default::default()
    }
}

fn disable(name: &str) -> UpdateUserRequest {
    UpdateUserRequest {
        name: name.into(),
        disabled: Some(true),
        ..Default::default()
    }
}

#[tokio::test]
async fn an_operator_may_not_demote_disable_or_delete_an_admin_nor_take_its_name() {
    let e = site().await;
    let t = token("op", e.clock.now_ts());
    let before = e.entry("boss").await.unwrap();

    let demote = e.api.update_user(req(&t, roles("boss", &["operator"]))).await;
    assert_status(demote, Code::PermissionDenied, &refusal("take a role from"));
    let off = e.api.update_user(req(&t, disable("boss"))).await;
    assert_status(off, Code::PermissionDenied, &refusal("disable"));
    let gone = e
        .api
        .delete_user(req(&t, DeleteUserRequest { name: "boss".into() }))
        .await;
    assert_status(gone, Code::PermissionDenied, &refusal("delete"));

    let boss = e.user("boss").await.expect("the admin is still there");
    assert_eq!(boss.roles, ["admin"], "the admin keeps its role");
    assert!(!boss.disabled, "the admin stays enabled");
    assert_eq!(
        e.entry("boss").await.unwrap(),
        before,
        "its password and sessions are untouched"
    );

    // The name cannot be taken over by a create either: it exists.
    let again = e
        .api
        .create_user(req(
            &t,
            CreateUserRequest {
                name: "boss".into(),
                roles: vec!["operator".into()],
                initial_password: Some(InitialPassword::Password("the operator's choice 7".into())),
                ..Default::default()
            },
        ))
        .await;
    assert!(again.is_err(), "a create over an existing admin is refused");
    assert_eq!(e.entry("boss").await.unwrap(), before);
}

#[tokio::test]
async fn an_operator_may_demote_disable_and_delete_viewers_and_an_admin_may_do_so_to_an_admin() {
    let e = site().await;
    e.seed("helper", &["operator", "viewer"], false, Some(DUMMY_PHC), false)
        .await;
    let t = token("op", e.clock.now_ts());
    e.api
        .update_user(req(&t, roles("helper", &["viewer"])))
        .await
        .unwrap();
    e.api.update_user(req(&t, disable("view"))).await.unwrap();
    e.api
        .delete_user(req(
            &t,
            DeleteUserRequest {
                name: "target".into(),
            },
        ))
        .await
        .unwrap();
    assert_eq!(e.user("helper").await.unwrap().roles, ["viewer"]);
    assert!(e.user("view").await.unwrap().disabled);
    assert!(e.user("target").await.is_none());

    let admin = token("admin", e.clock.now_ts());
    e.api
        .update_user(req(&admin, roles("boss", &["operator"])))
        .await
        .unwrap();
    e.api.update_user(req(&admin, disable("boss"))).await.unwrap();
    e.api
        .delete_user(req(&admin, DeleteUserRequest { name: "boss".into() }))
        .await
        .unwrap();
    assert!(e.user("boss").await.is_none());
}

//! Who may make which call: each built-in role as RBAC says, an operator with user rights, the last enabled admin, and roles read from the user at every call.

use super::*;

#[tokio::test]
async fn every_call_is_allowed_or_denied_by_each_built_in_role_as_rbac_says() {
    for rpc in ALL_RPCS {
        for caller in ["admin", "op", "view", "nobody"] {
            let e = env();
            e.cast().await;
            let result = call(&e, rpc, caller).await;
            if allowed(rpc, caller) {
                assert!(result.is_ok(), "{rpc:?} by {caller}: {result:?}");
            } else {
                let status = result.expect_err("should be denied");
                assert_eq!(
                    status.code(),
                    Code::PermissionDenied,
                    "{rpc:?} by {caller}: {status:?}"
                );
                assert!(
                    status.message().starts_with(&format!("ichor:{caller} may not ")),
                    "{}",
                    status.message()
                );
            }
        }
    }
}

#[tokio::test]
async fn a_denied_write_changes_nothing() {
    let e = env();
    e.cast().await;
    for rpc in [
        Rpc::CreateUser,
        Rpc::UpdateUser,
        Rpc::DeleteUser,
        Rpc::SetPassword,
        Rpc::RevokeSessions,
    ] {
        assert!(call(&e, rpc, "op").await.is_err());
    }
    assert!(e.user("newbie").await.is_none());
    let target = e.user("target").await.unwrap();
    assert_eq!(target.display_name.as_deref(), Some("target display"));
    let entry = e.entry("target").await.unwrap();
    assert_eq!(entry.hash, DUMMY_PHC);
    assert!(!entry.must_change);
}

const OPERATORS_MANAGE_USERS: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: user-manager}
rules:
  - apiGroups: ["ichor.maesh.dev"]
    resources: ["ichorusers"]
    verbs: ["get", "list", "create", "update", "delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: operators-manage-users}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: user-manager}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "ichor:operator"}]
"#;

#[tokio::test]
async fn an_operator_with_user_rights_can_grant_viewer_and_operator_but_not_admin() {
    let e = env_with(Some(OPERATORS_MANAGE_USERS));
    e.cast().await;
    let t = token("op", e.clock.now_ts());
    let create = |name: &str, roles: &[&str]| {
        e.api.create_user(req(
            &t,
            CreateUserRequest {
                name: name.into(),
                roles: roles.iter().map(|r| (*r).to_owned()).collect(),
                ..Default::default()
            },
        ))
    };
    create("v1", &["viewer"]).await.unwrap();
    create("o1", &["operator"]).await.unwrap();
    assert_status(
        create("a1", &["admin"]).await,
        Code::PermissionDenied,
        "you may not grant role \"admin\": it is above your highest role \"operator\"",
    );
    assert_status(
        create("c1", &["auditor"]).await,
        Code::PermissionDenied,
        "you may not grant role \"auditor\": you do not hold it",
    );
    assert!(e.user("a1").await.is_none());
    let promote = e
        .api
        .update_user(req(
            &t,
            UpdateUserRequest {
                name: "v1".into(),
                roles: Some(RoleList {
                    roles: vec!["viewer".into(), "admin".into()],
                }),
                ..Default::default()
            },
        ))
        .await;
    assert_status(
        promote,
        Code::PermissionDenied,
        "you may not grant role \"admin\"",
    );
    assert_eq!(e.user("v1").await.unwrap().roles, ["viewer"]);
    // Keeping a role the operator could not grant is fine: only added roles are checked.
    let keep = e
        .api
        .update_user(req(
            &t,
            UpdateUserRequest {
                name: "admin".into(),
                display_name: Some("Still admin".into()),
                ..Default::default()
            },
        ))
        .await;
    assert!(keep.is_ok(), "{keep:?}");
}

#[tokio::test]
async fn the_last_enabled_admin_cannot_be_disabled_demoted_or_deleted() {
    let e = env();
    e.cast().await;
    e.seed("old-admin", &["admin"], true, Some(DUMMY_PHC), false)
        .await;
    let t = token("admin", e.clock.now_ts());
    let message = "cannot disable, demote or delete the last enabled admin \"admin\"";
    let update = |r: UpdateUserRequest| e.api.update_user(req(&t, r));
    assert_status(
        update(UpdateUserRequest {
            name: "admin".into(),
            disabled: Some(true),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
        message,
    );
    assert_status(
        update(UpdateUserRequest {
            name: "admin".into(),
            roles: Some(RoleList {
                roles: vec!["operator".into()],
            }),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
        message,
    );
    assert_status(
        e.api
            .delete_user(req(&t, DeleteUserRequest { name: "admin".into() }))
            .await,
        Code::FailedPrecondition,
        message,
    );
    let still = e.user("admin").await.unwrap();
    assert!(!still.disabled && still.roles == ["admin"]);
    // With a second enabled admin, each is allowed.
    update(UpdateUserRequest {
        name: "old-admin".into(),
        disabled: Some(false),
        ..Default::default()
    })
    .await
    .unwrap();
    update(UpdateUserRequest {
        name: "admin".into(),
        roles: Some(RoleList {
            roles: vec!["admin".into(), "operator".into()],
        }),
        disabled: Some(true),
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(e.user("admin").await.unwrap().disabled);
}

#[tokio::test]
async fn a_disable_or_role_change_applies_to_the_next_call_and_roles_come_from_the_user_not_the_token() {
    let e = env();
    e.cast().await;
    // The token claims admin; the IchorUser says viewer: the IchorUser wins.
    let claims_admin = format!("{}@ichor:admin", token("view", e.clock.now_ts()));
    assert_status(
        e.api.list_users(req(&claims_admin, ListUsersRequest {})).await,
        Code::PermissionDenied,
        "ichor:view may not list ichorusers",
    );
    let t = token("admin", e.clock.now_ts());
    e.api
        .update_user(req(
            &t,
            UpdateUserRequest {
                name: "view".into(),
                roles: Some(RoleList {
                    roles: vec!["admin".into()],
                }),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    assert!(
        e.api
            .list_users(req(&claims_admin, ListUsersRequest {}))
            .await
            .is_ok()
    );
    e.api
        .update_user(req(
            &t,
            UpdateUserRequest {
                name: "view".into(),
                disabled: Some(true),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    assert_status(
        e.api.who_am_i(req(&claims_admin, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "disabled",
    );
}

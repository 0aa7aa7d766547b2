//! `UserService` called through its tonic trait methods (no network), over a `LocalStore` in a
//! temporary directory and the in-process RBAC evaluator of the built-in roles.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use crate::api_common::*;
use ichor_issuer::api::proto::{
    ChangeOwnPasswordRequest, CreateUserRequest, DeleteUserRequest, GetMyKubeconfigRequest, GetUserRequest,
    ListUsersRequest, RevokeSessionsRequest, RoleList, SetPasswordRequest, UpdateUserRequest, WhoAmIRequest,
    create_user_request::InitialPassword, set_password_request::NewPassword,
    user_service_server::UserService,
};
use ichor_renderers::auth::{
    Password,
    credentials::CredentialsEntry,
    hash::{DUMMY_PHC, verify_password},
};
use jiff::SignedDuration;
use tonic::{Code, Status};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rpc {
    ListUsers,
    GetUser,
    CreateUser,
    UpdateUser,
    DeleteUser,
    SetPassword,
    ChangeOwnPassword,
    RevokeSessions,
    GetMyKubeconfig,
    WhoAmI,
}

const ALL_RPCS: [Rpc; 10] = [
    Rpc::ListUsers,
    Rpc::GetUser,
    Rpc::CreateUser,
    Rpc::UpdateUser,
    Rpc::DeleteUser,
    Rpc::SetPassword,
    Rpc::ChangeOwnPassword,
    Rpc::RevokeSessions,
    Rpc::GetMyKubeconfig,
    Rpc::WhoAmI,
];

/// A valid call of `rpc` by `caller` (acting on the user `target`).
async fn call(e: &Env, rpc: Rpc, caller: &str) -> Result<(), Status> {
    let t = token(caller, e.clock.now_ts());
    let api = &e.api;
    match rpc {
        Rpc::ListUsers => api.list_users(req(&t, ListUsersRequest {})).await.map(drop),
        Rpc::GetUser => api
            .get_user(req(
                &t,
                GetUserRequest {
                    name: "target".into(),
                },
            ))
            .await
            .map(drop),
        Rpc::CreateUser => api
            .create_user(req(
                &t,
                CreateUserRequest {
                    name: "newbie".into(),
                    roles: vec!["viewer".into()],
                    ..Default::default()
                },
            ))
            .await
            .map(drop),
        Rpc::UpdateUser => api
            .update_user(req(
                &t,
                UpdateUserRequest {
                    name: "target".into(),
                    display_name: Some("Renamed".into()),
                    ..Default::default()
                },
            ))
            .await
            .map(drop),
        Rpc::DeleteUser => api
            .delete_user(req(
                &t,
                DeleteUserRequest {
                    name: "target".into(),
                },
            ))
            .await
            .map(drop),
        Rpc::SetPassword => api
            .set_password(req(
                &t,
                SetPasswordRequest {
                    name: "target".into(),
                    new_password: Some(NewPassword::Password("a new password for target".into())),
                },
            ))
            .await
            .map(drop),
        Rpc::ChangeOwnPassword => api
            .change_own_password(req(
                &t,
                ChangeOwnPasswordRequest {
                    old_password: PASSWORD.into(),
                    new_password: "my very own new password".into(),
                },
            ))
            .await
            .map(drop),
        Rpc::RevokeSessions => api
            .revoke_sessions(req(
                &t,
                RevokeSessionsRequest {
                    name: "target".into(),
                },
            ))
            .await
            .map(drop),
        Rpc::GetMyKubeconfig => api
            .get_my_kubeconfig(req(&t, GetMyKubeconfigRequest::default()))
            .await
            .map(drop),
        Rpc::WhoAmI => api.who_am_i(req(&t, WhoAmIRequest {})).await.map(drop),
    }
}

/// Who may make each call with the built-in roles.
fn allowed(rpc: Rpc, caller: &str) -> bool {
    match rpc {
        Rpc::WhoAmI | Rpc::ChangeOwnPassword => true,
        Rpc::GetMyKubeconfig => caller != "nobody",
        _ => caller == "admin",
    }
}

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

#[tokio::test]
async fn create_returns_the_user_and_a_generated_password_once_that_must_be_changed() {
    let e = env();
    e.cast().await;
    let t = token("admin", e.clock.now_ts());
    let response = e
        .api
        .create_user(req(
            &t,
            CreateUserRequest {
                name: "carol".into(),
                display_name: "Carol".into(),
                email: "carol@example.com".into(),
                roles: vec!["operator".into()],
                disabled: false,
                initial_password: Some(InitialPassword::GeneratePassword(true)),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let user = response.user.clone().unwrap();
    assert_eq!(
        (user.name.as_str(), user.roles.as_slice()),
        ("carol", &["operator".to_owned()][..])
    );
    assert!(user.password_set && user.must_change);
    assert_eq!(response.generated_password.len(), 24);
    assert!(
        !format!("{response:?}").contains(&response.generated_password),
        "Debug leaks the password"
    );
    let entry = e.entry("carol").await.unwrap();
    assert!(entry.must_change);
    let password = Password::new(response.generated_password.clone());
    assert!(verify_password(&password, &entry.hash).unwrap().is_valid());
    let stored = e.user("carol").await.unwrap();
    assert_eq!(stored.email.as_deref(), Some("carol@example.com"));
    // Again: it exists now.
    let again = e
        .api
        .create_user(req(
            &t,
            CreateUserRequest {
                name: "carol".into(),
                ..Default::default()
            },
        ))
        .await;
    assert_status(again, Code::AlreadyExists, "carol");
}

#[tokio::test]
async fn a_failed_create_leaves_neither_the_user_file_nor_a_credentials_entry() {
    let e = env();
    e.cast().await;
    let failing = Arc::new(FailingCredentials(local_store(&e.dir)));
    let (api, clock, _) = build_api(failing, None);
    let result = api
        .create_user(req(
            &token("admin", clock.now_ts()),
            CreateUserRequest {
                name: "dave".into(),
                roles: vec!["viewer".into()],
                initial_password: Some(InitialPassword::Password("dave's first password".into())),
                ..Default::default()
            },
        ))
        .await;
    assert_status(result, Code::Unavailable, "injected failure");
    assert!(e.user("dave").await.is_none(), "the user file was left behind");
    assert!(!e.dir.path().join("users/dave.yaml").exists());
    assert!(
        e.entry("dave").await.is_none(),
        "a credentials entry was left behind"
    );
}

#[tokio::test]
async fn create_without_a_password_removes_a_stale_entry_of_an_earlier_user_of_that_name() {
    let e = env();
    e.cast().await;
    e.put_entry(
        "ghost",
        Some(&CredentialsEntry::new(DUMMY_PHC.into(), t0(), false)),
    )
    .await;
    e.api
        .create_user(req(
            &token("admin", e.clock.now_ts()),
            CreateUserRequest {
                name: "ghost".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    assert!(e.entry("ghost").await.is_none());
    assert!(!e.user("ghost").await.unwrap().disabled);
}

#[tokio::test]
async fn bad_requests_are_refused_naming_the_field_before_anything_is_written() {
    let e = env();
    e.cast().await;
    let t = token("admin", e.clock.now_ts());
    let create = |r: CreateUserRequest| e.api.create_user(req(&t, r));
    let named = |name: &str| CreateUserRequest {
        name: name.into(),
        ..Default::default()
    };
    assert_status(
        create(named("")).await,
        Code::InvalidArgument,
        "name: is required",
    );
    assert_status(
        create(named("Bad_Name")).await,
        Code::InvalidArgument,
        "name: user name \"Bad_Name\"",
    );
    assert_status(
        create(named(&"a".repeat(64))).await,
        Code::InvalidArgument,
        "at most 63",
    );
    assert_status(
        create(CreateUserRequest {
            roles: vec!["viewer".into(), "Root".into()],
            ..named("eve")
        })
        .await,
        Code::InvalidArgument,
        "roles[1]: \"Root\" is not a valid role name",
    );
    assert_status(
        create(CreateUserRequest {
            display_name: "d".repeat(257),
            ..named("eve")
        })
        .await,
        Code::InvalidArgument,
        "display_name: is 257 bytes, at most 256",
    );
    assert_status(
        create(CreateUserRequest {
            email: "e".repeat(255),
            ..named("eve")
        })
        .await,
        Code::InvalidArgument,
        "email: is 255 bytes, at most 254",
    );
    for (len, message) in [
        (11, "password: must be at least 12 bytes (got 11)"),
        (129, "password: must be at most 128 bytes (got 129)"),
    ] {
        assert_status(
            create(CreateUserRequest {
                initial_password: Some(InitialPassword::Password("p".repeat(len))),
                ..named("eve")
            })
            .await,
            Code::InvalidArgument,
            message,
        );
        assert_status(
            e.api
                .set_password(req(
                    &t,
                    SetPasswordRequest {
                        name: "target".into(),
                        new_password: Some(NewPassword::Password("p".repeat(len))),
                    },
                ))
                .await,
            Code::InvalidArgument,
            message,
        );
        assert_status(
            e.api
                .change_own_password(req(
                    &t,
                    ChangeOwnPasswordRequest {
                        old_password: PASSWORD.into(),
                        new_password: "p".repeat(len),
                    },
                ))
                .await,
            Code::InvalidArgument,
            &format!("new_{message}"),
        );
    }
    assert_status(
        e.api
            .set_password(req(
                &t,
                SetPasswordRequest {
                    name: "target".into(),
                    new_password: None,
                },
            ))
            .await,
        Code::InvalidArgument,
        "new_password: give a password or set generate: true",
    );
    assert_status(
        e.api
            .update_user(req(
                &t,
                UpdateUserRequest {
                    name: "target".into(),
                    email: Some("a b@example.com".into()),
                    ..Default::default()
                },
            ))
            .await,
        Code::InvalidArgument,
        "email: must not contain spaces",
    );
    assert_status(
        e.api
            .get_my_kubeconfig(req(
                &t,
                GetMyKubeconfigRequest {
                    ca_file: "/tmp/x\n".into(),
                },
            ))
            .await,
        Code::InvalidArgument,
        "ca_file: must not contain control characters",
    );
    assert_status(
        e.api
            .change_own_password(req(
                &t,
                ChangeOwnPasswordRequest {
                    old_password: String::new(),
                    new_password: "long enough password".into(),
                },
            ))
            .await,
        Code::InvalidArgument,
        "old_password: is required",
    );
    assert_status(
        e.api
            .get_user(req(&t, GetUserRequest { name: "zed".into() }))
            .await,
        Code::NotFound,
        "\"zed\" does not exist",
    );
    assert!(e.user("eve").await.is_none());
    assert_eq!(e.entry("target").await.unwrap().hash, DUMMY_PHC);
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
async fn deleting_a_user_removes_its_file_and_credentials_entry() {
    let e = env();
    e.cast().await;
    e.api
        .delete_user(req(
            &token("admin", e.clock.now_ts()),
            DeleteUserRequest {
                name: "target".into(),
            },
        ))
        .await
        .unwrap();
    assert!(e.user("target").await.is_none());
    assert!(e.entry("target").await.is_none());
}

#[tokio::test]
async fn a_must_change_user_may_only_ask_who_it_is_and_change_its_password() {
    let e = env();
    e.cast().await;
    e.seed("fresh", &["admin"], false, Some(&real_hash()), true).await;
    let t = token("fresh", e.clock.now_ts());
    for rpc in ALL_RPCS {
        if matches!(rpc, Rpc::WhoAmI | Rpc::ChangeOwnPassword) {
            continue;
        }
        assert_status(
            call(&e, rpc, "fresh").await,
            Code::PermissionDenied,
            "change your password first",
        );
    }
    let me = e
        .api
        .who_am_i(req(&t, WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(me.must_change);
    assert_eq!(
        (me.name.as_str(), me.roles.as_slice()),
        ("fresh", &["admin".to_owned()][..])
    );
    // A wrong old password is refused and changes nothing.
    assert_status(
        e.api
            .change_own_password(req(
                &t,
                ChangeOwnPasswordRequest {
                    old_password: "not the password".into(),
                    new_password: "fresh and new password".into(),
                },
            ))
            .await,
        Code::InvalidArgument,
        "old_password: does not match your current password",
    );
    assert!(e.entry("fresh").await.unwrap().must_change);
    e.clock.set(t0() + SignedDuration::from_secs(30));
    e.api
        .change_own_password(req(
            &t,
            ChangeOwnPasswordRequest {
                old_password: PASSWORD.into(),
                new_password: "fresh and new password".into(),
            },
        ))
        .await
        .unwrap();
    let entry = e.entry("fresh").await.unwrap();
    assert!(!entry.must_change);
    assert_eq!(entry.not_before, t0() + SignedDuration::from_secs(30));
    assert!(
        verify_password(&Password::new("fresh and new password"), &entry.hash)
            .unwrap()
            .is_valid()
    );
    // The old token was issued before the change: revoked. A new sign-in works for everything.
    assert_status(
        e.api.who_am_i(req(&t, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "revoked",
    );
    assert!(call(&e, Rpc::ListUsers, "fresh").await.is_ok());
}

#[tokio::test]
async fn set_password_sets_must_change_and_ends_every_session() {
    let e = env();
    e.cast().await;
    let with_family = e
        .entry("view")
        .await
        .unwrap()
        .start_family(
            "fam1",
            "ichor-cli",
            "ichor-kube",
            t0(),
            SignedDuration::from_hours(12),
        )
        .unwrap();
    e.put_entry("view", Some(&with_family)).await;
    let viewer_token = token("view", e.clock.now_ts());
    e.clock.set(t0() + SignedDuration::from_secs(5));
    let response = e
        .api
        .set_password(req(
            &token("admin", e.clock.now_ts()),
            SetPasswordRequest {
                name: "view".into(),
                new_password: Some(NewPassword::Generate(true)),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let entry = e.entry("view").await.unwrap();
    assert!(entry.must_change);
    assert!(entry.families.is_empty());
    assert_eq!(entry.not_before, t0() + SignedDuration::from_secs(5));
    assert!(
        verify_password(&Password::new(response.generated_password.clone()), &entry.hash)
            .unwrap()
            .is_valid()
    );
    assert!(!format!("{response:?}").contains(&response.generated_password));
    assert_status(
        e.api.who_am_i(req(&viewer_token, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "revoked",
    );
}

#[tokio::test]
async fn revoke_sessions_refuses_tokens_issued_before_it() {
    let e = env();
    e.cast().await;
    let before = token("view", e.clock.now_ts());
    e.clock.set(t0() + SignedDuration::from_secs(60));
    e.api
        .revoke_sessions(req(
            &token("admin", e.clock.now_ts()),
            RevokeSessionsRequest { name: "view".into() },
        ))
        .await
        .unwrap();
    assert_eq!(
        e.entry("view").await.unwrap().not_before,
        t0() + SignedDuration::from_secs(60)
    );
    assert_status(
        e.api.who_am_i(req(&before, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "revoked",
    );
    // Issued in the same second as the revocation: accepted (whole seconds, refused only when earlier).
    let after = token("view", e.clock.now_ts());
    assert!(e.api.who_am_i(req(&after, WhoAmIRequest {})).await.is_ok());
}

#[tokio::test]
async fn unauthenticated_callers_are_refused() {
    let e = env();
    e.cast().await;
    e.seed("off", &["admin"], true, Some(DUMMY_PHC), false).await;
    e.seed("nopass", &["admin"], false, None, false).await;
    let now = e.clock.now_ts();
    let no_header = e.api.who_am_i(tonic::Request::new(WhoAmIRequest {})).await;
    assert_status(no_header, Code::Unauthenticated, "no bearer token");
    let mut basic = tonic::Request::new(WhoAmIRequest {});
    basic
        .metadata_mut()
        .insert("authorization", "Basic YWRtaW4=".parse().unwrap());
    assert_status(
        e.api.who_am_i(basic).await,
        Code::Unauthenticated,
        "no bearer token",
    );
    assert_status(
        e.api.who_am_i(req("bad", WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "not valid",
    );
    let old = token("admin", now - SignedDuration::from_mins(10));
    assert_status(
        e.api.who_am_i(req(&old, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "expired",
    );
    for (user, message) in [
        ("ghost", "does not exist or is disabled"),
        ("off", "does not exist or is disabled"),
        ("nopass", "has no password set"),
    ] {
        assert_status(
            e.api
                .list_users(req(&token(user, now), ListUsersRequest {}))
                .await,
            Code::Unauthenticated,
            message,
        );
    }
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

#[tokio::test]
async fn list_and_get_show_users_without_any_secret() {
    let e = env();
    e.cast().await;
    let t = token("admin", e.clock.now_ts());
    let list = e
        .api
        .list_users(req(&t, ListUsersRequest {}))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = list.users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["admin", "nobody", "op", "target", "view"]);
    assert!(list.users.iter().all(|u| u.password_set && !u.must_change));
    let printed = format!("{list:?}");
    assert!(!printed.contains("argon2"), "{printed}");
    let got = e
        .api
        .get_user(req(&t, GetUserRequest { name: "op".into() }))
        .await
        .unwrap()
        .into_inner()
        .user
        .unwrap();
    assert_eq!(got.email, "op@example.com");
    assert_eq!(got.roles, ["operator"]);
}

#[tokio::test]
async fn get_my_kubeconfig_uses_the_settings_and_the_ca_file() {
    let e = env();
    e.cast().await;
    let t = token("view", e.clock.now_ts());
    let plain = e
        .api
        .get_my_kubeconfig(req(&t, GetMyKubeconfigRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .kubeconfig;
    assert!(plain.contains("server: https://10.0.0.10:6443"), "{plain}");
    assert!(plain.contains("name: ichor-view@prod"), "{plain}");
    assert!(!plain.contains("--ca-file") && !plain.contains("tls-server-name"));
    let mut settings = (*e.config_settings.get()).clone();
    settings.kube_api_server_url = Some("https://kube.example.com:6443".into());
    settings.kube_api_tls_server_name = Some("kube-apiserver.prod.internal".into());
    e.config_settings.store(settings);
    let custom = e
        .api
        .get_my_kubeconfig(req(
            &t,
            GetMyKubeconfigRequest {
                ca_file: "/home/view/ca.pem".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .kubeconfig;
    assert!(
        custom.contains("server: https://kube.example.com:6443"),
        "{custom}"
    );
    assert!(
        custom.contains("tls-server-name: kube-apiserver.prod.internal"),
        "{custom}"
    );
    assert!(
        custom.contains("- --ca-file\n      - /home/view/ca.pem"),
        "{custom}"
    );
}

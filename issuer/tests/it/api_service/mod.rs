//! `UserService` called through its tonic trait methods (no network), over a `LocalStore` in a
//! temporary directory and the in-process RBAC evaluator of the built-in roles.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use crate::api_common::*;
use ichor_issuer::api::proto::{
    BeginTotpRequest, ChangeOwnPasswordRequest, CreateUserRequest, DeleteUserRequest, GetMyKubeconfigRequest,
    GetUserFactorsRequest, GetUserRequest, ListOwnFactorsRequest, ListUsersRequest, RevokeSessionsRequest,
    RoleList, SetPasswordRequest, UpdateUserRequest, WhoAmIRequest, create_user_request::InitialPassword,
    set_password_request::NewPassword, user_service_server::UserService,
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
    ListOwnFactors,
    BeginTotp,
    GetUserFactors,
}

const ALL_RPCS: [Rpc; 13] = [
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
    Rpc::ListOwnFactors,
    Rpc::BeginTotp,
    Rpc::GetUserFactors,
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
                    reset_factors: false,
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
                    code: String::new(),
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
        Rpc::ListOwnFactors => api
            .list_own_factors(req(&t, ListOwnFactorsRequest {}))
            .await
            .map(drop),
        Rpc::BeginTotp => api
            .begin_totp(req(
                &t,
                BeginTotpRequest {
                    password: PASSWORD.into(),
                    code: String::new(),
                },
            ))
            .await
            .map(drop),
        Rpc::GetUserFactors => api
            .get_user_factors(req(
                &t,
                GetUserFactorsRequest {
                    name: "target".into(),
                },
            ))
            .await
            .map(drop),
    }
}

/// Who may make each call with the built-in roles.
fn allowed(rpc: Rpc, caller: &str) -> bool {
    match rpc {
        Rpc::WhoAmI | Rpc::ChangeOwnPassword | Rpc::ListOwnFactors | Rpc::BeginTotp => true,
        Rpc::GetMyKubeconfig => caller != "nobody",
        _ => caller == "admin",
    }
}

mod create;
mod external;
mod factor_changes;
mod factor_gates;
mod factor_sign_in;
mod factors;
mod passkeys;
mod password_over_a_factor;
mod read_and_delete;
mod roles;
mod sessions;

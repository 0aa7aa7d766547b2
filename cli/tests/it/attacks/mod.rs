//! Attacks on the CLI that need no cluster: a hostile or broken server answering the CLI, and
//! hostile command-line values, against the real `ichor` binary. One file per attack; the
//! hostile `UserService` they share is [`HostileApi`].

mod hostile_kubeconfig;
mod login_cache_planted_or_forged;
mod operation_record_written_through_a_planted_symlink;
mod terminal_escapes_from_the_server;
mod token_endpoint_asking_to_wait;
mod ui_url_injecting_helm_values;

use std::path::PathBuf;
use std::process::Output;

use ichor_issuer::api::proto::{
    BeginPasskeyRegistrationRequest, BeginPasskeyRegistrationResponse, BeginTotpRequest, BeginTotpResponse,
    ChangeOwnPasswordRequest, ChangeOwnPasswordResponse, ConfirmTotpRequest, ConfirmTotpResponse,
    CreateUserRequest, CreateUserResponse, DeleteUserRequest, DeleteUserResponse, Factors,
    FinishPasskeyRegistrationRequest, FinishPasskeyRegistrationResponse, GetMyKubeconfigRequest,
    GetMyKubeconfigResponse, GetUserFactorsRequest, GetUserFactorsResponse, GetUserRequest, GetUserResponse,
    ListOwnFactorsRequest, ListOwnFactorsResponse, ListUsersRequest, ListUsersResponse,
    RegenerateRecoveryCodesRequest, RegenerateRecoveryCodesResponse, RemoveFactorRequest,
    RemoveFactorResponse, RevokeSessionsRequest, RevokeSessionsResponse, SetPasswordRequest,
    SetPasswordResponse, UpdateUserRequest, UpdateUserResponse, User, WhoAmIRequest, WhoAmIResponse,
    user_service_server::{UserService, UserServiceServer},
};
use tonic::{Request, Response, Status};

use crate::user_support::{ichor_command, seed_login};

/// A `UserService` that answers what the test scripted, whatever was asked: these users to
/// `ListUsers` and `GetUser` (the first), these factors to `GetUserFactors`, this kubeconfig to
/// `GetMyKubeconfig`, and every other call refused with `denial` as its message.
#[derive(Clone, Default)]
pub struct HostileApi {
    pub users: Vec<User>,
    pub factors: Factors,
    pub kubeconfig: String,
    pub denial: String,
}

type Answer<T> = Result<Response<T>, Status>;

impl HostileApi {
    fn refuse<T>(&self) -> Answer<T> {
        Err(Status::permission_denied(self.denial.clone()))
    }
}

#[tonic::async_trait]
impl UserService for HostileApi {
    async fn list_users(&self, _: Request<ListUsersRequest>) -> Answer<ListUsersResponse> {
        Ok(Response::new(ListUsersResponse {
            users: self.users.clone(),
        }))
    }
    async fn get_user(&self, _: Request<GetUserRequest>) -> Answer<GetUserResponse> {
        Ok(Response::new(GetUserResponse {
            user: self.users.first().cloned(),
        }))
    }
    async fn create_user(&self, _: Request<CreateUserRequest>) -> Answer<CreateUserResponse> {
        self.refuse()
    }
    async fn update_user(&self, _: Request<UpdateUserRequest>) -> Answer<UpdateUserResponse> {
        self.refuse()
    }
    async fn delete_user(&self, _: Request<DeleteUserRequest>) -> Answer<DeleteUserResponse> {
        self.refuse()
    }
    async fn set_password(&self, _: Request<SetPasswordRequest>) -> Answer<SetPasswordResponse> {
        self.refuse()
    }
    async fn change_own_password(
        &self,
        _: Request<ChangeOwnPasswordRequest>,
    ) -> Answer<ChangeOwnPasswordResponse> {
        self.refuse()
    }
    async fn revoke_sessions(&self, _: Request<RevokeSessionsRequest>) -> Answer<RevokeSessionsResponse> {
        self.refuse()
    }
    async fn get_my_kubeconfig(&self, _: Request<GetMyKubeconfigRequest>) -> Answer<GetMyKubeconfigResponse> {
        Ok(Response::new(GetMyKubeconfigResponse {
            kubeconfig: self.kubeconfig.clone(),
        }))
    }
    async fn who_am_i(&self, _: Request<WhoAmIRequest>) -> Answer<WhoAmIResponse> {
        self.refuse()
    }
    async fn list_own_factors(&self, _: Request<ListOwnFactorsRequest>) -> Answer<ListOwnFactorsResponse> {
        self.refuse()
    }
    async fn begin_totp(&self, _: Request<BeginTotpRequest>) -> Answer<BeginTotpResponse> {
        self.refuse()
    }
    async fn confirm_totp(&self, _: Request<ConfirmTotpRequest>) -> Answer<ConfirmTotpResponse> {
        self.refuse()
    }
    async fn begin_passkey_registration(
        &self,
        _: Request<BeginPasskeyRegistrationRequest>,
    ) -> Answer<BeginPasskeyRegistrationResponse> {
        self.refuse()
    }
    async fn finish_passkey_registration(
        &self,
        _: Request<FinishPasskeyRegistrationRequest>,
    ) -> Answer<FinishPasskeyRegistrationResponse> {
        self.refuse()
    }
    async fn regenerate_recovery_codes(
        &self,
        _: Request<RegenerateRecoveryCodesRequest>,
    ) -> Answer<RegenerateRecoveryCodesResponse> {
        self.refuse()
    }
    async fn remove_factor(&self, _: Request<RemoveFactorRequest>) -> Answer<RemoveFactorResponse> {
        self.refuse()
    }
    async fn get_user_factors(&self, _: Request<GetUserFactorsRequest>) -> Answer<GetUserFactorsResponse> {
        Ok(Response::new(GetUserFactorsResponse {
            factors: Some(self.factors.clone()),
        }))
    }
}

/// [`HostileApi`] served on 127.0.0.1 (plain http, which the CLI allows to the loopback), and a
/// `$HOME` whose login cache holds a valid `ichor-ui` login for it.
pub struct HostileSite {
    _runtime: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    /// The issuer URL: the server's base.
    pub base: String,
}

impl HostileSite {
    /// Serves the API `api` makes for the base URL (the issuer URL a kubeconfig would name).
    pub fn start(api: impl FnOnce(&str) -> HostileApi) -> Self {
        let runtime = crate::user_support::server_runtime();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        runtime.spawn(
            tonic::transport::Server::builder()
                .add_service(UserServiceServer::new(api(&base)))
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        let exp = jiff::Timestamp::now().as_second() + 600;
        seed_login(
            &dir.path().join("home"),
            &base,
            "ichor-ui",
            "e30.e30.c2ln",
            exp,
            None,
        );
        Self {
            _runtime: runtime,
            dir,
            base,
        }
    }

    /// A scratch directory of the test.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `ichor <args> --issuer <base>`.
    pub fn ichor(&self, args: &[&str]) -> Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--issuer", &self.base]);
        ichor_command(&self.dir.path().join("home"), &all)
            .output()
            .unwrap()
    }
}

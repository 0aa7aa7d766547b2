//! [`UserApi`]: the `UserService` implementation (see the module documentation of
//! [`crate::api`] for what every call does, in order).
//!
//! This module holds the configuration, the service value and the mapping of each RPC to its
//! handler; the handlers are grouped by what they act on: `users` (list, get, create, update,
//! delete), `passwords` (set, change one's own, revoke sessions), `factors` (second factors:
//! one's own, and an administrator's view) and `caller` (`WhoAmI`, `GetMyKubeconfig`), over the steps every call shares in `steps` (authentication, RBAC,
//! fresh reads, password hashing).

use std::{sync::Arc, time::Duration};

use ichor_renderers::crd::UsersSettings;
use tonic::{Request, Response, Status};

use super::{
    access::AccessReview,
    auth::{BearerVerifier, Clock, SessionCache},
    backend::UserBackend,
    error::ApiError,
    proto::{
        self, BeginPasskeyRegistrationRequest, BeginPasskeyRegistrationResponse, BeginTotpRequest,
        BeginTotpResponse, ChangeOwnPasswordRequest, ChangeOwnPasswordResponse, ConfirmTotpRequest,
        ConfirmTotpResponse, CreateUserRequest, CreateUserResponse, DeleteUserRequest, DeleteUserResponse,
        FinishPasskeyRegistrationRequest, FinishPasskeyRegistrationResponse, GetMyKubeconfigRequest,
        GetMyKubeconfigResponse, GetUserFactorsRequest, GetUserFactorsResponse, GetUserRequest,
        GetUserResponse, ListOwnFactorsRequest, ListOwnFactorsResponse, ListUsersRequest, ListUsersResponse,
        RegenerateRecoveryCodesRequest, RegenerateRecoveryCodesResponse, RemoveFactorRequest,
        RemoveFactorResponse, RevokeSessionsRequest, RevokeSessionsResponse, SetPasswordRequest,
        SetPasswordResponse, UpdateUserRequest, UpdateUserResponse, WhoAmIRequest, WhoAmIResponse,
        user_service_server::UserServiceServer,
    },
};
use crate::store::USER_CACHE_TTL;

mod caller;
mod factors;
mod passkeys;
mod passwords;
mod steps;

pub use steps::UNTRUSTED_ISSUER;
mod users;

/// The largest request message accepted, in bytes (the largest valid request is a few KiB).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The cluster a kubeconfig points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The cluster's name (kubeconfig entry names).
    pub name: String,
    /// The server when `kubeAPIServerURL` is not set and no followed `TalosCluster.spec.endpoint`
    /// is known ([`ApiConfig::talos_endpoint`]): with `--store kube` the issuer's own client's
    /// server, with `ichor dev` the one given.
    pub endpoint: String,
    /// The cluster CA certificate(s), PEM. Public data only. Empty: kubeconfigs are written
    /// without `certificate-authority-data` (no CA was found to publish).
    pub ca_pem: String,
}

/// What the service is configured with.
#[derive(Debug)]
pub struct ApiConfig {
    /// The issuer's external URL (the exec plugin's `--issuer`).
    pub issuer_url: String,
    /// The cluster for `GetMyKubeconfig` (`None`: the call fails with `FailedPrecondition`).
    pub cluster: Option<ClusterInfo>,
    /// The followed `TalosCluster.spec.endpoint` (`--store kube`), the server between
    /// `kubeAPIServerURL` and [`ClusterInfo::endpoint`]; `None`: the latter is the cluster's
    /// endpoint.
    pub talos_endpoint: Option<Arc<crate::talos_cluster::ClusterEndpoint>>,
    /// The runtime settings (`IchorInstallation.spec.users`), replaced when they change (the
    /// issuer's own, shared).
    pub settings: Arc<crate::oidc::Settings>,
    /// How long a session state (`notBefore`, `mustChange`) may be cached (at most 10 s).
    pub session_ttl: Duration,
    /// The argon2id gate, the per-user back-off and the per-source failure buckets, shared with
    /// the issuer's sign-in form ([`crate::oidc::Issuer::password_limits`]): every argon2id of the
    /// process goes through the one gate, and a wrong old password is a failed sign-in.
    pub passwords: crate::oidc::password_limits::PasswordLimits,
    /// The external provider whose ID tokens are accepted beside Ichor's (`None`: Ichor's
    /// only).
    pub external: Option<Arc<crate::external::ExternalVerifier>>,
    /// The keys authenticator-app enrolment tickets are signed and checked with: the issuer's
    /// ([`crate::oidc::Issuer::keys`]), so a key rotation reaches them as it reaches every other
    /// artifact. Empty: `BeginTotp` and `ConfirmTotp` answer `unavailable`.
    pub keys: Arc<crate::keys::KeyRing>,
}

impl ApiConfig {
    /// A configuration with default settings, a 10 s session cache and password limits of its
    /// own ([`crate::oidc::password_limits::PasswordLimits::standalone`]; `ichor-issuer` gives it
    /// its issuer's).
    ///
    /// # Errors
    /// Never in practice (the default settings are in range); kept so nothing panics.
    pub fn new(issuer_url: impl Into<String>, cluster: Option<ClusterInfo>) -> Result<Self, ApiError> {
        let settings = UsersSettings::resolve(None).map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(Self {
            issuer_url: issuer_url.into(),
            cluster,
            talos_endpoint: None,
            settings: Arc::new(crate::oidc::Settings::new(settings)),
            session_ttl: USER_CACHE_TTL,
            passwords: crate::oidc::password_limits::PasswordLimits::standalone(),
            external: None,
            keys: Arc::new(crate::keys::KeyRing::new()),
        })
    }
}

/// The `UserService`, generic over the store backend `B`, the authorization backend `A` and the
/// token verifier `V`. Cheap to clone.
pub struct UserApi<B, A, V> {
    inner: Arc<Inner<B, A, V>>,
}

impl<B, A, V> Clone for UserApi<B, A, V> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<B, A, V> {
    store: Arc<B>,
    access: A,
    verifier: V,
    clock: Arc<dyn Clock>,
    sessions: SessionCache,
    relying_party: Option<crate::passkeys::RelyingParty>,
    config: ApiConfig,
}

/// Wraps the service for a tonic server, with the request size bounded by
/// [`MAX_MESSAGE_BYTES`]. For browsers, serve it behind `tonic_web::GrpcWebLayer` (HTTP/1.1
/// accepted).
pub fn grpc_service<B, A, V>(api: UserApi<B, A, V>) -> UserServiceServer<UserApi<B, A, V>>
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    UserServiceServer::new(api).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// The service as the issuer's listener serves it: the routes `/ichor.v1alpha1.UserService/*`
/// over [`grpc_service`], behind `tonic_web::GrpcWebLayer` so that browsers reach it as
/// gRPC-web (binary `application/grpc-web` and base64 `application/grpc-web-text`, over
/// HTTP/1.1) while gRPC clients pass through unchanged. Every request body, its framing and its
/// message are decoded here, before the handler runs.
pub fn grpc_router<B, A, V>(api: UserApi<B, A, V>) -> axum::Router
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    use tonic::server::NamedService as _;
    use tower::Layer as _;

    let path = format!("/{}/{{*rest}}", UserServiceServer::<UserApi<B, A, V>>::NAME);
    axum::Router::new().route_service(&path, tonic_web::GrpcWebLayer::new().layer(grpc_service(api)))
}

/// Which calls a `mustChange` user, or one who must enrol a second factor, may make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    /// Only when the password need not be changed.
    Normal,
    /// Also when it must be changed (`WhoAmI`, `ChangeOwnPassword`).
    AllowMustChange,
    /// Like [`Gate::Normal`], for a call that changes a user: the caller's `IchorUser` and
    /// session state are read afresh, never from the cache, so a caller disabled, demoted or
    /// revoked a moment ago (on another replica too) acts with what it holds now.
    Change,
    /// Like [`Gate::Normal`], also while the second-factor policy requires the caller to enrol
    /// (`ListOwnFactors`).
    EnrolRead,
    /// Like [`Gate::Change`], also while the caller must enrol (`BeginTotp`, `ConfirmTotp`).
    EnrolChange,
}

impl Gate {
    /// Whether the call changes a user (the caller is read afresh).
    fn changes(self) -> bool {
        matches!(self, Gate::Change | Gate::EnrolChange)
    }

    /// Whether the call is open to a caller the second-factor policy requires to enrol.
    fn allowed_while_enrolling(self) -> bool {
        matches!(self, Gate::AllowMustChange | Gate::EnrolRead | Gate::EnrolChange)
    }
}

impl<B, A, V> UserApi<B, A, V>
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    /// The service over `store`, asking `access` and verifying tokens with `verifier`, reading
    /// the time from `clock`.
    pub fn new(store: Arc<B>, access: A, verifier: V, clock: Arc<dyn Clock>, config: ApiConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                access,
                verifier,
                clock,
                sessions: SessionCache::new(config.session_ttl),
                relying_party: crate::passkeys::RelyingParty::for_issuer(&config.issuer_url),
                config,
            }),
        }
    }
}

fn respond<T>(result: Result<T, ApiError>) -> Result<Response<T>, Status> {
    result.map(Response::new).map_err(Status::from)
}

#[tonic::async_trait]
impl<B, A, V> proto::user_service_server::UserService for UserApi<B, A, V>
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    async fn list_users(
        &self,
        request: Request<ListUsersRequest>,
    ) -> Result<Response<ListUsersResponse>, Status> {
        respond(self.list_users_impl(request).await)
    }

    async fn get_user(&self, request: Request<GetUserRequest>) -> Result<Response<GetUserResponse>, Status> {
        respond(self.get_user_impl(request).await)
    }

    async fn create_user(
        &self,
        request: Request<CreateUserRequest>,
    ) -> Result<Response<CreateUserResponse>, Status> {
        respond(self.create_user_impl(request).await)
    }

    async fn update_user(
        &self,
        request: Request<UpdateUserRequest>,
    ) -> Result<Response<UpdateUserResponse>, Status> {
        respond(self.update_user_impl(request).await)
    }

    async fn delete_user(
        &self,
        request: Request<DeleteUserRequest>,
    ) -> Result<Response<DeleteUserResponse>, Status> {
        respond(self.delete_user_impl(request).await)
    }

    async fn set_password(
        &self,
        request: Request<SetPasswordRequest>,
    ) -> Result<Response<SetPasswordResponse>, Status> {
        respond(self.set_password_impl(request).await)
    }

    async fn change_own_password(
        &self,
        request: Request<ChangeOwnPasswordRequest>,
    ) -> Result<Response<ChangeOwnPasswordResponse>, Status> {
        respond(self.change_own_password_impl(request).await)
    }

    async fn revoke_sessions(
        &self,
        request: Request<RevokeSessionsRequest>,
    ) -> Result<Response<RevokeSessionsResponse>, Status> {
        respond(self.revoke_sessions_impl(request).await)
    }

    async fn get_my_kubeconfig(
        &self,
        request: Request<GetMyKubeconfigRequest>,
    ) -> Result<Response<GetMyKubeconfigResponse>, Status> {
        respond(self.get_my_kubeconfig_impl(request).await)
    }

    async fn who_am_i(&self, request: Request<WhoAmIRequest>) -> Result<Response<WhoAmIResponse>, Status> {
        respond(self.who_am_i_impl(request).await)
    }

    async fn list_own_factors(
        &self,
        request: Request<ListOwnFactorsRequest>,
    ) -> Result<Response<ListOwnFactorsResponse>, Status> {
        respond(self.list_own_factors_impl(request).await)
    }

    async fn begin_totp(
        &self,
        request: Request<BeginTotpRequest>,
    ) -> Result<Response<BeginTotpResponse>, Status> {
        respond(self.begin_totp_impl(request).await)
    }

    async fn confirm_totp(
        &self,
        request: Request<ConfirmTotpRequest>,
    ) -> Result<Response<ConfirmTotpResponse>, Status> {
        respond(self.confirm_totp_impl(request).await)
    }

    async fn begin_passkey_registration(
        &self,
        request: Request<BeginPasskeyRegistrationRequest>,
    ) -> Result<Response<BeginPasskeyRegistrationResponse>, Status> {
        respond(self.begin_passkey_registration_impl(request).await)
    }

    async fn finish_passkey_registration(
        &self,
        request: Request<FinishPasskeyRegistrationRequest>,
    ) -> Result<Response<FinishPasskeyRegistrationResponse>, Status> {
        respond(self.finish_passkey_registration_impl(request).await)
    }

    async fn regenerate_recovery_codes(
        &self,
        request: Request<RegenerateRecoveryCodesRequest>,
    ) -> Result<Response<RegenerateRecoveryCodesResponse>, Status> {
        respond(self.regenerate_recovery_codes_impl(request).await)
    }

    async fn remove_factor(
        &self,
        request: Request<RemoveFactorRequest>,
    ) -> Result<Response<RemoveFactorResponse>, Status> {
        respond(self.remove_factor_impl(request).await)
    }

    async fn get_user_factors(
        &self,
        request: Request<GetUserFactorsRequest>,
    ) -> Result<Response<GetUserFactorsResponse>, Status> {
        respond(self.get_user_factors_impl(request).await)
    }
}

//! [`UserApi`]: the `UserService` implementation (see the module documentation of
//! [`crate::api`] for what every call does, in order).

use std::{sync::Arc, time::Duration};

use ichor_renderers::{
    auth::{
        Password,
        credentials::CredentialsEntry,
        hash::{Verification, verify_password},
        roles::{UserChange, UserState, check_grant, check_last_admin},
    },
    crd::{IchorUser, IchorUserSpec, NAMESPACE, UsersSettings},
    rbac::Attributes,
};
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};

use crate::oidc::passwords::{generate_password, hash_password_random};

use super::{
    access::{self, AccessReview},
    auth::{BearerVerifier, Caller, Clock, SessionCache, SessionState, bearer_token},
    backend::UserBackend,
    error::ApiError,
    kubeconfig::{self, KubeconfigInput},
    proto::{
        self, ChangeOwnPasswordRequest, ChangeOwnPasswordResponse, CreateUserRequest, CreateUserResponse,
        DeleteUserRequest, DeleteUserResponse, GetMyKubeconfigRequest, GetMyKubeconfigResponse,
        GetUserRequest, GetUserResponse, ListUsersRequest, ListUsersResponse, RevokeSessionsRequest,
        RevokeSessionsResponse, SetPasswordRequest, SetPasswordResponse, UpdateUserRequest,
        UpdateUserResponse, WhoAmIRequest, WhoAmIResponse, create_user_request::InitialPassword,
        set_password_request::NewPassword, user_service_server::UserServiceServer,
    },
    validate,
};
use crate::store::{Change, StoredUser, USER_CACHE_TTL, modify_credentials};

/// The largest request message accepted, in bytes (the largest valid request is a few KiB).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// How many argon2id hashes may run at once by default (each holds 64 MiB).
pub const DEFAULT_HASH_PERMITS: usize = 2;

/// The cluster a kubeconfig points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The cluster's name (kubeconfig entry names).
    pub name: String,
    /// `TalosCluster.spec.endpoint`: the server when `kubeAPIServerURL` is not set.
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
    /// The runtime settings (`IchorInstallation.spec.users`), replaced when they change (the
    /// issuer's own, shared).
    pub settings: Arc<crate::oidc::Settings>,
    /// How long a session state (`notBefore`, `mustChange`) may be cached (at most 10 s).
    pub session_ttl: Duration,
    /// The argon2 semaphore, shared with the issuer's login endpoint.
    pub hash_permits: Arc<Semaphore>,
}

impl ApiConfig {
    /// A configuration with default settings, a 10 s session cache and its own semaphore of
    /// [`DEFAULT_HASH_PERMITS`].
    ///
    /// # Errors
    /// Never in practice (the default settings are in range); kept so nothing panics.
    pub fn new(issuer_url: impl Into<String>, cluster: Option<ClusterInfo>) -> Result<Self, ApiError> {
        let settings = UsersSettings::resolve(None).map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(Self {
            issuer_url: issuer_url.into(),
            cluster,
            settings: Arc::new(crate::oidc::Settings::new(settings)),
            session_ttl: USER_CACHE_TTL,
            hash_permits: Arc::new(Semaphore::new(DEFAULT_HASH_PERMITS)),
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

/// Which calls a `mustChange` user may make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    /// Only when the password need not be changed.
    Normal,
    /// Also when it must be changed (`WhoAmI`, `ChangeOwnPassword`).
    AllowMustChange,
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
                config,
            }),
        }
    }

    /// The session state of `name` (cached at most the configured TTL).
    async fn session(&self, name: &str) -> Result<Option<SessionState>, ApiError> {
        if let Some(state) = self.inner.sessions.get(name) {
            return Ok(state);
        }
        let (entry, _) = self.inner.store.read_credentials(name).await?;
        let state = entry.map(|e| SessionState {
            not_before: e.not_before,
            must_change: e.must_change,
        });
        self.inner.sessions.put(name, state);
        Ok(state)
    }

    /// Step 1 and 2: who calls, refused unless allowed to make a call of `gate`.
    async fn authenticate<T>(&self, request: &Request<T>, gate: Gate) -> Result<Caller, ApiError> {
        let missing = || {
            ApiError::Unauthenticated(
                "no bearer token: send \"authorization: Bearer <ID token>\" with an ID token for audience \
                 ichor-ui (ichor auth login --audience ichor-ui)"
                    .to_owned(),
            )
        };
        let header = request.metadata().get("authorization").ok_or_else(missing)?;
        let token = header.to_str().ok().and_then(bearer_token).ok_or_else(missing)?;
        let now = self.inner.clock.now();
        let claims = self
            .inner
            .verifier
            .verify(token, now)
            .map_err(|e| ApiError::Unauthenticated(e.to_string()))?;
        if claims.exp <= now {
            return Err(ApiError::Unauthenticated(
                "the bearer token has expired: sign in again".to_owned(),
            ));
        }
        let gone = || {
            ApiError::Unauthenticated(format!(
                "user {:?} does not exist or is disabled: sign in as another user",
                claims.sub
            ))
        };
        let user = self.inner.store.get_user(&claims.sub).await?.ok_or_else(gone)?;
        if user.disabled {
            return Err(gone());
        }
        let session = self.session(&user.name).await?.ok_or_else(|| {
            ApiError::Unauthenticated(format!(
                "user {:?} has no password set, so no session of it is valid: ask an administrator to set one",
                user.name
            ))
        })?;
        // The rule of `credentials::is_token_valid_for`: whole seconds, refused when iat < notBefore.
        if claims.iat.as_second() < session.not_before.as_second() {
            return Err(ApiError::Unauthenticated(
                "the sessions of this user were revoked after this token was issued: sign in again"
                    .to_owned(),
            ));
        }
        if session.must_change && gate == Gate::Normal {
            return Err(ApiError::MustChangePassword);
        }
        Ok(Caller {
            name: user.name,
            roles: user.roles,
            display_name: user.display_name,
            email: user.email,
            must_change: session.must_change,
        })
    }

    /// Step 4: refuses unless RBAC allows `caller` every one of `asks`.
    async fn require(&self, caller: &Caller, asks: &[Attributes]) -> Result<(), ApiError> {
        let subject = caller.subject();
        for attributes in asks {
            let allowed = self
                .inner
                .access
                .allowed(&subject, attributes)
                .await
                .map_err(|e| ApiError::Unavailable(e.to_string()))?;
            if !allowed {
                return Err(ApiError::Forbidden {
                    user: subject.user.clone(),
                    verb: attributes.verb.clone(),
                    resource: attributes.combined_resource(),
                    on: if attributes.name.is_empty() {
                        String::new()
                    } else {
                        format!(" {:?}", attributes.name)
                    },
                });
            }
        }
        Ok(())
    }

    /// The user, read fresh (after dropping any cached read).
    async fn existing_user(&self, name: &str) -> Result<StoredUser, ApiError> {
        self.inner.store.invalidate(name);
        self.inner
            .store
            .get_user(name)
            .await?
            .ok_or_else(|| ApiError::NotFound(name.to_owned()))
    }

    /// A user as the API shows it.
    async fn user_message(&self, user: StoredUser) -> Result<proto::User, ApiError> {
        let session = self.session(&user.name).await?;
        Ok(proto::User {
            name: user.name,
            display_name: user.display_name.unwrap_or_default(),
            email: user.email.unwrap_or_default(),
            roles: user.roles,
            disabled: user.disabled,
            password_set: session.is_some(),
            must_change: session.is_some_and(|s| s.must_change),
        })
    }

    /// Hashes a password off the async threads, at most the semaphore's number at once.
    async fn hash(&self, password: Password) -> Result<String, ApiError> {
        let _permit = self
            .inner
            .config
            .hash_permits
            .acquire()
            .await
            .map_err(|_| ApiError::Unavailable("the password hasher is shut down".to_owned()))?;
        tokio::task::spawn_blocking(move || hash_password_random(&password))
            .await
            .map_err(|e| ApiError::Internal(format!("the password hashing task failed: {e}")))?
            .map_err(|e| ApiError::Internal(e.to_string()))
    }

    /// Verifies a password against a stored hash, as [`Self::hash`] does its work.
    async fn verify(&self, password: Password, hash: String) -> Result<Verification, ApiError> {
        let _permit = self
            .inner
            .config
            .hash_permits
            .acquire()
            .await
            .map_err(|_| ApiError::Unavailable("the password hasher is shut down".to_owned()))?;
        tokio::task::spawn_blocking(move || verify_password(&password, &hash))
            .await
            .map_err(|e| ApiError::Internal(format!("the password check failed: {e}")))?
            .map_err(|e| ApiError::Internal(e.to_string()))
    }

    /// The other users, for the last-enabled-admin rule.
    async fn all_users(&self) -> Result<Vec<StoredUser>, ApiError> {
        Ok(self.inner.store.list_users().await?)
    }

    /// After this replica wrote `name`'s credentials.
    fn forget(&self, name: &str) {
        self.inner.sessions.invalidate(name);
        self.inner.store.invalidate(name);
    }

    async fn list_users_impl(
        &self,
        request: Request<ListUsersRequest>,
    ) -> Result<ListUsersResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        self.require(&caller, &[access::ichorusers("list", "")]).await?;
        let mut users = Vec::new();
        for user in self.inner.store.list_users().await? {
            users.push(self.user_message(user).await?);
        }
        Ok(ListUsersResponse { users })
    }

    async fn get_user_impl(&self, request: Request<GetUserRequest>) -> Result<GetUserResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let name = validate::user_name("name", &request.get_ref().name)?;
        self.require(&caller, &[access::ichorusers("get", name.as_str())])
            .await?;
        let user = self
            .inner
            .store
            .get_user(name.as_str())
            .await?
            .ok_or_else(|| ApiError::NotFound(name.to_string()))?;
        Ok(GetUserResponse {
            user: Some(self.user_message(user).await?),
        })
    }

    async fn create_user_impl(
        &self,
        request: Request<CreateUserRequest>,
    ) -> Result<CreateUserResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let req = request.into_inner();
        // Validate everything first.
        let name = validate::user_name("name", &req.name)?;
        validate::display_name(&req.display_name)?;
        validate::email(&req.email)?;
        validate::roles(&req.roles)?;
        let (password, generated) = match req.initial_password {
            Some(InitialPassword::Password(p)) => {
                let p = Password::new(p);
                validate::new_password("password", &p)?;
                (Some(p), false)
            }
            Some(InitialPassword::GeneratePassword(true)) => (Some(generated_password()?), true),
            Some(InitialPassword::GeneratePassword(false)) | None => (None, false),
        };
        let mut asks = vec![access::ichorusers("create", "")];
        if password.is_some() {
            asks.push(access::password(name.as_str()));
        }
        self.require(&caller, &asks).await?;
        check_grant(&caller.roles, &[] as &[&str], &req.roles)?;
        let generated_password = match (&password, generated) {
            (Some(p), true) => p.expose().to_owned(),
            _ => String::new(),
        };
        let now = self.inner.clock.now();
        let entry = match password {
            Some(p) => Some(CredentialsEntry::new(self.hash(p).await?, now, true)),
            None => None,
        };
        let spec = IchorUserSpec {
            display_name: non_empty(req.display_name),
            email: non_empty(req.email),
            roles: req.roles,
            disabled: req.disabled,
        };
        let mut object = IchorUser::new(name.as_str(), spec);
        object.metadata.namespace = Some(NAMESPACE.to_owned());
        // Write the user, then the credentials; undo the user if the credentials fail.
        self.inner.store.create_user(&caller, &object).await?;
        // A stale entry of an earlier user of this name must never let the new one sign in.
        let written = modify_credentials(self.inner.store.as_ref(), name.as_str(), |current| {
            Ok::<_, ApiError>(match (&entry, current) {
                (Some(entry), _) => Change::Put(entry.clone(), ()),
                (None, Some(_)) => Change::Remove(()),
                (None, None) => Change::Keep(()),
            })
        })
        .await;
        if let Err(error) = written {
            if let Err(undo) = self.inner.store.delete_user(&caller, name.as_str()).await {
                tracing::error!(user = %name, %undo, "could not remove a user whose credentials write failed");
            }
            self.forget(name.as_str());
            return Err(error);
        }
        self.forget(name.as_str());
        let user = self.existing_user(name.as_str()).await?;
        Ok(CreateUserResponse {
            user: Some(self.user_message(user).await?),
            generated_password,
        })
    }

    async fn update_user_impl(
        &self,
        request: Request<UpdateUserRequest>,
    ) -> Result<UpdateUserResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let req = request.into_inner();
        let name = validate::user_name("name", &req.name)?;
        if let Some(d) = &req.display_name {
            validate::display_name(d)?;
        }
        if let Some(e) = &req.email {
            validate::email(e)?;
        }
        if let Some(list) = &req.roles {
            validate::roles(&list.roles)?;
        }
        self.require(&caller, &[access::ichorusers("update", name.as_str())])
            .await?;
        let old = self.existing_user(name.as_str()).await?;
        let new_roles = req.roles.map_or_else(|| old.roles.clone(), |l| l.roles);
        let new_disabled = req.disabled.unwrap_or(old.disabled);
        check_grant(&caller.roles, &old.roles, &new_roles)?;
        let others = self.all_users().await?;
        check_last_admin(
            name.as_str(),
            &UserChange::Update {
                old: UserState {
                    roles: &old.roles,
                    disabled: old.disabled,
                },
                new: UserState {
                    roles: &new_roles,
                    disabled: new_disabled,
                },
            },
            others
                .iter()
                .map(|u| (u.name.as_str(), u.roles.as_slice(), u.disabled)),
        )?;
        let spec = IchorUserSpec {
            display_name: req.display_name.map_or(old.display_name, non_empty),
            email: req.email.map_or(old.email, non_empty),
            roles: new_roles,
            disabled: new_disabled,
        };
        let mut object = IchorUser::new(name.as_str(), spec);
        object.metadata.namespace = Some(NAMESPACE.to_owned());
        self.inner.store.update_user(&caller, &object).await?;
        self.forget(name.as_str());
        let user = self.existing_user(name.as_str()).await?;
        Ok(UpdateUserResponse {
            user: Some(self.user_message(user).await?),
        })
    }

    async fn delete_user_impl(
        &self,
        request: Request<DeleteUserRequest>,
    ) -> Result<DeleteUserResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let name = validate::user_name("name", &request.get_ref().name)?;
        self.require(&caller, &[access::ichorusers("delete", name.as_str())])
            .await?;
        let old = self.existing_user(name.as_str()).await?;
        let others = self.all_users().await?;
        check_last_admin(
            name.as_str(),
            &UserChange::Delete {
                old: UserState {
                    roles: &old.roles,
                    disabled: old.disabled,
                },
            },
            others
                .iter()
                .map(|u| (u.name.as_str(), u.roles.as_slice(), u.disabled)),
        )?;
        self.inner.store.delete_user(&caller, name.as_str()).await?;
        let removed = modify_credentials(self.inner.store.as_ref(), name.as_str(), |current| {
            Ok::<_, ApiError>(if current.is_some() {
                Change::Remove(())
            } else {
                Change::Keep(())
            })
        })
        .await;
        if let Err(error) = removed {
            // The user is gone, so the entry signs nobody in; garbage collection removes it.
            tracing::warn!(user = %name, %error, "deleted user's credentials entry not removed");
        }
        self.forget(name.as_str());
        Ok(DeleteUserResponse {})
    }

    async fn set_password_impl(
        &self,
        request: Request<SetPasswordRequest>,
    ) -> Result<SetPasswordResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let req = request.into_inner();
        let name = validate::user_name("name", &req.name)?;
        let (password, generated) = match req.new_password {
            Some(NewPassword::Password(p)) => {
                let p = Password::new(p);
                validate::new_password("password", &p)?;
                (p, false)
            }
            Some(NewPassword::Generate(true)) => (generated_password()?, true),
            Some(NewPassword::Generate(false)) | None => {
                return Err(ApiError::invalid(
                    "new_password",
                    "give a password or set generate: true",
                ));
            }
        };
        self.require(
            &caller,
            &[
                access::ichorusers("update", name.as_str()),
                access::password(name.as_str()),
            ],
        )
        .await?;
        self.existing_user(name.as_str()).await?;
        let generated_password = if generated {
            password.expose().to_owned()
        } else {
            String::new()
        };
        let hash = self.hash(password).await?;
        let now = self.inner.clock.now();
        modify_credentials(self.inner.store.as_ref(), name.as_str(), |current| {
            let entry = match current {
                Some(current) => current.with_new_password(hash.clone(), now, true),
                None => CredentialsEntry::new(hash.clone(), now, true),
            };
            Ok::<_, ApiError>(Change::Put(entry, ()))
        })
        .await?;
        self.forget(name.as_str());
        Ok(SetPasswordResponse { generated_password })
    }

    async fn change_own_password_impl(
        &self,
        request: Request<ChangeOwnPasswordRequest>,
    ) -> Result<ChangeOwnPasswordResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::AllowMustChange).await?;
        let req = request.into_inner();
        let old = Password::new(req.old_password);
        let new = Password::new(req.new_password);
        if old.len_bytes() == 0 {
            return Err(ApiError::invalid("old_password", "is required"));
        }
        validate::new_password("new_password", &new)?;
        let (entry, _) = self.inner.store.read_credentials(&caller.name).await?;
        let entry = entry.ok_or_else(|| {
            ApiError::FailedPrecondition(format!("user {:?} has no password to change", caller.name))
        })?;
        let verified_hash = entry.hash.clone();
        if !self.verify(old, verified_hash.clone()).await?.is_valid() {
            return Err(ApiError::invalid(
                "old_password",
                "does not match your current password",
            ));
        }
        let hash = self.hash(new).await?;
        let now = self.inner.clock.now();
        modify_credentials(self.inner.store.as_ref(), &caller.name, |current| match current {
            // Only over the password that was verified: a concurrent change wins.
            Some(current) if current.hash == verified_hash => Ok(Change::Put(
                current.with_new_password(hash.clone(), now, false),
                (),
            )),
            _ => Err(ApiError::Conflict(
                "the password was changed concurrently: sign in again and retry".to_owned(),
            )),
        })
        .await?;
        self.forget(&caller.name);
        Ok(ChangeOwnPasswordResponse {})
    }

    async fn revoke_sessions_impl(
        &self,
        request: Request<RevokeSessionsRequest>,
    ) -> Result<RevokeSessionsResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let name = validate::user_name("name", &request.get_ref().name)?;
        self.require(
            &caller,
            &[
                access::ichorusers("update", name.as_str()),
                access::password(name.as_str()),
            ],
        )
        .await?;
        self.existing_user(name.as_str()).await?;
        let now = self.inner.clock.now();
        modify_credentials(self.inner.store.as_ref(), name.as_str(), |current| {
            Ok::<_, ApiError>(match current {
                Some(current) => Change::Put(current.revoke_all(now), ()),
                None => Change::Keep(()),
            })
        })
        .await?;
        self.forget(name.as_str());
        Ok(RevokeSessionsResponse {})
    }

    async fn get_my_kubeconfig_impl(
        &self,
        request: Request<GetMyKubeconfigRequest>,
    ) -> Result<GetMyKubeconfigResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let ca_file = request.get_ref().ca_file.as_str();
        validate::ca_file(ca_file)?;
        self.require(&caller, &[access::kubeconfig()]).await?;
        let cluster = self.inner.config.cluster.as_ref().ok_or_else(|| {
            ApiError::FailedPrecondition("no cluster is configured for kubeconfigs on this issuer".to_owned())
        })?;
        let settings = self.inner.config.settings.get();
        let kubeconfig = kubeconfig::render(&KubeconfigInput {
            cluster_name: &cluster.name,
            user: &caller.name,
            server: kubeconfig::server_url(&settings, &cluster.endpoint),
            tls_server_name: settings.kube_api_tls_server_name.as_deref(),
            ca_pem: &cluster.ca_pem,
            issuer_url: &self.inner.config.issuer_url,
            ca_file: (!ca_file.is_empty()).then_some(ca_file),
        })
        .map_err(|e| ApiError::FailedPrecondition(e.to_string()))?;
        Ok(GetMyKubeconfigResponse { kubeconfig })
    }

    async fn who_am_i_impl(&self, request: Request<WhoAmIRequest>) -> Result<WhoAmIResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::AllowMustChange).await?;
        Ok(WhoAmIResponse {
            name: caller.name,
            display_name: caller.display_name.unwrap_or_default(),
            email: caller.email.unwrap_or_default(),
            roles: caller.roles,
            must_change: caller.must_change,
        })
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn generated_password() -> Result<Password, ApiError> {
    generate_password().map_err(|e| ApiError::Unavailable(e.to_string()))
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
}

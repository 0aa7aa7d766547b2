//! Helpers shared by the `api_*` tests: a `UserApi` over a `LocalStore` in a temporary
//! directory, the in-process RBAC review, a fake bearer verifier and a settable clock.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use async_trait::async_trait;
use ichor_issuer::{
    api::{
        ApiError, BearerClaims, BearerError, BearerVerifier, Caller, Clock, Created, LocalAccessReview,
        UserApi, UserBackend,
    },
    store::{StoreError, StoredUser, UserStore, Version, local::LocalStore},
};
use ichor_renderers::{
    auth::{credentials::CredentialsEntry, hash::DUMMY_PHC},
    crd::{IchorUser, IchorUserSpec, NAMESPACE},
    rbac::{Authorizer, Policy},
};
use jiff::Timestamp;
use tonic::{Code, Status};

pub const ISSUER: &str = "https://ichor.example.com";
/// The password of every seeded user whose hash is real (see [`real_hash`]).
pub const PASSWORD: &str = "correct horse battery";

pub fn t0() -> Timestamp {
    "2026-11-05T10:00:00Z".parse().unwrap()
}

/// The issuer keys of the service (enrolment tickets): the controller's first keys at [`t0`],
/// one ring per test binary.
pub fn key_ring() -> Arc<ichor_issuer::keys::KeyRing> {
    static RING: OnceLock<Arc<ichor_issuer::keys::KeyRing>> = OnceLock::new();
    Arc::clone(RING.get_or_init(|| {
        let document = ichor_testkit::issuer::keys::first_document(t0());
        Arc::new(ichor_issuer::keys::KeyRing::with_keys(
            ichor_issuer::keys::LoadedKeys::from_document(&document).unwrap(),
        ))
    }))
}

/// Who seeds the test users (an administrator; the local backend ignores it).
pub fn seeder() -> Caller {
    caller("seeder", &["admin"])
}

/// The clock the test moves: the kit's.
pub use ichor_testkit::issuer::clock::ManualClock as TestClock;

/// Tokens are `sub@iat-seconds[@groups,…[@amr,…]]`; `bad` and anything else unparseable are refused.
#[derive(Debug, Default)]
pub struct FakeVerifier;

impl BearerVerifier for FakeVerifier {
    fn verify(&self, token: &str, now: Timestamp) -> Result<BearerClaims, BearerError> {
        let mut parts = token.split('@');
        let (Some(sub), Some(iat)) = (parts.next(), parts.next()) else {
            return Err(BearerError("signature invalid".into()));
        };
        let iat = Timestamp::from_second(iat.parse().map_err(|_| BearerError("bad iat".into()))?)
            .map_err(|_| BearerError("bad iat".into()))?;
        let groups = parts
            .next()
            .filter(|g| !g.is_empty())
            .map(|g| g.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        // A fourth part names the sign-in's `amr`; without it the token stands for a sign-in that
        // passed every step its user has (`pwd,otp,mfa`).
        let amr = parts.next().map_or_else(
            || vec!["pwd".to_owned(), "otp".to_owned(), "mfa".to_owned()],
            |a| a.split(',').map(str::to_owned).collect(),
        );
        let exp = iat + jiff::SignedDuration::from_mins(5);
        if exp <= now {
            return Err(BearerError("expired".into()));
        }
        Ok(BearerClaims {
            sub: sub.to_owned(),
            groups,
            iat,
            exp,
            amr,
        })
    }
}

/// A real argon2id hash of [`PASSWORD`] (made once per test binary).
pub fn real_hash() -> String {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| ichor_testkit::issuer::harness::hash_of(PASSWORD))
        .clone()
}

pub type Api<B = LocalStore> = UserApi<B, LocalAccessReview, FakeVerifier>;

pub struct Env<B: UserBackend = LocalStore> {
    pub dir: tempfile::TempDir,
    pub store: Arc<B>,
    pub api: Api<B>,
    pub clock: Arc<TestClock>,
    pub config_settings: Arc<ichor_issuer::oidc::Settings>,
    /// The followed `TalosCluster.spec.endpoint` of the service (unknown until a test applies
    /// clusters).
    pub talos_endpoint: Arc<ichor_issuer::talos_cluster::ClusterEndpoint>,
}

pub fn local_store(dir: &tempfile::TempDir) -> LocalStore {
    LocalStore::new(dir.path().join("users"), dir.path().join("state")).with_user_ttl(Duration::ZERO)
}

pub fn authorizer(extra: Option<&str>) -> Authorizer {
    let mut policy = Policy::builtin().unwrap();
    if let Some(yaml) = extra {
        policy = policy.extend(Policy::parse(yaml).unwrap());
    }
    Authorizer::new(policy)
}

/// A site that lets operators manage users and set their passwords (`ichorusers` and
/// `ichorusers/password`): the delegation under which an operator must still not act on an admin.
pub const OPERATORS_MANAGE_USERS_AND_PASSWORDS: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: user-manager}
rules:
  - apiGroups: ["ichor.maesh.dev"]
    resources: ["ichorusers"]
    verbs: ["get", "list", "create", "update", "delete"]
  - apiGroups: ["ichor.maesh.dev"]
    resources: ["ichorusers/password"]
    verbs: ["update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: operators-manage-users}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: user-manager}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "ichor:operator"}]
"#;

pub fn env() -> Env {
    env_with(None)
}

pub fn env_with(extra_rbac: Option<&str>) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(local_store(&dir));
    env_over(dir, store, extra_rbac)
}

pub fn env_over<B: UserBackend>(dir: tempfile::TempDir, store: Arc<B>, extra_rbac: Option<&str>) -> Env<B> {
    env_following(
        dir,
        store,
        extra_rbac,
        ichor_issuer::talos_cluster::ClusterEndpoint::new("prod"),
    )
}

/// [`env_over`] following the `TalosCluster`s through `endpoint` (a cluster choice, say).
pub fn env_following<B: UserBackend>(
    dir: tempfile::TempDir,
    store: Arc<B>,
    extra_rbac: Option<&str>,
    endpoint: ichor_issuer::talos_cluster::ClusterEndpoint,
) -> Env<B> {
    let talos_endpoint = Arc::new(endpoint);
    let (api, clock, config_settings) =
        build_api_with(Arc::clone(&store), extra_rbac, Some(Arc::clone(&talos_endpoint)));
    Env {
        dir,
        store,
        api,
        clock,
        config_settings,
        talos_endpoint,
    }
}

/// A service over `store` with the built-in roles (plus `extra_rbac`), the fake verifier, a
/// clock at [`t0`], no session cache and the `prod` cluster.
pub fn build_api<B: UserBackend>(
    store: Arc<B>,
    extra_rbac: Option<&str>,
) -> (Api<B>, Arc<TestClock>, Arc<ichor_issuer::oidc::Settings>) {
    build_api_with(store, extra_rbac, None)
}

/// [`build_api`] following `talos_endpoint` for `GetMyKubeconfig`.
pub fn build_api_with<B: UserBackend>(
    store: Arc<B>,
    extra_rbac: Option<&str>,
    talos_endpoint: Option<Arc<ichor_issuer::talos_cluster::ClusterEndpoint>>,
) -> (Api<B>, Arc<TestClock>, Arc<ichor_issuer::oidc::Settings>) {
    let clock = Arc::new(TestClock::new(t0()));
    let mut config = ichor_testkit::issuer::harness::api_config(ISSUER);
    config.talos_endpoint = talos_endpoint;
    config.keys = key_ring();
    let settings = Arc::clone(&config.settings);
    let api = UserApi::new(
        store,
        LocalAccessReview::new(authorizer(extra_rbac)),
        FakeVerifier,
        Arc::clone(&clock) as Arc<dyn Clock>,
        config,
    );
    (api, clock, settings)
}

impl<B: UserBackend> Env<B> {
    /// Seeds a user object and (unless `hash` is `None`) its credentials entry.
    pub async fn seed(
        &self,
        name: &str,
        roles: &[&str],
        disabled: bool,
        hash: Option<&str>,
        must_change: bool,
    ) {
        let spec = IchorUserSpec {
            display_name: Some(format!("{name} display")),
            email: Some(format!("{name}@example.com")),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            disabled,
        };
        let mut user = IchorUser::new(name, spec);
        user.metadata.namespace = Some(NAMESPACE.into());
        self.store.create_user(&seeder(), &user).await.unwrap();
        if let Some(hash) = hash {
            let entry = CredentialsEntry::new(
                hash.to_owned(),
                t0() - jiff::SignedDuration::from_hours(1),
                must_change,
            );
            self.put_entry(name, Some(&entry)).await;
        }
    }

    pub async fn put_entry(&self, name: &str, entry: Option<&CredentialsEntry>) {
        let (_, version) = self.store.read_credentials(name).await.unwrap();
        self.store.write_credentials(name, &version, entry).await.unwrap();
    }

    /// The usual cast, each with password [`PASSWORD`]: `admin` (admin), `op` (operator), `view`
    /// (viewer), `nobody` (no role), and `target` (viewer, a dummy hash) to act on.
    pub async fn cast(&self) {
        let hash = real_hash();
        self.seed("admin", &["admin"], false, Some(&hash), false).await;
        self.seed("op", &["operator"], false, Some(&hash), false).await;
        self.seed("view", &["viewer"], false, Some(&hash), false).await;
        self.seed("nobody", &[], false, Some(&hash), false).await;
        self.seed("target", &["viewer"], false, Some(DUMMY_PHC), false)
            .await;
    }

    pub async fn entry(&self, name: &str) -> Option<CredentialsEntry> {
        self.store.read_credentials(name).await.unwrap().0
    }

    pub async fn user(&self, name: &str) -> Option<StoredUser> {
        self.store.get_user(name).await.unwrap()
    }
}

/// A token for `sub` issued now.
pub fn token(sub: &str, now: Timestamp) -> String {
    format!("{sub}@{}", now.as_second())
}

/// A request carrying `authorization: Bearer <token>`.
pub use ichor_testkit::issuer::grpc::bearer_request as req;

pub fn assert_status<T: std::fmt::Debug>(result: Result<T, Status>, code: Code, contains: &str) {
    let status = result.expect_err("the call should have been refused");
    assert_eq!(status.code(), code, "{status:?}");
    assert!(
        status.message().contains(contains),
        "{:?} lacks {contains:?}",
        status.message()
    );
}

/// A backend that delegates to a local store but whose credentials writes fail.
pub struct FailingCredentials(pub LocalStore);

#[async_trait]
impl UserStore for FailingCredentials {
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        self.0.get_user(name).await
    }
    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError> {
        self.0.list_users().await
    }
    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        self.0.read_credentials(name).await
    }
    async fn write_credentials(
        &self,
        _name: &str,
        _expected: &Version,
        _entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        Err(StoreError::Unavailable("injected failure".into()))
    }
    fn invalidate(&self, name: &str) {
        self.0.invalidate(name);
    }
}

#[async_trait]
impl UserBackend for FailingCredentials {
    async fn create_user(&self, caller: &Caller, user: &IchorUser) -> Result<Created, ApiError> {
        UserBackend::create_user(&self.0, caller, user).await
    }
    async fn undo_create(&self, caller: &Caller, name: &str, created: &Created) -> Result<(), ApiError> {
        UserBackend::undo_create(&self.0, caller, name, created).await
    }
    async fn update_user(&self, caller: &Caller, user: &IchorUser) -> Result<(), ApiError> {
        UserBackend::update_user(&self.0, caller, user).await
    }
    async fn delete_user(&self, caller: &Caller, name: &str) -> Result<(), ApiError> {
        UserBackend::delete_user(&self.0, caller, name).await
    }
}

/// A caller of the API: `ichor:<name>` with the groups `ichor:<role>`.
pub fn caller(name: &str, roles: &[&str]) -> ichor_issuer::api::Caller {
    ichor_issuer::api::Caller::ichor(name, roles)
}

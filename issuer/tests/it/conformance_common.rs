//! Shared harness of the tests of the REAL `ichor-issuer` binary (the `conformance_*` tests and
//! the cluster test): started on loopback with a test CA and leaf (rcgen), a `keys.json` made by
//! the controller's own key timeline, and either the local store holding one user whose password
//! is hashed by `ichor_renderers::auth::hash`, or `--store kube` with a kubeconfig; further
//! replicas on the same files and external URL; an HTTPS client trusting the test CA; a sign-in
//! driven through the real endpoints (authorize as JSON → ticket → login → code → token); and
//! the `UserService` over gRPC with TLS.
//!
//! Third-party consumers (the go-oidc verifier) are found under `$ICHOR_BUILD_DIR`; a test that
//! needs one is `#[ignore]`d and, when run, fails if it is missing, naming the command that
//! provides it (unless `ICHOR_REQUIRE_CONSUMERS=0`).
#![allow(
    dead_code,
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use ichor_renderers::{auth::credentials::CredentialsEntry, trust::KeysDocument};
use ichor_testkit::issuer::sign_in::{self, Authorize, Refusal, SlowDown};
use ichor_testkit::pki::TestCa;
use jiff::{SignedDuration, Timestamp};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use ichor_testkit::issuer::harness::{CLI_REDIRECT, PASSWORD, password_hash};
pub use ichor_testkit::issuer::keys::{realize, timeline_settings};
pub use ichor_testkit::jwt::header as jose_header;

pub const USER: &str = "alice";

/// A free loopback port (bound and released; the issuer binds it right after).
pub fn free_port() -> u16 {
    ichor_testkit::control_plane::free_port().unwrap()
}

/// The go-oidc v2 verifier harness. Panics when it is missing, saying what builds it; `None`
/// (after printing why) only under `ICHOR_REQUIRE_CONSUMERS=0`.
pub fn go_oidc_verifier() -> Option<PathBuf> {
    ichor_testkit::consumers::require_path(
        ichor_testkit::consumers::build_dir().join("go-oidc-verify"),
        "hack/install-test-deps.sh",
    )
}

/// The files of one deployment under `root`, as the chart mounts them: `tls/` (a serving
/// certificate of a fresh test CA, whose PEM is also `ca.crt`), `users/` (each of `users` an
/// admin), `state/credentials.json` (each with [`PASSWORD`]) and `keys.json` (made by the key
/// timeline, its first RSA key created `key_age` ago). The CA's PEM, the keys and how many
/// fixture keys they took.
pub fn lay_out(root: &Path, users: &[&str], key_age: SignedDuration) -> (String, KeysDocument, usize) {
    let ca = TestCa::new("ichor conformance test CA").unwrap();
    let leaf = ca.serving("localhost").unwrap();
    let (tls, users_dir, state) = (root.join("tls"), root.join("users"), root.join("state"));
    for d in [&tls, &users_dir, &state] {
        std::fs::create_dir_all(d).unwrap();
    }
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::write(tls.join("tls.crt"), &leaf.cert_pem).unwrap();
    std::fs::write(tls.join("tls.key"), &leaf.key_pem).unwrap();
    std::fs::write(root.join("ca.crt"), &ca.pem).unwrap();
    for user in users {
        std::fs::write(users_dir.join(format!("{user}.yaml")), user_yaml(user, "[admin]")).unwrap();
    }
    let now = Timestamp::now();
    std::fs::write(
        state.join("credentials.json"),
        credentials_json(users, &password_hash(), now - SignedDuration::from_hours(1)),
    )
    .unwrap();
    let mut keys_made = 0;
    let plan = ichor_renderers::trust::plan(now - key_age, None, &timeline_settings());
    let keys = realize(&plan, None, &mut keys_made);
    std::fs::write(root.join("keys.json"), keys.to_json()).unwrap();
    (ca.pem, keys, keys_made)
}

/// Where an issuer process keeps users and credentials.
#[derive(Clone, Default)]
pub enum Store {
    /// `--store local` on the harness's users and state directories (alice, an admin).
    #[default]
    Local,
    /// `--store kube` with this kubeconfig (`KUBECONFIG`) and the cluster's CA (the
    /// kubeconfigs' `--kube-ca-file`).
    Kube { kubeconfig: PathBuf, ca_file: PathBuf },
}

/// Options of one issuer process.
#[derive(Clone)]
pub struct Options {
    pub token_ttl: &'static str,
    /// Extra environment (e.g. `RUST_LOG`).
    pub env: Vec<(&'static str, String)>,
    pub store: Store,
    /// The process's working directory (the test's own when `None`).
    pub cwd: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            token_ttl: "5m",
            env: Vec::new(),
            store: Store::Local,
            cwd: None,
        }
    }
}

/// A running `ichor-issuer` process and its files; killed on drop.
pub struct RunningIssuer {
    pub child: Child,
    /// The files, shared by the replicas.
    pub dir: std::sync::Arc<tempfile::TempDir>,
    pub external: SocketAddr,
    pub internal: SocketAddr,
    /// The external URL, `https://127.0.0.1:<port>` of the first replica (the `iss`).
    pub issuer: String,
    /// Where this process answers, `https://127.0.0.1:<its external port>`.
    pub url: String,
    pub ca_pem: String,
    pub ca_path: PathBuf,
    pub keys_path: PathBuf,
    /// The keys document currently written.
    pub keys: KeysDocument,
    /// Fixture keys used so far (see [`realize`]).
    pub keys_made: usize,
    pub client: reqwest::Client,
}

impl Drop for RunningIssuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The YAML of an `IchorUser`.
pub fn user_yaml(name: &str, roles: &str) -> String {
    format!(
        "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\n\
         metadata:\n  name: {name}\n  namespace: ichor-system\n\
         spec:\n  displayName: {name} display\n  roles: {roles}\n"
    )
}

/// `<state>/credentials.json` with one entry per user, all with the same password hash.
pub fn credentials_json(users: &[&str], hash: &str, not_before: Timestamp) -> String {
    let mut entries = serde_json::Map::new();
    for user in users {
        let entry = CredentialsEntry::new(hash.to_owned(), not_before, false);
        let value: serde_json::Value = serde_json::from_str(&entry.to_json(user).unwrap()).unwrap();
        entries.insert((*user).to_owned(), value);
    }
    serde_json::json!({"generation": 1, "entries": entries}).to_string()
}

impl RunningIssuer {
    /// Starts the binary with `alice` (admin) and keys whose first RSA key was created
    /// `key_age` ago; waits for `/readyz`.
    pub async fn start(options: Options) -> RunningIssuer {
        Self::start_with(options, SignedDuration::from_hours(30)).await
    }

    pub async fn start_with(options: Options, key_age: SignedDuration) -> RunningIssuer {
        Self::start_users(options, &[USER], key_age).await
    }

    /// As [`RunningIssuer::start`], with `users` (each an admin with [`PASSWORD`]) instead of
    /// [`USER`] alone.
    pub async fn start_for(options: Options, users: &[&str]) -> RunningIssuer {
        Self::start_users(options, users, SignedDuration::from_hours(30)).await
    }

    async fn start_users(options: Options, users: &[&str], key_age: SignedDuration) -> RunningIssuer {
        let mut running = Self::start_unready(options, users, key_age);
        running.wait_ready().await;
        running
    }

    /// As [`RunningIssuer::start_for`] without waiting for `/readyz` (a test of what it says
    /// while not ready).
    pub fn start_unready(options: Options, users: &[&str], key_age: SignedDuration) -> RunningIssuer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let (ca_pem, keys, keys_made) = lay_out(dir.path(), users, key_age);
        let external = free_port();
        let issuer = format!("https://127.0.0.1:{external}");
        let dir = std::sync::Arc::new(dir);
        Self::spawn_unwaited(&dir, external, issuer, ca_pem, keys, keys_made, &options)
    }

    /// Another process on the same files and external URL (the `iss`), with its own ports:
    /// a second replica behind one Service.
    pub async fn replica(&self, options: &Options) -> RunningIssuer {
        Self::spawn(
            &self.dir,
            free_port(),
            self.issuer.clone(),
            self.ca_pem.clone(),
            self.keys.clone(),
            self.keys_made,
            options,
        )
        .await
    }

    async fn spawn(
        dir: &std::sync::Arc<tempfile::TempDir>,
        external: u16,
        issuer: String,
        ca_pem: String,
        keys: KeysDocument,
        keys_made: usize,
        options: &Options,
    ) -> RunningIssuer {
        let mut running = Self::spawn_unwaited(dir, external, issuer, ca_pem, keys, keys_made, options);
        running.wait_ready().await;
        running
    }

    fn spawn_unwaited(
        dir: &std::sync::Arc<tempfile::TempDir>,
        external: u16,
        issuer: String,
        ca_pem: String,
        keys: KeysDocument,
        keys_made: usize,
        options: &Options,
    ) -> RunningIssuer {
        let internal = free_port();
        let root = dir.path();
        let keys_path = root.join("keys.json");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ichor-issuer"));
        cmd.args(["--external-url", &issuer])
            .args(["--listen", &format!("127.0.0.1:{external}")])
            .args(["--internal-listen", &format!("127.0.0.1:{internal}")])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .arg("--ichor-tls-dir")
            .arg(root.join("tls"))
            .arg("--keys-file")
            .arg(&keys_path)
            .args(["--token-ttl", options.token_ttl])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        match &options.store {
            Store::Local => {
                cmd.args(["--store", "local", "--local-users-dir"])
                    .arg(root.join("users"))
                    .arg("--local-state-dir")
                    .arg(root.join("state"));
            }
            Store::Kube { kubeconfig, ca_file } => {
                cmd.args(["--store", "kube", "--kube-ca-file"])
                    .arg(ca_file)
                    .env("KUBECONFIG", kubeconfig);
            }
        }
        for (k, v) in &options.env {
            cmd.env(k, v);
        }
        if let Some(cwd) = &options.cwd {
            cmd.current_dir(cwd);
        }
        let child = cmd.spawn().unwrap();
        let client = https_client(&ca_pem);
        RunningIssuer {
            child,
            dir: std::sync::Arc::clone(dir),
            external: ([127, 0, 0, 1], external).into(),
            internal: ([127, 0, 0, 1], internal).into(),
            issuer,
            url: format!("https://127.0.0.1:{external}"),
            ca_pem,
            ca_path: root.join("ca.crt"),
            keys_path,
            keys,
            keys_made,
            client,
        }
    }

    /// Waits up to 30 s for `/readyz` to answer 200.
    pub async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("{}/readyz", self.url);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("ichor-issuer exited before it was ready: {status}");
            }
            if let Ok(r) = self.client.get(&url).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "ichor-issuer was not ready within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn internal_discovery(&self) -> String {
        format!(
            "https://127.0.0.1:{}/.well-known/openid-configuration",
            self.internal.port()
        )
    }

    /// Plans the key timeline at `at` over the current document, performs it and writes the
    /// result over keys.json (atomically, as the kubelet updates a Secret volume).
    pub fn rotate_keys_at(&mut self, at: Timestamp) -> KeysDocument {
        let plan = ichor_renderers::trust::plan(at, Some(&self.keys), &timeline_settings());
        let doc = realize(&plan, Some(&self.keys), &mut self.keys_made);
        let tmp = self.keys_path.with_extension("tmp");
        std::fs::write(&tmp, doc.to_json()).unwrap();
        std::fs::rename(&tmp, &self.keys_path).unwrap();
        self.keys = doc.clone();
        doc
    }

    /// The kids of the JWKS served on the external listener.
    pub async fn jwks_kids(&self) -> Vec<String> {
        let jwks: serde_json::Value = self
            .client
            .get(format!("{}/oidc/jwks", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Signs [`USER`] in through the real endpoints for `ichor-cli` (loopback redirect) with
    /// `openid offline_access` and returns the token response.
    pub async fn cli_sign_in(&self, audience: Option<&str>) -> serde_json::Value {
        self.sign_in(USER, PASSWORD, audience)
            .await
            .unwrap_or_else(|(status, body)| panic!("HTTP {status}: {body}"))
    }

    /// Signs `user` in with `password` for `ichor-cli` (`openid offline_access`, audience
    /// `audience` or the client's default): the token response, or the status and body of the
    /// step that refused.
    pub async fn sign_in(
        &self,
        user: &str,
        password: &str,
        audience: Option<&str>,
    ) -> Result<serde_json::Value, (u16, String)> {
        self.sign_in_with(&self.client, user, password, audience).await
    }

    /// [`RunningIssuer::sign_in`] from the loopback address `local` (any of 127.0.0.0/8 reaches
    /// the listener), so the issuer sees another source than the other clients' 127.0.0.1.
    pub async fn sign_in_from(
        &self,
        local: std::net::IpAddr,
        user: &str,
        password: &str,
        audience: Option<&str>,
    ) -> Result<serde_json::Value, (u16, String)> {
        let client = ichor_testkit::issuer::https::client_builder(&self.ca_pem)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(20))
            .local_address(local)
            .build()
            .unwrap();
        self.sign_in_with(&client, user, password, audience).await
    }

    async fn sign_in_with(
        &self,
        client: &reqwest::Client,
        user: &str,
        password: &str,
        audience: Option<&str>,
    ) -> Result<serde_json::Value, (u16, String)> {
        let request = Authorize {
            state: "st-conformance",
            nonce: "no-conformance",
            audience,
            ..Authorize::cli("conformance-verifier-0123456789-abcdefghijklmnopqrstuvwxyz")
        };
        sign_in::sign_in(client, &self.url, &request, user, password, SlowDown::Refuse)
            .await
            .map_err(status_and_body)
    }

    /// Rotates a refresh token through `/oidc/token`.
    pub async fn refresh(&self, refresh_token: &str) -> serde_json::Value {
        self.try_refresh(refresh_token)
            .await
            .unwrap_or_else(|(status, body)| panic!("HTTP {status}: {body}"))
    }

    /// Rotates a refresh token: the token response, or the status and body of the refusal.
    pub async fn try_refresh(&self, refresh_token: &str) -> Result<serde_json::Value, (u16, String)> {
        let request = self.client.post(format!("{}/oidc/token", self.url)).form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", "ichor-cli"),
        ]);
        sign_in::answer("refresh", request).await.map_err(status_and_body)
    }

    /// The `UserService` of this process over gRPC with TLS, sending `id_token` (an `ichor-ui`
    /// ID token) as the bearer.
    pub async fn user_service(&self, id_token: &str) -> UserService {
        use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .domain_name("localhost");
        let channel = Endpoint::from_shared(self.url.clone())
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let bearer: tonic::metadata::MetadataValue<_> = format!("Bearer {id_token}").parse().unwrap();
        ichor_issuer::api::proto::user_service_client::UserServiceClient::with_interceptor(
            channel,
            Bearer(bearer),
        )
    }
}

/// A `UserService` client over TLS with a bearer token.
pub type UserService = ichor_issuer::api::proto::user_service_client::UserServiceClient<
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Bearer>,
>;

/// Adds the bearer token to every call.
#[derive(Clone)]
pub struct Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// A refusal as the status (0 when no answer came) and the body.
fn status_and_body(refusal: Refusal) -> (u16, String) {
    (refusal.code(), refusal.body)
}

/// An HTTPS client trusting only the test CA; it follows no redirect.
pub fn https_client(ca_pem: &str) -> reqwest::Client {
    ichor_testkit::issuer::https::client_builder(ca_pem)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// The outcome of one go-oidc verification: exit success and its output.
pub struct Verdict {
    pub accepted: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the go-oidc verifier on `token` for `audience` (optionally through `discovery`).
pub async fn go_oidc_verify(
    verifier: &Path,
    issuer: &RunningIssuer,
    audience: &str,
    discovery: Option<&str>,
    token: &str,
) -> Verdict {
    let mut cmd = tokio::process::Command::new(verifier);
    cmd.args(["-issuer", &issuer.issuer, "-aud", audience, "-token", token])
        .arg("-ca")
        .arg(&issuer.ca_path);
    if let Some(d) = discovery {
        cmd.args(["-discovery", d]);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("go-oidc-verify finished within 60 s")
        .unwrap();
    Verdict {
        accepted: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

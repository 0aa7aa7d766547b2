//! The Done-when of the kubeconfig: the REAL kubectl (client-go's exec-plugin code) with a
//! kubeconfig made by `ichor_issuer::api::kubeconfig::render` (what `GetMyKubeconfig` returns),
//! whose exec command is the real `ichor` binary, against an https "API server" on 127.0.0.1
//! that checks the bearer token's RS256 signature with the issuer's own verifier. The same
//! server is the OpenID Provider: its token endpoint mints real ID tokens with
//! `ichor_issuer::tokens::sign_id_token` and counts refreshes. This scripted server stays
//! because it shows what a real apiserver does not: which tokens reached it and how many
//! refreshes the plugin made. The same kubectl against a real kube-apiserver and the real
//! issuer is in `tests/apiserver/kubectl.rs`.
//!
//! `#[ignore]`d as needing kubectl (`hack/kube/build.sh`): `cargo nextest run --run-ignored all`
//! runs it, and fails it when kubectl is missing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    process::{Command, Output, Stdio},
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
};

use crate::user_support::{TestCa, ichor_command, seed_login, serve_https, server_runtime, text};
use axum::{
    Form, Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use ichor_issuer::{
    api::kubeconfig::{KubeconfigInput, render},
    keys::LoadedKeys,
    tokens::{IdTokenClaims, sign_id_token, verify_id_token},
};
use ichor_renderers::trust::keys::{KeysDocument, PrivateKeyPem, RsaKey};
use jiff::Timestamp;

/// The kubectl `hack/kube/build.sh` builds from k8s.io/kubernetes (`ichor_testkit::consumers`).
fn kubectl_bin() -> PathBuf {
    ichor_testkit::consumers::KubeBinary::Kubectl.path()
}
const PEM: &str = ichor_testkit::issuer::keys::PEMS[0];

fn kubectl_present() -> bool {
    ichor_testkit::consumers::require(ichor_testkit::consumers::KubeBinary::Kubectl).is_some()
}

struct Shared {
    base: OnceLock<String>,
    keys: LoadedKeys,
    refreshes: AtomicUsize,
    valid_refresh: Mutex<HashSet<String>>,
    revoked: Mutex<Vec<String>>,
    /// Tokens the API server accepted and refused.
    accepted: Mutex<Vec<String>>,
    refused: Mutex<Vec<String>>,
    counter: AtomicUsize,
}

impl Shared {
    fn base(&self) -> &str {
        self.base.get().unwrap()
    }

    fn mint(&self, audience: &str, exp_in: i64) -> String {
        let now = Timestamp::now();
        let claims = IdTokenClaims {
            exp: now.as_second() + exp_in,
            iat: now.as_second() - 1 - i64::try_from(self.counter.fetch_add(1, Ordering::SeqCst)).unwrap(),
            ..ichor_testkit::issuer::harness::id_claims(
                self.base(),
                "alice",
                audience,
                &["ichor:viewer"],
                now,
            )
        };
        sign_id_token(&self.keys, &claims, now).unwrap()
    }
}

fn keys() -> LoadedKeys {
    let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let key = RsaKey::new(
        "k-test".into(),
        PrivateKeyPem::new(PEM.to_owned()).unwrap(),
        created,
        created,
        None,
    )
    .unwrap();
    LoadedKeys::from_document(&KeysDocument::new(vec![key], vec![]).unwrap()).unwrap()
}

async fn token(State(s): State<Arc<Shared>>, Form(f): Form<HashMap<String, String>>) -> Response {
    let get = |k: &str| f.get(k).cloned().unwrap_or_default();
    if get("grant_type") != "refresh_token" || get("client_id") != "ichor-cli" {
        return (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"error": "unsupported_grant_type"})),
        )
            .into_response();
    }
    s.refreshes.fetch_add(1, Ordering::SeqCst);
    if !s.valid_refresh.lock().unwrap().remove(&get("refresh_token")) {
        return (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"error": "invalid_grant", "error_description": "refresh token unknown"})),
        )
            .into_response();
    }
    let next = format!("refresh-{}", s.counter.fetch_add(1, Ordering::SeqCst));
    s.valid_refresh.lock().unwrap().insert(next.clone());
    let id = s.mint(&get("audience"), 300);
    Json(
        serde_json::json!({"id_token": id, "access_token": id, "token_type": "Bearer",
        "expires_in": 300, "refresh_token": next}),
    )
    .into_response()
}

async fn revoke(State(s): State<Arc<Shared>>, Form(f): Form<HashMap<String, String>>) -> Response {
    let token = f.get("token").cloned().unwrap_or_default();
    s.valid_refresh.lock().unwrap().remove(&token);
    s.revoked.lock().unwrap().push(token);
    StatusCode::OK.into_response()
}

/// The API server side: `None` for a valid `ichor-kube` ID token of this issuer, else the 401
/// Kubernetes answers.
fn refusal(s: &Shared, headers: &HeaderMap) -> Option<Response> {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    match verify_id_token(&s.keys, &bearer, s.base(), "ichor-kube", Timestamp::now()) {
        Ok(_) => {
            s.accepted.lock().unwrap().push(bearer);
            None
        }
        Err(_) => {
            s.refused.lock().unwrap().push(bearer);
            Some(
                (
                    StatusCode::UNAUTHORIZED,
                    Json(
                        serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
                    ),
                )
                    .into_response(),
            )
        }
    }
}

async fn version(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(r) = refusal(&s, &headers) {
        return r;
    }
    Json(
        serde_json::json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0-ichor-test",
        "platform": "linux/amd64"}),
    )
    .into_response()
}

async fn api(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(r) = refusal(&s, &headers) {
        return r;
    }
    Json(serde_json::json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}))
    .into_response()
}

async fn apis(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(r) = refusal(&s, &headers) {
        return r;
    }
    Json(serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})).into_response()
}

struct World {
    _runtime: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    dir: tempfile::TempDir,
    ca_file: PathBuf,
    kubeconfig: PathBuf,
}

impl World {
    fn start() -> Self {
        let runtime = server_runtime();
        let ca = TestCa::new();
        let shared = Arc::new(Shared {
            base: OnceLock::new(),
            keys: keys(),
            refreshes: AtomicUsize::new(0),
            valid_refresh: Mutex::new(HashSet::new()),
            revoked: Mutex::new(vec![]),
            accepted: Mutex::new(vec![]),
            refused: Mutex::new(vec![]),
            counter: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/oidc/token", post(token))
            .route("/oidc/revoke", post(revoke))
            .route("/version", get(version))
            .route("/api", get(api))
            .route("/apis", get(apis))
            .with_state(Arc::clone(&shared));
        let base = serve_https(&runtime, &ca, app);
        shared.base.set(base.clone()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, &ca.ca_pem).unwrap();
        let ca_file_text = ca_file.display().to_string();
        let yaml = render(&KubeconfigInput {
            cluster_name: "test",
            user: "alice",
            server: &base,
            tls_server_name: None,
            ca_pem: &ca.ca_pem,
            issuer_url: &base,
            ca_file: Some(&ca_file_text),
        })
        .unwrap();
        // The one change: the exec command is this build's binary, by absolute path.
        let mut doc: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
        let exec = &mut doc["users"][0]["user"]["exec"];
        assert_eq!(exec["command"], "ichor");
        exec["command"] = env!("CARGO_BIN_EXE_ichor").into();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, serde_yaml::to_string(&doc).unwrap()).unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        Self {
            _runtime: runtime,
            shared,
            dir,
            ca_file,
            kubeconfig,
        }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn base(&self) -> String {
        self.shared.base().to_owned()
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(kubectl_bin())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env("HOME", self.home())
            .env("KUBECACHEDIR", self.dir.path().join("kubecache"))
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_EXEC_INFO")
            .env_remove("ICHOR_CA_FILE")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn refreshes(&self) -> usize {
        self.shared.refreshes.load(Ordering::SeqCst)
    }
}

#[test]
#[ignore = "needs kubectl: hack/kube/build.sh"]
fn kubectl_signs_in_through_ichor_auth_token_refreshes_after_expiry_and_fails_clearly_after_logout() {
    if !kubectl_present() {
        return;
    }
    let w = World::start();
    let base = w.base();

    // 1. A cached, valid ID token: kubectl runs the plugin, which prints it without any request.
    let cached = w.shared.mint("ichor-kube", 300);
    let exp = Timestamp::now().as_second() + 300;
    seed_login(&w.home(), &base, "ichor-kube", &cached, exp, None);
    let out = w.kubectl(&["get", "--raw", "/version"]);
    assert!(out.status.success(), "kubectl failed: {}", text(&out.stderr));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["gitVersion"], "v1.34.0-ichor-test");
    assert_eq!(w.refreshes(), 0);
    assert!(w.shared.accepted.lock().unwrap().contains(&cached));

    // 2. An expired ID token and a refresh token: the plugin refreshes once, kubectl gets through
    // with the new token, and the expired one never reaches the API server.
    let expired = w.shared.mint("ichor-kube", -60);
    w.shared
        .valid_refresh
        .lock()
        .unwrap()
        .insert("refresh-seed".into());
    seed_login(
        &w.home(),
        &base,
        "ichor-kube",
        &expired,
        Timestamp::now().as_second() - 60,
        Some("refresh-seed"),
    );
    let accepted_before = w.shared.accepted.lock().unwrap().len();
    let out = w.kubectl(&["get", "--raw", "/version"]);
    assert!(out.status.success(), "kubectl failed: {}", text(&out.stderr));
    assert_eq!(w.refreshes(), 1, "one refresh");
    let accepted = w.shared.accepted.lock().unwrap().clone();
    assert!(accepted.len() > accepted_before);
    assert!(!accepted.contains(&expired));
    assert!(!w.shared.refused.lock().unwrap().contains(&expired));
    // The refreshed login was stored: the next kubectl process needs no refresh.
    let out = w.kubectl(&["get", "--raw", "/version"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(w.refreshes(), 1, "the stored token is reused");
    let stderr = text(&out.stderr);
    for t in accepted.iter().chain([&expired]) {
        assert!(
            !stderr.contains(t.as_str()),
            "a token leaked into kubectl's stderr"
        );
    }

    // 3. After logout, kubectl fails and shows the plugin's instruction.
    let out = ichor_command(
        &w.home(),
        &[
            "auth",
            "logout",
            "--issuer",
            &base,
            "--ca-file",
            w.ca_file.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "logout failed: {}", text(&out.stderr));
    assert_eq!(
        w.shared.revoked.lock().unwrap().len(),
        1,
        "the refresh token was revoked"
    );
    let out = w.kubectl(&["get", "--raw", "/version"]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("ichor auth login --issuer {base}")),
        "kubectl's stderr lacks the plugin's instruction: {stderr}"
    );
    assert!(stderr.contains("exit code 1"), "{stderr}");
}

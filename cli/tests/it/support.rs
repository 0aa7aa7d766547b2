//! Test support for `ichor auth`: a small OpenID Provider speaking the protocol the CLI uses
//! (discovery, authorization code + PKCE S256, refresh grant with rotation, RFC 7009
//! revocation) on plain http at 127.0.0.1, counting what it is asked; and helpers to run the
//! real binary with its own `$HOME`.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, missing_docs)]

use std::{
    collections::{HashMap, HashSet},
    io::{Read, Write},
    net::TcpStream,
    path::Path,
    process::{Command, Output, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Form, Json, Router,
    extract::{Query, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

/// How the fake answers a refresh grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshMode {
    /// A new ID token and a new refresh token; the old refresh token dies.
    Rotate,
    /// `invalid_grant` for every refresh token.
    InvalidGrant,
    /// `invalid_grant` for every refresh token, with this `error_description`.
    InvalidGrantSaying(&'static str),
}

struct Code {
    challenge: String,
    redirect_uri: String,
    nonce: String,
    audience: String,
}

pub struct OpState {
    pub base: String,
    pub discovery_hits: AtomicUsize,
    pub refresh_hits: AtomicUsize,
    pub code_hits: AtomicUsize,
    pub revoked: Mutex<Vec<String>>,
    pub mode: Mutex<RefreshMode>,
    pub valid_refresh: Mutex<HashSet<String>>,
    /// Every token the fake ever issued or was seeded with: none may show up in stderr.
    pub secrets: Mutex<Vec<String>>,
    pub authorize_params: Mutex<Vec<HashMap<String, String>>>,
    codes: Mutex<HashMap<String, Code>>,
    counter: AtomicUsize,
    pub refresh_delay: Duration,
}

impl OpState {
    pub fn refresh_hits(&self) -> usize {
        self.refresh_hits.load(Ordering::SeqCst)
    }
    pub fn discovery_hits(&self) -> usize {
        self.discovery_hits.load(Ordering::SeqCst)
    }
    pub fn secrets(&self) -> Vec<String> {
        self.secrets.lock().unwrap().clone()
    }
    /// Registers a refresh token as valid (a login made earlier).
    pub fn seed_refresh(&self, token: &str) {
        self.valid_refresh.lock().unwrap().insert(token.to_owned());
        self.secrets.lock().unwrap().push(token.to_owned());
    }
    fn next(&self) -> usize {
        self.counter.fetch_add(1, Ordering::SeqCst)
    }
    fn id_token(&self, audience: &str, nonce: Option<&str>) -> String {
        let n = self.next();
        let now = jiff::Timestamp::now().as_second();
        let mut payload = serde_json::json!({"iss": self.base, "sub": "alice", "aud": audience,
            "exp": now + 300, "iat": now, "groups": ["admin"], "jti": format!("id-{n}")});
        if let Some(nonce) = nonce {
            payload["nonce"] = nonce.into();
        }
        let token = format!(
            "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.{}.ZmFrZS1zaWduYXR1cmUtb2YtaWQtdG9rZW4",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap())
        );
        self.secrets.lock().unwrap().push(token.clone());
        token
    }
    fn refresh_token(&self) -> String {
        let token = format!("fake-refresh-token-{}-{}", self.next(), std::process::id());
        self.seed_refresh(&token);
        token
    }
}

pub struct FakeOp {
    pub state: Arc<OpState>,
    runtime: tokio::runtime::Runtime,
}

impl FakeOp {
    pub fn start() -> Self {
        Self::start_with(Duration::ZERO)
    }

    /// `refresh_delay` holds each refresh answer back, so concurrent callers overlap.
    pub fn start_with(refresh_delay: Duration) -> Self {
        let (op, listener, app) = Self::build("http", refresh_delay);
        op.runtime.spawn(async move { axum::serve(listener, app).await });
        op
    }

    /// The same provider over https at 127.0.0.1, with a certificate from a fresh CA whose PEM
    /// is written to `ca_pem`.
    pub fn start_tls(ca_pem: &Path) -> Self {
        let (op, listener, app) = Self::build("https", Duration::ZERO);
        let ca = ichor_testkit::pki::TestCa::new("ichor auth test CA").unwrap();
        std::fs::write(ca_pem, &ca.pem).unwrap();
        let config = ichor_testkit::pki::server_config(&ca.serving("127.0.0.1").unwrap()).unwrap();
        ichor_testkit::issuer::https::serve_on(&op.runtime, listener, config, app);
        op
    }

    fn build(scheme: &str, refresh_delay: Duration) -> (Self, tokio::net::TcpListener, Router) {
        let runtime = ichor_testkit::issuer::https::server_runtime();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let base = format!("{scheme}://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let state = Arc::new(OpState {
            base,
            discovery_hits: AtomicUsize::new(0),
            refresh_hits: AtomicUsize::new(0),
            code_hits: AtomicUsize::new(0),
            revoked: Mutex::new(vec![]),
            mode: Mutex::new(RefreshMode::Rotate),
            valid_refresh: Mutex::new(HashSet::new()),
            secrets: Mutex::new(vec![]),
            authorize_params: Mutex::new(vec![]),
            codes: Mutex::new(HashMap::new()),
            counter: AtomicUsize::new(1),
            refresh_delay,
        });
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/oidc/authorize", get(authorize))
            .route("/oidc/token", post(token))
            .route("/oidc/revoke", post(revoke))
            .with_state(state.clone());
        (Self { state, runtime }, listener, app)
    }

    pub fn issuer(&self) -> &str {
        &self.state.base
    }
}

fn oauth_error(error: &str, description: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(serde_json::json!({"error": error, "error_description": description})),
    )
        .into_response()
}

async fn discovery(State(s): State<Arc<OpState>>) -> Response {
    s.discovery_hits.fetch_add(1, Ordering::SeqCst);
    Json(serde_json::json!({
        "issuer": s.base,
        "authorization_endpoint": format!("{}/oidc/authorize", s.base),
        "token_endpoint": format!("{}/oidc/token", s.base),
        "revocation_endpoint": format!("{}/oidc/revoke", s.base),
        "jwks_uri": format!("{}/oidc/jwks", s.base),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
    }))
    .into_response()
}

async fn authorize(State(s): State<Arc<OpState>>, Query(q): Query<HashMap<String, String>>) -> Response {
    s.authorize_params.lock().unwrap().push(q.clone());
    let get = |k: &str| q.get(k).cloned().unwrap_or_default();
    let redirect_uri = get("redirect_uri");
    let loopback = redirect_uri
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix("/callback"))
        .is_some_and(|port| port.parse::<u16>().is_ok());
    if get("client_id") != "ichor-cli" || !loopback {
        return (StatusCode::BAD_REQUEST, "untrusted client or redirect").into_response();
    }
    if get("response_type") != "code"
        || get("code_challenge_method") != "S256"
        || get("code_challenge").len() != 43
        || get("scope") != "openid offline_access"
        || get("state").is_empty()
        || get("nonce").is_empty()
    {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    }
    let code = format!("fake-code-{}", s.next());
    s.secrets.lock().unwrap().push(code.clone());
    s.codes.lock().unwrap().insert(
        code.clone(),
        Code {
            challenge: get("code_challenge"),
            redirect_uri: redirect_uri.clone(),
            nonce: get("nonce"),
            audience: get("audience"),
        },
    );
    let location = format!("{redirect_uri}?code={code}&state={}", get("state"));
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

async fn token(State(s): State<Arc<OpState>>, Form(f): Form<HashMap<String, String>>) -> Response {
    let get = |k: &str| f.get(k).cloned().unwrap_or_default();
    if get("client_id") != "ichor-cli" {
        return (
            StatusCode::UNAUTHORIZED,
            Json(serde_json::json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    match get("grant_type").as_str() {
        "authorization_code" => {
            s.code_hits.fetch_add(1, Ordering::SeqCst);
            let Some(code) = s.codes.lock().unwrap().remove(&get("code")) else {
                return oauth_error("invalid_grant", "unknown or used code");
            };
            let verifier_ok =
                URL_SAFE_NO_PAD.encode(Sha256::digest(get("code_verifier").as_bytes())) == code.challenge;
            if !verifier_ok {
                return oauth_error("invalid_grant", "code_verifier does not match");
            }
            if get("redirect_uri") != code.redirect_uri {
                return oauth_error("invalid_grant", "redirect_uri differs");
            }
            let id = s.id_token(&code.audience, Some(&code.nonce));
            let refresh = s.refresh_token();
            Json(
                serde_json::json!({"access_token": id, "token_type": "Bearer", "expires_in": 300,
                "id_token": id, "refresh_token": refresh, "scope": "openid offline_access"}),
            )
            .into_response()
        }
        "refresh_token" => {
            s.refresh_hits.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(s.refresh_delay).await;
            match *s.mode.lock().unwrap() {
                RefreshMode::InvalidGrant => {
                    return oauth_error("invalid_grant", "the refresh token has expired");
                }
                RefreshMode::InvalidGrantSaying(description) => {
                    return oauth_error("invalid_grant", description);
                }
                RefreshMode::Rotate => {}
            }
            if !s.valid_refresh.lock().unwrap().remove(&get("refresh_token")) {
                return oauth_error("invalid_grant", "the refresh token was reused or revoked");
            }
            let id = s.id_token(&get("audience"), None);
            let refresh = s.refresh_token();
            Json(
                serde_json::json!({"access_token": id, "token_type": "Bearer", "expires_in": 300,
                "id_token": id, "refresh_token": refresh}),
            )
            .into_response()
        }
        _ => oauth_error("unsupported_grant_type", "no"),
    }
}

async fn revoke(State(s): State<Arc<OpState>>, Form(f): Form<HashMap<String, String>>) -> Response {
    if f.get("client_id").map(String::as_str) != Some("ichor-cli") {
        return (
            StatusCode::UNAUTHORIZED,
            Json(serde_json::json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let token = f.get("token").cloned().unwrap_or_default();
    s.valid_refresh.lock().unwrap().remove(&token);
    s.revoked.lock().unwrap().push(token);
    StatusCode::OK.into_response()
}

/// `ichor` with `HOME=home`, stdin not a terminal, no inherited Ichor or kube settings
/// (`KUBERNETES_EXEC_INFO`, `ICHOR_CA_FILE`, `ICHOR_ISSUER`, `KUBECONFIG`).
pub fn ichor_command(home: &Path, args: &[&str]) -> Command {
    command_at(Path::new(env!("CARGO_BIN_EXE_ichor")), home, args)
}

/// [`ichor_command`] with another executable: `ichor-full`, or a copy of `ichor`.
pub fn command_at(bin: &Path, home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("HOME", home)
        .env_remove("KUBERNETES_EXEC_INFO")
        .env_remove("ICHOR_CA_FILE")
        .env_remove("ICHOR_ISSUER")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null());
    cmd
}

pub fn ichor(home: &Path, args: &[&str]) -> Output {
    ichor_command(home, args).output().expect("run ichor")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Fails when any of `secrets` appears in `stderr`.
pub fn assert_no_secret(stderr: &str, secrets: &[String]) {
    for s in secrets {
        assert!(
            !stderr.contains(s.as_str()),
            "a token leaked into stderr: {stderr}"
        );
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A port on 127.0.0.1 that nothing listens on.
pub fn closed_port() -> u16 {
    ichor_testkit::control_plane::free_port().unwrap()
}

/// An http issuer URL on a [`closed_port`]: any request to it fails, so a command that succeeds
/// against it touched no network.
pub fn unreachable_issuer() -> String {
    format!("http://127.0.0.1:{}", closed_port())
}

/// A minimal HTTP/1.1 GET (the browser's part): status, headers (lowercase names), body.
pub fn http_get(url: &str) -> (u16, HashMap<String, String>, String) {
    let u = url::Url::parse(url).unwrap();
    let mut stream = TcpStream::connect((u.host_str().unwrap(), u.port().unwrap())).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let target = match u.query() {
        Some(q) => format!("{}?{q}", u.path()),
        None => u.path().to_owned(),
    };
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        u.authority()
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

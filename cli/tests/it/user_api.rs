//! `ichor user …` and `ichor auth kubeconfig` as a person runs them: the real binary, its own
//! `$HOME` with a cached `ichor-ui` login, against the issuer's real `UserService` (local store,
//! built-in RBAC) served by tonic on 127.0.0.1. The bearer verifier reads unsigned test tokens
//! (signatures are the kubectl test's subject); everything else is the production service.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::{
    collections::HashMap,
    io::Write,
    path::Path,
    process::{Output, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use crate::user_support::{self, ichor_command, seed_login, text};
use axum::{Form, Json, Router, extract::State, response::IntoResponse, routing::post};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ichor_issuer::{
    api::{BearerClaims, BearerError, BearerVerifier, LocalAccessReview, SystemClock, UserApi, grpc_service},
    store::{UserStore, local::LocalStore},
};
use ichor_renderers::{
    auth::{credentials::CredentialsEntry, hash::DUMMY_PHC},
    crd::{IchorUser, IchorUserSpec, NAMESPACE},
    rbac::{Authorizer, Policy},
};
use jiff::Timestamp;

/// Unsigned test tokens: `e30.<base64url JSON {sub, iat, exp}>.c2ln`.
struct PayloadVerifier;

impl BearerVerifier for PayloadVerifier {
    fn verify(&self, token: &str, now: Timestamp) -> Result<BearerClaims, BearerError> {
        let bad = || BearerError("signature invalid".into());
        let payload = token.split('.').nth(1).ok_or_else(bad)?;
        let bytes = URL_SAFE_NO_PAD.decode(payload).map_err(|_| bad())?;
        let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        let ts = |k: &str| Timestamp::from_second(v[k].as_i64().unwrap_or(0)).map_err(|_| bad());
        let (iat, exp) = (ts("iat")?, ts("exp")?);
        if exp <= now {
            return Err(BearerError("the ID token has expired".into()));
        }
        Ok(BearerClaims {
            sub: v["sub"].as_str().unwrap_or_default().to_owned(),
            groups: vec![],
            iat,
            exp,
            amr: v["amr"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
                .unwrap_or_default(),
        })
    }
}

fn jwt(iss: &str, sub: &str, aud: &str, exp_in: i64) -> String {
    let now = Timestamp::now().as_second();
    let payload = serde_json::json!({"iss": iss, "sub": sub, "aud": aud, "iat": now - 1, "exp": now + exp_in, "amr": ["pwd", "otp", "mfa"]});
    format!(
        "e30.{}.c2ln",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap())
    )
}

struct Env {
    runtime: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    store: Arc<LocalStore>,
    base: String,
    /// A token endpoint on another port (the cache names it), counting refreshes.
    token_url: String,
    refreshes: Arc<AtomicUsize>,
}

impl Env {
    fn start() -> Self {
        let runtime = user_support::server_runtime();
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(
            LocalStore::new(dir.path().join("users"), dir.path().join("state")).with_user_ttl(Duration::ZERO),
        );
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let config = ichor_testkit::issuer::harness::api_config(&base);
        let api = UserApi::new(
            Arc::clone(&store),
            LocalAccessReview::new(Authorizer::new(Policy::builtin().unwrap())),
            PayloadVerifier,
            Arc::new(SystemClock),
            config,
        );
        runtime.spawn(
            tonic::transport::Server::builder()
                .add_service(grpc_service(api))
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        // The token endpoint the cached login names.
        let refreshes = Arc::new(AtomicUsize::new(0));
        let op_listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let token_url = format!(
            "http://127.0.0.1:{}/oidc/token",
            op_listener.local_addr().unwrap().port()
        );
        let state = (base.clone(), Arc::clone(&refreshes), Arc::new(Mutex::new(0u32)));
        let app = Router::new()
            .route(
                "/oidc/token",
                post(
                    |State((iss, count, _)): State<(String, Arc<AtomicUsize>, Arc<Mutex<u32>>)>,
                     Form(f): Form<HashMap<String, String>>| async move {
                        count.fetch_add(1, Ordering::SeqCst);
                        let ok = f.get("refresh_token").map(String::as_str) == Some("good-refresh")
                            && f.get("audience").map(String::as_str) == Some("ichor-ui");
                        if !ok {
                            return (
                                axum::http::StatusCode::BAD_REQUEST,
                                Json(serde_json::json!({"error": "invalid_grant", "error_description": "revoked"})),
                            )
                                .into_response();
                        }
                        Json(serde_json::json!({"id_token": jwt(&iss, "admin", "ichor-ui", 300),
                            "refresh_token": "next-refresh", "token_type": "Bearer"}))
                        .into_response()
                    },
                ),
            )
            .with_state(state);
        runtime.spawn(async move { axum::serve(op_listener, app).await });
        std::fs::create_dir(dir.path().join("home")).unwrap();
        let env = Self {
            runtime,
            dir,
            store,
            base,
            token_url,
            refreshes,
        };
        env.seed("admin", &["admin"], true);
        env.seed("view", &["viewer"], true);
        env.seed("target", &["viewer", "operator"], true);
        env
    }

    fn seed(&self, name: &str, roles: &[&str], with_password: bool) {
        let spec = IchorUserSpec {
            display_name: Some(format!("{name} display")),
            email: None,
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            disabled: false,
        };
        let mut user = IchorUser::new(name, spec);
        user.metadata.namespace = Some(NAMESPACE.into());
        self.runtime.block_on(async {
            self.store.create_user(&user).await.unwrap();
            if with_password {
                let entry = CredentialsEntry::new(
                    DUMMY_PHC.to_owned(),
                    Timestamp::now() - jiff::SignedDuration::from_hours(1),
                    false,
                );
                let (_, version) = self.store.read_credentials(name).await.unwrap();
                self.store
                    .write_credentials(name, &version, Some(&entry))
                    .await
                    .unwrap();
            }
        });
    }

    fn entry(&self, name: &str) -> Option<CredentialsEntry> {
        self.runtime
            .block_on(self.store.read_credentials(name))
            .unwrap()
            .0
    }

    fn exists(&self, name: &str) -> bool {
        self.runtime
            .block_on(self.store.get_user(name))
            .unwrap()
            .is_some()
    }

    fn home(&self) -> std::path::PathBuf {
        self.dir.path().join("home")
    }

    /// A cached `ichor-ui` login as `sub`, valid for `exp_in` seconds.
    fn login_as(&self, sub: &str, exp_in: i64, refresh: Option<&str>) {
        seed_login(
            &self.home(),
            &self.base,
            "ichor-ui",
            &jwt(&self.base, sub, "ichor-ui", exp_in),
            Timestamp::now().as_second() + exp_in,
            refresh,
        );
        // Point the cached token endpoint at the counting one.
        let dir = user_support::cache_dir(&self.home());
        let key = ichor_cli::commands::auth::cache::CacheKey {
            issuer: self.base.clone(),
            client_id: "ichor-cli".into(),
            audience: "ichor-ui".into(),
        };
        let path = dir.file_for(&key);
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        v["endpoints"]["token"] = self.token_url.clone().into();
        std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    }

    fn ichor(&self, args: &[&str]) -> Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--issuer", &self.base]);
        ichor_command(&self.home(), &all).output().unwrap()
    }

    fn ichor_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--issuer", &self.base]);
        let mut child = ichor_command(&self.home(), &all)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    }
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn an_admin_lists_creates_updates_and_deletes_users_through_the_api() {
    let e = Env::start();
    e.login_as("admin", 300, None);

    let table = ok(&e.ichor(&["user", "list"]));
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("target") && table.contains("viewer,operator"),
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&e.ichor(&["user", "list", "-o", "json"]))).unwrap();
    let names: Vec<&str> = json["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admin", "target", "view"]);

    // Create with a generated password: printed once, in JSON as one field; must change.
    let out = e.ichor(&[
        "user",
        "create",
        "bob",
        "--role",
        "viewer",
        "--generate",
        "-o",
        "json",
    ]);
    let created: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let password = created["generatedPassword"].as_str().unwrap().to_owned();
    assert!(password.len() >= 12, "{password}");
    assert_eq!(created["mustChange"], true);
    assert!(
        !text(&out.stderr).contains(&password),
        "the password went to stderr too"
    );
    assert!(e.entry("bob").unwrap().must_change);

    // Create with a password from stdin.
    let out = e.ichor_stdin(
        &["user", "create", "carol", "--role", "viewer", "--password-stdin"],
        "a long enough password\n",
    );
    let table = ok(&out);
    assert!(
        table.contains("carol") && !table.contains("a long enough password"),
        "{table}"
    );
    assert!(e.entry("carol").is_some());

    // Update: roles added and removed, disabled.
    let out = e.ichor(&[
        "user",
        "update",
        "target",
        "--add-role",
        "admin",
        "--remove-role",
        "operator",
        "--disable",
        "-o",
        "yaml",
    ]);
    let updated: serde_yaml::Value = serde_yaml::from_str(&ok(&out)).unwrap();
    assert_eq!(
        updated["roles"],
        serde_yaml::to_value(["viewer", "admin"]).unwrap()
    );
    assert_eq!(updated["disabled"], true);

    // Set a password and revoke sessions.
    let out = e.ichor(&["user", "set-password", "target", "--generate"]);
    assert!(ok(&out).contains("Generated password for target"));
    let before = e.entry("target").unwrap().not_before;
    std::thread::sleep(Duration::from_millis(1100));
    ok(&e.ichor(&["user", "revoke-sessions", "target"]));
    assert!(e.entry("target").unwrap().not_before > before);

    // Delete: refused without --yes and without a terminal; done with --yes.
    let out = e.ichor(&["user", "delete", "carol"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("--yes"), "{}", text(&out.stderr));
    assert!(e.exists("carol"));
    ok(&e.ichor(&["user", "delete", "carol", "--yes"]));
    assert!(!e.exists("carol"));
    assert!(e.entry("carol").is_none());
}

#[test]
fn a_refusal_shows_the_servers_permission_message_and_nothing_is_created() {
    let e = Env::start();
    e.login_as("view", 300, None);
    let out = e.ichor(&["user", "create", "mallory", "--role", "admin"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("permission denied: ichor:view may not create ichorusers"),
        "{stderr}"
    );
    assert!(!e.exists("mallory"));
    e.login_as("admin", 300, None);
    let out = e.ichor(&["user", "get", "nobody-here"]);
    assert!(
        text(&out.stderr).contains("does not exist"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn without_a_cached_ui_login_the_error_names_the_login_command() {
    let e = Env::start();
    let out = e.ichor(&["user", "list"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "ichor auth login --issuer {} --audience ichor-ui",
            e.base
        )),
        "{stderr}"
    );
}

#[test]
fn a_ui_token_near_expiry_is_refreshed_once_and_stored() {
    let e = Env::start();
    e.login_as("admin", 10, Some("good-refresh"));
    ok(&e.ichor(&["user", "list"]));
    assert_eq!(e.refreshes.load(Ordering::SeqCst), 1);
    ok(&e.ichor(&["user", "list"]));
    assert_eq!(
        e.refreshes.load(Ordering::SeqCst),
        1,
        "the refreshed token was stored"
    );
    // A refused refresh ends the session with the login command.
    e.login_as("admin", 10, Some("revoked-refresh"));
    let out = e.ichor(&["user", "list"]);
    assert!(
        text(&out.stderr).contains("--audience ichor-ui"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn auth_kubeconfig_writes_a_0600_file_with_the_ca_file_in_the_exec_args_and_keeps_other_files() {
    let e = Env::start();
    e.login_as("view", 300, None);
    let ca = e.dir.path().join("ca.pem");
    std::fs::write(&ca, "unused").unwrap();
    let out_file = e.dir.path().join("kube.yaml");
    let out = e.ichor(&[
        "auth",
        "kubeconfig",
        "--out",
        out_file.to_str().unwrap(),
        "--ca-file",
        ca.to_str().unwrap(),
    ]);
    ok(&out);
    let yaml = std::fs::read_to_string(&out_file).unwrap();
    let doc: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    let args = &doc["users"][0]["user"]["exec"]["args"];
    let args: Vec<&str> = args
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[..2], ["auth", "token"]);
    assert!(
        args.windows(2).any(|w| w == ["--ca-file", ca.to_str().unwrap()]),
        "{args:?}"
    );
    assert_eq!(doc["users"][0]["name"], "ichor-view@prod");
    assert_mode_0600(&out_file);
    // Same content again: fine. Other content: kept unless --force.
    ok(&e.ichor(&[
        "auth",
        "kubeconfig",
        "--out",
        out_file.to_str().unwrap(),
        "--ca-file",
        ca.to_str().unwrap(),
    ]));
    std::fs::write(&out_file, "mine\n").unwrap();
    let out = e.ichor(&["auth", "kubeconfig", "--out", out_file.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "mine\n");
    // Without --out it is printed.
    let printed = ok(&e.ichor(&["auth", "kubeconfig"]));
    assert!(printed.contains("command: ichor"), "{printed}");
}

fn assert_mode_0600(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

#[test]
fn an_admin_sees_a_users_second_factors_and_resets_them_after_confirming() {
    let e = Env::start();
    let (with_factors, codes) = ichor_testkit::issuer::harness::factor_entry();
    let mut entry = e.entry("target").unwrap();
    entry.factors = with_factors.factors;
    e.runtime.block_on(async {
        let (_, version) = e.store.read_credentials("target").await.unwrap();
        e.store
            .write_credentials("target", &version, Some(&entry))
            .await
            .unwrap();
    });
    e.login_as("admin", 300, None);

    let shown = ok(&e.ichor(&["user", "get", "target"]));
    assert!(
        shown.ends_with("2FA: totp, recovery codes (10 left)\n"),
        "{shown}"
    );
    assert!(ok(&e.ichor(&["user", "get", "view"])).ends_with("2FA: none\n"));
    let json: serde_json::Value =
        serde_json::from_str(&ok(&e.ichor(&["user", "get", "target", "-o", "json"]))).unwrap();
    assert_eq!(json["secondFactors"]["recoveryCodesLeft"], 10);
    let printed = json.to_string();
    assert!(
        !printed.contains(ichor_testkit::issuer::harness::TOTP_SECRET) && !printed.contains(&codes[0]),
        "{printed}"
    );

    // Refused without --yes and without a terminal: nothing changes.
    let out = e.ichor(&["user", "reset-factors", "target"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("pass --yes"), "{}", text(&out.stderr));
    assert!(e.entry("target").unwrap().factors.totp.is_some());

    // A viewer may not.
    e.login_as("view", 300, None);
    let out = e.ichor(&["user", "reset-factors", "target", "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("ichor:view may not update ichorusers"),
        "{}",
        text(&out.stderr)
    );
    assert!(e.entry("target").unwrap().factors.totp.is_some());

    e.login_as("admin", 300, None);
    let before = e.entry("target").unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let out = e.ichor(&["user", "reset-factors", "target", "--yes"]);
    ok(&out);
    assert!(
        text(&out.stderr).contains("the next sign-in asks for the password alone"),
        "{}",
        text(&out.stderr)
    );
    let after = e.entry("target").unwrap();
    assert!(after.factors.is_empty());
    assert!(after.not_before > before.not_before, "sessions ended");
    assert_eq!(after.hash, before.hash, "the password stays");
    assert!(ok(&e.ichor(&["user", "get", "target"])).ends_with("2FA: none\n"));
}

#[test]
fn every_user_command_has_examples_in_its_help() {
    let home = tempfile::tempdir().unwrap();
    for cmd in [
        "list",
        "get",
        "create",
        "update",
        "delete",
        "set-password",
        "reset-factors",
        "revoke-sessions",
    ] {
        let out = ichor_command(home.path(), &["user", cmd, "--help"])
            .output()
            .unwrap();
        let help = text(&out.stdout);
        assert!(out.status.success(), "{cmd}: {}", text(&out.stderr));
        assert!(
            help.contains("Examples:") && help.contains(&format!("ichor user {cmd} ")),
            "{cmd}: {help}"
        );
    }
}

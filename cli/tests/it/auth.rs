//! `ichor auth` as kubectl and a person run it: the real binary, its own `$HOME`, and a fake
//! OpenID Provider on 127.0.0.1 that counts what it is asked. Every scenario also checks that no
//! token reaches stderr.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::Stdio,
    sync::mpsc,
    time::Duration,
};

use crate::support::{
    FakeOp, RefreshMode, assert_no_secret, closed_port, http_get, ichor, ichor_command, text,
    unreachable_issuer,
};
use ichor_cli::commands::auth::{
    cache::{CACHE_VERSION, CacheDir, CacheEntry, CacheKey, Endpoints, Loaded},
    secret::Secret,
};

pub(crate) fn cache_dir(home: &Path) -> CacheDir {
    CacheDir::new(home.join(".ichor/auth"))
}

pub(crate) fn key(issuer: &str, audience: &str) -> CacheKey {
    CacheKey {
        issuer: issuer.into(),
        client_id: "ichor-cli".into(),
        audience: audience.into(),
    }
}

fn endpoints(issuer: &str) -> Endpoints {
    Endpoints {
        authorization: format!("{issuer}/oidc/authorize"),
        token: format!("{issuer}/oidc/token"),
        revocation: Some(format!("{issuer}/oidc/revoke")),
    }
}

/// Stores a login in `home`'s cache: `ichor-cli`, `alice` in `admin`, the issuer's endpoints.
pub(crate) fn seed(
    home: &Path,
    issuer: &str,
    audience: &str,
    id_token: &str,
    exp: i64,
    refresh: Option<&str>,
) -> CacheEntry {
    let entry = CacheEntry {
        v: CACHE_VERSION,
        issuer: issuer.into(),
        client_id: "ichor-cli".into(),
        audience: audience.into(),
        endpoints: Some(endpoints(issuer)),
        subject: "alice".into(),
        groups: vec!["admin".into()],
        id_token: Secret::new(id_token.into()),
        id_token_exp: exp,
        refresh_token: refresh.map(|r| Secret::new(r.into())),
    };
    cache_dir(home).store(&entry).unwrap();
    entry
}

pub(crate) fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn stdout_token(stdout: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(stdout).unwrap();
    assert_eq!(v["apiVersion"], "client.authentication.k8s.io/v1");
    assert_eq!(v["kind"], "ExecCredential");
    v["status"]["token"].as_str().unwrap().to_owned()
}

/// An `exp` ten minutes ahead: a cached token that needs no refresh during a test, and no
/// further ahead than the 15 minutes Ichor issues tokens for (a cache entry further ahead is
/// treated as expired).
pub(crate) fn fresh_exp() -> i64 {
    now() + 600
}

/// `exp` as the `ExecCredential` and `ichor auth status` write it.
pub(crate) fn rfc3339(exp: i64) -> String {
    jiff::Timestamp::from_second(exp)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub(crate) const CACHED_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.Y2FjaGVkLXNpZ25hdHVyZQ";

#[test]
fn a_valid_cached_token_is_printed_without_touching_the_network() {
    let home = tempfile::tempdir().unwrap();
    // Nothing listens at this issuer: any request would fail the command.
    let issuer = unreachable_issuer();
    let exp = fresh_exp();
    seed(
        home.path(),
        &issuer,
        "ichor-kube",
        CACHED_TOKEN,
        exp,
        Some("cached-refresh"),
    );
    let out = ichor(home.path(), &["auth", "token", "--issuer", &issuer]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr, "");
    let stdout = stdout.replace(&rfc3339(exp), "<exp>");
    insta::assert_snapshot!(stdout, @r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.Y2FjaGVkLXNpZ25hdHVyZQ","expirationTimestamp":"<exp>"}}"#);
}

#[test]
fn the_reply_uses_v1beta1_when_kubectl_asks_in_v1beta1() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    seed(
        home.path(),
        &issuer,
        "ichor-kube",
        CACHED_TOKEN,
        fresh_exp(),
        None,
    );
    let out = ichor_command(home.path(), &["auth", "token", "--issuer", &issuer])
        .env(
            "KUBERNETES_EXEC_INFO",
            r#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"interactive":false}}"#,
        )
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_no_secret(&text(&out.stderr), &[CACHED_TOKEN.into()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["apiVersion"], "client.authentication.k8s.io/v1beta1");
}

#[test]
fn ten_parallel_runs_with_an_expired_token_cause_one_refresh_and_print_the_same_new_token() {
    let op = FakeOp::start_with(Duration::from_millis(300));
    let home = tempfile::tempdir().unwrap();
    op.state.seed_refresh("seeded-refresh-token");
    seed(
        home.path(),
        op.issuer(),
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some("seeded-refresh-token"),
    );
    let children: Vec<_> = (0..10)
        .map(|_| {
            ichor_command(home.path(), &["auth", "token", "--issuer", op.issuer()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let mut secrets = op.state.secrets();
    secrets.push(CACHED_TOKEN.into());
    let tokens: Vec<String> = outputs
        .iter()
        .map(|o| {
            let stderr = text(&o.stderr);
            assert!(o.status.success(), "{stderr}");
            assert_no_secret(&stderr, &secrets);
            stdout_token(&text(&o.stdout))
        })
        .collect();
    assert_eq!(op.state.refresh_hits(), 1, "one refresh for ten processes");
    assert_eq!(op.state.discovery_hits(), 0, "the cached endpoints were used");
    assert!(tokens.iter().all(|t| *t == tokens[0]), "all print the same token");
    assert_ne!(tokens[0], CACHED_TOKEN);
    // Rotation stored: the cache holds the fake's new refresh token, not the seeded one.
    let Loaded::Usable(entry) = cache_dir(home.path()).load(&key(op.issuer(), "ichor-kube")) else {
        panic!("no cache after refresh");
    };
    assert_eq!(entry.id_token.expose(), tokens[0]);
    let stored = entry.refresh_token.unwrap();
    assert_ne!(stored.expose(), "seeded-refresh-token");
    assert!(op.state.valid_refresh.lock().unwrap().contains(stored.expose()));
}

#[test]
fn a_refresh_without_cached_endpoints_discovers_once_and_stores_them() {
    let op = FakeOp::start();
    let home = tempfile::tempdir().unwrap();
    op.state.seed_refresh("seeded-refresh-token");
    let mut entry = seed(
        home.path(),
        op.issuer(),
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some("seeded-refresh-token"),
    );
    entry.endpoints = None;
    cache_dir(home.path()).store(&entry).unwrap();
    let out = ichor(home.path(), &["auth", "token", "--issuer", op.issuer()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!((op.state.discovery_hits(), op.state.refresh_hits()), (1, 1));
    let Loaded::Usable(stored) = cache_dir(home.path()).load(&key(op.issuer(), "ichor-kube")) else {
        panic!("no cache");
    };
    assert_eq!(stored.endpoints, Some(endpoints(op.issuer())));
}

#[test]
fn a_refused_refresh_token_ends_the_session_with_a_login_hint_and_removes_the_cache() {
    let op = FakeOp::start();
    *op.state.mode.lock().unwrap() = RefreshMode::InvalidGrant;
    let home = tempfile::tempdir().unwrap();
    seed(
        home.path(),
        op.issuer(),
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some("dead-refresh-token"),
    );
    let out = ichor(home.path(), &["auth", "token", "--issuer", op.issuer()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("has ended (the refresh token has expired)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("run `ichor auth login --issuer {}`", op.issuer())),
        "{stderr}"
    );
    assert_no_secret(&stderr, &[CACHED_TOKEN.into(), "dead-refresh-token".into()]);
    assert!(
        !cache_dir(home.path())
            .file_for(&key(op.issuer(), "ichor-kube"))
            .exists()
    );
}

/// The issuer's `error_description` holds a newline and a forged line: the error printed stays on
/// one line, the newline shown escaped, so no line of the output is the issuer's.
#[test]
fn an_issuers_description_with_a_newline_cannot_forge_a_line() {
    let op = FakeOp::start();
    *op.state.mode.lock().unwrap() = RefreshMode::InvalidGrantSaying("line1\nERROR: forged\r");
    let home = tempfile::tempdir().unwrap();
    seed(
        home.path(),
        op.issuer(),
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some("rt"),
    );
    let out = ichor(home.path(), &["auth", "token", "--issuer", op.issuer()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        !stderr.lines().any(|l| l.starts_with("ERROR: forged")) && !stderr.contains('\r'),
        "{stderr:?}"
    );
    assert!(stderr.contains(r"(line1\nERROR: forged\r)"), "{stderr}");
}

#[test]
fn without_a_login_a_non_interactive_run_names_the_login_command() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    for exec_info in [
        None,
        Some(r#"{"apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#),
        // kubectl allows it, but stdin is not a terminal here.
        Some(r#"{"apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":true}}"#),
    ] {
        let mut cmd = ichor_command(
            home.path(),
            &["auth", "token", "--issuer", &issuer, "--audience", "ichor-ui"],
        );
        if let Some(info) = exec_info {
            cmd.env("KUBERNETES_EXEC_INFO", info);
        }
        let out = cmd.output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(out.stdout.is_empty());
        assert_no_secret(&stderr, &[]);
        assert!(
            stderr.contains(&format!(
                "cannot sign in interactively; run `ichor auth login --issuer {issuer} --audience ichor-ui`"
            )),
            "{stderr}"
        );
    }
    assert!(
        !home.path().join(".ichor").exists(),
        "a failed run creates nothing"
    );
}

#[test]
fn a_corrupt_cache_is_treated_as_absent_and_removed_never_a_panic() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    let dir = cache_dir(home.path());
    dir.ensure().unwrap();
    let file = dir.file_for(&key(&issuer, "ichor-kube"));
    std::fs::write(&file, b"{\"v\":1,\"idToken\":").unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let out = ichor(home.path(), &["auth", "token", "--issuer", &issuer]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("unusable login cache, replacing it"), "{stderr}");
    assert!(stderr.contains("ichor auth login --issuer"), "{stderr}");
    assert_no_secret(&stderr, &[]);
    assert!(!file.exists());
}

#[test]
fn plain_http_to_a_non_loopback_issuer_is_refused_before_any_request() {
    let home = tempfile::tempdir().unwrap();
    for cmd in ["token", "login"] {
        let out = ichor(
            home.path(),
            &["auth", cmd, "--issuer", "http://ichor.example.com"],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("uses plain http, which is allowed only to the loopback"),
            "{stderr}"
        );
        assert!(stderr.contains("--issuer"), "{stderr}");
    }
    assert!(!home.path().join(".ichor").exists());
}

#[test]
fn login_through_the_loopback_callback_stores_a_private_cache_that_token_then_serves() {
    let op = FakeOp::start();
    let home = tempfile::tempdir().unwrap();
    let mut child = ichor_command(
        home.path(),
        &["auth", "login", "--issuer", op.issuer(), "--no-browser"],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Read stderr on a thread; hand over the printed URL, keep the rest.
    let stderr = child.stderr.take().unwrap();
    let (url_tx, url_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap();
            if let Some(url) = line.trim().strip_prefix("http://")
                && url.contains("/oidc/authorize?")
            {
                url_tx.send(format!("http://{url}")).unwrap();
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let authorize = url_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the URL on stderr");
    // Play the browser: the issuer redirects to the loopback callback with code and state.
    let (status, headers, _) = http_get(&authorize);
    assert_eq!(status, 302);
    let callback = headers["location"].clone();
    assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
    let (status, _, body) = http_get(&callback);
    assert_eq!(status, 200);
    assert!(body.contains("Signed in, you can close this tab"), "{body}");
    let code = child.wait().unwrap();
    let stderr = reader.join().unwrap();
    assert!(code.success(), "{stderr}");
    assert!(stderr.contains("Signed in to"), "{stderr}");
    assert!(stderr.contains("as alice"), "{stderr}");
    assert_no_secret(&stderr, &op.state.secrets());

    let params = op.state.authorize_params.lock().unwrap()[0].clone();
    assert_eq!(params["audience"], "ichor-kube");
    assert_eq!(params["scope"], "openid offline_access");
    assert_eq!(params["code_challenge_method"], "S256");
    assert_eq!(op.state.code_hits.load(std::sync::atomic::Ordering::SeqCst), 1);

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = cache_dir(home.path());
        assert_eq!(mode(dir.path()), 0o700);
        assert_eq!(mode(&dir.file_for(&key(op.issuer(), "ichor-kube"))), 0o600);
    }

    // The login now serves kubectl from the cache, with no further request.
    let out = ichor(home.path(), &["auth", "token", "--issuer", op.issuer()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = stdout_token(&text(&out.stdout));
    assert!(op.state.secrets().contains(&printed));
    assert_eq!((op.state.refresh_hits(), op.state.discovery_hits()), (0, 1));

    let out = ichor(home.path(), &["auth", "status", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["user"], "alice");
    assert_eq!(v[0]["groups"][0], "admin");
    assert_eq!(v[0]["hasRefreshToken"], true);
    assert_no_secret(&text(&out.stdout), &op.state.secrets());
}

#[test]
fn every_auth_command_has_examples_in_its_help() {
    let home = tempfile::tempdir().unwrap();
    let out = ichor(home.path(), &["auth", "--help"]);
    assert!(text(&out.stdout).contains("Examples:"));
    for cmd in ["token", "login", "logout", "status"] {
        let out = ichor(home.path(), &["auth", cmd, "--help"]);
        let help = text(&out.stdout);
        assert!(out.status.success());
        assert!(
            help.contains("Examples:") && help.contains(&format!("ichor auth {cmd}")),
            "{cmd}: {help}"
        );
    }
}

#[test]
fn an_unreadable_ca_file_is_named_in_the_error() {
    let home = tempfile::tempdir().unwrap();
    let issuer = format!("https://127.0.0.1:{}", closed_port());
    let bad = home.path().join("not-a-ca.pem");
    std::fs::write(&bad, b"hello").unwrap();
    for (file, needle) in [
        (bad.to_str().unwrap().to_owned(), "holds no CERTIFICATE block"),
        ("/nonexistent/ca.pem".to_owned(), "cannot be read"),
    ] {
        let out = ichor_command(
            home.path(),
            &["auth", "login", "--issuer", &issuer, "--no-browser"],
        )
        .env("ICHOR_CA_FILE", &file)
        .output()
        .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("--ca-file {file}: {needle}")),
            "{stderr}"
        );
    }
}

#[test]
fn over_https_the_issuer_is_trusted_through_the_ca_file_and_refused_without_it() {
    let home = tempfile::tempdir().unwrap();
    let ca = home.path().join("ichor-ca.pem");
    let op = FakeOp::start_tls(&ca);
    assert!(op.issuer().starts_with("https://"));
    op.state.seed_refresh("tls-refresh-token");
    let mut entry = seed(
        home.path(),
        op.issuer(),
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some("tls-refresh-token"),
    );
    entry.endpoints = None;
    cache_dir(home.path()).store(&entry).unwrap();

    // Without the CA, the TLS handshake fails and the cache is kept for a later try.
    let out = ichor(home.path(), &["auth", "token", "--issuer", op.issuer()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("discovery at https://127.0.0.1"), "{stderr}");
    assert!(
        cache_dir(home.path())
            .file_for(&key(op.issuer(), "ichor-kube"))
            .exists()
    );

    let out = ichor(
        home.path(),
        &[
            "auth",
            "token",
            "--issuer",
            op.issuer(),
            "--ca-file",
            ca.to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_no_secret(&stderr, &op.state.secrets());
    assert!(op.state.secrets().contains(&stdout_token(&text(&out.stdout))));
    assert_eq!((op.state.discovery_hits(), op.state.refresh_hits()), (1, 1));
}

//! `ichor auth token` against the real issuer (`ichor dev`) when the issuer asks it to slow
//! down: a refresh family whose write cap is spent is answered `429 slow_down` with
//! `Retry-After`, and the refresh token stays the current one. The CLI waits as asked, saying so
//! on stderr, and succeeds; asked for longer than it waits in all, it fails at once saying how
//! long and what is limited, and keeps the login.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use ichor_cli::commands::auth::cache::{CacheDir, CacheKey, Loaded};
use ichor_testkit::issuer::sign_in::{self, Authorize, SlowDown};

use crate::{
    auth::{CACHED_TOKEN, seed},
    dev_support::{self, Dev, VERIFIER},
    support::{assert_no_secret, ichor_command, text},
};

const PASSWORD: &str = "the admin's own password, long enough";

/// The most refreshes sent to spend a family's burst of 20 writes.
const MAX_ROTATIONS: usize = 40;

/// The issuer `ichor dev <extra>` with its first admin's password changed to [`PASSWORD`].
async fn dev_with(state: &std::path::Path, extra: &[&str]) -> Dev {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dev = dev_support::start(state, extra);
    dev_support::settle_admin(&dev, PASSWORD).await;
    dev
}

/// A session of `ichor-cli` for `ichor-kube` whose family's write cap is spent: refreshed at
/// the token endpoint until the issuer answers `429`, ten a second, so that the family's ceiling
/// of presentations (20 a second) is never what answers it. Returns the refresh token that is
/// still current, the tokens the issuer handed out, and the `Retry-After` of that answer.
async fn spent_session(dev: &Dev) -> (String, Vec<String>, u64) {
    let http = dev_support::http_client(dev);
    let tokens = sign_in::sign_in(
        &http,
        &dev.url,
        &Authorize::cli(VERIFIER),
        "admin",
        PASSWORD,
        SlowDown::Wait,
    )
    .await
    .unwrap();
    let mut current = tokens["refresh_token"].as_str().unwrap().to_owned();
    let mut seen = vec![current.clone(), tokens["id_token"].as_str().unwrap().to_owned()];
    for _ in 0..MAX_ROTATIONS {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answer = http
            .post(format!("{}/oidc/token", dev.url))
            .form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", current.as_str()),
                ("client_id", "ichor-cli"),
                ("audience", "ichor-kube"),
            ])
            .send()
            .await
            .unwrap();
        let status = answer.status();
        let retry_after = answer
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
        let body: serde_json::Value = answer.json().await.unwrap();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(body["error"], "slow_down", "{body}");
            return (current, seen, retry_after.expect("a Retry-After"));
        }
        assert!(status.is_success(), "{status} {body}");
        current = body["refresh_token"].as_str().unwrap().to_owned();
        seen.push(current.clone());
        seen.push(body["id_token"].as_str().unwrap().to_owned());
    }
    panic!("{MAX_ROTATIONS} refreshes and the family's write cap was not reached");
}

/// `ichor auth token` for `dev` from `home` (a cached login whose ID token has expired), in a
/// blocking thread: its output and how long it took.
async fn auth_token(dev: &Dev, home: &std::path::Path) -> (std::process::Output, Duration) {
    let mut command = ichor_command(
        home,
        &[
            "auth",
            "token",
            "--issuer",
            &dev.url,
            "--ca-file",
            dev.ca_file.to_str().unwrap(),
        ],
    );
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let out = command.output().unwrap();
        (out, started.elapsed())
    })
    .await
    .unwrap()
}

fn cached_refresh(home: &std::path::Path, issuer: &str) -> String {
    let key = CacheKey {
        issuer: issuer.into(),
        client_id: "ichor-cli".into(),
        audience: "ichor-kube".into(),
    };
    let Loaded::Usable(entry) = CacheDir::new(home.join(".ichor/auth")).load(&key) else {
        panic!("the cached login is gone");
    };
    entry.refresh_token.unwrap().expose().to_owned()
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_answered_slow_down_waits_as_the_issuer_asks_and_then_succeeds() {
    let state = tempfile::tempdir().unwrap();
    // The issuer's default write cap: past the burst of 20, one rotation every 10 s.
    let dev = dev_with(&state.path().join("dev"), &[]).await;
    let (current, mut secrets, asked) = spent_session(&dev).await;
    assert!((1..=10).contains(&asked), "{asked}");
    let home = tempfile::tempdir().unwrap();
    seed(
        home.path(),
        &dev.url,
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some(&current),
    );

    let (out, took) = auth_token(&dev, home.path()).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let announced: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("ichor: the issuer limits the refreshes of this session (slow_down"))
        .collect();
    assert!(!announced.is_empty(), "no wait announced: {stderr}");
    assert!(
        announced
            .iter()
            .all(|l| l.contains("; trying again in ")
                && l.ends_with(" s (this run waits at most 30 s in all)")),
        "{stderr}"
    );
    assert!(took >= Duration::from_secs(1), "it waited: {took:?}");
    assert!(took < Duration::from_secs(30), "within its budget: {took:?}");

    // stdout is the ExecCredential alone, with a new ID token; the cache holds the rotated login.
    let credential: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(credential["kind"], "ExecCredential");
    let token = credential["status"]["token"].as_str().unwrap().to_owned();
    assert_ne!(token, CACHED_TOKEN);
    assert_eq!(jsonwebtoken_claim(&token, "aud"), "ichor-kube");
    let rotated = cached_refresh(home.path(), &dev.url);
    assert_ne!(rotated, current, "the refresh token was rotated");
    secrets.extend([token, rotated, CACHED_TOKEN.to_owned()]);
    assert_no_secret(&stderr, &secrets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_asked_to_wait_beyond_the_budget_fails_at_once_and_keeps_the_login() {
    let state = tempfile::tempdir().unwrap();
    // One rotation a minute past the burst: the issuer asks for up to 60 s, more than 30.
    let dev = dev_with(&state.path().join("dev"), &["--family-writes-per-minute", "1"]).await;
    let (current, mut secrets, asked) = spent_session(&dev).await;
    assert!(asked > 40, "{asked}");
    let home = tempfile::tempdir().unwrap();
    seed(
        home.path(),
        &dev.url,
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some(&current),
    );

    let (out, took) = auth_token(&dev, home.path()).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stdout, "", "no credential");
    assert!(took < Duration::from_secs(10), "at once: {took:?}");
    // The refreshes above may also have spent the family's ceiling of presentations (20 a
    // second), which asks for a second: waited out, then the write cap's long wait fails.
    let (error, waits) = stderr
        .trim_end()
        .lines()
        .collect::<Vec<_>>()
        .split_last()
        .map(|(e, w)| (*e, w.to_vec()))
        .unwrap();
    assert!(
        waits.iter().all(
            |l| l.starts_with("ichor: the issuer limits the refreshes of this session")
                && l.contains("trying again in 1 s")
        ),
        "only the ceiling's short waits: {stderr}"
    );
    assert!(error.starts_with("error: "), "{stderr}");
    let token_url = format!("{}/oidc/token", dev.url);
    let expected = format!(
        "token request at {token_url}: the issuer limits the refreshes of this session (slow_down: \
         too many requests; wait before trying again): it asks to wait "
    );
    assert!(error.contains(&expected), "{stderr}");
    let asked_now = error
        .split(&expected)
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no wait in {stderr}"));
    assert!(asked_now > 30, "{stderr}");
    let left = error
        .split(" s before trying again, longer than the ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no budget in {stderr}"));
    assert!((25..=30).contains(&left) && left < asked_now, "{stderr}");
    assert!(
        error.ends_with(&format!(
            " s this run still waits; the login is kept: run the command again in {asked_now} s"
        )),
        "{stderr}"
    );
    // Nothing was consumed: the cached refresh token is the current one, kept.
    assert_eq!(cached_refresh(home.path(), &dev.url), current);
    secrets.push(CACHED_TOKEN.to_owned());
    assert_no_secret(&stderr, &secrets);
}

/// A claim of a JWT's payload, as a string.
fn jsonwebtoken_claim(token: &str, name: &str) -> String {
    dev_support::claims(token)[name].as_str().unwrap().to_owned()
}

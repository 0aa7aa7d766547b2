//! `ichor auth logout` and `ichor auth status` as a person runs them: the real binary, its own
//! `$HOME`, and a fake OpenID Provider on 127.0.0.1 that counts what it is asked; no token ever
//! reaches stdout or stderr.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use crate::auth::{CACHED_TOKEN, cache_dir, fresh_exp, key, now, rfc3339, seed};
use crate::support::{FakeOp, assert_no_secret, ichor, text, unreachable_issuer};

#[test]
fn logout_of_an_issuer_revokes_each_of_its_refresh_tokens_and_deletes_only_its_caches() {
    let op = FakeOp::start();
    let home = tempfile::tempdir().unwrap();
    let other = "https://other.example.com";
    seed(
        home.path(),
        op.issuer(),
        "ichor-kube",
        CACHED_TOKEN,
        now() + 100,
        Some("refresh-kube"),
    );
    seed(
        home.path(),
        op.issuer(),
        "ichor-ui",
        CACHED_TOKEN,
        now() + 100,
        Some("refresh-ui"),
    );
    seed(
        home.path(),
        other,
        "ichor-kube",
        CACHED_TOKEN,
        now() + 100,
        Some("refresh-other"),
    );
    let out = ichor(home.path(), &["auth", "logout", "--issuer", op.issuer()]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let mut revoked = op.state.revoked.lock().unwrap().clone();
    revoked.sort();
    assert_eq!(revoked, ["refresh-kube", "refresh-ui"]);
    let dir = cache_dir(home.path());
    assert!(!dir.file_for(&key(op.issuer(), "ichor-kube")).exists());
    assert!(!dir.file_for(&key(op.issuer(), "ichor-ui")).exists());
    assert!(dir.file_for(&key(other, "ichor-kube")).exists());
    assert!(stderr.contains("Signed out of"), "{stderr}");
    assert_no_secret(
        &stderr,
        &[CACHED_TOKEN.into(), "refresh-kube".into(), "refresh-ui".into()],
    );
}

#[test]
fn logout_with_an_unreachable_issuer_warns_and_still_deletes_the_cache() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    seed(
        home.path(),
        &issuer,
        "ichor-kube",
        CACHED_TOKEN,
        now() + 100,
        Some("refresh-x"),
    );
    let started = Instant::now();
    let out = ichor(home.path(), &["auth", "logout"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(12));
    assert!(stderr.contains("warning: could not revoke"), "{stderr}");
    assert!(
        !cache_dir(home.path())
            .file_for(&key(&issuer, "ichor-kube"))
            .exists()
    );
    assert_no_secret(&stderr, &[CACHED_TOKEN.into(), "refresh-x".into()]);
}

#[test]
fn status_shows_the_login_without_any_token() {
    let home = tempfile::tempdir().unwrap();
    let exp = fresh_exp();
    seed(
        home.path(),
        "https://ichor.example.com",
        "ichor-kube",
        CACHED_TOKEN,
        exp,
        Some("refresh-status"),
    );
    let out = ichor(home.path(), &["auth", "status"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.starts_with("ISSUER"), "{stdout}");
    assert!(
        stdout.contains("https://ichor.example.com  alice  admin"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&rfc3339(exp)) && stdout.contains("held"),
        "{stdout}"
    );
    assert_no_secret(&stdout, &[CACHED_TOKEN.into(), "refresh-status".into()]);
}

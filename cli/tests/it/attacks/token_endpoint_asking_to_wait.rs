//! An issuer, or a proxy in front of it, answers `ichor auth token`'s refresh with `429` and a
//! `Retry-After`: the CLI waits out only the issuer's own `slow_down`, within its budget, and no
//! answer makes it wait without bound, send its refresh token again after a proxy's 429 (which
//! may have passed the request on, so the token may already be spent), or print a token or an
//! escape sequence of the answer.
//!
//! - A `429` whose body is not the issuer's `slow_down` (a proxy's): one request, an error at
//!   once, the login kept.
//! - A `slow_down` asking for a wait far past the budget: one request, an error at once saying
//!   how long was asked.
//! - A `slow_down` asking for a second every time: requests end with the budget (30 s).
#![cfg(unix)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Router,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::post,
};

use crate::support::{assert_no_secret, ichor, text};
use crate::user_support::seed_login;

const REFRESH: &str = "refresh-secret-of-alice";
const CACHED: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.ZXhwaXJlZA";

/// A token endpoint on 127.0.0.1 answering every request with `status`, `Retry-After:
/// retry_after` and `body`; its base URL and the count of requests it took.
fn hostile(
    status: StatusCode,
    retry_after: &'static str,
    body: &'static str,
) -> (tokio::runtime::Runtime, String, Arc<AtomicUsize>) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    let app = Router::new().route(
        "/oidc/token",
        post(move || {
            seen.fetch_add(1, Ordering::SeqCst);
            async move {
                (
                    status,
                    [
                        (header::RETRY_AFTER, retry_after),
                        (header::CONTENT_TYPE, "application/json"),
                    ],
                    body,
                )
                    .into_response()
            }
        }),
    );
    runtime.spawn(async move { axum::serve(listener, app).await });
    (runtime, base, count)
}

/// `ichor auth token` from a home whose cached login for `base` has an expired ID token and a
/// refresh token: its output, how long it took.
fn refresh(base: &str) -> (std::process::Output, Duration, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let expired = jiff::Timestamp::now().as_second() - 10;
    seed_login(home.path(), base, "ichor-kube", CACHED, expired, Some(REFRESH));
    let started = Instant::now();
    let out = ichor(home.path(), &["auth", "token", "--issuer", base]);
    (out, started.elapsed(), home)
}

fn failed_without_secrets(out: &std::process::Output) -> String {
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(text(&out.stdout), "", "no credential is printed");
    assert_no_secret(&stderr, &[REFRESH.into(), CACHED.into()]);
    assert!(
        !stderr.contains('\u{1b}'),
        "an escape sequence reached the terminal: {stderr:?}"
    );
    stderr
}

#[test]
fn a_proxys_429_is_not_retried_so_the_refresh_token_is_never_sent_twice() {
    let (_rt, base, count) = hostile(
        StatusCode::TOO_MANY_REQUESTS,
        "1",
        "<html>\u{1b}[2J rate limited by the proxy</html>",
    );
    let (out, took, _home) = refresh(&base);
    let stderr = failed_without_secrets(&out);
    assert_eq!(count.load(Ordering::SeqCst), 1, "sent again: {stderr}");
    assert!(took < Duration::from_secs(10), "at once: {took:?}");
    assert!(stderr.contains("429"), "{stderr}");
}

#[test]
fn a_slow_down_far_past_the_budget_fails_at_once_saying_the_wait() {
    let (_rt, base, count) = hostile(
        StatusCode::TOO_MANY_REQUESTS,
        "99999999999999999999",
        r#"{"error":"slow_down","error_description":"wait \u001b[2J forever"}"#,
    );
    let (out, took, _home) = refresh(&base);
    let stderr = failed_without_secrets(&out);
    assert_eq!(count.load(Ordering::SeqCst), 1, "{stderr}");
    assert!(took < Duration::from_secs(10), "at once: {took:?}");
    assert!(stderr.contains("it asks to wait"), "{stderr}");
}

#[test]
fn a_slow_down_asked_again_and_again_ends_with_the_budget() {
    let (_rt, base, count) = hostile(
        StatusCode::TOO_MANY_REQUESTS,
        "1",
        r#"{"error":"slow_down","error_description":"again"}"#,
    );
    let (out, took, _home) = refresh(&base);
    let stderr = failed_without_secrets(&out);
    let requests = count.load(Ordering::SeqCst);
    assert!(took < Duration::from_secs(45), "bounded: {took:?}");
    assert!(took >= Duration::from_secs(25), "it waited as asked: {took:?}");
    assert!((20..=32).contains(&requests), "{requests} requests: {stderr}");
}

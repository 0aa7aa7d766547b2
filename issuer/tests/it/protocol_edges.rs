//! The authorization and token endpoints as an outside client meets them, on the points of
//! OpenID Connect Core, RFC 6749, 7636, 8252, 9207 and 9700 that the other areas do not already
//! cover: the POST form of the authorization request, the 303 after a posted password,
//! `response_mode`, `max_age` and `auth_time`, `prompt` combinations, and the answers a client
//! reads the `iss` of.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;
use axum::http::StatusCode;
use jiff::SignedDuration;

fn authorize_form(extra: &str) -> String {
    let query = Harness::authorize_query("ichor-cli", CLI_REDIRECT, "openid offline_access", extra);
    query
        .strip_prefix("/oidc/authorize?")
        .expect("an authorize query")
        .to_owned()
}

#[tokio::test]
async fn the_authorization_request_is_served_as_a_posted_form_too() {
    let h = Harness::new();
    let reply = h.post_form("/oidc/authorize", &authorize_form("")).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text());
    let location = reply.location();
    assert!(location.starts_with("/oidc/login?ticket="), "{location}");
    assert_eq!(h.get(&location).await.status, StatusCode::OK);

    // A posted error goes back to the client like a queried one, with `iss` (RFC 9207).
    let reply = h
        .post_form("/oidc/authorize", &authorize_form("&response_mode=fragment"))
        .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let to = reply.location();
    assert!(to.starts_with(CLI_REDIRECT), "{to}");
    assert_eq!(query_param(&to, "error").as_deref(), Some("invalid_request"));
    assert_eq!(query_param(&to, "iss").as_deref(), Some(ISSUER));
    assert_eq!(query_param(&to, "state").as_deref(), Some("st-1"));

    // A body that is not a form never redirects anywhere.
    let reply = h
        .post_json("/oidc/authorize", serde_json::json!({"client_id": "ichor-cli"}))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.headers.get("location").is_none());
}

#[tokio::test]
async fn a_posted_password_is_answered_with_303_so_it_is_never_re_sent() {
    let h = Harness::new();
    let reply = h.post_form("/oidc/authorize", &authorize_form("")).await;
    let ticket = query_param(&format!("https://x{}", reply.location()), "ticket").expect("ticket");
    let body = form(&[("ticket", &ticket), ("username", "alice"), ("password", PASSWORD)]);
    let reply = h.post_form("/oidc/login", &body).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert!(reply.location().starts_with(CLI_REDIRECT));
}

#[tokio::test]
async fn prompt_none_and_response_modes_are_answered_on_the_redirect_uri() {
    let h = Harness::new();
    for (extra, error) in [
        ("&prompt=none", "login_required"),
        ("&prompt=none%20login", "invalid_request"),
        ("&response_mode=form_post", "invalid_request"),
        ("&max_age=soon", "invalid_request"),
    ] {
        let reply = h
            .get(&Harness::authorize_query(
                "ichor-cli",
                CLI_REDIRECT,
                "openid",
                extra,
            ))
            .await;
        assert_eq!(reply.status, StatusCode::FOUND, "{extra}");
        let to = reply.location();
        assert!(to.starts_with(CLI_REDIRECT), "{extra}: {to}");
        assert_eq!(query_param(&to, "error").as_deref(), Some(error), "{extra}");
        assert_eq!(query_param(&to, "iss").as_deref(), Some(ISSUER), "{extra}");
    }
    let reply = h
        .get(&Harness::authorize_query(
            "ichor-cli",
            CLI_REDIRECT,
            "openid",
            "&response_mode=query&max_age=0&prompt=login",
        ))
        .await;
    assert!(
        reply.location().starts_with("/oidc/login?ticket="),
        "{}",
        reply.location()
    );
}

#[tokio::test]
async fn the_code_grant_says_when_the_user_signed_in_and_a_refresh_does_not_pretend_to() {
    let h = Harness::new();
    let signed_in_at = h.clock.now_secs();
    let code = h
        .code(
            "alice",
            "ichor-cli",
            CLI_REDIRECT,
            "openid offline_access",
            "&max_age=0",
        )
        .await;
    h.clock.advance(SignedDuration::from_secs(30));
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let tokens = reply.json();
    let id = claims(tokens["id_token"].as_str().expect("id_token"));
    assert_eq!(id["auth_time"], signed_in_at, "the sign-in, not the exchange");
    assert_eq!(id["iat"], signed_in_at + 30);

    h.clock.advance(SignedDuration::from_mins(5));
    let refresh = tokens["refresh_token"].as_str().expect("refresh_token");
    let reply = h.refresh(refresh, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let id = claims(reply.json()["id_token"].as_str().expect("id_token"));
    assert!(id.get("auth_time").is_none(), "{id}");
    assert!(id.get("nonce").is_none(), "{id}");

    let discovery = h.get("/.well-known/openid-configuration").await.json();
    let supported = discovery["claims_supported"]
        .as_array()
        .expect("claims_supported");
    assert!(supported.iter().any(|c| c == "auth_time"), "{discovery}");
}

#[tokio::test]
async fn an_unknown_client_is_a_401_that_names_its_scheme() {
    let h = Harness::new();
    for path in ["/oidc/token", "/oidc/revoke"] {
        let body = form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", "x"),
            ("token", "x"),
            ("client_id", "kubectl"),
        ]);
        let reply = h.post_form(path, &body).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(reply.error(), "invalid_client", "{path}");
        assert!(
            reply.headers.contains_key("www-authenticate"),
            "{path}: {:?}",
            reply.headers
        );
    }
}

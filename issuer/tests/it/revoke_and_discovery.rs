//! RFC 7009 revocation exactly as the seed's follow-up says, and the discovery documents.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering;

use crate::common::*;
use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};

fn refresh_of(v: &serde_json::Value) -> String {
    v["refresh_token"].as_str().expect("refresh_token").to_owned()
}

// === revocation ===

#[tokio::test]
async fn revoking_a_refresh_token_ends_its_whole_family() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    let b = refresh_of(&h.refresh(&a, "ichor-cli", None).await.json());
    let reply = h
        .revoke(&[
            ("token", &a),
            ("client_id", "ichor-cli"),
            ("token_type_hint", "refresh_token"),
        ])
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.body.is_empty());
    assert!(h.store.entry("alice").expect("entry").families.is_empty());
    assert_eq!(
        h.refresh(&b, "ichor-cli", None).await.error(),
        "invalid_grant",
        "the successor is dead"
    );
}

#[tokio::test]
async fn revoking_something_that_is_not_a_valid_refresh_token_answers_200() {
    let h = Harness::new();
    let session = h.cli_session("alice").await;
    let id = session["id_token"].as_str().expect("id");
    let refresh = refresh_of(&session);
    for token in ["garbage", id] {
        let reply = h.revoke(&[("token", token), ("client_id", "ichor-cli")]).await;
        assert_eq!(reply.status, StatusCode::OK, "{token}");
        assert!(reply.body.is_empty());
    }
    assert_eq!(
        h.store.entry("alice").expect("entry").families.len(),
        1,
        "nothing revoked"
    );
    // Already gone: still 200.
    assert_eq!(
        h.revoke(&[("token", &refresh), ("client_id", "ichor-cli")])
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        h.revoke(&[("token", &refresh), ("client_id", "ichor-cli")])
            .await
            .status,
        StatusCode::OK
    );
    // Expired: 200.
    let other = refresh_of(&h.cli_session("carol").await);
    h.clock.advance(jiff::SignedDuration::from_hours(13));
    assert_eq!(
        h.revoke(&[("token", &other), ("client_id", "ichor-cli")])
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn revoking_another_clients_refresh_token_is_refused_and_revokes_nothing() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    let reply = h.revoke(&[("token", &a), ("client_id", "ichor-ui")]).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "invalid_grant");
    assert_eq!(h.refresh(&a, "ichor-cli", None).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_revocation_request_without_a_single_token_or_not_a_form_is_invalid_request() {
    let h = Harness::new();
    assert_eq!(
        h.revoke(&[("client_id", "ichor-cli")]).await.error(),
        "invalid_request"
    );
    let twice = h
        .revoke(&[("token", "a"), ("token", "b"), ("client_id", "ichor-cli")])
        .await;
    assert_eq!(twice.status, StatusCode::BAD_REQUEST);
    assert_eq!(twice.error(), "invalid_request");
    let json = h
        .post_json(
            "/oidc/revoke",
            serde_json::json!({"token": "a", "client_id": "ichor-cli"}),
        )
        .await;
    assert_eq!(json.status, StatusCode::BAD_REQUEST);
    assert_eq!(json.error(), "invalid_request");
}

#[tokio::test]
async fn a_revocation_with_an_unknown_or_missing_client_is_invalid_client() {
    let h = Harness::new();
    for pairs in [vec![("token", "a"), ("client_id", "other")], vec![("token", "a")]] {
        let reply = h.revoke(&pairs).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.error(), "invalid_client");
    }
}

#[tokio::test]
async fn an_access_token_hint_is_unsupported_token_type() {
    let h = Harness::new();
    let reply = h
        .revoke(&[
            ("token", "a"),
            ("client_id", "ichor-cli"),
            ("token_type_hint", "access_token"),
        ])
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "unsupported_token_type");
    let other_hint = h
        .revoke(&[
            ("token", "a"),
            ("client_id", "ichor-cli"),
            ("token_type_hint", "x"),
        ])
        .await;
    assert_eq!(other_hint.status, StatusCode::OK, "other hints are ignored");
}

#[tokio::test]
async fn a_store_failure_during_revocation_is_server_error() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    h.store.unavailable.store(true, Ordering::SeqCst);
    let reply = h.revoke(&[("token", &a), ("client_id", "ichor-cli")]).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.error(), "server_error");
}

// === discovery ===

#[tokio::test]
async fn the_external_discovery_document_advertises_the_whole_surface() {
    let h = Harness::new();
    let reply = h.get("/.well-known/openid-configuration").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers[header::CACHE_CONTROL], "no-cache");
    insta::assert_yaml_snapshot!("external_discovery", reply.json());
}

#[tokio::test]
async fn the_internal_discovery_document_puts_the_jwks_on_the_host_the_caller_used() {
    let h = Harness::new();
    let req = Request::get("/.well-known/openid-configuration")
        .header(header::HOST, "10.96.0.12:8444")
        .body(Body::empty())
        .expect("req");
    let reply = h.send_to(&h.internal, req).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers[header::CACHE_CONTROL], "no-cache");
    let doc = reply.json();
    assert_eq!(doc["issuer"], ISSUER);
    assert_eq!(doc["jwks_uri"], "https://10.96.0.12:8444/oidc/jwks");
    assert!(doc.get("revocation_endpoint").is_none());
    insta::assert_yaml_snapshot!("internal_discovery", doc);

    let req = Request::get("/.well-known/openid-configuration")
        .header(header::HOST, "evil.example/x?")
        .body(Body::empty())
        .expect("req");
    assert_eq!(h.send_to(&h.internal, req).await.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_internal_jwks_uri_override_is_advertised_whatever_host_the_caller_used() {
    let uri = "https://ichor-issuer.ichor-system.svc:8444/oidc/jwks";
    let h = Harness::with_internal_jwks_uri(uri);
    for host in [Some("10.96.0.12:8444"), Some("evil.example/x?"), None] {
        let mut req = Request::get("/.well-known/openid-configuration");
        if let Some(host) = host {
            req = req.header(header::HOST, host);
        }
        let reply = h
            .send_to(&h.internal, req.body(Body::empty()).expect("req"))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{host:?}");
        assert_eq!(reply.headers[header::CACHE_CONTROL], "no-cache");
        let doc = reply.json();
        assert_eq!(doc["jwks_uri"], uri, "{host:?}");
        assert_eq!(doc["issuer"], ISSUER);
    }
    // The external document is not touched by it.
    let external = h.get("/.well-known/openid-configuration").await.json();
    assert_eq!(external["jwks_uri"], format!("{ISSUER}/oidc/jwks"));
}

#[tokio::test]
async fn the_internal_listener_serves_only_discovery_and_the_jwks() {
    let h = Harness::new();
    let jwks = h
        .send_to(
            &h.internal,
            Request::get("/oidc/jwks").body(Body::empty()).expect("req"),
        )
        .await;
    assert_eq!(jwks.status, StatusCode::OK);
    assert_eq!(jwks.headers[header::CACHE_CONTROL], "no-cache");
    assert!(jwks.headers.get(header::EXPIRES).is_none() && jwks.headers.get(header::LAST_MODIFIED).is_none());
    for path in ["/oidc/authorize", "/oidc/login", "/oidc/token", "/oidc/revoke"] {
        let reply = h
            .send_to(&h.internal, Request::get(path).body(Body::empty()).expect("req"))
            .await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
    }
}

#[tokio::test]
async fn the_jwks_has_exactly_the_public_members_of_each_published_key() {
    let h = Harness::new();
    let jwks = h.get("/oidc/jwks").await.json();
    let key = &jwks["keys"][0];
    let mut members: Vec<&str> = key.as_object().expect("obj").keys().map(String::as_str).collect();
    members.sort_unstable();
    assert_eq!(members, ["alg", "e", "kid", "kty", "n", "use"]);
    assert_eq!(key["kty"], "RSA");
    assert_eq!(key["use"], "sig");
    assert_eq!(key["alg"], "RS256");
    assert_eq!(
        key["n"].as_str().map(str::len),
        Some(512),
        "RSA-3072 modulus, base64url"
    );
}

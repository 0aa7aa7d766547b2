//! The authorization code and refresh token grants over HTTP: every refusal the seed lists,
//! rotation with its grace window, and the browser client's rotation.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, atomic::Ordering};

use crate::common::*;
use axum::http::{StatusCode, header};
use jiff::SignedDuration;

fn refresh_of(v: &serde_json::Value) -> String {
    v["refresh_token"].as_str().expect("refresh_token").to_owned()
}

// === authorization code ===

/// Found by the `oidc_token_form` fuzz target (10-minute run): a form body over the 16 KiB limit
/// was answered by the framework's plain-text 413, not an OAuth JSON error.
#[tokio::test]
async fn an_oversized_body_is_a_json_oauth_error_on_every_endpoint() {
    let h = Harness::new();
    let big = format!("grant_type=refresh_token&refresh_token={}", "a".repeat(17 * 1024));
    for path in ["/oidc/token", "/oidc/revoke"] {
        let reply = h.post_form(path, &big).await;
        assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        assert_eq!(reply.error(), "invalid_request", "{path}: {}", reply.text());
        assert!(
            reply.json()["error_description"]
                .as_str()
                .expect("d")
                .contains("larger than 16384 bytes")
        );
    }
    let reply = h
        .post_json(
            "/oidc/login",
            serde_json::json!({"ticket": "t", "username": "alice", "password": "x".repeat(17 * 1024)}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "invalid_request", "{}", reply.text());
    // Just under the limit is read and judged on its content (here: a token too long).
    let under = format!("grant_type=refresh_token&refresh_token={}", "a".repeat(15 * 1024));
    let reply = h.post_form("/oidc/token", &under).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert!(!reply.text().contains("larger than"), "{}", reply.text());
}

#[tokio::test]
async fn a_code_used_twice_is_refused_and_the_family_it_started_is_revoked() {
    let h = Harness::new();
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let first = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(first.status, StatusCode::OK);
    let refresh = refresh_of(&first.json());
    assert_eq!(h.store.entry("alice").expect("entry").families.len(), 1);

    let second = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(second.status, StatusCode::BAD_REQUEST);
    assert_eq!(second.error(), "invalid_grant");
    assert!(
        h.store.entry("alice").expect("entry").families.is_empty(),
        "family revoked"
    );
    let reply = h.refresh(&refresh, "ichor-cli", None).await;
    assert_eq!(reply.error(), "invalid_grant");
    assert!(h.metrics().contains("ichor_issuer_code_replays_total 1"));
}

/// A store outage before a new session's write releases the code for another try (503); once
/// the write began and its answer was lost, the session may be stored, so the code is spent
/// (500): a client trying again would start another session each time.
#[tokio::test]
async fn a_code_is_released_after_an_outage_before_its_sessions_write_and_spent_after_a_lost_answer() {
    let h = Harness::new();
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    h.store.unavailable.store(true, Ordering::SeqCst);
    let down = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE, "{}", down.text());
    assert_eq!(down.error(), "temporarily_unavailable");
    h.store.unavailable.store(false, Ordering::SeqCst);
    let again = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(again.status, StatusCode::OK, "released: {}", again.text());
    assert_eq!(h.store.entry("alice").expect("entry").families.len(), 1);

    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    h.store.lost_answers.store(1, Ordering::SeqCst);
    let lost = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(lost.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", lost.text());
    assert_eq!(lost.error(), "server_error");
    assert!(
        lost.headers.get(header::RETRY_AFTER).is_none(),
        "{:?}",
        lost.headers
    );
    assert_eq!(
        h.store.entry("alice").expect("entry").families.len(),
        2,
        "the session was stored though its answer was lost"
    );
    let again = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST, "{}", again.text());
    assert_eq!(again.error(), "invalid_grant");
    assert_eq!(
        h.store.entry("alice").expect("entry").families.len(),
        2,
        "no other session was started"
    );
}

#[tokio::test]
async fn a_code_from_another_client_is_refused() {
    let h = Harness::new();
    let code = h.code("alice", "ichor-cli", CLI_REDIRECT, "openid", "").await;
    let reply = h.exchange(&code, "ichor-ui", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "invalid_grant");
    // The refusal did not burn the code for its real client.
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

#[tokio::test]
async fn a_wrong_pkce_verifier_is_refused() {
    let h = Harness::new();
    let code = h.code("alice", "ichor-cli", CLI_REDIRECT, "openid", "").await;
    let wrong = "another-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, wrong).await;
    assert_eq!(reply.error(), "invalid_grant");
}

#[tokio::test]
async fn a_missing_pkce_verifier_is_a_failed_verification_of_that_code() {
    // RFC 7636 4.6: the code carries a challenge, so no verifier is a failed verification.
    let h = Harness::new();
    let code = h.code("alice", "ichor-cli", CLI_REDIRECT, "openid", "").await;
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, "").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "invalid_grant", "{}", reply.text());
    assert!(reply.text().contains("code_verifier"), "{}", reply.text());
}

#[tokio::test]
async fn a_malformed_pkce_verifier_is_refused() {
    let h = Harness::new();
    let code = h.code("alice", "ichor-cli", CLI_REDIRECT, "openid", "").await;
    for bad in ["short", &format!("{VERIFIER}!"), &"a".repeat(129)] {
        let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, bad).await;
        assert_eq!(reply.error(), "invalid_grant", "{bad}");
    }
}

#[tokio::test]
async fn plain_pkce_is_refused_at_authorize() {
    let h = Harness::new();
    let base = Harness::authorize_query("ichor-cli", CLI_REDIRECT, "openid", "");
    let plain = base.replace("code_challenge_method=S256", "code_challenge_method=plain");
    let reply = h.get_json(&plain).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "invalid_request");
    // No method means plain (RFC 7636 4.3), refused too; the redirect flow says so to the client.
    let absent = base.replace("&code_challenge_method=S256", "");
    let reply = h.get(&absent).await;
    assert_eq!(reply.status, StatusCode::FOUND);
    let location = reply.location();
    assert!(location.starts_with(CLI_REDIRECT), "{location}");
    assert_eq!(
        query_param(&location, "error").as_deref(),
        Some("invalid_request")
    );
    assert_eq!(query_param(&location, "state").as_deref(), Some("st-1"));
    assert_eq!(query_param(&location, "iss").as_deref(), Some(ISSUER));
}

#[tokio::test]
async fn a_redirect_uri_that_differs_in_any_way_is_refused_without_a_redirect() {
    let h = Harness::new();
    for (client, bad) in [
        ("ichor-cli", "http://localhost:38123/callback"),
        ("ichor-cli", "http://127.0.0.1:38123/callback/more"),
        ("ichor-cli", "https://127.0.0.1:38123/callback"),
        ("ichor-ui", "https://ichor.example.com/auth/callback/"),
        ("ichor-ui", "http://ichor.example.com/auth/callback"),
    ] {
        let reply = h.get(&Harness::authorize_query(client, bad, "openid", "")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(reply.headers.get("location").is_none(), "{bad}");
        assert!(reply.text().contains("redirect_uri"), "{bad}");
    }
    // At the token endpoint, a redirect URI other than the authorization request's is refused.
    let code = h.code("alice", "ichor-cli", CLI_REDIRECT, "openid", "").await;
    for bad in [
        "http://127.0.0.1:38124/callback",
        "http://localhost:38123/callback",
    ] {
        let reply = h.exchange(&code, "ichor-cli", bad, VERIFIER).await;
        assert_eq!(reply.error(), "invalid_grant", "{bad}");
    }
}

#[tokio::test]
async fn an_unknown_client_gets_an_error_page_and_no_redirect() {
    let h = Harness::new();
    let reply = h
        .get(&Harness::authorize_query("evil", CLI_REDIRECT, "openid", ""))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.headers.get("location").is_none());
    assert!(reply.text().contains("client_id"));
}

#[tokio::test]
async fn the_redirect_flow_sends_the_browser_to_the_sign_in_page_with_a_ticket() {
    let h = Harness::new();
    let reply = h
        .get(&Harness::authorize_query("ichor-cli", CLI_REDIRECT, "openid", ""))
        .await;
    assert_eq!(reply.status, StatusCode::FOUND);
    let location = reply.location();
    assert!(location.starts_with("/oidc/login?ticket="), "{location}");
    let page = h.get(&location).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text().contains("Sign in to Ichor"));
    // The form may post here and be redirected to the CLI's loopback port only; no inline script.
    assert_eq!(
        page.headers["content-security-policy"],
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; \
         form-action 'self' http://127.0.0.1:38123"
    );
    // The UI's sign-in card: its script from /assets/, its data (whom the sign-in is for) in a
    // JSON block.
    let text = page.text();
    let scripts: Vec<&str> = text
        .split("<script")
        .skip(1)
        .map(|s| &s[..s.find('>').expect("tag end")])
        .collect();
    assert_eq!(scripts.len(), 2, "{text}");
    assert!(
        scripts
            .iter()
            .any(|s| s.contains("type=\"module\"") && s.contains("src=\"/assets/")),
        "{text}"
    );
    assert!(
        scripts
            .iter()
            .any(|s| s.contains("type=\"application/json\" id=\"ichor-sign-in\"")),
        "{text}"
    );
    assert!(text.contains("\"client\":\"ichor-cli\",\"port\":38123"), "{text}");
}

#[tokio::test]
async fn a_ticket_used_as_a_code_is_refused() {
    let h = Harness::new();
    let ticket = h.ticket("ichor-cli", CLI_REDIRECT, "openid", "").await;
    let reply = h.exchange(&ticket, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "invalid_grant");
}

#[tokio::test]
async fn a_code_used_as_a_refresh_token_is_refused() {
    let h = Harness::new();
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = h.refresh(&code, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "invalid_grant");
}

#[tokio::test]
async fn a_code_expires_after_sixty_seconds() {
    let h = Harness::new();
    let code = h.code("alice", "ichor-cli", CLI_REDIRECT, "openid", "").await;
    h.clock.advance(SignedDuration::from_secs(60));
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.error(), "invalid_grant");
}

#[tokio::test]
async fn no_refresh_token_is_issued_without_offline_access() {
    let h = Harness::new();
    let code = h.code("alice", "ichor-cli", CLI_REDIRECT, "openid", "").await;
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.json().get("refresh_token").is_none());
    assert!(h.store.entry("alice").expect("entry").families.is_empty());
}

#[tokio::test]
async fn a_code_issued_before_not_before_is_refused() {
    let h = Harness::new();
    let code = h.code("alice", "ichor-cli", CLI_REDIRECT, "openid", "").await;
    h.clock.advance(SignedDuration::from_secs(1));
    let revoked = h
        .store
        .entry("alice")
        .expect("entry")
        .revoke_all(h.clock.now_ts());
    h.store.set_entry("alice", revoked);
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.error(), "invalid_grant");
}

#[tokio::test]
async fn the_browser_client_cannot_ask_for_the_kubernetes_audience() {
    let h = Harness::new();
    let q = Harness::authorize_query("ichor-ui", UI_REDIRECT, "openid", "&audience=ichor-kube");
    let reply = h.get_json(&q).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "invalid_request");
}

#[tokio::test]
async fn a_store_outage_is_a_503_that_says_nothing_about_the_user() {
    let h = Harness::new();
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    h.store
        .unavailable
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.error(), "temporarily_unavailable");
    assert!(!reply.text().contains("alice"));
    // The code was released: it works once the store is back.
    h.store
        .unavailable
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

// === refresh ===

#[tokio::test]
async fn a_refresh_rotates_and_answers_a_fresh_id_token() {
    let h = Harness::new();
    let session = h.cli_session("alice").await;
    let first = refresh_of(&session);
    h.clock.advance(SignedDuration::from_secs(120));
    let reply = h.refresh(&first, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let body = reply.json();
    assert_ne!(refresh_of(&body), first);
    let id = body["id_token"].as_str().expect("id");
    assert_eq!(claims(id)["iat"], h.clock.now_secs());
    assert_eq!(claims(id)["aud"], "ichor-kube");
    assert!(claims(id).get("nonce").is_none());
    let fam = h.store.entry("alice").expect("entry").families;
    assert_eq!(fam.values().next().map(|f| f.generation), Some(2));
    assert!(
        h.metrics()
            .contains("grant=\"refresh_token\",audience=\"ichor-kube\"} 1")
    );
}

#[tokio::test]
async fn a_refresh_can_ask_the_cli_family_for_an_ichor_ui_token() {
    let h = Harness::new();
    let session = h.cli_session("alice").await;
    let reply = h
        .refresh(&refresh_of(&session), "ichor-cli", Some("ichor-ui"))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        claims(reply.json()["id_token"].as_str().expect("id"))["aud"],
        "ichor-ui"
    );
    // Without the parameter the family's audience is kept.
    let reply = h.refresh(&refresh_of(&reply.json()), "ichor-cli", None).await;
    assert_eq!(
        claims(reply.json()["id_token"].as_str().expect("id"))["aud"],
        "ichor-kube"
    );
}

#[tokio::test]
async fn the_previous_token_within_the_grace_window_returns_the_same_successor() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    let b = refresh_of(&h.refresh(&a, "ichor-cli", None).await.json());
    h.clock.advance(SignedDuration::from_secs(9));
    let again = h.refresh(&a, "ichor-cli", None).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    assert_eq!(refresh_of(&again.json()), b, "the same successor");
    assert!(again.json()["id_token"].is_string(), "and a fresh ID token");
}

#[tokio::test]
async fn a_refresh_token_reused_after_the_grace_window_revokes_the_family() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    let b = refresh_of(&h.refresh(&a, "ichor-cli", None).await.json());
    h.clock.advance(SignedDuration::from_secs(10));
    let reuse = h.refresh(&a, "ichor-cli", None).await;
    assert_eq!(reuse.status, StatusCode::BAD_REQUEST);
    assert_eq!(reuse.error(), "invalid_grant");
    let newer = h.refresh(&b, "ichor-cli", None).await;
    assert_eq!(newer.error(), "invalid_grant", "the newer token is dead too");
    assert!(h.store.entry("alice").expect("entry").families.is_empty());
    assert!(
        h.metrics()
            .contains("ichor_issuer_refresh_reuse_detections_total 1")
    );
}

#[tokio::test]
async fn ten_concurrent_refreshes_with_one_token_all_succeed_with_one_generation_step() {
    let h = Arc::new(Harness::new());
    let a = refresh_of(&h.cli_session("alice").await);
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let h = Arc::clone(&h);
            let a = a.clone();
            tokio::spawn(async move { h.refresh(&a, "ichor-cli", None).await })
        })
        .collect();
    let mut successors = Vec::new();
    for t in tasks {
        let reply = t.await.expect("join");
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        successors.push(refresh_of(&reply.json()));
    }
    successors.dedup();
    assert_eq!(successors.len(), 1, "one successor for all ten");
    let entry = h.store.entry("alice").expect("entry");
    assert_eq!(entry.families.len(), 1, "one family");
    assert_eq!(
        entry.families.values().next().map(|f| f.generation),
        Some(2),
        "one step"
    );
}

#[tokio::test]
async fn a_refresh_token_for_a_disabled_user_is_refused() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    h.store.update_user("alice", |u| u.disabled = true);
    let reply = h.refresh(&a, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error(), "invalid_grant");
}

#[tokio::test]
async fn a_refresh_token_for_a_deleted_user_is_refused() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    h.store.delete_user("alice");
    let reply = h.refresh(&a, "ichor-cli", None).await;
    assert_eq!(reply.error(), "invalid_grant");
}

#[tokio::test]
async fn a_refresh_token_issued_before_not_before_is_refused() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    h.clock.advance(SignedDuration::from_secs(1));
    // notBefore moves past the family's iat without removing the family (as an older writer
    // might leave it): the iat check alone must refuse.
    let mut entry = h.store.entry("alice").expect("entry");
    entry.not_before = h.clock.now_ts();
    h.store.set_entry("alice", entry);
    let reply = h.refresh(&a, "ichor-cli", None).await;
    assert_eq!(reply.error(), "invalid_grant");
    assert!(
        reply.json()["error_description"]
            .as_str()
            .expect("d")
            .contains("notBefore")
    );
}

#[tokio::test]
async fn a_revoked_family_no_longer_refreshes() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    let entry = h.store.entry("alice").expect("entry");
    let fam = entry.families.keys().next().expect("fam").clone();
    h.store
        .set_entry("alice", entry.revoke_family(&fam).expect("revoked"));
    let reply = h.refresh(&a, "ichor-cli", None).await;
    assert_eq!(reply.error(), "invalid_grant");
}

#[tokio::test]
async fn the_absolute_lifetime_is_never_extended_by_rotation() {
    let h = Harness::new();
    let mut token = refresh_of(&h.cli_session("alice").await);
    let exp = claims(&token)["exp"].as_i64().expect("exp");
    assert_eq!(exp, start().as_second() + 12 * 3600);
    for _ in 0..3 {
        h.clock.advance(SignedDuration::from_hours(3));
        let reply = h.refresh(&token, "ichor-cli", None).await;
        assert_eq!(reply.status, StatusCode::OK);
        token = refresh_of(&reply.json());
        assert_eq!(claims(&token)["exp"], exp);
    }
    h.clock.advance(SignedDuration::from_hours(3));
    assert_eq!(
        h.refresh(&token, "ichor-cli", None).await.error(),
        "invalid_grant"
    );
}

#[tokio::test]
async fn a_refresh_token_of_another_client_is_refused() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    assert_eq!(h.refresh(&a, "ichor-ui", None).await.error(), "invalid_grant");
    assert_eq!(
        h.refresh(&a, "nobody", None).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn the_browser_client_rotates_its_refresh_token_with_the_ichor_ui_audience() {
    let h = Harness::new();
    let code = h
        .code("alice", "ichor-ui", UI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = h.exchange(&code, "ichor-ui", UI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK);
    let a = refresh_of(&reply.json());
    assert_eq!(
        claims(reply.json()["id_token"].as_str().expect("id"))["aud"],
        "ichor-ui"
    );
    let b = h.refresh(&a, "ichor-ui", None).await;
    assert_eq!(b.status, StatusCode::OK);
    assert_ne!(refresh_of(&b.json()), a);
    assert_eq!(
        claims(b.json()["id_token"].as_str().expect("id"))["aud"],
        "ichor-ui"
    );
    assert_eq!(
        h.refresh(&a, "ichor-ui", Some("ichor-kube")).await.error(),
        "invalid_request"
    );
}

#[tokio::test]
async fn several_families_per_user_live_side_by_side() {
    let h = Harness::new();
    let a = refresh_of(&h.cli_session("alice").await);
    let b = refresh_of(&h.cli_session("alice").await);
    assert_eq!(h.store.entry("alice").expect("entry").families.len(), 2);
    assert_eq!(h.refresh(&a, "ichor-cli", None).await.status, StatusCode::OK);
    assert_eq!(h.refresh(&b, "ichor-cli", None).await.status, StatusCode::OK);
}

#[tokio::test]
async fn garbage_and_unknown_grant_types_get_rfc_6749_errors() {
    let h = Harness::new();
    assert_eq!(
        h.refresh("garbage", "ichor-cli", None).await.error(),
        "invalid_grant"
    );
    let reply = h
        .post_form("/oidc/token", "grant_type=password&client_id=ichor-cli")
        .await;
    assert_eq!(reply.error(), "unsupported_grant_type");
    let reply = h
        .post_form("/oidc/token", "grant_type=refresh_token&grant_type=refresh_token")
        .await;
    assert_eq!(reply.error(), "invalid_request");
    let reply = h
        .post_json("/oidc/token", serde_json::json!({"grant_type": "refresh_token"}))
        .await;
    assert_eq!(reply.error(), "invalid_request");
    let big = format!("grant_type=refresh_token&refresh_token={}", "a".repeat(20 * 1024));
    assert_eq!(
        h.post_form("/oidc/token", &big).await.status,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(reply.headers["cache-control"], "no-store");
}

//! The issuer's answers the `ichor` CLI reads on its slow path
//! (`cli::commands::auth::oidc`): the discovery document (`parse_discovery`), the token
//! response of the code and refresh grants (`parse_token_response`) and the OAuth error body of
//! a refused request (`oauth_error`). A network peer (or anything in between, for an `http`
//! loopback issuer) writes these bytes.
//!
//! Input: the first byte picks the document (`% 3`: discovery, token response, error); the
//! rest is the body.
//!
//! Properties: no panic; accepted endpoints pass the CLI's transport rule (https, or http to
//! the loopback); an accepted token response has its ID token; a refused token response never
//! quotes the body (it may hold tokens); an error body is always read as an OAuth error, by its
//! `error` when it has one, else by the HTTP status.

use axum::http::StatusCode;
use ichor_cli::commands::auth::{
    error::AuthError,
    issuer_url::{IssuerUrl, check_url},
    oidc::{oauth_error, parse_discovery, parse_token_response},
};

/// The issuer the CLI was given.
const ISSUER: &str = "https://ichor.example.com";
/// Where the token responses come from.
const TOKEN_ENDPOINT: &str = "https://ichor.example.com/oidc/token";

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    match first % 3 {
        0 => discovery(body),
        1 => token_response(body),
        _ => error_body(body),
    }
}

fn discovery(body: &[u8]) {
    let issuer = IssuerUrl::parse(ISSUER).expect("the issuer");
    let url = issuer.discovery_url();
    match parse_discovery(&issuer, &url, body) {
        Ok(endpoints) => {
            check_url("authorization_endpoint", &endpoints.authorization).expect("checked");
            check_url("token_endpoint", &endpoints.token).expect("checked");
            if let Some(r) = &endpoints.revocation {
                check_url("revocation_endpoint", r).expect("checked");
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

fn token_response(body: &[u8]) {
    match parse_token_response(TOKEN_ENDPOINT, body) {
        Ok(response) => {
            let _ = (
                response.id_token.expose(),
                response.refresh_token.map(|r| r.expose().len()),
            );
        }
        Err(e) => {
            let message = e.to_string();
            if let Ok(text) = std::str::from_utf8(body) {
                let text = text.trim();
                // Long enough not to appear in the message's own words by chance.
                if text.len() >= 24 {
                    assert!(!message.contains(text), "the error quotes the body: {message}");
                }
            }
        }
    }
}

fn error_body(body: &[u8]) {
    let error = oauth_error("token request", TOKEN_ENDPOINT, StatusCode::BAD_REQUEST, body);
    let AuthError::OAuth { error: code, .. } = &error else {
        panic!("an error answer is an OAuth error: {error:?}");
    };
    if serde_json::from_slice::<serde_json::Value>(body).is_err() && !code.starts_with("HTTP ") {
        // serde_json skips the fields it does not keep without checking their UTF-8, so a body
        // whose only flaw is there still yields its `error`; it must come from the body.
        assert!(
            body.windows(5).any(|w| w == b"error"),
            "an error code from nowhere: {code}"
        );
    }
    let _ = error.to_string();
}

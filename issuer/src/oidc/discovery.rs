//! Discovery documents (OpenID Connect Discovery 1.0) and the JWKS, served with
//! `Cache-Control: no-cache` so the kube-apiserver's go-oidc v2 key cache refetches on an unknown
//! `kid` at once (seed, Unit 2 amendment).

use std::sync::Arc;

use axum::{
    Json,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use super::{Issuer, errors::OAuthError};

/// The external discovery document (8443).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExternalDiscovery {
    /// The issuer (external URL).
    pub issuer: String,
    /// `/oidc/authorize`.
    pub authorization_endpoint: String,
    /// `/oidc/token`.
    pub token_endpoint: String,
    /// `/oidc/jwks`.
    pub jwks_uri: String,
    /// `/oidc/revoke` (RFC 7009).
    pub revocation_endpoint: String,
    /// `["code"]`.
    pub response_types_supported: [&'static str; 1],
    /// `["query"]`.
    pub response_modes_supported: [&'static str; 1],
    /// `["authorization_code", "refresh_token"]`.
    pub grant_types_supported: [&'static str; 2],
    /// `["public"]`.
    pub subject_types_supported: [&'static str; 1],
    /// `["RS256"]`.
    pub id_token_signing_alg_values_supported: [&'static str; 1],
    /// `["openid", "offline_access"]`.
    pub scopes_supported: [&'static str; 2],
    /// `["S256"]`.
    pub code_challenge_methods_supported: [&'static str; 1],
    /// `["none"]`: public clients.
    pub token_endpoint_auth_methods_supported: [&'static str; 1],
    /// `["none"]`: public clients.
    pub revocation_endpoint_auth_methods_supported: [&'static str; 1],
    /// The claims of the ID token.
    pub claims_supported: [&'static str; 9],
    /// RFC 9207: the authorization response carries `iss`.
    pub authorization_response_iss_parameter_supported: bool,
}

/// The internal discovery document (8444): the same issuer, the JWKS on the caller's host (or at
/// `--internal-jwks-uri` when the operator set one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InternalDiscovery {
    /// The issuer (external URL).
    pub issuer: String,
    /// The external `/oidc/authorize` (required by OIDC Discovery; not served here).
    pub authorization_endpoint: String,
    /// The external `/oidc/token` (not served here).
    pub token_endpoint: String,
    /// `https://<Host>/oidc/jwks` on this listener, or the `--internal-jwks-uri` override.
    pub jwks_uri: String,
    /// `["code"]`.
    pub response_types_supported: [&'static str; 1],
    /// `["public"]`.
    pub subject_types_supported: [&'static str; 1],
    /// `["RS256"]`.
    pub id_token_signing_alg_values_supported: [&'static str; 1],
}

/// The external document for `issuer`.
pub fn external_document(issuer: &str) -> ExternalDiscovery {
    ExternalDiscovery {
        issuer: issuer.to_owned(),
        authorization_endpoint: format!("{issuer}/oidc/authorize"),
        token_endpoint: format!("{issuer}/oidc/token"),
        jwks_uri: format!("{issuer}/oidc/jwks"),
        revocation_endpoint: format!("{issuer}/oidc/revoke"),
        response_types_supported: ["code"],
        response_modes_supported: ["query"],
        grant_types_supported: ["authorization_code", "refresh_token"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: ["RS256"],
        scopes_supported: ["openid", "offline_access"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none"],
        revocation_endpoint_auth_methods_supported: ["none"],
        claims_supported: [
            "iss",
            "sub",
            "aud",
            "exp",
            "iat",
            "auth_time",
            "nonce",
            "groups",
            "amr",
        ],
        authorization_response_iss_parameter_supported: true,
    }
}

/// Whether `host` is a plausible `host[:port]` (a DNS name, an IPv4 address or a bracketed
/// IPv6 address), so it can be put into a URL without changing its meaning.
pub fn host_ok(host: &str) -> bool {
    (1..=261).contains(&host.len())
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
        && url::Url::parse(&format!("https://{host}/")).is_ok_and(|u| u.host().is_some() && u.path() == "/")
}

/// The internal document, with the JWKS on `host` (the Host header the caller sent).
pub fn internal_document(issuer: &str, host: &str) -> InternalDiscovery {
    internal_document_at(issuer, &format!("https://{host}/oidc/jwks"))
}

/// The internal document advertising `jwks_uri` (the operator's `--internal-jwks-uri`).
pub fn internal_document_at(issuer: &str, jwks_uri: &str) -> InternalDiscovery {
    InternalDiscovery {
        issuer: issuer.to_owned(),
        authorization_endpoint: format!("{issuer}/oidc/authorize"),
        token_endpoint: format!("{issuer}/oidc/token"),
        jwks_uri: jwks_uri.to_owned(),
        response_types_supported: ["code"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: ["RS256"],
    }
}

fn no_cache(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

pub(crate) async fn external(State(issuer): State<Arc<Issuer>>) -> Response {
    no_cache(Json(external_document(issuer.issuer())).into_response())
}

pub(crate) async fn internal(State(issuer): State<Arc<Issuer>>, uri: Uri, headers: HeaderMap) -> Response {
    // An explicit override names the JWKS whatever host the caller used.
    if let Some(jwks_uri) = issuer.internal_jwks_uri() {
        return no_cache(Json(internal_document_at(issuer.issuer(), jwks_uri)).into_response());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()));
    match host {
        Some(host) if host_ok(host) => {
            no_cache(Json(internal_document(issuer.issuer(), host)).into_response())
        }
        _ => OAuthError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "Host: must be the host name or address of this listener",
        )
        .into_response(),
    }
}

pub(crate) async fn jwks(State(issuer): State<Arc<Issuer>>) -> Response {
    match issuer.keys().load() {
        Some(keys) => no_cache(Json(keys.jwks(issuer.now())).into_response()),
        None => {
            no_cache(OAuthError::unavailable("the signing keys are not loaded yet; the JWKS").into_response())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::host_ok;

    #[test]
    fn only_plain_host_and_port_values_are_used_in_the_jwks_uri() {
        for ok in [
            "10.96.0.12:8444",
            "ichor-ui-service.ichor-system.svc",
            "[fd00::1]:8444",
        ] {
            assert!(host_ok(ok), "{ok}");
        }
        for bad in ["", "evil.example/x", "a@b", "a b", "host:8444?x", "a#b"] {
            assert!(!host_ok(bad), "{bad}");
        }
    }
}

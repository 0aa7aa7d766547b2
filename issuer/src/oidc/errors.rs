//! OAuth 2.0 error responses (RFC 6749 section 5.2, RFC 7009 section 2.2.1): a JSON body with
//! `error` and `error_description`, `Cache-Control: no-store`.

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use jiff::SignedDuration;
use serde::Serialize;

/// An error answered by the token, revocation or (JSON) authorization endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OAuthError {
    pub status: StatusCode,
    pub error: &'static str,
    pub description: String,
    pub retry_after: Option<i64>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    error_description: &'a str,
}

impl OAuthError {
    pub fn new(status: StatusCode, error: &'static str, description: impl Into<String>) -> Self {
        OAuthError {
            status,
            error,
            description: description.into(),
            retry_after: None,
        }
    }

    /// The answer to a request body that could not be read — larger than
    /// [`super::MAX_BODY_BYTES`] (413) or cut off (400) — as an OAuth error in JSON like every
    /// other answer of these endpoints, never the framework's plain-text rejection.
    pub fn unreadable_body(rejection: &axum::extract::rejection::BytesRejection) -> Self {
        Self::unreadable_body_over(rejection, super::MAX_BODY_BYTES)
    }

    /// [`OAuthError::unreadable_body`] of a route whose bodies may be `limit` bytes.
    pub fn unreadable_body_over(rejection: &axum::extract::rejection::BytesRejection, limit: usize) -> Self {
        let status = rejection.status();
        let description = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!("the request body is larger than {limit} bytes")
        } else {
            "the request body could not be read".to_owned()
        };
        Self::new(status, "invalid_request", description)
    }

    /// 400 `invalid_request`: a parameter is missing, repeated or malformed.
    pub fn invalid_request(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", description)
    }

    /// 400 `invalid_grant`: a bad, expired or reused code or refresh token.
    pub fn invalid_grant(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_grant", description)
    }

    /// 401 `invalid_client`: no or an unknown `client_id`.
    pub fn invalid_client() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "client_id: must be ichor-ui or ichor-cli",
        )
    }

    /// 503 `temporarily_unavailable`: the user store or the keys are not available.
    pub fn unavailable(what: &str) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            format!("{what} is unavailable; try again shortly"),
        );
        e.retry_after = Some(5);
        e
    }

    /// 503 `temporarily_unavailable`: `what` has more work queued than it accepts; retry after
    /// `retry_after` seconds.
    pub fn busy(what: &str, retry_after: u64) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            format!("{what} is busy; try again in {retry_after} seconds"),
        );
        e.retry_after = Some(i64::try_from(retry_after).unwrap_or(i64::MAX));
        e
    }

    /// 500 `server_error`: the credentials store is full, so nothing was saved. Not
    /// `temporarily_unavailable` (503 with `Retry-After`): retrying does not help until an
    /// administrator makes room.
    pub fn store_full() -> Self {
        Self::server_error(
            "the issuer's credentials store is full, so the session could not be saved; ask an administrator to end unused sessions",
        )
    }

    /// 500 `server_error`.
    pub fn server_error(description: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", description)
    }

    /// 429 `slow_down`: the per-source or per-user limit was hit.
    pub fn slow_down(retry_after: SignedDuration) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "slow_down",
            "too many requests; wait before trying again",
        );
        e.retry_after = Some(retry_after.as_secs().max(1));
        e
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(Body {
                error: self.error,
                error_description: &self.description,
            }),
        )
            .into_response();
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
        if self.error == "invalid_client" {
            // Every 401 names the scheme a client would authenticate with (RFC 6749 5.2, RFC 9110
            // 11.6.1); the clients are public, so the credentials are the `client_id` alone.
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"ichor\""),
            );
        }
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

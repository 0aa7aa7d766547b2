//! `POST /oidc/revoke`: RFC 7009 token revocation for refresh tokens, exactly as the seed's
//! "Follow-up 2026-11-04 (sign-out revokes)" says:
//!
//! - a valid refresh token deletes its whole family (predecessors and successor stop too): 200;
//! - anything that is not a valid refresh token (garbage, expired, an ID token, a family already
//!   gone): 200 with no body, so the endpoint is no oracle (section 2.2);
//! - a valid refresh token of another client: 400 `invalid_grant`, nothing revoked (2.1);
//! - `token` missing or repeated, or a body that is not a form: 400 `invalid_request`;
//! - `client_id` missing or unknown: 401 `invalid_client`;
//! - `token_type_hint=access_token`: 400 `unsupported_token_type` (ID tokens are not
//!   revocable); other hints are ignored (2.1);
//! - a store failure: 500 `server_error`.
//!
//! The per-source rate limit is the token endpoint's.

use std::sync::Arc;

use axum::{
    body::Bytes,
    extract::State,
    extract::rejection::BytesRejection,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

use super::{
    Issuer, Source,
    errors::OAuthError,
    request::{self, Params},
    token::{client, param, rate_limit},
};
use crate::{
    store::{Change, StoreError, modify_credentials},
    tokens::{self, RefreshClaims},
};

pub(crate) async fn revoke(
    State(issuer): State<Arc<Issuer>>,
    Source(source): Source,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return OAuthError::unreadable_body(&rejection).into_response(),
    };
    match run(&issuer, source, &headers, &body).await {
        Ok(()) => {
            let mut response = StatusCode::OK.into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(e) => e.into_response(),
    }
}

async fn run(
    issuer: &Issuer,
    source: std::net::IpAddr,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), OAuthError> {
    rate_limit(issuer, source)?;
    if !request::is_form(headers) {
        return Err(OAuthError::invalid_request(
            "the body must be application/x-www-form-urlencoded",
        ));
    }
    let params = Params::parse(body).map_err(|e| OAuthError::invalid_request(e.to_string()))?;
    let token = param(&params, "token")?.ok_or_else(|| OAuthError::invalid_request("token: required"))?;
    let client = client(&params)?;
    if param(&params, "token_type_hint")? == Some("access_token") {
        return Err(OAuthError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_token_type",
            "token_type_hint: ID tokens (access tokens) cannot be revoked; they end within the token TTL",
        ));
    }
    let Some(keys) = issuer.keys().load() else {
        return Err(OAuthError::server_error("the signing keys are not loaded"));
    };
    let Ok(claims) = tokens::verify_artifact::<RefreshClaims>(&keys, token, issuer.issuer(), issuer.now())
    else {
        return Ok(());
    };
    if claims.client_id != client.id() {
        return Err(OAuthError::invalid_grant("token: issued to another client"));
    }
    modify_credentials(issuer.store.as_ref(), &claims.sub, |current| {
        Ok::<_, StoreError>(match current.and_then(|c| c.revoke_family(&claims.fam)) {
            Some(next) => Change::Put(next, ()),
            None => Change::Keep(()),
        })
    })
    .await
    .map_err(|e| {
        tracing::warn!(error = %e, "revocation could not reach the user store");
        OAuthError::server_error("the user store is unavailable; the token was not revoked")
    })?;
    issuer.store.invalidate(&claims.sub);
    Ok(())
}

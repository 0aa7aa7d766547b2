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
//! - a valid refresh token whose family's bucket is empty: 503 `temporarily_unavailable` with
//!   `Retry-After`, nothing revoked (2.2.1);
//! - a store failure: 500 `server_error`.
//!
//! The per-source failure bucket is the token endpoint's: a request is charged when it is
//! refused with a 4xx or when its token is not a valid refresh token (answered 200 all the same),
//! and costs nothing when it revokes a family. A request whose token verifies as a refresh token
//! (one HMAC check, before the bucket) is never refused by the bucket, so garbage from a shared
//! address cannot stop the people behind it from signing out. Such a request is held to its
//! family's bucket instead ([`super::limits::BucketPolicy::FAMILY_GRANTS`], shared with the
//! family's refresh grants) before the store is read: a refresh token keeps its MAC until its
//! family's end, also after the family is revoked, so one old token looped here would otherwise
//! read its user's credentials as fast as it is sent. A family found gone (revoked here, or
//! absent when looked up) is remembered ([`super::limits::GoneFamilies`]): its tokens are then
//! answered 200 without a store read.

use std::sync::Arc;

use axum::{
    body::Bytes,
    extract::State,
    extract::rejection::BytesRejection,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

use jiff::SignedDuration;

use super::{
    Issuer, Source,
    errors::OAuthError,
    lock,
    request::{self, Params},
    token::{client, is_client_failure, param, reserve_source},
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
    let verified = body
        .as_ref()
        .is_ok_and(|body| token_verifies(&issuer, &headers, body));
    let reserved = match reserve_source(&issuer, source, verified) {
        Ok(reserved) => reserved,
        Err(e) => return e.into_response(),
    };
    let result = match body {
        Ok(body) => run(&issuer, &headers, &body).await,
        Err(rejection) => Err(OAuthError::unreadable_body(&rejection)),
    };
    let failed = match &result {
        Ok(revoked) => *revoked == Revoked::NotARefreshToken,
        Err(e) => is_client_failure(e),
    };
    if failed {
        reserved.charge();
    }
    match result {
        Ok(_) => {
            let mut response = StatusCode::OK.into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(e) => e.into_response(),
    }
}

/// Whether the form's `token` is a refresh token of this issuer that verifies now (one HMAC
/// check, before the source's bucket, which does not refuse such a revocation).
fn token_verifies(issuer: &Issuer, headers: &HeaderMap, body: &[u8]) -> bool {
    if !request::is_form(headers) {
        return false;
    }
    let (Ok(params), Some(keys)) = (Params::parse(body), issuer.keys().load()) else {
        return false;
    };
    let Ok(Some(token)) = param(&params, "token") else {
        return false;
    };
    tokens::verify_artifact::<RefreshClaims>(&keys, token, issuer.issuer(), issuer.now()).is_ok()
}

/// The answer to a revocation its family's bucket refused: 503 with `Retry-After`, which
/// RFC 7009 section 2.2.1 reserves for "the token still exists, retry later" (nothing was
/// revoked). Only a token whose MAC verifies for the right client gets it, and the bucket is
/// consulted before the store, so it says nothing of whether the family is still alive.
fn family_busy(wait: SignedDuration) -> OAuthError {
    let secs = u64::try_from(wait.as_secs().max(1)).unwrap_or(1);
    OAuthError::busy("revocation of this session", secs)
}

/// What a well-formed revocation found (both answered 200).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Revoked {
    /// A valid refresh token: its family is gone.
    Family,
    /// Not a valid refresh token, or one of a family already gone: nothing to do, but the
    /// source is charged.
    NotARefreshToken,
}

async fn run(issuer: &Issuer, headers: &HeaderMap, body: &[u8]) -> Result<Revoked, OAuthError> {
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
        return Ok(Revoked::NotARefreshToken);
    };
    if claims.client_id != client.id() {
        return Err(OAuthError::invalid_grant("token: issued to another client"));
    }
    // A token keeps its MAC until its family's end, also after a sign-out: a family this replica
    // found gone is not looked up again, and the others are held to the family's bucket before
    // the store is read, as its refreshes are, so one old token cannot keep its user's line of
    // store changes full.
    if lock(&issuer.gone_families).contains(&claims.fam) {
        return Ok(Revoked::NotARefreshToken);
    }
    if let Err(wait) = lock(&issuer.family_buckets).reserve(claims.fam.clone(), issuer.now()) {
        issuer.metrics.backoff_hit("family_rate");
        return Err(family_busy(wait));
    }
    let revoked = modify_credentials(issuer.store.as_ref(), &claims.sub, |current| {
        Ok::<_, StoreError>(match current.and_then(|c| c.revoke_family(&claims.fam)) {
            Some(next) => Change::Put(next, Revoked::Family),
            None => Change::Keep(Revoked::NotARefreshToken),
        })
    })
    .await
    .map_err(|e| {
        tracing::warn!(error = %e, "revocation could not write to the user store");
        match e {
            StoreError::Full(_) => OAuthError::store_full(),
            _ => OAuthError::server_error("the user store is unavailable; the token was not revoked"),
        }
    })?;
    lock(&issuer.gone_families).insert(&claims.fam);
    if revoked == Revoked::Family {
        issuer.store.invalidate(&claims.sub);
    }
    Ok(revoked)
}

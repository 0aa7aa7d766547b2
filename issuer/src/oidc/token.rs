//! `POST /oidc/token`: the `authorization_code` grant (PKCE S256, exact redirect URI, 60-second
//! single-use code) and the `refresh_token` grant (rotation with reuse detection, the 10-second
//! grace window, absolute lifetime). Every success answers a fresh ID token.
//!
//! Every bad, expired, replayed or foreign code or refresh token is `invalid_grant`.
//!
//! Limits: each request reserves a token in its source's failure bucket before the grant's work
//! and keeps it only when its answer is the client's fault (a 4xx other than 429: a bad grant, a
//! garbage token, a malformed or unauthenticated request), so valid grants cost their source
//! nothing and an office behind one address refreshes freely. A request whose code or refresh
//! token verifies (one HMAC check, before the bucket) is never refused by the bucket — garbage
//! from the same address cannot deny it — and is charged all the same if it fails (a replayed
//! code, a revoked family). Valid-looking refresh tokens are also held to their family's bucket
//! before the store is read ([`super::limits::BucketPolicy::FAMILY_GRANTS`]), and those of a
//! family this replica found gone are refused without a store read
//! ([`super::limits::GoneFamilies`]).

use std::sync::Arc;

use axum::{
    Json,
    body::Bytes,
    extract::State,
    extract::rejection::BytesRejection,
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
};
use ichor_renderers::auth::{
    credentials::{AMR_MFA, AMR_PASSWORD, CredentialsEntry, Family},
    second_factor_policy::{TokenDecision, token_decision},
};
use jiff::Timestamp;
use serde::Serialize;

use super::{
    Issuer, Source,
    errors::OAuthError,
    limits::{CodeClaim, SourceToken},
    lock,
    request::{self, AUD_KUBE, Client, Params},
};
use crate::{
    keys::{LoadedKeys, b64},
    store::{Change, StoreError, StoredUser, modify_credentials},
    tokens::{self, CodeClaims, IdTokenClaims, RefreshClaims},
};

mod refresh;

/// The refusal of a grant for an `ichor-kube` token of a user the second-factor policy requires
/// to enrol a factor first.
pub const ENROL_FIRST: &str = "set up a second factor first: sign in to the Ichor web UI and set one up on \
                               your account page; no ichor-kube token is issued until then";

/// The refusal of a refresh for an `ichor-kube` token of a user the second-factor policy
/// requires a factor of, whose session did not prove one.
pub const SIGN_IN_WITH_FACTOR: &str = "refresh_token: this session was started without a second factor, which \
                                       is now required of this user for ichor-kube tokens: sign in again";

/// A random 128-bit identifier, base64url (family ids, code ids).
///
/// # Errors
/// The operating system's random source failed.
pub fn random_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(b64(&bytes))
}

/// The successful token response (RFC 6749 5.1, OIDC Core 3.1.3.3). `access_token` is the ID
/// token itself: it is the only bearer credential (the `UserService` and the kube-apiserver
/// both verify it as an ID token).
#[derive(Debug, Serialize)]
struct TokenResponse {
    access_token: String,
    token_type: &'static str,
    expires_in: i64,
    id_token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
    scope: &'static str,
}

fn form_body(headers: &HeaderMap, body: &[u8]) -> Result<Params, OAuthError> {
    if !request::is_form(headers) {
        return Err(OAuthError::invalid_request(
            "the body must be application/x-www-form-urlencoded",
        ));
    }
    Params::parse(body).map_err(|e| OAuthError::invalid_request(e.to_string()))
}

pub(crate) fn param<'a>(params: &'a Params, name: &'static str) -> Result<Option<&'a str>, OAuthError> {
    params
        .get(name)
        .map_err(|e| OAuthError::invalid_request(e.to_string()))
}

fn required<'a>(params: &'a Params, name: &'static str) -> Result<&'a str, OAuthError> {
    param(params, name)?.ok_or_else(|| OAuthError::invalid_request(format!("{name}: required")))
}

/// Reads and checks `client_id` (public clients: the id is the only authentication).
pub(crate) fn client(params: &Params) -> Result<Client, OAuthError> {
    param(params, "client_id")?
        .and_then(Client::from_id)
        .ok_or_else(OAuthError::invalid_client)
}

/// The request's token in the source's failure bucket shared by the token and revocation
/// endpoints: reserved, or a refusal with `slow_down` when the bucket is empty (before the
/// grant's work); for a request whose artifact `verified` (its MAC checked), an exempt token the
/// bucket never refuses, so garbage from a shared address cannot deny the valid requests beside
/// it.
pub(crate) fn reserve_source(
    issuer: &Issuer,
    source: std::net::IpAddr,
    verified: bool,
) -> Result<SourceToken<'_>, OAuthError> {
    let now = issuer.now();
    if verified {
        return Ok(SourceToken::exempt(&issuer.token_buckets, source, now));
    }
    SourceToken::reserve(&issuer.token_buckets, source, now).map_err(|wait| {
        issuer.metrics.backoff_hit("source_rate");
        OAuthError::slow_down(wait)
    })
}

/// A grant's artifact whose MAC [`verified_artifact`] checked.
enum Verified {
    /// An authorization code.
    Code,
    /// A refresh token, with its claims: the grant goes on from them without a second check.
    Refresh(RefreshClaims),
}

/// The grant's artifact (the refresh token or the code) if it verifies now: HS256 under a live
/// key of this issuer, the right `typ`, `iss` and `exp`. One HMAC check, made before the source's
/// bucket is consulted; what else the grant needs is checked after.
fn verified_artifact(issuer: &Issuer, params: &Params) -> Option<Verified> {
    let keys = issuer.keys().load()?;
    let (iss, now) = (issuer.issuer(), issuer.now());
    match (
        param(params, "grant_type"),
        param(params, "refresh_token"),
        param(params, "code"),
    ) {
        (Ok(Some("refresh_token")), Ok(Some(token)), _) => {
            tokens::verify_artifact::<RefreshClaims>(&keys, token, iss, now)
                .ok()
                .map(Verified::Refresh)
        }
        (Ok(Some("authorization_code")), _, Ok(Some(code))) => {
            tokens::verify_artifact::<CodeClaims>(&keys, code, iss, now)
                .ok()
                .map(|_| Verified::Code)
        }
        _ => None,
    }
}

/// Whether an answer counts against its source: the client's fault (4xx), except a refusal by a
/// limit, which is no new attempt.
pub(crate) fn is_client_failure(e: &OAuthError) -> bool {
    e.status.is_client_error() && e.status != axum::http::StatusCode::TOO_MANY_REQUESTS
}

fn store_error(e: StoreError) -> OAuthError {
    match e {
        StoreError::Corrupt { user, .. } => {
            tracing::error!(user = %user, "credentials entry unreadable");
            OAuthError::server_error("the user's stored credentials are unreadable")
        }
        StoreError::Busy(_) => OAuthError::busy("the queue of this user's session updates", 1),
        StoreError::Full(reason) => {
            tracing::error!(%reason, "the credentials store is full; the session was not saved");
            OAuthError::store_full()
        }
        e => {
            tracing::warn!(error = %e, "user store unavailable");
            OAuthError::unavailable("the user store")
        }
    }
}

pub(crate) async fn token(
    State(issuer): State<Arc<Issuer>>,
    Source(source): Source,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // The body is at most `MAX_BODY_BYTES` and parsing it is cheap: it is read before the
    // source's bucket so that a grant whose artifact verifies is not refused by it.
    let params = body
        .map_err(|rejection| OAuthError::unreadable_body(&rejection))
        .and_then(|body| form_body(&headers, &body));
    let verified = params.as_ref().ok().and_then(|p| verified_artifact(&issuer, p));
    let reserved = match reserve_source(&issuer, source, verified.is_some()) {
        Ok(reserved) => reserved,
        Err(e) => return e.into_response(),
    };
    let result = async {
        let params = params?;
        match required(&params, "grant_type")? {
            "authorization_code" => code_grant(&issuer, &params).await,
            "refresh_token" => {
                let verified = match verified {
                    Some(Verified::Refresh(claims)) => Some(claims),
                    _ => None,
                };
                refresh::refresh_grant(&issuer, &params, verified).await
            }
            _ => Err(OAuthError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "grant_type: must be authorization_code or refresh_token",
            )),
        }
    }
    .await;
    if let Err(e) = &result
        && is_client_failure(e)
    {
        reserved.charge();
    }
    match result {
        Ok(body) => {
            let mut response = Json(body).into_response();
            let h = response.headers_mut();
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
            response
        }
        Err(e) => e.into_response(),
    }
}

fn keys(issuer: &Issuer) -> Result<Arc<LoadedKeys>, OAuthError> {
    issuer
        .keys()
        .load()
        .ok_or_else(|| OAuthError::unavailable("the signing keys"))
}

/// The keys for a grant that will sign: refused with 503 before anything is written when there
/// is no active RSA or HMAC key at `now` (a replica whose clock is behind the keys' `activeFrom`),
/// so a code is not consumed and a family not rotated by an answer that cannot be signed.
fn signing_keys(issuer: &Issuer, now: Timestamp) -> Result<Arc<LoadedKeys>, OAuthError> {
    let keys = keys(issuer)?;
    if keys.signing_key(now).is_none() || keys.signing_hmac(now).is_none() {
        return Err(OAuthError::unavailable("the signing keys"));
    }
    Ok(keys)
}

/// The user for a grant: present and enabled, else `invalid_grant`.
async fn live_user(issuer: &Issuer, name: &str) -> Result<StoredUser, OAuthError> {
    match issuer.store.get_user(name).await.map_err(store_error)? {
        None => Err(OAuthError::invalid_grant("the user no longer exists")),
        Some(u) if u.disabled => Err(OAuthError::invalid_grant("the user is disabled")),
        Some(u) => Ok(u),
    }
}

fn id_token(
    issuer: &Issuer,
    keys: &LoadedKeys,
    user: &StoredUser,
    audience: &str,
    sign_in: Option<(String, i64)>,
    amr: Vec<String>,
    now: Timestamp,
) -> Result<(String, i64), OAuthError> {
    let ttl = issuer.settings.get().token_ttl.as_secs();
    let iat = tokens::unix_seconds(now);
    let claims = IdTokenClaims {
        iss: issuer.issuer().to_owned(),
        sub: user.name.clone(),
        aud: audience.to_owned(),
        exp: iat + ttl,
        iat,
        auth_time: sign_in.as_ref().map(|(_, at)| *at),
        nonce: sign_in.map(|(nonce, _)| nonce),
        groups: user.roles.clone(),
        amr,
    };
    let token = tokens::sign_id_token(keys, &claims, now).map_err(|e| {
        tracing::error!(error = %e, "cannot sign an ID token");
        OAuthError::unavailable("the signing key")
    })?;
    Ok((token, ttl))
}

/// The refresh token of generation `generation` of `family`, signed with the HMAC key of the
/// instant the generation was made (deterministic: the grace window re-creates it exactly).
fn refresh_token(
    issuer: &Issuer,
    keys: &LoadedKeys,
    sub: &str,
    fam: &str,
    family: &Family,
    now: Timestamp,
) -> Result<String, OAuthError> {
    tokens::sign_refresh(keys, issuer.issuer(), sub, fam, family, now).map_err(|e| {
        tracing::error!(error = %e, "cannot sign a refresh token");
        OAuthError::unavailable("the signing key")
    })
}

async fn code_grant(issuer: &Issuer, params: &Params) -> Result<TokenResponse, OAuthError> {
    let client = client(params)?;
    let code = required(params, "code")?;
    let redirect_uri = required(params, "redirect_uri")?;
    // Every code carries a challenge, so a request without its verifier is a failed PKCE
    // verification of that code (RFC 7636 4.6), not a malformed request.
    let verifier = param(params, "code_verifier")?;
    let now = issuer.now();
    let keys = signing_keys(issuer, now)?;
    let claims = tokens::verify_artifact::<CodeClaims>(&keys, code, issuer.issuer(), now)
        .map_err(|e| OAuthError::invalid_grant(format!("code: {e}")))?;
    if claims.client_id != client.id() {
        return Err(OAuthError::invalid_grant("code: issued to another client"));
    }
    if claims.redirect_uri != redirect_uri {
        return Err(OAuthError::invalid_grant(
            "redirect_uri: differs from the authorization request",
        ));
    }
    let verifier = verifier.ok_or_else(|| {
        OAuthError::invalid_grant("code_verifier: required, the code was issued with a code_challenge (PKCE)")
    })?;
    request::check_verifier(verifier, &claims.code_challenge)
        .map_err(|e| OAuthError::invalid_grant(e.to_string()))?;

    claim_and_redeem(issuer, &keys, &claims, client, now)
        .await
        .map(|(response, _)| response)
}

/// The code grant once its code verified: the code claimed in the ledger (a replay is told as
/// such whatever the budget), held to the user's session starts when it starts a session, then
/// redeemed. Returns the response and the family started (if any).
async fn claim_and_redeem(
    issuer: &Issuer,
    keys: &LoadedKeys,
    claims: &CodeClaims,
    client: Client,
    now: Timestamp,
) -> Result<(TokenResponse, Option<String>), OAuthError> {
    let claim = lock(&issuer.codes).claim(&claims.jti, claims.exp, now);
    match claim {
        CodeClaim::First => {}
        CodeClaim::Full => return Err(OAuthError::unavailable("the code ledger")),
        CodeClaim::Replay { revoke } => {
            issuer.metrics.code_replays.inc();
            // Named by the first replay only: later ones read nothing.
            if let Some((user, fam)) = revoke
                && !revoke_family(issuer, &user, &fam).await
            {
                lock(&issuer.codes).revocation_failed(&claims.jti, fam);
            }
            return Err(OAuthError::invalid_grant("code: already used"));
        }
    }
    // A code for a session starts a refresh family: a write of the user's credentials and a new
    // family with a whole write cap. Past the user's session starts the claim is released, so the
    // code can be redeemed once the budget refills (it lives 60 s).
    if claims.offline_access
        && let Err(wait) = issuer.reserve_session_start(&claims.sub, now)
    {
        lock(&issuer.codes).release(&claims.jti);
        return Err(OAuthError::slow_down(wait));
    }
    let mut began = false;
    let result = redeem(issuer, keys, claims, client, now, &mut began).await;
    if claims.offline_access && !began {
        // No family's write began: the budget is not spent.
        issuer.refund_session_start(&claims.sub, now);
    }
    match &result {
        Ok((_, family)) => {
            let replayed = lock(&issuer.codes).complete(&claims.jti, &claims.sub, family.clone());
            if replayed
                && let Some(fam) = family
                && !revoke_family(issuer, &claims.sub, fam).await
            {
                lock(&issuer.codes).revocation_failed(&claims.jti, fam.clone());
            }
        }
        Err(e) if e.error == "temporarily_unavailable" => lock(&issuer.codes).release(&claims.jti),
        Err(_) => {
            lock(&issuer.codes).complete(&claims.jti, &claims.sub, None);
        }
    }
    result
}

/// The second half of the code grant, after the code was claimed: user, credentials, family,
/// tokens. Returns the response and the family started (if any); `began` tells whether the
/// family's write began. A store failure once it began is a `server_error`, not
/// `temporarily_unavailable`: the family may have been stored though its answer was lost, so
/// the code is not released for another try (each would start another family).
async fn redeem(
    issuer: &Issuer,
    keys: &LoadedKeys,
    code: &CodeClaims,
    client: Client,
    now: Timestamp,
    began: &mut bool,
) -> Result<(TokenResponse, Option<String>), OAuthError> {
    let user = live_user(issuer, &code.sub).await?;
    let policy = issuer.settings.get().second_factor.clone();
    let session_start =
        Timestamp::from_second(code.iat).map_err(|_| OAuthError::invalid_grant("code: bad iat"))?;
    let check = |entry: Option<&CredentialsEntry>| -> Result<CredentialsEntry, OAuthError> {
        let entry = entry.ok_or_else(|| OAuthError::invalid_grant("the user has no password any more"))?;
        if !entry.accepts_issued_at(session_start) {
            return Err(OAuthError::invalid_grant(
                "the sign-in predates the user's notBefore",
            ));
        }
        if entry.must_change && code.audience == AUD_KUBE {
            return Err(OAuthError::invalid_grant(
                "change your password first: no ichor-kube token is issued until then",
            ));
        }
        if token_decision(&policy, &user.roles, entry.needs_second_factor(), &code.audience)
            != TokenDecision::Allowed
        {
            return Err(OAuthError::invalid_grant(ENROL_FIRST));
        }
        if entry.needs_second_factor() && !code.amr.iter().any(|v| v == AMR_MFA) {
            // Only a code from before the user enrolled can lack it: sign in again.
            return Err(OAuthError::invalid_grant(
                "the user has a second factor and the sign-in did not use it: sign in again",
            ));
        }
        Ok(entry.clone())
    };
    let (refresh, family_id) = if code.offline_access {
        let fam = random_id().map_err(|_| OAuthError::server_error("no randomness for a family id"))?;
        let lifetime = issuer.settings.get().refresh_lifetime.as_signed();
        let (entry, displaced) = modify_credentials(issuer.store.as_ref(), &code.sub, |current| {
            *began = false;
            let entry = check(current)?;
            let displaced = entry.families_displaced_at(now);
            let amr: Vec<&str> = code.amr.iter().map(String::as_str).collect();
            let next = entry
                .start_family_with_amr(&fam, client.id(), &code.audience, &amr, now, lifetime)
                .map_err(|e| OAuthError::server_error(e.to_string()))?;
            *began = true;
            Ok::<_, OAuthError>(Change::Put(next.clone(), (next, displaced)))
        })
        .await
        .map_err(|e| {
            if *began && e.error == "temporarily_unavailable" {
                tracing::warn!(user = %code.sub, error = %e.description, "a new session's write failed after it began");
                OAuthError::server_error(
                    "the session may have been stored, but the store's answer was lost: sign in again",
                )
            } else {
                e
            }
        })?;
        issuer.store.invalidate(&code.sub);
        for ended in &displaced {
            issuer.metrics.refresh_families_evicted.inc();
            tracing::info!(
                user = %code.sub,
                family = %ended,
                "the user had the most refresh families; the oldest session was ended to start a new one"
            );
        }
        let family = entry
            .family(&fam)
            .ok_or_else(|| OAuthError::server_error("the new family was not stored"))?;
        (
            Some(refresh_token(issuer, keys, &code.sub, &fam, family, now)?),
            Some(fam),
        )
    } else {
        let (entry, _) = issuer
            .store
            .read_credentials(&code.sub)
            .await
            .map_err(store_error)?;
        check(entry.as_ref())?;
        (None, None)
    };
    // The code is minted the moment the password is verified: its `iat` is the sign-in's time.
    let sign_in = Some((code.nonce.clone(), code.iat));
    let amr = if code.amr.is_empty() {
        vec![AMR_PASSWORD.to_owned()]
    } else {
        code.amr.clone()
    };
    let (id_token, ttl) = id_token(issuer, keys, &user, &code.audience, sign_in, amr, now)?;
    issuer.metrics.issued("authorization_code", &code.audience);
    Ok((
        TokenResponse {
            access_token: id_token.clone(),
            token_type: "Bearer",
            expires_in: ttl,
            id_token,
            scope: if refresh.is_some() {
                "openid offline_access"
            } else {
                "openid"
            },
            refresh_token: refresh,
        },
        family_id,
    ))
}

impl From<StoreError> for OAuthError {
    fn from(e: StoreError) -> Self {
        store_error(e)
    }
}

/// Removes a family (code replay, reuse); failures are logged, the caller refuses anyway.
/// Returns whether the store was reached (the family is gone, or was already).
pub(crate) async fn revoke_family(issuer: &Issuer, user: &str, fam: &str) -> bool {
    let result = modify_credentials(issuer.store.as_ref(), user, |current| {
        Ok::<_, StoreError>(match current.and_then(|c| c.revoke_family(fam)) {
            Some(next) => Change::Put(next, ()),
            None => Change::Keep(()),
        })
    })
    .await;
    match result {
        Ok(()) => {
            lock(&issuer.gone_families).insert(fam);
            true
        }
        Err(e) => {
            tracing::warn!(user = %user, error = %e, "could not revoke a refresh family");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::{StoreError, store_error};

    #[test]
    fn a_full_store_is_a_server_error_without_retry_and_an_unreachable_one_is_transient() {
        let full = store_error(StoreError::Full(
            "Secret ichor-system/ichor-user-credentials …".to_owned(),
        ));
        assert_eq!(full.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(full.error, "server_error");
        assert_eq!(full.retry_after, None, "no Retry-After: retrying does not help");
        assert!(
            full.description.contains("credentials store is full"),
            "{}",
            full.description
        );
        assert!(
            !full.description.contains("ichor-user-credentials"),
            "the store's details stay in the log: {}",
            full.description
        );

        let down = store_error(StoreError::Unavailable("connection refused".to_owned()));
        assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(down.error, "temporarily_unavailable");
        assert!(down.retry_after.is_some());
    }
}

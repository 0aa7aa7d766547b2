//! `/oidc/login`: the sign-in page (GET, behind `?ticket=`) and the sign-in itself (POST, a form
//! or JSON), which turns a valid ticket and the right password into a 60-second code.
//!
//! Order of the POST: the ticket (cheap, refuses forged requests), the device cookie (one HMAC
//! check, see [`super::devices`]), the per-source failure bucket (a token reserved, kept only
//! when the password turns out wrong or the name is blocked; a known device is not refused by
//! an empty one), the per-user back-off (the attempt is reserved before anything is verified;
//! a known device has a budget of its own, [`super::limits::backoff_key`]), the user and the
//! credentials entry (read together, also for unknown users so the store's timing says
//! nothing), which confirm the device cookie or void it (set before the entry's `notBefore`,
//! or no entry: the limits are taken again as for a sign-in without one, and the presentation
//! is a failure of that device), one argon2id verification (the dummy hash when there is no user or no password; in
//! the known devices' lane when the request carries a device cookie of that user, see
//! [`super::devices`]), then the user's state (disabled, must change, must enrol a second factor
//! the installation's policy requires) — only after a correct password, so those answers reveal
//! nothing to someone without it. A successful sign-in sets the device cookie.

use std::sync::{Arc, Mutex};

use axum::{
    Json,
    body::Bytes,
    extract::State,
    extract::rejection::BytesRejection,
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use ichor_renderers::auth::{
    Password, UserName,
    second_factor_policy::{MUST_ENROL, TokenDecision, token_decision},
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{
    Issuer, Source,
    authorize::{see_other, wants_json, with_query},
    devices,
    errors::OAuthError,
    factor,
    limits::{Admission, AttemptOutcome, SourceToken, UserBackoff, backoff_key},
    lock, page,
    passwords::{self, CheckError, Checked},
    request::{AUD_KUBE, Params},
};
use crate::{
    store::{Change, StoreError, modify_credentials},
    tokens::{self, CodeClaims, TicketClaims},
};

/// The generic refusal: the same for an unknown user and a wrong password.
pub const WRONG_CREDENTIALS: &str = "The user name or password is incorrect.";
/// After a correct password: the account is disabled.
pub const DISABLED: &str = "This account is disabled. Ask an administrator to enable it.";
/// After a correct password: no Kubernetes token until the password is changed.
pub const MUST_CHANGE: &str = "You must change your password before you can get a Kubernetes token. \
                               Sign in to the Ichor web UI, change your password, then sign in here again.";
/// The ticket is missing, forged or older than 5 minutes.
pub const BAD_TICKET: &str = "This sign-in request has expired or is invalid.";
/// The longest user name field accepted (longer ones are unknown users).
const MAX_USERNAME_FIELD: usize = 253;
/// The longest password field read (longer ones cost a dummy hash and are refused).
const MAX_PASSWORD_FIELD: usize = 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLogin {
    ticket: String,
    username: String,
    password: String,
}

#[derive(Serialize)]
struct RedirectBody {
    redirect_uri: String,
}

/// Why a sign-in was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    BadTicket,
    BadRequest(String),
    Limited { retry_after: i64 },
    Busy { retry_after: u64 },
    WrongCredentials,
    Disabled,
    MustChange,
    MustEnrol,
    Unavailable,
}

pub(crate) async fn page(State(issuer): State<Arc<Issuer>>, uri: Uri) -> Response {
    let ticket = Params::parse(uri.query().unwrap_or("").as_bytes())
        .ok()
        .and_then(|p| p.get("ticket").ok().flatten().map(str::to_owned));
    let Some(ticket) = ticket else {
        return page::html(StatusCode::BAD_REQUEST, page::message(BAD_TICKET));
    };
    let Some(keys) = issuer.keys().load() else {
        return page::html(
            StatusCode::SERVICE_UNAVAILABLE,
            page::message("Sign-in is temporarily unavailable. Try again in a moment."),
        );
    };
    match tokens::verify_artifact::<TicketClaims>(&keys, &ticket, issuer.issuer(), issuer.now()) {
        Ok(claims) => {
            let form = page::Form {
                ticket: &ticket,
                client_id: &claims.client_id,
                redirect_uri: &claims.redirect_uri,
                username: "",
                error: None,
            };
            page::sign_in(issuer.ui_files(), StatusCode::OK, &form).await
        }
        Err(_) => page::html(StatusCode::BAD_REQUEST, page::message(BAD_TICKET)),
    }
}

pub(super) fn is_json_body(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

/// The three fields of the POST, from a JSON body or a form.
fn fields(headers: &HeaderMap, body: &[u8]) -> Result<(String, String, Password), String> {
    if is_json_body(headers) {
        let login: JsonLogin = serde_json::from_slice(body)
            .map_err(|_| "the body must be {ticket, username, password}".to_owned())?;
        return Ok((login.ticket, login.username, Password::new(login.password)));
    }
    let params = Params::parse(body).map_err(|e| e.to_string())?;
    let get = |n: &'static str| {
        params
            .get(n)
            .map_err(|e| e.to_string())
            .map(|v| v.unwrap_or("").to_owned())
    };
    Ok((get("ticket")?, get("username")?, Password::new(get("password")?)))
}

pub(crate) async fn submit(
    State(issuer): State<Arc<Issuer>>,
    Source(source): Source,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let json = is_json_body(&headers) || wants_json(&headers);
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let message = OAuthError::unreadable_body(&rejection).description;
            return respond_failure(&issuer, json, None, "", "", Failure::BadRequest(message)).await;
        }
    };
    let (ticket, username, password) = match fields(&headers, &body) {
        Ok(f) => f,
        Err(m) => return respond_failure(&issuer, json, None, "", "", Failure::BadRequest(m)).await,
    };
    let claims = issuer.keys().load().and_then(|keys| {
        tokens::verify_artifact::<TicketClaims>(&keys, &ticket, issuer.issuer(), issuer.now()).ok()
    });
    let Some(claims) = claims else {
        return respond_failure(&issuer, json, None, "", "", Failure::BadTicket).await;
    };
    match sign_in(&issuer, source, &headers, &claims, &username, password).await {
        Ok(SignedIn::Redirect(redirect, device_cookie)) => redirect_response(json, redirect, device_cookie),
        Ok(SignedIn::Factor(pending)) => factor::ask(issuer.ui_files(), json, &claims, &pending, None).await,
        Err(failure) => respond_failure(&issuer, json, Some(&claims), &ticket, &username, failure).await,
    }
}

/// The answer of a completed sign-in: the redirect (JSON for the UI's card, else a 303) with the
/// device cookie.
pub(super) fn redirect_response(
    json: bool,
    redirect: String,
    device_cookie: Option<HeaderValue>,
) -> Response {
    let mut response = if json {
        let mut response = Json(RedirectBody {
            redirect_uri: redirect,
        })
        .into_response();
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    } else {
        see_other(&redirect)
    };
    if let Some(cookie) = device_cookie {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// A verified password's outcome.
enum SignedIn {
    /// Done: the client's redirect URI with the code, and the device cookie.
    Redirect(String, Option<HeaderValue>),
    /// The user has a second factor: its step comes next.
    Factor(factor::Pending),
}

/// Releases a back-off reservation when dropped (a cancelled request counts nothing).
pub(super) struct Reservation {
    pub(super) backoff: Arc<Mutex<UserBackoff>>,
    pub(super) key: String,
    pub(super) outcome: AttemptOutcome,
    pub(super) at: Timestamp,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        lock(&self.backoff).finish(&self.key, self.outcome, self.at);
    }
}

/// The opening of every sign-in attempt (the password step and the second step alike): a token
/// of the source's failure bucket (a known device, `known_device`, is exempt once the bucket is
/// empty), then the replica's back-off of `key`. A probe of a blocked key costs its source a
/// token like a wrong answer: else one address could keep a name blocked for ever at no cost.
/// Returns the token and the reservation the attempt's outcome is recorded in, or how many
/// seconds to wait.
pub(super) fn admit_attempt(
    issuer: &Issuer,
    source: std::net::IpAddr,
    known_device: bool,
    key: String,
    now: Timestamp,
) -> Result<(SourceToken<'_>, Reservation), i64> {
    let source_token = match SourceToken::reserve(&issuer.login_buckets, source, now) {
        Ok(token) => token,
        Err(_) if known_device => SourceToken::exempt(&issuer.login_buckets, source, now),
        Err(wait) => {
            issuer.metrics.backoff_hit("source_rate");
            return Err(wait.as_secs());
        }
    };
    if let Admission::Blocked { retry_after } = lock(&issuer.backoff).admit(&key, now) {
        source_token.charge();
        issuer.metrics.backoff_hit("user_backoff");
        return Err(retry_after.as_secs().max(1));
    }
    let reservation = Reservation {
        backoff: Arc::clone(&issuer.backoff),
        key,
        outcome: AttemptOutcome::Abandoned,
        at: now,
    };
    Ok((source_token, reservation))
}

async fn sign_in(
    issuer: &Arc<Issuer>,
    source: std::net::IpAddr,
    headers: &HeaderMap,
    ticket: &TicketClaims,
    username: &str,
    password: Password,
) -> Result<SignedIn, Failure> {
    let now = issuer.now();
    let name = (username.len() <= MAX_USERNAME_FIELD)
        .then(|| UserName::parse(username).ok())
        .flatten();
    // A device that signed in as this very user before (one HMAC check) is not refused by its
    // address's emptied bucket and has a back-off budget of its own; its failures still count.
    // Provisionally: the credentials entry read below confirms the cookie or voids it.
    let presented = devices::device_of(issuer, headers, name.as_ref());
    let device = presented.as_ref().map(|p| p.dev.clone());
    let key = name.as_ref().map_or_else(
        || "\u{0}invalid".to_owned(),
        |n| backoff_key(n.as_str(), device.as_deref()),
    );
    let (mut source_token, mut reservation) = admit_attempt(issuer, source, device.is_some(), key, now)
        .map_err(|retry_after| Failure::Limited { retry_after })?;

    // A cookie's lane place is taken only once the entry confirms the cookie (below). Until then
    // a request is shed before the store read when it can only wait in the shared queue and that
    // is full: without a cookie, or with one while every lane place is taken.
    let lane_possible = device.is_some() && name.is_some() && !issuer.devices.full();
    if !lane_possible && let Some(retry_after) = issuer.hash_gate.busy() {
        // Not an attempt: the reservation is dropped unused and counts nothing.
        issuer.metrics.backoff_hit("hash_queue_full");
        return Err(Failure::Busy { retry_after });
    }
    let (user, entry) = match &name {
        Some(name) => {
            let (user, creds) = tokio::join!(
                issuer.store.get_user(name.as_str()),
                issuer.store.read_credentials(name.as_str())
            );
            let user = user.map_err(|e| unavailable(&e))?;
            let entry = match creds {
                Ok((entry, _)) => entry,
                Err(StoreError::Corrupt { .. }) => {
                    tracing::warn!(user = %name.as_str(), "the credentials entry is unreadable; refusing sign-in");
                    None
                }
                Err(e) => return Err(unavailable(&e)),
            };
            (user, entry)
        }
        None => (None, None),
    };
    if let Some(presented) = &presented
        && !presented.confirmed_by(user.as_ref(), entry.as_ref())
    {
        // A cookie set before the entry's notBefore (a password reset, a revocation, a new
        // user of the name since), of a user with no entry, or of a user that is gone, being
        // deleted or disabled (its entry may outlive it until the controller's clean-up): no
        // known device. Its presentation
        // is a failure of that device (so a stale cookie cannot make the store be read more
        // often than a device's back-off allows), and the attempt starts again, here, as one
        // without a cookie: the source's bucket, the name's back-off, the shared queue.
        reservation.outcome = AttemptOutcome::Failure;
        // The provisional token is given back (a reserved one) before the bucket is asked again.
        let provisional = std::mem::replace(
            &mut source_token,
            SourceToken::exempt(&issuer.login_buckets, source, now),
        );
        drop(provisional);
        source_token = match SourceToken::reserve(&issuer.login_buckets, source, now) {
            Ok(token) => token,
            Err(wait) => {
                issuer.metrics.backoff_hit("source_rate");
                return Err(Failure::Limited {
                    retry_after: wait.as_secs(),
                });
            }
        };
        let key = name
            .as_ref()
            .map_or_else(|| "\u{0}invalid".to_owned(), |n| backoff_key(n.as_str(), None));
        if let Admission::Blocked { retry_after } = lock(&issuer.backoff).admit(&key, now) {
            source_token.charge();
            issuer.metrics.backoff_hit("user_backoff");
            return Err(Failure::Limited {
                retry_after: retry_after.as_secs().max(1),
            });
        }
        reservation = Reservation {
            backoff: Arc::clone(&issuer.backoff),
            key,
            outcome: AttemptOutcome::Abandoned,
            at: now,
        };
    }
    let confirmed = presented.filter(|p| p.confirmed_by(user.as_ref(), entry.as_ref()));
    let known = match (confirmed, &name) {
        (Some(presented), Some(name)) => Some(devices::known(issuer, name, presented.dev)),
        _ => None,
    };
    let (gate, borrow) = match known.as_ref().and_then(|k| k.place.as_ref()) {
        Some(place) => (place.gate(), Some(&issuer.hash_gate)),
        None => (&issuer.hash_gate, None),
    };
    if lane_possible
        && borrow.is_none()
        && let Some(retry_after) = issuer.hash_gate.busy()
    {
        // No lane place after all (a voided cookie, the lane filled meanwhile, the user's
        // other sign-in in it): the shared queue, shed when full as before the store read.
        issuer.metrics.backoff_hit("hash_queue_full");
        return Err(Failure::Busy { retry_after });
    }
    let password = if password.len_bytes() > MAX_PASSWORD_FIELD {
        Password::new("")
    } else {
        password
    };
    let phc = match (&user, &entry) {
        (Some(_), Some(entry)) => Some(entry.hash.clone()),
        _ => None,
    };
    let checked = passwords::check(gate, borrow, username, password, phc.clone())
        .await
        .map_err(|e| match e {
            // Not an attempt: the reservation is dropped unused and counts nothing.
            CheckError::Busy { retry_after } => {
                issuer.metrics.backoff_hit("hash_queue_full");
                Failure::Busy { retry_after }
            }
            CheckError::Internal(_) => {
                tracing::error!(error = %e, "password check failed");
                Failure::Unavailable
            }
        })?;
    // The lane place is given back as soon as the check is done.
    let device = known.map(|k| k.dev);
    let (Checked::Valid { rehash }, Some(user), Some(entry), Some(name)) = (checked, user, entry, name)
    else {
        source_token.charge();
        reservation.outcome = AttemptOutcome::Failure;
        reservation.at = issuer.now();
        issuer.metrics.login_failure("invalid_credentials");
        return Err(Failure::WrongCredentials);
    };
    reservation.outcome = AttemptOutcome::Success;
    drop(reservation);

    if user.disabled {
        issuer.metrics.login_failure("disabled");
        return Err(Failure::Disabled);
    }
    if entry.must_change && ticket.audience == AUD_KUBE {
        issuer.metrics.login_failure("must_change");
        return Err(Failure::MustChange);
    }
    let policy = &issuer.settings.get().second_factor;
    if token_decision(policy, &user.roles, entry.needs_second_factor(), &ticket.audience)
        == TokenDecision::MustEnrol
    {
        issuer.metrics.login_failure("must_enrol");
        return Err(Failure::MustEnrol);
    }
    if let Some(new_hash) = rehash {
        let old = phc.unwrap_or_default();
        let result = modify_credentials(issuer.store.as_ref(), name.as_str(), |current| {
            Ok::<_, StoreError>(match current {
                Some(c) if c.hash == old => Change::Put(c.with_rehashed_password(new_hash.clone()), ()),
                _ => Change::Keep(()),
            })
        })
        .await;
        if let Err(e) = result {
            tracing::warn!(user = %name.as_str(), error = %e, "storing the rehashed password failed");
        }
    }

    if entry.needs_second_factor() {
        // No code yet: the second step, with what it needs in a ticket of its own.
        let pending =
            factor::pending(issuer, ticket, name.as_str(), &entry, device).ok_or(Failure::Unavailable)?;
        return Ok(SignedIn::Factor(pending));
    }
    let (redirect, cookie) = authorization_redirect(issuer, ticket, name.as_str(), Vec::new(), device)
        .ok_or(Failure::Unavailable)?;
    Ok(SignedIn::Redirect(redirect, cookie))
}

/// The end of a successful sign-in of `user` (`amr` empty for the password alone): a 60-second
/// code for the request `ticket` in the client's redirect URI, and the device cookie (the known
/// device's id kept). `None` (logged) when no code can be signed.
pub(super) fn authorization_redirect(
    issuer: &Issuer,
    ticket: &TicketClaims,
    user: &str,
    amr: Vec<String>,
    device: Option<String>,
) -> Option<(String, Option<HeaderValue>)> {
    let keys = issuer.keys().load()?;
    let now = issuer.now();
    let iat = tokens::unix_seconds(now);
    let code = CodeClaims {
        iss: issuer.issuer().to_owned(),
        jti: super::token::random_id().ok()?,
        client_id: ticket.client_id.clone(),
        redirect_uri: ticket.redirect_uri.clone(),
        sub: user.to_owned(),
        nonce: ticket.nonce.clone(),
        code_challenge: ticket.code_challenge.clone(),
        offline_access: ticket.offline_access,
        audience: ticket.audience.clone(),
        amr,
        iat,
        exp: iat + tokens::CODE_TTL.as_secs(),
    };
    let code = tokens::sign_artifact(&keys, &code, now, now)
        .map_err(|e| tracing::error!(error = %e, "cannot sign an authorization code"))
        .ok()?;
    let device_cookie = devices::cookie_after_sign_in(issuer, user, device);
    let redirect = with_query(
        &ticket.redirect_uri,
        &[
            ("code", &code),
            ("state", &ticket.state),
            ("iss", issuer.issuer()),
        ],
    );
    Some((redirect, device_cookie))
}

fn unavailable(e: &StoreError) -> Failure {
    tracing::warn!(error = %e, "user store unavailable during sign-in");
    Failure::Unavailable
}

async fn respond_failure(
    issuer: &Issuer,
    json: bool,
    ticket: Option<&TicketClaims>,
    raw_ticket: &str,
    username: &str,
    failure: Failure,
) -> Response {
    if json {
        let e = match failure {
            Failure::BadTicket => OAuthError::invalid_request(BAD_TICKET),
            Failure::BadRequest(m) => OAuthError::invalid_request(m),
            Failure::Limited { retry_after } => {
                OAuthError::slow_down(jiff::SignedDuration::from_secs(retry_after))
            }
            Failure::WrongCredentials => {
                OAuthError::new(StatusCode::UNAUTHORIZED, "access_denied", WRONG_CREDENTIALS)
            }
            Failure::Disabled => OAuthError::new(StatusCode::FORBIDDEN, "access_denied", DISABLED),
            Failure::MustChange => OAuthError::new(StatusCode::FORBIDDEN, "access_denied", MUST_CHANGE),
            Failure::MustEnrol => OAuthError::new(StatusCode::FORBIDDEN, "access_denied", MUST_ENROL),
            Failure::Busy { retry_after } => OAuthError::busy("sign-in", retry_after),
            Failure::Unavailable => OAuthError::unavailable("sign-in"),
        };
        return e.into_response();
    }
    // The sign-in page again with the refusal: its key in the UI's catalogs (the card says it in
    // the user's language) and the English sentence of the no-script form.
    let says = |key: &'static str, seconds: Option<u64>, text: String| page::Refusal { key, seconds, text };
    let (claims, status, refusal, retry_after) = match (failure, ticket) {
        (Failure::Disabled, Some(t)) => return deny_to_client(issuer, t, DISABLED),
        (Failure::MustChange, Some(t)) => return deny_to_client(issuer, t, MUST_CHANGE),
        (Failure::MustEnrol, Some(t)) => return deny_to_client(issuer, t, MUST_ENROL),
        (Failure::WrongCredentials, Some(t)) => (
            t,
            StatusCode::UNAUTHORIZED,
            says("wrongCredentials", None, WRONG_CREDENTIALS.to_owned()),
            None,
        ),
        (Failure::Limited { retry_after }, Some(t)) => {
            let seconds = u64::try_from(retry_after).unwrap_or(1).max(1);
            (
                t,
                StatusCode::TOO_MANY_REQUESTS,
                says(
                    "tooManyAttempts",
                    Some(seconds),
                    format!("Too many sign-in attempts. Wait {seconds} seconds and try again."),
                ),
                Some(seconds),
            )
        }
        (Failure::Busy { retry_after }, Some(t)) => {
            let seconds = retry_after.max(1);
            (
                t,
                StatusCode::SERVICE_UNAVAILABLE,
                says(
                    "signInBusy",
                    Some(seconds),
                    format!("Sign-in is busy right now. Wait {seconds} seconds and try again."),
                ),
                Some(seconds),
            )
        }
        (Failure::Unavailable, Some(t)) => (
            t,
            StatusCode::SERVICE_UNAVAILABLE,
            says(
                "signInUnavailable",
                None,
                "Sign-in is temporarily unavailable. Try again in a moment.".to_owned(),
            ),
            None,
        ),
        (Failure::BadRequest(m), _) => return page::html(StatusCode::BAD_REQUEST, page::message(&m)),
        _ => return page::html(StatusCode::BAD_REQUEST, page::message(BAD_TICKET)),
    };
    let form = page::Form {
        ticket: raw_ticket,
        client_id: &claims.client_id,
        redirect_uri: &claims.redirect_uri,
        username,
        error: Some(&refusal),
    };
    let mut response = page::sign_in(issuer.ui_files(), status, &form).await;
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// RFC 6749 4.1.2.1: `access_denied` back to the client, which shows or prints it.
fn deny_to_client(issuer: &Issuer, ticket: &TicketClaims, description: &str) -> Response {
    see_other(&with_query(
        &ticket.redirect_uri,
        &[
            ("error", "access_denied"),
            ("error_description", description),
            ("state", &ticket.state),
            ("iss", issuer.issuer()),
        ],
    ))
}

//! The second step of a sign-in (docs/mfa.md): after a right password, a user with a second
//! factor gets no code but a second-factor ticket ([`FactorClaims`], 5 minutes), and
//! `/oidc/login/factor` (POST, a form or JSON) turns that ticket and a typed code — an
//! authenticator-app code or a recovery code — into the authorization code.
//!
//! Stateless: what the issuer knows between the two steps is in the ticket it signed (the user,
//! the request, the entry's `notBefore` and factor use mark at the password check, the confirmed
//! device). The mark moves with every accepted code, so a ticket completes one sign-in. Order of
//! the POST, as the password step's: the ticket (cheap, refuses forged requests), the device
//! cookie the ticket is bound to, the per-source failure bucket, the replica's back-off of the
//! user's codes (a key of its own, [`super::limits::factor_backoff_key`], which a right password
//! does not clear), then the user and one conditional write of the credentials entry that checks
//! the code and records the outcome: the use (`lastStep`, or the recovery digest removed) or one
//! more failure. The failures in the entry back the step off on every replica alike (five, then
//! one second doubling to fifteen minutes), so neither a right password nor another replica buys
//! more guesses. Of two replicas accepting the same code at once, one write conflicts, reads
//! again, and finds the code used: **a code works once**. Every refusal of the code gets the
//! same answer.

use std::sync::Arc;

use axum::{
    Json,
    body::Bytes,
    extract::State,
    extract::rejection::BytesRejection,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use ichor_renderers::auth::UserName;
use ichor_renderers::auth::credentials::{
    CredentialsEntry, FACTOR_PASSKEY, FACTOR_RECOVERY, FACTOR_TOTP, FactorAttempt, FactorRefusal,
    PasskeyRefusal,
};
use serde::{Deserialize, Serialize};

use super::{
    Issuer, Source,
    authorize::{see_other, wants_json, with_query},
    devices,
    errors::OAuthError,
    factor_page,
    limits::{self, AttemptOutcome, factor_backoff_key},
    login::{BAD_TICKET, DISABLED, admit_attempt, authorization_redirect, is_json_body, redirect_response},
    page,
    request::Params,
};
use crate::{
    store::{Change, StoreError, modify_credentials},
    tokens::{self, FactorClaims, MAX_FACTOR_TICKET_BYTES, PasskeyChallenge, TicketClaims},
    ui::UiFiles,
};

/// The answer to every refused code.
pub const WRONG_CODE: &str = "The code is incorrect or was used already.";
/// The sign-in changed under the second step (a password or factor reset, the user gone).
pub const STALE: &str = "This sign-in is no longer valid. Start it again from the application.";
/// After a right password: a second factor is needed and none the page can take is left.
pub const NO_FACTOR_LEFT: &str = "This account has no second factor left that can be used here. \
                                  Ask an administrator to reset its second factors.";
/// Every factor kind, as a ticket may name it.
const KINDS: [&str; 3] = [FACTOR_PASSKEY, FACTOR_TOTP, FACTOR_RECOVERY];
/// The longest code field read (longer ones are refused as wrong codes, and counted).
const MAX_CODE_FIELD: usize = 64;

/// A second-factor ticket as handed to the page, with the kinds it offers.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    /// The signed [`FactorClaims`].
    pub ticket: String,
    /// The factor kinds the page may ask for.
    pub factors: Vec<&'static str>,
    /// The options for `navigator.credentials.get` when a passkey is offered.
    pub passkey_options: Option<serde_json::Value>,
}

/// The second-factor ticket for `user`, whose password was just verified against `entry`
/// (`device`: the confirmed device cookie's id). `None` (logged) when it cannot be signed.
pub(super) fn pending(
    issuer: &Issuer,
    request: &TicketClaims,
    user: &str,
    entry: &CredentialsEntry,
    device: Option<String>,
) -> Option<Pending> {
    let keys = issuer.keys().load()?;
    let now = issuer.now();
    let iat = tokens::unix_seconds(now);
    // Passkeys are offered when this issuer is a relying party (its URL names a domain) and
    // one of the user's that no copy was detected of can be read.
    let usable = entry.usable_passkeys();
    let passkey = issuer
        .relying_party()
        .filter(|_| !usable.is_empty())
        .and_then(|rp| rp.begin_authentication(&usable))
        .and_then(|(options, state)| {
            let options = serde_json::to_value(options).ok()?;
            Some(PasskeyChallenge { options, state })
        });
    let sign = |passkey: Option<PasskeyChallenge>| {
        let factors: Vec<&'static str> = entry
            .offered_factors()
            .into_iter()
            .filter(|f| *f != FACTOR_PASSKEY || passkey.is_some())
            .collect();
        let passkey_options = passkey.as_ref().map(|p| p.options.clone());
        let claims = FactorClaims {
            iss: issuer.issuer().to_owned(),
            sub: user.to_owned(),
            request: request.clone(),
            nb: entry.not_before.to_string(),
            dev: device.clone(),
            factors: factors.iter().map(|f| (*f).to_owned()).collect(),
            used: entry.factor_use_mark(),
            passkey,
            iat,
            exp: iat + tokens::TICKET_TTL.as_secs(),
        };
        let ticket = tokens::sign_artifact(&keys, &claims, now, now)
            .map_err(|e| tracing::error!(error = %e, "cannot sign a second-factor ticket"))
            .ok()?;
        Some(Pending {
            ticket,
            factors,
            passkey_options,
        })
    };
    let pending = sign(passkey)?;
    if pending.ticket.len() <= MAX_FACTOR_TICKET_BYTES {
        return Some(pending);
    }
    // The user's passkeys do not fit one ticket (the entry's bounds keep ten within it, so an
    // entry written by hand): the typed factors are still offered.
    tracing::error!(
        user,
        bytes = pending.ticket.len(),
        "the passkeys do not fit a second-factor ticket; offering the typed factors only"
    );
    sign(None)
}

#[derive(Serialize)]
struct FactorBody<'a> {
    factor_ticket: &'a str,
    factors: &'a [&'static str],
    #[serde(skip_serializing_if = "Option::is_none")]
    passkey_options: Option<&'a serde_json::Value>,
}

/// The answer that asks for the second factor: JSON for the in-page sign-in (`factor_ticket` and
/// the kinds offered), else the factor page (the card of `files`), with `error` when a code was
/// refused.
pub(super) async fn ask(
    files: &UiFiles,
    json: bool,
    request: &TicketClaims,
    pending: &Pending,
    error: Option<&page::Refusal>,
) -> Response {
    if pending.factors.is_empty() {
        return if json {
            OAuthError::new(StatusCode::FORBIDDEN, "access_denied", NO_FACTOR_LEFT).into_response()
        } else {
            page::html(StatusCode::FORBIDDEN, page::message(NO_FACTOR_LEFT))
        };
    }
    if json {
        let mut response = Json(FactorBody {
            factor_ticket: &pending.ticket,
            factors: &pending.factors,
            passkey_options: pending.passkey_options.as_ref(),
        })
        .into_response();
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return response;
    }
    let form = factor_page::FactorForm {
        ticket: &pending.ticket,
        client_id: &request.client_id,
        redirect_uri: &request.redirect_uri,
        factors: &pending.factors,
        passkey_options: pending.passkey_options.as_ref(),
        error,
    };
    let status = if error.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    factor_page::respond(files, status, &form).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonFactor {
    factor_ticket: String,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    credential: Option<Box<serde_json::value::RawValue>>,
}

/// What the second step answers with: a typed code, or a passkey's answer (the browser's
/// `PublicKeyCredential` as JSON).
#[derive(Debug, Clone)]
enum Answer {
    Code(String),
    Passkey(String),
}

const FIELDS: &str = "the body must be {factor_ticket, code} or {factor_ticket, credential}";

/// The fields of the POST, from a JSON body or a form.
fn fields(headers: &HeaderMap, body: &[u8]) -> Result<(String, Answer), String> {
    if is_json_body(headers) {
        let f: JsonFactor = serde_json::from_slice(body).map_err(|_| FIELDS.to_owned())?;
        let answer = match (f.code, f.credential) {
            (Some(code), None) => Answer::Code(code),
            (None, Some(credential)) => Answer::Passkey(credential.get().to_owned()),
            _ => return Err(FIELDS.to_owned()),
        };
        return Ok((f.factor_ticket, answer));
    }
    let params = Params::parse(body).map_err(|e| e.to_string())?;
    let get = |n: &'static str| params.get(n).map_err(|e| e.to_string());
    let ticket = get("factor_ticket")?.unwrap_or("").to_owned();
    let answer = match (get("code")?, get("credential")?) {
        (code, None) => Answer::Code(code.unwrap_or("").to_owned()),
        (None, Some(credential)) => Answer::Passkey(credential.to_owned()),
        (Some(_), Some(_)) => return Err(FIELDS.to_owned()),
    };
    Ok((ticket, answer))
}

/// Why a second step was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    BadTicket,
    BadRequest(String),
    Stale,
    Limited { retry_after: i64 },
    WrongCode,
    Disabled,
    Unavailable,
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
            let message =
                OAuthError::unreadable_body_over(&rejection, super::MAX_FACTOR_BODY_BYTES).description;
            return respond_failure(&issuer, json, None, Failure::BadRequest(message)).await;
        }
    };
    let (raw, answer) = match fields(&headers, &body) {
        Ok(f) => f,
        Err(m) => return respond_failure(&issuer, json, None, Failure::BadRequest(m)).await,
    };
    let claims = issuer.keys().load().and_then(|keys| {
        tokens::verify_artifact::<FactorClaims>(&keys, &raw, issuer.issuer(), issuer.now()).ok()
    });
    let Some(claims) = claims else {
        return respond_failure(&issuer, json, None, Failure::BadTicket).await;
    };
    match second_step(&issuer, source, &headers, &claims, &answer).await {
        Ok((redirect, cookie)) => redirect_response(json, redirect, cookie),
        Err(failure) => respond_failure(&issuer, json, Some((&claims, &raw)), failure).await,
    }
}

/// What the conditional write found.
enum Used {
    Accepted(Vec<String>),
    Refused(FactorRefusal),
    Wait(jiff::SignedDuration),
    /// An answer held back, unwritten and unchecked for the client: the user spent its budget
    /// of credential changes.
    Held(jiff::SignedDuration),
    Stale,
}

async fn second_step(
    issuer: &Arc<Issuer>,
    source: std::net::IpAddr,
    headers: &HeaderMap,
    claims: &FactorClaims,
    answer: &Answer,
) -> Result<(String, Option<HeaderValue>), Failure> {
    let now = issuer.now();
    let name = UserName::parse(&claims.sub).map_err(|_| Failure::BadTicket)?;
    let not_before: jiff::Timestamp = claims.nb.parse().map_err(|_| Failure::BadTicket)?;
    // A ticket given to a known device is good on that device only.
    if let Some(dev) = &claims.dev {
        let presented = devices::device_of(issuer, headers, Some(&name));
        if presented.as_ref().map(|p| &p.dev) != Some(dev) {
            return Err(Failure::BadTicket);
        }
    }
    // A key of its own, which only an accepted code clears: a right password (which clears
    // the password's key) must not buy more guesses at the code.
    let key = factor_backoff_key(name.as_str(), claims.dev.as_deref());
    let (source_token, mut reservation) = admit_attempt(issuer, source, claims.dev.is_some(), key, now)
        .map_err(|retry_after| Failure::Limited { retry_after })?;
    let user = issuer
        .store
        .get_user(name.as_str())
        .await
        .map_err(|e| unavailable(&e))?;
    let Some(user) = user else {
        source_token.charge();
        return Err(Failure::Stale);
    };
    if user.disabled {
        return Err(Failure::Disabled);
    }
    let passkey_step = claims.passkey.as_ref().zip(issuer.relying_party());
    // Every answer that is written, right or wrong, takes one change from the user's budget
    // when it is decided (a retry after a conflict keeps it). With the budget spent every answer
    // is held alike, unwritten, so the answer tells nothing of the code. Given back when the
    // last decision wrote nothing; kept once a write began (`limits::account_writes`).
    let mut write: Option<limits::AccountWrite> = None;
    let mut writes = false;
    let used = modify_credentials(issuer.store.as_ref(), name.as_str(), |current| {
        writes = false;
        let Some(entry) = current else {
            return Ok::<_, StoreError>(Change::Keep(Used::Stale));
        };
        // A reset since the password step, or a factor used since (this ticket's own sign-in
        // completed, or another one of the user's): the ticket is spent.
        if entry.not_before != not_before || entry.factor_use_mark() != claims.used {
            return Ok(Change::Keep(Used::Stale));
        }
        let attempt = match answer {
            Answer::Code(code) => {
                let code = if code.len() > MAX_CODE_FIELD {
                    ""
                } else {
                    code.as_str()
                };
                entry.attempt_typed_factor(code, now)
            }
            Answer::Passkey(credential) => entry.attempt_passkey(now, |usable| {
                // A ticket that offered no passkey step takes no passkey answer.
                let (step, rp) = passkey_step.ok_or(PasskeyRefusal::from(FactorRefusal::PasskeyRefused))?;
                rp.verify_assertion(&step.state, credential, usable)
            }),
        };
        let change = match attempt {
            FactorAttempt::Accepted { entry, amr } => Change::Put(
                entry,
                Used::Accepted(amr.iter().map(|v| (*v).to_owned()).collect()),
            ),
            FactorAttempt::Refused { entry, refusal } => Change::Put(entry, Used::Refused(refusal)),
            FactorAttempt::Wait { retry_after } => Change::Keep(Used::Wait(retry_after)),
        };
        if matches!(change, Change::Put(..)) {
            if write.is_none() {
                match issuer.reserve_account_write(name.as_str(), now) {
                    Ok(taken) => write = Some(taken.writing()),
                    Err(wait) => return Ok(Change::Keep(Used::Held(wait))),
                }
            }
            writes = true;
        }
        Ok(change)
    })
    .await;
    if let (Some(write), false) = (write, writes) {
        write.give_back();
    }
    let used = used.map_err(|e| unavailable(&e))?;
    let amr = match used {
        Used::Accepted(amr) => amr,
        Used::Held(wait) => {
            // Not an attempt (nothing was checked for the client, and the ticket stays good),
            // but it costs the source, as a held attempt does.
            source_token.charge();
            return Err(Failure::Limited {
                retry_after: wait.as_secs().max(1),
            });
        }
        Used::Stale => {
            // A spent or outdated ticket costs its source like a wrong code: sent again and
            // again it would be a free read of the user's entry through the user's write queue.
            source_token.charge();
            return Err(Failure::Stale);
        }
        Used::Wait(wait) => {
            // Held by failures every replica counted: not an attempt, but it costs the source.
            source_token.charge();
            issuer.metrics.backoff_hit("factor_backoff");
            return Err(Failure::Limited {
                retry_after: wait.as_secs().max(1),
            });
        }
        Used::Refused(refusal) => {
            match refusal {
                FactorRefusal::Replayed => {
                    tracing::warn!(user = %name.as_str(), "an authenticator-app code was presented again; refused");
                }
                FactorRefusal::Unusable(_) => {
                    tracing::error!(user = %name.as_str(), error = %refusal, "the second factor cannot be checked");
                }
                FactorRefusal::PasskeyCloned => {
                    tracing::warn!(
                        user = %name.as_str(),
                        "a passkey's signature counter did not move forward: a copy of the authenticator may be in use; refused"
                    );
                }
                FactorRefusal::Wrong | FactorRefusal::NotEnrolled | FactorRefusal::PasskeyRefused => {}
            }
            source_token.charge();
            reservation.outcome = AttemptOutcome::Failure;
            reservation.at = issuer.now();
            issuer.metrics.login_failure("invalid_factor");
            return Err(Failure::WrongCode);
        }
    };
    reservation.outcome = AttemptOutcome::Success;
    drop(reservation);
    tracing::info!(user = %name.as_str(), "signed in with a second factor");
    authorization_redirect(issuer, &claims.request, name.as_str(), amr, claims.dev.clone())
        .ok_or(Failure::Unavailable)
}

fn unavailable(e: &StoreError) -> Failure {
    tracing::warn!(error = %e, "user store unavailable during a second sign-in step");
    Failure::Unavailable
}

async fn respond_failure(
    issuer: &Issuer,
    json: bool,
    pending: Option<(&FactorClaims, &str)>,
    failure: Failure,
) -> Response {
    if json {
        let e = match failure {
            Failure::BadTicket => OAuthError::invalid_request(BAD_TICKET),
            Failure::BadRequest(m) => OAuthError::invalid_request(m),
            Failure::Stale => OAuthError::invalid_request(STALE),
            Failure::Limited { retry_after } => {
                OAuthError::slow_down(jiff::SignedDuration::from_secs(retry_after))
            }
            Failure::WrongCode => OAuthError::new(StatusCode::UNAUTHORIZED, "access_denied", WRONG_CODE),
            Failure::Disabled => OAuthError::new(StatusCode::FORBIDDEN, "access_denied", DISABLED),
            Failure::Unavailable => OAuthError::unavailable("sign-in"),
        };
        return e.into_response();
    }
    let says = |key: &'static str, seconds: Option<u64>, text: String| page::Refusal { key, seconds, text };
    let (claims, raw) = match (failure.clone(), pending) {
        (Failure::BadRequest(m), _) => return page::html(StatusCode::BAD_REQUEST, page::message(&m)),
        (_, None) | (Failure::BadTicket, _) => {
            return page::html(StatusCode::BAD_REQUEST, page::message(BAD_TICKET));
        }
        (Failure::Stale, _) => return page::html(StatusCode::BAD_REQUEST, page::message(STALE)),
        (Failure::Disabled, Some((claims, _))) => {
            return see_other(&with_query(
                &claims.request.redirect_uri,
                &[
                    ("error", "access_denied"),
                    ("error_description", DISABLED),
                    ("state", &claims.request.state),
                    ("iss", issuer.issuer()),
                ],
            ));
        }
        (_, Some(p)) => p,
    };
    let (refusal, retry_after) = match failure {
        Failure::Limited { retry_after } => {
            let seconds = u64::try_from(retry_after).unwrap_or(1).max(1);
            (
                says(
                    "tooManyAttempts",
                    Some(seconds),
                    format!("Too many sign-in attempts. Wait {seconds} seconds and try again."),
                ),
                Some(seconds),
            )
        }
        Failure::Unavailable => (
            says(
                "signInUnavailable",
                None,
                "Sign-in is temporarily unavailable. Try again in a moment.".to_owned(),
            ),
            None,
        ),
        _ => (says("wrongCode", None, WRONG_CODE.to_owned()), None),
    };
    let pending = Pending {
        ticket: raw.to_owned(),
        factors: claims
            .factors
            .iter()
            .filter_map(|f| KINDS.iter().copied().find(|k| k == f))
            .collect(),
        passkey_options: claims.passkey.as_ref().map(|p| p.options.clone()),
    };
    let mut response = ask(
        issuer.ui_files(),
        false,
        &claims.request,
        &pending,
        Some(&refusal),
    )
    .await;
    if let Some(seconds) = retry_after {
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    if matches!(refusal.key, "signInUnavailable") {
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    response
}

//! `GET /oidc/authorize`: the authorization request (RFC 6749 4.1.1, RFC 7636 4.3) becomes a
//! signed 5-minute login ticket.

use std::sync::Arc;

use axum::{
    Json,
    body::Bytes,
    extract::{State, rejection::BytesRejection},
    http::{HeaderMap, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use super::{
    Issuer,
    errors::OAuthError,
    page,
    request::{self, Client, Params},
};
use crate::tokens::{self, TicketClaims};

/// A checked authorization request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizeRequest {
    /// The client.
    pub client: Client,
    /// The redirect URI, equal to the client's registered one.
    pub redirect_uri: String,
    /// The client's state.
    pub state: String,
    /// The client's nonce.
    pub nonce: String,
    /// The S256 challenge.
    pub code_challenge: String,
    /// Whether `offline_access` was asked for.
    pub offline_access: bool,
    /// The audience of the ID tokens.
    pub audience: &'static str,
}

/// Why an authorization request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizeError {
    /// The client or redirect URI is not trusted: show an error page, never redirect.
    Untrusted(String),
    /// The redirect URI is trusted: the error may go back to the client (4.1.2.1).
    Redirectable {
        /// The redirect URI.
        redirect_uri: String,
        /// The state, if it was acceptable.
        state: Option<String>,
        /// The RFC 6749 error code.
        error: &'static str,
        /// What is wrong.
        description: String,
    },
}

/// Checks an authorization request. Pure: the client and redirect URI first (errors there are
/// [`AuthorizeError::Untrusted`]), then everything else.
///
/// # Errors
/// See [`AuthorizeError`].
pub fn validate(params: &Params, ui_redirect: &str) -> Result<AuthorizeRequest, AuthorizeError> {
    let untrusted = |m: &str| AuthorizeError::Untrusted(m.to_owned());
    let client_id = params.get("client_id").map_err(|e| untrusted(&e.to_string()))?;
    let client = client_id
        .and_then(Client::from_id)
        .ok_or_else(|| untrusted("client_id: must be ichor-ui or ichor-cli"))?;
    let redirect_uri = params
        .get("redirect_uri")
        .map_err(|e| untrusted(&e.to_string()))?
        .ok_or_else(|| untrusted("redirect_uri: required"))?;
    if !request::redirect_uri_allowed(client, redirect_uri, ui_redirect) {
        return Err(untrusted(
            "redirect_uri: not a registered redirect URI of this client",
        ));
    }
    let state = match params.get("state") {
        Ok(Some(s)) if request::opaque_ok(s) => Some(s.to_owned()),
        _ => None,
    };
    let fail = |error: &'static str, description: String| AuthorizeError::Redirectable {
        redirect_uri: redirect_uri.to_owned(),
        state: state.clone(),
        error,
        description,
    };
    let get = |name: &'static str| {
        params
            .get(name)
            .map_err(|e| fail("invalid_request", e.to_string()))
    };
    match get("response_type")? {
        Some("code") => {}
        Some(_) => {
            return Err(fail(
                "unsupported_response_type",
                "response_type: only code is supported".into(),
            ));
        }
        None => return Err(fail("invalid_request", "response_type: required (code)".into())),
    }
    let raw_state = get("state")?;
    let state_value = match (raw_state, &state) {
        (Some(_), Some(s)) => s.clone(),
        _ => {
            return Err(fail(
                "invalid_request",
                format!(
                    "state: required, 1 to {} visible ASCII characters",
                    request::MAX_OPAQUE_LEN
                ),
            ));
        }
    };
    let nonce = match get("nonce")? {
        Some(n) if request::opaque_ok(n) => n.to_owned(),
        _ => {
            return Err(fail(
                "invalid_request",
                format!(
                    "nonce: required, 1 to {} visible ASCII characters",
                    request::MAX_OPAQUE_LEN
                ),
            ));
        }
    };
    let offline_access = request::parse_scope(get("scope")?.unwrap_or(""))
        .map_err(|e| fail("invalid_scope", e.to_string()))?;
    let code_challenge = request::check_challenge(get("code_challenge")?, get("code_challenge_method")?)
        .map_err(|e| fail("invalid_request", e.to_string()))?;
    let audience = request::resolve_audience(client, get("audience")?)
        .map_err(|e| fail("invalid_request", e.to_string()))?;
    for unsupported in ["request", "request_uri"] {
        if get(unsupported)?.is_some() {
            return Err(fail(
                if unsupported == "request" {
                    "request_not_supported"
                } else {
                    "request_uri_not_supported"
                },
                format!("{unsupported}: not supported"),
            ));
        }
    }
    match get("response_mode")? {
        None | Some("query") => {}
        Some(_) => {
            return Err(fail(
                "invalid_request",
                "response_mode: only query is supported".into(),
            ));
        }
    }
    if let Some(max_age) = get("max_age")?
        && (max_age.len() > 10 || max_age.parse::<u32>().is_err())
    {
        return Err(fail(
            "invalid_request",
            "max_age: must be a number of seconds".into(),
        ));
    }
    if let Some(prompt) = get("prompt")? {
        let values: Vec<&str> = prompt.split(' ').filter(|v| !v.is_empty()).collect();
        if values.contains(&"none") {
            // "none" with any other value is an error of its own (OpenID Connect Core 3.1.2.1).
            if values.len() > 1 {
                return Err(fail(
                    "invalid_request",
                    "prompt: none may not be combined with other values".into(),
                ));
            }
            // The issuer keeps no sign-in session (every sign-in is a password form), so a
            // request that forbids showing one can never be satisfied (3.1.2.6).
            return Err(fail(
                "login_required",
                "prompt=none: this issuer keeps no sign-in session, so the user must sign in".into(),
            ));
        }
    }
    Ok(AuthorizeRequest {
        client,
        redirect_uri: redirect_uri.to_owned(),
        state: state_value,
        nonce,
        code_challenge,
        offline_access,
        audience,
    })
}

/// The redirect URI with `params` appended to its query.
pub(crate) fn with_query(redirect_uri: &str, params: &[(&str, &str)]) -> String {
    match url::Url::parse(redirect_uri) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(params);
            url.to_string()
        }
        Err(_) => redirect_uri.to_owned(),
    }
}

/// A 303 See Other to `location`, not cached: the answer to a POST, which the browser follows
/// with a GET and never re-posts (a 307 would re-send the password; RFC 9700 4.12).
pub(crate) fn see_other(location: &str) -> Response {
    redirect(StatusCode::SEE_OTHER, location)
}

/// A redirect to `location` with `status` (302 after a GET), not cached.
fn redirect(status: StatusCode, location: &str) -> Response {
    match axum::http::HeaderValue::from_str(location) {
        Ok(value) => {
            let mut response = status.into_response();
            response.headers_mut().insert(header::LOCATION, value);
            response.headers_mut().insert(
                header::CACHE_CONTROL,
                axum::http::HeaderValue::from_static("no-store"),
            );
            response
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

pub(crate) fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json"))
}

#[derive(Serialize)]
struct TicketBody {
    ticket: String,
}

pub(crate) async fn authorize(State(issuer): State<Arc<Issuer>>, uri: Uri, headers: HeaderMap) -> Response {
    let json = wants_json(&headers);
    match Params::parse(uri.query().unwrap_or("").as_bytes()) {
        Ok(params) => respond(&issuer, &params, json, StatusCode::FOUND),
        Err(e) => refuse_untrusted(json, &e.to_string()),
    }
}

/// `POST /oidc/authorize`: the same request as a form body (OpenID Connect Core 3.1.2.1 requires
/// both methods). A body that is not a form, or unreadable, is refused like a malformed query.
pub(crate) async fn authorize_form(
    State(issuer): State<Arc<Issuer>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let json = wants_json(&headers);
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            return refuse_untrusted(json, &OAuthError::unreadable_body(&rejection).description);
        }
    };
    if !request::is_form(&headers) {
        return refuse_untrusted(json, "the body must be application/x-www-form-urlencoded");
    }
    match Params::parse(&body) {
        Ok(params) => respond(&issuer, &params, json, StatusCode::SEE_OTHER),
        Err(e) => refuse_untrusted(json, &e.to_string()),
    }
}

/// Answers a parsed authorization request; `redirect_status` is 302 for a GET, 303 for a POST.
fn respond(issuer: &Issuer, params: &Params, json: bool, redirect_status: StatusCode) -> Response {
    let req = match validate(params, issuer.ui_redirect()) {
        Ok(req) => req,
        Err(AuthorizeError::Untrusted(m)) => return refuse_untrusted(json, &m),
        Err(AuthorizeError::Redirectable {
            redirect_uri,
            state,
            error,
            description,
        }) => {
            if json {
                return OAuthError::new(StatusCode::BAD_REQUEST, error, description).into_response();
            }
            let mut q = vec![
                ("error", error),
                ("error_description", description.as_str()),
                ("iss", issuer.issuer()),
            ];
            if let Some(s) = state.as_deref() {
                q.push(("state", s));
            }
            return redirect(redirect_status, &with_query(&redirect_uri, &q));
        }
    };
    let Some(keys) = issuer.keys().load() else {
        return unavailable(json);
    };
    let now = issuer.now();
    let iat = tokens::unix_seconds(now);
    let claims = TicketClaims {
        iss: issuer.issuer().to_owned(),
        client_id: req.client.id().to_owned(),
        redirect_uri: req.redirect_uri,
        state: req.state,
        nonce: req.nonce,
        code_challenge: req.code_challenge,
        offline_access: req.offline_access,
        audience: req.audience.to_owned(),
        iat,
        exp: iat + tokens::TICKET_TTL.as_secs(),
    };
    let ticket = match tokens::sign_artifact(&keys, &claims, now, now) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "cannot sign a login ticket");
            return unavailable(json);
        }
    };
    if json {
        let mut response = Json(TicketBody { ticket }).into_response();
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            axum::http::HeaderValue::from_static("no-store"),
        );
        response
    } else {
        redirect(redirect_status, &format!("/oidc/login?ticket={ticket}"))
    }
}

fn refuse_untrusted(json: bool, message: &str) -> Response {
    if json {
        OAuthError::invalid_request(message).into_response()
    } else {
        page::html(
            StatusCode::BAD_REQUEST,
            page::message(&format!("This sign-in request is invalid: {message}.")),
        )
    }
}

fn unavailable(json: bool) -> Response {
    if json {
        OAuthError::unavailable("the issuer's signing keys are").into_response()
    } else {
        page::html(
            StatusCode::SERVICE_UNAVAILABLE,
            page::message("Sign-in is temporarily unavailable. Try again in a moment."),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UI: &str = "https://ichor.example.com/auth/callback";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    fn params(extra: &str) -> Params {
        let base = format!(
            "response_type=code&client_id=ichor-cli&redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcallback\
             &state=s1&nonce=n1&scope=openid+offline_access&code_challenge={CHALLENGE}&code_challenge_method=S256"
        );
        Params::parse(format!("{base}{extra}").as_bytes()).expect("params")
    }

    #[test]
    fn a_complete_cli_request_is_accepted_with_the_kube_audience() {
        let req = validate(&params(""), UI).expect("valid");
        assert_eq!(req.client, Client::Cli);
        assert_eq!(req.audience, "ichor-kube");
        assert!(req.offline_access);
    }

    #[test]
    fn prompt_none_is_answered_on_the_redirect_uri_with_login_required() {
        for prompt in ["none", "none+"] {
            match validate(&params(&format!("&prompt={prompt}")), UI) {
                Err(AuthorizeError::Redirectable {
                    redirect_uri,
                    state,
                    error,
                    ..
                }) => {
                    assert_eq!(error, "login_required", "{prompt}");
                    assert_eq!(redirect_uri, "http://127.0.0.1:5000/callback");
                    assert_eq!(state.as_deref(), Some("s1"), "the state goes back with it");
                }
                other => panic!("prompt={prompt}: {other:?}"),
            }
        }
        assert!(
            validate(&params("&prompt=login"), UI).is_ok(),
            "a sign-in is shown anyway"
        );
    }

    fn refusal(extra: &str) -> (&'static str, String) {
        match validate(&params(extra), UI) {
            Err(AuthorizeError::Redirectable {
                error, description, ..
            }) => (error, description),
            other => panic!("{extra}: {other:?}"),
        }
    }

    #[test]
    fn prompt_none_with_another_value_is_a_malformed_request() {
        let (error, description) = refusal("&prompt=login+none");
        assert_eq!(error, "invalid_request");
        assert!(description.starts_with("prompt:"), "{description}");
    }

    #[test]
    fn only_the_query_response_mode_is_served() {
        assert!(validate(&params("&response_mode=query"), UI).is_ok());
        for mode in ["fragment", "form_post", "query.jwt"] {
            let (error, description) = refusal(&format!("&response_mode={mode}"));
            assert_eq!(error, "invalid_request", "{mode}");
            assert!(description.starts_with("response_mode:"), "{description}");
        }
    }

    #[test]
    fn max_age_is_a_number_of_seconds_and_any_is_satisfied_by_the_fresh_sign_in() {
        assert!(validate(&params("&max_age=0"), UI).is_ok());
        assert!(validate(&params("&max_age=3600"), UI).is_ok());
        for bad in ["-1", "soon", "1.5", "99999999999"] {
            let (error, description) = refusal(&format!("&max_age={bad}"));
            assert_eq!(error, "invalid_request", "{bad}");
            assert!(description.starts_with("max_age:"), "{description}");
        }
    }

    #[test]
    fn unknown_parameters_are_ignored() {
        let req = validate(
            &params("&display=popup&ui_locales=ja&login_hint=alice&acr_values=x"),
            UI,
        );
        assert!(req.is_ok(), "{req:?}");
    }

    #[test]
    fn an_unknown_client_or_redirect_is_never_redirected() {
        let p =
            Params::parse(b"client_id=other&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcallback").expect("p");
        assert!(matches!(validate(&p, UI), Err(AuthorizeError::Untrusted(_))));
        let p =
            Params::parse(b"client_id=ichor-ui&redirect_uri=https%3A%2F%2Fevil.example%2Fauth%2Fcallback")
                .expect("p");
        assert!(matches!(validate(&p, UI), Err(AuthorizeError::Untrusted(_))));
        let p = params("&client_id=ichor-cli");
        assert!(
            matches!(validate(&p, UI), Err(AuthorizeError::Untrusted(_))),
            "repeated client_id"
        );
    }

    #[test]
    fn later_errors_go_back_to_the_client_with_the_state() {
        let p = params("&audience=nope");
        match validate(&p, UI) {
            Err(AuthorizeError::Redirectable { state, error, .. }) => {
                assert_eq!(state.as_deref(), Some("s1"));
                assert_eq!(error, "invalid_request");
            }
            other => panic!("{other:?}"),
        }
        let p = params("&nonce=again");
        assert!(matches!(
            validate(&p, UI),
            Err(AuthorizeError::Redirectable {
                error: "invalid_request",
                ..
            })
        ));
    }
}

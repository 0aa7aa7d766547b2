//! `GET /oidc/authorize`: the authorization request (RFC 6749 4.1.1, RFC 7636 4.3) becomes a
//! signed 5-minute login ticket.

use std::sync::Arc;

use axum::{
    Json,
    extract::State,
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
    // The issuer keeps no sign-in session (every sign-in is a password form), so a request that
    // forbids showing one can never be satisfied (OpenID Connect Core 3.1.2.6).
    if get("prompt")?.is_some_and(|p| p.split(' ').any(|v| v == "none")) {
        return Err(fail(
            "login_required",
            "prompt=none: this issuer keeps no sign-in session, so the user must sign in".into(),
        ));
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

/// A 302 Found to `location`, not cached.
pub(crate) fn found(location: &str) -> Response {
    match axum::http::HeaderValue::from_str(location) {
        Ok(value) => {
            let mut response = StatusCode::FOUND.into_response();
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
    let params = match Params::parse(uri.query().unwrap_or("").as_bytes()) {
        Ok(p) => p,
        Err(e) => return refuse_untrusted(json, &e.to_string()),
    };
    let req = match validate(&params, issuer.ui_redirect()) {
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
            return found(&with_query(&redirect_uri, &q));
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
        found(&format!("/oidc/login?ticket={ticket}"))
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
        for prompt in ["none", "consent+none"] {
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

//! The network side of the CLI, used only on the slow path: discovery, the token endpoint
//! (authorization code and refresh grants) and RFC 7009 revocation, over one `reqwest` client
//! that trusts the system roots plus `--ca-file`.
//!
//! Every URL passes [`check_url`] (https, or http to the loopback), redirects are not followed
//! (an endpoint that redirects could move a refresh token elsewhere), and every response body is
//! read to at most [`MAX_RESPONSE_BYTES`].
//!
//! A token request the issuer asks to slow down (`429 slow_down`, or for the code exchange a
//! `503`, with `Retry-After`) is sent again after the wait asked for, within a bound per grant,
//! each wait said in one line on stderr; [`super::retry`] decides.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use serde::Deserialize;

use super::{
    cache::Endpoints,
    error::AuthError,
    issuer_url::{IssuerUrl, check_url},
    retry::{self, Decision, Grant, wait_too_long, waiting_notice},
    secret::Secret,
};
use crate::terminal::escape_controls;

/// The largest response body read from the issuer.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// The largest `--ca-file` read.
const MAX_CA_FILE_BYTES: u64 = 1024 * 1024;
/// Connect timeout of every request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Whole-request timeout of every request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// An HTTP client for one issuer's endpoints.
#[derive(Debug, Clone)]
pub struct OidcClient {
    http: reqwest::Client,
}

/// A successful token response (only what the CLI keeps).
#[derive(Debug)]
pub struct TokenResponse {
    /// The ID token.
    pub id_token: Secret,
    /// The refresh token; with rotation a new one on every refresh.
    pub refresh_token: Option<Secret>,
}

#[derive(Deserialize)]
struct RawTokenResponse {
    id_token: Option<Secret>,
    refresh_token: Option<Secret>,
}

#[derive(Deserialize)]
struct RawError {
    error: String,
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct RawDiscovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    revocation_endpoint: Option<String>,
    code_challenge_methods_supported: Option<Vec<String>>,
}

impl AuthError {
    /// Whether this is the token endpoint's `invalid_grant`: the refresh token is dead.
    pub fn is_invalid_grant(&self) -> bool {
        matches!(self, AuthError::OAuth { error, .. } if error == "invalid_grant")
    }
}

/// The transport error with its causes, which `reqwest`'s own message leaves out.
fn chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

impl OidcClient {
    /// A client trusting the system's roots and, when given, the PEM certificates in `ca_file`.
    ///
    /// # Errors
    /// [`AuthError::CaFile`] for an unreadable or empty CA file; [`AuthError::Http`] when the
    /// TLS stack cannot start.
    pub fn new(ca_file: Option<&Path>) -> Result<Self, AuthError> {
        let mut builder = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("ichor/", env!("CARGO_PKG_VERSION")));
        let native = rustls_native_certs::load_native_certs();
        for der in native.certs {
            // A system certificate rustls cannot read is skipped, as every rustls client does.
            if let Ok(cert) = reqwest::Certificate::from_der(&der) {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(path) = ca_file {
            for cert in read_ca_file(path)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| AuthError::Http {
            what: "TLS setup",
            url: String::new(),
            reason: chain(&e),
        })?;
        Ok(Self { http })
    }

    /// Fetches and checks the discovery document: its `issuer` must equal `issuer`, every
    /// endpoint must pass the transport rule, and `S256` must be supported when methods are
    /// listed.
    ///
    /// # Errors
    /// [`AuthError::Http`], [`AuthError::OAuth`] or [`AuthError::BadResponse`] naming the URL.
    pub async fn discover(&self, issuer: &IssuerUrl) -> Result<Endpoints, AuthError> {
        const WHAT: &str = "discovery";
        let url = issuer.discovery_url();
        let response = self
            .http
            .get(&url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| AuthError::Http {
                what: WHAT,
                url: url.clone(),
                reason: chain(&e),
            })?;
        let (status, body) = read_body(WHAT, &url, response).await?;
        if !status.is_success() {
            return Err(oauth_error(WHAT, &url, status, &body));
        }
        parse_discovery(issuer, &url, &body)
    }

    /// The `authorization_code` grant with the PKCE verifier. A `429` or `503` with
    /// `Retry-After` is waited out within [`Grant::CodeExchange`]'s budget (the code is released
    /// by such answers and lives 60 s).
    ///
    /// # Errors
    /// As [`OidcClient::discover`]; [`AuthError::WaitTooLong`] when the issuer asks for a longer
    /// wait than is left.
    pub async fn exchange_code(
        &self,
        token_endpoint: &str,
        client_id: &str,
        code: &Secret,
        redirect_uri: &str,
        verifier: &str,
    ) -> Result<TokenResponse, AuthError> {
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code.expose()),
            ("redirect_uri", redirect_uri),
            ("client_id", client_id),
            ("code_verifier", verifier),
        ];
        self.token_request(Grant::CodeExchange, token_endpoint, &form)
            .await
    }

    /// The `refresh_token` grant, asking for `audience`. A `429` with `Retry-After` (the refresh
    /// token is still the current one) is waited out within [`Grant::Refresh`]'s budget.
    ///
    /// # Errors
    /// As [`OidcClient::discover`]; a dead refresh token is [`AuthError::is_invalid_grant`];
    /// [`AuthError::WaitTooLong`] when the issuer asks for a longer wait than is left.
    pub async fn refresh(
        &self,
        token_endpoint: &str,
        client_id: &str,
        audience: &str,
        refresh_token: &Secret,
    ) -> Result<TokenResponse, AuthError> {
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token.expose()),
            ("client_id", client_id),
            ("audience", audience),
        ];
        self.token_request(Grant::Refresh, token_endpoint, &form).await
    }

    /// RFC 7009 revocation of a refresh token. 200 is success; anything else is an error the
    /// caller only warns about.
    ///
    /// # Errors
    /// As [`OidcClient::discover`].
    pub async fn revoke(
        &self,
        endpoint: &str,
        client_id: &str,
        refresh_token: &Secret,
    ) -> Result<(), AuthError> {
        const WHAT: &str = "revocation";
        check_url("revocation_endpoint", endpoint)?;
        let body = form_body(&[
            ("token", refresh_token.expose()),
            ("token_type_hint", "refresh_token"),
            ("client_id", client_id),
        ]);
        let response = self.post_form(WHAT, endpoint, body).await?;
        let (status, body) = read_body(WHAT, endpoint, response).await?;
        if status.is_success() {
            Ok(())
        } else {
            Err(oauth_error(WHAT, endpoint, status, &body))
        }
    }

    /// Sends `form` to the token endpoint until it answers something but a wait [`retry::decide`]
    /// takes, and reads that answer.
    async fn token_request(
        &self,
        grant: Grant,
        endpoint: &str,
        form: &[(&str, &str)],
    ) -> Result<TokenResponse, AuthError> {
        const WHAT: &str = "token request";
        check_url("token_endpoint", endpoint)?;
        let form = form_body(form);
        let started = Instant::now();
        loop {
            let response = self.post_form(WHAT, endpoint, form.clone()).await?;
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let (status, body) = read_body(WHAT, endpoint, response).await?;
            if status.is_success() {
                return parse_token_response(endpoint, &body);
            }
            let refusal = oauth_error(WHAT, endpoint, status, &body);
            let AuthError::OAuth {
                error, description, ..
            } = &refusal
            else {
                return Err(refusal);
            };
            match retry::decide(
                grant,
                status,
                Some(error),
                retry_after.as_deref(),
                started.elapsed(),
            ) {
                Decision::Fail => return Err(refusal),
                Decision::Wait(wait) => {
                    eprintln!(
                        "{}",
                        waiting_notice(grant, status, error, description.as_deref(), wait)
                    );
                    tokio::time::sleep(wait).await;
                }
                Decision::TooLong { asked, left } => {
                    return Err(wait_too_long(grant, endpoint, status, refusal, asked, left));
                }
            }
        }
    }

    async fn post_form(
        &self,
        what: &'static str,
        url: &str,
        body: String,
    ) -> Result<reqwest::Response, AuthError> {
        self.http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| AuthError::Http {
                what,
                url: url.to_owned(),
                reason: chain(&e),
            })
    }
}

/// The endpoints of the discovery document `body` fetched from `url` for `issuer`, checked as
/// [`OidcClient::discover`] documents: the issuer, S256 and the transport rule of every
/// endpoint. A document from the network: any bytes are answered with an error, never a panic.
///
/// # Errors
/// [`AuthError::BadResponse`] naming `url`, or the [`check_url`] refusal of an endpoint.
pub fn parse_discovery(issuer: &IssuerUrl, url: &str, body: &[u8]) -> Result<Endpoints, AuthError> {
    const WHAT: &str = "discovery";
    let doc: RawDiscovery = serde_json::from_slice(body).map_err(|e| AuthError::BadResponse {
        what: WHAT,
        url: url.to_owned(),
        reason: format!("not a discovery document: {e}"),
    })?;
    let bad = |reason: String| AuthError::BadResponse {
        what: WHAT,
        url: url.to_owned(),
        reason,
    };
    if doc.issuer.trim_end_matches('/') != issuer.as_str() {
        return Err(bad(format!(
            "issuer is {:?}, not the --issuer {:?}",
            doc.issuer,
            issuer.as_str()
        )));
    }
    if let Some(methods) = &doc.code_challenge_methods_supported
        && !methods.iter().any(|m| m == "S256")
    {
        return Err(bad("code_challenge_methods_supported does not list S256".into()));
    }
    check_url("authorization_endpoint", &doc.authorization_endpoint)?;
    check_url("token_endpoint", &doc.token_endpoint)?;
    if let Some(r) = &doc.revocation_endpoint {
        check_url("revocation_endpoint", r)?;
    }
    Ok(Endpoints {
        authorization: doc.authorization_endpoint,
        token: doc.token_endpoint,
        revocation: doc.revocation_endpoint,
    })
}

/// The token response `body` of a successful request to `endpoint`: its ID token and refresh
/// token. A malformed body is refused with the JSON error's position only, never its text (it
/// may hold tokens).
///
/// # Errors
/// [`AuthError::BadResponse`] naming `endpoint`.
pub fn parse_token_response(endpoint: &str, body: &[u8]) -> Result<TokenResponse, AuthError> {
    const WHAT: &str = "token request";
    let raw: RawTokenResponse = serde_json::from_slice(body).map_err(|e| AuthError::BadResponse {
        what: WHAT,
        url: endpoint.to_owned(),
        reason: format!("not a token response: {}", json_position(&e)),
    })?;
    let id_token = raw.id_token.ok_or_else(|| AuthError::BadResponse {
        what: WHAT,
        url: endpoint.to_owned(),
        reason: "it has no id_token".into(),
    })?;
    Ok(TokenResponse {
        id_token,
        refresh_token: raw.refresh_token,
    })
}

/// A JSON error's kind and position without the input it quotes (a token response holds
/// tokens).
fn json_position(e: &serde_json::Error) -> String {
    format!(
        "{:?} error at line {} column {}",
        e.classify(),
        e.line(),
        e.column()
    )
}

fn form_body(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// The OAuth error of a failed response (`status`, `body`) of the request `what` to `url`, or its
/// status when the body is not one. The issuer's `error` and `error_description` are kept on one
/// line, every control character escaped (a newline becomes `\n`): printed as they came, they
/// could forge a line of output or of a log.
pub fn oauth_error(what: &'static str, url: &str, status: reqwest::StatusCode, body: &[u8]) -> AuthError {
    let one_line = |text: &str| escape_controls(text).into_owned();
    match serde_json::from_slice::<RawError>(body) {
        Ok(e) => AuthError::OAuth {
            what,
            url: url.to_owned(),
            error: one_line(&e.error),
            description: e.error_description.as_deref().map(one_line),
        },
        Err(_) => AuthError::OAuth {
            what,
            url: url.to_owned(),
            error: format!("HTTP {status}"),
            description: None,
        },
    }
}

async fn read_body(
    what: &'static str,
    url: &str,
    mut response: reqwest::Response,
) -> Result<(reqwest::StatusCode, Vec<u8>), AuthError> {
    let status = response.status();
    let mut body = Vec::new();
    loop {
        let chunk = response.chunk().await.map_err(|e| AuthError::Http {
            what,
            url: url.to_owned(),
            reason: chain(&e),
        })?;
        let Some(chunk) = chunk else { break };
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(AuthError::BadResponse {
                what,
                url: url.to_owned(),
                reason: format!("the body is larger than {MAX_RESPONSE_BYTES} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok((status, body))
}

/// Reads the PEM certificates of `--ca-file` (bounded).
fn read_ca_file(path: &Path) -> Result<Vec<reqwest::Certificate>, AuthError> {
    use std::io::Read;
    let bad = |reason: String| AuthError::CaFile {
        path: path.to_owned(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
    let mut pem = Vec::new();
    file.take(MAX_CA_FILE_BYTES + 1)
        .read_to_end(&mut pem)
        .map_err(|e| bad(format!("cannot be read: {e}")))?;
    if pem.len() as u64 > MAX_CA_FILE_BYTES {
        return Err(bad(format!("is larger than {MAX_CA_FILE_BYTES} bytes")));
    }
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(format!("is not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad("holds no CERTIFICATE block".into()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An issuer's `error_description` with a newline would print a second line of its choosing
    /// (a forged `ERROR:` in a terminal or a log): it stays on one line, the newline escaped.
    #[test]
    fn the_issuers_error_and_description_stay_on_one_line() {
        let body = br#"{"error":"invalid_grant\r\nX","error_description":"line1\nERROR: forged\r"}"#;
        let err = oauth_error(
            "token",
            "https://i.example/token",
            reqwest::StatusCode::BAD_REQUEST,
            body,
        );
        let text = err.to_string();
        assert!(!text.contains('\n') && !text.contains('\r'), "{text:?}");
        assert!(text.contains(r"(line1\nERROR: forged\r)"), "{text}");
        assert!(text.contains(r"invalid_grant\r\nX"), "{text}");
    }
}

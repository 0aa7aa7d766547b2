//! The loopback redirect target of a login (RFC 8252 section 7.3): a one-shot HTTP listener on
//! `127.0.0.1:<random port>` that waits for `GET /callback?code=…&state=…`, served by hyper's
//! HTTP/1 server one connection at a time, one request per connection.
//!
//! The request head is bounded (8 KiB) and must arrive within a read timeout; every other path
//! gets a 404 and the wait goes on, so a browser's `/favicon.ico` does no harm. A callback with
//! the wrong `state` is answered 400 and ignored (it is not this login's); one with the right
//! `state` and an `error` ends the login with that error. A request hyper cannot parse is
//! answered by hyper (400, or 431 for a head over the bound); one that times out is closed.

use std::{
    convert::Infallible,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{CACHE_CONTROL, CONNECTION, CONTENT_TYPE, HeaderValue, REFERRER_POLICY},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

use super::{error::AuthError, secret::Secret};
use crate::terminal::escape_controls;

/// The largest request head read from the browser.
const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long one connection may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The page shown after a successful sign-in.
pub const SIGNED_IN_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Ichor</title></head>\
<body><h1>Signed in, you can close this tab</h1><p>Return to the terminal.</p></body></html>\n";

/// What one request to the listener is.
#[derive(Debug, PartialEq, Eq)]
pub enum Callback {
    /// Not `GET /callback…`.
    NotCallback,
    /// A callback whose `state` is missing or not this login's.
    StateMismatch,
    /// The issuer refused (`error`, `error_description`).
    Refused {
        /// The OAuth error code.
        error: String,
        /// Its description.
        description: Option<String>,
    },
    /// The authorization code.
    Code(Secret),
}

/// Classifies a request target (`/callback?code=…&state=…`). Pure.
pub fn classify(target: &str, expected_state: &str) -> Callback {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/callback" {
        return Callback::NotCallback;
    }
    let mut state = None;
    let mut code = None;
    let mut error = None;
    let mut description = None;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let slot = match k.as_ref() {
            "state" => &mut state,
            "code" => &mut code,
            "error" => &mut error,
            "error_description" => &mut description,
            _ => continue,
        };
        if slot.is_some() {
            // A repeated parameter is ambiguous: not a callback this login accepts.
            return Callback::StateMismatch;
        }
        *slot = Some(v.into_owned());
    }
    if state.as_deref() != Some(expected_state) {
        return Callback::StateMismatch;
    }
    match (code, error) {
        (_, Some(error)) => Callback::Refused { error, description },
        (Some(code), None) if !code.is_empty() => Callback::Code(Secret::new(code)),
        _ => Callback::Refused {
            error: "invalid_request".into(),
            description: Some("the callback carries neither code nor error".into()),
        },
    }
}

/// A bound listener waiting for the browser.
#[derive(Debug)]
pub struct CallbackServer {
    listener: TcpListener,
    port: u16,
}

impl CallbackServer {
    /// Binds `127.0.0.1:0`.
    ///
    /// # Errors
    /// [`AuthError::Login`] when no port can be bound.
    pub async fn bind() -> Result<Self, AuthError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| AuthError::Login(format!("cannot listen on 127.0.0.1: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| AuthError::Login(format!("cannot read the listening port: {e}")))?
            .port();
        Ok(Self { listener, port })
    }

    /// `http://127.0.0.1:<port>/callback`.
    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Serves requests until the callback of this login arrives, then returns its code.
    ///
    /// # Errors
    /// [`AuthError::Login`] when the issuer sent an error or the listener fails.
    pub async fn wait(self, expected_state: &str) -> Result<Secret, AuthError> {
        loop {
            let (stream, _) = self
                .listener
                .accept()
                .await
                .map_err(|e| AuthError::Login(format!("the loopback listener failed: {e}")))?;
            if let Some(outcome) = handle(stream, expected_state).await {
                return outcome;
            }
        }
    }
}

/// Serves one connection (one request: no keep-alive); `Some` when its request ended the login.
/// A connection that fails (a timeout, a request hyper refuses) ends nothing: the wait goes on.
async fn handle(stream: TcpStream, expected_state: &str) -> Option<Result<Secret, AuthError>> {
    let outcome = Mutex::new(None);
    let service = service_fn(|request: Request<Incoming>| {
        let (response, ended) = answer(&request, expected_state);
        if ended.is_some() {
            *outcome.lock().unwrap_or_else(PoisonError::into_inner) = ended;
        }
        std::future::ready(Ok::<_, Infallible>(response))
    });
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(READ_TIMEOUT)
        .max_buf_size(MAX_REQUEST_HEAD)
        .keep_alive(false)
        .title_case_headers(true)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    outcome.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// The answer to one request, and the end of the login when the request is this login's callback.
fn answer(
    request: &Request<Incoming>,
    expected_state: &str,
) -> (Response<Full<Bytes>>, Option<Result<Secret, AuthError>>) {
    if request.method() != Method::GET {
        return (page(StatusCode::BAD_REQUEST, "Bad request.\n"), None);
    }
    // The target as the request line wrote it: an absolute-form target is not a callback.
    match classify(&request.uri().to_string(), expected_state) {
        Callback::NotCallback => (page(StatusCode::NOT_FOUND, "Not found.\n"), None),
        Callback::StateMismatch => (
            page(
                StatusCode::BAD_REQUEST,
                "This sign-in response does not belong to the running login.\n",
            ),
            None,
        ),
        Callback::Refused { error, description } => {
            // The issuer's words, on one line: a newline in them could forge a line of output.
            let error = escape_controls(&error);
            let detail = description
                .map(|d| format!(" ({})", escape_controls(&d)))
                .unwrap_or_default();
            (
                page(
                    StatusCode::OK,
                    "Sign-in failed; see the terminal for the reason.\n",
                ),
                Some(Err(AuthError::Login(format!(
                    "the issuer answered {error}{detail}"
                )))),
            )
        }
        Callback::Code(code) => (page(StatusCode::OK, SIGNED_IN_PAGE), Some(Ok(code))),
    }
}

/// A page the browser must neither cache nor pass on as a referrer, on a connection that closes.
fn page(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let content_type = if body.starts_with("<!doctype") {
        "text/html; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A bound server waiting for state `s1`, its port, and the wait's result.
    async fn waiting() -> (u16, tokio::task::JoinHandle<Result<Secret, AuthError>>) {
        let server = CallbackServer::bind().await.unwrap();
        let port = server.port;
        assert_eq!(server.redirect_uri(), format!("http://127.0.0.1:{port}/callback"));
        (port, tokio::spawn(async move { server.wait("s1").await }))
    }

    /// Sends `method target` to the server as a browser would.
    async fn send(port: u16, method: reqwest::Method, target: &str) -> reqwest::Response {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        client
            .request(method, format!("http://127.0.0.1:{port}{target}"))
            .send()
            .await
            .unwrap()
    }

    /// Writes `raw` to the server as is and returns the status code of its answer.
    async fn status_of_raw(port: u16, raw: &str) -> u16 {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.write_all(raw.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer.split(' ').nth(1).unwrap().parse().unwrap()
    }

    #[tokio::test]
    async fn the_callback_server_answers_each_request_then_returns_this_logins_code() {
        let (port, wait) = waiting().await;
        let text = "text/plain; charset=utf-8";
        let mismatch = "This sign-in response does not belong to the running login.\n";
        let cases = [
            (reqwest::Method::GET, "/favicon.ico", 404, text, "Not found.\n"),
            (
                reqwest::Method::GET,
                "/callback?code=abc&state=s2",
                400,
                text,
                mismatch,
            ),
            (
                reqwest::Method::POST,
                "/callback?code=abc&state=s1",
                400,
                text,
                "Bad request.\n",
            ),
            (
                reqwest::Method::GET,
                "/callback?code=abc&state=s1",
                200,
                "text/html; charset=utf-8",
                SIGNED_IN_PAGE,
            ),
        ];
        for (method, target, status, content_type, body) in cases {
            let response = send(port, method, target).await;
            assert_eq!(response.status().as_u16(), status, "{target}");
            let headers = response.headers().clone();
            let one = |name: &str| {
                let values: Vec<_> = headers.get_all(name).iter().collect();
                assert_eq!(values.len(), 1, "{name} of {target}");
                values[0].to_str().unwrap().to_owned()
            };
            assert_eq!(one("content-type"), content_type);
            assert_eq!(one("content-length"), body.len().to_string());
            assert_eq!(one("cache-control"), "no-store");
            assert_eq!(one("referrer-policy"), "no-referrer");
            assert_eq!(one("connection"), "close");
            assert_eq!(response.text().await.unwrap(), body);
        }
        assert_eq!(wait.await.unwrap().unwrap().expose(), "abc");
    }

    #[tokio::test]
    async fn a_request_hyper_refuses_is_answered_and_the_wait_goes_on() {
        let (port, wait) = waiting().await;
        assert_eq!(status_of_raw(port, "garbage\r\n\r\n").await, 400);
        let oversized = format!(
            "GET /callback?state=s1 HTTP/1.1\r\nX-Padding: {}\r\n\r\n",
            "x".repeat(MAX_REQUEST_HEAD)
        );
        assert_eq!(status_of_raw(port, &oversized).await, 431);
        let response = send(port, reqwest::Method::GET, "/callback?code=abc&state=s1").await;
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(wait.await.unwrap().unwrap().expose(), "abc");
    }

    #[tokio::test]
    async fn the_callback_server_ends_the_login_with_the_issuers_error() {
        let (port, wait) = waiting().await;
        let target = "/callback?error=access_denied&error_description=no+way&state=s1";
        let response = send(port, reqwest::Method::GET, target).await;
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(
            response.text().await.unwrap(),
            "Sign-in failed; see the terminal for the reason.\n"
        );
        let error = wait.await.unwrap().unwrap_err();
        assert_eq!(
            error.to_string(),
            AuthError::Login("the issuer answered access_denied (no way)".into()).to_string()
        );
    }

    /// The issuer's words in the redirect stay on one line: a newline would forge a line.
    #[tokio::test]
    async fn the_issuers_error_in_the_callback_stays_on_one_line() {
        let (port, wait) = waiting().await;
        let target = "/callback?error=denied%0D%0AX&error_description=line1%0AERROR:+forged&state=s1";
        send(port, reqwest::Method::GET, target).await;
        let error = wait.await.unwrap().unwrap_err().to_string();
        assert!(!error.contains('\n') && !error.contains('\r'), "{error:?}");
        assert!(error.contains(r"denied\r\nX (line1\nERROR: forged)"), "{error}");
    }

    #[test]
    fn returns_the_code_of_a_callback_with_this_logins_state() {
        assert_eq!(
            classify("/callback?code=abc&state=s1", "s1"),
            Callback::Code(Secret::new("abc".into()))
        );
    }

    #[test]
    fn ignores_other_paths_and_foreign_or_repeated_states() {
        assert_eq!(classify("/favicon.ico", "s1"), Callback::NotCallback);
        assert_eq!(
            classify("/callback?code=abc&state=s2", "s1"),
            Callback::StateMismatch
        );
        assert_eq!(classify("/callback?code=abc", "s1"), Callback::StateMismatch);
        assert_eq!(
            classify("/callback?code=abc&state=s1&state=s1", "s1"),
            Callback::StateMismatch
        );
    }

    #[test]
    fn reports_the_issuers_error_and_a_callback_without_code() {
        assert_eq!(
            classify(
                "/callback?error=access_denied&error_description=no+way&state=s1",
                "s1"
            ),
            Callback::Refused {
                error: "access_denied".into(),
                description: Some("no way".into())
            }
        );
        assert!(matches!(
            classify("/callback?state=s1", "s1"),
            Callback::Refused { .. }
        ));
    }
}

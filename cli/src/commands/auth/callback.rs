//! The loopback redirect target of a login (RFC 8252 section 7.3): a one-shot HTTP listener on
//! `127.0.0.1:<random port>` that waits for `GET /callback?code=…&state=…`.
//!
//! Only the request line is read (bounded, with a read timeout); every other path gets a 404
//! and the wait goes on, so a browser's `/favicon.ico` does no harm. A callback with the wrong
//! `state` is answered 400 and ignored (it is not this login's); one with the right `state` and
//! an `error` ends the login with that error.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{error::AuthError, secret::Secret};

/// The largest request head read from the browser.
const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long one connection may take to send its request line.
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

/// Answers one connection; `Some` when it ended the login.
async fn handle(mut stream: TcpStream, expected_state: &str) -> Option<Result<Secret, AuthError>> {
    let target = match tokio::time::timeout(READ_TIMEOUT, read_target(&mut stream)).await {
        Ok(Some(t)) => t,
        _ => {
            let _ = respond(&mut stream, "400 Bad Request", "Bad request.\n").await;
            return None;
        }
    };
    match classify(&target, expected_state) {
        Callback::NotCallback => {
            let _ = respond(&mut stream, "404 Not Found", "Not found.\n").await;
            None
        }
        Callback::StateMismatch => {
            let _ = respond(
                &mut stream,
                "400 Bad Request",
                "This sign-in response does not belong to the running login.\n",
            )
            .await;
            None
        }
        Callback::Refused { error, description } => {
            let _ = respond(
                &mut stream,
                "200 OK",
                "Sign-in failed; see the terminal for the reason.\n",
            )
            .await;
            let detail = description.map(|d| format!(" ({d})")).unwrap_or_default();
            Some(Err(AuthError::Login(format!(
                "the issuer answered {error}{detail}"
            ))))
        }
        Callback::Code(code) => {
            let _ = respond(&mut stream, "200 OK", SIGNED_IN_PAGE).await;
            Some(Ok(code))
        }
    }
}

/// Reads the request head (bounded) and returns the target of a `GET` request line.
async fn read_target(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST_HEAD {
            return None;
        }
    }
    let line_end = head.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&head[..line_end]).ok()?;
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("GET"), Some(target), Some(version), None) if version.starts_with("HTTP/1.") => {
            Some(target.to_owned())
        }
        _ => None,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let content_type = if body.starts_with("<!doctype") {
        "text/html; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         Referrer-Policy: no-referrer\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

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

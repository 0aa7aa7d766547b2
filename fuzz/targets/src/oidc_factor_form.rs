//! `POST /oidc/login/factor` bodies through the real router (form or JSON parsing, the
//! second-factor ticket's verification, the device binding, the limits, the typed code against
//! dave's authenticator app and recovery codes in one conditional write), on a fresh issuer per
//! input. The first byte chooses the body's type (odd: JSON, even: a form); `@FACTOR@` expands
//! to a valid second-factor ticket of dave, `@TOTP@` to his app's current code and `@RECOVERY@`
//! to one of his recovery codes.
//!
//! Properties: no panic; the answer is a success (200, or the 303 of a form) only for a valid
//! ticket and never a 5xx (the in-memory store cannot fail); a success always carries the code
//! in a redirect to the ticket's client.

use axum::http::{Request, header};

use crate::fixtures::{CLI_REDIRECT, expand, send};

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let body = match std::str::from_utf8(rest) {
        Ok(text) => expand(text).into_bytes(),
        Err(_) => rest.to_vec(),
    };
    let content_type = if selector & 1 == 1 {
        "application/json"
    } else {
        "application/x-www-form-urlencoded"
    };
    let request = Request::post("/oidc/login/factor")
        .header(header::CONTENT_TYPE, content_type)
        .body(axum::body::Body::from(body))
        .expect("request");
    let (status, headers, body) = send(request);
    let text = String::from_utf8_lossy(&body);
    assert!(!status.is_server_error(), "status {status}: {text}");
    if status.is_success() || status.is_redirection() {
        let target = if status.is_redirection() {
            headers
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        } else {
            serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["redirect_uri"].as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        assert!(
            target.starts_with(CLI_REDIRECT) && target.contains("code="),
            "{status} without a code for the ticket's client: {text}"
        );
    }
}
